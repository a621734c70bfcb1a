#include "loader/read_planner.h"

#include <algorithm>

#include "loader/slow_cells.h"

namespace stoke {

void ReadPlanner::Plan(Slot* s) const {
  s->num_reads = 0;
  FindCells(s);
  CutSlowRuns(s);
  CoalesceCells(s);
}

void ReadPlanner::FindCells(Slot* s) const {
  std::vector<PlannedCell>& cells = s->cells;
  cells.clear();
  s->slow_cells.clear();
  s->mapped_copies.clear();
  std::vector<SampleIndex::Location>& found = s->locations;  // [column][sample]
  found.resize(static_cast<size_t>(s->size) * tensors_.size());
  for (uint32_t c = 0; c < tensors_.size(); ++c) {
    if (tensors_[c].chunked()) continue;
    index_.FindMany(s->rows.data(), static_cast<size_t>(s->size), tensors_[c].index_column,
                    found.data() + static_cast<size_t>(c) * static_cast<size_t>(s->size));
  }
  for (uint32_t i = 0; i < static_cast<uint32_t>(s->size); ++i) {
    for (uint32_t c = 0; c < tensors_.size(); ++c) {
      if (tensors_[c].chunked()) {  // decoded from its page or column chunk, found by the row
        s->slow_cells.push_back({static_cast<uint64_t>(s->rows[i]), SlowCell::kChunkedFile, i, c});
        continue;
      }
      const SampleIndex::Location& loc = found[static_cast<size_t>(c) * static_cast<size_t>(s->size) + i];
      // Image pages are read one by one (the decoded-page cache holds fixed-size tensors).
      if (loc.needs_decode || (!tensors_[c].encoded_image && SlowCells::InPageCache(loc))) {
        s->slow_cells.push_back({loc.offset, loc.file, i, c});
        continue;
      }
      if (AddMappedCopy(s, loc, i, c)) continue;
      cells.push_back({loc, i, c});
    }
  }
  std::vector<CellOrder>& order = s->cell_order;
  order.resize(cells.size());
  for (size_t k = 0; k < cells.size(); ++k) {
    order[k] = {cells[k].loc.offset, cells[k].loc.file, static_cast<uint32_t>(k)};
  }
  std::sort(order.begin(), order.end());
}

std::pair<uint64_t, uint64_t> ReadPlanner::RunKey(const SlowCell& c) const {
  if (c.file != SlowCell::kChunkedFile) return {c.file, c.offset};
  const auto& units = o_.decode_units;
  if (units.empty()) return {c.file, ~uint64_t{0} - c.sample};  // its row's cells alone
  const auto unit = std::upper_bound(units.begin(), units.end(), static_cast<int64_t>(c.offset)) - units.begin();
  return {c.file, static_cast<uint64_t>(unit)};
}

void ReadPlanner::CutSlowRuns(Slot* s) const {
  std::vector<SlowCell>& cells = s->slow_cells;
  std::stable_sort(cells.begin(), cells.end(), [](const SlowCell& a, const SlowCell& b) {
    return a.file != b.file ? a.file < b.file : a.offset < b.offset;
  });
  s->slow_runs.clear();
  for (size_t begin = 0; begin < cells.size();) {
    const auto key = RunKey(cells[begin]);
    size_t end = begin + 1;
    while (end < cells.size() && end - begin < o_.max_run_cells && RunKey(cells[end]) == key) ++end;
    s->slow_runs.push_back({s, static_cast<uint32_t>(begin), static_cast<uint32_t>(end)});
    begin = end;
  }
}

namespace {

// The slot's next read (reusing its vector's entries from batch to batch).
Read& NewRead(Slot* s, uint32_t file, uint64_t offset, uint32_t length) {
  if (s->num_reads == s->reads.size()) s->reads.emplace_back();
  Read& r = s->reads[s->num_reads++];
  r.Reset(s, file, offset, length);
  return r;
}

// A member for `cell`'s page at `at` within its read.
ReadMember MemberOf(const PlannedCell& cell, uint32_t at) {
  const SampleIndex::Location& loc = cell.loc;
  return {cell.sample, cell.column, at, loc.length, loc.row_in_page, loc.rows_in_page, loc.codec, loc.definition_levels};
}

}  // namespace

bool ReadPlanner::Splittable(const SampleIndex::Location& loc, const TensorColumn& t) {
  return loc.rows_in_page == 1 && loc.codec == parquet::Codec::kUncompressed && !loc.definition_levels && t.direct() &&
         !t.encoded_image && loc.length > t.in_bytes;
}

bool ReadPlanner::AddMappedCopy(Slot* s, const SampleIndex::Location& loc, uint32_t sample, uint32_t column) const {
  const TensorColumn& t = tensors_[column];
  if (o_.mapped == nullptr || !Splittable(loc, t) || loc.length - t.in_bytes > kMaxReadNowHead) return false;
  const MappedRange from = o_.mapped->Find(loc.file, loc.offset, static_cast<uint32_t>(loc.length));
  if (from.map == nullptr) return false;
  s->mapped_copies.push_back({.from = from,
                              .tail = s->tensors[column].data() + static_cast<size_t>(sample) * t.out_bytes,
                              .length = static_cast<uint32_t>(loc.length),
                              .head_length = static_cast<uint32_t>(loc.length - t.in_bytes),
                              .sample = sample,
                              .column = column});
  return true;
}

void ReadPlanner::CoalesceCells(Slot* s) const {
  for (const CellOrder& o : s->cell_order) {
    const PlannedCell& cell = s->cells[o.cell];
    const auto& loc = cell.loc;
    const TensorColumn& t = tensors_[cell.column];
    if (o_.split_reads && Splittable(loc, t)) {
      Read& r = NewRead(s, loc.file, loc.offset, loc.length);
      r.tail = s->tensors[cell.column].data() + static_cast<size_t>(cell.sample) * t.out_bytes;
      r.head_length = static_cast<uint32_t>(loc.length - t.in_bytes);
      r.members.push_back(MemberOf(cell, 0));
      continue;
    }
    Read* last = s->num_reads == 0 || s->reads[s->num_reads - 1].tail != nullptr ? nullptr : &s->reads[s->num_reads - 1];
    // Coalesce with the previous read when this page is the same page (another row of a packed page),
    // or starts where it ends (local files) or at most max_gap after (object stores, where a request
    // costs more than reading the gap), and the merged read stays within max_read.
    if (last != nullptr && last->file == loc.file && o_.max_read > 0) {
      const uint64_t end = last->offset + last->length;
      const ReadMember& prev = last->members.back();
      const uint64_t prev_page = last->offset + prev.offset;
      if (loc.offset == prev_page && loc.length == prev.length) {
        last->members.push_back(MemberOf(cell, prev.offset));
        continue;
      }
      // Open keeps max_read <= kMaxCoalesceBytes, so the merged length and offsets fit 32 bits.
      if (loc.offset >= end && loc.offset - end <= o_.max_gap && loc.offset + loc.length - last->offset <= o_.max_read) {
        const uint32_t at = static_cast<uint32_t>(loc.offset - last->offset);
        last->members.push_back(MemberOf(cell, at));
        last->length = at + loc.length;
        continue;
      }
    }
    Read& r = NewRead(s, loc.file, loc.offset, loc.length);
    r.members.push_back(MemberOf(cell, 0));
  }
}

}  // namespace stoke
