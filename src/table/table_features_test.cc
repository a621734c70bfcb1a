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

constexpr WriteCommand kAppend = WriteCommand::kAppend, kOverwrite = WriteCommand::kOverwrite,
                       kOptimize = WriteCommand::kOptimize, kDeleteRows = WriteCommand::kDeleteRows,
                       kVacuum = WriteCommand::kVacuum, kCheckpoint = WriteCommand::kCheckpoint;
constexpr WriteCommand kCommands[] = {kAppend, kOverwrite, kOptimize, kDeleteRows, kVacuum, kCheckpoint};

// The commands CheckWritable lets write to `s`, as a string of initials (A O P D V C).
std::string Allowed(const Snapshot& s) {
  std::string out;
  for (WriteCommand c : kCommands) {
    if (CheckWritable(s, c, "t").ok()) out += "AOPDVC"[static_cast<int>(c)];
  }
  return out;
}

TEST(TableFeatures, WritesRefuseFeaturesTheyDoNotKeepBeforeWritingAnything) {
  EXPECT_EQ(Allowed(WithProtocol(1, 2)), "AOPDVC");
  EXPECT_EQ(Allowed(WithProtocol(3, 7, {"timestampNtz"}, {"timestampNtz", "appendOnly"})), "AOPDVC");
  // Features every command keeps.
  EXPECT_EQ(Allowed(WithProtocol(3, 7, {"deletionVectors", "v2Checkpoint"},
                                 {"deletionVectors", "domainMetadata", "inCommitTimestamp", "v2Checkpoint",
                                  "vacuumProtocolCheck", "typeWidening"})),
            "AOPDVC");
  // A feature stoke does not know is refused by every command, naming it and the command.
  Status s = CheckWritable(WithProtocol(3, 7, {}, {"deletionVectors", "futureFeature"}), kVacuum, "t");
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("vacuum: table 't' uses futureFeature (a writer feature stoke does not know)"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(Allowed(WithProtocol(3, 7, {}, {"futureFeature"})), "");
  EXPECT_EQ(CheckWritable(WithProtocol(1, 8), kCheckpoint, "t").code(), StatusCode::kUnsupported);
  // Row tracking binds no command (ingest and optimize assign fresh row ids, optimize preserves stable ones),
  // clustering every command that writes data files (checkpoints and removes carry their fields);
  // Iceberg compatibility every command.
  EXPECT_EQ(Allowed(WithProtocol(3, 7, {}, {"domainMetadata", "rowTracking"})), "AOPDVC");
  EXPECT_EQ(Allowed(WithProtocol(3, 7, {}, {"domainMetadata", "clustering"})), "VC");
  EXPECT_EQ(Allowed(WithProtocol(3, 7, {}, {"icebergCompatV2"})), "");
}

TEST(TableFeatures, FeaturesTurnedOnByMetadataBindOnlyTheCommandsTheirRulesName) {
  // Supported but not in use: nothing to keep.
  EXPECT_EQ(Allowed(WithProtocol(1, 6)), "AOPDVC");
  EXPECT_EQ(Allowed(WithProtocol(3, 7, {}, {"changeDataFeed", "checkConstraints", "columnMapping", "identityColumns"})),
            "AOPDVC");
  Snapshot cdf = WithProtocol(1, 4);
  cdf.metadata.configuration["delta.enableChangeDataFeed"] = "true";
  EXPECT_EQ(Allowed(cdf), "AOPVC");  // a delete of rows needs change data files
  Status s = CheckWritable(cdf, kDeleteRows, "t");
  EXPECT_NE(s.message().find("changeDataFeed (deleting rows of a file needs change data files)"), std::string::npos)
      << s.message();
  // Invariants and CHECK constraints: ingest checks new rows against them (RowConstraints).
  Snapshot constrained = WithProtocol(1, 3);
  constrained.metadata.configuration["delta.constraints.positive"] = "x > 0";
  EXPECT_EQ(Allowed(constrained), "AOPDVC");
  // Identity columns: ingest generates stoke's ids (or refuses a source's values), in ingest itself.
  Snapshot identity = WithProtocol(1, 6);
  identity.metadata.schema_string =
      R"({"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{"delta.identity.start":1,"delta.identity.step":1}}]})";
  EXPECT_EQ(Allowed(identity), "AOPDVC");
  // Generated columns bind new rows: ingest is refused.
  Snapshot generated = WithProtocol(1, 4);
  generated.metadata.schema_string =
      R"({"type":"struct","fields":[{"name":"x","type":"long","nullable":true,"metadata":{"delta.generationExpression":"1"}}]})";
  EXPECT_EQ(Allowed(generated), "PDVC");
  EXPECT_NE(CheckWritable(generated, kAppend, "t").message().find("generatedColumns (stoke does not compute"),
            std::string::npos);
  Snapshot mapped = WithProtocol(2, 5);
  mapped.metadata.configuration["delta.columnMapping.mode"] = "name";
  EXPECT_EQ(Allowed(mapped), "AOPDVC");  // ingest and optimize write physical names and field ids
  Snapshot invariants = WithProtocol(1, 2);
  invariants.metadata.schema_string =
      R"({"type":"struct","fields":[{"name":"x","type":"long","nullable":true,"metadata":{"delta.invariants":"{\"expression\":{\"expression\":\"x > 3\"}}"}}]})";
  EXPECT_EQ(Allowed(invariants), "AOPDVC");
  // appendOnly forbids only what removes rows.
  Snapshot append_only = WithProtocol(1, 2);
  append_only.metadata.configuration["delta.appendOnly"] = "true";
  EXPECT_EQ(Allowed(append_only), "APVC");
  EXPECT_NE(CheckWritable(append_only, kOverwrite, "t").message().find("appendOnly"), std::string::npos);
  // A feature in use where the protocol does not list it (an older writer's table) counts too.
  Snapshot unlisted = WithProtocol(1, 2);
  unlisted.metadata.configuration["delta.enableChangeDataFeed"] = "true";
  EXPECT_EQ(Allowed(unlisted), "AOPVC");
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
