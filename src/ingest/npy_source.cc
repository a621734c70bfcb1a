// See npy_source.h. Row groups are encoded (read files, compress pages) on a thread pool while the
// calling thread appends finished row groups to the output files in order. At most threads + 1 row
// groups are in memory at once, so memory stays bounded whatever the number of files.
#include "ingest/npy_source.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <deque>
#include <cmath>
#include <future>
#include <random>
#include <set>
#include <unordered_map>

#include "core/buffer_pool.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/random.h"
#include "core/text.h"
#include "core/thread_pool.h"
#include "format/csv.h"
#include "format/npy.h"
#include "format/npz.h"
#include "io/object_storage.h"
#include "io/uri.h"
#include "table/delta_log.h"

namespace stoke {
namespace {

template <typename T>
bool IsReady(const std::future<T>& f) {
  return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

int64_t NowMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}


// A row group holds at most this many rows, so that its OffsetIndex stays under the one million
// list elements that Arrow's Thrift reader accepts.
constexpr int64_t kMaxRowsPerRowGroup = 1'000'000;

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}




bool ParseInt(std::string_view s, int64_t* out) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}
bool ParseDouble(const std::string& s, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}
bool ParseBool(std::string_view s, bool* out) {
  if (s == "true" || s == "True" || s == "TRUE") return *out = true, true;
  if (s == "false" || s == "False" || s == "FALSE") return *out = false, true;
  return false;
}

// Integers become INT32 (INT64 when one does not fit), other numbers DOUBLE, true/false BOOLEAN,
// anything else STRING. An empty cell is null and makes the column OPTIONAL.
ColumnSpec InferLabelColumn(const std::string& name, const std::vector<std::string>& cells) {
  bool all_int = true, all_double = true, all_bool = true, any_null = false;
  int64_t lo = 0, hi = 0;
  for (const auto& c : cells) {
    if (c.empty()) {
      any_null = true;
      continue;
    }
    int64_t i;
    double d;
    bool b;
    if (all_int && ParseInt(c, &i)) {
      lo = std::min(lo, i);
      hi = std::max(hi, i);
    } else {
      all_int = false;
    }
    if (all_double && !ParseDouble(c, &d)) all_double = false;
    if (all_bool && !ParseBool(c, &b)) all_bool = false;
  }
  ColumnSpec spec;
  spec.name = name;
  spec.optional = any_null;
  if (all_int) {
    spec.type = (lo >= INT32_MIN && hi <= INT32_MAX) ? parquet::Type::kInt32 : parquet::Type::kInt64;
  } else if (all_double) {
    spec.type = parquet::Type::kDouble;
  } else if (all_bool) {
    spec.type = parquet::Type::kBoolean;
  } else {
    spec.type = parquet::Type::kByteArray;
    spec.is_string = true;
  }
  return spec;
}

// The cells of source files rows[begin, end) as typed values.
ColumnValues LabelValues(const LabelColumn& col, const std::vector<int64_t>& rows, size_t begin, size_t end) {
  ColumnValues v{EmptyValuesFor(col.spec.type), {}};
  if (col.spec.optional) v.defined.reserve(end - begin);
  for (size_t r = begin; r < end; ++r) {
    const std::string& c = col.cells[static_cast<size_t>(rows[r])];
    if (col.spec.optional) v.defined.push_back(!c.empty());
    if (c.empty()) continue;
    std::visit(
        [&](auto& out) {
          using T = typename std::decay_t<decltype(out)>::value_type;
          if constexpr (std::is_same_v<T, std::string>) {
            out.push_back(c);
          } else if constexpr (std::is_same_v<T, uint8_t>) {
            bool b = false;
            ParseBool(c, &b);
            out.push_back(b);
          } else if constexpr (std::is_same_v<T, double>) {
            double d = 0;
            ParseDouble(c, &d);
            out.push_back(d);
          } else {
            int64_t i = 0;
            ParseInt(c, &i);
            out.push_back(static_cast<T>(i));
          }
        },
        v.values);
  }
  return v;
}

// The arrays of one source file, by tensor column.
Result<std::vector<std::pair<std::string, NpyArray>>> ReadSource(Storage& fs, const std::string& path, bool npz,
                                                                 const std::string& npy_column, AlignedBuffer reuse) {
  if (npz) return ReadNpzFile(fs, path);
  STOKE_ASSIGN_OR_RETURN(auto a, ReadNpyFile(fs, path, std::move(reuse)));
  std::vector<std::pair<std::string, NpyArray>> out;
  out.emplace_back(npy_column, std::move(a));
  return out;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

}  // namespace

Result<NpySources> PlanNpySources(const std::string& dir_uri, const std::string& labels_csv, const std::string& npy_column,
                                  std::string_view what) {
  if (dir_uri.empty()) return Status::InvalidArgument(fmt::format("{}: a source directory is required", what));
  STOKE_ASSIGN_OR_RETURN(StorageLocation where, ResolveStorageLocation(dir_uri));
  Storage& fs = *where.storage;
  const std::string& dir = where.path;
  // Sources, sorted by name (List sorts).
  STOKE_ASSIGN_OR_RETURN(auto entries, fs.List(dir));
  std::vector<DirEntry> sources;
  int npy_count = 0, npz_count = 0;
  for (auto& e : entries) {
    if (e.is_directory) continue;
    if (EndsWith(e.name, ".npy")) ++npy_count;
    else if (EndsWith(e.name, ".npz")) ++npz_count;
    else continue;
    // Names go into the `file` column, a Parquet STRING: UTF-8 only.
    if (!IsValidUtf8(e.name)) {
      return Status::InvalidArgument(fmt::format("{}: source file name '{}' in '{}' is not valid UTF-8 (rename it)", what,
                                                 EscapeNonUtf8(e.name), dir));
    }
    sources.push_back(std::move(e));
  }
  if (sources.empty()) return Status::InvalidArgument(fmt::format("{}: no .npy or .npz files in '{}'", what, dir));
  if (npy_count > 0 && npz_count > 0) {
    return Status::InvalidArgument(fmt::format("{}: '{}' mixes .npy and .npz files; use separate directories", what, dir));
  }
  const bool npz = npz_count > 0;

  // The tensor columns come from the first file; every other file must match them.
  std::vector<ColumnSpec> columns;
  columns.push_back({.name = "id", .type = parquet::Type::kInt64});
  columns.push_back({.name = "file", .type = parquet::Type::kByteArray, .is_string = true});
  std::vector<std::pair<std::string, TensorSpec>> tensors;
  {
    STOKE_ASSIGN_OR_RETURN(auto first, ReadSource(fs, JoinPath(dir, sources[0].name), npz, npy_column, {}));
    for (auto& [name, arr] : first) tensors.push_back({name, TensorSpec{arr.dtype, arr.shape}});
  }
  int64_t sample_bytes = 0;
  for (const auto& t : tensors) sample_bytes += t.second.num_bytes();

  // Labels, joined on the file name.
  std::vector<LabelColumn> labels;
  if (!labels_csv.empty()) {
    STOKE_ASSIGN_OR_RETURN(StorageLocation csv_at, ResolveStorageLocation(labels_csv));
    STOKE_ASSIGN_OR_RETURN(auto text, ReadFileToString(*csv_at.storage, csv_at.path));
    STOKE_ASSIGN_OR_RETURN(auto csv, ParseCsv(text, labels_csv));
    auto file_col = std::find(csv.header.begin(), csv.header.end(), "file");
    if (file_col == csv.header.end()) {
      return Status::InvalidArgument(fmt::format("{}: needs a 'file' column naming each source file", labels_csv));
    }
    const size_t fc = static_cast<size_t>(file_col - csv.header.begin());
    std::unordered_map<std::string, size_t> by_file;
    for (size_t r = 0; r < csv.rows.size(); ++r) {
      if (!by_file.emplace(csv.rows[r][fc], r).second) {
        return Status::InvalidArgument(fmt::format("{}: file '{}' is listed twice", labels_csv, csv.rows[r][fc]));
      }
    }
    std::vector<size_t> csv_row(sources.size());
    for (size_t i = 0; i < sources.size(); ++i) {
      auto it = by_file.find(sources[i].name);
      if (it == by_file.end()) {
        return Status::InvalidArgument(fmt::format("{}: no row for source file '{}'", labels_csv, sources[i].name));
      }
      csv_row[i] = it->second;
    }
    if (by_file.size() > sources.size()) {
      STOKE_LOG(kWarn, "ingest.labels_unused", "csv={} rows_without_file={}", labels_csv, by_file.size() - sources.size());
    }
    for (size_t c = 0; c < csv.header.size(); ++c) {
      if (c == fc) continue;
      const std::string& name = csv.header[c];
      bool clash = name == "id" || name == "file" ||
                   std::any_of(tensors.begin(), tensors.end(), [&](const auto& t) { return t.first == name; });
      if (clash) return Status::InvalidArgument(fmt::format("{}: column '{}' clashes with a column stoke writes", labels_csv, name));
      LabelColumn lc;
      lc.cells.reserve(sources.size());
      for (size_t i = 0; i < sources.size(); ++i) lc.cells.push_back(std::move(csv.rows[csv_row[i]][c]));
      lc.spec = InferLabelColumn(name, lc.cells);
      if (lc.spec.is_string) {
        // Parquet's STRING is UTF-8; other encodings would be misread by every reader.
        for (size_t i = 0; i < lc.cells.size(); ++i) {
          if (!IsValidUtf8(lc.cells[i])) {
            return Status::InvalidArgument(fmt::format("{}: column '{}', row for '{}': not valid UTF-8 (re-save the CSV as UTF-8)",
                                                       labels_csv, name, sources[i].name));
          }
        }
      }
      labels.push_back(std::move(lc));
    }
  }
  for (const auto& l : labels) columns.push_back(l.spec);
  const size_t first_tensor = columns.size();
  for (const auto& [name, spec] : tensors) {
    columns.push_back({.name = name, .type = parquet::Type::kByteArray, .tensor = spec});
  }
  STOKE_RETURN_IF_ERROR(ValidateColumns(columns));

  NpySources out;
  out.storage = std::move(where.storage);
  out.dir = dir;
  out.npz = npz;
  out.npy_column = npy_column;
  out.files = std::move(sources);
  out.labels = std::move(labels);
  out.tensors = std::move(tensors);
  out.columns = std::move(columns);
  out.first_tensor = first_tensor;
  out.sample_bytes = sample_bytes;
  return out;
}

FileSetLayout LayoutForSizes(int64_t sample_bytes, int64_t rows, int64_t row_group_bytes, int64_t target_file_bytes) {
  const int64_t per_sample = std::max<int64_t>(sample_bytes, 1);
  FileSetLayout l;
  // A row group never exceeds the file it belongs to.
  l.rows_per_group = std::clamp<int64_t>(std::min(row_group_bytes, target_file_bytes) / per_sample, 1, kMaxRowsPerRowGroup);
  l.rows_per_file = std::max<int64_t>(1, target_file_bytes / per_sample / l.rows_per_group) * l.rows_per_group;
  return l;
}

NpySources WithoutLabel(const NpySources& sources, size_t label) {
  NpySources s = sources;
  s.labels.erase(s.labels.begin() + static_cast<std::ptrdiff_t>(label));
  s.columns.erase(s.columns.begin() + 2 + static_cast<std::ptrdiff_t>(label));
  s.first_tensor -= 1;
  return s;
}

Result<std::vector<WrittenFile>> WriteNpyRows(const NpySources& s, const std::vector<int64_t>& rows,
                                              const std::vector<int64_t>& ids, const FileSetLayout& layout,
                                              const WriterOptions& options, size_t threads, ProgressBar* progress) {
  Storage& fs = layout.storage != nullptr ? *layout.storage : LocalStorage();
  Storage& src = *s.storage;
  if (ids.size() != rows.size()) return Status::InvalidArgument("WriteNpyRows: one id per row needed");
  if (layout.rows_per_file <= 0 || layout.rows_per_group <= 0) return Status::InvalidArgument("bad file layout");
  if (layout.single_file.empty()) STOKE_RETURN_IF_ERROR(fs.CreateDirectories(layout.dir));
  const int64_t n = static_cast<int64_t>(rows.size());
  const int64_t per_file = layout.single_file.empty() ? layout.rows_per_file : std::max<int64_t>(n, 1);
  struct Group {
    int64_t begin, end;  // positions in `rows`
    size_t file;
  };
  std::vector<Group> groups;
  for (int64_t f = 0; f * per_file < n; ++f) {
    for (int64_t b = f * per_file; b < std::min(n, (f + 1) * per_file); b += layout.rows_per_group) {
      groups.push_back({b, std::min({b + layout.rows_per_group, (f + 1) * per_file, n}), static_cast<size_t>(f)});
    }
  }
  std::vector<WrittenFile> written;

  // Page buffers circulate between the encoders and the writer, and each task reads its files into
  // one reused array buffer: in steady state no memory is freshly faulted in.
  BufferPool page_buffers;
  // Sources on an object store: every file costs a request of tens of milliseconds, so each encoding
  // task fetches its next kRemoteBatch .npy objects at once (one whole-object GET each, the size
  // known from the listing) on a shared pool of kRemoteFetches threads, then decodes them from
  // memory. Memory: kRemoteBatch sources per encoding task.
  constexpr int64_t kRemoteBatch = 64;
  constexpr size_t kRemoteFetches = 32;
  auto* objects = s.npz ? nullptr : dynamic_cast<ObjectStorage*>(s.storage.get());
  std::unique_ptr<ThreadPool> fetch_pool;
  if (objects != nullptr) fetch_pool = std::make_unique<ThreadPool>(kRemoteFetches);
  auto encode = [&](const Group& g) -> Result<EncodedRowGroup> {
    RowGroupEncoder enc(s.columns, options, &page_buffers);
    AlignedBuffer reuse;
    std::vector<int64_t> row_ids;
    std::vector<std::string> names;
    std::vector<AlignedBuffer> fetched;  // objects: the raw .npy bytes of rows [fetched_from, +size)
    int64_t fetched_from = g.begin;
    for (int64_t k = g.begin; k < g.end; ++k) {
      const size_t i = static_cast<size_t>(rows[k]);
      const std::string path = JoinPath(s.dir, s.files[i].name);
      if (objects != nullptr && k - fetched_from >= static_cast<int64_t>(fetched.size())) {
        fetched_from = k;
        fetched.clear();
        fetched.resize(static_cast<size_t>(std::min(kRemoteBatch, g.end - k)));
        STOKE_RETURN_IF_ERROR(ParallelFor(*fetch_pool, fetched.size(), [&](size_t j) -> Status {
          const DirEntry& e = s.files[static_cast<size_t>(rows[k + static_cast<int64_t>(j)])];
          fetched[j].Resize(e.size);
          return objects->ReadRanges(JoinPath(s.dir, e.name), {ByteRangeRead{0, fetched[j].mutable_view()}})[0];
        }));
      }
      std::vector<std::pair<std::string, NpyArray>> arrays;
      if (objects != nullptr) {
        STOKE_ASSIGN_OR_RETURN(NpyArray a, DecodeNpy(fetched[static_cast<size_t>(k - fetched_from)].view(), path));
        arrays.emplace_back(s.npy_column, std::move(a));
      } else {
        STOKE_ASSIGN_OR_RETURN(arrays, ReadSource(src, path, s.npz, s.npy_column, std::move(reuse)));
      }
      if (arrays.size() != s.tensors.size()) {
        return Status::InvalidArgument(fmt::format("{}: holds {} arrays, '{}' held {}", path, arrays.size(),
                                                   s.files[0].name, s.tensors.size()));
      }
      uint64_t bytes = 0;
      for (size_t t = 0; t < s.tensors.size(); ++t) {
        const auto& [name, arr] = arrays[t];
        const auto& [want_name, want] = s.tensors[t];
        if (name != want_name || arr.dtype != want.dtype || arr.shape != want.shape) {
          return Status::InvalidArgument(fmt::format("{}: array '{}' is {}{}, but '{}' set the column '{}' to {}{}", path, name,
                                                     DTypeName(arr.dtype), ShapeString(arr.shape), s.files[0].name,
                                                     want_name, DTypeName(want.dtype), ShapeString(want.shape)));
        }
        STOKE_RETURN_IF_ERROR(enc.AppendTensor(s.first_tensor + t, arr.data.view()));
        bytes += arr.data.size();
      }
      row_ids.push_back(ids[k]);
      names.push_back(s.files[i].name);
      if (progress != nullptr) progress->Add(1, bytes);
      if (!s.npz && objects == nullptr) reuse = std::move(arrays[0].second.data);
    }
    STOKE_RETURN_IF_ERROR(enc.SetScalars(0, ColumnValues{std::move(row_ids), {}}));
    STOKE_RETURN_IF_ERROR(enc.SetScalars(1, ColumnValues{std::move(names), {}}));
    for (size_t l = 0; l < s.labels.size(); ++l) {
      STOKE_RETURN_IF_ERROR(enc.SetScalars(2 + l, LabelValues(s.labels[l], rows, static_cast<size_t>(g.begin),
                                                              static_cast<size_t>(g.end))));
    }
    return enc.Finish();
  };

  ThreadPool pool(threads);
  const size_t window = pool.size() + 1;
  std::vector<std::future<Result<EncodedRowGroup>>> pending(groups.size());
  size_t submitted = 0;
  auto submit_up_to = [&](size_t limit) {
    for (; submitted < std::min(limit, groups.size()); ++submitted) {
      auto task = std::make_shared<std::packaged_task<Result<EncodedRowGroup>()>>(
          [&encode, g = groups[submitted]] { return encode(g); });
      pending[submitted] = task->get_future();
      pool.Submit([task] { (*task)(); });
    }
  };

  std::unique_ptr<ParquetFileWriter> writer;
  std::string final_path;
  // Finishing a file (footer, flush, fdatasync, rename; on object stores the upload) runs on its
  // own threads while this one goes on with the next file: with one file per sample, finishing is
  // most of the work, and fdatasyncs in flight together cost about one. At most kMaxFinishing
  // files wait to be finished (each holds at most its staging buffer).
  const size_t finish_threads = fs.CreateIsAtomic() ? 16 : 8;
  const size_t kMaxFinishing = 2 * finish_threads;
  ThreadPool finish_pool(finish_threads);
  struct Finishing {
    std::string tmp, final;
    std::future<Result<WrittenFile>> done;
  };
  std::deque<Finishing> finishing;
  std::vector<std::string> cleanup;  // on failure: files of this call that may exist
  Status finish_status;
  auto collect_oldest = [&] {
    Finishing f = std::move(finishing.front());
    finishing.pop_front();
    Result<WrittenFile> r = f.done.get();
    if (r.ok()) {
      STOKE_LOG(kInfo, "ingest.file_written", "path={} rows={} bytes={}", r->path, r->rows, r->bytes);
      written.push_back(std::move(*r));
    } else {
      if (finish_status.ok()) finish_status = r.status();
      cleanup.push_back(f.tmp);
      cleanup.push_back(f.final);
    }
  };
  auto finish_file = [&]() -> Status {
    if (!writer) return Status::OK();
    auto task = std::make_shared<std::packaged_task<Result<WrittenFile>()>>(
        [&fs, &s, w = std::shared_ptr<ParquetFileWriter>(std::move(writer)), final_path]() -> Result<WrittenFile> {
          STOKE_RETURN_IF_ERROR(w->Close());
          if (w->path() != final_path) STOKE_RETURN_IF_ERROR(fs.Rename(w->path(), final_path));
          return WrittenFile{final_path, w->num_rows(), w->bytes_written(),
                             delta::StatsJsonFromFooter(w->metadata(), s.columns), NowMillis()};
        });
    finishing.push_back({InProgressPath(fs, final_path), final_path, task->get_future()});
    finish_pool.Submit([task] { (*task)(); });
    while (finishing.size() > kMaxFinishing || (!finishing.empty() && IsReady(finishing.front().done))) collect_oldest();
    return finish_status;
  };

  Status status;
  size_t current_file = SIZE_MAX;
  for (size_t i = 0; i < groups.size() && status.ok(); ++i) {
    submit_up_to(i + window);
    Result<EncodedRowGroup> rg = pending[i].get();
    if (!rg.ok()) {
      status = rg.status();
      break;
    }
    if (groups[i].file != current_file) {
      status = finish_file();
      if (!status.ok()) break;
      current_file = groups[i].file;
      final_path = !layout.single_file.empty()
                       ? layout.single_file
                       : JoinPath(layout.dir, fmt::format("part-{:05}-{}.parquet", current_file, RandomUuid()));
      // Written under a temporary name and renamed when complete (or, on object stores, visible
      // only once complete): a crash never leaves a truncated file under a final name.
      std::string tmp = InProgressPath(fs, final_path);
      auto w = ParquetFileWriter::Create(fs, tmp, s.columns, options);
      if (!w.ok()) {
        status = w.status();
        break;
      }
      writer = std::move(*w);
    }
    status = writer->WriteRowGroup(std::move(*rg), &page_buffers);
  }
  if (status.ok()) status = finish_file();
  // Tasks reference this frame: wait for every submitted one before returning.
  for (size_t i = 0; i < submitted; ++i) {
    if (pending[i].valid()) pending[i].wait();
  }
  while (!finishing.empty()) collect_oldest();
  if (status.ok()) status = finish_status;
  if (!status.ok()) {
    if (writer) cleanup.push_back(writer->path());
    writer.reset();
    for (const auto& p : cleanup) (void)fs.Delete(p);
    for (const auto& w : written) (void)fs.Delete(w.path);
    return status;
  }
  // The renames published the files; a power loss could still undo them until their directories
  // are synced, and a commit must never refer to a file that may vanish.
  std::set<std::string> dirs;
  for (const auto& w : written) dirs.insert(ParentPath(w.path));
  for (const auto& d : dirs) {
    status = fs.SyncDirectory(d);
    if (!status.ok()) {
      for (const auto& w : written) (void)fs.Delete(w.path);
      return status;
    }
  }
  return written;
}

}  // namespace stoke
