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
// Whole files written by one task (see SourceRowWriter::WriteWholeFiles): at most this many, and few enough that
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

// WriteSourceRows as its stages: the plan of row groups and files, the encoding of a row group, and
// two ways of writing them (whole files on the encoding threads, or row groups in order into files
// finished on threads of their own), then the syncs that make the files durable.
class SourceRowWriter {
 public:
  SourceRowWriter(const SourceSet& s, const std::vector<int64_t>& rows, const std::vector<int64_t>& ids,
                  const FileSetLayout& layout, const WriterOptions& base_options, size_t threads, ProgressBar* progress)
      : s_(s), rows_(rows), ids_(ids), layout_(layout), progress_(progress),
        fs_(layout.storage != nullptr ? *layout.storage : LocalStorage()), pool_(threads) {
    options_ = base_options;
    for (const auto& [key, value] : s.metadata) options_.key_value_metadata.push_back({key, value});
    in_place_ = layout.write_in_place && layout.single_file.empty();
    file_options_ = options_;
    if (in_place_) file_options_.sync_on_close = false;
    index_pages_ = !layout.index_root.empty() && !layout.index_columns.empty();
  }

  Result<std::vector<WrittenFile>> Run() {
    STOKE_RETURN_IF_ERROR(Plan());
    // Files of one row group each written in place on a local disk (a table of one sample per file)
    // take WriteWholeFiles; everything else WriteInOrder.
    const bool whole_files = in_place_ && !fs_.remote() && per_file_ <= layout_.rows_per_group;
    Status status = whole_files ? WriteWholeFiles() : WriteInOrder();
    if (!status.ok()) {
      for (const auto& w : written_) cleanup_.push_back(w.path);
      DeleteLeftovers(fs_, cleanup_, "a failed write's files");
      return status;
    }
    STOKE_RETURN_IF_ERROR(MakeDurable());
    return std::move(written_);
  }

 private:
  struct Group {
    int64_t begin, end;  // positions in `rows`
    size_t file;
  };
  struct Finishing {
    std::string tmp, final;
    std::future<Result<WrittenFile>> done;
  };
  struct WholeFiles {
    std::vector<WrittenFile> files;  // written, in order (deleted by the caller on failure)
    Status status;
  };

  // The row groups, each of at most rows_per_group rows of one file of at most per_file_ rows.
  Status Plan() {
    if (ids_.size() != rows_.size()) return Status::InvalidArgument("WriteSourceRows: one id per row needed");
    if (layout_.rows_per_file <= 0 || layout_.rows_per_group <= 0) return Status::InvalidArgument("bad file layout");
    const std::string out_dir = layout_.single_file.empty() ? layout_.dir : ParentPath(layout_.single_file);
    if (!out_dir.empty()) STOKE_RETURN_IF_ERROR(fs_.CreateDirectories(out_dir));
    const int64_t n = static_cast<int64_t>(rows_.size());
    per_file_ = layout_.single_file.empty() ? layout_.rows_per_file : std::max<int64_t>(n, 1);
    for (int64_t f = 0; f * per_file_ < n; ++f) {
      for (int64_t b = f * per_file_; b < std::min(n, (f + 1) * per_file_); b += layout_.rows_per_group) {
        groups_.push_back({b, std::min({b + layout_.rows_per_group, (f + 1) * per_file_, n}), static_cast<size_t>(f)});
      }
    }
    written_.reserve(groups_.empty() ? 0 : groups_.back().file + 1);  // no doubling at 650,000 files
    return Status::OK();
  }

  // Row group `g`: the source's reader fills its source columns, SetRowColumns the rest.
  Result<EncodedRowGroup> Encode(const Group& g) const {
    RowGroupEncoder enc(s_.columns, options_, &page_buffers_);
    enc.ReserveRows(g.end - g.begin);
    std::vector<SourceItem> items;
    items.reserve(static_cast<size_t>(g.end - g.begin));
    for (int64_t k = g.begin; k < g.end; ++k) items.push_back(s_.item(rows_[static_cast<size_t>(k)]));
    STOKE_ASSIGN_OR_RETURN(uint64_t bytes, s_.reader->ReadRows(s_, items, enc));
    STOKE_RETURN_IF_ERROR(SetRowColumns(s_, items, std::vector<int64_t>(ids_.begin() + g.begin, ids_.begin() + g.end), enc));
    if (progress_ != nullptr) progress_->Add(items.size(), bytes);
    return enc.Finish();
  }

  std::string PartPath(size_t file) const {
    return JoinPath(layout_.dir, fmt::format("part-{:05}-{}.parquet", file, RandomUuid()));
  }
  std::string TemporaryPath(const std::string& path) const { return in_place_ ? path : InProgressPath(fs_, path); }

  // What the commit and the sample index need of a closed file, now at `final_path`.
  WrittenFile Describe(const ParquetFileWriter& w, const std::string& final_path) const {
    WrittenFile out{final_path, w.num_rows(), w.bytes_written(), delta::StatsJsonFromFooter(w.metadata(), s_.columns),
                    EpochMillis(), {}};
    // The path under the table root (layout.dir is the root or a partition directory in it).
    const std::string rel = PathUnder(final_path, layout_.index_root);
    if (index_pages_ && rel != final_path) {
      auto pages = SampleIndex::PagesOfWrittenFile(rel, w.bytes_written(), w.metadata(), w.offset_indexes(),
                                                   layout_.index_columns);
      if (pages.ok()) out.pages = std::move(*pages);
    }
    return out;
  }

  void Add(WrittenFile f) {
    STOKE_LOG(kInfo, "ingest.file_written", "path={} rows={} bytes={}", f.path, f.rows, f.bytes);
    written_.push_back(std::move(f));
  }

  // Files of one row group each written in place on a local disk: each task encodes, writes and
  // closes a run of whole files, so the files are created on every encoding thread (not all on this
  // one, which creating them kept busy), and work changes threads once per run instead of three
  // times per file.
  Status WriteWholeFiles() {
    const size_t files = groups_.size();
    const size_t per_run = std::clamp<size_t>(files / (pool_.size() * kRunsPerThread), 1, kMaxFilesPerRun);
    const size_t runs = (files + per_run - 1) / per_run;
    // After a failure, the runs already started are still collected: their files are deleted.
    OrderedTasks<WholeFiles> in_order(pool_, runs, 2 * pool_.size(), [this, per_run, files](size_t r) {
      return WriteRun(r * per_run, std::min(files, (r + 1) * per_run));
    });
    Status status;
    while (in_order.HasNext()) {
      WholeFiles run = in_order.Next();
      for (auto& f : run.files) Add(std::move(f));
      if (status.ok() && !run.status.ok()) {
        status = run.status;
        in_order.Stop();
      }
    }
    return status;
  }

  // The whole files of groups [begin, end), on an encoding thread.
  WholeFiles WriteRun(size_t begin, size_t end) const {
    WholeFiles out;
    for (size_t i = begin; i < end && out.status.ok(); ++i) {
      Result<EncodedRowGroup> rg = Encode(groups_[i]);
      if (!rg.ok()) {
        out.status = rg.status();
        break;
      }
      const std::string path = PartPath(groups_[i].file);
      auto w = ParquetFileWriter::Create(fs_, path, s_.columns, file_options_);
      out.status = w.ok() ? (*w)->WriteRowGroup(std::move(*rg), &page_buffers_) : w.status();
      if (out.status.ok()) out.status = (*w)->Close();
      if (out.status.ok()) {
        out.files.push_back(Describe(**w, path));
      } else {
        (void)fs_.Delete(path);
      }
    }
    return out;
  }

  // Elsewhere (object stores, where a file's Close is its upload, which wants many in flight; files
  // of several row groups; renamed files) the row groups come back here in order, and files are
  // finished on the finishing threads. At most threads + 1 row groups are encoded and not yet
  // written (the one waited for included).
  Status WriteInOrder() {
    finish_pool_.emplace(finish_threads());
    OrderedTasks<Result<EncodedRowGroup>> encoded(pool_, groups_.size(), pool_.size() + 1,
                                                 [this](size_t i) { return Encode(groups_[i]); });
    Status status;
    size_t current_file = SIZE_MAX;
    for (size_t i = 0; i < groups_.size() && status.ok(); ++i) {
      Result<EncodedRowGroup> rg = encoded.Next();
      if (!rg.ok()) {
        status = rg.status();
        break;
      }
      if (groups_[i].file != current_file) {
        current_file = groups_[i].file;
        status = FinishFile();
        if (status.ok()) status = StartFile(current_file);
        if (!status.ok()) break;
      }
      status = writer_->WriteRowGroup(std::move(*rg), &page_buffers_);
    }
    if (status.ok()) status = FinishFile();
    encoded.Stop();  // after a failure: the encodes started are waited for when `encoded` goes
    while (!finishing_.empty()) CollectOldest();
    if (status.ok()) status = finish_status_;
    if (!status.ok() && writer_) cleanup_.push_back(writer_->path());
    writer_.reset();
    return status;
  }

  // Finishing a file (footer, flush, fdatasync, rename; on object stores the upload) runs on its own
  // threads while this one goes on with the next file: with one file per sample, finishing is most
  // of the work, and fdatasyncs in flight together cost about one. At most 2 * finish_threads()
  // files wait to be finished (each holds at most its staging buffer).
  size_t finish_threads() const { return fs_.remote() ? 16 : 8; }

  // Opens the writer of file `file`. Written under a temporary name and renamed when complete (or,
  // on object stores, visible only once complete): a crash never leaves a truncated file under a
  // final name. In place: nothing refers to the name until a commit, made after every file is durable.
  Status StartFile(size_t file) {
    final_path_ = !layout_.single_file.empty() ? layout_.single_file : PartPath(file);
    STOKE_ASSIGN_OR_RETURN(writer_, ParquetFileWriter::Create(fs_, TemporaryPath(final_path_), s_.columns, file_options_));
    return Status::OK();
  }

  // Hands the open file (if any) to the finishing threads, and collects the files finished since.
  Status FinishFile() {
    if (!writer_) return Status::OK();
    auto task = std::make_shared<std::packaged_task<Result<WrittenFile>()>>(
        [this, w = std::shared_ptr<ParquetFileWriter>(std::move(writer_)), final_path = final_path_]() -> Result<WrittenFile> {
          STOKE_RETURN_IF_ERROR(w->Close());
          if (w->path() != final_path) STOKE_RETURN_IF_ERROR(fs_.Rename(w->path(), final_path));
          return Describe(*w, final_path);
        });
    finishing_.push_back({TemporaryPath(final_path_), final_path_, task->get_future()});
    finish_pool_->Submit([task] { (*task)(); });
    while (finishing_.size() > 2 * finish_threads() || (!finishing_.empty() && IsReady(finishing_.front().done))) {
      CollectOldest();
    }
    return finish_status_;
  }

  void CollectOldest() {
    Finishing f = std::move(finishing_.front());
    finishing_.pop_front();
    Result<WrittenFile> r = f.done.get();
    if (r.ok()) {
      Add(std::move(*r));
    } else {
      if (finish_status_.ok()) finish_status_ = r.status();
      cleanup_.push_back(f.tmp);
      cleanup_.push_back(f.final);
    }
  }

  // The files' data, when each was not synced at its close; then their directories: the renames
  // (or creations) published the files, a power loss could still undo them until their directories
  // are synced, and a commit must never refer to a file that may vanish. On failure every file goes.
  Status MakeDurable() {
    std::vector<std::string> paths;
    paths.reserve(written_.size());
    for (const auto& w : written_) paths.push_back(w.path);
    Status status;
    if (in_place_ && !written_.empty()) status = fs_.SyncFiles(paths);
    std::set<std::string> dirs;
    for (const auto& w : written_) dirs.insert(ParentPath(w.path));
    for (auto d = dirs.begin(); status.ok() && d != dirs.end(); ++d) status = fs_.SyncDirectory(*d);
    if (!status.ok()) DeleteLeftovers(fs_, paths, "a failed write's files");
    return status;
  }

  const SourceSet& s_;
  const std::vector<int64_t>& rows_;
  const std::vector<int64_t>& ids_;
  const FileSetLayout& layout_;
  ProgressBar* const progress_;
  Storage& fs_;
  WriterOptions options_, file_options_;
  bool in_place_ = false, index_pages_ = false;
  int64_t per_file_ = 0;
  std::vector<Group> groups_;
  // Page buffers circulate between the encoders and the writer: in steady state no memory is
  // freshly faulted in.
  mutable BufferPool page_buffers_;
  std::vector<WrittenFile> written_;
  std::vector<std::string> cleanup_;  // on failure: files of this call that may exist
  std::unique_ptr<ParquetFileWriter> writer_;  // WriteInOrder's open file, to be final_path_
  std::string final_path_;
  std::deque<Finishing> finishing_;
  Status finish_status_;
  ThreadPool pool_;                          // the encoding threads
  std::optional<ThreadPool> finish_pool_;    // WriteInOrder's finishing threads (destroyed first)
};

}  // namespace

Result<std::vector<WrittenFile>> WriteSourceRows(const SourceSet& s, const std::vector<int64_t>& rows,
                                                 const std::vector<int64_t>& ids, const FileSetLayout& layout,
                                                 const WriterOptions& options, size_t threads, ProgressBar* progress) {
  return SourceRowWriter(s, rows, ids, layout, options, threads, progress).Run();
}

}  // namespace stoke
