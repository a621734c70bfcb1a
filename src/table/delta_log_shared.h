// What the log's reader (delta_log.cc) and its committer (delta_commit.cc) share: a commit's
// timestamp, read from its commitInfo or its file, and the checkpoint written after a commit.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "io/storage.h"
#include "table/delta_log.h"

namespace stoke::delta {

// A commit's timestamp from its commitInfo: inCommitTimestamp where the commit has one (PROTOCOL.md,
// "In-Commit Timestamps": readers use it for time travel and history), else timestamp; nullopt when
// neither is an int64.
std::optional<int64_t> CommitTimestamp(const CommitInfo& info);

// A commit's modification time (ms), the fallback timestamp of a commit without one in its
// commitInfo; 0 when it cannot be read.
int64_t FileTime(Storage& storage, const std::string& path);

// The commitInfo of a commit from its first line only (writers put commitInfo first), so that a
// snapshot taken from a checkpoint does not parse a commit of 100,000s of actions again. nullopt when
// the first line is not a commitInfo, or the file cannot be read.
std::optional<CommitInfo> FirstLineCommitInfo(Storage& storage, const std::string& path);

// The checkpoint of `snapshot`, unless the table uses a feature whose rules it would break.
Status CheckAndWriteCheckpoint(Storage& storage, const DeltaLog& log, const Snapshot& snapshot);

}  // namespace stoke::delta
