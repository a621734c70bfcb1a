#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sstream>
#include <string>

#include "stoke/table.h"
#include "table/test_table.h"

namespace stoke {
namespace {

using testing_support::CommitAdds;
using testing_support::TestTable;
using testing_support::WriteDataFile;

nlohmann::json InspectJson(const std::string& dir) {
  InspectTableOptions options;
  options.format = DescriptionFormat::kJson;
  Result<std::string> out = InspectTable(dir, options);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  if (!out.ok()) return nullptr;
  auto doc = nlohmann::json::parse(*out, nullptr, false);
  EXPECT_FALSE(doc.is_discarded()) << *out;
  return doc;
}

// --json lists every data file with its statistics as the log holds them; statistics that are not
// JSON are left out (the file is still listed).
TEST(InspectTable, JsonListsEveryDataFileWithItsStatistics) {
  TestTable table;
  delta::AddFile good = WriteDataFile(table.dir(), "part-a.parquet", 0, 5, 5);
  delta::AddFile bad = WriteDataFile(table.dir(), "part-b.parquet", 5, 3, 3);
  bad.stats = "{\"numRecords\": 3, \"minValues\": {";  // cut short
  delta::AddFile none = WriteDataFile(table.dir(), "part-c.parquet", 8, 2, 2);
  none.stats.reset();
  const std::string good_stats = *good.stats;
  CommitAdds(table, {good, bad, none});

  nlohmann::json doc = InspectJson(table.dir());
  EXPECT_EQ(doc["files"], 3);
  ASSERT_TRUE(doc["data_files"].is_array());
  ASSERT_EQ(doc["data_files"].size(), 3u);
  const auto& files = doc["data_files"];
  EXPECT_EQ(files[0]["path"], "part-a.parquet");
  EXPECT_EQ(files[0]["size"], good.size);
  EXPECT_EQ(files[0]["modificationTime"], 1);
  EXPECT_EQ(files[0]["stats"], nlohmann::json::parse(good_stats));
  EXPECT_EQ(files[0]["stats"]["numRecords"], 5);
  EXPECT_EQ(files[1]["path"], "part-b.parquet");
  EXPECT_FALSE(files[1].contains("stats"));
  EXPECT_EQ(files[2]["path"], "part-c.parquet");
  EXPECT_FALSE(files[2].contains("stats"));
  EXPECT_EQ(doc["rows"], -1) << "a file without statistics: the count is unknown";
}

TEST(InspectTable, NamesTheFeaturesAndTheRowsDeletionVectorsDelete) {
  TestTable table;
  table.AppendFile(0, 10);
  table.AppendFile(10, 5);
  testing_support::DeleteRows(table, "part-0.parquet", {1, 4, 7});
  nlohmann::json doc = InspectJson(table.dir());
  EXPECT_EQ(doc["rows"], 12);
  EXPECT_EQ(doc["deletion_vectors"], nlohmann::json({{"files", 1}, {"rows_deleted", 3}}));
  EXPECT_EQ(doc["protocol"]["readerFeatures"], nlohmann::json({"deletionVectors"}));
  EXPECT_EQ(doc["protocol"]["writerFeatures"], nlohmann::json({"deletionVectors"}));
  Result<std::string> text = InspectTable(table.dir(), {});
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_NE(text->find("protocol    reader 3, writer 7; reader features: deletionVectors; writer features: "
                       "deletionVectors\n"),
            std::string::npos)
      << *text;
  EXPECT_NE(text->find("rows        12 (3 deleted by the deletion vectors of 1 file)\n"), std::string::npos) << *text;
}

TEST(InspectTable, JsonOfATableWithoutFilesHasAnEmptyList) {
  TestTable table;
  CommitAdds(table, {});
  nlohmann::json doc = InspectJson(table.dir());
  EXPECT_EQ(doc["files"], 0);
  EXPECT_EQ(doc["data_files"], nlohmann::json::array());
}

// Every limit takes kNoLimit for "all" and 0 for none; a table is still looked for with 0.
TEST(TableHistory, KNoLimitIsEveryVersionAndZeroIsNone) {
  TestTable table;
  table.AppendFile(0, 10);
  table.AppendFile(10, 5);  // versions 0 (the table) and 1, 2 (the files), at least
  auto all = TableHistory(table.dir(), kNoLimit);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_GE(all->size(), 2u);
  EXPECT_GT((*all)[0].version, (*all)[1].version) << "newest first";
  auto defaulted = TableHistory(table.dir());
  ASSERT_TRUE(defaulted.ok());
  EXPECT_EQ(defaulted->size(), all->size());
  auto one = TableHistory(table.dir(), 1);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].version, (*all)[0].version);
  auto none = TableHistory(table.dir(), 0);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->empty());
  EXPECT_EQ(TableHistory(table.dir() + "/missing", 0).status().code(), StatusCode::kNotFound);
  auto bad = TableHistory(table.dir(), -2);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("`limit` must be -1 (all) or at least 0"), std::string::npos);
}

}  // namespace
}  // namespace stoke
