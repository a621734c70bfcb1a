#include <gtest/gtest.h>

#include <cstring>
#include <sstream>

#include "stoke/table.h"
#include "table/scan.h"
#include "table/test_table.h"

namespace stoke {
namespace {

using testing_support::TensorOf;
using testing_support::TestTable;

TEST(Query, FiltersWithFileAndRowGroupSkipping) {
  TestTable t;
  for (int64_t f = 0; f < 5; ++f) t.AppendFile(f * 100, 100, 25);  // 5 files of 4 row groups
  QueryOptions q;
  q.table_dir = t.dir();
  q.where = "id >= 110 AND id < 140 AND label = 1";
  q.select = {"id", "name", "t"};
  q.format = RowFormat::kCsv;
  std::ostringstream out;
  auto r = QueryTable(q, out);
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
  r = QueryTable(q, count);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(count.str(), "125\n");

  q.where = "label = 'x'";
  std::ostringstream bad;
  EXPECT_EQ(QueryTable(q, bad).status().code(), StatusCode::kInvalidArgument);
  q.where = "";
  q.select = {"nope"};
  EXPECT_EQ(QueryTable(q, bad).status().code(), StatusCode::kInvalidArgument);
}

TEST(Query, TimeTravelsAndLimits) {
  TestTable t;
  t.AppendFile(0, 10);
  t.AppendFile(10, 10);
  QueryOptions q;
  q.table_dir = t.dir();
  q.count_only = true;
  q.version = 0;
  std::ostringstream out;
  ASSERT_TRUE(QueryTable(q, out).ok());
  EXPECT_EQ(out.str(), "10\n");
  q.count_only = false;
  q.version.reset();
  q.limit = 3;
  q.select = {"id"};
  q.format = RowFormat::kJson;
  std::ostringstream rows;
  auto r = QueryTable(q, rows);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(rows.str(), "{\"id\":0}\n{\"id\":1}\n{\"id\":2}\n");
}

TEST(Query, ColumnsHoldTheRowsQueryPrints) {
  TestTable t(8);
  t.AppendFile(0, 30, 10);
  t.AppendFile(30, 30, 10);
  QueryOptions q;
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
  ASSERT_TRUE(QueryTable(q, printed).ok());
  EXPECT_EQ(printed.str(), "id\n25\n26\n27\n28\n29\n");
  r = QueryTableColumns(q);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->columns[0].data.size(), 5u * 8);
  int64_t last = 0;
  std::memcpy(&last, r->columns[0].data.data() + 4 * 8, 8);
  EXPECT_EQ(last, 29);

  q.limit = -5;  // only -1 means all
  EXPECT_NE(QueryTableColumns(q).status().message().find("--limit must be -1 (all) or at least 0"), std::string::npos);
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
  QueryOptions q;
  q.table_dir = t.dir();
  q.count_only = true;
  std::ostringstream out;

  q.where = "id >= 20 AND id < 50";  // files 2, 3, 4 hold only matches; the others none
  auto r = QueryTable(q, out);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rows, 30);
  EXPECT_EQ(r->files_counted_from_stats, 3);
  EXPECT_EQ(r->files_scanned, 0);

  q.where = "id >= 25 AND id < 50";  // file 2 straddles: opened; its first row group (20..24) is decided by
                                     // the row-group statistics too, the second (25..29) counted from them
  r = QueryTable(q, out);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rows, 25);
  EXPECT_EQ(r->files_counted_from_stats, 2);
  EXPECT_EQ(r->files_scanned, 1);
  EXPECT_EQ(r->row_groups_scanned, 0);

  q.where = "label = 1";  // labels 0..2 in every file: every file must be read
  r = QueryTable(q, out);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rows, 20);
  EXPECT_EQ(r->files_counted_from_stats, 0);
  EXPECT_EQ(r->files_scanned, 6);

  q.where = "";  // no predicate: numRecords answers
  r = QueryTable(q, out);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rows, 60);
  EXPECT_EQ(r->files_counted_from_stats, 6);

  // The counts agree with a scan that reads every row.
  for (const char* where : {"id >= 25 AND id < 50", "label = 1", "name IS NULL", "id IN (3, 17, 59) OR label = 2"}) {
    q.where = where;
    q.count_only = true;
    auto counted = QueryTable(q, out);
    ASSERT_TRUE(counted.ok()) << where;
    q.count_only = false;
    std::ostringstream rows;
    auto listed = QueryTable(q, rows);
    ASSERT_TRUE(listed.ok()) << where;
    EXPECT_EQ(counted->rows, listed->rows) << where;
  }
}

}  // namespace
}  // namespace stoke
