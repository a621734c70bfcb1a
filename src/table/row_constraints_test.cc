#include "table/row_constraints.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "format/parquet_writer.h"
#include "io/local_files.h"

namespace stoke {
namespace {

std::vector<ColumnSpec> Columns() {
  std::vector<ColumnSpec> cols(3);
  cols[0] = {.name = "file", .type = parquet::Type::kByteArray, .is_string = true};
  cols[1] = {.name = "x", .type = parquet::Type::kInt64, .optional = true};
  cols[2] = {.name = "part", .type = parquet::Type::kInt32};
  return cols;
}

delta::Metadata WithRules(const std::map<std::string, std::string>& checks, const std::string& invariant_on_x = "") {
  delta::Metadata m;
  nlohmann::json x = {{"name", "x"}, {"type", "long"}, {"nullable", true}, {"metadata", nlohmann::json::object()}};
  if (!invariant_on_x.empty()) x["metadata"]["delta.invariants"] = nlohmann::json{{"expression", {{"expression", invariant_on_x}}}}.dump();
  m.schema_string = nlohmann::json{{"type", "struct"}, {"fields", {x}}}.dump();
  for (const auto& [name, sql] : checks) m.configuration["delta.constraints." + name] = sql;
  return m;
}

Result<RowConstraints> Rules(const delta::Metadata& m) { return RowConstraints::FromMetadata(m, Columns(), {"part"}, "ingest", "t"); }

// A file of rows (file, x): x null where `x` holds nullopt.
std::string WriteRows(const std::string& dir, const std::vector<std::optional<int64_t>>& x) {
  const std::string path = dir + "/rows.parquet";
  std::vector<ColumnSpec> cols = {Columns()[0], Columns()[1]};
  auto writer = ParquetFileWriter::Create(LocalStorage(), path, cols);
  EXPECT_TRUE(writer.ok());
  RowGroupEncoder enc((*writer)->columns(), (*writer)->options());
  std::vector<std::string> files;
  ColumnValues xs{std::vector<int64_t>{}, {}};
  for (size_t i = 0; i < x.size(); ++i) {
    files.push_back("s_" + std::to_string(i) + ".npy");
    xs.defined.push_back(x[i] ? 1 : 0);
    if (x[i]) std::get<std::vector<int64_t>>(xs.values).push_back(*x[i]);
  }
  EXPECT_TRUE(enc.SetScalars(0, ColumnValues{files, {}}).ok());
  EXPECT_TRUE(enc.SetScalars(1, std::move(xs)).ok());
  auto rg = enc.Finish();
  EXPECT_TRUE(rg.ok());
  EXPECT_TRUE((*writer)->WriteRowGroup(std::move(*rg)).ok());
  EXPECT_TRUE((*writer)->Close().ok());
  return path;
}

// A rule must be TRUE: FALSE and NULL (a null x) are violations, named by row and source file.
TEST(RowConstraints, FalseOrNullIsAViolationNamingTheRow) {
  auto dir = TemporaryDirectory::Create("stoke_rules_");
  ASSERT_TRUE(dir.ok());
  auto rules = Rules(WithRules({{"positive", "`x` > 0"}}));
  ASSERT_TRUE(rules.ok()) << rules.status().ToString();
  EXPECT_TRUE(rules->CheckFile(LocalStorage(), WriteRows(dir->path(), {1, 2, 3})).ok());
  Status s = rules->CheckFile(LocalStorage(), WriteRows(dir->path(), {1, 0, 3}));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("row 1 (file 's_1.npy') violates the table's CHECK constraint 'positive' (`x` > 0)"),
            std::string::npos)
      << s.message();
  s = rules->CheckFile(LocalStorage(), WriteRows(dir->path(), {1, 2, std::nullopt}));
  EXPECT_NE(s.message().find("row 2 (file 's_2.npy')"), std::string::npos) << s.message();
  // An invariant is the same kind of rule.
  auto invariant = Rules(WithRules({}, "x < 10"));
  ASSERT_TRUE(invariant.ok()) << invariant.status().ToString();
  s = invariant->CheckFile(LocalStorage(), WriteRows(dir->path(), {1, 12}));
  EXPECT_NE(s.message().find("invariant of column 'x' (x < 10)"), std::string::npos) << s.message();
}

// What the predicate language cannot express, or whose text Spark reads otherwise, is refused by
// name; the rest binds.
TEST(RowConstraints, RulesStokeCannotCheckAreRefusedByName) {
  EXPECT_TRUE(Rules(WithRules({{"a", "x IN (1, 2) AND file = 'its' AND `x` IS NOT NULL"}})).ok());
  const std::pair<const char*, const char*> refused[] = {
      {"length(file) > 0", "length"},
      {"part = 1", "partition column"},
      {"file = \"x\"", "double-quoted"},
      {"file = 'a\\\\b'", "backslash"},
      {"file = 'a' 'b'", "adjacent"},
      {"file = 'it''s'", "adjacent"},
      {"file = 'open", "closing quote"},
      {"nope > 1", "nope"},
  };
  for (const auto& [sql, why] : refused) {
    auto r = Rules(WithRules({{"c", sql}}));
    ASSERT_EQ(r.status().code(), StatusCode::kUnsupported) << sql;
    EXPECT_NE(r.status().message().find("CHECK constraint 'c'"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(why), std::string::npos) << sql << ": " << r.status().message();
  }
  delta::Metadata malformed = WithRules({});
  malformed.schema_string = R"({"type":"struct","fields":[{"name":"x","type":"long","metadata":{"delta.invariants":"{}"}}]})";
  EXPECT_EQ(Rules(malformed).status().code(), StatusCode::kCorruption);
}

}  // namespace
}  // namespace stoke
