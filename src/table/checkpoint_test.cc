#include "table/checkpoint.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "format/parquet_nested.h"
#include "format/parquet_reader.h"
#include "table/deletion_vector.h"

namespace stoke::delta {
namespace {

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = std::filesystem::temp_directory_path() / "stoke_checkpoint_XXXXXX";
    dir_ = mkdtemp(tmpl.data());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

// Deletion vectors of each storage type, with and without their optional fields.
std::shared_ptr<const DeletionVectorDescriptor> SomeDeletionVector(int i) {
  DeletionVectorDescriptor dv;
  if (i % 3 == 0) {
    dv.storage_type = kDvStorageRelativeUuid;
    dv.path_or_inline_dv = "ab^-aqEH.-t@S}K{vb[*k^";
    dv.offset = 1 + i;
    dv.size_in_bytes = 40;
    dv.cardinality = 6;
  } else if (i % 3 == 1) {
    const std::string bitmap = EncodeRoaringBitmapArray({1, 2, static_cast<uint64_t>(i)});
    dv.storage_type = kDvStorageInline;
    dv.path_or_inline_dv = Z85Encode(bitmap);
    dv.size_in_bytes = static_cast<int32_t>(bitmap.size());
    dv.cardinality = 3;
  } else {
    dv.storage_type = kDvStorageAbsolutePath;
    dv.path_or_inline_dv = "s3://bucket/dv-" + std::to_string(i) + ".bin";
    dv.offset = 1;
    dv.size_in_bytes = 30;
    dv.cardinality = 2;
    dv.max_row_index = 1000 + i;
  }
  return std::make_shared<const DeletionVectorDescriptor>(std::move(dv));
}

// A state with every action kind and every optional part: features, a named and described table
// with format options, partition columns and configuration, transactions, domains, adds with and without
// stats, partition values (one null), tags and deletion vectors, removes with and without their
// optional fields.
Snapshot EveryKindOfAction(int adds) {
  Snapshot s;
  s.version = 12;
  s.protocol.min_reader_version = 3;
  s.protocol.min_writer_version = 7;
  s.protocol.reader_features = {};
  s.protocol.writer_features = {"appendOnly", "invariants"};
  s.metadata.id = "7d4b6c1e-0000-4000-8000-000000000001";
  s.metadata.name = "volumes";
  s.metadata.description = "a table";
  s.metadata.format_options = {{"k", "v"}};
  s.metadata.schema_string = R"({"type":"struct","fields":[]})";
  s.metadata.partition_columns = {"split", "site"};
  s.metadata.configuration = {{"stoke.codec", "auto"}, {"delta.appendOnly", "false"}};
  s.metadata.created_time = 1700000000000;
  s.app_versions = {{"app-a", 3}, {"app-b", 9}};
  s.domains["delta.clustering"] = DomainMetadata{"delta.clustering", R"({"clusteringColumns":["id"]})", false};
  s.domains["user.notes"] = DomainMetadata{"user.notes", "", false};
  for (int i = 0; i < adds; ++i) {
    AddFile a;
    a.path = "split=train/part-" + std::to_string(i) + ".parquet";
    a.size = 1000 + i;
    a.modification_time = 1700000000001 + i;
    a.data_change = i % 2 == 0;
    if (i % 3 != 0) a.stats = R"({"numRecords":)" + std::to_string(i) + "}";
    a.partition_values["split"] = "train";
    a.partition_values["site"] = i % 4 == 0 ? std::nullopt : std::optional<std::string>("s" + std::to_string(i % 4));
    if (i % 5 == 0) a.tags = {{"stoke.ingestRun", "abc"}, {"t2", std::to_string(i)}};
    if (i % 7 < 3) a.deletion_vector = SomeDeletionVector(i);
    if (i % 4 == 1) a.tracking = std::make_shared<const FileTracking>(FileTracking{1000 * i, 7, std::nullopt});
    if (i % 4 == 2) a.tracking = std::make_shared<const FileTracking>(FileTracking{std::nullopt, std::nullopt, "liquid"});
    s.files.push_back(std::move(a));
  }
  for (int i = 0; i < 3; ++i) {
    RemoveFile r;
    r.path = "old-" + std::to_string(i) + ".parquet";
    r.data_change = i != 1;
    if (i != 2) r.deletion_timestamp = 1700000000100 + i;
    r.extended_file_metadata = i == 0;
    if (i == 0) r.partition_values = {{"split", "val"}, {"site", std::nullopt}};
    if (i != 1) r.size = 77 + i;
    if (i != 2) r.deletion_vector = SomeDeletionVector(i);
    if (i == 1) r.tracking = std::make_shared<const FileTracking>(FileTracking{42, 3, std::nullopt});
    s.tombstones.push_back(r);
  }
  return s;
}

// The checkpoint's actions as the generic reader (rows of JSON, then the commit-line parser) sees them,
// grouped by kind as CheckpointActions keeps them.
std::string GenericReading(const std::string& path) {
  auto reader = ParquetReader::Open(LocalStorage(), path);
  EXPECT_TRUE(reader.ok()) << reader.status().ToString();
  auto rows = ReadNestedParquet(**reader);
  EXPECT_TRUE(rows.ok()) << rows.status().ToString();
  CheckpointActions actions;
  for (auto& row : *rows) {
    for (auto it = row.begin(); it != row.end(); ++it) {
      if (it->is_null()) continue;
      nlohmann::json one = nlohmann::json::object();
      // Absent optional fields come back as nulls; the commit parser takes them as absent.
      one[it.key()] = it.value();
      auto parsed = ParseAction(one, path, 1);
      EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
      if (parsed.ok() && *parsed) actions.Add(std::move(**parsed));
    }
  }
  return SerializeCommit(std::move(actions).ToActions());
}

// The actions in the order a checkpoint of stoke's holds them.
std::string Serialized(CheckpointActions actions) { return SerializeCommit(std::move(actions).ToActions()); }

TEST_F(CheckpointTest, ColumnarReadingGivesEveryActionAsWrittenAndAsTheGenericReader) {
  const Snapshot s = EveryKindOfAction(/*adds=*/250);
  ASSERT_TRUE(WriteCheckpoint(LocalStorage(), dir_, s).ok());
  auto actions = ReadCheckpoint(LocalStorage(), dir_, 12);
  ASSERT_TRUE(actions.ok()) << actions.status().ToString();

  std::vector<Action> expected = {s.protocol, s.metadata};
  for (const auto& [app, v] : s.app_versions) expected.push_back(Txn{app, v, std::nullopt});
  for (const auto& [name, d] : s.domains) expected.push_back(d);
  for (const auto& f : s.files) expected.push_back(f);
  for (const auto& r : s.tombstones) expected.push_back(r);
  EXPECT_EQ(Serialized(*actions), SerializeCommit(expected));
  const std::string path = dir_ + "/00000000000000000012.checkpoint.parquet";
  EXPECT_EQ(Serialized(*actions), GenericReading(path));
  // ... and it came from the columnar reader, not the generic fallback.
  auto reader = ParquetReader::Open(LocalStorage(), path);
  ASSERT_TRUE(reader.ok());
  CheckpointActions columnar;
  ASSERT_TRUE(ReadCheckpointColumns(**reader, &columnar).ok());
  EXPECT_EQ(Serialized(std::move(columnar)), SerializeCommit(expected));
}

TEST_F(CheckpointTest, AnotherEnginesCheckpointReadsTheSameBothWays) {
  // tests/data/duckdb/checkpoint.parquet: the checkpoint schema as DuckDB writes it.
  const std::string path = std::string(STOKE_SOURCE_DIR) + "/tests/data/duckdb/checkpoint.parquet";
  auto reader = ParquetReader::Open(LocalStorage(), path);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  CheckpointActions columnar;
  Status s = ReadCheckpointColumns(**reader, &columnar);
  if (s.code() == StatusCode::kUnsupported) GTEST_SKIP() << "read by the generic reader: " << s.message();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(Serialized(std::move(columnar)), GenericReading(path));
}

// The actions of `s` in the order a checkpoint of stoke's holds them.
std::vector<Action> ActionsOf(const Snapshot& s) {
  std::vector<Action> out = {s.protocol, s.metadata};
  for (const auto& [app, v] : s.app_versions) out.push_back(Txn{app, v, std::nullopt});
  for (const auto& [name, d] : s.domains) out.push_back(d);
  for (const auto& f : s.files) out.push_back(f);
  for (const auto& r : s.tombstones) out.push_back(r);
  return out;
}

TEST_F(CheckpointTest, LargeStatesAreWrittenInRowGroupsAndReadBackInOrder) {
  // More actions than one row group holds, and more rows than one page of scalars (20,000), so the
  // columnar cursors cross page boundaries and the row groups are read in parallel.
  const int adds = static_cast<int>(2 * kCheckpointRowGroupActions + 5000);
  const Snapshot s = EveryKindOfAction(adds);
  ASSERT_TRUE(WriteCheckpoint(LocalStorage(), dir_, s).ok());
  const std::string path = dir_ + "/00000000000000000012.checkpoint.parquet";
  auto reader = ParquetReader::Open(LocalStorage(), path);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ((*reader)->num_row_groups(), 3);
  std::ifstream last(dir_ + "/_last_checkpoint");
  std::string last_text((std::istreambuf_iterator<char>(last)), std::istreambuf_iterator<char>());
  EXPECT_EQ(last_text.find("parts"), std::string::npos) << last_text;

  auto actions = ReadCheckpoint(LocalStorage(), dir_, 12);
  ASSERT_TRUE(actions.ok()) << actions.status().ToString();
  ASSERT_EQ(actions->size(), 2u + 2u + 2u + static_cast<size_t>(adds) + 3u);  // txns, domains, adds, removes
  EXPECT_EQ(Serialized(*actions), SerializeCommit(ActionsOf(s)));
}

// Another engine's multi-part checkpoint is read part after part, and counts only once every part is
// there.
TEST_F(CheckpointTest, MultiPartCheckpointsAreReadWholeOrNotAtAll) {
  const Snapshot s = EveryKindOfAction(/*adds=*/40);
  const std::vector<Action> all = ActionsOf(s);
  const std::string prefix = dir_ + "/00000000000000000012.checkpoint.";
  for (int part = 1; part <= 2; ++part) {
    std::vector<nlohmann::json> rows;
    for (size_t i = part == 1 ? 0 : 20; i < (part == 1 ? 20 : all.size()); ++i) rows.push_back(nlohmann::json(ActionJson(all[i])));
    const std::string name = prefix + fmt::format("{:010d}.0000000002.parquet", part);
    ASSERT_TRUE(WriteNestedParquet(LocalStorage(), name, CheckpointSchema(), rows, WriterOptions{}).ok());
  }
  auto actions = ReadCheckpoint(LocalStorage(), dir_, 12);
  ASSERT_TRUE(actions.ok()) << actions.status().ToString();
  EXPECT_EQ(Serialized(*actions), SerializeCommit(all));
  std::filesystem::remove(prefix + "0000000002.0000000002.parquet");
  EXPECT_EQ(ReadCheckpoint(LocalStorage(), dir_, 12).status().code(), StatusCode::kNotFound);
}

// A table with delta.checkpointPolicy v2 (and the v2Checkpoint feature) gets a checkpoint in the V2
// spec, a checkpointMetadata row first; both read back whole, still column by column.
TEST_F(CheckpointTest, V2CheckpointTablesGetOneFileInTheSpecTheirPolicyAsks) {
  for (const bool v2_policy : {false, true}) {
    Snapshot s = EveryKindOfAction(static_cast<int>(kCheckpointRowGroupActions) + 10);
    s.protocol.reader_features = {"v2Checkpoint"};
    s.protocol.writer_features = {"v2Checkpoint", "appendOnly", "invariants"};
    if (v2_policy) s.metadata.configuration["delta.checkpointPolicy"] = "v2";
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    ASSERT_TRUE(WriteCheckpoint(LocalStorage(), dir_, s).ok());
    const std::string path = dir_ + "/00000000000000000012.checkpoint.parquet";
    ASSERT_TRUE(std::filesystem::exists(path));
    auto actions = ReadCheckpoint(LocalStorage(), dir_, 12);
    ASSERT_TRUE(actions.ok()) << actions.status().ToString();
    EXPECT_EQ(actions->adds.size(), s.files.size());
    EXPECT_EQ(actions->removes.size(), s.tombstones.size());
    auto reader = ParquetReader::Open(LocalStorage(), path);
    ASSERT_TRUE(reader.ok());
    CheckpointActions columnar;
    ASSERT_TRUE(ReadCheckpointColumns(**reader, &columnar).ok());
    EXPECT_EQ(columnar.size(), actions->size());
    auto rows = ReadNestedParquet(**reader);
    ASSERT_TRUE(rows.ok());
    EXPECT_EQ(rows->size(), actions->size() + (v2_policy ? 1 : 0));
    EXPECT_EQ((*rows)[0].contains("checkpointMetadata") && !(*rows)[0]["checkpointMetadata"].is_null(), v2_policy);
    if (v2_policy) {
      EXPECT_EQ((*rows)[0]["checkpointMetadata"]["version"], 12);
    }
  }
}

TEST_F(CheckpointTest, CheckpointFilesFindsClassicAndCompleteMultiPartCheckpoints) {
  const std::string v = "00000000000000000010";
  EXPECT_EQ(CheckpointFiles({v + ".checkpoint.parquet", v + ".json"}, 10), std::vector<std::string>{v + ".checkpoint.parquet"});
  std::vector<std::string> parts = {v + ".checkpoint.0000000001.0000000002.parquet",
                                    v + ".checkpoint.0000000002.0000000002.parquet"};
  EXPECT_EQ(CheckpointFiles(parts, 10), parts);
  EXPECT_TRUE(CheckpointFiles({parts[0]}, 10).empty());  // incomplete
  EXPECT_TRUE(CheckpointFiles({v + ".checkpoint.parquet"}, 11).empty());
}

TEST_F(CheckpointTest, ABadDeletionVectorIsCorruptionNamingTheFileAndRow) {
  Snapshot s = EveryKindOfAction(/*adds=*/4);
  auto bad = std::make_shared<DeletionVectorDescriptor>(*SomeDeletionVector(0));
  bad->path_or_inline_dv = "ab/..^-aqEH.-t@S}K{vb[*k^";  // a prefix that is no plain directory name
  s.files[2].deletion_vector = bad;
  ASSERT_TRUE(WriteCheckpoint(LocalStorage(), dir_, s).ok());
  const std::string path = dir_ + "/00000000000000000012.checkpoint.parquet";
  auto reader = ParquetReader::Open(LocalStorage(), path);
  ASSERT_TRUE(reader.ok());
  CheckpointActions columnar;
  Status st = ReadCheckpointColumns(**reader, &columnar);
  EXPECT_EQ(st.code(), StatusCode::kCorruption) << st.ToString();
  EXPECT_NE(st.message().find(path + ": row 9: add: deletionVector field \"pathOrInlineDv\""), std::string::npos)
      << st.message();
  bad->storage_type = 'x';
  ASSERT_TRUE(WriteCheckpoint(LocalStorage(), dir_, s).ok());
  auto r = ReadCheckpoint(LocalStorage(), dir_, 12);
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << r.status().ToString();
  EXPECT_NE(r.status().message().find("storageType"), std::string::npos) << r.status().message();
}

TEST_F(CheckpointTest, ADeletionVectorWithoutItsStorageTypeIsLeftToTheGenericReader) {
  // add.deletionVector with sizeInBytes and cardinality but no storageType or pathOrInlineDv: the
  // columnar reader must not read the add as having no DV; the generic one refuses it.
  auto leaf = [](std::string name, parquet::Type type, bool is_string = false) {
    SchemaNode n;
    n.name = std::move(name);
    n.type = type;
    n.is_string = is_string;
    return n;
  };
  auto group = [](std::string name, std::vector<SchemaNode> children) {
    SchemaNode n;
    n.name = std::move(name);
    n.kind = SchemaNode::Kind::kStruct;
    n.children = std::move(children);
    return n;
  };
  const SchemaNode schema = group(
      "spark_schema",
      {group("add", {leaf("path", parquet::Type::kByteArray, true), leaf("size", parquet::Type::kInt64),
                     leaf("modificationTime", parquet::Type::kInt64), leaf("dataChange", parquet::Type::kBoolean),
                     group("deletionVector", {leaf("sizeInBytes", parquet::Type::kInt32),
                                              leaf("cardinality", parquet::Type::kInt64)})})});
  const std::vector<nlohmann::json> rows = {nlohmann::json::parse(
      R"({"add": {"path": "a.parquet", "size": 1, "modificationTime": 1, "dataChange": true,
                  "deletionVector": {"sizeInBytes": 40, "cardinality": 6}}})")};
  const std::string path = dir_ + "/00000000000000000003.checkpoint.parquet";
  ASSERT_TRUE(WriteNestedParquet(LocalStorage(), path, schema, rows, {}).ok());
  auto reader = ParquetReader::Open(LocalStorage(), path);
  ASSERT_TRUE(reader.ok());
  CheckpointActions columnar;
  EXPECT_EQ(ReadCheckpointColumns(**reader, &columnar).code(), StatusCode::kUnsupported);
  auto r = ReadCheckpoint(LocalStorage(), dir_, 3);
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << r.status().ToString();
  EXPECT_NE(r.status().message().find("storageType"), std::string::npos) << r.status().message();
}

TEST_F(CheckpointTest, MissingOrCorruptCheckpointsAreErrorsNamingTheFile) {
  EXPECT_EQ(ReadCheckpoint(LocalStorage(), dir_, 3).status().code(), StatusCode::kNotFound);
  std::string path = dir_ + "/00000000000000000003.checkpoint.parquet";
  {
    std::ofstream f(path);
    f << "PAR1 but not a Parquet file PAR1";
  }
  auto r = ReadCheckpoint(LocalStorage(), dir_, 3);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("checkpoint.parquet"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace stoke::delta
