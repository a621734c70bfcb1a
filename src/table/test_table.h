// Test support: builds small stoke tables with the Parquet writer and the Delta log directly.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "format/parquet_writer.h"
#include "table/delta_log.h"

namespace stoke::testing_support {

// Columns: id INT64, label INT32, name STRING (nullable), t tensor uint8[16].
inline std::vector<ColumnSpec> TestColumns() {
  return {{.name = "id", .type = parquet::Type::kInt64},
          {.name = "label", .type = parquet::Type::kInt32},
          {.name = "name", .type = parquet::Type::kByteArray, .optional = true, .is_string = true},
          {.name = "t", .type = parquet::Type::kByteArray, .tensor = TensorSpec{DType::kUInt8, {16}}}};
}

// The tensor bytes of row `id`.
inline std::string TensorOf(int64_t id) {
  std::string s(16, '\0');
  for (int i = 0; i < 16; ++i) s[i] = static_cast<char>(id * 7 + i);
  return s;
}

class TestTable {
 public:
  TestTable() {
    std::string tmpl = std::filesystem::temp_directory_path() / "stoke_table_XXXXXX";
    dir_ = mkdtemp(tmpl.data());
  }
  ~TestTable() { std::filesystem::remove_all(dir_); }
  const std::string& dir() const { return dir_; }
  delta::DeltaLog log() const { return delta::DeltaLog(LocalStorage(), dir_); }

  // Writes one data file with rows [first, first + n) (label = id % 3, name null when id % 4 == 0)
  // in row groups of `per_group` rows, and commits it (creating the table on first use).
  int64_t AppendFile(int64_t first, int64_t n, int64_t per_group = 1000) {
    const auto cols = TestColumns();
    const std::string name = "part-" + std::to_string(first) + ".parquet";
    auto w = ParquetFileWriter::Create(LocalStorage(), dir_ + "/" + name, cols, WriterOptions{});
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    RowGroupEncoder enc((*w)->columns(), (*w)->options());
    for (int64_t g = first; g < first + n; g += per_group) {
      std::vector<int64_t> ids;
      std::vector<int32_t> labels;
      std::vector<std::string> names;
      std::vector<uint8_t> defined;
      for (int64_t id = g; id < std::min(first + n, g + per_group); ++id) {
        ids.push_back(id);
        labels.push_back(static_cast<int32_t>(id % 3));
        defined.push_back(id % 4 != 0);
        if (id % 4 != 0) names.push_back("n" + std::to_string(id % 5));
        EXPECT_TRUE(enc.AppendTensor(3, AsBytes(TensorOf(id))).ok());
      }
      EXPECT_TRUE(enc.SetScalars(0, ColumnValues{ids, {}}).ok());
      EXPECT_TRUE(enc.SetScalars(1, ColumnValues{labels, {}}).ok());
      EXPECT_TRUE(enc.SetScalars(2, ColumnValues{names, defined}).ok());
      auto rg = enc.Finish();
      EXPECT_TRUE(rg.ok()) << rg.status().ToString();
      EXPECT_TRUE((*w)->WriteRowGroup(std::move(*rg)).ok());
    }
    EXPECT_TRUE((*w)->Close().ok());

    std::vector<delta::Action> actions;
    auto log = this->log();
    int64_t read_version = *log.LatestVersion();
    if (read_version < 0) {
      actions.push_back(delta::Protocol{});
      delta::Metadata m;
      m.id = "00000000-0000-4000-8000-000000000000";
      m.schema_string = delta::SchemaToSparkJson(cols);
      m.configuration[kTensorsMetadataKey] = TensorSpecsToJson(cols);
      actions.push_back(m);
    }
    delta::AddFile add;
    add.path = name;
    add.size = static_cast<int64_t>((*w)->bytes_written());
    add.modification_time = 1;
    add.stats = delta::StatsJsonFromFooter((*w)->metadata(), cols);
    actions.push_back(add);
    auto v = log.Commit(read_version, actions,
                        read_version < 0 ? delta::CommitKind::kExclusive : delta::CommitKind::kBlindAppend, "WRITE",
                        nlohmann::json::object());
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    return v.ok() ? *v : -1;
  }

 private:
  std::string dir_;
};

}  // namespace stoke::testing_support
