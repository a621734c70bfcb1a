// Test support: builds small stoke tables with the Parquet writer and the Delta log directly.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "format/parquet_metadata.h"
#include "format/parquet_testing.h"
#include "format/parquet_reader.h"
#include "format/parquet_writer.h"
#include "io/local_files.h"
#include "io/storage.h"
#include "table/scan.h"
#include "table/delta_log.h"
#include "stoke/table.h"

namespace stoke::testing_support {

// Columns: id INT64, label INT32, name STRING (nullable), t tensor uint8[tensor_len].
inline std::vector<ColumnSpec> TestColumns(int64_t tensor_len = 16) {
  return {{.name = "id", .type = parquet::Type::kInt64},
          {.name = "label", .type = parquet::Type::kInt32},
          {.name = "name", .type = parquet::Type::kByteArray, .optional = true, .is_string = true},
          {.name = "t", .type = parquet::Type::kByteArray, .tensor = TensorSpec{DType::kUInt8, {tensor_len}}}};
}

// The tensor bytes of row `id`.
inline std::string TensorOf(int64_t id, int64_t len = 16) {
  std::string s(static_cast<size_t>(len), '\0');
  for (int64_t i = 0; i < len; ++i) s[static_cast<size_t>(i)] = static_cast<char>(id * 7 + i);
  return s;
}

// Writes a data file of TestColumns(tensor_len) with rows [first, first + n) (label = id % 3, name
// null when id % 4 == 0, tensor = TensorOf(id, tensor_len)) in row groups of `per_group` rows, without
// committing it. `sync` false skips the fsync at close (tests that write 100,000s of files). `codec`:
// the writer's (with its default choice: chunks it does not shrink by 10 % stay uncompressed).
inline delta::AddFile WriteDataFile(const std::string& dir, const std::string& name, int64_t first, int64_t n,
                                    int64_t per_group, int64_t tensor_len = 16, bool sync = true,
                                    parquet::Codec codec = parquet::Codec::kZstd) {
  const auto cols = TestColumns(tensor_len);
  WriterOptions options;
  options.sync_on_close = sync;
  options.codec = codec;
  auto w = ParquetFileWriter::Create(LocalStorage(), dir + "/" + name, cols, options);
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
      EXPECT_TRUE(enc.AppendTensor(3, AsBytes(TensorOf(id, tensor_len))).ok());
    }
    EXPECT_TRUE(enc.SetScalars(0, ColumnValues{ids, {}}).ok());
    EXPECT_TRUE(enc.SetScalars(1, ColumnValues{labels, {}}).ok());
    EXPECT_TRUE(enc.SetScalars(2, ColumnValues{names, defined}).ok());
    auto rg = enc.Finish();
    EXPECT_TRUE(rg.ok()) << rg.status().ToString();
    EXPECT_TRUE((*w)->WriteRowGroup(std::move(*rg)).ok());
  }
  EXPECT_TRUE((*w)->Close().ok());
  delta::AddFile add;
  add.path = name;
  add.size = static_cast<int64_t>((*w)->bytes_written());
  add.modification_time = 1;
  add.stats = delta::StatsJsonFromFooter((*w)->metadata(), cols);
  return add;
}

// Writes the file's pages back and drops them from the page cache; true when (nearly) none is left
// there (false on file systems that keep them, such as tmpfs).
inline bool DropFromPageCache(const std::string& path, size_t size) {
  if (!AdviseDropFromPageCache(path)) return false;
  const int64_t left = ResidentPages(path, 0, size);
  return left >= 0 && left <= 16;
}

class TestTable;
inline int64_t CommitAdds(const TestTable& table, std::vector<delta::AddFile> adds);

class TestTable {
 public:
  // tensor_len: bytes per tensor cell; rows of 64 KiB and more get one page each.
  explicit TestTable(int64_t tensor_len = 16, parquet::Codec codec = parquet::Codec::kZstd)
      : temp_(TemporaryDirectory::Create("stoke_table_").value()), dir_(temp_.path()), tensor_len_(tensor_len), codec_(codec) {}
  const std::string& dir() const { return dir_; }
  delta::DeltaLog log() const { return delta::DeltaLog(LocalStorage(), dir_); }

  // Writes one data file with rows [first, first + n) (see WriteDataFile) and commits it (creating
  // the table on first use). Returns the version.
  int64_t AppendFile(int64_t first, int64_t n, int64_t per_group = 1000) {
    return CommitAdds(*this, {WriteDataFile(dir_, "part-" + std::to_string(first) + ".parquet", first, n, per_group,
                                            tensor_len_, /*sync=*/true, codec_)});
  }
  int64_t tensor_len() const { return tensor_len_; }
  parquet::Codec codec() const { return codec_; }

 private:
  TemporaryDirectory temp_;
  std::string dir_;
  int64_t tensor_len_;
  parquet::Codec codec_;
};

// Commits `adds` in one commit (creating the table when it has none). Returns the version.
inline int64_t CommitAdds(const TestTable& table, std::vector<delta::AddFile> adds) {
  auto log = table.log();
  const int64_t read_version = *log.LatestVersion();
  std::vector<delta::Action> actions;
  if (read_version < 0) {
    const auto cols = TestColumns(table.tensor_len());
    actions.push_back(delta::Protocol{});
    delta::Metadata m;
    m.id = "00000000-0000-4000-8000-000000000000";
    m.schema_string = delta::SchemaToSparkJson(cols);
    m.configuration[kTensorsMetadataKey] = TensorSpecsToJson(cols);
    actions.push_back(m);
  }
  for (auto& a : adds) actions.push_back(std::move(a));
  auto v = log.Commit(read_version, actions,
                      read_version < 0 ? delta::CommitKind::kExclusive : delta::CommitKind::kBlindAppend, "WRITE",
                      nlohmann::json::object());
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return v.ok() ? *v : -1;
}

// Deletes `rows` (row indexes in the file, ascending) of the table's data file `path` with a deletion
// vector written by stoke's own writer, as Spark's DELETE does: the protocol is raised to reader 3 /
// writer 7 with deletionVectors (on first use), and one commit removes the file and adds it again
// with the DV. Returns the version.
inline int64_t DeleteRows(const TestTable& table, const std::string& path, const std::vector<uint64_t>& rows) {
  auto log = table.log();
  auto snap = log.ReadSnapshot();
  EXPECT_TRUE(snap.ok()) << snap.status().ToString();
  auto it = std::find_if(snap->files.begin(), snap->files.end(), [&](const delta::AddFile& f) { return f.path == path; });
  EXPECT_NE(it, snap->files.end()) << path;
  auto dv = delta::WriteDeletionVectorFile(LocalStorage(), table.dir(), rows, "");
  EXPECT_TRUE(dv.ok()) << dv.status().ToString();
  std::vector<delta::Action> actions;
  const delta::Protocol dv_protocol{3, 7, {"deletionVectors"}, {"deletionVectors"}};
  if (snap->protocol.reader_features.empty()) actions.push_back(dv_protocol);
  delta::RemoveFile rm;
  rm.path = it->path;
  rm.deletion_timestamp = 1;
  rm.size = it->size;
  rm.deletion_vector = it->deletion_vector;
  actions.push_back(rm);
  delta::AddFile add = *it;
  add.data_change = true;
  add.deletion_vector = std::make_shared<const delta::DeletionVectorDescriptor>(*dv);
  actions.push_back(add);
  auto v = log.Commit(snap->version, actions, delta::CommitKind::kExclusive, "DELETE", nlohmann::json::object());
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return v.ok() ? *v : -1;
}

// Rewrites the footer of a data file without the OffsetIndex of column `column` (as a writer that
// writes no page indexes would); returns the new file size.
inline int64_t DropOffsetIndex(const std::string& path, size_t column) {
  return RewriteFooter(path, [column](parquet::FileMetaData& meta) {
    for (auto& rg : meta.row_groups) {
      rg.columns[column].offset_index_offset.reset();
      rg.columns[column].offset_index_length.reset();
    }
  });
}

// Every (id, label, name or null, tensor bytes) of a table of TestColumns, sorted by id.
inline std::vector<std::tuple<int64_t, int32_t, std::string, std::string>> AllRows(const std::string& dir,
                                                                             std::optional<int64_t> version = {}) {
  std::vector<std::tuple<int64_t, int32_t, std::string, std::string>> rows;
  auto t = OpenTableView(dir, version);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  for (const auto& f : t->snapshot.files) {
    auto r = ParquetReader::Open(LocalStorage(), t->FilePath(f));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    auto ids = std::get<std::vector<int64_t>>((*r)->ReadColumn(0)->values);
    auto labels = std::get<std::vector<int32_t>>((*r)->ReadColumn(1)->values);
    auto names = (*r)->ReadColumn(2);
    auto tensors = std::get<std::vector<std::string>>((*r)->ReadColumn(3)->values);
    const auto& nv = std::get<std::vector<std::string>>(names->values);
    size_t ni = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      std::string name = names->defined[i] ? nv[ni++] : "<null>";
      rows.emplace_back(ids[i], labels[i], name, tensors[i]);
    }
  }
  std::sort(rows.begin(), rows.end());
  return rows;
}

// A query and the form its rows print in, as `stoke query --format` takes them.
struct PrintedQuery : QueryOptions {
  RowFormat format = RowFormat::kTable;
};

// Prints what `stoke query` prints for `q` (QueryTableRows, QueryRowsText) to `out`; the report.
inline Result<QueryReport> PrintQuery(const PrintedQuery& q, std::ostream& out) {
  STOKE_ASSIGN_OR_RETURN(QueryRows rows, QueryTableRows(q));
  out << QueryRowsText(rows, q.format);
  return rows.report;
}

}  // namespace stoke::testing_support
