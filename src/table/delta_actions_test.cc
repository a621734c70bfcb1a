// Delta actions as JSON: commit lines parsed and serialized, list parameters, path encoding.
#include "table/delta_log.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "table/delta_testing.h"

namespace stoke::delta {
namespace {

using json = nlohmann::json;
using namespace testing_support;  // NOLINT: the Delta test helpers

TEST(DeltaCommitFile, SerializeAndParseRoundTripEveryActionKind) {
  Protocol p;
  p.min_reader_version = 3;
  p.min_writer_version = 7;
  p.writer_features = {"appendOnly"};
  Metadata m = NewMetadata();
  m.description = "desc";
  m.format_options["k"] = "v";
  m.partition_columns = {"part"};
  AddFile a = NewAdd("part=1/a b.parquet", 123, 7);
  a.partition_values["part"] = "1";
  a.partition_values["other"] = std::nullopt;
  a.tags["t"] = "x";
  a.data_change = false;
  RemoveFile r = NewRemove("old.parquet", 55);
  r.extended_file_metadata = true;
  r.partition_values["part"] = "2";
  Txn t{"app", 42, 1700000000003};
  CommitInfo ci;
  ci.value = json{{"timestamp", 1}, {"operation", "WRITE"}, {"nested", {{"a", 1.5}}}};

  std::string text = SerializeCommit({ci, p, m, a, r, t});
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 6);
  EXPECT_EQ(text.back(), '\n');
  auto parsed = ParseCommit(text, "00000000000000000000.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ(parsed->size(), 6u);

  EXPECT_EQ(std::get<CommitInfo>((*parsed)[0]).value, ci.value);
  const auto& p2 = std::get<Protocol>((*parsed)[1]);
  EXPECT_EQ(p2.min_reader_version, 3);
  EXPECT_EQ(p2.min_writer_version, 7);
  EXPECT_TRUE(p2.reader_features.empty());
  EXPECT_EQ(p2.writer_features, std::vector<std::string>{"appendOnly"});
  const Metadata& m2 = *std::get<Boxed<Metadata>>((*parsed)[2]);
  EXPECT_EQ(m2.id, m.id);
  EXPECT_EQ(m2.name, m.name);
  EXPECT_EQ(m2.description, m.description);
  EXPECT_EQ(m2.format_provider, "parquet");
  EXPECT_EQ(m2.format_options, m.format_options);
  EXPECT_EQ(m2.schema_string, m.schema_string);
  EXPECT_EQ(m2.partition_columns, m.partition_columns);
  EXPECT_EQ(m2.configuration, m.configuration);
  EXPECT_EQ(m2.created_time, m.created_time);
  const auto& a2 = std::get<AddFile>((*parsed)[3]);
  EXPECT_EQ(a2.path, "part=1/a%20b.parquet");
  EXPECT_EQ(a2.partition_values, a.partition_values);
  EXPECT_EQ(a2.size, 123);
  EXPECT_EQ(a2.modification_time, a.modification_time);
  EXPECT_FALSE(a2.data_change);
  EXPECT_EQ(a2.stats, a.stats);
  EXPECT_EQ(a2.tags, a.tags);
  const auto& r2 = std::get<RemoveFile>((*parsed)[4]);
  EXPECT_EQ(r2.path, r.path);
  EXPECT_EQ(r2.deletion_timestamp, r.deletion_timestamp);
  EXPECT_TRUE(r2.data_change);
  EXPECT_TRUE(r2.extended_file_metadata);
  EXPECT_EQ(r2.partition_values, r.partition_values);
  EXPECT_EQ(r2.size, 55);
  const auto& t2 = std::get<Txn>((*parsed)[5]);
  EXPECT_EQ(t2.app_id, "app");
  EXPECT_EQ(t2.version, 42);
  EXPECT_EQ(t2.last_updated, t.last_updated);

  // Serializing what was parsed gives the same bytes.
  EXPECT_EQ(SerializeCommit(*parsed), text);
}

TEST(DeltaCommitFile, ParseSkipsIgnorableActionsAndBlankLinesAndKeepsDomains) {
  std::string text =
      "{\"cdc\":{\"path\":\"_change_data/x.parquet\",\"size\":1}}\n"
      "\n"
      "{\"domainMetadata\":{\"domain\":\"d\",\"configuration\":\"{}\",\"removed\":false}}\r\n"
      "{\"txn\":{\"appId\":\"a\",\"version\":3}}\n"
      "{\"checkpointMetadata\":{\"version\":1}}\n"
      "{\"sidecar\":{\"path\":\"x\",\"sizeInBytes\":1,\"modificationTime\":1}}";  // no final newline
  auto parsed = ParseCommit(text, "f.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ(parsed->size(), 2u);
  const auto& domain = std::get<DomainMetadata>((*parsed)[0]);
  EXPECT_EQ(domain.domain, "d");
  EXPECT_EQ(domain.configuration, "{}");
  EXPECT_FALSE(domain.removed);
  EXPECT_EQ(std::get<Txn>((*parsed)[1]).version, 3);
  EXPECT_EQ(SerializeCommit({domain}), R"({"domainMetadata":{"domain":"d","configuration":"{}","removed":false}})" "\n");
  // Each field is required.
  EXPECT_EQ(ParseCommit(R"({"domainMetadata":{"domain":"d","configuration":"{}"}})", "f.json").status().code(),
            StatusCode::kCorruption);
}

TEST(DeltaCommitFile, ParseIgnoresUnknownFieldsInsideActions) {
  std::string text =
      R"({"add":{"path":"a.parquet","partitionValues":{},"size":1,"modificationTime":2,"dataChange":true,)"
      R"("deletionVector":null,"baseRowId":7,"clusteringProvider":"x"}})"
      "\n";
  auto parsed = ParseCommit(text, "f.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ(parsed->size(), 1u);
  EXPECT_EQ(std::get<AddFile>((*parsed)[0]).path, "a.parquet");
}

TEST(DeltaCommitFile, ParseRejectsUnknownActionKindAsCorruption) {
  std::string text = "{\"txn\":{\"appId\":\"a\",\"version\":3}}\n{\"frobnicate\":{}}\n";
  auto parsed = ParseCommit(text, "00000000000000000004.json");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), StatusCode::kCorruption);
  EXPECT_NE(parsed.status().message().find("00000000000000000004.json: line 2"), std::string::npos);
  EXPECT_NE(parsed.status().message().find("frobnicate"), std::string::npos);
}

TEST(DeltaCommitFile, ParseRejectsMalformedLinesNamingFileAndLine) {
  const char* bad_lines[] = {
      "{\"add\":",                                                         // truncated JSON
      "[1,2]",                                                             // not an object
      "{\"add\":{},\"remove\":{}}",                                        // two actions on one line
      "{\"add\":5}",                                                       // action body not an object
      "{\"add\":{\"path\":\"a\",\"size\":\"big\",\"modificationTime\":1,\"dataChange\":true}}",  // size type
      "{\"add\":{\"size\":1,\"modificationTime\":1,\"dataChange\":true}}",                    // no path
      "{\"remove\":{\"path\":\"a\"}}",                                                         // no dataChange
      "{\"protocol\":{\"minReaderVersion\":1.5,\"minWriterVersion\":2}}",                      // float version
      "{\"protocol\":{\"minReaderVersion\":1,\"minWriterVersion\":99999999999}}",              // out of range
      "{\"metaData\":{\"id\":\"x\",\"schemaString\":\"{}\",\"partitionColumns\":[]}}",         // no format
      "{\"txn\":{\"appId\":\"a\",\"version\":18446744073709551615}}",                         // > INT64_MAX
      "{\"commitInfo\":[]}",                                                                   // not an object
      "{\"add\":{\"path\":\"a\",\"size\":-5,\"modificationTime\":1,\"dataChange\":true}}",      // negative size
      "{\"remove\":{\"path\":\"a\",\"size\":-1,\"dataChange\":true}}",                        // negative size
  };
  for (const char* line : bad_lines) {
    std::string text = std::string("{\"txn\":{\"appId\":\"a\",\"version\":1}}\n") + line + "\n";
    auto parsed = ParseCommit(text, "v.json");
    ASSERT_FALSE(parsed.ok()) << line;
    EXPECT_EQ(parsed.status().code(), StatusCode::kCorruption) << line;
    EXPECT_NE(parsed.status().message().find("v.json: line 2"), std::string::npos) << parsed.status().message();
  }
}

TEST(DeltaCommitFile, ListParametersAreEscapedJson) {
  EXPECT_EQ(JsonArrayText(""), "[]");
  EXPECT_EQ(JsonArrayText("label"), "[\"label\"]");
  const std::string tricky = "name = 'a\"b' AND x\\y";
  auto parsed = json::parse(JsonArrayText(tricky));
  ASSERT_TRUE(parsed.is_array());
  EXPECT_EQ(parsed[0].get<std::string>(), tricky);
}

TEST(DeltaPath, EncodeAndDecodeRoundTrip) {
  EXPECT_EQ(EncodePath("part-00000-abc.parquet"), "part-00000-abc.parquet");
  EXPECT_EQ(EncodePath("dir/a b%c.parquet"), "dir/a%20b%25c.parquet");
  EXPECT_EQ(EncodePath("k=v/x+y~_.z"), "k=v/x+y~_.z");  // sub-delims are path characters
  EXPECT_EQ(EncodePath("a#b?c[d]"), "a%23b%3Fc%5Bd%5D");
  EXPECT_EQ(EncodePath("\xc3\xa9t\xc3\xa9"), "%C3%A9t%C3%A9");
  for (std::string p : {"a b", "100%", "\xc3\xa9t\xc3\xa9/\xe6\x97\xa5\xe6\x9c\xac.parquet", "#?&=:@!$'()*,;[]"}) {
    auto back = DecodePath(EncodePath(p));
    ASSERT_TRUE(back.ok()) << p;
    EXPECT_EQ(*back, p);
  }
  EXPECT_EQ(*DecodePath("a%2fb%2Fc"), "a/b/c");
  EXPECT_EQ(*DecodePath("plain+path"), "plain+path");
}

TEST(DeltaPath, DecodeRejectsBadEscapes) {
  for (const char* bad : {"%", "a%2", "%zz", "%g0", "abc%", "%%", "%00"}) {
    auto r = DecodePath(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace stoke::delta
