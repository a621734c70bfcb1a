#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>

#include "format/parquet_nested.h"
#include "stoke/table.h"
#include "table/scan.h"
#include "table/test_table.h"

namespace stoke {
namespace {

using testing_support::TensorOf;
using testing_support::PrintedQuery;
using testing_support::PrintQuery;
using testing_support::TestTable;

TEST(Query, FiltersWithFileAndRowGroupSkipping) {
  TestTable t;
  for (int64_t f = 0; f < 5; ++f) t.AppendFile(f * 100, 100, 25);  // 5 files of 4 row groups
  PrintedQuery q;
  q.table_dir = t.dir();
  q.where = "id >= 110 AND id < 140 AND label = 1";
  q.select = {"id", "name", "t"};
  q.format = RowFormat::kCsv;
  std::ostringstream out;
  auto r = PrintQuery(q, out);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->files_scanned, 1);
  EXPECT_EQ(r->row_groups_scanned, 2);  // rows 100..124 and 125..149
  EXPECT_EQ(r->rows, 10);               // ids 112, 115, ..., 139
  std::string text = out.str();
  EXPECT_NE(text.find("id,name,t\n112,"), std::string::npos) << text;
  EXPECT_NE(text.find("md5:"), std::string::npos) << text;

  q.where = "name IS NULL";
  q.count_only = true;
  std::ostringstream count;
  r = PrintQuery(q, count);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(count.str(), "125\n");

  q.where = "label = 'x'";
  std::ostringstream bad;
  EXPECT_EQ(PrintQuery(q, bad).status().code(), StatusCode::kInvalidArgument);
  q.where = "";
  q.select = {"nope"};
  EXPECT_EQ(PrintQuery(q, bad).status().code(), StatusCode::kInvalidArgument);
}

TEST(Query, TimeTravelsAndLimits) {
  TestTable t;
  t.AppendFile(0, 10);
  t.AppendFile(10, 10);
  PrintedQuery q;
  q.table_dir = t.dir();
  q.count_only = true;
  q.version = 0;
  std::ostringstream out;
  ASSERT_TRUE(PrintQuery(q, out).ok());
  EXPECT_EQ(out.str(), "10\n");
  q.count_only = false;
  q.version.reset();
  q.limit = 3;
  q.select = {"id"};
  q.format = RowFormat::kJson;
  std::ostringstream rows;
  auto r = PrintQuery(q, rows);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(rows.str(), "{\"id\":0}\n{\"id\":1}\n{\"id\":2}\n");
}

TEST(Query, ColumnsHoldTheRowsQueryPrints) {
  TestTable t(8);
  t.AppendFile(0, 30, 10);
  t.AppendFile(30, 30, 10);
  PrintedQuery q;
  q.table_dir = t.dir();
  q.where = "id >= 25 AND id < 41";  // rows from both files, several row groups
  q.select = {"t", "id", "name", "label"};
  auto r = QueryTableColumns(q);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->report.rows, 16);
  EXPECT_EQ(r->report.files_scanned, 2);
  ASSERT_EQ(r->columns.size(), 4u);
  const QueryColumn& tensor = r->columns[0];
  const QueryColumn& id = r->columns[1];
  const QueryColumn& name = r->columns[2];
  const QueryColumn& label = r->columns[3];
  EXPECT_EQ(tensor.kind, ColumnKind::kTensor);
  EXPECT_EQ(tensor.dtype, DType::kUInt8);
  EXPECT_EQ(tensor.shape, std::vector<int64_t>{8});
  EXPECT_TRUE(tensor.valid.empty());
  ASSERT_EQ(tensor.data.size(), 16u * 8);
  EXPECT_EQ(id.kind, ColumnKind::kScalar);
  EXPECT_EQ(id.dtype, DType::kInt64);
  ASSERT_EQ(id.data.size(), 16u * 8);
  EXPECT_EQ(label.dtype, DType::kInt32);
  ASSERT_EQ(label.data.size(), 16u * 4);
  EXPECT_EQ(name.kind, ColumnKind::kString);
  ASSERT_EQ(name.strings.size(), 16u);
  ASSERT_EQ(name.valid.size(), 16u);  // ids 28, 32, 36, 40 have null names
  for (int64_t i = 0; i < 16; ++i) {
    const int64_t want = 25 + i;
    int64_t got = 0;
    std::memcpy(&got, id.data.data() + i * 8, 8);
    EXPECT_EQ(got, want);
    int32_t lab = 0;
    std::memcpy(&lab, label.data.data() + i * 4, 4);
    EXPECT_EQ(lab, want % 3);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(tensor.data.data()) + i * 8, 8), TensorOf(want, 8)) << want;
    EXPECT_EQ(name.valid[i], want % 4 != 0 ? 1 : 0) << want;
    EXPECT_EQ(name.strings[i], want % 4 != 0 ? "n" + std::to_string(want % 5) : "") << want;
  }

  // The same rows as the printed query, in the same order.
  q.select = {"id"};
  q.format = RowFormat::kCsv;
  q.limit = 5;
  std::ostringstream printed;
  ASSERT_TRUE(PrintQuery(q, printed).ok());
  EXPECT_EQ(printed.str(), "id\n25\n26\n27\n28\n29\n");
  r = QueryTableColumns(q);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->columns[0].data.size(), 5u * 8);
  int64_t last = 0;
  std::memcpy(&last, r->columns[0].data.data() + 4 * 8, 8);
  EXPECT_EQ(last, 29);

  q.limit = -5;  // only -1 means all
  EXPECT_NE(QueryTableColumns(q).status().message().find("`limit` must be -1 (all) or at least 0"), std::string::npos);
  q.limit = -1;
  q.where = "id > 1000";
  r = QueryTableColumns(q);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->report.rows, 0);
  EXPECT_TRUE(r->columns[0].data.empty());
  q.where = "";
  q.select = {"nope"};
  EXPECT_EQ(QueryTableColumns(q).status().code(), StatusCode::kInvalidArgument);
}

TEST(Query, CountsFromAddStatisticsWithoutOpeningDecidedFiles) {
  TestTable t;
  // Files of ids [0,10), [10,20), ...: each file's id range is in its add statistics.
  for (int64_t f = 0; f < 6; ++f) t.AppendFile(f * 10, 10, 5);
  PrintedQuery q;
  q.table_dir = t.dir();
  q.count_only = true;
  std::ostringstream out;

  q.where = "id >= 20 AND id < 50";  // files 2, 3, 4 hold only matches; the others none
  auto r = PrintQuery(q, out);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rows, 30);
  EXPECT_EQ(r->files_counted_from_stats, 3);
  EXPECT_EQ(r->files_scanned, 0);

  q.where = "id >= 25 AND id < 50";  // file 2 straddles: opened; its first row group (20..24) is decided by
                                     // the row-group statistics too, the second (25..29) counted from them
  r = PrintQuery(q, out);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rows, 25);
  EXPECT_EQ(r->files_counted_from_stats, 2);
  EXPECT_EQ(r->files_scanned, 1);
  EXPECT_EQ(r->row_groups_scanned, 0);

  q.where = "label = 1";  // labels 0..2 in every file: every file must be read
  r = PrintQuery(q, out);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rows, 20);
  EXPECT_EQ(r->files_counted_from_stats, 0);
  EXPECT_EQ(r->files_scanned, 6);

  q.where = "";  // no predicate: numRecords answers
  r = PrintQuery(q, out);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rows, 60);
  EXPECT_EQ(r->files_counted_from_stats, 6);

  // The counts agree with a scan that reads every row.
  for (const char* where : {"id >= 25 AND id < 50", "label = 1", "name IS NULL", "id IN (3, 17, 59) OR label = 2"}) {
    q.where = where;
    q.count_only = true;
    auto counted = PrintQuery(q, out);
    ASSERT_TRUE(counted.ok()) << where;
    q.count_only = false;
    std::ostringstream rows;
    auto listed = PrintQuery(q, rows);
    ASSERT_TRUE(listed.ok()) << where;
    EXPECT_EQ(counted->rows, listed->rows) << where;
  }
}



// A table of Delta's date, timestamp and decimal types, written by stoke's writer (which annotates
// them as Spark does), with a second file whose timestamps are INT64 milliseconds (as older writers
// store them) and a column added to the schema after the first file (schema evolution).
class LogicalTypesTable {
 public:
  LogicalTypesTable() {
    std::string tmpl = std::filesystem::temp_directory_path() / "stoke_logical_XXXXXX";
    dir_ = mkdtemp(tmpl.data());
  }
  ~LogicalTypesTable() { std::filesystem::remove_all(dir_); }
  const std::string& dir() const { return dir_; }

  static std::vector<ColumnSpec> Columns(bool with_price) {
    std::vector<ColumnSpec> cols = {
        {.name = "id", .type = parquet::Type::kInt64},
        {.name = "d", .type = parquet::Type::kInt32, .logical = LogicalType::kDate, .optional = true},
        {.name = "ts", .type = parquet::Type::kInt64, .logical = LogicalType::kTimestamp, .optional = true},
        {.name = "s", .type = parquet::Type::kInt32, .logical = LogicalType::kShort}};
    if (with_price) {
      cols.push_back({.name = "price", .type = parquet::Type::kInt64, .logical = LogicalType::kDecimal,
                      .precision = 10, .scale = 2, .optional = true});
    }
    return cols;
  }

  // Rows id 0..2 (first file) or 3..5 (second, with prices and millisecond timestamps).
  delta::AddFile WriteFile(const std::string& name, bool second) {
    const auto cols = Columns(second);
    auto w = ParquetFileWriter::Create(LocalStorage(), dir_ + "/" + name, cols, WriterOptions{});
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    RowGroupEncoder enc((*w)->columns(), (*w)->options());
    const int64_t base = second ? 3 : 0;
    const int64_t unit = second ? 1000 : 1;  // the second file's timestamps: milliseconds
    EXPECT_TRUE(enc.SetScalars(0, ColumnValues{std::vector<int64_t>{base, base + 1, base + 2}, {}}).ok());
    EXPECT_TRUE(enc.SetScalars(1, ColumnValues{std::vector<int32_t>{19753, 19754}, {1, 0, 1}}).ok());
    EXPECT_TRUE(enc.SetScalars(2, ColumnValues{std::vector<int64_t>{1706702400123000 / unit, -1000 / unit, 0}, {}}).ok());
    EXPECT_TRUE(enc.SetScalars(3, ColumnValues{std::vector<int32_t>{-7, 0, 32767}, {}}).ok());
    if (second) {
      EXPECT_TRUE(enc.SetScalars(4, ColumnValues{std::vector<int64_t>{1250, -5}, {1, 1, 0}}).ok());
    }
    auto rg = enc.Finish();
    EXPECT_TRUE(rg.ok()) << rg.status().ToString();
    EXPECT_TRUE((*w)->WriteRowGroup(std::move(*rg)).ok());
    EXPECT_TRUE((*w)->Close().ok());
    if (second) SetTimestampUnitToMillis(dir_ + "/" + name, 2);
    delta::AddFile add;
    add.path = name;
    add.size = static_cast<int64_t>(std::filesystem::file_size(dir_ + "/" + name));
    add.partition_values["part"] = second ? std::optional<std::string>("2024-02-01") : std::nullopt;
    add.stats = delta::StatsJsonFromFooter((*w)->metadata(), cols);
    return add;
  }

  // Commits the first file with the schema without `price`, then the second with it.
  void Build() {
    delta::DeltaLog log(LocalStorage(), dir_);
    ASSERT_TRUE(log.Commit(-1, {delta::Protocol{}, MetadataWith(false), WriteFile("a.parquet", false)},
                           delta::CommitKind::kExclusive, "WRITE", nlohmann::json::object()).ok());
    ASSERT_TRUE(log.Commit(0, {MetadataWith(true), WriteFile("b.parquet", true)}, delta::CommitKind::kExclusive,
                           "WRITE", nlohmann::json::object()).ok());
  }

 private:
  static delta::Metadata MetadataWith(bool price) {
    auto cols = Columns(price);
    cols.push_back({.name = "part", .type = parquet::Type::kInt32, .logical = LogicalType::kDate, .optional = true});
    delta::Metadata m;
    m.id = "00000000-0000-4000-8000-000000000001";
    m.schema_string = delta::SchemaToSparkJson(cols);
    m.partition_columns = {"part"};
    return m;
  }

  // Rewrites the footer so that column `column` says TIMESTAMP(MILLIS), as a writer of millisecond
  // timestamps would have written it.
  static void SetTimestampUnitToMillis(const std::string& path, size_t column) {
    testing_support::RewriteFooter(path, [column](parquet::FileMetaData& meta) {
      auto& e = meta.schema[column + 1];
      e.converted_type = parquet::ConvertedType::kTimestampMillis;
      e.logical_type->time_unit = 1;
    });
  }

  std::string dir_;
};

std::string QueryText(PrintedQuery q) {
  std::ostringstream out;
  auto r = PrintQuery(q, out);
  if (!r.ok()) return "ERROR " + r.status().ToString();
  return out.str();
}

TEST(Query, DatesTimestampsAndDecimalsPrintInIso8601AndExactly) {
  LogicalTypesTable t;
  t.Build();
  PrintedQuery q;
  q.table_dir = t.dir();
  q.format = RowFormat::kCsv;
  EXPECT_EQ(QueryText(q),
            "id,d,ts,s,price,part\n"
            "0,2024-01-31,2024-01-31T12:00:00.123Z,-7,,\n"
            "1,,1969-12-31T23:59:59.999Z,0,,\n"
            "2,2024-02-01,1970-01-01T00:00:00Z,32767,,\n"
            "3,2024-01-31,2024-01-31T12:00:00.123Z,-7,12.50,2024-02-01\n"
            "4,,1969-12-31T23:59:59.999Z,0,-0.05,2024-02-01\n"
            "5,2024-02-01,1970-01-01T00:00:00Z,32767,,2024-02-01\n");
  q.format = RowFormat::kJson;
  q.where = "id = 3";
  EXPECT_EQ(QueryText(q), R"({"id":3,"d":"2024-01-31","ts":"2024-01-31T12:00:00.123Z","s":-7,"price":"12.50","part":"2024-02-01"})"
                    "\n");
}

TEST(Query, WhereComparesDatesTimestampsAndDecimalsAndSkipsByTheirStatistics) {
  LogicalTypesTable t;
  t.Build();
  PrintedQuery q;
  q.table_dir = t.dir();
  q.format = RowFormat::kCsv;
  q.select = {"id"};
  q.where = "d = DATE '2024-01-31'";
  EXPECT_EQ(QueryText(q), "id\n0\n3\n");
  q.where = "ts < TIMESTAMP '1970-01-01 00:00:00'";
  EXPECT_EQ(QueryText(q), "id\n1\n4\n");
  q.where = "price >= 12.5 OR price < -0.04";
  EXPECT_EQ(QueryText(q), "id\n3\n4\n");
  q.where = "price IS NULL";
  EXPECT_EQ(QueryText(q), "id\n0\n1\n2\n5\n");  // the first file has no price column: null
  q.where = "part = DATE '2024-02-01' AND s > 0";
  EXPECT_EQ(QueryText(q), "id\n5\n");
  // Partition values and the files' statistics skip files without opening them.
  q.where = "part > '2024-01-01'";
  q.count_only = true;
  std::ostringstream out;
  auto r = PrintQuery(q, out);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(out.str(), "3\n");
  EXPECT_EQ(r->files_scanned, 0);
  q.where = "d > DATE '2024-02-01'";  // stoke's add stats leave dates out: the row groups' decide
  r = PrintQuery(q, out);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rows, 0);
  EXPECT_EQ(r->row_groups_scanned, 0);
}

TEST(Query, ColumnsOfDatesTimestampsAndDecimals) {
  LogicalTypesTable t;
  t.Build();
  PrintedQuery q;
  q.table_dir = t.dir();
  q.select = {"d", "ts", "price"};
  auto r = QueryTableColumns(q);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const QueryColumn& d = r->columns[0];
  EXPECT_EQ(d.kind, ColumnKind::kDate);
  ASSERT_EQ(d.data.size(), 6 * sizeof(int64_t));
  int64_t first = 0;
  std::memcpy(&first, d.data.data(), 8);
  EXPECT_EQ(first, 19753);
  EXPECT_EQ(d.valid, (std::vector<uint8_t>{1, 0, 1, 1, 0, 1}));
  const QueryColumn& ts = r->columns[1];
  EXPECT_EQ(ts.kind, ColumnKind::kTimestamp);
  int64_t fourth = 0;
  std::memcpy(&fourth, ts.data.data() + 3 * 8, 8);
  EXPECT_EQ(fourth, 1706702400123000);  // stored in milliseconds, read in microseconds
  const QueryColumn& price = r->columns[2];
  EXPECT_EQ(price.kind, ColumnKind::kDecimal);
  EXPECT_EQ(price.strings, (std::vector<std::string>{"", "", "", "12.50", "-0.05", ""}));
}

TEST(Query, RowsADeletionVectorDeletesVanishFromRowsAndCounts) {
  TestTable t;
  t.AppendFile(0, 100, 25);
  t.AppendFile(100, 100, 25);
  // Rows 3, 4 and 60 of the second file (ids 103, 104, 160), and every row of its first row group but one.
  std::vector<uint64_t> deleted = {3, 4, 60};
  for (uint64_t r = 0; r < 25; ++r) {
    if (r != 3 && r != 4 && r != 7) deleted.push_back(r);
  }
  std::sort(deleted.begin(), deleted.end());
  testing_support::DeleteRows(t, "part-100.parquet", deleted);
  const int64_t live = 200 - static_cast<int64_t>(deleted.size());  // 200 - 25 = 175
  PrintedQuery q;
  q.table_dir = t.dir();
  q.count_only = true;
  std::ostringstream count;
  auto r = PrintQuery(q, count);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(count.str(), fmt::format("{}\n", live));
  EXPECT_EQ(r->files_scanned, 0);  // numRecords less the DV's cardinality
  EXPECT_EQ(r->files_counted_from_stats, 2);
  q.where = "id >= 100 AND id < 130";  // the second file's first row group: one live row (107), then 5
  r = PrintQuery(q, count);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rows, 1 + 5);
  q.count_only = false;
  q.select = {"id"};
  q.format = RowFormat::kCsv;
  q.where = "id >= 100 AND id < 110 OR id = 160 OR id = 161";
  std::ostringstream rows;
  ASSERT_TRUE(PrintQuery(q, rows).ok());
  EXPECT_EQ(rows.str(), "id\n107\n161\n");
  q.where = "";
  auto cols = QueryTableColumns(q);
  ASSERT_TRUE(cols.ok());
  EXPECT_EQ(cols->report.rows, live);
  // The table's own count (inspect) and Snapshot::num_records agree.
  EXPECT_EQ(t.log().ReadSnapshot()->num_records(), live);
}

TEST(Query, StructsArraysAndMapsPrintAsJsonAndReadAsColumns) {
  const std::string dir = std::filesystem::temp_directory_path() / "stoke_nested_query";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  using Kind = SchemaNode::Kind;
  using parquet::Repetition;
  auto leaf = [](std::string name, parquet::Type type, bool is_string = false) {
    return SchemaNode{.name = std::move(name), .type = type, .is_string = is_string};
  };
  SchemaNode root{.name = "schema", .repetition = Repetition::kRequired, .kind = Kind::kStruct};
  root.children = {
      leaf("id", parquet::Type::kInt64),
      SchemaNode{.name = "s", .kind = Kind::kStruct,
                 .children = {leaf("b", parquet::Type::kByteArray, true), leaf("a", parquet::Type::kInt64)}},
      SchemaNode{.name = "xs", .kind = Kind::kList, .children = {leaf("element", parquet::Type::kInt64)}},
      SchemaNode{.name = "m", .kind = Kind::kMap,
                 .children = {SchemaNode{.name = "key", .repetition = Repetition::kRequired, .type = parquet::Type::kByteArray,
                                         .is_string = true},
                              leaf("value", parquet::Type::kInt64)}}};
  std::vector<nlohmann::json> rows = {
      {{"id", 1}, {"s", {{"b", "x"}, {"a", 7}}}, {"xs", {1, 2}}, {"m", {{"k", 3}}}},
      {{"id", 2}, {"s", nullptr}, {"xs", nlohmann::json::array()}, {"m", nullptr}},
  };
  ASSERT_TRUE(WriteNestedParquet(LocalStorage(), dir + "/part-0.parquet", root, rows, WriterOptions{}).ok());
  delta::Metadata m;
  m.id = "00000000-0000-4000-8000-000000000002";
  m.schema_string = R"({"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},)"
                    R"({"name":"s","type":{"type":"struct","fields":[{"name":"b","type":"string","nullable":true,"metadata":{}},)"
                    R"({"name":"a","type":"long","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}},)"
                    R"({"name":"xs","type":{"type":"array","elementType":"long","containsNull":true},"nullable":true,"metadata":{}},)"
                    R"({"name":"m","type":{"type":"map","keyType":"string","valueType":"long","valueContainsNull":true},)"
                    R"("nullable":true,"metadata":{}}]})";
  delta::AddFile add;
  add.path = "part-0.parquet";
  add.size = static_cast<int64_t>(std::filesystem::file_size(dir + "/part-0.parquet"));
  delta::DeltaLog log(LocalStorage(), dir);
  ASSERT_TRUE(log.Commit(-1, {delta::Protocol{}, m, add}, delta::CommitKind::kExclusive, "WRITE", {}).ok());
  PrintedQuery q;
  q.table_dir = dir;
  q.format = RowFormat::kJson;
  EXPECT_EQ(QueryText(q), "{\"id\":1,\"s\":{\"b\":\"x\",\"a\":7},\"xs\":[1,2],\"m\":{\"k\":3}}\n"
                          "{\"id\":2,\"s\":null,\"xs\":[],\"m\":null}\n");
  q.format = RowFormat::kCsv;
  q.select = {"s"};
  EXPECT_EQ(QueryText(q), "s\n\"{\"\"b\"\":\"\"x\"\",\"\"a\"\":7}\"\n\n");
  q.where = "s = 1";
  EXPECT_NE(QueryText(q).find("column 's' holds structs; `where` compares scalar columns only"), std::string::npos);
  q.where = "s IS NULL";
  q.select = {"id"};
  EXPECT_EQ(QueryText(q), "id\n2\n");
  q.where = "";
  q.select = {"xs", "m"};
  auto cols = QueryTableColumns(q);
  ASSERT_TRUE(cols.ok()) << cols.status().ToString();
  EXPECT_EQ(cols->columns[0].kind, ColumnKind::kNested);
  EXPECT_EQ(cols->columns[0].strings, (std::vector<std::string>{"[1,2]", "[]"}));
  EXPECT_EQ(cols->columns[1].valid, (std::vector<uint8_t>{1, 0}));
  std::filesystem::remove_all(dir);
}

// A table under column mapping: data files, statistics and partition values name columns by their
// physical names (mode name) or the files' field ids (mode id); every output uses the schema's names.
class MappedTable {
 public:
  explicit MappedTable(const std::string& mode) : dir_(std::filesystem::temp_directory_path() / ("stoke_mapped_" + mode)) {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    // The physical names: in mode id, the file's names are anything; its field ids decide.
    const std::string id_name = mode == "id" ? "renamed-in-file" : "col-1a";
    std::vector<ColumnSpec> file_cols = {{.name = id_name, .type = parquet::Type::kInt64},
                                         {.name = "col-2b", .type = parquet::Type::kByteArray, .is_string = true}};
    std::vector<parquet::SchemaElement> schema(3);
    schema[0].name = "spark_schema";
    schema[0].num_children = 2;
    for (size_t c = 0; c < 2; ++c) {
      schema[c + 1].name = file_cols[c].name;
      schema[c + 1].type = file_cols[c].type;
      schema[c + 1].repetition = parquet::Repetition::kRequired;
      schema[c + 1].field_id = static_cast<int32_t>(c + 1);
    }
    schema[2].converted_type = parquet::ConvertedType::kUtf8;
    auto w = ParquetFileWriter::CreateNested(LocalStorage(), dir_ + "/part-0.parquet", file_cols, schema);
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    RowGroupEncoder enc((*w)->columns(), (*w)->options());
    EXPECT_TRUE(enc.SetScalars(0, ColumnValues{std::vector<int64_t>{1, 2, 3}, {}}).ok());
    EXPECT_TRUE(enc.SetScalars(1, ColumnValues{std::vector<std::string>{"a", "b", "c"}, {}}).ok());
    auto rg = enc.Finish();
    EXPECT_TRUE(rg.ok());
    EXPECT_TRUE((*w)->WriteRowGroup(std::move(*rg)).ok());
    EXPECT_TRUE((*w)->Close().ok());
    delta::AddFile add;
    add.path = "part-0.parquet";
    add.size = static_cast<int64_t>(std::filesystem::file_size(dir_ + "/part-0.parquet"));
    add.partition_values["col-3c"] = "p1";
    add.stats = R"({"numRecords":3,"minValues":{"col-1a":1,"col-2b":"a"},"maxValues":{"col-1a":3,"col-2b":"c"},)"
                R"("nullCount":{"col-1a":0,"col-2b":0}})";
    delta::Metadata m;
    m.id = "00000000-0000-4000-8000-000000000003";
    auto field = [](const std::string& name, const std::string& type, int id, const std::string& physical) {
      return fmt::format(R"({{"name":"{}","type":"{}","nullable":true,"metadata":{{"delta.columnMapping.id":{},)"
                         R"("delta.columnMapping.physicalName":"{}"}}}})",
                         name, type, id, physical);
    };
    m.schema_string = fmt::format(R"({{"type":"struct","fields":[{},{},{}]}})", field("id", "long", 1, "col-1a"),
                                  field("name", "string", 2, "col-2b"), field("part", "string", 3, "col-3c"));
    m.partition_columns = {"part"};
    m.configuration["delta.columnMapping.mode"] = mode;
    m.configuration["delta.columnMapping.maxColumnId"] = "3";
    delta::DeltaLog log(LocalStorage(), dir_);
    const delta::Protocol protocol{2, 5, {}, {}};
    EXPECT_TRUE(log.Commit(-1, {protocol, m, add}, delta::CommitKind::kExclusive, "WRITE", {}).ok());
  }
  ~MappedTable() { std::filesystem::remove_all(dir_); }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

TEST(Query, ColumnMappingReadsPhysicalNamesAndFieldIdsUnderTheSchemasNames) {
  for (const std::string mode : {"name", "id"}) {
    SCOPED_TRACE(mode);
    MappedTable t(mode);
    PrintedQuery q;
    q.table_dir = t.dir();
    q.format = RowFormat::kCsv;
    EXPECT_EQ(QueryText(q), "id,name,part\n1,a,p1\n2,b,p1\n3,c,p1\n");
    q.where = "id >= 2 AND part = 'p1'";
    EXPECT_EQ(QueryText(q), "id,name,part\n2,b,p1\n3,c,p1\n");
    // The statistics, by physical name, skip the file.
    q.where = "id > 3";
    q.count_only = true;
    std::ostringstream out;
    auto r = PrintQuery(q, out);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->rows, 0);
    EXPECT_EQ(r->files_scanned, 0);
  }
}

}  // namespace
}  // namespace stoke
