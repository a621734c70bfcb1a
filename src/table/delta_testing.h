// Test helpers for the Delta log's tests: a small schema and actions to commit.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "table/delta_log.h"

namespace stoke::delta::testing_support {

inline std::vector<ColumnSpec> TestColumns() {
  std::vector<ColumnSpec> cols(3);
  cols[0].name = "id";
  cols[0].type = parquet::Type::kInt64;
  cols[1].name = "label";
  cols[1].type = parquet::Type::kInt32;
  cols[1].optional = true;
  cols[2].name = "volume";
  cols[2].type = parquet::Type::kByteArray;
  cols[2].tensor = TensorSpec{DType::kFloat32, {2, 3}};
  return cols;
}

inline Protocol NewProtocol() { return Protocol{}; }

inline Metadata NewMetadata() {
  Metadata m;
  m.id = "7d4b6c1e-0000-4000-8000-000000000001";
  m.name = "volumes";
  m.schema_string = SchemaToSparkJson(TestColumns());
  m.configuration[kTensorsMetadataKey] = R"({"volume":{"dtype":"float32","shape":[2,3]}})";
  m.created_time = 1700000000000;
  return m;
}

inline AddFile NewAdd(const std::string& name, int64_t size = 100, int64_t rows = 10) {
  AddFile a;
  a.path = EncodePath(name);
  a.size = size;
  a.modification_time = 1700000000001;
  a.stats = nlohmann::json{{"numRecords", rows}}.dump();
  return a;
}

inline RemoveFile NewRemove(const std::string& name, std::optional<int64_t> size = 100) {
  RemoveFile r;
  r.path = EncodePath(name);
  r.deletion_timestamp = 1700000000002;
  r.size = size;
  return r;
}

// The snapshot's tombstone of the file whose decoded path is `path`, or null.
inline const RemoveFile* FindTombstone(const Snapshot& s, const std::string& path) {
  for (const RemoveFile& r : s.tombstones) {
    auto decoded = DecodePath(r.path);
    if (decoded.ok() && *decoded == path) return &r;
  }
  return nullptr;
}

}  // namespace stoke::delta::testing_support
