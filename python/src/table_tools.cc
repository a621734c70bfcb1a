// stoke._stoke's table tools: ingest, optimize, vacuum, synth, query, history, inspect and
// checkpoint. Each runs without the GIL (they read and write many files, on their own threads) and
// returns its report as a dict; Ctrl-C pressed meanwhile raises when the call returns.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "binding.h"
#include "stoke/codec.h"
#include "stoke/ingest.h"
#include "stoke/maintenance.h"
#include "stoke/table.h"
#include "stoke/tools.h"

namespace stoke_python {
namespace {

py::dict Ingest(const std::string& source_dir, const std::string& table_dir, const std::string& labels,
                const std::string& mode, const std::string& tensor_column, const std::string& codec,
                int compression_level, int64_t target_file_bytes, int64_t row_group_bytes, int64_t rows_per_file,
                const std::string& partition_by, size_t threads, bool progress,
                std::optional<std::pair<int64_t, int64_t>> shard, const std::string& format,
                const std::vector<std::string>& datasets, const std::string& hdf5_samples,
                const std::vector<int64_t>& decode, const std::string& on_changed) {
  stoke::IngestOptions o;
  if (shard) {
    o.shard_index = shard->first;
    o.shard_count = shard->second;
  }
  o.source_dir = source_dir;
  o.table_dir = table_dir;
  o.labels_csv = labels;
  o.mode = Parsed(stoke::ParseIngestMode(mode));
  o.on_changed = Parsed(stoke::ParseOnChanged(on_changed));
  o.tensor_column = tensor_column;
  o.codec = Parsed(stoke::ParseCodec(codec));
  o.compression_level = compression_level;
  o.target_file_bytes = target_file_bytes;
  o.row_group_bytes = row_group_bytes;
  o.rows_per_file = rows_per_file;
  o.partition_by = partition_by;
  o.threads = threads;
  o.progress = progress;
  o.format = Parsed(stoke::ParseSourceFormat(format));
  o.datasets = datasets;
  o.hdf5_samples = Parsed(stoke::ParseHdf5Samples(hdf5_samples));
  o.decode_images = decode;
  const stoke::IngestReport r = RunTool([&] { return stoke::IngestSources(o); });
  py::dict d;
  d["version"] = r.version;
  d["source_files"] = r.source_files;
  d["new_files"] = r.new_files;
  d["skipped"] = r.skipped;
  d["changed"] = r.changed;
  py::list changed;
  for (const stoke::ChangedSourceFile& f : r.changed_files) {
    py::dict c;
    c["location"] = f.location;
    c["table_version"] = f.table_version;
    c["source_version"] = f.source_version;
    changed.append(std::move(c));
  }
  d["changed_files"] = std::move(changed);
  d["rows"] = r.rows;
  d["files_added"] = r.files_added;
  d["files_removed"] = r.files_removed;
  d["bytes_in"] = r.bytes_in;
  d["bytes_out"] = r.bytes_out;
  d["seconds"] = r.seconds;
  return d;
}

py::dict Optimize(const std::string& table_dir, int64_t target_file_bytes, int64_t row_group_bytes,
                  const std::string& where, const std::string& sort_by, const std::string& codec, size_t threads,
                  bool progress) {
  stoke::OptimizeOptions o;
  o.table_dir = table_dir;
  o.target_file_bytes = target_file_bytes;
  o.row_group_bytes = row_group_bytes;
  o.where = where;
  o.sort_by = sort_by;
  if (!codec.empty()) o.codec = Parsed(stoke::ParseCodec(codec));  // "" = the table's
  o.threads = threads;
  o.progress = progress;
  const stoke::OptimizeReport r = RunTool([&] { return stoke::OptimizeTable(o); });
  py::dict d;
  d["version"] = r.version;
  d["files_before"] = r.files_before;
  d["files_after"] = r.files_after;
  d["files_removed"] = r.files_removed;
  d["files_added"] = r.files_added;
  d["rows_rewritten"] = r.rows_rewritten;
  d["bytes_rewritten"] = r.bytes_rewritten;
  d["seconds"] = r.seconds;
  return d;
}

py::dict Vacuum(const std::string& table_dir, double retain_hours, bool dry_run) {
  stoke::VacuumOptions o;
  o.table_dir = table_dir;
  o.retain_hours = retain_hours;
  o.dry_run = dry_run;
  stoke::VacuumReport r = RunTool([&] { return stoke::VacuumTable(o); });
  py::dict d;
  d["files"] = std::move(r.files);
  d["bytes"] = r.bytes;
  d["referenced_kept"] = r.referenced_kept;
  d["dry_run"] = dry_run;
  return d;
}

py::dict Synth(const std::string& out_dir, int64_t samples, const std::vector<int64_t>& shape, int64_t channels,
               uint64_t seed, double label_noise, size_t threads, bool progress) {
  stoke::SynthVolumesOptions o;
  o.out_dir = out_dir;
  o.samples = samples;
  o.shape = shape;
  o.channels = channels;
  o.seed = seed;
  o.label_noise = label_noise;
  o.threads = threads;
  o.progress = progress;
  const stoke::SynthReport r = RunTool([&] { return stoke::SynthVolumes(o); });
  py::dict d;
  d["files"] = r.files;
  d["bytes"] = r.bytes;
  d["positives"] = r.positives;
  d["seconds"] = r.seconds;
  return d;
}

py::dict SynthImagesTool(const std::string& out_dir, int64_t images, int64_t classes, int64_t min_size, int64_t max_size,
                         int quality, double png_fraction, uint64_t seed, size_t threads, bool progress) {
  stoke::SynthImagesOptions o;
  o.out_dir = out_dir;
  o.images = images;
  o.classes = classes;
  o.min_size = min_size;
  o.max_size = max_size;
  o.quality = quality;
  o.png_fraction = png_fraction;
  o.seed = seed;
  o.threads = threads;
  o.progress = progress;
  const stoke::SynthReport r = RunTool([&] { return stoke::SynthImages(o); });
  py::dict d;
  d["files"] = r.files;
  d["bytes"] = r.bytes;
  d["seconds"] = r.seconds;
  return d;
}

// A byte vector moved into a numpy array of `dtype` and `shape` (the array owns it through a capsule).
py::array ArrayOwning(std::vector<uint8_t>&& bytes, const py::dtype& dtype, std::vector<py::ssize_t> shape) {
  auto* owned = new std::vector<uint8_t>(std::move(bytes));
  py::capsule base(owned, [](void* p) { delete static_cast<std::vector<uint8_t>*>(p); });
  static const uint64_t kEmpty = 0;
  void* data = owned->empty() ? static_cast<void*>(const_cast<uint64_t*>(&kEmpty)) : owned->data();
  return py::array(dtype, std::move(shape), {}, data, base);
}

// {"columns": {name: ndarray | list}, "valid": {name: uint8 ndarray}, "rows", "files_scanned", ...}:
// scalar and tensor columns as typed arrays ([rows] and [rows, *shape]; null cells are zeros), strings
// and bytes as lists (None for nulls); "valid" holds the columns that have nulls; "decimal_columns"
// names the decimal columns (lists of decimal.Decimal).
py::dict Query(const std::string& table_dir, const std::string& where, std::optional<std::vector<std::string>> columns,
               int64_t limit, std::optional<int64_t> version, bool count_only) {
  stoke::QueryOptions o;
  o.table_dir = table_dir;
  o.where = where;
  if (columns) o.select = std::move(*columns);
  o.limit = limit;
  o.version = version;
  o.count_only = count_only;
  stoke::QueryResult r = RunTool([&] { return stoke::QueryTableColumns(o); });
  py::dict out;
  out["rows"] = r.report.rows;
  out["files_total"] = r.report.files_total;
  out["files_scanned"] = r.report.files_scanned;
  out["files_counted_from_stats"] = r.report.files_counted_from_stats;
  out["row_groups_total"] = r.report.row_groups_total;
  out["row_groups_scanned"] = r.report.row_groups_scanned;
  py::dict cols, valid;
  py::list decimal_columns;  // for Table.query(decimals="float64")
  if (!count_only) {
    for (stoke::QueryColumn& c : r.columns) {
      const py::str name(c.name);
      using K = stoke::ColumnKind;
      if (c.kind == K::kDecimal) decimal_columns.append(name);
      if (c.kind == K::kString || c.kind == K::kBinary || c.kind == K::kDecimal || c.kind == K::kNested) {
        py::list values(c.strings.size());
        // Decimals become decimal.Decimal; structs, arrays and maps dicts and lists (json.loads).
        py::object decimal = py::none(), loads = py::none();
        if (c.kind == K::kDecimal) decimal = py::module_::import("decimal").attr("Decimal");
        if (c.kind == K::kNested) loads = py::module_::import("json").attr("loads");
        for (size_t i = 0; i < c.strings.size(); ++i) {
          if (!c.valid.empty() && c.valid[i] == 0) {
            values[i] = py::none();
          } else if (c.kind == K::kDecimal) {
            values[i] = decimal(py::str(c.strings[i]));
          } else if (c.kind == K::kNested) {
            values[i] = loads(py::str(c.strings[i]));
          } else if (c.kind == K::kString) {
            PyObject* s = PyUnicode_DecodeUTF8(c.strings[i].data(), static_cast<Py_ssize_t>(c.strings[i].size()),
                                               "surrogateescape");
            if (s == nullptr) throw py::error_already_set();
            values[i] = py::reinterpret_steal<py::object>(s);
          } else {
            values[i] = py::bytes(c.strings[i]);
          }
        }
        cols[name] = std::move(values);
      } else {
        CheckNumpyDims(name, c.shape.size());
        std::vector<py::ssize_t> shape = {static_cast<py::ssize_t>(r.report.rows)};  // every column has them all
        for (int64_t d : c.shape) shape.push_back(static_cast<py::ssize_t>(d));
        // Dates and timestamps: int64 days and microseconds, which is how NumPy holds datetime64[D] and [us].
        const py::dtype dtype = c.kind == K::kDate        ? py::dtype("datetime64[D]")
                                : c.kind == K::kTimestamp ? py::dtype("datetime64[us]")
                                                          : NumpyDType(c.dtype);
        cols[name] = ArrayOwning(std::move(c.data), dtype, std::move(shape));
      }
      if (!c.valid.empty()) {
        const auto n = static_cast<py::ssize_t>(c.valid.size());
        valid[name] = ArrayOwning(std::move(c.valid), py::dtype::of<uint8_t>(), {n});
      }
    }
  }
  out["columns"] = std::move(cols);
  out["valid"] = std::move(valid);
  out["decimal_columns"] = std::move(decimal_columns);
  return out;
}

py::list History(const std::string& table_dir, int64_t limit) {
  const std::vector<stoke::TableVersion> versions = RunTool([&] { return stoke::TableHistory(table_dir, limit); });
  py::object loads = py::module_::import("json").attr("loads");
  py::list out;
  for (const stoke::TableVersion& v : versions) {
    py::dict d;
    d["version"] = v.version;
    d["timestamp"] = v.timestamp_ms;
    d["operation"] = v.operation;
    d["files_added"] = v.files_added;
    d["files_removed"] = v.files_removed;
    d["bytes_added"] = v.bytes_added;
    d["bytes_removed"] = v.bytes_removed;
    d["commitInfo"] = loads(v.commit_info_json);
    out.append(std::move(d));
  }
  return out;
}

std::string Inspect(const std::string& table_dir, std::optional<int64_t> version, bool data_files) {
  stoke::InspectTableOptions o;
  o.version = version;
  o.format = stoke::DescriptionFormat::kJson;
  o.data_files = data_files;
  return RunTool([&] { return stoke::InspectTable(table_dir, o); });
}

// The one definition of ingest's defaults: IngestOptions'. The binding's keyword defaults,
// python/stoke (via ingest_defaults()) and the CLI take them from here, and
// python/tests/test_option_defaults.py checks that all of them agree.
const stoke::IngestOptions kIngestDefaults{};

py::dict IngestDefaults() {
  const stoke::IngestOptions& d = kIngestDefaults;
  py::dict out;
  out["mode"] = std::string(stoke::IngestModeName(d.mode));
  out["on_changed"] = std::string(stoke::OnChangedName(d.on_changed));
  out["tensor_column"] = d.tensor_column;
  out["codec"] = std::string(stoke::CodecName(d.codec));
  out["compression_level"] = d.compression_level;
  out["target_file_bytes"] = d.target_file_bytes;
  out["row_group_bytes"] = d.row_group_bytes;
  out["rows_per_file"] = d.rows_per_file;
  out["partition_by"] = d.partition_by;
  out["threads"] = d.threads;
  out["progress"] = d.progress;
  out["format"] = std::string(stoke::SourceFormatName(d.format));
  out["hdf5_samples"] = std::string(stoke::Hdf5SamplesName(d.hdf5_samples));
  return out;
}

}  // namespace

// The table commands: ingest, optimize, vacuum, query, history, inspect, checkpoint, synth.
void BindTableTools(py::module_& m) {
  // Every default is IngestOptions' (ingest_defaults(), which python/stoke/table.py uses).
  const stoke::IngestOptions& d = kIngestDefaults;
  m.def("ingest", &Ingest, py::arg("source_dir"), py::arg("table_dir"), py::kw_only(), py::arg("labels") = d.labels_csv,
        py::arg("mode") = std::string(stoke::IngestModeName(d.mode)), py::arg("tensor_column") = d.tensor_column,
        py::arg("codec") = std::string(stoke::CodecName(d.codec)), py::arg("compression_level") = d.compression_level,
        py::arg("target_file_bytes") = d.target_file_bytes, py::arg("row_group_bytes") = d.row_group_bytes,
        py::arg("rows_per_file") = d.rows_per_file, py::arg("partition_by") = d.partition_by,
        py::arg("threads") = d.threads, py::arg("progress") = d.progress, py::arg("shard") = py::none(),
        py::arg("format") = std::string(stoke::SourceFormatName(d.format)), py::arg("datasets") = d.datasets,
        py::arg("hdf5_samples") = std::string(stoke::Hdf5SamplesName(d.hdf5_samples)),
        py::arg("decode") = d.decode_images, py::arg("on_changed") = std::string(stoke::OnChangedName(d.on_changed)));
  m.def("ingest_defaults", &IngestDefaults, "IngestOptions' defaults, keyed as stoke.ingest's keywords.");
  m.def("optimize", &Optimize, py::arg("table_dir"), py::kw_only(), py::arg("target_file_bytes") = int64_t{1} << 30,
        py::arg("row_group_bytes") = int64_t{128} << 20, py::arg("where") = "", py::arg("sort_by") = "",
        py::arg("codec") = "", py::arg("threads") = 0, py::arg("progress") = true);
  m.def("vacuum", &Vacuum, py::arg("table_dir"), py::kw_only(), py::arg("retain_hours") = 168.0,
        py::arg("dry_run") = false);
  m.def("synth_volumes", &Synth, py::arg("out_dir"), py::kw_only(), py::arg("samples") = 2000,
        py::arg("shape") = std::vector<int64_t>{30, 30, 10}, py::arg("channels") = 10, py::arg("seed") = 0,
        py::arg("label_noise") = 0.05, py::arg("threads") = 0, py::arg("progress") = true);
  m.def("synth_images", &SynthImagesTool, py::arg("out_dir"), py::kw_only(), py::arg("images") = 1000,
        py::arg("classes") = 10, py::arg("min_size") = 200, py::arg("max_size") = 500, py::arg("quality") = 92,
        py::arg("png_fraction") = 0.0, py::arg("seed") = 0, py::arg("threads") = 0, py::arg("progress") = true);
  m.def("query", &Query, py::arg("table_dir"), py::kw_only(), py::arg("where") = "", py::arg("columns") = py::none(),
        py::arg("limit") = stoke::kNoLimit, py::arg("version") = py::none(), py::arg("count_only") = false);
  m.def("history", &History, py::arg("table_dir"), py::kw_only(), py::arg("limit") = stoke::kNoLimit,
        "One dict per version, newest first (the keys of `stoke history --json`).");
  m.def("inspect", &Inspect, py::arg("table_dir"), py::kw_only(), py::arg("version") = py::none(),
        py::arg("data_files") = true,
        "The table's description as JSON (as `stoke inspect DIR --json`; data_files=False leaves out the list of "
        "data files).");
  m.def("version_at", [](const std::string& table_dir, const std::string& timestamp) {
    return RunTool([&] { return stoke::TableVersionAt(table_dir, timestamp); });
  }, py::arg("table_dir"), py::arg("timestamp"),
        "The newest version committed at or before `timestamp` (ISO-8601 text or milliseconds since the epoch).");
  m.def("checkpoint", [](const std::string& table_dir, std::optional<int64_t> version) {
    RunTool([&] { return stoke::CheckpointTable(table_dir, version); });
  }, py::arg("table_dir"), py::kw_only(), py::arg("version") = py::none());
}

}  // namespace stoke_python
