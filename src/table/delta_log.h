// The Delta Lake transaction log (delta-io/delta PROTOCOL.md) over a table directory:
//
//   <table>/_delta_log/00000000000000000000.json   one JSON action per line
//   <table>/_delta_log/00000000000000000010.checkpoint.parquet   the state at version 10 (see checkpoint.h)
//   <table>/_delta_log/_last_checkpoint            the newest checkpoint's version
//   <table>/part-*.parquet                         data files, paths relative to <table>
//
// New tables use protocol (minReaderVersion 1, minWriterVersion 2). A commit is the creation of the
// next version file with put-if-absent (Storage::PutIfAbsent); whoever loses the race re-reads the
// winners' commits and retries when its actions do not conflict.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "format/parquet_column.h"
#include "format/parquet_metadata.h"
#include "io/storage.h"
#include "stoke/status.h"
#include "table/deletion_vector.h"

namespace stoke::delta {

inline constexpr int kMinReaderVersion = 1;
inline constexpr int kMinWriterVersion = 2;
inline constexpr char kLogDirName[] = "_delta_log";
// A checkpoint is written after every commit whose version is a multiple of this (as Spark does).
inline constexpr int64_t kCheckpointInterval = 10;
// ... and after every commit of more actions than this, whatever its version: replaying one huge
// JSON commit costs far more than reading its checkpoint's Parquet columns.
inline constexpr size_t kCheckpointAfterActions = 10000;

struct Protocol {
  int32_t min_reader_version = kMinReaderVersion;
  int32_t min_writer_version = kMinWriterVersion;
  std::vector<std::string> reader_features;  // only with min_reader_version 3
  std::vector<std::string> writer_features;  // only with min_writer_version 7
};

struct Metadata {
  std::string id;                                  // a UUID, fixed for the table's life
  std::optional<std::string> name;
  std::optional<std::string> description;
  std::string format_provider = "parquet";
  std::map<std::string, std::string> format_options;
  std::string schema_string;                       // Spark's JSON schema (see SchemaToSparkJson)
  std::vector<std::string> partition_columns;
  std::map<std::string, std::string> configuration;  // stoke.tensors, stoke.blobs, ... live here too
  std::optional<int64_t> created_time;             // ms since the epoch
};

// The fields row tracking and clustering give an add or remove (PROTOCOL.md, "Row Tracking",
// "Clustered Table"), kept as read so that checkpoints, and the removes of an add, carry them.
struct FileTracking {
  std::optional<int64_t> base_row_id;
  std::optional<int64_t> default_row_commit_version;
  std::optional<std::string> clustering_provider;  // adds only
  bool operator==(const FileTracking&) const = default;
};

struct AddFile {
  std::string path;                                // relative to the table root, URI-encoded
  std::map<std::string, std::optional<std::string>> partition_values;
  int64_t size = 0;
  int64_t modification_time = 0;                   // ms since the epoch
  bool data_change = true;
  std::optional<std::string> stats;                // JSON text: numRecords, minValues, maxValues, nullCount
  std::map<std::string, std::string> tags;
  // The rows of the file that are deleted (PROTOCOL.md, "Deletion Vectors"); null when none is.
  // Shared and immutable: a pointer, not an optional, keeps the add small (650,000 of them).
  std::shared_ptr<const DeletionVectorDescriptor> deletion_vector;
  // Row tracking and clustering fields; null when the add has none (shared and immutable, as above).
  std::shared_ptr<const FileTracking> tracking;
  // The rows the file holds that are not deleted, from the stats' numRecords; -1 when unknown.
  int64_t LiveRecords(int64_t num_records) const;
};

struct RemoveFile {
  std::string path;
  std::optional<int64_t> deletion_timestamp;       // ms since the epoch
  bool data_change = true;
  bool extended_file_metadata = false;
  std::map<std::string, std::optional<std::string>> partition_values;
  std::optional<int64_t> size;
  std::shared_ptr<const DeletionVectorDescriptor> deletion_vector;  // of the add this removes
  std::shared_ptr<const FileTracking> tracking;    // baseRowId and defaultRowCommitVersion of that add
};

// The remove of `add` at `deletion_timestamp` (ms): its path, partition values and size, with
// extendedFileMetadata, its deletion vector (a remove names the DV of the add it removes: the pair is
// the file's identity, PROTOCOL.md "Add File and Remove File") and its row tracking fields.
RemoveFile RemoveOf(const AddFile& add, int64_t deletion_timestamp, bool data_change);

struct Txn {                                       // "txn": application transaction id
  std::string app_id;
  int64_t version = 0;
  std::optional<int64_t> last_updated;
};

// "domainMetadata": the configuration of a named metadata domain (PROTOCOL.md, "Domain Metadata").
// Writers keep every domain, understood or not; checkpoints carry the live ones.
struct DomainMetadata {
  std::string domain;
  std::string configuration;                       // free text (JSON by convention)
  bool removed = false;                            // a tombstone: the domain is deleted
};

// The commitInfo field that holds a commit's in-commit timestamp (PROTOCOL.md, "In-Commit Timestamps").
inline constexpr char kInCommitTimestampField[] = "inCommitTimestamp";

struct CommitInfo {                                // free-form provenance; kept as JSON
  nlohmann::json value = nlohmann::json::object(); // timestamp, operation, operationParameters, ...
};

// A value on the heap with value semantics (copies are deep). Action holds its Metadata this way:
// a metaData action is rare and the largest (312 bytes against an add's 192), and held inline it sized
// every slot of a commit's 650,000 adds.
template <typename T>
class Boxed {
 public:
  Boxed(T value) : p_(std::make_unique<T>(std::move(value))) {}  // NOLINT: converts, as T does into Action
  Boxed(const Boxed& other) : p_(std::make_unique<T>(*other)) {}
  Boxed(Boxed&&) noexcept = default;
  Boxed& operator=(const Boxed& other) {
    if (this != &other) p_ = std::make_unique<T>(*other);
    return *this;
  }
  Boxed& operator=(Boxed&&) noexcept = default;
  // REQUIRES: not moved from.
  T& operator*() { return *p_; }
  const T& operator*() const { return *p_; }
  T* operator->() { return p_.get(); }
  const T* operator->() const { return p_.get(); }

 private:
  std::unique_ptr<T> p_;
};

using Action = std::variant<Protocol, Boxed<Metadata>, AddFile, RemoveFile, Txn, CommitInfo, DomainMetadata>;

// One commit file: newline-delimited JSON, one action object per line. Action kinds that stoke does
// not use but readers may ignore (cdc, checkpointMetadata, sidecar) are skipped;
// anything malformed is Corruption naming `file_name`, the line and what was expected.
Result<std::vector<Action>> ParseCommit(std::string_view text, std::string_view file_name);
// ParseCommit over the commit file at `path`, read a few MiB at a time, so that a commit of
// 100,000s of actions is never in memory whole (as text or as actions): calls `each` with every
// action in order, and stops at the first error (a parse error, a read error, or `each`'s).
// `chunk_bytes`: bytes per read (default 8 MiB: one read for nearly every commit).
Status ForEachCommitAction(Storage& storage, const std::string& path, const std::function<Status(Action&)>& each,
                           uint64_t chunk_bytes = uint64_t{8} << 20);
// One action object ({"add": {...}}), as ParseCommit reads each line; nullopt for ignorable kinds.
// `line` numbers the object in error messages (a row, for checkpoints).
Result<std::optional<Action>> ParseAction(const nlohmann::json& object, std::string_view file_name, size_t line);
// The inverse: one compact JSON object per line, each line ending in '\n'.
std::string SerializeCommit(const std::vector<Action>& actions);
// One action as its commit line's JSON object ({"add": {...}}), keys in Spark's order.
nlohmann::ordered_json ActionJson(const Action& action);

// A table's state at one version.
struct Snapshot {
  int64_t version = -1;
  int64_t timestamp = 0;                      // ms: commitInfo.timestamp of that version, else file mtime
  Protocol protocol;
  Metadata metadata;
  std::vector<AddFile> files;                 // live files in the order they were added
  std::vector<RemoveFile> tombstones;         // removed files, one per (decoded) path, the latest remove of each
  std::map<std::string, int64_t> app_versions;   // txn: app_id -> version
  std::map<std::string, DomainMetadata> domains;  // the live metadata domains (none removed), by name
  int64_t num_records() const;                // sum of stats.numRecords less deleted rows (-1 if any file lacks it)
};

struct CommitSummary {
  int64_t version = 0;
  int64_t timestamp = 0;
  std::string operation;                      // commitInfo.operation, or "" if none
  nlohmann::json info;                        // the whole commitInfo (or null)
  int64_t files_added = 0, files_removed = 0, bytes_added = 0, bytes_removed = 0;
};

// What a commit does, for conflict checks when another writer committed first.
enum class CommitKind {
  kBlindAppend,   // only adds files whose contents do not depend on the version read: retried after
                  // any non-conflicting commit
  kRewrite,       // removes files it read (optimize, overwrite): fails if a winner removed any of them
  kExclusive,     // fails on any concurrent commit: creating the table, changing metadata/protocol,
                  // and appends whose contents depend on the version read (ingest assigns ids and
                  // skips files already in the table; it re-plans on Conflict)
};

// The hash of a decoded path that PathClaims and the replay's index of live adds use.
inline uint64_t PathHash64(std::string_view path) { return std::hash<std::string_view>{}(path); }

// A set of decoded paths held as their 64-bit hashes: 8 bytes a path where a std::set of the
// strings took about 130 (85 MB for a commit of 650,000 files). Contains may answer true for a path
// never inserted when two hashes collide (for two commits of 650,000 paths each, about one chance in
// 40 million): a claim then reports a conflict that is not there, and the writer retries or re-plans.
// It never misses a path that was inserted.
class PathClaims {
 public:
  PathClaims() = default;
  PathClaims(std::initializer_list<std::string_view> paths);  // sealed
  void Insert(std::string_view path);
  // Sorts what was inserted, for Contains in O(log n) (until the next Insert; unsealed it scans).
  void Seal();
  bool Contains(std::string_view path) const;
  size_t size() const { return hashes_.size(); }
  bool empty() const { return hashes_.empty(); }

 private:
  std::vector<uint64_t> hashes_;
  bool sorted_ = true;
};

// What a commit claims, for checking it against a concurrent commit that took its version first.
struct CommitClaims {
  int64_t read_version = -1;
  CommitKind kind = CommitKind::kExclusive;  // the effective kind (see DeltaLog::Commit)
  PathClaims adds, removes;                  // decoded paths
  std::set<std::string> app_ids;             // txn application ids
  // kExclusive only: a winner for which this returns true does not by itself conflict (the
  // checks below still apply), e.g. another shard of the same sharded ingest.
  std::function<bool(const std::vector<Action>& winner)> exclusive_allows;
};

// OK when `winner`, committed at `winner_version` after this commit's read version, leaves this
// commit valid on top of it; otherwise Conflict naming the version and the reason. The rules:
// a kExclusive commit conflicts with every winner (unless exclusive_allows says otherwise); every
// kind conflicts with a winner that changed the protocol or metadata, added a file this commit
// adds, removed a file this commit removes, or carries a txn of an application this commit does.
Status CheckConcurrentCommit(const CommitClaims& mine, const std::vector<Action>& winner, int64_t winner_version,
                             std::string_view table_dir);

// Thread-safe: methods may be called concurrently; different processes coordinate only through
// the storage's put-if-absent.
class DeltaLog {
 public:
  DeltaLog(Storage& storage, std::string table_dir);

  const std::string& table_dir() const { return table_dir_; }
  Storage& storage() const { return storage_; }
  std::string log_dir() const;
  // "<log_dir>/00000000000000000042.json"
  std::string CommitPath(int64_t version) const;

  // The newest version, or -1 when there is no table (no commit file) at table_dir.
  Result<int64_t> LatestVersion() const;
  // The snapshot at `version` (latest when nullopt): replay of commits 0..version. Corruption when
  // a commit in the range is missing or malformed, NotFound when the table or version does not exist,
  // Unsupported when the protocol needs reader features stoke lacks.
  Result<Snapshot> ReadSnapshot(std::optional<int64_t> version = std::nullopt) const;
  // Writes the checkpoint of `version` (latest when nullopt) and points _last_checkpoint at it.
  Status Checkpoint(std::optional<int64_t> version = std::nullopt) const;
  // One entry per version, newest first (at most `limit` when > 0).
  Result<std::vector<CommitSummary>> History(int64_t limit = 0) const;
  // Time travel by timestamp: the newest version committed at or before `timestamp_ms` (ms since
  // the epoch), by the commits' timestamps as History gives them (inCommitTimestamp, else
  // commitInfo.timestamp, else the file's time), which stoke's commits keep non-decreasing; the
  // latest version for a time after it. On a table with in-commit timestamps enabled after its first
  // version, only the versions on the timestamp's side of the enablement are considered (PROTOCOL.md,
  // "Recommendations for Readers of Tables with In-Commit Timestamps"). NotFound when the table's
  // earliest version that can be read is newer than the time, naming both.
  Result<int64_t> VersionAt(int64_t timestamp_ms) const;

  // Writes `actions` as version `read_version + 1` (read_version -1 creates the table), adding a
  // commitInfo (timestamp, operation, operationParameters, isBlindAppend, engineInfo "stoke/0.1.0",
  // readVersion) when `actions` has none. If another writer took that version first: for
  // kBlindAppend, and for kRewrite when no winning commit removed a file this commit removes, and
  // no winner changed metadata or protocol, it retries on the next version at once, without a wait
  // (up to `max_attempts`): the version is free now, and the same actions are still valid. Otherwise
  // Conflict naming the winning version: a caller that can plan its actions again (ingest) retries
  // under a RetryPolicy (core/retry.h). Returns the version written.
  // `exclusive_allows`, for a kExclusive commit that neither creates the table nor changes its
  // metadata: winners it accepts are checked like any winner (CheckConcurrentCommit) and the commit
  // retries on top of them instead of failing.
  // `state`, when given, is the snapshot at read_version (an empty Snapshot, version -1, to create the
  // table); on success it becomes the snapshot at the version written, built from the actions as
  // they are written when no other writer committed in between (else read from the log), and a
  // checkpoint due after this commit is written from it: a commit of 650,000 files is then neither
  // read back nor held twice. After an error *state is unspecified (an empty Snapshot or the
  // snapshot of some version).
  Result<int64_t> Commit(int64_t read_version, std::vector<Action> actions, CommitKind kind,
                         const std::string& operation, const nlohmann::json& operation_parameters,
                         int max_attempts = 100,
                         std::function<bool(const std::vector<Action>& winner)> exclusive_allows = nullptr,
                         Snapshot* state = nullptr) const;

 private:
  // ReadSnapshot from `listing` (of the whole log, or of its latest versions).
  Result<Snapshot> ReadSnapshotFrom(const struct LogListing& listing, std::optional<int64_t> version) const;

  Storage& storage_;
  std::string table_dir_;
};

// Spark's JSON schema for flat columns: {"type":"struct","fields":[{"name":..,"type":"long",
// "nullable":false,"metadata":{}}, ...]}, with boolean, integer, long, float, double, string and
// binary (tensor columns are binary; their dtype/shape live in configuration["stoke.tensors"]). A
// column with a physical name (column mapping) has it, and its field id, in its metadata.
std::string SchemaToSparkJson(const std::vector<ColumnSpec>& columns);
// SchemaToSparkJson(columns), each field keeping the metadata of the field of the same name in
// `previous` (a schemaString): a writer that changes a schema keeps what other writers recorded of
// its columns (invariants, identity, generation expressions, comments); an identity declaration only
// where the field keeps its type. `previous` empty or not a
// struct: SchemaToSparkJson(columns).
std::string SchemaToSparkJson(const std::vector<ColumnSpec>& columns, std::string_view previous);
// The inverse; `tensors` (from configuration) marks binary columns as tensors. Types other than
// the ones above are Unsupported; malformed JSON is Corruption.
Result<std::vector<ColumnSpec>> SchemaFromSparkJson(std::string_view json,
                                                    const std::map<std::string, TensorSpec>& tensors);
// A table's columns: its schemaString, with tensor and blob columns marked from the configuration's
// stoke.tensors and stoke.blobs. Errors name `context` (the table).
Result<std::vector<ColumnSpec>> ColumnsFromMetadata(const Metadata& metadata, std::string_view context);
// Whether a table of this protocol honours delta.columnMapping.mode (PROTOCOL.md, "Column Mapping"):
// reader version 2, or 3 with the columnMapping reader feature.
bool SupportsColumnMapping(const Protocol& protocol);
// ColumnsFromMetadata of the snapshot's metadata, its column mapping mode honoured only where its
// protocol supports the feature (elsewhere the columns keep their names in data files).
Result<std::vector<ColumnSpec>> ColumnsFromSnapshot(const Snapshot& snapshot, std::string_view context);

// The add action's stats JSON for a Parquet file written by stoke: numRecords, and minValues,
// maxValues and nullCount for scalar columns (from the row groups' statistics, combined; tensor
// columns get nullCount only). Values are JSON numbers, strings or booleans. Columns are found and
// keyed by their names in files (ColumnSpec::file_name: the physical name under column mapping).
std::string StatsJsonFromFooter(const parquet::FileMetaData& footer, const std::vector<ColumnSpec>& columns);

// The operationParameters form of an optional list of one string, as Spark writes it: "[]" for an
// empty string, else a JSON array holding it (escaped: a quote or backslash in a name or predicate
// cannot break the commit's JSON).
std::string JsonArrayText(const std::string& item);

// Percent-encodes a relative path for the add/remove "path" field (RFC 3986: unreserved characters,
// sub-delims, ':', '@' and '/' stay, as Spark writes them) and decodes it back; a bad escape is
// InvalidArgument.
std::string EncodePath(std::string_view relative_path);
Result<std::string> DecodePath(std::string_view encoded);

}  // namespace stoke::delta
