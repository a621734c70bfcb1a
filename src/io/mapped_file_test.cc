#include "io/mapped_file.h"

#include <gtest/gtest.h>
#include <isa-l/crc.h>
#include <unistd.h>

#include <csignal>
#include <string>
#include <thread>
#include <vector>

#include "io/local_files.h"
#include "io/storage.h"

namespace stoke {
namespace {

// Each test's files in a scratch directory of its own.
class MappedFileTest : public ::testing::Test {
 protected:
  // Writes `bytes` to the file `name` of the directory; returns its path.
  std::string Write(const std::string& bytes, const std::string& name = "f.bin") {
    const std::string path = JoinPath(dir_.path(), name);
    EXPECT_TRUE(WriteFileAtomically(LocalStorage(), path, AsBytes(bytes)).ok());
    return path;
  }
  TemporaryDirectory dir_ = TemporaryDirectory::Create("stoke_mapped_file_").value();
};
using MappedFileDeathTest = MappedFileTest;

TEST_F(MappedFileTest, MapsWholeFilesAndNamesWhatIsMissing) {
  const std::string file = Write("hello, mapping"), empty = Write("", "empty.bin");
  auto mapped = MappedFile::Open(file);
  ASSERT_TRUE(mapped.ok()) << mapped.status().ToString();
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(mapped->bytes().data()), mapped->bytes().size()), "hello, mapping");
  MappedFile other = std::move(*mapped);
  EXPECT_EQ(other.bytes().size(), 14u);
  EXPECT_EQ(mapped->bytes().size(), 0u);
  uint8_t byte = 0;
  EXPECT_FALSE(mapped->Copy(0, 1, &byte));  // moved from: nothing mapped
  EXPECT_FALSE(mapped->shrunk());

  auto none = MappedFile::Open(empty);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->bytes().size(), 0u);
  auto missing = MappedFile::Open(JoinPath(dir_.path(), "missing.bin"));
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("missing.bin"), std::string::npos);
  EXPECT_EQ(MappedFile::Open(dir_.path()).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(MappedFileTest, CopiesRangesAndRefusesThoseOutsideTheFile) {
  const std::string file = Write("0123456789");
  auto mapped = MappedFile::Open(file);
  ASSERT_TRUE(mapped.ok());
  std::string head(3, ' '), tail(4, ' ');
  ASSERT_TRUE(mapped->Copy(2, 3, reinterpret_cast<uint8_t*>(head.data()), 4, reinterpret_cast<uint8_t*>(tail.data())));
  EXPECT_EQ(head, "234");
  EXPECT_EQ(tail, "5678");
  ASSERT_TRUE(mapped->Copy(9, 1, reinterpret_cast<uint8_t*>(head.data())));
  EXPECT_EQ(head[0], '9');
  EXPECT_TRUE(mapped->Copy(10, 0, reinterpret_cast<uint8_t*>(head.data())));
  EXPECT_FALSE(mapped->Copy(8, 3, reinterpret_cast<uint8_t*>(tail.data())));
  EXPECT_FALSE(mapped->Copy(11, 0, reinterpret_cast<uint8_t*>(tail.data())));
  EXPECT_FALSE(mapped->Copy(~uint64_t{0}, 2, reinterpret_cast<uint8_t*>(tail.data())));
  EXPECT_FALSE(mapped->shrunk());
}

// With tail_crc, the tail's CRC-32 is taken in the copy, continuing from the value given (ISA-L's
// crc32_gzip_refl over the same bytes); a file cut under the copy fails it, in the CRC's pass too,
// and leaves the value as it was.
TEST_F(MappedFileTest, CopiesTakeTheTailsCrcAndSurviveACutInIt) {
  std::string bytes(6 * 4096, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 131 + i / 7);
  const std::string file = Write(bytes);
  auto mapped = MappedFile::Open(file);
  ASSERT_TRUE(mapped.ok());
  for (size_t tail_n : {size_t{0}, size_t{1}, size_t{255}, size_t{256}, size_t{5000}, size_t{4 * 4096}}) {
    std::vector<uint8_t> head(7), tail(tail_n);
    uint32_t crc = 9;
    ASSERT_TRUE(mapped->Copy(5, head.size(), head.data(), tail_n, tail.data(), &crc));
    EXPECT_EQ(std::string(tail.begin(), tail.end()), bytes.substr(12, tail_n));
    EXPECT_EQ(crc, crc32_gzip_refl(9, reinterpret_cast<uint8_t*>(bytes.data()) + 12, tail_n)) << tail_n;
  }
  // Cut 2,000 bytes into a tail whose CRC is folded into its copy: the fault stops the fold midway.
  ASSERT_EQ(::truncate(file.c_str(), 4096), 0);
  std::vector<uint8_t> head(16), tail(3 * 4096);
  uint32_t crc = 9;
  EXPECT_FALSE(mapped->Copy(4096 - 2000 - 16, head.size(), head.data(), tail.size(), tail.data(), &crc));
  EXPECT_EQ(crc, 9u);
  EXPECT_TRUE(mapped->shrunk());
}

// A file truncated under its mapping: the copies that reach past the new end fault (SIGBUS), which
// Copy catches, on every thread, and from then on every copy of the file fails at once.
TEST_F(MappedFileTest, ACopyOfAFileThatShrankUnderItFailsInsteadOfCrashing) {
  const std::string file = Write(std::string(4 * 4096, 'x'));
  auto mapped = MappedFile::Open(file);
  ASSERT_TRUE(mapped.ok());
  std::vector<uint8_t> out(4096);
  ASSERT_TRUE(mapped->Copy(3 * 4096, 4096, out.data()));
  ASSERT_EQ(::truncate(file.c_str(), 4096), 0);
  std::vector<std::thread> threads;
  std::vector<char> copied(4, 1);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<uint8_t> mine(100);
      copied[t] = mapped->Copy(2 * 4096 + 10 * t, mine.size(), mine.data());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(copied, std::vector<char>(4, 0));
  EXPECT_TRUE(mapped->shrunk());
  EXPECT_FALSE(mapped->Copy(0, 10, out.data()));  // what is left is not read through the mapping either
}

// The handler is for guarded copies only: any other bus error still ends the process.
TEST_F(MappedFileDeathTest, AnUnguardedFaultStillEndsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string file = Write(std::string(2 * 4096, 'x'));
  auto mapped = MappedFile::Open(file);
  ASSERT_TRUE(mapped.ok());
  ASSERT_EQ(::truncate(file.c_str(), 0), 0);
  const volatile uint8_t* bytes = mapped->bytes().data();
  EXPECT_DEATH({ [[maybe_unused]] uint8_t b = bytes[4096]; }, "");
}

TEST_F(MappedFileTest, SaysWhichPagesThePageCacheHolds) {
  const std::string file = Write(std::string(70 * 4096 + 5, 'x'));
  ASSERT_TRUE(LocalStorage().ReadFile(file).ok());  // every page in the page cache
  auto mapped = MappedFile::Open(file);
  ASSERT_TRUE(mapped.ok());
  EXPECT_TRUE(mapped->residency_known());  // the test owns the file
  std::vector<uint64_t> pages;
  ASSERT_TRUE(mapped->Resident(&pages));
  ASSERT_EQ(pages.size(), 2u);  // 71 pages
  EXPECT_EQ(pages[0], ~uint64_t{0});
  EXPECT_EQ(pages[1], (uint64_t{1} << 7) - 1);
}

}  // namespace
}  // namespace stoke
