// `stoke ingest`: source files into a Delta table. Data files are written first under fresh names,
// then referenced by one commit; a crash before the commit leaves only orphan files (VACUUM removes
// them), never a half-visible ingest. Appending is idempotent by source file: each row records the
// file's location and version (`source_location`, `source_version`), files already in the table are skipped,
// so an interrupted ingest re-run adds exactly the rest, and a file at a known location whose version
// changed is reported (OnChanged). Rows written before stoke recorded locations match by name.
#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <set>
#include <span>
#include <tuple>

#include "core/clock.h"
#include "core/host_memory.h"
#include "core/mutex.h"
#include "core/thread_pool.h"
#include "core/retry.h"
#include "core/text.h"
#include "core/log.h"
#include "core/progress.h"
#include "format/codec.h"
#include "format/parquet_reader.h"
#include "ingest/image_source.h"
#include "ingest/ingested_sources.h"
#include "ingest/source.h"
#include "ingest/source_writer.h"
#include "io/local_files.h"
#include "io/uri.h"
#include "stoke/ingest.h"
#include "table/add_stats.h"
#include "table/column_mapping.h"
#include "table/identity_columns.h"
#include "table/delta_log.h"
#include "table/parquet_dataset.h"
#include "table/row_constraints.h"
#include "table/row_tracking.h"
#include "table/sample_index.h"
#include "table/table_features.h"
#include "table/scan.h"

namespace stoke {
namespace {

std::string DescribeColumn(const ColumnSpec& c) {
  std::string s(parquet::TypeName(c.type));
  if (c.is_string) s += " STRING";
  if (c.optional) s += " OPTIONAL";
  if (c.tensor) s += fmt::format(" tensor {}[{}]", DTypeName(c.tensor->dtype), fmt::join(c.tensor->shape, ","));
  if (c.blob) s += " blob";
  return s;
}

// Appending needs the source's columns to be the table's, in the same order and types. An
// OPTIONAL table column accepts a source column without nulls.
// `first_file` is the source file that set the source's columns.
Status CheckAppendSchema(const std::vector<ColumnSpec>& table, const std::vector<ColumnSpec>& source,
                         const std::string& table_dir, const std::string& first_file) {
  auto mismatch = [&](const std::string& what) {
    return Status::InvalidArgument(fmt::format("ingest: schema mismatch between table '{}' and source file '{}': {} (use "
                                               "`mode` overwrite to replace the table)", table_dir, first_file, what));
  };
  if (table.size() != source.size()) {
    std::vector<std::string> a, b;
    for (const auto& c : table) a.push_back(c.name);
    for (const auto& c : source) b.push_back(c.name);
    return mismatch(fmt::format("the table has columns [{}], the source [{}]", fmt::join(a, ", "), fmt::join(b, ", ")));
  }
  for (size_t i = 0; i < table.size(); ++i) {
    const ColumnSpec& t = table[i];
    const ColumnSpec& s = source[i];
    bool same = t.name == s.name && t.type == s.type && t.is_string == s.is_string && t.tensor == s.tensor &&
                t.blob == s.blob && (t.optional || !s.optional);
    if (!same) {
      return mismatch(fmt::format("column {} is '{}' {} in the table but '{}' {} in the source", i, t.name, DescribeColumn(t),
                                  s.name, DescribeColumn(s)));
    }
  }
  return Status::OK();
}

// Shard `index` of `count` owns source files [index * n / count, (index + 1) * n / count) of the
// sorted listing: contiguous name ranges, so each shard's data files have disjoint `file` ranges.
std::pair<size_t, size_t> ShardRange(size_t n, int64_t index, int64_t count) {
  auto bound = [&](int64_t k) { return static_cast<size_t>(static_cast<unsigned __int128>(n) * static_cast<uint64_t>(k) / static_cast<uint64_t>(count)); };
  return {bound(index), bound(index + 1)};
}

// Names one sharded ingest run: the source, the shard count and the whole sorted listing, so every
// shard of the same run (and a re-run of a killed one) computes the same id, and shards that saw
// different listings are different runs.
std::string ShardRunId(const IngestOptions& o, const SourceSet& sources) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  auto mix = [&](std::string_view bytes) {
    for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;  // separator
  };
  mix(o.source_dir);
  mix(std::to_string(o.shard_count));
  for (const auto& f : sources.files) mix(f.name);
  return fmt::format("{:016x}", h);
}

// The metaData action of a table created (or overwritten) by this ingest, or of an append that
// changes the table's metadata (a new column, new image classes, an identity column's high-water
// mark): the table's own (its id, name, description, format, creation time and configuration kept)
// where there is one. `columns` is the schema it declares: the source's, or (appending) the table's.
delta::Metadata NewTableMetadata(const IngestOptions& o, const SourceSet& sources, const std::vector<ColumnSpec>& columns,
                                 const std::string& partition, const delta::Snapshot* snap) {
  delta::Metadata meta = snap ? snap->metadata : delta::Metadata{};
  if (snap == nullptr) {
    meta.id = RandomUuid();
    meta.created_time = EpochMillis();
  }
  meta.schema_string = delta::SchemaToSparkJson(columns, snap ? snap->metadata.schema_string : "");
  delta::RaiseMaxColumnId(columns, &meta);
  const std::string tensors = TensorSpecsToJson(columns);
  if (tensors != "{}" || meta.configuration.count(kTensorsMetadataKey)) meta.configuration[kTensorsMetadataKey] = tensors;
  if (std::any_of(columns.begin(), columns.end(), [](const ColumnSpec& c) { return c.blob; })) {
    meta.configuration[kBlobsMetadataKey] = BlobColumnsToJson(columns);
  } else {
    meta.configuration.erase(kBlobsMetadataKey);
  }
  for (const auto& [key, value] : sources.metadata) meta.configuration[key] = value;
  // An append that changes the metadata (new image classes or formats) keeps the table's codec.
  if (snap == nullptr || o.mode == IngestMode::kOverwrite) meta.configuration[kCodecPolicyKey] = CodecName(o.codec);
  if (snap == nullptr || o.mode == IngestMode::kOverwrite) {
    meta.partition_columns = partition.empty() ? std::vector<std::string>{} : std::vector<std::string>{partition};
  }
  return meta;
}

// Sharded ingest: the shards must not race to create the table (the losers would have to rewrite
// their data files), so the table is created first, empty, by whichever shard gets there first.
Status CreateTableForShards(const IngestOptions& o, const SourceSet& sources) {
  STOKE_ASSIGN_OR_RETURN(StorageLocation where, ResolveStorageLocation(o.table_dir));
  delta::DeltaLog log(*where.storage, where.path);
  STOKE_ASSIGN_OR_RETURN(int64_t version, log.LatestVersion());
  if (version >= 0) return Status::OK();
  std::vector<delta::Action> actions = {delta::Protocol{},
                                        NewTableMetadata(o, sources, sources.columns, o.partition_by, nullptr)};
  nlohmann::json params = {{"description", "created for a sharded ingest"}, {"source", o.source_dir}};
  auto created = log.Commit(-1, std::move(actions), delta::CommitKind::kExclusive, "CREATE TABLE", params);
  if (created.ok() || created.status().code() == StatusCode::kConflict) return Status::OK();  // another shard won
  return created.status().WithContext(fmt::format("ingest into '{}'", o.table_dir));
}

// A partition directory name, escaped as Hive and Spark do (ExternalCatalogUtils.escapePathName).
std::string PartitionDirectory(const std::string& column, const std::string& value) {
  auto escape = [](const std::string& s) {
    if (s.empty()) return std::string("__HIVE_DEFAULT_PARTITION__");
    std::string out;
    for (unsigned char c : s) {
      if (c < 0x20 || c == 0x7F || std::string_view("\"#%'*/:=?\\{[]^").find(static_cast<char>(c)) != std::string_view::npos) {
        out += fmt::format("%{:02X}", c);
      } else {
        out += static_cast<char>(c);
      }
    }
    return out;
  };
  return escape(column) + "=" + escape(value);
}

// Writes the sample index of `version` (what a loader opening it would build) from the pages of
// the files this process wrote and an older cached index, so that the first load reads no footer:
// at 650,000 files reading them took 20 s or more. Skipped when some other file's footer would have
// to be read (a table never loaded since an earlier ingest; another shard's files not indexed yet).
// A failure is logged, never an error: the commit stands, and a loader builds the index itself.
void WriteSampleIndex(const std::string& table, int64_t version, const delta::Snapshot& state,
                      const SampleIndex::WrittenFiles& files) {
  if (files.tensor_columns.empty()) return;
  SampleIndex::Options options;
  options.written = &files;
  options.read_footers = false;  // other files come from an older index, or the loader reads them
  options.snapshot = &state;     // the committed version's (not read from the log again)
  auto index = SampleIndex::Open(table, version, options);
  if (!index.ok() && index.status().code() == StatusCode::kNotFound) {
    STOKE_LOG(kInfo, "ingest.sample_index", "table={} version={} skipped: {}", table, version, index.status().message());
  } else if (!index.ok()) {
    STOKE_LOG(kWarn, "ingest.sample_index", "table={} version={} error=\"{}\" (a loader builds it when it opens)", table,
              version, index.status().ToString());
  }
}

// Which source files this ingest may add: all of them, or its shard's contiguous range of the listing.
struct ShardPlan {
  bool sharded = false;
  std::string run;                      // ShardRunId when sharded, else ""
  // Where the shard's data files go, under the table root or the partition's directory:
  // "shard-<index>-of-<count>" when sharded, else "" (the directory itself). Shards that created
  // their files in one directory queued on that directory's lock (the kernel's waiters spin while
  // its holder runs, and parallel file systems serialise creations in one directory across
  // clients): four shards of 100,000 one-row files on 2 cores, alternated, took 10.4-15.8 s and
  // 18-27 CPU-seconds in their own directories against 14.3-21.8 s and 25-41 CPU-seconds in one.
  std::string subdir;
  size_t begin = 0, end = 0;            // the source files [begin, end) of the sorted listing
  std::span<const DirEntry> candidates;  // those files (sorted by name), in the plan's listing
};

// The files of `planned` that o's shard (--shard index/count) may add.
ShardPlan PlanShard(const IngestOptions& o, const SourceSet& planned) {
  ShardPlan shard;
  shard.sharded = o.shard_count > 1;
  shard.run = shard.sharded ? ShardRunId(o, planned) : "";
  shard.subdir = shard.sharded ? ShardDirectoryName(o.shard_index, o.shard_count) : "";
  std::tie(shard.begin, shard.end) = ShardRange(planned.files.size(), o.shard_index, o.shard_count);
  shard.candidates = std::span<const DirEntry>(planned.files).subspan(shard.begin, shard.end - shard.begin);
  return shard;
}

// The table's latest version as one attempt reads it, and what it means for the sources.
struct TableState {
  int64_t read_version = -1;            // -1: there is no table yet
  std::optional<delta::Snapshot> snap;  // the snapshot at read_version, when there is one
  std::optional<SourceSet> merged;      // appending images: the plan relabelled to the table's classes
  SourcesInTable in_table;              // appending: what the table holds of the candidates
  int64_t max_id = -1;                  // appending: the largest id outside this shard's run
  bool schema_changes = false;          // the commit writes a metaData action (and a protocol, creating)
  // Appending: the table's columns, with `source_location` and `source_version` added when it had none (a
  // table written before stoke recorded locations): the schema a metaData action declares.
  std::vector<ColumnSpec> columns;
  RowConstraints constraints;           // the table's invariants and CHECK constraints, for the new rows
  // When the table's `id` column is an identity column: its values are generated as it declares, and
  // the commit raises its high-water mark (set once the rows are known).
  std::optional<delta::IdentityColumn> id_identity;
  std::optional<int64_t> high_water_mark;
};

// The identity columns of the table an ingest writes (identity_columns.h): stoke's `id` column may be
// one (TableState::id_identity: its values are generated, unsharded); any other the source has is a
// column whose values the source supplies, which the table must allow
// (delta.identity.allowExplicitInsert).
Result<std::optional<delta::IdentityColumn>> IdIdentity(const delta::Metadata& metadata, const SourceSet& planned,
                                                         const IngestOptions& o) {
  const std::string where = fmt::format("ingest into '{}'", o.table_dir);
  STOKE_ASSIGN_OR_RETURN(auto identities, delta::IdentityColumns(metadata.schema_string, where));
  std::optional<delta::IdentityColumn> id;
  for (delta::IdentityColumn& c : identities) {
    const bool supplied = std::any_of(planned.columns.begin(), planned.columns.end(),
                                      [&](const ColumnSpec& s) { return s.name == c.name; });
    if (c.name == "id" && !planned.columns.empty() && planned.columns[0].name == "id") {
      id = std::move(c);
    } else if (supplied && !c.allow_explicit_insert) {
      return Status::Unsupported(fmt::format("{}: column '{}' is an identity column whose values the table generates "
                                             "(identityColumns; delta.identity.allowExplicitInsert is false), and the "
                                             "source supplies them; nothing was written",
                                             where, c.name));
    }
  }
  if (id && o.shard_count > 1) {
    return Status::Unsupported(fmt::format("ingest --shard: table '{}' generates the values of its identity column 'id' "
                                           "(identityColumns), which shards would race for: ingest it unsharded; "
                                           "nothing was written",
                                           o.table_dir));
  }
  return id;
}

// Whether an append writes the rows of `file` (new, or changed with OnChanged::kAppend).
bool WritesFile(const TableState& table, const IngestOptions& o, uint32_t file) {
  const InTable state = table.in_table.Of(file);
  return state == InTable::kNo || (state == InTable::kChanged && o.on_changed == OnChanged::kAppend);
}

// A table written before stoke recorded source locations gains the columns `source_location`
// and `source_version` after `file`, where every plan has them; its older rows read null there.
bool AddLocationColumns(std::vector<ColumnSpec>* table, const SourceSet& planned) {
  auto has = [&](const char* name) {
    return std::any_of(table->begin(), table->end(), [&](const ColumnSpec& c) { return c.name == name; });
  };
  if (!planned.has_locations || table->size() < 2 || (*table)[1].name != "file" || has(kSourceLocationColumn) ||
      has(kSourceVersionColumn)) {
    return false;
  }
  table->insert(table->begin() + 2, planned.columns.begin() + 2, planned.columns.begin() + 4);
  return true;
}

// Reads the table's latest version. Appending: the source's schema must be the table's (else
// InvalidArgument), images are relabelled to the table's classes, and the candidates already in the
// table and the largest id are read (ReadIngestedFiles). Overwriting: only schema_changes is set.
Result<TableState> ReadTableState(Storage& fs, const delta::DeltaLog& log, const IngestOptions& o, SourceSet& planned,
                                  const ShardPlan& shard) {
  TableState table;
  STOKE_ASSIGN_OR_RETURN(table.read_version, log.LatestVersion());
  table.schema_changes = table.read_version < 0;
  if (table.read_version < 0) return table;
  STOKE_ASSIGN_OR_RETURN(table.snap, log.ReadSnapshot(table.read_version));
  const auto command = o.mode == IngestMode::kOverwrite ? delta::WriteCommand::kOverwrite : delta::WriteCommand::kAppend;
  STOKE_RETURN_IF_ERROR(delta::CheckWritable(*table.snap, command, o.table_dir));
  const delta::Metadata& metadata = table.snap->metadata;
  STOKE_ASSIGN_OR_RETURN(auto table_columns, delta::ColumnsFromSnapshot(*table.snap, o.table_dir));
  const std::string where = fmt::format("ingest into '{}'", o.table_dir);
  if (o.mode != IngestMode::kOverwrite) {
    if (AddLocationColumns(&table_columns, planned)) table.schema_changes = true;
    // Another writer's table (no `file` column to find ingested files by) cannot match the source's
    // schema: said as a mismatch of columns before its files are read for names.
    if (std::none_of(table_columns.begin(), table_columns.end(), [](const ColumnSpec& c) { return c.name == "file"; })) {
      STOKE_RETURN_IF_ERROR(CheckAppendSchema(table_columns, planned.columns, o.table_dir, planned.FilePath(0)));
    }
    STOKE_RETURN_IF_ERROR(delta::MapColumns(*table.snap, &table_columns, where));  // the columns added
    table.columns = table_columns;
    // The files already in the table are skipped; the labels of the others take the table's types.
    STOKE_RETURN_IF_ERROR(ReadIngestedFiles(fs, *table.snap, table_columns, log.table_dir(), planned, shard.begin,
                                            shard.candidates, shard.run, &table.in_table, &table.max_id));
    STOKE_RETURN_IF_ERROR(AdoptTableLabelTypes(
        table_columns, o.labels_csv, [&](uint32_t f) { return WritesFile(table, o, f); }, &planned));
  }
  Status same = CheckAppendSchema(table_columns, planned.columns, o.table_dir, planned.FilePath(0));
  if (o.mode == IngestMode::kOverwrite) {
    // An overwrite also records its codec (OPTIMIZE rewrites with the table's codec) and its
    // partitioning (--partition-by alone).
    auto codec = metadata.configuration.find(kCodecPolicyKey);
    std::vector<std::string> partitioning;
    if (!o.partition_by.empty()) partitioning.push_back(o.partition_by);
    table.schema_changes = !same.ok() || codec == metadata.configuration.end() || codec->second != CodecName(o.codec) ||
                           partitioning != metadata.partition_columns;
    STOKE_RETURN_IF_ERROR(delta::MapColumns(*table.snap, &planned.columns, where));
    STOKE_ASSIGN_OR_RETURN(table.id_identity, IdIdentity(metadata, planned, o));
    STOKE_ASSIGN_OR_RETURN(table.constraints,
                           RowConstraints::FromMetadata(metadata, planned.columns, partitioning, "ingest", o.table_dir));
    return table;
  }
  STOKE_RETURN_IF_ERROR(same);
  STOKE_ASSIGN_OR_RETURN(table.id_identity, IdIdentity(metadata, planned, o));
  // The data files name the columns as the table does (column mapping: physical names, field ids).
  for (size_t i = 0; i < table_columns.size(); ++i) {
    planned.columns[i].physical_name = table_columns[i].physical_name;
    planned.columns[i].field_id = table_columns[i].field_id;
  }
  STOKE_ASSIGN_OR_RETURN(table.constraints, RowConstraints::FromMetadata(metadata, table_columns, metadata.partition_columns,
                                                                         "ingest", o.table_dir));
  STOKE_ASSIGN_OR_RETURN(table.merged, MergeImageMetadata(metadata.configuration, planned));
  // New classes or image formats change the table's configuration.
  for (const auto& [key, value] : (table.merged ? *table.merged : planned).metadata) {
    auto it = metadata.configuration.find(key);
    if (it == metadata.configuration.end() || it->second != value) table.schema_changes = true;
  }
  return table;
}

// Sharded ingest into a table written before stoke recorded locations: the table gains the two
// columns in a commit of its own, made by whichever shard gets there first, rather than in every
// shard's commit (each of which would then conflict with the others' and write its shard again).
// Nothing is committed when the rest of the table's schema is not the source's (the shards report
// the mismatch).
Status AddLocationColumnsForShards(const IngestOptions& o, const SourceSet& sources) {
  STOKE_ASSIGN_OR_RETURN(StorageLocation where, ResolveStorageLocation(o.table_dir));
  delta::DeltaLog log(*where.storage, where.path);
  for (int attempt = 0; attempt < 10; ++attempt) {
    STOKE_ASSIGN_OR_RETURN(delta::Snapshot snap, log.ReadSnapshot());
    STOKE_ASSIGN_OR_RETURN(auto columns, delta::ColumnsFromSnapshot(snap, o.table_dir));
    if (!AddLocationColumns(&columns, sources)) return Status::OK();
    if (!CheckAppendSchema(columns, sources.columns, o.table_dir, sources.FilePath(0)).ok()) return Status::OK();
    STOKE_RETURN_IF_ERROR(delta::CheckWritable(snap, delta::WriteCommand::kAppend, o.table_dir));
    STOKE_RETURN_IF_ERROR(delta::MapColumns(snap, &columns, fmt::format("ingest into '{}'", o.table_dir)));
    // What the shards refuse must not be preceded by this commit.
    if (delta::AssignsRowIds(snap) || !IdIdentity(snap.metadata, sources, o).ok()) return Status::OK();
    STOKE_RETURN_IF_ERROR(
        RowConstraints::FromMetadata(snap.metadata, columns, snap.metadata.partition_columns, "ingest", o.table_dir).status());
    delta::Metadata meta = snap.metadata;
    meta.schema_string = delta::SchemaToSparkJson(columns, snap.metadata.schema_string);
    delta::RaiseMaxColumnId(columns, &meta);
    nlohmann::json params = {{"columns", fmt::format("{}, {}", kSourceLocationColumn, kSourceVersionColumn)}};
    auto v = log.Commit(snap.version, {meta}, delta::CommitKind::kExclusive, "ADD COLUMNS", params);
    if (v.ok() || v.status().code() != StatusCode::kConflict) return v.status();
  }
  return Status::OK();  // others keep committing: the shards' own commits add the columns
}

// The column an ingest partitions by, and the labels column that holds its values.
struct PartitionColumn {
  std::string name;             // "" when not partitioned
  std::optional<size_t> label;  // in sources.labels; set when partitioned
};

// --partition-by, or when appending the table's partition column (--partition-by must then name it:
// InvalidArgument; Unsupported for more than one). It must be a labels column of `sources`.
Result<PartitionColumn> ChoosePartitionColumn(const IngestOptions& o, const TableState& table, const SourceSet& sources) {
  PartitionColumn partition{o.partition_by, std::nullopt};
  if (table.snap && o.mode != IngestMode::kOverwrite) {
    const auto& pc = table.snap->metadata.partition_columns;
    if (pc.size() > 1) return Status::Unsupported(fmt::format("ingest into '{}': more than one partition column", o.table_dir));
    std::string table_partition = pc.empty() ? "" : pc[0];
    if (partition.name.empty()) partition.name = table_partition;
    if (partition.name != table_partition) {
      return Status::InvalidArgument(fmt::format("ingest: table '{}' is {}; `partition_by` '{}' does not match", o.table_dir,
                                                 table_partition.empty() ? "not partitioned" : "partitioned by '" + table_partition + "'",
                                                 partition.name));
    }
  }
  if (partition.name.empty()) return partition;
  std::vector<std::string> names;
  for (size_t l = 0; l < sources.labels.size(); ++l) {
    names.push_back(sources.labels[l].spec.name);
    if (sources.labels[l].spec.name == partition.name) partition.label = l;
  }
  if (!partition.label) {
    return Status::InvalidArgument(fmt::format("ingest: `partition_by` '{}' is not a labels column (labels: {})", partition.name,
                                               names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "))));
  }
  return partition;
}

// The items of the shard's source files to write: those not in the table yet, and the changed ones
// when o.on_changed is kAppend (a file's samples are always written together). Counts the files new,
// skipped and changed, and the bytes read, in `report`, and lists the changed files there.
std::vector<int64_t> ItemsToWrite(const IngestOptions& o, const SourceSet& sources, const ShardPlan& shard,
                                  const TableState& table, IngestReport* report) {
  std::vector<int64_t> rows;
  for (size_t i = shard.begin; i < shard.end; ++i) {
    const auto file = static_cast<uint32_t>(i);
    const InTable state = table.in_table.Of(file);
    if (state == InTable::kYes) ++report->skipped;
    if (state == InTable::kNo) ++report->new_files;
    if (state == InTable::kChanged) {
      if (++report->changed <= static_cast<int64_t>(IngestReport::kMaxChangedFilesListed)) {
        report->changed_files.push_back(
            {sources.FileLocation(file), table.in_table.table_versions.at(i - shard.begin), sources.FileVersion(file)});
      }
    }
    if (!WritesFile(table, o, file)) continue;
    for (int64_t k = sources.item_starts[i]; k < sources.item_starts[i + 1]; ++k) rows.push_back(k);
    report->bytes_in += static_cast<int64_t>(sources.files[i].size);
  }
  return rows;
}

// OnChanged::kError: InvalidArgument naming the changed files, before anything is written.
Status RefuseChangedFiles(const IngestOptions& o, const IngestReport& report) {
  if (o.on_changed != OnChanged::kError || report.changed == 0) return Status::OK();
  std::string list;
  for (size_t i = 0; i < report.changed_files.size() && i < 10; ++i) {
    const ChangedSourceFile& f = report.changed_files[i];
    list += fmt::format("\n  {} (the table holds {}, the file is now {})", f.location, f.table_version, f.source_version);
  }
  if (report.changed > 10) list += fmt::format("\n  and {} more", report.changed - 10);
  return Status::InvalidArgument(fmt::format(
      "ingest into '{}': {} source file{} changed since {} ingested (`on_changed` error); nothing was written:{}\n"
      "(`on_changed` append adds the new versions, `on_changed` skip leaves them out)",
      o.table_dir, report.changed, report.changed == 1 ? "" : "s", report.changed == 1 ? "it was" : "they were", list));
}

// Rows of one partition value (all rows without partitioning); ids follow the source order.
struct Partition {
  std::optional<std::string> value;
  std::string dir;  // relative to the table
  std::vector<int64_t> rows, ids;
};

// `rows` (items of `sources`) by partition value ("" is null), with their ids. Unsharded: ids
// continue the table's (from `ids.first`, `ids.step` apart: dense, or an identity column's). Sharded: id = base + the sample's index in the whole
// sorted listing's items, where base follows the largest id outside this run, so every shard (and a
// re-run of a killed one) computes the same ids without talking to the others: unique always, dense
// over the run when the table held none of its files before.
struct IdSequence {
  int64_t first = 0;
  int64_t step = 1;
};
std::map<std::string, Partition> GroupByPartition(const SourceSet& sources, const std::vector<int64_t>& rows,
                                                  const PartitionColumn& partition, IdSequence ids, bool sharded) {
  std::map<std::string, Partition> partitions;
  for (size_t k = 0; k < rows.size(); ++k) {
    std::string value = partition.label ? sources.labels[*partition.label].cells[sources.item(rows[k]).file] : "";
    Partition& part = partitions[value];
    if (part.rows.empty() && partition.label) {
      part.dir = PartitionDirectory(partition.name, value);
      if (!value.empty()) part.value = value;
    }
    part.rows.push_back(rows[k]);
    part.ids.push_back(ids.first + ids.step * (sharded ? rows[k] : static_cast<int64_t>(k)));
  }
  return partitions;
}

// The data files of one attempt, each with its partition, and the tensor columns whose pages they
// list for the sample index.
struct DataFiles {
  std::vector<WrittenFile> written;
  std::vector<const Partition*> partition_of;  // per entry of `written`
  std::vector<std::string> index_columns;
};

// Deletes the files of `written`, ignoring errors (VACUUM removes what is left).
void DeleteDataFiles(Storage& fs, const std::vector<WrittenFile>& written) {
  for (const auto& w : written) (void)fs.Delete(w.path);
}

// What the commit's caller keeps of the data files it wrote, once their add actions are made: their
// pages, for the sample index of the version committed, and their paths, to delete them if the
// commit fails. About 150 bytes a file where the WrittenFile entries took 330 (100 MB less at
// 650,000 files, during the commit and its checkpoint).
struct AfterCommit {
  SampleIndex::WrittenFiles index;
  std::string paths;  // the files' paths, each followed by a NUL (no path holds one)

  void DeleteFiles(Storage& fs) const {
    for (size_t at = 0; at < paths.size();) {
      const size_t end = paths.find('\0', at);
      (void)fs.Delete(paths.substr(at, end - at));
      at = end + 1;
    }
  }
};

// Moves what AfterCommit keeps out of `files`, and frees the rest.
AfterCommit KeepForAfterCommit(DataFiles&& files) {
  AfterCommit kept;
  kept.index.tensor_columns = std::move(files.index_columns);
  kept.index.files.reserve(kept.index.tensor_columns.empty() ? 0 : files.written.size());
  size_t bytes = 0;
  for (const WrittenFile& w : files.written) bytes += w.path.size() + 1;
  kept.paths.reserve(bytes);
  for (WrittenFile& w : files.written) {
    if (!kept.index.tensor_columns.empty() && !w.pages.rel_path.empty()) kept.index.files.push_back(std::move(w.pages));
    kept.paths += w.path;
    kept.paths += '\0';
  }
  std::vector<WrittenFile>().swap(files.written);
  std::vector<const Partition*>().swap(files.partition_of);
  return kept;
}

// Writes the rows of each of `partitions` as data files under `table_dir` (under their final names:
// they are found only through the commit), without the partition column. On an error the files
// written are deleted.
Result<DataFiles> WriteDataFiles(Storage& fs, const std::string& table_dir, const IngestOptions& o, const SourceSet& sources,
                                 const PartitionColumn& partition, const std::map<std::string, Partition>& partitions,
                                 const std::string& shard_subdir, const WriterOptions& wopts) {
  size_t num_rows = 0;
  for (const auto& [value, part] : partitions) num_rows += part.rows.size();
  FileSetLayout layout = LayoutForSizes(sources.sample_bytes, static_cast<int64_t>(num_rows), o.row_group_bytes,
                                        o.target_file_bytes);
  if (o.rows_per_file > 0) {
    layout.rows_per_file = o.rows_per_file;
    layout.rows_per_group = std::min(layout.rows_per_group, o.rows_per_file);
  }
  std::optional<SourceSet> without_partition;
  if (partition.label) without_partition = WithoutLabel(sources, *partition.label);
  const SourceSet& file_sources = without_partition ? *without_partition : sources;
  ProgressBar bar("ingest", num_rows, "samples", o.progress ? ProgressBar::Mode::kAuto : ProgressBar::Mode::kOff);
  DataFiles out;
  // At 650,000 one-row files, growing these vectors by doubling held two copies (hundreds of MB); a
  // single partition's files are moved in whole.
  const size_t max_files =
      static_cast<size_t>((static_cast<int64_t>(num_rows) + layout.rows_per_file - 1) / layout.rows_per_file) + partitions.size();
  if (partitions.size() > 1) out.written.reserve(max_files);
  out.partition_of.reserve(max_files);
  Status write_status;
  // The sample index of the version committed is written from the files' pages as written.
  for (const ColumnSpec& c : file_sources.columns) {
    if (c.paged()) out.index_columns.push_back(c.file_name());  // as the index names them: as data files do
  }
  for (const auto& [value, part] : partitions) {
    FileSetLayout l = layout;
    l.storage = &fs;
    l.write_in_place = true;  // data files are found only through the commit
    l.dir = JoinPath(JoinPath(table_dir, part.dir), shard_subdir);  // JoinPath skips an empty part
    l.index_root = table_dir;
    l.index_columns = out.index_columns;
    auto files = WriteSourceRows(file_sources, part.rows, part.ids, l, wopts, o.threads, &bar);
    if (!files.ok()) {
      write_status = files.status();
      break;
    }
    out.partition_of.insert(out.partition_of.end(), files->size(), &part);
    if (out.written.empty()) {
      out.written = std::move(*files);
    } else {
      std::move(files->begin(), files->end(), std::back_inserter(out.written));
    }
  }
  bar.Finish();
  if (!write_status.ok()) {
    DeleteDataFiles(fs, out.written);
    return write_status;
  }
  return out;
}

// The commit's actions: a protocol (creating the table) and a metaData when the schema changes, a
// remove of every file of the table when overwriting, and an add per data file (its statistics moved
// out of `written`). Counts the files and rows in `report`.
std::vector<delta::Action> WriteActions(const IngestOptions& o, const SourceSet& sources, const TableState& table,
                                        const PartitionColumn& partition, const ShardPlan& shard,
                                        std::vector<WrittenFile>& written, const std::vector<const Partition*>& partition_of,
                                        IngestReport* report) {
  const bool overwrite = o.mode == IngestMode::kOverwrite;
  const std::optional<delta::Snapshot>& snap = table.snap;
  std::vector<delta::Action> actions;
  actions.reserve(written.size() + (overwrite && snap ? snap->files.size() : 0) + 2);
  if (table.schema_changes) {
    if (table.read_version < 0) actions.push_back(delta::Protocol{});
    const bool append = snap && o.mode != IngestMode::kOverwrite;
    delta::Metadata meta = NewTableMetadata(o, sources, append ? table.columns : sources.columns, partition.name,
                                            snap ? &*snap : nullptr);
    if (table.high_water_mark) meta.schema_string = delta::WithHighWaterMark(meta.schema_string, "id", *table.high_water_mark);
    actions.push_back(std::move(meta));
  }
  const int64_t now_ms = EpochMillis();
  // Partition values are keyed by the column's physical name under column mapping.
  const std::string partition_key =
      delta::FileColumnName(snap && !overwrite ? table.columns : sources.columns, partition.name);
  if (overwrite && snap) {
    for (const auto& f : snap->files) {
      actions.push_back(delta::RemoveOf(f, now_ms, /*data_change=*/true));
      ++report->files_removed;
    }
  }
  for (size_t i = 0; i < written.size(); ++i) {
    WrittenFile& w = written[i];
    const Partition* part = partition_of[i];
    delta::AddFile a;
    const std::string name = BaseName(w.path);
    a.path = delta::EncodePath(JoinPath(JoinPath(part->dir, shard.subdir), name));
    if (partition.label) a.partition_values[partition_key] = part->value;
    a.size = static_cast<int64_t>(w.bytes);
    a.modification_time = w.modification_time_ms;
    a.data_change = true;
    a.stats = std::move(w.stats);
    if (shard.sharded) a.tags[kIngestRunTag] = shard.run;
    actions.push_back(std::move(a));
    report->rows += w.rows;
    report->bytes_out += static_cast<int64_t>(w.bytes);
    ++report->files_added;
  }
  return actions;
}

// The WRITE commit's operationParameters, and which winners it may be committed on top of.
struct WriteCommit {
  nlohmann::json params;
  std::function<bool(const std::vector<delta::Action>&)> exclusive_allows;  // null unless sharded
};

// A sharded ingest records its shard, run and id base; a winner that is another shard of the same run,
// with the same id base, added other source files with other ids: the commit stays valid on top of
// it. Anything else re-plans.
WriteCommit WriteCommitParameters(const IngestOptions& o, const std::string& partition, const ShardPlan& shard,
                                  int64_t max_id) {
  WriteCommit commit;
  commit.params = {{"mode", o.mode == IngestMode::kOverwrite ? "Overwrite" : "Append"},
                   {"partitionBy", delta::JsonArrayText(partition)},
                   {"source", o.source_dir}};
  if (!shard.sharded) return commit;
  const std::string shard_name = fmt::format("{}/{}", o.shard_index, o.shard_count);
  const std::string base = std::to_string(max_id + 1);
  commit.params["shard"] = shard_name;
  commit.params["ingestRun"] = shard.run;
  commit.params["idBase"] = base;
  commit.exclusive_allows = [run = shard.run, base, shard_name](const std::vector<delta::Action>& winner) {
    for (const auto& a : winner) {
      const auto* info = std::get_if<delta::CommitInfo>(&a);
      if (info == nullptr) continue;
      const auto& p = info->value.value("operationParameters", nlohmann::json::object());
      auto str = [&](const char* key) { return p.is_object() && p.contains(key) && p[key].is_string() ? p[key].get<std::string>() : ""; };
      return str("ingestRun") == run && str("idBase") == base && !str("shard").empty() && str("shard") != shard_name;
    }
    return false;
  };
  return commit;
}

// The ids of `count` new rows: after the table's largest, dense; or, where `id` is an identity column,
// its next values, whose last becomes the high-water mark the commit records.
Result<IdSequence> NewIds(const IngestOptions& o, size_t count, TableState* table) {
  if (!table->id_identity) return IdSequence{table->max_id + 1, 1};
  const auto n = static_cast<int64_t>(count);
  STOKE_ASSIGN_OR_RETURN(const int64_t first, delta::FirstIdentityValue(*table->id_identity, table->max_id, n,
                                                                        fmt::format("ingest into '{}'", o.table_dir)));
  if (n > 0) {
    table->high_water_mark = first + (n - 1) * table->id_identity->step;
    table->schema_changes = true;
  }
  return IdSequence{first, table->id_identity->step};
}

// One attempt: read the table's latest version, write the data files, commit. The commit is
// exclusive (it fails if anyone committed after the version read), because what it writes depends
// on that version: the ids continue the table's, and files already in it are skipped.
// Once the data files are written, the plan's items are released (SourceSet::ReleaseItems): the
// commit, its state and its checkpoint are the peak of a large ingest, and the listing and labels
// would only add to it. The caller plans again before another attempt.
Result<IngestReport> IngestAttempt(const IngestOptions& o, SourceSet& planned, const WriterOptions& wopts) {
  STOKE_ASSIGN_OR_RETURN(StorageLocation where, ResolveStorageLocation(o.table_dir));
  Storage& fs = *where.storage;
  Stopwatch watch;
  IngestReport report;
  delta::DeltaLog log(fs, where.path);  // where.path is o.table_dir in messages
  const ShardPlan shard = PlanShard(o, planned);
  report.source_files = static_cast<int64_t>(shard.candidates.size());
  STOKE_ASSIGN_OR_RETURN(TableState table, ReadTableState(fs, log, o, planned, shard));
  const bool row_ids = table.snap && delta::AssignsRowIds(*table.snap);
  if (row_ids && shard.sharded) {  // row ids depend on the version committed, which shards race for
    return Status::Unsupported(fmt::format("ingest --shard: table '{}' tracks row ids (rowTracking): ingest it "
                                           "unsharded; nothing was written", o.table_dir));
  }
  // Appending relabels images to the table's classes (and merges the image formats): `sources` is the
  // plan as this version of the table sees it.
  const SourceSet& sources = table.merged ? *table.merged : planned;
  STOKE_ASSIGN_OR_RETURN(PartitionColumn partition, ChoosePartitionColumn(o, table, sources));
  std::vector<int64_t> rows = ItemsToWrite(o, sources, shard, table, &report);
  STOKE_RETURN_IF_ERROR(RefuseChangedFiles(o, report));
  if (rows.empty() && o.mode != IngestMode::kOverwrite) {
    report.version = table.read_version;
    report.seconds = watch.Seconds();
    return report;  // nothing new: the table already holds every source file
  }
  STOKE_ASSIGN_OR_RETURN(const IdSequence ids, NewIds(o, rows.size(), &table));
  std::map<std::string, Partition> partitions = GroupByPartition(sources, rows, partition, ids, shard.sharded);
  DataFiles files;
  {
    auto written = WriteDataFiles(fs, where.path, o, sources, partition, partitions, shard.subdir, wopts);
    planned.ReleaseItems();
    if (table.merged) table.merged->ReleaseItems();
    std::vector<int64_t>().swap(rows);
    for (auto& [value, part] : partitions) {
      std::vector<int64_t>().swap(part.rows);
      std::vector<int64_t>().swap(part.ids);
    }
    if (!written.ok()) return written.status();
    files = std::move(*written);
  }
  for (const WrittenFile& w : files.written) {
    Status kept = table.constraints.CheckFile(fs, w.path);
    if (kept.ok()) continue;
    DeleteDataFiles(fs, files.written);
    return kept.WithContext(fmt::format("ingest into '{}' (nothing was written)", o.table_dir));
  }
  std::vector<delta::Action> actions = WriteActions(o, sources, table, partition, shard, files.written, files.partition_of, &report);
  if (row_ids) {  // the commit is exclusive: it lands on the version after the one read, or plans again
    Status assigned = delta::AssignRowIds(*table.snap, table.read_version + 1, &actions);
    if (!assigned.ok()) DeleteDataFiles(fs, files.written);
    STOKE_RETURN_IF_ERROR(assigned);
  }
  const AfterCommit kept = KeepForAfterCommit(std::move(files));
  ReleaseFreeHeapMemory();  // the plan's items and the written files' entries
  WriteCommit commit = WriteCommitParameters(o, partition.name, shard, table.max_id);
  // The snapshot moves into the commit and comes back as the committed version's (for its index).
  delta::Snapshot state = table.snap ? std::move(*table.snap) : delta::Snapshot{};
  table.snap.reset();
  auto version = log.Commit(table.read_version, std::move(actions), delta::CommitKind::kExclusive, "WRITE", commit.params,
                            /*max_attempts=*/100, std::move(commit.exclusive_allows), &state);
  if (!version.ok()) {
    // Nothing references the new files: remove them rather than leave orphans for VACUUM. Except
    // after an I/O error, which may have hit the commit's own put after it took effect (a local
    // directory sync after the link, a PUT whose response was lost): the files then stay, and
    // VACUUM removes them if the commit did not happen.
    if (version.status().code() != StatusCode::kIOError) kept.DeleteFiles(fs);
    return version.status().WithContext(fmt::format("ingest into '{}'", o.table_dir));
  }
  report.version = *version;
  STOKE_LOG(kInfo, "ingest.committed", "table={} version={} files={} rows={}", o.table_dir, *version, report.files_added,
            report.rows);
  WriteSampleIndex(o.table_dir, *version, state, kept.index);
  report.seconds = watch.Seconds();
  return report;
}

// Ingests into o.table_dir (IngestSources, without the clean-up of a directory it created).
Result<IngestReport> IngestInto(const IngestOptions& o) {
  if (o.target_file_bytes <= 0 || o.row_group_bytes <= 0 || o.rows_per_file < 0) {
    return Status::InvalidArgument("ingest: sizes and `rows_per_file` must be positive");
  }
  WriterOptions wopts;
  STOKE_RETURN_IF_ERROR(SetCodecPolicy(o.codec, &wopts));
  wopts.compression_level = o.compression_level;
  if (o.shard_count < 1 || o.shard_index < 0 || o.shard_index >= o.shard_count) {
    return Status::InvalidArgument(fmt::format("ingest: `shard` {}/{}: needs 0 <= index < count", o.shard_index, o.shard_count));
  }
  if (o.shard_count > 1 && o.mode != IngestMode::kAppend) {
    return Status::InvalidArgument("ingest: `shard` needs `mode` append (an overwrite cannot be split between processes)");
  }
  SourceOptions plan_options = SourceOptionsOf(o);
  plan_options.record_locations = true;
  STOKE_ASSIGN_OR_RETURN(SourceSet sources, PlanSources(plan_options, "ingest"));
  ReleaseFreeHeapMemory();  // what listing and joining the labels freed (hundreds of MB at 650,000 files)
  STOKE_RETURN_IF_ERROR(RefuseToCoverParquetDataset(o.table_dir, "ingest"));
  STOKE_RETURN_IF_ERROR(CreateContainerFor(o.table_dir));
  {
    // The log's directory comes before any data file (on local disks; object stores have no
    // directories): a first ingest killed before its commit leaves a table without a commit, never
    // Parquet files that read as a plain dataset.
    STOKE_ASSIGN_OR_RETURN(StorageLocation where, ResolveStorageLocation(o.table_dir));
    STOKE_RETURN_IF_ERROR(where.storage->CreateDirectories(JoinPath(where.path, delta::kLogDirName)));
  }
  if (o.shard_count > 1) {
    STOKE_RETURN_IF_ERROR(CreateTableForShards(o, sources));
    STOKE_RETURN_IF_ERROR(AddLocationColumnsForShards(o, sources));
  }
  // Two retry loops, nested, for two kinds of losing to another writer:
  // - inside Commit (PublishWithRetries, delta_log.cc), a commit whose version another writer took
  //   first, and which nothing the winners did conflicts with, is written again as the next version
  //   at once: the same actions, no wait (the version is free now);
  // - here, a commit that conflicts (the winners added some of the same source files, or changed
  //   the table's metadata) is planned again from the new version (new ids, their files skipped),
  //   after a jittered backoff that keeps two busy writers from retrying in lock step.
  const RetryPolicy replan{.max_attempts = 50, .initial_backoff_us = 2'000, .max_backoff_us = 50'000};
  for (int attempt = 1;; ++attempt) {
    if (sources.items_released) {
      STOKE_ASSIGN_OR_RETURN(sources, PlanSources(plan_options, "ingest"));
    }
    auto r = IngestAttempt(o, sources, wopts);
    if (r.ok() || r.status().code() != StatusCode::kConflict || !replan.AllowsAnother(attempt)) return r;
    STOKE_LOG(kInfo, "ingest.retry", "table={} attempt={} cause=\"{}\"", o.table_dir, attempt, r.status().message());
    replan.Wait(attempt);
  }
}

}  // namespace

Result<IngestReport> IngestSources(const IngestOptions& o) {
  if (o.table_dir.empty()) return Status::InvalidArgument("ingest: `table_dir` is required");
  // A local table directory this call creates and then fails to fill goes again (when it is still
  // empty: never another writer's files), so that no "table" without a log is left behind.
  auto location = ParseStorageUri(o.table_dir);
  const bool local = location.ok() && location->scheme == StorageScheme::kLocal;
  const std::string log_dir = local ? JoinPath(location->path, delta::kLogDirName) : "";
  const bool created_here = local && LocalStorage().Stat(location->path).status().code() == StatusCode::kNotFound;
  const bool log_created_here = local && LocalStorage().Stat(log_dir).status().code() == StatusCode::kNotFound;
  auto r = IngestInto(o);
  if (!r.ok() && log_created_here) RemoveEmptyLocalDirectory(log_dir);  // still empty: no commit landed
  if (!r.ok() && created_here) RemoveEmptyLocalDirectory(location->path);  // never another writer's files
  return r;
}

}  // namespace stoke
