// Plain Parquet datasets: Parquet files without a Delta log (a directory Spark or a Hugging Face
// export wrote, a glob, one file), opened as an unversioned table so that queries, `cat` and the
// loader read them as they read Delta tables (docs/format.md, "Plain Parquet datasets").
//
// A dataset's snapshot is made up, never written: version 0, one add per data file (its path
// relative to the dataset's root, size and modification time from the listing, no statistics), and
// metadata whose schema is the first file's (in path order), translated to Delta types, with the
// Hive-style partition directories (`key=value/`) as partition columns after it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "io/uri.h"
#include "stoke/status.h"
#include "table/delta_log.h"

namespace stoke {

// Whether the path part of `location` asks for a glob: it holds '*', '?' or '[', and nothing exists
// under that very name (a directory named "run[2]" is that directory).
bool IsGlobLocation(const std::string& location);

// A plain dataset: the root its files' paths are relative to (a path or URI, as JoinPath takes
// it), the storage there, and the made-up snapshot.
struct ParquetDataset {
  std::string root;
  StorageLocation where;
  delta::Snapshot snapshot;
};

// Lists the dataset `location` names and reads its schema from its first file's footer:
//  - a glob: the files under the glob's directory part whose paths relative to it match the rest
//    ('*', '?' and '[...]' within one path component, "**" for any number of directories);
//  - a file: that file alone;
//  - a directory: every file named *.parquet under it, at any depth, skipping names that start
//    with '_' or '.' (_delta_log, _SUCCESS, .crc files).
// Partition columns: every file must sit under the same `key=value` directories, in the same order;
// a key's values are "long" when every one is an integer, "date" when every one is YYYY-MM-DD, else
// "string" (__HIVE_DEFAULT_PARTITION__ is null). NotFound, naming `location`, when it names no
// Parquet file; Corruption naming the file whose footer or schema cannot be read; InvalidArgument for
// partitions that differ between files or clash with a file column.
Result<ParquetDataset> OpenParquetDataset(const std::string& location);

// OK unless the directory `location` holds no Delta log but Parquet files that another writer than
// stoke wrote (of the first 16 found, breadth first), which a plain dataset would read: a table created
// there would hide them, and a vacuum of it delete them. Then InvalidArgument, naming `location` and
// the file, for the writer `what` ("ingest"). stoke's own files there are what a first write that
// failed before its commit left, and do not count.
Status RefuseToCoverParquetDataset(const std::string& location, std::string_view what);

// The key of a Hugging Face dataset's file metadata (its `datasets` feature types, JSON), kept in
// the made-up snapshot's configuration as it is.
inline constexpr char kHuggingFaceMetadataKey[] = "huggingface";

// From Hugging Face feature types (the JSON of kHuggingFaceMetadataKey: {"info": {"features": ...}}
// or {"features": ...}): the class names of each top-level ClassLabel feature, as stoke.classes
// records them ({"label": ["cat", "dog"]}); nullopt when there is none (or the JSON is not that).
std::optional<std::string> HuggingFaceClassNames(const std::string& metadata);
// The fixed shapes of top-level array features: Array2D..Array5D with every dimension given, and
// Sequence features of a fixed `length` (nested to any depth) of plain values.
std::map<std::string, std::vector<int64_t>> HuggingFaceArrayShapes(const std::string& metadata);

// Whether `text` (a path relative to a glob's root, '/'-separated) matches `pattern` (see
// OpenParquetDataset).
bool MatchesGlob(std::string_view pattern, std::string_view text);

}  // namespace stoke
