#include "table/table_features.h"

#include <gtest/gtest.h>

namespace stoke::delta {
namespace {

Snapshot WithProtocol(int32_t reader, int32_t writer, std::vector<std::string> reader_features = {},
                      std::vector<std::string> writer_features = {}) {
  Snapshot s;
  s.protocol = Protocol{reader, writer, std::move(reader_features), std::move(writer_features)};
  s.metadata.schema_string = R"({"type":"struct","fields":[{"name":"x","type":"long","nullable":true,"metadata":{}}]})";
  return s;
}

TEST(TableFeatures, ReadsVersionOneAndThreeWithTheFeaturesStokeImplements) {
  EXPECT_TRUE(CheckReadable(Protocol{1, 2, {}, {}}, "t").ok());
  EXPECT_TRUE(CheckReadable(Protocol{3, 7, {"timestampNtz", "vacuumProtocolCheck", "typeWidening"}, {}}, "t").ok());
  EXPECT_TRUE(CheckReadable(Protocol{3, 7, {"deletionVectors"}, {}}, "t").ok());
  EXPECT_TRUE(CheckReadable(Protocol{3, 7, {"columnMapping", "v2Checkpoint", "typeWidening-preview"}, {}}, "t").ok());
  EXPECT_TRUE(CheckReadable(Protocol{2, 5, {}, {}}, "t").ok());  // column mapping, before table features
  Status s = CheckReadable(Protocol{3, 7, {"timestampNtz", "variantType", "rowTracking"}, {}}, "'t' version 4");
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  // Only the missing features are named.
  EXPECT_NE(s.message().find("[variantType, rowTracking]"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("'t' version 4"), std::string::npos) << s.message();
  EXPECT_EQ(CheckReadable(Protocol{4, 7, {}, {}}, "t").code(), StatusCode::kUnsupported);
}

TEST(TableFeatures, TheVariantColumnsAStokeLacksAreNamed) {
  Snapshot s = WithProtocol(3, 7, {"variantType"}, {"variantType"});
  s.metadata.schema_string =
      R"({"type":"struct","fields":[{"name":"id","type":"long"},{"name":"v","type":"variant"},)"
      R"({"name":"s","type":{"type":"struct","fields":[{"name":"x","type":"variant"}]}}]})";
  Status st = CheckReadable(s, "'t' version 2");
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_NE(st.message().find("[variantType]"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("variant type of columns 'v', 's'"), std::string::npos) << st.message();
}

TEST(TableFeatures, WritesRefuseFeaturesTheyDoNotKeepBeforeWritingAnything) {
  EXPECT_TRUE(CheckWritable(WithProtocol(1, 2), "optimize", "t").ok());
  EXPECT_TRUE(CheckWritable(WithProtocol(3, 7, {"timestampNtz"}, {"timestampNtz", "appendOnly"}), "ingest", "t").ok());
  // A feature listed for writers that stoke does not keep is refused, naming it and the command.
  Status s = CheckWritable(WithProtocol(3, 7, {"deletionVectors"}, {"deletionVectors", "domainMetadata"}), "vacuum", "t");
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("vacuum: table 't' uses [deletionVectors, domainMetadata]"), std::string::npos)
      << s.message();
  EXPECT_EQ(CheckWritable(WithProtocol(1, 8), "checkpoint", "t").code(), StatusCode::kUnsupported);
  // Legacy versions 3 to 6 imply features: refused when the table uses them.
  Snapshot cdf = WithProtocol(1, 4);
  EXPECT_TRUE(CheckWritable(cdf, "ingest", "t").ok());
  cdf.metadata.configuration["delta.enableChangeDataFeed"] = "true";
  s = CheckWritable(cdf, "ingest", "t");
  EXPECT_NE(s.message().find("[changeDataFeed]"), std::string::npos) << s.message();
  Snapshot constrained = WithProtocol(1, 3);
  constrained.metadata.configuration["delta.constraints.positive"] = "x > 0";
  EXPECT_NE(CheckWritable(constrained, "ingest", "t").message().find("checkConstraints"), std::string::npos);
  Snapshot mapped = WithProtocol(2, 5);
  mapped.metadata.configuration["delta.columnMapping.mode"] = "name";
  EXPECT_NE(CheckWritable(mapped, "optimize", "t").message().find("columnMapping"), std::string::npos);
  Snapshot invariants = WithProtocol(1, 2);
  invariants.metadata.schema_string =
      R"({"type":"struct","fields":[{"name":"x","type":"long","nullable":true,"metadata":{"delta.invariants":"{\"expression\":{\"expression\":\"x > 3\"}}"}}]})";
  EXPECT_NE(CheckWritable(invariants, "ingest", "t").message().find("invariants"), std::string::npos);
  // appendOnly forbids only what removes rows.
  Snapshot append_only = WithProtocol(1, 2);
  append_only.metadata.configuration["delta.appendOnly"] = "true";
  EXPECT_TRUE(CheckWritable(append_only, "ingest", "t").ok());
  EXPECT_NE(CheckWritable(append_only, "ingest", "t", /*removes_data=*/true).message().find("appendOnly"),
            std::string::npos);
}

TEST(TableFeatures, AddingAFeatureListsWhatTheLegacyVersionsImplied) {
  const Protocol stoke_table{1, 2, {}, {}};
  Protocol p = WithTableFeature(stoke_table, "deletionVectors", /*reader_feature=*/true);
  EXPECT_EQ(p.min_reader_version, 3);
  EXPECT_EQ(p.min_writer_version, 7);
  EXPECT_EQ(p.reader_features, std::vector<std::string>({"deletionVectors"}));
  EXPECT_EQ(p.writer_features, std::vector<std::string>({"appendOnly", "invariants", "deletionVectors"}));
  EXPECT_TRUE(CheckReadable(p, "t").ok());

  p = WithTableFeature(Protocol{2, 5, {}, {}}, "deletionVectors", true);
  EXPECT_EQ(p.reader_features, std::vector<std::string>({"columnMapping", "deletionVectors"}));
  EXPECT_EQ(p.writer_features, std::vector<std::string>({"appendOnly", "invariants", "checkConstraints", "changeDataFeed",
                                                         "generatedColumns", "columnMapping", "deletionVectors"}));

  p = WithTableFeature(stoke_table, "appendOnly", /*reader_feature=*/false);  // already implied
  EXPECT_EQ(p.min_reader_version, 1);
  EXPECT_TRUE(p.reader_features.empty());
  EXPECT_EQ(p.writer_features, std::vector<std::string>({"appendOnly", "invariants"}));

  const Protocol features{3, 7, {"deletionVectors"}, {"deletionVectors", "v2Checkpoint"}};
  p = WithTableFeature(features, "deletionVectors", true);  // present: unchanged
  EXPECT_EQ(p.reader_features, features.reader_features);
  EXPECT_EQ(p.writer_features, features.writer_features);
}

}  // namespace
}  // namespace stoke::delta
