#include "loader/read_planner.h"

#include <algorithm>

#include "loader/slow_cells.h"

namespace stoke {

void ReadPlanner::Plan(Slot* s, std::vector<Read>* slow) const {
  s->num_reads = 0;
  FindCells(s, slow);
  CoalesceCells(s);
}

void ReadPlanner::FindCells(Slot* s, std::vector<Read>* slow) const {
  std::vector<PlannedCell>& cells = s->cells;
  cells.clear();
  std::vector<SampleIndex::Location>& found = s->locations;  // [column][sample]
  found.resize(static_cast<size_t>(s->size) * tensors_.size());
  for (uint32_t c = 0; c < tensors_.size(); ++c) {
    if (tensors_[c].chunked()) continue;
    index_.FindMany(s->rows.data(), static_cast<size_t>(s->size), tensors_[c].index_column,
                    found.data() + static_cast<size_t>(c) * static_cast<size_t>(s->size));
  }
  for (uint32_t i = 0; i < static_cast<uint32_t>(s->size); ++i) {
    for (uint32_t c = 0; c < tensors_.size(); ++c) {
      if (tensors_[c].chunked()) {  // decoded from its column chunk; rows in order, so a chunk's rows go together
        Read r;
        r.offset = static_cast<uint64_t>(s->rows[i]);
        r.members.push_back({.sample = i, .column = c});
        slow->push_back(std::move(r));
        continue;
      }
      const SampleIndex::Location& loc = found[static_cast<size_t>(c) * static_cast<size_t>(s->size) + i];
      // Image pages are read one by one (the decoded-page cache holds fixed-size tensors).
      if (loc.needs_decode || (!tensors_[c].encoded_image && SlowCells::InPageCache(loc))) {
        Read r;
        r.file = loc.file;
        r.offset = loc.offset;
        r.members.push_back({.sample = i, .column = c});
        slow->push_back(std::move(r));
        continue;
      }
      cells.push_back({loc, i, c});
    }
  }
  std::vector<CellOrder>& order = s->cell_order;
  order.resize(cells.size());
  for (size_t k = 0; k < cells.size(); ++k) {
    order[k] = {cells[k].loc.offset, cells[k].loc.file, static_cast<uint32_t>(k)};
  }
  std::sort(order.begin(), order.end());
  // Cells of one cached page are queued together: the page is decoded once for all of them, even
  // when the cache cannot hold every page the batch touches.
  std::stable_sort(slow->begin(), slow->end(), [](const Read& a, const Read& b) {
    return a.file != b.file ? a.file < b.file : a.offset < b.offset;
  });
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

void ReadPlanner::CoalesceCells(Slot* s) const {
  for (const CellOrder& o : s->cell_order) {
    const PlannedCell& cell = s->cells[o.cell];
    const auto& loc = cell.loc;
    const TensorColumn& t = tensors_[cell.column];
    if (o_.split_reads && loc.rows_in_page == 1 && loc.codec == parquet::Codec::kUncompressed &&
        !loc.definition_levels && t.direct() && !t.encoded_image && loc.length > t.in_bytes) {
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
