// `stoke convert`: source files (.npy/.npz, HDF5, images) + a labels CSV into Parquet files with one
// sample per page.
#include <fmt/format.h>

#include "core/clock.h"
#include "core/progress.h"
#include "format/codec.h"
#include "ingest/source.h"
#include "ingest/source_writer.h"
#include "io/uri.h"
#include "stoke/tools.h"

namespace stoke {

Result<ConvertReport> ConvertSources(const ConvertOptions& o) {
  if (o.source_dir.empty()) return Status::InvalidArgument("convert: a source directory or file is required");
  if (o.out.empty()) return Status::InvalidArgument("convert: `out` is required");
  if (o.target_file_bytes <= 0 || o.row_group_bytes <= 0) {
    return Status::InvalidArgument("convert: `target_file_bytes` and `row_group_bytes` must be positive");
  }
  WriterOptions wopts;
  STOKE_RETURN_IF_ERROR(SetCodecPolicy(o.codec, &wopts));
  wopts.compression_level = o.compression_level;
  STOKE_ASSIGN_OR_RETURN(SourceSet sources, PlanSources(SourceOptionsOf(o), "convert"));

  const int64_t n = sources.num_items();
  FileSetLayout layout = LayoutForSizes(sources.sample_bytes, n, o.row_group_bytes, o.target_file_bytes);
  STOKE_RETURN_IF_ERROR(CreateContainerFor(o.out));
  STOKE_ASSIGN_OR_RETURN(StorageLocation out, ResolveStorageLocation(o.out));
  layout.storage = out.storage.get();
  if (out.path.size() >= 8 && out.path.compare(out.path.size() - 8, 8, ".parquet") == 0) {
    layout.single_file = out.path;
  } else {
    layout.dir = out.path;
  }
  std::vector<int64_t> rows(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) rows[i] = i;

  Stopwatch watch;
  ProgressBar bar("convert", static_cast<uint64_t>(n), "samples", o.progress ? ProgressBar::Mode::kAuto : ProgressBar::Mode::kOff);
  auto written = WriteSourceRows(sources, rows, /*ids=*/rows, layout, wopts, o.threads, &bar);
  bar.Finish();
  if (!written.ok()) return written.status();

  ConvertReport report;
  report.files_in = static_cast<int64_t>(sources.files.size());
  report.rows = n;
  for (const auto& s : sources.files) report.bytes_in += static_cast<int64_t>(s.size);
  for (const auto& f : *written) {
    report.files_out.push_back(f.path);
    report.bytes_out += static_cast<int64_t>(f.bytes);
  }
  report.seconds = watch.Seconds();
  return report;
}

}  // namespace stoke
