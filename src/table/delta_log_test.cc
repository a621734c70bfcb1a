#include "table/delta_log.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "core/clock.h"
#include "table/checkpoint.h"
#include "table/delta_testing.h"

namespace stoke::delta {
namespace {

using json = nlohmann::json;
using namespace testing_support;  // NOLINT: the Delta test helpers

std::vector<std::string> FilePaths(const Snapshot& s) {
  std::vector<std::string> out;
  for (const auto& f : s.files) out.push_back(f.path);
  return out;
}

class DeltaLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = std::filesystem::temp_directory_path() / "stoke_delta_XXXXXX";
    char* d = mkdtemp(tmpl.data());
    ASSERT_NE(d, nullptr);
    dir_ = d;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Creates the table (version 0) and returns its log.
  DeltaLog CreateTable() {
    DeltaLog log(fs_, dir_);
    auto v = log.Commit(-1, {NewProtocol(), NewMetadata()}, CommitKind::kExclusive, "CREATE TABLE", json::object());
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    if (v.ok()) {
      EXPECT_EQ(*v, 0);
    }
    return log;
  }

  void WriteRaw(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
  }
  std::string ReadRaw(const std::string& path) { return *ReadFileToString(LocalStorage(), path); }

  std::set<std::string> ListTree() {
    std::set<std::string> out;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir_)) out.insert(e.path().string());
    return out;
  }

  std::string dir_;
  Storage& fs_ = LocalStorage();
};

// ------------------------------------------------------------------------------------------------
// Commit files.

TEST_F(DeltaLogTest, ForEachCommitActionReadsInChunksAsParseCommitDoes) {
  const std::string text =
      "{\"commitInfo\":{\"timestamp\":7,\"operation\":\"WRITE\"}}\r\n"
      "\n"
      "   \n"
      "{\"txn\":{\"appId\":\"a\",\"version\":3}}\n"
      "{\"add\":{\"path\":\"a.parquet\",\"partitionValues\":{},\"size\":11,\"modificationTime\":2,\"dataChange\":true}}\n"
      "{\"cdc\":{\"path\":\"x\",\"size\":1}}\n"
      "{\"remove\":{\"path\":\"b.parquet\",\"dataChange\":true}}";  // no final newline
  const std::string path = dir_ + "/commit.json";
  WriteRaw(path, text);
  auto expected = ParseCommit(text, path);
  ASSERT_TRUE(expected.ok()) << expected.status().ToString();
  for (uint64_t chunk : {1, 2, 3, 7, 64, 1 << 20}) {
    std::vector<std::string> seen;
    Status s = ForEachCommitAction(fs_, path, [&](Action& a) {
      seen.push_back(SerializeCommit({a}));
      return Status::OK();
    }, chunk);
    ASSERT_TRUE(s.ok()) << chunk << ": " << s.ToString();
    ASSERT_EQ(seen.size(), expected->size()) << chunk;
    for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], SerializeCommit({(*expected)[i]})) << chunk;
  }
  // Errors name the file and the same line as ParseCommit; `each`'s error stops the walk.
  WriteRaw(path, text + "\n{\"add\":5}\n");
  for (uint64_t chunk : {1, 5, 1 << 20}) {
    Status s = ForEachCommitAction(fs_, path, [](Action&) { return Status::OK(); }, chunk);
    ASSERT_EQ(s.code(), StatusCode::kCorruption) << chunk;
    EXPECT_NE(s.message().find(path + ": line 8"), std::string::npos) << s.message();
  }
  int calls = 0;
  Status stop = ForEachCommitAction(fs_, path, [&](Action&) { return ++calls == 2 ? Status::Conflict("stop") : Status::OK(); });
  EXPECT_EQ(stop.code(), StatusCode::kConflict);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(ForEachCommitAction(fs_, dir_ + "/missing.json", [](Action&) { return Status::OK(); }).code(), StatusCode::kNotFound);
}

// ------------------------------------------------------------------------------------------------
// Conflict rules, one winner at a time.

TEST(DeltaConflicts, EachRuleDecidesAsTheProtocolSays) {
  auto claims = [](CommitKind kind, PathClaims adds, PathClaims removes,
                   std::set<std::string> apps = {}) {
    CommitClaims c;
    c.read_version = 3;
    c.kind = kind;
    c.adds = std::move(adds);
    c.removes = std::move(removes);
    c.app_ids = std::move(apps);
    return c;
  };
  Metadata meta;
  meta.id = "x";
  struct Case {
    const char* what;
    CommitClaims mine;
    std::vector<Action> winner;
    bool conflicts;
    const char* reason;  // in the message when it conflicts
  };
  CommitClaims shard = claims(CommitKind::kExclusive, {"s1"}, {});
  shard.exclusive_allows = [](const std::vector<Action>& w) { return w.size() == 1 && std::holds_alternative<AddFile>(w[0]); };
  const std::vector<Case> cases = {
      {"append after append", claims(CommitKind::kBlindAppend, {"a"}, {}), {NewAdd("b")}, false, ""},
      {"append after the same add", claims(CommitKind::kBlindAppend, {"a"}, {}), {NewAdd("a")}, true, "added the same file 'a'"},
      {"append after metadata", claims(CommitKind::kBlindAppend, {"a"}, {}), {meta}, true, "changed the table metadata"},
      {"append after protocol", claims(CommitKind::kBlindAppend, {"a"}, {}), {Protocol{}}, true, "changed the protocol"},
      {"rewrite after append", claims(CommitKind::kRewrite, {"c"}, {"a"}), {NewAdd("b")}, false, ""},
      {"rewrite after removal of another", claims(CommitKind::kRewrite, {"c"}, {"a"}), {NewRemove("b")}, false, ""},
      {"rewrite after removal of its input", claims(CommitKind::kRewrite, {"c"}, {"a"}), {NewRemove("a")}, true, "removed 'a'"},
      {"same application", claims(CommitKind::kBlindAppend, {"a"}, {}, {"app"}), {Txn{"app", 2, std::nullopt}}, true,
       "same application 'app'"},
      {"other application", claims(CommitKind::kBlindAppend, {"a"}, {}, {"app"}), {Txn{"other", 2, std::nullopt}}, false, ""},
      {"exclusive after anything", claims(CommitKind::kExclusive, {"a"}, {}), {NewAdd("b")}, true, "came first"},
      {"exclusive, winner allowed", shard, {NewAdd("s2")}, false, ""},
      {"exclusive, allowed winner adding the same file", shard, {NewAdd("s1")}, true, "added the same file 's1'"},
      {"exclusive, winner not allowed", shard, {NewAdd("s2"), NewAdd("s3")}, true, "came first"},
  };
  for (const Case& c : cases) {
    Status s = CheckConcurrentCommit(c.mine, c.winner, 4, "t");
    EXPECT_EQ(!s.ok(), c.conflicts) << c.what << ": " << s.ToString();
    if (c.conflicts) {
      EXPECT_EQ(s.code(), StatusCode::kConflict) << c.what;
      EXPECT_NE(s.message().find(c.reason), std::string::npos) << c.what << ": " << s.message();
      EXPECT_NE(s.message().find("version 4"), std::string::npos) << c.what << ": " << s.message();
    }
  }
}

TEST_F(DeltaLogTest, AnExclusiveCommitGoesOnTopOfTheWinnersItAllows) {
  DeltaLog log = CreateTable();
  ASSERT_TRUE(log.Commit(0, {NewAdd("w")}, CommitKind::kBlindAppend, "WRITE", {}).ok());
  auto refused = log.Commit(0, {NewAdd("mine")}, CommitKind::kExclusive, "WRITE", {});
  EXPECT_EQ(refused.status().code(), StatusCode::kConflict);
  auto allowed = log.Commit(0, {NewAdd("mine")}, CommitKind::kExclusive, "WRITE", {}, 100,
                            [](const std::vector<Action>&) { return true; });
  ASSERT_TRUE(allowed.ok()) << allowed.status().ToString();
  EXPECT_EQ(*allowed, 2);
}

// ------------------------------------------------------------------------------------------------
// Tables.

TEST_F(DeltaLogTest, NoTableHasLatestVersionMinusOneAndNoSnapshot) {
  DeltaLog log(fs_, dir_);
  auto latest = log.LatestVersion();
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(*latest, -1);
  auto snap = log.ReadSnapshot();
  ASSERT_FALSE(snap.ok());
  EXPECT_EQ(snap.status().code(), StatusCode::kNotFound);
  auto hist = log.History();
  EXPECT_EQ(hist.status().code(), StatusCode::kNotFound);
}

TEST_F(DeltaLogTest, CommitPathIsTwentyDigitsZeroPadded) {
  DeltaLog log(fs_, dir_);
  EXPECT_EQ(log.CommitPath(42), dir_ + "/_delta_log/00000000000000000042.json");
}

TEST_F(DeltaLogTest, CreateTableNeedsProtocolAndMetadata) {
  DeltaLog log(fs_, dir_);
  auto v = log.Commit(-1, {NewMetadata()}, CommitKind::kExclusive, "CREATE TABLE", json::object());
  EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
  v = log.Commit(-1, {NewProtocol(), NewAdd("a.parquet")}, CommitKind::kExclusive, "CREATE TABLE", json::object());
  EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(*log.LatestVersion(), -1);
}

TEST_F(DeltaLogTest, CreatingAnExistingTableConflicts) {
  DeltaLog log = CreateTable();
  auto v = log.Commit(-1, {NewProtocol(), NewMetadata()}, CommitKind::kExclusive, "CREATE TABLE", json::object());
  EXPECT_EQ(v.status().code(), StatusCode::kConflict);
}

TEST_F(DeltaLogTest, CreateFillsInMissingTableIdAndCreatedTime) {
  DeltaLog log(fs_, dir_);
  Metadata m = NewMetadata();
  m.id.clear();
  m.created_time.reset();
  ASSERT_TRUE(log.Commit(-1, {NewProtocol(), m}, CommitKind::kExclusive, "CREATE TABLE", json::object()).ok());
  auto snap = log.ReadSnapshot();
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(snap->metadata.id.size(), 36u);
  EXPECT_EQ(snap->metadata.id[14], '4');
  EXPECT_TRUE(snap->metadata.created_time.has_value());
}

TEST_F(DeltaLogTest, CommitOnAMissingReadVersionIsRefused) {
  DeltaLog log = CreateTable();
  auto v = log.Commit(5, {NewAdd("a.parquet")}, CommitKind::kBlindAppend, "WRITE", json::object());
  EXPECT_EQ(v.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(*log.LatestVersion(), 0);
}

TEST_F(DeltaLogTest, CommitWritesCommitInfoLikeSpark) {
  DeltaLog log = CreateTable();
  auto v = log.Commit(0, {NewAdd("a.parquet")}, CommitKind::kBlindAppend, "WRITE",
                      json{{"mode", "Append"}, {"partitionBy", json::array()}, {"n", 3}});
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  auto text = ReadFileToString(fs_, log.CommitPath(1));
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->rfind("{\"commitInfo\":{", 0), 0u) << *text;  // first, as Spark writes it
  auto actions = ParseCommit(*text, "1.json");
  ASSERT_TRUE(actions.ok());
  ASSERT_EQ(actions->size(), 2u);
  const json& info = std::get<CommitInfo>((*actions)[0]).value;
  EXPECT_TRUE(info["timestamp"].is_number_integer());
  EXPECT_EQ(info["operation"], "WRITE");
  EXPECT_EQ(info["operationParameters"]["mode"], "Append");
  EXPECT_EQ(info["operationParameters"]["partitionBy"], "[]");
  EXPECT_EQ(info["operationParameters"]["n"], "3");
  EXPECT_EQ(info["readVersion"], 0);
  EXPECT_EQ(info["isBlindAppend"], true);
  EXPECT_EQ(info["engineInfo"], "stoke/0.1.0");

  // The creating commit has no readVersion and is not a blind append.
  auto first = ParseCommit(*ReadFileToString(fs_, log.CommitPath(0)), "0.json");
  ASSERT_TRUE(first.ok());
  const json& info0 = std::get<CommitInfo>((*first)[0]).value;
  EXPECT_FALSE(info0.contains("readVersion"));
  EXPECT_EQ(info0["isBlindAppend"], false);
}

TEST_F(DeltaLogTest, TimeTravelSeesTheFilesOfEachVersion) {
  DeltaLog log = CreateTable();
  ASSERT_EQ(*log.Commit(0, {NewAdd("a.parquet", 100, 10)}, CommitKind::kBlindAppend, "WRITE", {}), 1);
  ASSERT_EQ(*log.Commit(1, {NewAdd("b c.parquet", 200, 20)}, CommitKind::kBlindAppend, "WRITE", {}), 2);
  ASSERT_EQ(*log.Commit(2, {NewRemove("a.parquet"), NewAdd("d.parquet", 300, 30)}, CommitKind::kRewrite, "OPTIMIZE",
                        json{{"predicate", "[]"}}),
            3);
  ASSERT_EQ(*log.Commit(3, {NewAdd("a.parquet", 100, 10)}, CommitKind::kBlindAppend, "WRITE", {}), 4);

  using V = std::vector<std::string>;
  auto s0 = log.ReadSnapshot(0);
  ASSERT_TRUE(s0.ok()) << s0.status().ToString();
  EXPECT_EQ(s0->version, 0);
  EXPECT_TRUE(s0->files.empty());
  EXPECT_EQ(s0->num_records(), 0);
  EXPECT_EQ(s0->metadata.id, NewMetadata().id);
  EXPECT_EQ(s0->protocol.min_reader_version, 1);
  EXPECT_EQ(s0->protocol.min_writer_version, 2);
  EXPECT_GT(s0->timestamp, 0);

  auto s1 = log.ReadSnapshot(1);
  ASSERT_TRUE(s1.ok());
  EXPECT_EQ(FilePaths(*s1), (V{"a.parquet"}));
  EXPECT_EQ(s1->num_records(), 10);

  auto s2 = log.ReadSnapshot(2);
  ASSERT_TRUE(s2.ok());
  EXPECT_EQ(FilePaths(*s2), (V{"a.parquet", "b%20c.parquet"}));
  EXPECT_EQ(s2->num_records(), 30);

  auto s3 = log.ReadSnapshot(3);
  ASSERT_TRUE(s3.ok());
  EXPECT_EQ(FilePaths(*s3), (V{"b%20c.parquet", "d.parquet"}));
  ASSERT_EQ(s3->tombstones.size(), 1u);
  ASSERT_NE(FindTombstone(*s3, "a.parquet"), nullptr);
  EXPECT_EQ(FindTombstone(*s3, "a.parquet")->deletion_timestamp, 1700000000002);

  auto s4 = log.ReadSnapshot();
  ASSERT_TRUE(s4.ok());
  EXPECT_EQ(s4->version, 4);
  EXPECT_EQ(FilePaths(*s4), (V{"b%20c.parquet", "d.parquet", "a.parquet"}));
  EXPECT_TRUE(s4->tombstones.empty());  // re-added
  EXPECT_EQ(s4->num_records(), 60);

  auto s5 = log.ReadSnapshot(5);
  EXPECT_EQ(s5.status().code(), StatusCode::kNotFound);
}

TEST_F(DeltaLogTest, RemoveMatchesAddByDecodedPath) {
  DeltaLog log = CreateTable();
  AddFile a = NewAdd("x");
  a.path = "dir/a%2Db%20c.parquet";  // '-' escaped needlessly
  ASSERT_TRUE(log.Commit(0, {a}, CommitKind::kBlindAppend, "WRITE", {}).ok());
  RemoveFile r;
  r.path = "dir/a-b%20c.parquet";
  ASSERT_TRUE(log.Commit(1, {r}, CommitKind::kRewrite, "DELETE", {}).ok());
  auto snap = log.ReadSnapshot();
  ASSERT_TRUE(snap.ok());
  EXPECT_TRUE(snap->files.empty());
  ASSERT_EQ(snap->tombstones.size(), 1u);
  EXPECT_NE(FindTombstone(*snap, "dir/a-b c.parquet"), nullptr);
}

TEST_F(DeltaLogTest, AnAddOfAFileAlreadyAddedReplacesItWhateverTheEscaping) {
  DeltaLog log = CreateTable();
  AddFile first = NewAdd("x");
  first.path = "dir/a%2Db.parquet";
  first.size = 1;
  AddFile again = NewAdd("x");
  again.path = "dir/a-b.parquet";
  again.size = 2;
  AddFile other = NewAdd("dir/c.parquet");
  // Within one commit and across commits, replayed from the log and kept as a commit's state.
  ASSERT_TRUE(log.Commit(0, {first, other, again}, CommitKind::kBlindAppend, "WRITE", {}).ok());
  auto state = log.ReadSnapshot(1);
  ASSERT_TRUE(state.ok());
  ASSERT_EQ(state->files.size(), 2u);
  EXPECT_EQ(state->files[0].path, "dir/c.parquet");
  EXPECT_EQ(state->files[1].size, 2);
  first.size = 3;
  ASSERT_TRUE(log.Commit(1, {first}, CommitKind::kBlindAppend, "WRITE", {}, 100, nullptr, &*state).ok());
  for (const Snapshot& s : {*state, *log.ReadSnapshot(2)}) {
    ASSERT_EQ(s.files.size(), 2u);
    EXPECT_EQ(s.files[1].path, "dir/a%2Db.parquet");
    EXPECT_EQ(s.files[1].size, 3);
  }
  RemoveFile r;
  r.path = "dir/a-b.parquet";
  ASSERT_TRUE(log.Commit(2, {r}, CommitKind::kRewrite, "DELETE", {}).ok());
  auto snap = log.ReadSnapshot();
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(FilePaths(*snap), (std::vector<std::string>{"dir/c.parquet"}));
}

TEST_F(DeltaLogTest, AddsAndRemovesAreKeyedByPathAndDeletionVector) {
  DeltaLog log = CreateTable();
  auto dv = [](const std::string& id) {
    DeletionVectorDescriptor d;
    d.storage_type = kDvStorageInline;
    d.path_or_inline_dv = id;
    d.size_in_bytes = 4;  // 5 characters of Z85
    d.cardinality = 1;
    return std::make_shared<const DeletionVectorDescriptor>(d);
  };
  AddFile a = NewAdd("a.parquet");
  ASSERT_TRUE(log.Commit(0, {a}, CommitKind::kBlindAppend, "WRITE", {}).ok());
  // A DELETE that writes the new add before the remove of the old one: the remove takes only the
  // (path, no DV) entry, not the new (path, DV "one") one.
  AddFile with_one = a;
  with_one.deletion_vector = dv("one00");
  RemoveFile rm_plain;
  rm_plain.path = "a.parquet";
  ASSERT_TRUE(log.Commit(1, {with_one, rm_plain}, CommitKind::kRewrite, "DELETE", {}).ok());
  // Then in the usual order, replacing DV "one" with DV "two".
  AddFile with_two = a;
  with_two.deletion_vector = dv("two00");
  RemoveFile rm_one = rm_plain;
  rm_one.deletion_vector = dv("one00");
  ASSERT_TRUE(log.Commit(2, {rm_one, with_two}, CommitKind::kRewrite, "DELETE", {}).ok());
  for (int64_t version : {2, 3}) {
    auto snap = log.ReadSnapshot(version);
    ASSERT_TRUE(snap.ok()) << snap.status().ToString();
    ASSERT_EQ(snap->files.size(), 1u) << "version " << version;
    ASSERT_NE(snap->files[0].deletion_vector, nullptr);
    EXPECT_EQ(snap->files[0].deletion_vector->UniqueId(), version == 2 ? "ione00" : "itwo00");
  }
  // The commit lines carry the descriptor as Spark writes it.
  const std::string line = ReadRaw(log.CommitPath(3));
  EXPECT_NE(line.find(R"("deletionVector":{"storageType":"i","pathOrInlineDv":"two00","sizeInBytes":4,"cardinality":1})"),
            std::string::npos)
      << line;
  // Removing the (path, DV "two") entry leaves nothing.
  RemoveFile rm_two = rm_plain;
  rm_two.deletion_vector = dv("two00");
  ASSERT_TRUE(log.Commit(3, {rm_two}, CommitKind::kRewrite, "DELETE", {}).ok());
  EXPECT_TRUE(log.ReadSnapshot()->files.empty());
}

TEST(PathClaimsTest, ContainsWhatWasInsertedBeforeAndAfterSealing) {
  PathClaims claims;
  for (int i = 999; i >= 0; --i) claims.Insert("part-" + std::to_string(i) + ".parquet");
  EXPECT_TRUE(claims.Contains("part-17.parquet"));
  EXPECT_FALSE(claims.Contains("part-1000.parquet"));
  claims.Seal();
  EXPECT_EQ(claims.size(), 1000u);
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(claims.Contains("part-" + std::to_string(i) + ".parquet")) << i;
  for (int i = 1000; i < 2000; ++i) EXPECT_FALSE(claims.Contains("part-" + std::to_string(i) + ".parquet")) << i;
  EXPECT_FALSE(claims.Contains(""));
  EXPECT_TRUE(PathClaims({"a", "b"}).Contains("b"));
  EXPECT_TRUE(PathClaims().empty());
}

TEST_F(DeltaLogTest, LastMetadataAndProtocolWinAndTxnKeepsHighestVersion) {
  DeltaLog log = CreateTable();
  ASSERT_TRUE(log.Commit(0, {Txn{"app", 5, std::nullopt}, NewAdd("a")}, CommitKind::kBlindAppend, "WRITE", {}).ok());
  ASSERT_TRUE(log.Commit(1, {Txn{"app", 3, std::nullopt}, Txn{"other", 1, std::nullopt}}, CommitKind::kBlindAppend,
                         "WRITE", {})
                  .ok());
  Metadata m = NewMetadata();
  m.description = "changed";
  Protocol p;
  p.min_writer_version = 4;
  ASSERT_TRUE(log.Commit(2, {m, p}, CommitKind::kExclusive, "SET TBLPROPERTIES", {}).ok());
  auto snap = log.ReadSnapshot();
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(snap->metadata.description, "changed");
  EXPECT_EQ(snap->protocol.min_writer_version, 4);
  EXPECT_EQ(snap->app_versions, (std::map<std::string, int64_t>{{"app", 5}, {"other", 1}}));
}

TEST_F(DeltaLogTest, HistoryIsNewestFirstWithOperationAndCounts) {
  DeltaLog log = CreateTable();
  ASSERT_TRUE(log.Commit(0, {NewAdd("a", 100), NewAdd("b", 50)}, CommitKind::kBlindAppend, "WRITE", {}).ok());
  ASSERT_TRUE(
      log.Commit(1, {NewRemove("a", 100), NewRemove("b", std::nullopt), NewAdd("c", 140)}, CommitKind::kRewrite,
                 "OPTIMIZE", {})
          .ok());
  auto hist = log.History();
  ASSERT_TRUE(hist.ok()) << hist.status().ToString();
  ASSERT_EQ(hist->size(), 3u);
  const auto& h = *hist;
  EXPECT_EQ(h[0].version, 2);
  EXPECT_EQ(h[0].operation, "OPTIMIZE");
  EXPECT_EQ(h[0].files_added, 1);
  EXPECT_EQ(h[0].files_removed, 2);
  EXPECT_EQ(h[0].bytes_added, 140);
  EXPECT_EQ(h[0].bytes_removed, 100);
  EXPECT_EQ(h[0].info["engineInfo"], "stoke/0.1.0");
  EXPECT_GT(h[0].timestamp, 0);
  EXPECT_EQ(h[1].version, 1);
  EXPECT_EQ(h[1].operation, "WRITE");
  EXPECT_EQ(h[1].files_added, 2);
  EXPECT_EQ(h[1].bytes_added, 150);
  EXPECT_EQ(h[2].version, 0);
  EXPECT_EQ(h[2].operation, "CREATE TABLE");

  auto limited = log.History(2);
  ASSERT_TRUE(limited.ok());
  ASSERT_EQ(limited->size(), 2u);
  EXPECT_EQ((*limited)[1].version, 1);
}

TEST_F(DeltaLogTest, HistoryOfCommitWithoutCommitInfoUsesFileTime) {
  DeltaLog log = CreateTable();
  WriteRaw(log.CommitPath(1), SerializeCommit({NewAdd("a")}));
  auto hist = log.History(1);
  ASSERT_TRUE(hist.ok());
  EXPECT_EQ((*hist)[0].operation, "");
  EXPECT_TRUE((*hist)[0].info.is_null());
  EXPECT_GT((*hist)[0].timestamp, 0);
}

TEST_F(DeltaLogTest, MissingCommitInTheMiddleIsCorruptionNamingTheVersion) {
  DeltaLog log = CreateTable();
  for (int v = 0; v < 3; ++v) {
    ASSERT_TRUE(log.Commit(v, {NewAdd("f" + std::to_string(v))}, CommitKind::kBlindAppend, "WRITE", {}).ok());
  }
  std::filesystem::remove(log.CommitPath(2));
  auto snap = log.ReadSnapshot();
  ASSERT_FALSE(snap.ok());
  EXPECT_EQ(snap.status().code(), StatusCode::kCorruption);
  EXPECT_NE(snap.status().message().find("00000000000000000002.json"), std::string::npos) << snap.status().message();
  // Versions before the gap are still readable.
  EXPECT_TRUE(log.ReadSnapshot(1).ok());
}

TEST_F(DeltaLogTest, MalformedCommitIsCorruptionNamingFileAndLineAndWritesNothing) {
  DeltaLog log = CreateTable();
  ASSERT_TRUE(log.Commit(0, {NewAdd("a")}, CommitKind::kBlindAppend, "WRITE", {}).ok());
  std::string good = SerializeCommit({NewAdd("b")});
  WriteRaw(log.CommitPath(2), good + good + "{\"add\": {\"path\": \"c\", oops}\n");
  auto before = ListTree();

  auto snap = log.ReadSnapshot();
  ASSERT_FALSE(snap.ok());
  EXPECT_EQ(snap.status().code(), StatusCode::kCorruption);
  EXPECT_NE(snap.status().message().find("00000000000000000002.json: line 3"), std::string::npos)
      << snap.status().message();

  // A writer that loses to the malformed commit learns of the corruption and writes nothing.
  auto v = log.Commit(1, {NewAdd("d")}, CommitKind::kBlindAppend, "WRITE", {});
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kCorruption);
  EXPECT_EQ(ListTree(), before);
}

TEST_F(DeltaLogTest, ReaderFeaturesStokeLacksAreUnsupported) {
  DeltaLog log = CreateTable();
  Protocol p;
  p.min_reader_version = 3;
  p.min_writer_version = 7;
  p.reader_features = {"deletionVectors", "variantType", "someFutureFeature"};
  p.writer_features = {"deletionVectors", "variantType", "someFutureFeature"};
  ASSERT_TRUE(log.Commit(0, {p}, CommitKind::kExclusive, "UPGRADE PROTOCOL", {}).ok());
  auto snap = log.ReadSnapshot();
  ASSERT_FALSE(snap.ok());
  EXPECT_EQ(snap.status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(snap.status().message().find("deletionVectors"), std::string::npos);  // read, so not named
  EXPECT_NE(snap.status().message().find("[variantType, someFutureFeature]"), std::string::npos)
      << snap.status().message();
  EXPECT_TRUE(log.ReadSnapshot(0).ok());  // before the upgrade

  Protocol v2;  // reader version 2: column mapping, which stoke reads
  v2.min_reader_version = 2;
  v2.min_writer_version = 5;
  ASSERT_TRUE(log.Commit(1, {v2}, CommitKind::kExclusive, "UPGRADE PROTOCOL", {}).ok());
  EXPECT_TRUE(log.ReadSnapshot().ok());
  Protocol v4;
  v4.min_reader_version = 4;
  v4.min_writer_version = 7;
  ASSERT_TRUE(log.Commit(2, {v4}, CommitKind::kExclusive, "UPGRADE PROTOCOL", {}).ok());
  EXPECT_EQ(log.ReadSnapshot().status().code(), StatusCode::kUnsupported);

  Protocol v3;  // reader version 3 without features: nothing to refuse
  v3.min_reader_version = 3;
  v3.min_writer_version = 7;
  ASSERT_TRUE(log.Commit(3, {v3}, CommitKind::kExclusive, "UPGRADE PROTOCOL", {}).ok());
  EXPECT_TRUE(log.ReadSnapshot().ok());
}

// The live paths of a snapshot, sorted.
std::vector<std::string> LivePaths(const Snapshot& s) {
  std::vector<std::string> out;
  for (const auto& f : s.files) out.push_back(f.path);
  std::sort(out.begin(), out.end());
  return out;
}

TEST_F(DeltaLogTest, CheckpointsEveryTenCommitsAndOpensFromThem) {
  DeltaLog log = CreateTable();
  for (int v = 0; v < 24; ++v) {
    ASSERT_TRUE(log.Commit(v, {NewAdd("f" + std::to_string(v))}, CommitKind::kBlindAppend, "WRITE", {}).ok());
  }
  ASSERT_TRUE(log.Commit(24, {NewRemove("f3")}, CommitKind::kRewrite, "DELETE", {}).ok());
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/_delta_log/00000000000000000010.checkpoint.parquet"));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/_delta_log/00000000000000000020.checkpoint.parquet"));
  EXPECT_NE(ReadRaw(dir_ + "/_delta_log/_last_checkpoint").find("\"version\":20"), std::string::npos);
  auto full = log.ReadSnapshot();
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  EXPECT_EQ(full->files.size(), 23u);

  // Spark deletes old commits once a checkpoint covers them: the table still opens, identically.
  for (int v = 0; v < 20; ++v) std::filesystem::remove(log.CommitPath(v));
  auto from_checkpoint = log.ReadSnapshot();
  ASSERT_TRUE(from_checkpoint.ok()) << from_checkpoint.status().ToString();
  EXPECT_EQ(LivePaths(*from_checkpoint), LivePaths(*full));
  EXPECT_EQ(from_checkpoint->metadata.schema_string, full->metadata.schema_string);
  EXPECT_EQ(from_checkpoint->version, 25);
  EXPECT_EQ(log.ReadSnapshot(20)->files.size(), 20u);  // exactly the checkpoint: f0..f19
  auto old = log.ReadSnapshot(5);  // before the checkpoint, without its commits
  ASSERT_FALSE(old.ok());
  EXPECT_EQ(old.status().code(), StatusCode::kCorruption);
  EXPECT_NE(old.status().message().find("commit 0"), std::string::npos) << old.status().message();
}

TEST(DeltaSnapshot, NumRecordsSumsValidCountsAndIsUnknownOtherwise) {
  auto total = [](std::vector<std::optional<std::string>> stats) {
    Snapshot s;
    for (auto& st : stats) {
      AddFile a;
      a.stats = std::move(st);
      s.files.push_back(std::move(a));
    }
    return s.num_records();
  };
  EXPECT_EQ(total({}), 0);
  EXPECT_EQ(total({R"({"numRecords":5})", R"({"minValues":{"numRecords":9},"numRecords":7,"nullCount":{}})"}), 12);
  EXPECT_EQ(total({R"({"numRecords":1,"numRecords":3})"}), 3);  // the last duplicate wins
  for (const char* bad : {R"({})", R"({"numRecords":-1})", R"({"numRecords":"5"})", R"({"numRecords":1.5})",
                          R"({"numRecords":null})", R"({"numRecords":{"numRecords":5}})", R"([{"numRecords":5}])",
                          R"({"numRecords":5)", R"({"numRecords":18446744073709551615})", "5", ""}) {
    EXPECT_EQ(total({R"({"numRecords":5})", std::string(bad)}), -1) << bad;
  }
  EXPECT_EQ(total({std::nullopt}), -1);
  EXPECT_EQ(total({R"({"numRecords":9223372036854775807})", R"({"numRecords":1})"}), -1);  // overflow
}

TEST_F(DeltaLogTest, ACommitOfVeryManyActionsIsCheckpointedAtOnce) {
  DeltaLog log = CreateTable();
  std::vector<Action> small = {NewAdd("a")};
  ASSERT_TRUE(log.Commit(0, small, CommitKind::kBlindAppend, "WRITE", {}).ok());
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/_delta_log/00000000000000000001.checkpoint.parquet"));
  std::vector<Action> many;
  for (size_t i = 0; i <= kCheckpointAfterActions; ++i) many.push_back(NewAdd("m" + std::to_string(i)));
  ASSERT_TRUE(log.Commit(1, many, CommitKind::kBlindAppend, "WRITE", {}).ok());
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/_delta_log/00000000000000000002.checkpoint.parquet"));
  EXPECT_NE(ReadRaw(dir_ + "/_delta_log/_last_checkpoint").find("\"version\":2"), std::string::npos);
  auto snap = log.ReadSnapshot();
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  EXPECT_EQ(snap->files.size(), kCheckpointAfterActions + 2);
}

TEST_F(DeltaLogTest, ReadsAV2CheckpointWithSidecars) {
  DeltaLog log = CreateTable();
  for (int v = 0; v < 3; ++v) ASSERT_TRUE(log.Commit(v, {NewAdd("f" + std::to_string(v))}, CommitKind::kBlindAppend, "WRITE", {}).ok());
  auto state = log.ReadSnapshot();
  ASSERT_TRUE(state.ok());
  // The adds in a sidecar; the protocol, metaData, checkpointMetadata and sidecar action in a
  // UUID-named JSON top-level file, as Spark writes them.
  std::filesystem::create_directories(dir_ + "/_delta_log/_sidecars");
  std::vector<json> rows;
  for (const AddFile& f : state->files) rows.push_back(json::parse(ActionJson(f).dump()));
  const std::string sidecar = "00000000000000000003.checkpoint.0000000001.0000000001.5b2c1f2e-0000-4000-8000-000000000000.parquet";
  ASSERT_TRUE(WriteNestedParquet(fs_, dir_ + "/_delta_log/_sidecars/" + sidecar, CheckpointSchema(), rows, WriterOptions{}).ok());
  Protocol v2{3, 7, {"v2Checkpoint"}, {"v2Checkpoint"}};
  std::string top = ActionJson(v2).dump() + "\n" + ActionJson(state->metadata).dump() + "\n" +
                    R"({"checkpointMetadata":{"version":3,"tags":{}}})" "\n" +
                    R"({"sidecar":{"path":")" + sidecar + R"(","sizeInBytes":1,"modificationTime":1}})" "\n";
  const std::string top_name = "00000000000000000003.checkpoint.80a0c3b4-11a5-4ef6-9a3e-3b2a0d6e6f3c.json";
  WriteRaw(dir_ + "/_delta_log/" + top_name, top);
  for (int v = 0; v <= 3; ++v) std::filesystem::remove(log.CommitPath(v));
  auto snap = log.ReadSnapshot();
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  EXPECT_EQ(snap->version, 3);
  EXPECT_EQ(FilePaths(*snap), (std::vector<std::string>{"f0", "f1", "f2"}));
  EXPECT_EQ(snap->protocol.reader_features, std::vector<std::string>{"v2Checkpoint"});
  // A sidecar outside _delta_log/_sidecars, or one that is missing, is an error naming the file.
  WriteRaw(dir_ + "/_delta_log/" + top_name, ActionJson(v2).dump() + "\n" + R"({"sidecar":{"path":"../../elsewhere.parquet"}})");
  auto bad = log.ReadSnapshot();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(top_name + ": line 2: sidecar"), std::string::npos) << bad.status().ToString();
  WriteRaw(dir_ + "/_delta_log/" + top_name, top);
  std::filesystem::remove(dir_ + "/_delta_log/_sidecars/" + sidecar);
  EXPECT_FALSE(log.ReadSnapshot().ok());
}

TEST_F(DeltaLogTest, ExplicitCheckpointOfAnyVersion) {
  DeltaLog log = CreateTable();
  for (int v = 0; v < 3; ++v) ASSERT_TRUE(log.Commit(v, {NewAdd("f" + std::to_string(v))}, CommitKind::kBlindAppend, "WRITE", {}).ok());
  ASSERT_TRUE(log.Checkpoint().ok());
  for (int v = 0; v < 3; ++v) std::filesystem::remove(log.CommitPath(v));
  auto snap = log.ReadSnapshot();
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  EXPECT_EQ(snap->files.size(), 3u);
}

TEST_F(DeltaLogTest, CommitsAfterACheckpointReplaceItsFilesAndTombstonesAsAFullReplayDoes) {
  DeltaLog log = CreateTable();
  // Version 1: a, b c (escaped), d, e; version 2 removes d and e: the checkpoint at 2 holds three
  // adds and two tombstones.
  ASSERT_TRUE(log.Commit(0, {NewAdd("a"), NewAdd("b c"), NewAdd("d"), NewAdd("e")}, CommitKind::kBlindAppend, "WRITE", {}).ok());
  ASSERT_TRUE(log.Commit(1, {NewRemove("d"), NewRemove("e")}, CommitKind::kRewrite, "DELETE", {}).ok());
  ASSERT_TRUE(log.Checkpoint().ok());
  // After it: a removed, d added again, "b c" added again under another spelling of its path, f
  // added and removed, e removed a second time (a newer tombstone).
  AddFile b_again = NewAdd("b c", 200);
  b_again.path = "b%20%63";  // "b c", with 'c' escaped needlessly
  RemoveFile e_again = NewRemove("e");
  e_again.deletion_timestamp = 1700000000009;
  ASSERT_TRUE(log.Commit(2, {NewRemove("a"), NewAdd("d", 300)}, CommitKind::kRewrite, "WRITE", {}).ok());
  ASSERT_TRUE(log.Commit(3, {b_again, NewAdd("f")}, CommitKind::kBlindAppend, "WRITE", {}).ok());
  ASSERT_TRUE(log.Commit(4, {NewRemove("f"), e_again}, CommitKind::kRewrite, "DELETE", {}).ok());

  auto from_checkpoint = log.ReadSnapshot();
  ASSERT_TRUE(from_checkpoint.ok()) << from_checkpoint.status().ToString();
  std::filesystem::remove(dir_ + "/_delta_log/00000000000000000002.checkpoint.parquet");
  auto replayed = log.ReadSnapshot();
  ASSERT_TRUE(replayed.ok()) << replayed.status().ToString();

  EXPECT_EQ(FilePaths(*from_checkpoint), (std::vector<std::string>{"d", "b%20%63"}));
  EXPECT_EQ(FilePaths(*from_checkpoint), FilePaths(*replayed));
  EXPECT_EQ(from_checkpoint->files[0].size, 300);
  EXPECT_EQ(from_checkpoint->files[1].size, 200);
  // Tombstones: a, e (the newer one) and f; d's was dropped when d came back.
  for (const auto* snap : {&*from_checkpoint, &*replayed}) {
    EXPECT_EQ(snap->tombstones.size(), 3u);
    EXPECT_NE(FindTombstone(*snap, "a"), nullptr);
    EXPECT_NE(FindTombstone(*snap, "f"), nullptr);
    EXPECT_EQ(FindTombstone(*snap, "d"), nullptr);
    ASSERT_NE(FindTombstone(*snap, "e"), nullptr);
    EXPECT_EQ(FindTombstone(*snap, "e")->deletion_timestamp, 1700000000009);
  }
}

TEST_F(DeltaLogTest, ACheckpointWithABadPathIsCorruptionNamingIt) {
  DeltaLog log = CreateTable();
  auto state = log.ReadSnapshot();
  ASSERT_TRUE(state.ok());
  AddFile bad = NewAdd("x");
  bad.path = "x%zz.parquet";  // commits refuse it; another writer's checkpoint may hold it
  state->files.push_back(bad);
  ASSERT_TRUE(WriteCheckpoint(fs_, log.log_dir(), *state).ok());
  // With the commit it summarises still there, the checkpoint is skipped as unreadable.
  auto from_commits = log.ReadSnapshot();
  ASSERT_TRUE(from_commits.ok()) << from_commits.status().ToString();
  EXPECT_TRUE(from_commits->files.empty());
  std::filesystem::remove(log.CommitPath(0));
  auto snap = log.ReadSnapshot();
  ASSERT_FALSE(snap.ok());
  EXPECT_EQ(snap.status().code(), StatusCode::kCorruption);
  EXPECT_NE(snap.status().message().find("checkpoint"), std::string::npos) << snap.status().message();
}

TEST_F(DeltaLogTest, UnreadableCheckpointFallsBackToCommitsOrFailsNamingIt) {
  DeltaLog log = CreateTable();
  for (int v = 0; v < 3; ++v) ASSERT_TRUE(log.Commit(v, {NewAdd("f" + std::to_string(v))}, CommitKind::kBlindAppend, "WRITE", {}).ok());
  WriteRaw(dir_ + "/_delta_log/00000000000000000002.checkpoint.parquet", "PAR1 not really");
  WriteRaw(dir_ + "/_delta_log/_last_checkpoint", "{\"version\":2,\"size\":3}");
  auto snap = log.ReadSnapshot();  // all commits present: the broken checkpoint is skipped
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  EXPECT_EQ(snap->files.size(), 3u);
  std::filesystem::remove(log.CommitPath(0));
  snap = log.ReadSnapshot();
  ASSERT_FALSE(snap.ok());
  EXPECT_EQ(snap.status().code(), StatusCode::kCorruption);
  EXPECT_NE(snap.status().message().find("checkpoint.parquet"), std::string::npos) << snap.status().message();
}

TEST_F(DeltaLogTest, ReadsACheckpointWrittenByAnotherEngine) {
  // tests/data/duckdb/checkpoint.parquet: the checkpoint schema written by DuckDB (see generate.mjs).
  std::filesystem::create_directories(dir_ + "/_delta_log");
  std::filesystem::copy_file(std::string(STOKE_SOURCE_DIR) + "/tests/data/duckdb/checkpoint.parquet",
                             dir_ + "/_delta_log/00000000000000000007.checkpoint.parquet");
  DeltaLog log(LocalStorage(), dir_);
  EXPECT_EQ(*log.LatestVersion(), 7);
  auto snap = log.ReadSnapshot();
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  EXPECT_EQ(snap->version, 7);
  EXPECT_EQ(snap->metadata.id, "abc-123");
  EXPECT_EQ(snap->metadata.partition_columns, std::vector<std::string>{"split"});
  ASSERT_EQ(snap->files.size(), 2u);
  EXPECT_EQ(snap->files[0].path, "split=train/part-0.parquet");
  EXPECT_EQ(snap->files[0].partition_values.at("split"), "train");
  EXPECT_EQ(snap->files[0].stats, "{\"numRecords\":5}");
  EXPECT_FALSE(snap->files[1].data_change);
  EXPECT_NE(FindTombstone(*snap, "old.parquet"), nullptr);
  EXPECT_EQ(snap->app_versions.at("app"), 3);
}

TEST_F(DeltaLogTest, IgnoresOtherFilesInTheLog) {
  DeltaLog log = CreateTable();
  ASSERT_TRUE(log.Commit(0, {NewAdd("a")}, CommitKind::kBlindAppend, "WRITE", {}).ok());
  WriteRaw(dir_ + "/_delta_log/00000000000000000001.crc", "{}");
  WriteRaw(dir_ + "/_delta_log/00000000000000000002.json.tmp-0123456789abcdef", "garbage");
  WriteRaw(dir_ + "/_delta_log/.00000000000000000002.json.crc", "x");
  WriteRaw(dir_ + "/_delta_log/notes.txt", "x");
  EXPECT_EQ(*log.LatestVersion(), 1);
  auto snap = log.ReadSnapshot();
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  EXPECT_EQ(snap->version, 1);
}

// ------------------------------------------------------------------------------------------------
// Concurrent writers.

TEST_F(DeltaLogTest, TwoBlindAppendsFromTheSameReadVersionBothSucceed) {
  CreateTable();
  DeltaLog w1(fs_, dir_), w2(fs_, dir_);
  auto v1 = w1.Commit(0, {NewAdd("one")}, CommitKind::kBlindAppend, "WRITE", {});
  auto v2 = w2.Commit(0, {NewAdd("two")}, CommitKind::kBlindAppend, "WRITE", {});
  ASSERT_TRUE(v1.ok() && v2.ok());
  EXPECT_EQ(*v1, 1);
  EXPECT_EQ(*v2, 2);
  auto snap = w1.ReadSnapshot();
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(FilePaths(*snap), (std::vector<std::string>{"one", "two"}));
  // The retried commit keeps the read version it was based on.
  auto text = ReadFileToString(fs_, w2.CommitPath(2));
  auto actions = ParseCommit(*text, "2.json");
  EXPECT_EQ(std::get<CommitInfo>((*actions)[0]).value["readVersion"], 0);
}

// A commit given its state keeps it to the version it wrote, also when it went in after other
// writers' commits: the winners' actions come before its own, as a read of the log has them.
TEST_F(DeltaLogTest, ACommitAfterWinnersKnowsTheStateTheLogGives) {
  DeltaLog log = CreateTable();
  ASSERT_TRUE(log.Commit(0, {NewAdd("base-a"), NewAdd("base-b"), NewAdd("base-c")}, CommitKind::kBlindAppend, "WRITE", {}).ok());
  auto state = log.ReadSnapshot(1);
  ASSERT_TRUE(state.ok());
  // Two writers commit on top of version 1 first: one appends, one replaces base-b.
  ASSERT_EQ(*log.Commit(1, {NewAdd("w1-a"), NewAdd("w1-b")}, CommitKind::kBlindAppend, "WRITE", {}), 2);
  ASSERT_EQ(*log.Commit(2, {NewRemove("base-b"), NewAdd("w2")}, CommitKind::kRewrite, "OPTIMIZE", {}), 3);
  // This writer read version 1; its blind append goes in as version 4.
  auto v = log.Commit(1, {NewAdd("mine-a"), NewRemove("base-c"), NewAdd("mine-b")}, CommitKind::kRewrite, "WRITE", {}, 100,
                      nullptr, &*state);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*v, 4);
  auto read = log.ReadSnapshot(4);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(state->version, 4);
  EXPECT_EQ(FilePaths(*state), (std::vector<std::string>{"base-a", "w1-a", "w1-b", "w2", "mine-a", "mine-b"}));
  EXPECT_EQ(FilePaths(*state), FilePaths(*read));
  std::vector<std::string> a, b;
  for (const auto& r : state->tombstones) a.push_back(r.path);
  for (const auto& r : read->tombstones) b.push_back(r.path);
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, (std::vector<std::string>{"base-b", "base-c"}));
  EXPECT_EQ(state->num_records(), read->num_records());
}

TEST_F(DeltaLogTest, RewriteLosesWhenTheWinnerRemovedTheSameFile) {
  DeltaLog log = CreateTable();
  ASSERT_TRUE(log.Commit(0, {NewAdd("a"), NewAdd("b")}, CommitKind::kBlindAppend, "WRITE", {}).ok());
  ASSERT_EQ(*log.Commit(1, {NewRemove("a"), NewAdd("a2")}, CommitKind::kRewrite, "OPTIMIZE", {}), 2);
  auto v = log.Commit(1, {NewRemove("a"), NewRemove("b"), NewAdd("ab")}, CommitKind::kRewrite, "OPTIMIZE", {});
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kConflict);
  EXPECT_NE(v.status().message().find("version 2"), std::string::npos) << v.status().message();
  EXPECT_EQ(*log.LatestVersion(), 2);
}

TEST_F(DeltaLogTest, RewriteRetriesAfterAConcurrentAppend) {
  DeltaLog log = CreateTable();
  ASSERT_TRUE(log.Commit(0, {NewAdd("a")}, CommitKind::kBlindAppend, "WRITE", {}).ok());
  ASSERT_EQ(*log.Commit(1, {NewAdd("b")}, CommitKind::kBlindAppend, "WRITE", {}), 2);
  auto v = log.Commit(1, {NewRemove("a"), NewAdd("a2")}, CommitKind::kRewrite, "OPTIMIZE", {});
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*v, 3);
  EXPECT_EQ(FilePaths(*log.ReadSnapshot()), (std::vector<std::string>{"b", "a2"}));
}

TEST_F(DeltaLogTest, MetadataCommitConflictsWithAnyWinner) {
  DeltaLog log = CreateTable();
  ASSERT_EQ(*log.Commit(0, {NewAdd("a")}, CommitKind::kBlindAppend, "WRITE", {}), 1);
  Metadata m = NewMetadata();
  m.description = "new";
  auto v = log.Commit(0, {m}, CommitKind::kExclusive, "SET TBLPROPERTIES", {});
  EXPECT_EQ(v.status().code(), StatusCode::kConflict);
  // Declared as a blind append, a metadata change is still treated as one.
  v = log.Commit(0, {m}, CommitKind::kBlindAppend, "SET TBLPROPERTIES", {});
  EXPECT_EQ(v.status().code(), StatusCode::kConflict);
  EXPECT_EQ(*log.LatestVersion(), 1);
}

TEST_F(DeltaLogTest, BlindAppendConflictsWithAWinnerThatChangedMetadata) {
  DeltaLog log = CreateTable();
  Metadata m = NewMetadata();
  m.description = "new";
  ASSERT_EQ(*log.Commit(0, {m}, CommitKind::kExclusive, "SET TBLPROPERTIES", {}), 1);
  auto v = log.Commit(0, {NewAdd("a")}, CommitKind::kBlindAppend, "WRITE", {});
  EXPECT_EQ(v.status().code(), StatusCode::kConflict);
}

TEST_F(DeltaLogTest, SameApplicationTransactionConflicts) {
  DeltaLog log = CreateTable();
  ASSERT_EQ(*log.Commit(0, {Txn{"stream", 1, std::nullopt}, NewAdd("a")}, CommitKind::kBlindAppend, "WRITE", {}), 1);
  auto v = log.Commit(0, {Txn{"stream", 1, std::nullopt}, NewAdd("a-again")}, CommitKind::kBlindAppend, "WRITE", {});
  EXPECT_EQ(v.status().code(), StatusCode::kConflict);
  v = log.Commit(0, {Txn{"other", 1, std::nullopt}, NewAdd("b")}, CommitKind::kBlindAppend, "WRITE", {});
  EXPECT_TRUE(v.ok());
}

TEST_F(DeltaLogTest, GivesUpAfterMaxAttempts) {
  DeltaLog log = CreateTable();
  ASSERT_TRUE(log.Commit(0, {NewAdd("a")}, CommitKind::kBlindAppend, "WRITE", {}).ok());
  auto v = log.Commit(0, {NewAdd("b")}, CommitKind::kBlindAppend, "WRITE", {}, /*max_attempts=*/1);
  EXPECT_EQ(v.status().code(), StatusCode::kConflict);
}

// Commit timestamps never decrease with versions: a predecessor stamped by a clock ahead of ours
// (another machine), and winners a commit goes in after, push its timestamp past theirs, in the
// commit's first line (a staged commit file is rewritten) and in the state it returns.
TEST_F(DeltaLogTest, TimestampsNeverGoBackwards) {
  DeltaLog log = CreateTable();
  const int64_t ahead = EpochMillis() + 3'600'000;  // an hour ahead
  nlohmann::json info = {{"timestamp", ahead}, {"operation", "WRITE"}};
  ASSERT_EQ(*log.Commit(0, {CommitInfo{info}, NewAdd("a")}, CommitKind::kBlindAppend, "WRITE", {}), 1);
  EXPECT_EQ(log.ReadSnapshot(1)->timestamp, ahead);
  Snapshot state = *log.ReadSnapshot(1);
  ASSERT_EQ(*log.Commit(1, {NewAdd("b")}, CommitKind::kBlindAppend, "WRITE", {}, 100, nullptr, &state), 2);
  EXPECT_EQ(state.timestamp, ahead + 1);
  EXPECT_EQ(log.ReadSnapshot(2)->timestamp, ahead + 1);
  // From a stale read version: version 3 is a winner an hour and a half ahead; this commit, written
  // for version 3, goes in as 4 with a later timestamp than the winner's.
  info["timestamp"] = ahead + 1'800'000;
  ASSERT_EQ(*log.Commit(2, {CommitInfo{info}, NewAdd("c")}, CommitKind::kBlindAppend, "WRITE", {}), 3);
  std::vector<Action> many;
  for (int i = 0; i < 20000; ++i) many.push_back(NewAdd("d" + std::to_string(i)));  // a staged file over 1 MiB
  auto v = log.Commit(2, std::move(many), CommitKind::kBlindAppend, "WRITE", {});
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  ASSERT_EQ(*v, 4);
  auto snap = log.ReadSnapshot(4);
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  EXPECT_EQ(snap->timestamp, ahead + 1'800'001);
  EXPECT_EQ(snap->files.size(), 20003u);
  auto history = log.History();
  ASSERT_TRUE(history.ok());
  for (size_t i = 1; i < history->size(); ++i) EXPECT_GT((*history)[i - 1].timestamp, (*history)[i].timestamp) << i;
  for (const auto& e : std::filesystem::directory_iterator(log.log_dir())) {
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();  // no staged leftovers
  }
}

// The local file system, counting the names its listings return.
class NameCountingStorage : public Storage {
 public:
  Result<std::unique_ptr<RandomAccessFile>> OpenForRead(const std::string& p) override { return base_.OpenForRead(p); }
  Result<std::unique_ptr<WritableFile>> Create(const std::string& p, bool exclusive) override {
    return base_.Create(p, exclusive);
  }
  Result<std::vector<DirEntry>> List(const std::string& dir) override { return Count(base_.List(dir)); }
  Result<std::vector<std::string>> ListNames(const std::string& dir) override { return Count(base_.ListNames(dir)); }
  Result<std::vector<std::string>> ListNamesWithPrefix(const std::string& dir, const std::string& prefix) override {
    return Count(base_.ListNamesWithPrefix(dir, prefix));
  }
  Result<DirEntry> Stat(const std::string& p) override { return base_.Stat(p); }
  Status CreateDirectories(const std::string& p) override { return base_.CreateDirectories(p); }
  Status Rename(const std::string& from, const std::string& to) override { return base_.Rename(from, to); }
  Status Delete(const std::string& p) override { return base_.Delete(p); }
  Status PutIfAbsent(const std::string& p, ByteView data) override { return base_.PutIfAbsent(p, data); }
  Status PublishIfAbsent(const std::string& tmp, const std::string& p) override { return base_.PublishIfAbsent(tmp, p); }

  size_t names = 0;

 private:
  template <typename T>
  Result<std::vector<T>> Count(Result<std::vector<T>> r) {
    if (r.ok()) names += r->size();
    return r;
  }
  Storage& base_ = LocalStorage();
};

// Opening the latest version and committing list only the versions from the checkpoint
// _last_checkpoint names (blocks of 100 names), whatever the log's length; older versions, and hints
// that lead nowhere (a missing checkpoint, one past the log's end, a malformed file), fall back to
// the whole listing with the same results.
TEST_F(DeltaLogTest, ReadsListOnlyFromTheLastCheckpoint) {
  CreateTable();
  NameCountingStorage counting;
  DeltaLog log(counting, dir_);
  for (int v = 1; v <= 250; ++v) ASSERT_EQ(*log.Commit(v - 1, {NewAdd("f" + std::to_string(v))}, CommitKind::kBlindAppend, "WRITE", {}), v);
  const std::string last = log.log_dir() + "/_last_checkpoint";
  ASSERT_NE(ReadRaw(last).find("\"version\":250"), std::string::npos) << ReadRaw(last);
  auto open = [&](std::optional<int64_t> version = std::nullopt) {
    counting.names = 0;
    auto snap = log.ReadSnapshot(version);
    EXPECT_TRUE(snap.ok()) << snap.status().ToString();
    return snap.ok() ? snap->files.size() : 0;
  };
  // The log holds 277 names; the block of 200-299 57 (commits 200-250, checkpoints 200-250). The
  // checkpoint's files are found among them (no listing of their own).
  EXPECT_EQ(open(), 250u);
  EXPECT_EQ(counting.names, 57u);
  counting.names = 0;
  EXPECT_EQ(*log.LatestVersion(), 250);
  EXPECT_EQ(counting.names, 57u);
  ASSERT_EQ(*log.Commit(250, {NewAdd("g")}, CommitKind::kBlindAppend, "WRITE", {}), 251);
  EXPECT_EQ(open(5), 5u);  // time travel before the checkpoint: the whole log
  EXPECT_GT(counting.names, 250u);

  WriteRaw(last, "{\"version\":120,\"size\":3}");  // stale: blocks 100-199 and 200-299 are listed
  EXPECT_EQ(open(), 251u);
  EXPECT_EQ(*log.LatestVersion(), 251);
  WriteRaw(last, "{\"version\":5000,\"size\":3}");  // past the end (another life of the table)
  EXPECT_EQ(open(), 251u);
  EXPECT_EQ(*log.LatestVersion(), 251);
  WriteRaw(last, "not json");
  EXPECT_EQ(open(), 251u);
  WriteRaw(last, "{\"version\":250,\"size\":3}");
  std::filesystem::remove(log.log_dir() + "/00000000000000000250.checkpoint.parquet");  // a hint to a lost checkpoint
  EXPECT_EQ(open(), 251u);
  EXPECT_EQ(open(249), 249u);
  // Commits missing at the end of a block (here 199) with later ones present: never taken for the
  // log's end, where a commit would fill the gap. The whole listing finds the latest version; the
  // version that needs the missing commit is Corruption.
  WriteRaw(last, "{\"version\":190,\"size\":3}");
  std::filesystem::remove(log.log_dir() + "/00000000000000000199.json");
  EXPECT_EQ(*log.LatestVersion(), 251);
  EXPECT_EQ(open(), 251u);  // from the checkpoint at 240
  EXPECT_EQ(log.ReadSnapshot(199).status().code(), StatusCode::kCorruption);
}

TEST_F(DeltaLogTest, ConcurrentBlindAppendsFromAStaleReadVersionAllLand) {
  CreateTable();
  constexpr int kThreads = 4, kCommits = 25;
  std::vector<std::thread> threads;
  std::vector<std::string> errors(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      DeltaLog log(fs_, dir_);
      for (int i = 0; i < kCommits; ++i) {
        auto v = log.Commit(0, {NewAdd("t" + std::to_string(t) + "-" + std::to_string(i))}, CommitKind::kBlindAppend,
                            "WRITE", {});
        if (!v.ok()) {
          errors[t] = v.status().ToString();
          return;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& e : errors) EXPECT_EQ(e, "");
  DeltaLog log(fs_, dir_);
  EXPECT_EQ(*log.LatestVersion(), kThreads * kCommits);
  for (int v = 0; v <= kThreads * kCommits; ++v) {
    EXPECT_TRUE(std::filesystem::exists(log.CommitPath(v))) << v;
  }
  auto snap = log.ReadSnapshot();
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  std::set<std::string> paths;
  for (const auto& f : snap->files) paths.insert(f.path);
  EXPECT_EQ(paths.size(), size_t{kThreads * kCommits});
  EXPECT_EQ(snap->num_records(), 10 * kThreads * kCommits);
  // Each commit's timestamp is later than its predecessor's, whichever writer won each version.
  auto history = log.History();
  ASSERT_TRUE(history.ok());
  ASSERT_EQ(history->size(), size_t{kThreads * kCommits + 1});
  for (size_t i = 1; i < history->size(); ++i) EXPECT_GT((*history)[i - 1].timestamp, (*history)[i].timestamp) << i;
}

}  // namespace
}  // namespace stoke::delta
