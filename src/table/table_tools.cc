// `stoke history` and `stoke inspect DIR`.
#include <fmt/format.h>

#include <charconv>
#include <ctime>
#include <filesystem>
#include <sstream>

#include "core/progress.h"
#include "format/logical_value.h"
#include "format/parquet_reader.h"
#include "format/parquet_writer.h"
#include "io/uri.h"
#include "stoke/maintenance.h"
#include "stoke/table.h"
#include "table/delta_log.h"
#include "table/parquet_dataset.h"
#include "table/scan.h"

namespace stoke {
namespace {

std::string FormatTimestamp(int64_t ms) {
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
  return fmt::format("{}.{:03}Z", buf, ms % 1000);
}

std::string Dump(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

// How a column's chunks are stored in some data files: chunks per codec, and the recorded reason
// (WriterOptions::min_codec_saving) of the first chunk whose codec was chosen.
struct ColumnCodecs {
  std::map<std::string, int64_t> chunks;  // codec name -> column chunks
  std::string why;
};

// Reads the footers of the first `max_files` data files (the inspect output lists those) and tallies
// each column's codecs, so that a table of many files costs at most max_files small reads.
Result<std::map<std::string, ColumnCodecs>> SampleColumnCodecs(Storage& fs, const std::string& table_dir,
                                                               const delta::Snapshot& snap, size_t max_files,
                                                               size_t* files_read) {
  std::map<std::string, ColumnCodecs> out;
  *files_read = 0;
  for (const auto& f : snap.files) {
    if (*files_read == max_files) break;
    auto rel = delta::DecodePath(f.path);
    STOKE_ASSIGN_OR_RETURN(auto reader, ParquetReader::Open(fs, JoinPath(table_dir, rel.ok() ? *rel : f.path)));
    ++*files_read;
    for (const auto& rg : reader->metadata().row_groups) {
      for (const auto& chunk : rg.columns) {
        if (!chunk.meta_data || chunk.meta_data->path_in_schema.empty()) continue;
        const auto& m = *chunk.meta_data;
        ColumnCodecs& c = out[fmt::format("{}", fmt::join(m.path_in_schema, "."))];
        ++c.chunks[std::string(parquet::CodecName(m.codec))];
        if (!c.why.empty()) continue;
        for (const auto& kv : m.key_value_metadata) {
          if (kv.key == kCodecChoiceKey && kv.value) c.why = CodecChoiceText(*kv.value);
        }
      }
    }
  }
  return out;
}

}  // namespace

bool IsTableDirectory(const std::string& path) {
  auto where = ResolveStorageLocation(path);
  if (!where.ok()) return false;
  // A log directory on local disks; on object stores, at least one key under "_delta_log/": found
  // with a HEAD of _last_checkpoint or of commit 0 where there is one (a listing of a log of 10,000
  // commits takes pages of names: 0.6 s on Azurite), else a listing.
  const std::string log_dir = JoinPath(where->path, delta::kLogDirName);
  if (!where->storage->remote()) {
    auto st = where->storage->Stat(log_dir);
    return st.ok() && st->is_directory;
  }
  for (const char* name : {"_last_checkpoint", "00000000000000000000.json"}) {
    if (where->storage->Stat(JoinPath(log_dir, name)).ok()) return true;
  }
  auto names = where->storage->ListNames(log_dir);
  return names.ok() && !names->empty();
}

Status CheckTable(const std::string& path, std::optional<int64_t> version) {
  return OpenDatasetView(path, version).status();
}

bool NamesTable(const std::string& path) {
  if (IsGlobLocation(path)) return true;
  auto where = ResolveStorageLocation(path);
  if (!where.ok()) return false;
  // Local: stat(2), so a symbolic link to a directory counts; object stores: a prefix with keys under it.
  auto st = where->storage->Stat(where->path);
  return st.ok() && st->is_directory;
}

Status CheckpointTable(const std::string& table_dir, std::optional<int64_t> version) {
  STOKE_ASSIGN_OR_RETURN(StorageLocation where, ResolveStorageLocation(table_dir));
  return delta::DeltaLog(*where.storage, where.path).Checkpoint(version);
}

Result<std::vector<TableVersion>> TableHistory(const std::string& table_dir, int64_t limit) {
  if (limit < kNoLimit) {
    return Status::InvalidArgument(fmt::format("history: `limit` must be -1 (all) or at least 0, got {}", limit));
  }
  STOKE_ASSIGN_OR_RETURN(StorageLocation where, ResolveStorageLocation(table_dir));
  delta::DeltaLog log(*where.storage, where.path);
  auto not_a_table = [&] {
    return Status::NotFound(fmt::format("'{}' is not a table (no {} commits)", table_dir, delta::kLogDirName));
  };
  if (limit == 0) {  // no version, but still a table: its log is listed, no commit is read
    STOKE_ASSIGN_OR_RETURN(const int64_t latest, log.LatestVersion());
    if (latest < 0) return not_a_table();
    return std::vector<TableVersion>();
  }
  // The log's History takes 0 for "all".
  STOKE_ASSIGN_OR_RETURN(auto history, log.History(limit == kNoLimit ? 0 : limit));
  if (history.empty()) return not_a_table();
  std::vector<TableVersion> out;
  out.reserve(history.size());
  for (const auto& h : history) {
    out.push_back({h.version, h.timestamp, h.operation, h.files_added, h.files_removed, h.bytes_added, h.bytes_removed,
                   Dump(h.info)});
  }
  return out;
}

Result<int64_t> TableVersionAt(const std::string& table_dir, const std::string& timestamp) {
  int64_t ms = 0;
  const char* end = timestamp.data() + timestamp.size();
  auto [ptr, ec] = std::from_chars(timestamp.data(), end, ms);
  if (timestamp.empty() || ec != std::errc() || ptr != end) {
    std::optional<int64_t> micros = ParseTimestamp(timestamp);
    if (!micros) {
      return Status::InvalidArgument(fmt::format("'{}' is no timestamp: expected ISO-8601 ('2026-11-30T08:00:00Z', "
                                                 "'2026-11-30 08:00:00.250+01:00') or milliseconds since the epoch",
                                                 timestamp));
    }
    ms = *micros / 1000 - (*micros % 1000 < 0 ? 1 : 0);  // floor: a time before the epoch rounds down
  }
  STOKE_ASSIGN_OR_RETURN(StorageLocation where, ResolveStorageLocation(table_dir));
  return delta::DeltaLog(*where.storage, where.path).VersionAt(ms);
}

std::string HistoryText(const std::vector<TableVersion>& versions) {
  std::string out = fmt::format("{:>8}  {:<24}  {:<10}  {:>7}  {:>9}  {:>11}  {}\n", "version", "timestamp", "operation",
                                "+files", "-files", "+bytes", "parameters");
  for (const auto& v : versions) {
    std::string params;
    const auto info = nlohmann::json::parse(v.commit_info_json, nullptr, /*allow_exceptions=*/false);
    if (info.is_object() && info.contains("operationParameters")) params = Dump(info["operationParameters"]);
    out += fmt::format("{:>8}  {:<24}  {:<10}  {:>7}  {:>9}  {:>11}  {}\n", v.version, FormatTimestamp(v.timestamp_ms),
                       v.operation.empty() ? "-" : v.operation, v.files_added, v.files_removed,
                       FormatBytes(static_cast<uint64_t>(v.bytes_added)), params);
  }
  return out;
}

std::string HistoryJsonLines(const std::vector<TableVersion>& versions) {
  std::string out;
  for (const auto& v : versions) {
    const auto info = nlohmann::json::parse(v.commit_info_json, nullptr, /*allow_exceptions=*/false);
    out += Dump({{"version", v.version}, {"timestamp", v.timestamp_ms}, {"operation", v.operation},
                 {"files_added", v.files_added}, {"files_removed", v.files_removed}, {"bytes_added", v.bytes_added},
                 {"bytes_removed", v.bytes_removed}, {"commitInfo", info.is_discarded() ? nlohmann::json() : info}});
    out += "\n";
  }
  return out;
}

namespace {

constexpr size_t kFilesListed = 20;  // data files the text lists (the JSON form lists all)

// What `stoke inspect` reports of a table, gathered once for both forms.
struct TableFacts {
  std::string table;
  delta::Snapshot snap;
  bool plain = false;  // a plain Parquet dataset: no log, no versions
  std::vector<ColumnSpec> columns;
  int64_t bytes = 0;
  int64_t rows = -1;
  int64_t dv_files = 0;  // data files with a deletion vector
  int64_t dv_rows = 0;   // rows their deletion vectors delete
  // What image sources recorded: the formats of blob columns and the class names of label columns.
  std::vector<std::pair<std::string, std::string>> sources_metadata;
  std::optional<std::string> codec_policy;
  std::map<std::string, ColumnCodecs> codecs;  // of the first kFilesListed data files
  size_t codec_files = 0;
};

Result<TableFacts> GatherTableFacts(const std::string& table_dir, std::optional<int64_t> version) {
  TableFacts t;
  t.table = table_dir;
  STOKE_ASSIGN_OR_RETURN(TableView view, OpenDatasetView(table_dir, version));
  const StorageLocation where{view.storage, view.dir};
  t.plain = view.plain;
  t.snap = std::move(view.snapshot);
  t.columns = std::move(view.columns);
  for (const auto& f : t.snap.files) {
    t.bytes += f.size;
    if (!f.deletion_vector) continue;
    ++t.dv_files;
    t.dv_rows += f.deletion_vector->cardinality;
  }
  t.rows = t.snap.num_records();
  const auto& config = t.snap.metadata.configuration;
  for (const char* key : {kImagesMetadataKey, kClassesMetadataKey}) {
    auto found = config.find(key);
    if (found != config.end()) t.sources_metadata.emplace_back(key, found->second);
  }
  auto policy = config.find(kCodecPolicyKey);
  if (policy != config.end()) t.codec_policy = policy->second;
  STOKE_ASSIGN_OR_RETURN(t.codecs,
                         SampleColumnCodecs(*where.storage, where.path, t.snap, kFilesListed, &t.codec_files));
  return t;
}

nlohmann::ordered_json ColumnJson(const ColumnSpec& c) {
  nlohmann::ordered_json jc = {{"name", c.name}, {"type", std::string(parquet::TypeName(c.type))},
                               {"nullable", c.optional}};
  if (c.is_string) jc["logical"] = "STRING";
  if (c.logical != LogicalType::kNone || c.nested()) jc["delta_type"] = SparkTypeName(c);
  if (c.tensor) jc["tensor"] = {{"dtype", std::string(DTypeName(c.tensor->dtype))}, {"shape", c.tensor->shape}};
  if (c.blob) jc["blob"] = true;
  return jc;
}

nlohmann::ordered_json TableFactsJson(const TableFacts& t) {
  const delta::Protocol& p = t.snap.protocol;
  nlohmann::ordered_json j;
  j["table"] = t.table;
  if (t.plain) j["plain_parquet"] = true;
  j["version"] = t.snap.version;
  j["timestamp"] = t.snap.timestamp;
  j["id"] = t.snap.metadata.id;
  j["protocol"] = {{"minReaderVersion", p.min_reader_version}, {"minWriterVersion", p.min_writer_version}};
  if (p.min_reader_version >= 3) j["protocol"]["readerFeatures"] = p.reader_features;
  if (p.min_writer_version >= 7) j["protocol"]["writerFeatures"] = p.writer_features;
  j["files"] = t.snap.files.size();
  j["bytes"] = t.bytes;
  j["rows"] = t.rows;
  if (t.dv_files > 0) j["deletion_vectors"] = {{"files", t.dv_files}, {"rows_deleted", t.dv_rows}};
  j["partition_columns"] = t.snap.metadata.partition_columns;
  j["schema"] = nlohmann::ordered_json::array();
  for (const auto& c : t.columns) j["schema"].push_back(ColumnJson(c));
  for (const auto& [key, value] : t.sources_metadata) {
    auto parsed = nlohmann::ordered_json::parse(value, nullptr, false);
    j[key] = parsed.is_discarded() ? nlohmann::ordered_json(value) : parsed;
  }
  j["codec"] = t.codec_policy.value_or("");
  j["column_codecs"] = nlohmann::ordered_json::object();
  for (const auto& [name, c] : t.codecs) j["column_codecs"][name] = {{"chunks", c.chunks}, {"why", c.why}};
  j["column_codecs_from_files"] = t.codec_files;
  return j;
}

// The JSON form. The data files are written as they are listed, one compact object a line, each
// file's stats JSON as the log holds it (when it is valid JSON): built as one document, 650,000
// files took 2.3 GB and 14 s.
void WriteTableJson(const TableFacts& t, bool data_files, std::ostream& out) {
  std::string head = TableFactsJson(t).dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  if (!data_files) {
    out << head << "\n";
    return;
  }
  head.resize(head.size() - 2);  // the closing "\n}"
  out << head << ",\n  \"data_files\": [";
  std::string line;
  const auto& files = t.snap.files;
  for (size_t i = 0; i < files.size(); ++i) {
    const auto& f = files[i];
    line.assign(i == 0 ? "\n    " : ",\n    ");
    line += fmt::format("{{\"path\":{},\"size\":{},\"modificationTime\":{}", Dump(nlohmann::json(f.path)), f.size,
                        f.modification_time);
    if (f.stats && nlohmann::json::accept(*f.stats)) {
      line += ",\"stats\":";
      line += *f.stats;
    }
    line += '}';
    out << line;
  }
  out << (files.empty() ? "]\n}\n" : "\n  ]\n}\n");
}

// "; reader features: a, b; writer features: c" for protocols that list them.
std::string FeaturesText(const delta::Protocol& p) {
  std::string out;
  if (p.min_reader_version >= 3) out += fmt::format("; reader features: {}", fmt::join(p.reader_features, ", "));
  if (p.min_writer_version >= 7) out += fmt::format("; writer features: {}", fmt::join(p.writer_features, ", "));
  return out;
}

void WriteSummaryText(const TableFacts& t, std::ostream& out) {
  const delta::Protocol& p = t.snap.protocol;
  out << fmt::format("table       {}\n", t.table);
  if (t.plain) {
    out << fmt::format("version     none: a plain Parquet dataset (no Delta log; files as listed now, newest {})\n",
                       FormatTimestamp(t.snap.timestamp));
  } else {
    out << fmt::format("version     {} ({})\n", t.snap.version, FormatTimestamp(t.snap.timestamp));
    out << fmt::format("protocol    reader {}, writer {}{}\n", p.min_reader_version, p.min_writer_version,
                       FeaturesText(p));
  }
  out << fmt::format("files       {} data files, {} ({} bytes)\n", t.snap.files.size(),
                     FormatBytes(static_cast<uint64_t>(t.bytes)), t.bytes);
  out << fmt::format("rows        {}{}\n", t.rows < 0 ? std::string("unknown (a file has no stats)") : std::to_string(t.rows),
                     t.dv_files == 0 ? std::string()
                                     : fmt::format(" ({} deleted by the deletion vectors of {} file{})", t.dv_rows,
                                                   t.dv_files, t.dv_files == 1 ? "" : "s"));
  if (!t.snap.metadata.partition_columns.empty()) {
    out << fmt::format("partitions  {}\n", fmt::join(t.snap.metadata.partition_columns, ", "));
  }
}

void WriteSchemaText(const TableFacts& t, std::ostream& out) {
  out << "schema\n";
  for (const auto& c : t.columns) {
    out << fmt::format("  {:<12} {}{}{}{}{}{}\n", c.name, parquet::TypeName(c.type), c.is_string ? " STRING" : "",
                       c.logical != LogicalType::kNone || c.nested() ? " " + SparkTypeName(c) : "",
                       c.optional ? " (nullable)" : "",
                       c.tensor ? fmt::format(" tensor {}[{}]", DTypeName(c.tensor->dtype), fmt::join(c.tensor->shape, ","))
                                : "",
                       c.blob ? " blob" : "");
  }
  for (const auto& [key, value] : t.sources_metadata) {
    out << fmt::format("{:<11} {}\n", key == kImagesMetadataKey ? "images" : "classes",
                       value.size() > 200 ? value.substr(0, 200) + "..." : value);
  }
}

void WriteCodecText(const TableFacts& t, std::ostream& out) {
  out << fmt::format("codec       {}\n",
                     !t.codec_policy             ? std::string("not recorded (written by another tool or an older stoke)")
                     : *t.codec_policy == "auto" ? std::string("auto: per column chunk, zstd where it saves >= 10 % (tensor and blob columns: >= 90 %, of pages "
                                                 "averaging >= 64 KiB), else uncompressed")
                                                 : *t.codec_policy);
  if (t.codec_files == 0) return;
  out << fmt::format("  column chunks in {} of {} data files:\n", t.codec_files, t.snap.files.size());
  for (const auto& col : t.columns) {
    auto found = t.codecs.find(col.name);
    if (found == t.codecs.end()) continue;  // a partition column: not in the data files
    const auto& [name, c] = *found;
    std::vector<std::string> parts;
    for (const auto& [codec, n] : c.chunks) parts.push_back(fmt::format("{} {}", n, codec));
    out << fmt::format("  {:<12} {}{}\n", name, fmt::join(parts, ", "), c.why.empty() ? "" : " (" + c.why + ")");
  }
}

void WriteDataFilesText(const TableFacts& t, std::ostream& out) {
  out << "data files\n";
  size_t shown = 0;
  for (const auto& f : t.snap.files) {
    if (++shown > kFilesListed) {
      out << fmt::format("  ... and {} more (--json lists all)\n", t.snap.files.size() - kFilesListed);
      break;
    }
    std::string records = "?";
    if (f.stats) {
      auto stats = nlohmann::json::parse(*f.stats, nullptr, false);
      if (!stats.is_discarded() && stats.contains("numRecords")) records = Dump(stats["numRecords"]);
    }
    out << fmt::format("  {:<60} {:>10} {:>8} rows\n", f.path, FormatBytes(static_cast<uint64_t>(f.size)), records);
  }
}

}  // namespace

Result<std::string> InspectTable(const std::string& table_dir, const InspectTableOptions& options) {
  STOKE_ASSIGN_OR_RETURN(const TableFacts t, GatherTableFacts(table_dir, options.version));
  std::ostringstream out;
  if (options.format == DescriptionFormat::kJson) {
    WriteTableJson(t, options.data_files, out);
    return std::move(out).str();  // the document itself, not a copy (270 MB at 650,000 files)
  }
  WriteSummaryText(t, out);
  WriteSchemaText(t, out);
  WriteCodecText(t, out);
  WriteDataFilesText(t, out);
  return std::move(out).str();
}

}  // namespace stoke
