#include "io/local_files.h"

#include <gtest/gtest.h>

#include <string>

#include "io/storage.h"

namespace stoke {
namespace {

bool IsLocalDirectory(const std::string& path) {
  auto st = LocalStorage().Stat(path);
  return st.ok() && st->is_directory;
}

TEST(TemporaryDirectoryTest, IsCreatedEmptyAndRemovedWithItsFiles) {
  std::string path;
  {
    auto dir = TemporaryDirectory::Create("stoke_local_files_");
    ASSERT_TRUE(dir.ok()) << dir.status().ToString();
    path = dir->path();
    EXPECT_TRUE(IsLocalDirectory(path));
    ASSERT_TRUE(LocalStorage().CreateDirectories(JoinPath(path, "a/b")).ok());
    ASSERT_TRUE(WriteFileAtomically(LocalStorage(), JoinPath(path, "a/b/c.bin"), AsBytes("bytes")).ok());
    TemporaryDirectory moved = std::move(*dir);  // the moved-from one removes nothing
    EXPECT_TRUE(IsLocalDirectory(path));
  }
  EXPECT_FALSE(IsLocalDirectory(path));
}

TEST(LocalDescriptorsTest, OpenReportErrnoAndDirectReadsAreProbed) {
  auto dir = TemporaryDirectory::Create("stoke_local_files_");
  ASSERT_TRUE(dir.ok());
  const std::string file = JoinPath(dir->path(), "f.bin");
  ASSERT_TRUE(WriteFileAtomically(LocalStorage(), file, AsBytes(std::string(8192, 'x'))).ok());
  int error = -1;
  const int fd = OpenReadDescriptor(file, /*direct=*/false, &error);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(error, 0);
  CloseDescriptor(fd);
  EXPECT_EQ(OpenReadDescriptor(JoinPath(dir->path(), "missing"), false, &error), -1);
  EXPECT_EQ(error, ENOENT);
  // Either the file system takes O_DIRECT, or the refusal names the file.
  Status direct = CheckDirectReads(file);
  if (!direct.ok()) {
    EXPECT_EQ(direct.code(), StatusCode::kUnsupported);
    EXPECT_NE(direct.message().find(file), std::string::npos);
  }
  EXPECT_TRUE(CheckDirectReads(JoinPath(dir->path(), "missing")).ok());  // left to the reads
  EXPECT_EQ(ResidentPages(JoinPath(dir->path(), "missing"), 0, 4096), -1);
  EXPECT_GE(ResidentPages(file, 0, 8192), 0);
  EXPECT_LE(ResidentPages(file, 0, 8192), 2);
}

TEST(LocalDirectoriesTest, OnlyEmptyDirectoriesAreRemoved) {
  auto dir = TemporaryDirectory::Create("stoke_local_files_");
  ASSERT_TRUE(dir.ok());
  const std::string full = JoinPath(dir->path(), "full"), empty = JoinPath(dir->path(), "empty");
  ASSERT_TRUE(LocalStorage().CreateDirectories(empty).ok());
  ASSERT_TRUE(LocalStorage().CreateDirectories(full).ok());
  ASSERT_TRUE(WriteFileAtomically(LocalStorage(), JoinPath(full, "x"), AsBytes("x")).ok());
  EXPECT_TRUE(RemoveEmptyLocalDirectory(empty));
  EXPECT_FALSE(IsLocalDirectory(empty));
  EXPECT_TRUE(RemoveEmptyLocalDirectory(empty));  // already gone
  EXPECT_FALSE(RemoveEmptyLocalDirectory(full));
  EXPECT_TRUE(IsLocalDirectory(full));
  EXPECT_FALSE(IsLocalDirectory(JoinPath(full, "x")));
}

TEST(PathPartsTest, BaseNameAndPathUnder) {
  EXPECT_EQ(BaseName("a/b/c.parquet"), "c.parquet");
  EXPECT_EQ(BaseName("c"), "c");
  EXPECT_EQ(BaseName("a/"), "");
  EXPECT_EQ(PathUnder("/t/a/b", "/t"), "a/b");
  EXPECT_EQ(PathUnder("/t/a/b", "/t/"), "a/b");
  EXPECT_EQ(PathUnder("t/x", "t"), "x");
  EXPECT_EQ(PathUnder("/tab/x", "/t"), "/tab/x");  // not under /t
  EXPECT_EQ(PathUnder("/t", "/t"), "/t");
  EXPECT_EQ(PathUnder("/x/y", "/"), "x/y");
  EXPECT_EQ(PathUnder("x/y", ""), "x/y");
}

}  // namespace
}  // namespace stoke
