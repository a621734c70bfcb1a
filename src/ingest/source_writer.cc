// See source_writer.h. At most threads + 1 row groups are in memory at once, so memory stays
// bounded whatever the number of files.
#include "ingest/source_writer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <future>
#include <optional>
#include <set>

#include "core/buffer_pool.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/text.h"
#include "core/thread_pool.h"
#include "table/delta_log.h"

namespace stoke {
namespace {

template <typename T>
bool IsReady(const std::future<T>& f) {
  return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

// A row group holds at most this many rows, so that its OffsetIndex stays under the one million
// list elements that Arrow's Thrift reader accepts.
constexpr int64_t kMaxRowsPerRowGroup = 1'000'000;
// Whole files written by one task (see write_whole_files): at most this many, and few enough that
// each thread gets about kRunsPerThread runs (so that a small call still spreads over the threads).
constexpr size_t kMaxFilesPerRun = 16;
constexpr size_t kRunsPerThread = 64;

}  // namespace

FileSetLayout LayoutForSizes(int64_t sample_bytes, int64_t rows, int64_t row_group_bytes, int64_t target_file_bytes) {
  const int64_t per_sample = std::max<int64_t>(sample_bytes, 1);
  FileSetLayout l;
  // A row group never exceeds the file it belongs to.
  l.rows_per_group = std::clamp<int64_t>(std::min(row_group_bytes, target_file_bytes) / per_sample, 1, kMaxRowsPerRowGroup);
  l.rows_per_file = std::max<int64_t>(1, target_file_bytes / per_sample / l.rows_per_group) * l.rows_per_group;
  return l;
}

namespace {

// Sets the columns stoke writes itself for `items`: id (`ids`), file, source_location and source_version
// (where the plan records locations), index (where files hold several samples) and the labels.
Status SetRowColumns(const SourceSet& s, std::span<const SourceItem> items, std::vector<int64_t> ids,
                     RowGroupEncoder& enc) {
  std::vector<std::string> names, locations, versions;
  std::vector<int64_t> index;
  names.reserve(items.size());
  for (const SourceItem& item : items) {
    names.push_back(s.files[item.file].name);
    if (s.has_locations) {
      locations.push_back(s.FileLocation(item.file));
      versions.push_back(s.FileVersion(item.file));
    }
    if (s.has_index) index.push_back(item.index);
  }
  STOKE_RETURN_IF_ERROR(enc.SetScalars(0, ColumnValues{std::move(ids), {}}));
  STOKE_RETURN_IF_ERROR(enc.SetScalars(1, ColumnValues{std::move(names), {}}));
  if (s.has_locations) {
    STOKE_RETURN_IF_ERROR(enc.SetScalars(2, ColumnValues{std::move(locations), {}}));
    STOKE_RETURN_IF_ERROR(enc.SetScalars(3, ColumnValues{std::move(versions), {}}));
  }
  if (s.has_index) STOKE_RETURN_IF_ERROR(enc.SetScalars(s.index_column(), ColumnValues{std::move(index), {}}));
  for (size_t l = 0; l < s.labels.size(); ++l) {
    STOKE_RETURN_IF_ERROR(enc.SetScalars(s.first_label_column() + l, LabelValues(s.labels[l], items)));
  }
  return Status::OK();
}

}  // namespace

Result<std::vector<WrittenFile>> WriteSourceRows(const SourceSet& s, const std::vector<int64_t>& rows,
                                                 const std::vector<int64_t>& ids, const FileSetLayout& layout,
                                                 const WriterOptions& base_options, size_t threads, ProgressBar* progress) {
  Storage& fs = layout.storage != nullptr ? *layout.storage : LocalStorage();
  if (ids.size() != rows.size()) return Status::InvalidArgument("WriteSourceRows: one id per row needed");
  if (layout.rows_per_file <= 0 || layout.rows_per_group <= 0) return Status::InvalidArgument("bad file layout");
  const std::string out_dir = layout.single_file.empty() ? layout.dir : ParentPath(layout.single_file);
  if (!out_dir.empty()) STOKE_RETURN_IF_ERROR(fs.CreateDirectories(out_dir));
  WriterOptions options = base_options;
  for (const auto& [key, value] : s.metadata) options.key_value_metadata.push_back({key, value});
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
  written.reserve(groups.empty() ? 0 : groups.back().file + 1);  // no doubling at 650,000 files

  // Page buffers circulate between the encoders and the writer: in steady state no memory is
  // freshly faulted in.
  BufferPool page_buffers;
  auto encode = [&](const Group& g) -> Result<EncodedRowGroup> {
    RowGroupEncoder enc(s.columns, options, &page_buffers);
    enc.ReserveRows(g.end - g.begin);
    std::vector<SourceItem> items;
    items.reserve(static_cast<size_t>(g.end - g.begin));
    for (int64_t k = g.begin; k < g.end; ++k) items.push_back(s.item(rows[static_cast<size_t>(k)]));
    STOKE_ASSIGN_OR_RETURN(uint64_t bytes, s.reader->ReadRows(s, items, enc));
    STOKE_RETURN_IF_ERROR(SetRowColumns(s, items, std::vector<int64_t>(ids.begin() + g.begin, ids.begin() + g.end), enc));
    if (progress != nullptr) progress->Add(items.size(), bytes);
    return enc.Finish();
  };

  ThreadPool pool(threads);
  const bool in_place = layout.write_in_place && layout.single_file.empty();
  // Files of one row group each written in place on a local disk (a table of one sample per file)
  // take write_whole_files below; everything else the loop over row groups at the end.
  const bool whole_files = in_place && !fs.remote() && per_file <= layout.rows_per_group;

  std::unique_ptr<ParquetFileWriter> writer;
  std::string final_path;
  // Finishing a file (footer, flush, fdatasync, rename; on object stores the upload) runs on its
  // own threads while this one goes on with the next file: with one file per sample, finishing is
  // most of the work, and fdatasyncs in flight together cost about one. At most kMaxFinishing
  // files wait to be finished (each holds at most its staging buffer).
  const size_t finish_threads = fs.remote() ? 16 : 8;
  const size_t kMaxFinishing = 2 * finish_threads;
  std::optional<ThreadPool> finish_pool;  // only for the loop over row groups
  if (!whole_files) finish_pool.emplace(finish_threads);
  struct Finishing {
    std::string tmp, final;
    std::future<Result<WrittenFile>> done;
  };
  std::deque<Finishing> finishing;
  std::vector<std::string> cleanup;  // on failure: files of this call that may exist
  Status finish_status;
  auto log_written = [](const WrittenFile& w) {
    STOKE_LOG(kInfo, "ingest.file_written", "path={} rows={} bytes={}", w.path, w.rows, w.bytes);
  };
  auto collect_oldest = [&] {
    Finishing f = std::move(finishing.front());
    finishing.pop_front();
    Result<WrittenFile> r = f.done.get();
    if (r.ok()) {
      log_written(*r);
      written.push_back(std::move(*r));
    } else {
      if (finish_status.ok()) finish_status = r.status();
      cleanup.push_back(f.tmp);
      cleanup.push_back(f.final);
    }
  };
  WriterOptions file_options = options;
  if (in_place) file_options.sync_on_close = false;
  auto temporary_path = [&](const std::string& path) { return in_place ? path : InProgressPath(fs, path); };
  const bool index_pages = !layout.index_root.empty() && !layout.index_columns.empty();
  // What the commit and the sample index need of a closed file, now at `final_path`.
  auto describe = [&s, &layout, index_pages](const ParquetFileWriter& w, const std::string& final_path) {
    WrittenFile out{final_path, w.num_rows(), w.bytes_written(), delta::StatsJsonFromFooter(w.metadata(), s.columns),
                    EpochMillis(), {}};
    // The path under the table root (layout.dir is the root or a partition directory in it).
    const std::string& root = layout.index_root;
    const bool under_root = final_path.size() > root.size() && final_path.compare(0, root.size(), root) == 0 &&
                            (root.back() == '/' || final_path[root.size()] == '/');
    if (index_pages && under_root) {
      auto pages = SampleIndex::PagesOfWrittenFile(final_path.substr(root.size() + (root.back() == '/' ? 0 : 1)),
                                                   w.bytes_written(), w.metadata(), w.offset_indexes(),
                                                   layout.index_columns);
      if (pages.ok()) out.pages = std::move(*pages);
    }
    return out;
  };
  auto part_path = [&](size_t file) {
    return JoinPath(layout.dir, fmt::format("part-{:05}-{}.parquet", file, RandomUuid()));
  };
  auto finish_file = [&]() -> Status {
    if (!writer) return Status::OK();
    auto task = std::make_shared<std::packaged_task<Result<WrittenFile>()>>(
        [&fs, &describe, w = std::shared_ptr<ParquetFileWriter>(std::move(writer)), final_path]() -> Result<WrittenFile> {
          STOKE_RETURN_IF_ERROR(w->Close());
          if (w->path() != final_path) STOKE_RETURN_IF_ERROR(fs.Rename(w->path(), final_path));
          return describe(*w, final_path);
        });
    finishing.push_back({temporary_path(final_path), final_path, task->get_future()});
    finish_pool->Submit([task] { (*task)(); });
    while (finishing.size() > kMaxFinishing || (!finishing.empty() && IsReady(finishing.front().done))) collect_oldest();
    return finish_status;
  };

  // Files of one row group each written in place on a local disk: each task encodes, writes and
  // closes a run of whole files, so the files are created on every encoding thread (not all on this
  // one, which creating them kept busy), and work changes threads once per run instead of three
  // times per file. Elsewhere (object stores, where a file's Close is its upload, which wants many in
  // flight; files of several row groups; renamed files) the row groups come back here in order and
  // files are finished on the finishing threads.
  auto write_whole_files = [&]() -> Status {
    struct Run {
      std::vector<WrittenFile> files;  // written, in order (deleted by the caller on failure)
      Status status;
    };
    const size_t files = groups.size();
    const size_t per_run = std::clamp<size_t>(files / (pool.size() * kRunsPerThread), 1, kMaxFilesPerRun);
    const size_t runs = (files + per_run - 1) / per_run;
    auto write_run = [&](size_t r) {
      Run out;
      for (size_t i = r * per_run; i < std::min(files, (r + 1) * per_run) && out.status.ok(); ++i) {
        Result<EncodedRowGroup> rg = encode(groups[i]);
        if (!rg.ok()) {
          out.status = rg.status();
          break;
        }
        const std::string path = part_path(groups[i].file);
        auto w = ParquetFileWriter::Create(fs, path, s.columns, file_options);
        out.status = w.ok() ? (*w)->WriteRowGroup(std::move(*rg), &page_buffers) : w.status();
        if (out.status.ok()) out.status = (*w)->Close();
        if (out.status.ok()) {
          out.files.push_back(describe(**w, path));
        } else {
          (void)fs.Delete(path);
        }
      }
      return out;
    };
    // After a failure, the runs already started are still collected: their files are deleted.
    OrderedTasks<Run> in_order(pool, runs, 2 * pool.size(), write_run);
    Status status;
    while (in_order.HasNext()) {
      Run run = in_order.Next();
      for (auto& f : run.files) {
        log_written(f);
        written.push_back(std::move(f));
      }
      if (status.ok() && !run.status.ok()) {
        status = run.status;
        in_order.Stop();
      }
    }
    return status;
  };

  Status status;
  size_t current_file = SIZE_MAX;
  if (whole_files) status = write_whole_files();
  // At most threads + 1 row groups encoded and not yet written (the one waited for included).
  OrderedTasks<Result<EncodedRowGroup>> encoded(pool, whole_files ? 0 : groups.size(), pool.size() + 1,
                                               [&encode, &groups](size_t i) { return encode(groups[i]); });
  for (size_t i = 0; !whole_files && i < groups.size() && status.ok(); ++i) {
    Result<EncodedRowGroup> rg = encoded.Next();
    if (!rg.ok()) {
      status = rg.status();
      break;
    }
    if (groups[i].file != current_file) {
      status = finish_file();
      if (!status.ok()) break;
      current_file = groups[i].file;
      final_path = !layout.single_file.empty() ? layout.single_file : part_path(current_file);
      // Written under a temporary name and renamed when complete (or, on object stores, visible
      // only once complete): a crash never leaves a truncated file under a final name. In place:
      // nothing refers to the name until a commit, made after every file is durable.
      std::string tmp = temporary_path(final_path);
      auto w = ParquetFileWriter::Create(fs, tmp, s.columns, file_options);
      if (!w.ok()) {
        status = w.status();
        break;
      }
      writer = std::move(*w);
    }
    status = writer->WriteRowGroup(std::move(*rg), &page_buffers);
  }
  if (status.ok()) status = finish_file();
  encoded.Stop();  // after a failure: the encodes started are waited for when `encoded` goes
  while (!finishing.empty()) collect_oldest();
  if (status.ok()) status = finish_status;
  if (!status.ok()) {
    if (writer) cleanup.push_back(writer->path());
    writer.reset();
    for (const auto& w : written) cleanup.push_back(w.path);
    DeleteLeftovers(fs, cleanup, "a failed write's files");
    return status;
  }
  std::vector<std::string> paths;  // the written files', for the syncs and a clean-up after them
  paths.reserve(written.size());
  for (const auto& w : written) paths.push_back(w.path);
  // The files' data, when each was not synced at its close.
  if (in_place && !written.empty()) {
    status = fs.SyncFiles(paths);
    if (!status.ok()) {
      DeleteLeftovers(fs, paths, "a failed write's files");
      return status;
    }
  }
  // The renames (or creations) published the files; a power loss could still undo them until their
  // directories are synced, and a commit must never refer to a file that may vanish.
  std::set<std::string> dirs;
  for (const auto& w : written) dirs.insert(ParentPath(w.path));
  for (const auto& d : dirs) {
    status = fs.SyncDirectory(d);
    if (!status.ok()) {
      DeleteLeftovers(fs, paths, "a failed write's files");
      return status;
    }
  }
  return written;
}

}  // namespace stoke
