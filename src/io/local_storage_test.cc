#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "io/storage.h"

namespace stoke {
namespace {

class LocalStorageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = std::filesystem::temp_directory_path() / "stoke_io_XXXXXX";
    dir_ = mkdtemp(tmpl.data());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
  Storage& fs_ = LocalStorage();
};

// Writes go out in whole 4 KiB blocks with O_DIRECT and a buffered tail; whatever the append sizes,
// and with a Sync in the middle, the file holds exactly the bytes appended. Run for the test's
// temporary directory and for /dev/shm (tmpfs, where O_DIRECT is refused) when it exists.
TEST_F(LocalStorageTest, AppendsOfAnySizeGiveExactlyTheBytesAppended) {
  std::vector<std::string> dirs = {dir_};
  if (std::filesystem::is_directory("/dev/shm")) dirs.push_back("/dev/shm");
  for (const auto& dir : dirs) {
    const std::string path = JoinPath(dir, "stoke_append_" + std::to_string(::getpid()) + ".bin");
    std::string want;
    uint32_t x = 12345;
    auto next = [&](size_t n) {
      std::string s(n, '\0');
      for (auto& c : s) c = static_cast<char>((x = x * 1103515245u + 12345u) >> 24);
      return s;
    };
    auto w = fs_.Create(path);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    for (size_t n : {size_t{1}, size_t{4095}, size_t{4096}, size_t{(4 << 20) + 17}, size_t{3}, size_t{9 << 20}}) {
      std::string part = next(n);
      ASSERT_TRUE((*w)->Append(AsBytes(part)).ok());
      want += part;
      EXPECT_EQ((*w)->bytes_written(), want.size());
    }
    ASSERT_TRUE((*w)->Sync().ok());
    for (int i = 0; i < 1000; ++i) {  // many small appends after the file went buffered
      std::string part = next(100 + i);
      ASSERT_TRUE((*w)->Append(AsBytes(part)).ok());
      want += part;
    }
    ASSERT_TRUE((*w)->Close().ok());
    EXPECT_EQ((*w)->bytes_written(), want.size());
    auto got = ReadFileToString(fs_, path);
    std::filesystem::remove(path);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->size(), want.size()) << dir;
    EXPECT_TRUE(*got == want) << dir;
  }
}

TEST_F(LocalStorageTest, WritesReadsAndLists) {
  auto w = fs_.Create(JoinPath(dir_, "b.bin"));
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Append(AsBytes("hello, ")).ok());
  ASSERT_TRUE((*w)->Append(AsBytes("world")).ok());
  EXPECT_EQ((*w)->bytes_written(), 12u);
  ASSERT_TRUE((*w)->Sync().ok());
  ASSERT_TRUE((*w)->Close().ok());
  ASSERT_TRUE(WriteFileAtomically(fs_, JoinPath(dir_, "a.txt"), AsBytes("x")).ok());
  ASSERT_TRUE(fs_.CreateDirectories(JoinPath(dir_, "sub/deeper")).ok());

  auto r = fs_.OpenForRead(JoinPath(dir_, "b.bin"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->size(), 12u);
  char buf[5];
  ASSERT_TRUE((*r)->ReadAt(7, MutableByteView(reinterpret_cast<uint8_t*>(buf), 5)).ok());
  EXPECT_EQ(std::string(buf, 5), "world");

  auto list = fs_.List(dir_);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 3u);  // no temporary files left behind
  EXPECT_EQ((*list)[0].name, "a.txt");
  EXPECT_EQ((*list)[1].name, "b.bin");
  EXPECT_EQ((*list)[1].size, 12u);
  EXPECT_TRUE((*list)[2].is_directory);
  EXPECT_EQ(*ReadFileToString(fs_, JoinPath(dir_, "a.txt")), "x");
  // Names only (no directories), sorted; with a prefix, only those that start with it.
  ASSERT_TRUE(WriteFileAtomically(fs_, JoinPath(dir_, "a0"), AsBytes("y")).ok());
  ASSERT_TRUE(fs_.CreateDirectories(JoinPath(dir_, "a-dir")).ok());
  EXPECT_EQ(*fs_.ListNames(dir_), (std::vector<std::string>{"a.txt", "a0", "b.bin"}));
  EXPECT_EQ(*fs_.ListNamesWithPrefix(dir_, "a"), (std::vector<std::string>{"a.txt", "a0"}));
  EXPECT_EQ(*fs_.ListNamesWithPrefix(dir_, "b.bin"), (std::vector<std::string>{"b.bin"}));
  EXPECT_TRUE(fs_.ListNamesWithPrefix(dir_, "c")->empty());
  EXPECT_EQ(fs_.ListNamesWithPrefix(JoinPath(dir_, "missing"), "a").status().code(), StatusCode::kNotFound);
}

TEST_F(LocalStorageTest, ReadPastTheEndNamesFileOffsetAndSize) {
  ASSERT_TRUE(WriteFileAtomically(fs_, JoinPath(dir_, "small"), AsBytes("abc")).ok());
  auto r = fs_.OpenForRead(JoinPath(dir_, "small"));
  ASSERT_TRUE(r.ok());
  uint8_t buf[4];
  Status s = (*r)->ReadAt(1, MutableByteView(buf, 4));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("small"), std::string::npos);
  EXPECT_NE(s.message().find("offset 1"), std::string::npos) << s.message();
}

TEST_F(LocalStorageTest, ErrorsHaveTheRightCodes) {
  EXPECT_EQ(fs_.OpenForRead(JoinPath(dir_, "missing")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(fs_.OpenForRead(dir_).status().code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(fs_.Create(JoinPath(dir_, "once"), true).ok());
  EXPECT_EQ(fs_.Create(JoinPath(dir_, "once"), true).status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(fs_.Delete(JoinPath(dir_, "missing")).code(), StatusCode::kNotFound);
}

// Writes `n` bytes of a pattern that differs at every offset (mod 251) to `path`.
std::string WritePattern(Storage& fs, const std::string& path, size_t n, uint8_t seed) {
  std::string bytes(n, '\0');
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<char>((i + seed) % 251);
  EXPECT_TRUE(WriteFileAtomically(fs, path, AsBytes(bytes)).ok());
  return bytes;
}

std::string Text(const AlignedBuffer& b) { return std::string(reinterpret_cast<const char*>(b.data()), b.size()); }

// More files than one io_uring batch (64), from 1 byte to 200 KB: tails of part of a file and of a
// whole file, heads of 0 to 4 bytes. Each file's ends come back byte-equal; a missing file, one
// shorter than its size says, a directory and ends larger than the file fail alone.
TEST_F(LocalStorageTest, ReadFileEndsReadsEachFilesEndsAndFailsFilesAlone) {
  if (fs_.ReadFileEnds({}).code() == StatusCode::kUnsupported) GTEST_SKIP() << "no batched reads on this storage";
  std::vector<FileEnds> ends;
  std::vector<std::string> contents;
  for (size_t i = 0; i < 150; ++i) {
    const size_t n = 1 + (i * 7919) % 200000;
    const std::string path = JoinPath(dir_, "f" + std::to_string(i));
    contents.push_back(WritePattern(fs_, path, n, static_cast<uint8_t>(i)));
    FileEnds& e = ends.emplace_back();
    e.path = path;
    e.size = n;
    e.tail_bytes = std::min<uint64_t>(n, 65536);
    e.head_bytes = i % 3 == 0 ? 0 : std::min<uint64_t>(n, 4);
  }
  ends[10].path = JoinPath(dir_, "missing");
  ends[20].size += 100;  // the file is shorter than the log says
  ends[20].tail_bytes = std::min<uint64_t>(ends[20].size, 65536);
  ends[30].path = dir_;  // a directory
  ends[30].size = 4096;
  ends[30].tail_bytes = 100;
  ends[40].tail_bytes = ends[40].size + 1;  // more than the file holds
  ASSERT_TRUE(fs_.ReadFileEnds(ends).ok());
  for (size_t i = 0; i < ends.size(); ++i) {
    const FileEnds& e = ends[i];
    if (i == 10) {
      EXPECT_EQ(e.status.code(), StatusCode::kNotFound) << e.status.ToString();
      EXPECT_NE(e.status.message().find("missing"), std::string::npos) << e.status.ToString();
    } else if (i == 20) {
      EXPECT_EQ(e.status.code(), StatusCode::kIOError) << e.status.ToString();
      EXPECT_NE(e.status.message().find("shorter than"), std::string::npos) << e.status.ToString();
    } else if (i == 30) {
      EXPECT_FALSE(e.status.ok());
    } else if (i == 40) {
      EXPECT_EQ(e.status.code(), StatusCode::kInvalidArgument) << e.status.ToString();
    } else {
      ASSERT_TRUE(e.status.ok()) << i << ": " << e.status.ToString();
      EXPECT_EQ(Text(e.tail), contents[i].substr(contents[i].size() - e.tail_bytes)) << i;
      EXPECT_EQ(Text(e.head), contents[i].substr(0, e.head_bytes)) << i;
    }
  }
}

// Batches from many threads at once (each has its own ring), again and again: every byte right.
TEST_F(LocalStorageTest, ReadFileEndsFromManyThreads) {
  if (fs_.ReadFileEnds({}).code() == StatusCode::kUnsupported) GTEST_SKIP() << "no batched reads on this storage";
  std::vector<std::string> contents;
  for (size_t i = 0; i < 40; ++i) {
    contents.push_back(WritePattern(fs_, JoinPath(dir_, "g" + std::to_string(i)), 100 + i * 1000, static_cast<uint8_t>(i)));
  }
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) {
        std::vector<FileEnds> ends(contents.size());
        for (size_t i = 0; i < ends.size(); ++i) {
          ends[i].path = JoinPath(dir_, "g" + std::to_string(i));
          ends[i].size = contents[i].size();
          ends[i].tail_bytes = std::min<uint64_t>(ends[i].size, 512 + t * 100);
          ends[i].head_bytes = 4;
        }
        if (!fs_.ReadFileEnds(ends).ok()) ++bad;
        for (size_t i = 0; i < ends.size(); ++i) {
          if (!ends[i].status.ok() || Text(ends[i].tail) != contents[i].substr(contents[i].size() - ends[i].tail_bytes) ||
              Text(ends[i].head) != contents[i].substr(0, 4)) {
            ++bad;
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

// A file opened at its first read: nothing opened before (a missing file is no error until then),
// then reads as the file, and a failed open fails every read.
TEST_F(LocalStorageTest, OpenOnFirstReadOpensAtTheFirstRead) {
  const std::string path = JoinPath(dir_, "later");
  auto file = OpenOnFirstRead(std::shared_ptr<Storage>(&fs_, [](Storage*) {}), path, 1000, false);
  EXPECT_EQ(file->size(), 1000u);
  EXPECT_EQ(file->path(), path);
  EXPECT_FALSE(file->remote());
  const std::string bytes = WritePattern(fs_, path, 1000, 7);  // created after the file object
  std::string got(10, '\0');
  ASSERT_TRUE(file->ReadAt(990, MutableByteView(reinterpret_cast<uint8_t*>(got.data()), 10)).ok());
  EXPECT_EQ(got, bytes.substr(990));
  auto missing = OpenOnFirstRead(std::shared_ptr<Storage>(&fs_, [](Storage*) {}), JoinPath(dir_, "none"), 10, false);
  for (int i = 0; i < 2; ++i) {
    Status st = missing->ReadAt(0, MutableByteView(reinterpret_cast<uint8_t*>(got.data()), 4));
    EXPECT_EQ(st.code(), StatusCode::kNotFound) << st.ToString();
  }
}

TEST(JoinPath, PutsExactlyOneSlash) {
  EXPECT_EQ(JoinPath("a", "b"), "a/b");
  EXPECT_EQ(JoinPath("a/", "b"), "a/b");
  EXPECT_EQ(JoinPath("a/", "/b"), "a/b");
  EXPECT_EQ(JoinPath("", "b"), "b");
}

}  // namespace
}  // namespace stoke

namespace stoke {
namespace {

TEST_F(LocalStorageTest, PutIfAbsentLetsExactlyOneWriterWin) {
  const std::string p = JoinPath(dir_, "00000000000000000001.json");
  ASSERT_TRUE(fs_.PutIfAbsent(p, AsBytes("first")).ok());
  Status s = fs_.PutIfAbsent(p, AsBytes("second"));
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists) << s.ToString();
  EXPECT_EQ(*ReadFileToString(fs_, p), "first");
  auto list = fs_.List(dir_);
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), 1u);  // no temporary files left behind
}

TEST_F(LocalStorageTest, PublishIfAbsentLinksAWrittenFileOrLeavesIt) {
  auto write = [&](const std::string& path, const std::string& text) {
    auto f = fs_.Create(path, /*exclusive=*/true);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    ASSERT_TRUE((*f)->Append(AsBytes(text)).ok());
    ASSERT_TRUE((*f)->Sync().ok());
    ASSERT_TRUE((*f)->Close().ok());
  };
  const std::string p = JoinPath(dir_, "00000000000000000001.json");
  const std::string a = JoinPath(dir_, ".a.tmp"), b = JoinPath(dir_, ".b.tmp");
  write(a, "first");
  write(b, "second");
  ASSERT_TRUE(fs_.PublishIfAbsent(a, p).ok());
  EXPECT_FALSE(fs_.Stat(a).ok());  // published: the temporary name is gone
  Status s = fs_.PublishIfAbsent(b, p);
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists) << s.ToString();
  EXPECT_EQ(*ReadFileToString(fs_, p), "first");
  EXPECT_EQ(*ReadFileToString(fs_, b), "second");  // left for the caller to publish elsewhere
  const std::string q = JoinPath(dir_, "00000000000000000002.json");
  ASSERT_TRUE(fs_.PublishIfAbsent(b, q).ok());
  EXPECT_EQ(*ReadFileToString(fs_, q), "second");
  // The default (read + PutIfAbsent + delete), as object stores use it, behaves the same.
  write(a, "third");
  const std::string r = JoinPath(dir_, "00000000000000000003.json");
  ASSERT_TRUE(fs_.Storage::PublishIfAbsent(a, r).ok());
  EXPECT_EQ(*ReadFileToString(fs_, r), "third");
  EXPECT_FALSE(fs_.Stat(a).ok());
  write(a, "fourth");
  EXPECT_EQ(fs_.Storage::PublishIfAbsent(a, r).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(*ReadFileToString(fs_, a), "fourth");
}

TEST_F(LocalStorageTest, SyncFilesSyncsFewOrManyFilesAndNamesAMissingOne) {
  std::vector<std::string> few, many;
  for (int i = 0; i < 300; ++i) {
    const std::string p = JoinPath(dir_, "f" + std::to_string(i));
    auto f = fs_.Create(p);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    ASSERT_TRUE((*f)->Append(AsBytes("x")).ok());
    ASSERT_TRUE((*f)->Close().ok());
    (i < 3 ? few : many).push_back(p);
  }
  EXPECT_TRUE(fs_.SyncFiles({}).ok());
  EXPECT_TRUE(fs_.SyncFiles(few).ok());   // one fdatasync each
  EXPECT_TRUE(fs_.SyncFiles(many).ok());  // one syncfs for the file system
  few.push_back(JoinPath(dir_, "missing"));
  Status s = fs_.SyncFiles(few);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("missing"), std::string::npos) << s.ToString();
  // Many files in a directory that is gone: the error names it.
  many.push_back(JoinPath(dir_, "gone/f"));
  s = fs_.SyncFiles(many);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("gone"), std::string::npos) << s.ToString();
}

TEST_F(LocalStorageTest, PutIfAbsentRacesHaveOneWinner) {
  for (int round = 0; round < 20; ++round) {
    const std::string p = JoinPath(dir_, "v" + std::to_string(round));
    std::atomic<int> wins{0}, losses{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        Status s = fs_.PutIfAbsent(p, AsBytes(std::string(1000, static_cast<char>('a' + t))));
        (s.ok() ? wins : losses)++;
        if (!s.ok()) {
          EXPECT_EQ(s.code(), StatusCode::kAlreadyExists);
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(wins.load(), 1);
    EXPECT_EQ(losses.load(), 3);
    auto content = *ReadFileToString(fs_, p);
    EXPECT_EQ(content.size(), 1000u);
    EXPECT_EQ(content.find_first_not_of(content[0]), std::string::npos);  // one writer's bytes, whole
  }
}

}  // namespace
}  // namespace stoke
