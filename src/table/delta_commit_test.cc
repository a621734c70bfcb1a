// Commit timestamps: in-commit timestamps written and read (PROTOCOL.md, "In-Commit Timestamps"), and
// time travel by timestamp (DeltaLog::VersionAt, TableVersionAt).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/clock.h"
#include "io/local_files.h"
#include "stoke/table.h"
#include "table/delta_log.h"
#include "table/delta_testing.h"

namespace stoke::delta {
namespace {

using json = nlohmann::json;
using testing_support::NewAdd;
using testing_support::NewMetadata;

class DeltaCommitTest : public ::testing::Test {
 protected:
  // Writes commit `version` by hand: a commitInfo with `info`, then `actions` (JSON lines).
  void WriteCommit(int64_t version, const json& info, const std::string& actions = "") {
    std::filesystem::create_directories(log_.log_dir());
    std::ofstream(log_.CommitPath(version)) << json{{"commitInfo", info}}.dump() << "\n" << actions;
  }
  // The first line of commit `version`, as JSON.
  json FirstLine(int64_t version) {
    std::ifstream in(log_.CommitPath(version));
    std::string line;
    std::getline(in, line);
    return json::parse(line)["commitInfo"];
  }
  static std::string CreateActions(const Metadata& m, const Protocol& p) {
    return SerializeCommit({p, m});
  }

  TemporaryDirectory dir_ = TemporaryDirectory::Create("stoke_commit_ts_").value();
  DeltaLog log_{LocalStorage(), dir_.path()};
};

Metadata WithInCommitTimestamps(std::optional<int64_t> enablement_version = std::nullopt,
                                std::optional<int64_t> enablement_time = std::nullopt) {
  Metadata m = NewMetadata();
  m.configuration["delta.enableInCommitTimestamps"] = "true";
  if (enablement_version) m.configuration["delta.inCommitTimestampEnablementVersion"] = std::to_string(*enablement_version);
  if (enablement_time) m.configuration["delta.inCommitTimestampEnablementTimestamp"] = std::to_string(*enablement_time);
  return m;
}

const Protocol kIctProtocol{1, 7, {}, {"inCommitTimestamp", "appendOnly", "invariants"}};

// Every commit on a table with in-commit timestamps carries inCommitTimestamp, the same value as its
// timestamp: the later of the clock and the predecessor's + 1 ms, whether the committer knows the
// state or reads the predecessor's first line. Readers take it over commitInfo.timestamp.
TEST_F(DeltaCommitTest, CommitsOnATableWithInCommitTimestampsCarryThem) {
  ASSERT_EQ(*log_.Commit(-1, {kIctProtocol, WithInCommitTimestamps()}, CommitKind::kExclusive, "CREATE TABLE", {}), 0);
  EXPECT_EQ(FirstLine(0)[kInCommitTimestampField], FirstLine(0)["timestamp"]);
  // A predecessor whose in-commit timestamp is an hour ahead of the clock, and whose plain timestamp
  // is far behind (as another writer's may be): the next commit follows the in-commit one.
  const int64_t ahead = EpochMillis() + 3'600'000;
  WriteCommit(1, {{"timestamp", 1000}, {kInCommitTimestampField, ahead}, {"operation", "WRITE"}},
              SerializeCommit({NewAdd("a")}));
  EXPECT_EQ(log_.ReadSnapshot(1)->timestamp, ahead);
  ASSERT_EQ(*log_.Commit(1, {NewAdd("b")}, CommitKind::kBlindAppend, "WRITE", {}), 2);  // reads the first line
  EXPECT_EQ(FirstLine(2)[kInCommitTimestampField], ahead + 1);
  EXPECT_EQ(FirstLine(2)["timestamp"], ahead + 1);
  Snapshot state = *log_.ReadSnapshot(2);
  ASSERT_EQ(*log_.Commit(2, {NewAdd("c")}, CommitKind::kBlindAppend, "WRITE", {}, 100, nullptr, &state), 3);  // from the state
  EXPECT_EQ(FirstLine(3)[kInCommitTimestampField], ahead + 2);
  EXPECT_EQ(state.timestamp, ahead + 2);
  auto history = log_.History();
  ASSERT_TRUE(history.ok());
  EXPECT_EQ((*history)[2].timestamp, ahead);  // version 1: its in-commit timestamp, not its timestamp
}

// A table without them gets none, as before.
TEST_F(DeltaCommitTest, OtherTablesGetNoInCommitTimestamps) {
  ASSERT_EQ(*log_.Commit(-1, {Protocol{}, NewMetadata()}, CommitKind::kExclusive, "CREATE TABLE", {}), 0);
  ASSERT_EQ(*log_.Commit(0, {NewAdd("a")}, CommitKind::kBlindAppend, "WRITE", {}), 1);
  EXPECT_FALSE(FirstLine(0).contains(kInCommitTimestampField));
  EXPECT_FALSE(FirstLine(1).contains(kInCommitTimestampField));
}

// Domains are replayed (a removed one leaves the state), kept by stoke's commits and by the
// checkpoint they write, which readers then start from.
TEST_F(DeltaCommitTest, DomainsOutliveCommitsAndCheckpoints) {
  ASSERT_EQ(*log_.Commit(-1, {Protocol{1, 7, {}, {"domainMetadata"}}, NewMetadata()}, CommitKind::kExclusive,
                         "CREATE TABLE", {}),
            0);
  WriteCommit(1, {{"timestamp", EpochMillis()}},
              SerializeCommit({DomainMetadata{"user.a", R"({"k":1})", false}, DomainMetadata{"user.b", "x", false}}));
  WriteCommit(2, {{"timestamp", EpochMillis()}}, SerializeCommit({DomainMetadata{"user.a", R"({"k":1})", true}}));
  for (int64_t v = 2; v < 10; ++v) {
    ASSERT_EQ(*log_.Commit(v, {NewAdd("f" + std::to_string(v))}, CommitKind::kBlindAppend, "WRITE", {}), v + 1);
  }
  ASSERT_TRUE(std::filesystem::exists(log_.log_dir() + "/00000000000000000010.checkpoint.parquet"));
  for (int64_t v = 0; v <= 10; ++v) std::filesystem::remove(log_.CommitPath(v));  // only the checkpoint is left
  WriteCommit(10, {{"timestamp", EpochMillis()}});  // a version's commit (readers time it by its first line)
  auto snap = log_.ReadSnapshot();
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  ASSERT_EQ(snap->domains.size(), 1u);
  EXPECT_EQ(snap->domains.at("user.b").configuration, "x");
  EXPECT_EQ(snap->files.size(), 8u);
  // A commit that changes a domain goes on top of no winner: one that could is refused.
  auto v = log_.Commit(10, {DomainMetadata{"user.c", "", false}}, CommitKind::kBlindAppend, "WRITE", {});
  EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(v.status().message().find("domain 'user.c'"), std::string::npos) << v.status().message();
  ASSERT_EQ(*log_.Commit(10, {DomainMetadata{"user.c", "y", false}}, CommitKind::kExclusive, "WRITE", {}), 11);
  EXPECT_EQ(log_.ReadSnapshot()->domains.at("user.c").configuration, "y");
}

// Time travel by timestamp lands on the newest version committed at or before the time, and refuses
// a time before the first.
TEST_F(DeltaCommitTest, VersionAtIsTheNewestVersionCommittedByThen) {
  WriteCommit(0, {{"timestamp", 1000}}, CreateActions(NewMetadata(), Protocol{}));
  WriteCommit(1, {{"timestamp", 2000}}, SerializeCommit({NewAdd("a")}));
  WriteCommit(2, {{"timestamp", 3000}}, SerializeCommit({NewAdd("b")}));
  for (auto [time, version] : std::vector<std::pair<int64_t, int64_t>>{
           {1000, 0}, {1999, 0}, {2000, 1}, {2999, 1}, {3000, 2}, {99'999'999, 2}}) {
    auto v = log_.VersionAt(time);
    ASSERT_TRUE(v.ok()) << time << ": " << v.status().ToString();
    EXPECT_EQ(*v, version) << time;
  }
  Status early = log_.VersionAt(999).status();
  EXPECT_EQ(early.code(), StatusCode::kNotFound);
  EXPECT_NE(early.message().find("its earliest readable version, 0, was committed at 1970-01-01T00:00:01Z"),
            std::string::npos)
      << early.message();
}

// With in-commit timestamps enabled at version 3, a time at or after the enablement considers only
// versions from 3 on, and an earlier time only the versions before it, whatever their timestamps say.
TEST_F(DeltaCommitTest, VersionAtKeepsToTheSideOfTheEnablementItsTimeIsOn) {
  WriteCommit(0, {{"timestamp", 1000}}, CreateActions(NewMetadata(), Protocol{}));
  WriteCommit(1, {{"timestamp", 2000}}, SerializeCommit({NewAdd("a")}));
  WriteCommit(2, {{"timestamp", 9000}}, SerializeCommit({NewAdd("b")}));  // a clock that ran ahead
  WriteCommit(3, {{"timestamp", 5000}, {kInCommitTimestampField, 5000}},
              CreateActions(WithInCommitTimestamps(3, 5000), kIctProtocol));
  WriteCommit(4, {{"timestamp", 6000}, {kInCommitTimestampField, 6000}}, SerializeCommit({NewAdd("c")}));
  EXPECT_EQ(*log_.VersionAt(4000), 1);
  EXPECT_EQ(*log_.VersionAt(4999), 1);
  EXPECT_EQ(*log_.VersionAt(5000), 3);
  EXPECT_EQ(*log_.VersionAt(5999), 3);
  EXPECT_EQ(*log_.VersionAt(9500), 4);
}

// A predecessor whose first line (its commitInfo) is longer than a first read of it still tells
// that the table writes in-commit timestamps.
TEST_F(DeltaCommitTest, AVeryLongCommitInfoStillCarriesTheInCommitTimestamp) {
  ASSERT_EQ(*log_.Commit(-1, {kIctProtocol, WithInCommitTimestamps()}, CommitKind::kExclusive, "CREATE TABLE", {}), 0);
  const int64_t ahead = EpochMillis() + 3'600'000;
  WriteCommit(1, {{"timestamp", ahead}, {kInCommitTimestampField, ahead}, {"notes", std::string(300'000, 'x')}},
              SerializeCommit({NewAdd("a")}));
  ASSERT_EQ(*log_.Commit(1, {NewAdd("b")}, CommitKind::kBlindAppend, "WRITE", {}), 2);
  EXPECT_EQ(FirstLine(2)[kInCommitTimestampField], ahead + 1);
}

// Once commit 0 is gone, time travel lands only on versions a checkpoint makes readable.
TEST_F(DeltaCommitTest, VersionAtLandsOnlyOnReadableVersions) {
  WriteCommit(0, {{"timestamp", 1000}}, CreateActions(NewMetadata(), Protocol{}));
  for (int64_t v = 1; v <= 4; ++v) WriteCommit(v, {{"timestamp", 1000 * (v + 1)}}, SerializeCommit({NewAdd("f" + std::to_string(v))}));
  ASSERT_TRUE(log_.Checkpoint(2).ok());
  std::filesystem::remove(log_.CommitPath(0));
  std::filesystem::remove(log_.CommitPath(1));
  EXPECT_EQ(log_.VersionAt(2500).status().code(), StatusCode::kNotFound);  // version 1: its commit is gone
  EXPECT_NE(log_.VersionAt(2500).status().message().find("earliest readable version, 2"), std::string::npos)
      << log_.VersionAt(2500).status().message();
  EXPECT_EQ(*log_.VersionAt(3000), 2);
  EXPECT_EQ(*log_.VersionAt(4500), 3);
  EXPECT_TRUE(log_.ReadSnapshot(*log_.VersionAt(3000)).ok());
  std::filesystem::remove(log_.CommitPath(2));  // the checkpoint's version has no commit left: from 3 on
  EXPECT_EQ(*log_.VersionAt(9000), 4);
  EXPECT_EQ(log_.VersionAt(3500).status().code(), StatusCode::kNotFound);
}

// TableVersionAt reads ISO-8601 times (UTC unless a zone follows) and milliseconds since the epoch.
TEST_F(DeltaCommitTest, TableVersionAtReadsIsoTimesAndMilliseconds) {
  WriteCommit(0, {{"timestamp", 1'796'112'000'000}}, CreateActions(NewMetadata(), Protocol{}));  // 2026-12-01T08:00:00Z
  WriteCommit(1, {{"timestamp", 1'796'115'600'000}}, SerializeCommit({NewAdd("a")}));          // 09:00
  EXPECT_EQ(*TableVersionAt(dir_.path(), "2026-12-01T08:30:00Z"), 0);
  EXPECT_EQ(*TableVersionAt(dir_.path(), "2026-12-01 09:00:00"), 1);
  EXPECT_EQ(*TableVersionAt(dir_.path(), "2026-12-01T09:30:00+01:00"), 0);  // 08:30 UTC
  EXPECT_EQ(*TableVersionAt(dir_.path(), "1796115600000"), 1);
  EXPECT_EQ(*TableVersionAt(dir_.path(), "1796115599999"), 0);
  EXPECT_EQ(TableVersionAt(dir_.path(), "yesterday").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(TableVersionAt(dir_.path(), "").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(TableVersionAt(dir_.path(), "2026-12-01T07:00:00Z").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(TableVersionAt(dir_.path() + "/missing", "1").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace stoke::delta
