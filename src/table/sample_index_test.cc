#include "table/sample_index.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <thread>

#include "format/codec.h"
#include "format/parquet_metadata.h"
#include "format/parquet_reader.h"
#include "io/storage.h"
#include "table/test_table.h"

namespace stoke {
namespace {

using testing_support::TensorOf;
using testing_support::TestColumns;
using testing_support::CommitAdds;
using testing_support::DropOffsetIndex;
using testing_support::TestTable;
using testing_support::WriteDataFile;

// Reads the page that `idx` names for `row` of its column `index_column` (column `file_column` of the
// data files) with one pread, parses and decompresses it, and returns the row's bytes (or an error
// text starting with "!").
std::string TensorAt(const SampleIndex& idx, int64_t row, size_t index_column = 0, size_t file_column = 3) {
  const SampleIndex::Location loc = idx.Find(row, index_column);
  if (loc.needs_decode) return "!needs decode";
  const std::string& path = idx.FilePath(loc.file);
  static std::map<std::pair<std::string, size_t>, parquet::Codec> codecs;
  const auto key = std::make_pair(path, file_column);
  if (!codecs.count(key)) {
    auto reader = ParquetReader::Open(LocalStorage(), path);
    if (!reader.ok()) return "!" + reader.status().ToString();
    codecs[key] = (*reader)->metadata().row_groups[0].columns[file_column].meta_data->codec;
  }
  std::string page(loc.length, '\0');
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return "!open";
  ssize_t got = ::pread(fd, page.data(), page.size(), static_cast<off_t>(loc.offset));
  ::close(fd);
  if (got != static_cast<ssize_t>(page.size())) return "!short read";
  parquet::PageHeader h;
  size_t consumed = 0;
  Status s = parquet::ParsePageHeader(AsBytes(page), path, loc.offset, &h, &consumed);
  if (!s.ok()) return "!" + s.ToString();
  if (h.type != parquet::PageType::kDataPage || !h.data_page_header) return "!not a data page";
  if (consumed + h.compressed_page_size != page.size()) return "!page length disagrees with its header";
  if (h.data_page_header->num_values != static_cast<int32_t>(loc.rows_in_page)) return "!rows_in_page disagrees";
  if (loc.row_in_page >= loc.rows_in_page) return "!row_in_page out of range";
  ByteView stored = AsBytes(page).subspan(consumed);
  if (h.crc && static_cast<uint32_t>(*h.crc) != Crc32(stored)) return "!CRC";
  std::string body(h.uncompressed_page_size, '\0');
  s = Decompress(codecs[key], stored, MutableByteView(reinterpret_cast<uint8_t*>(body.data()), body.size()));
  if (!s.ok()) return "!" + s.ToString();
  size_t pos = 0;
  for (uint32_t k = 0;; ++k) {
    if (body.size() - pos < 4) return "!value not in page";
    uint32_t n = LoadLE<uint32_t>(reinterpret_cast<const uint8_t*>(body.data() + pos));
    pos += 4;
    if (n > body.size() - pos) return "!value runs past the page";
    if (k == loc.row_in_page) return body.substr(pos, n);
    pos += n;
  }
}

void ExpectEveryRowLocated(const SampleIndex& idx, int64_t rows) {
  ASSERT_EQ(idx.num_rows(), rows);
  ASSERT_EQ(idx.tensor_columns(), std::vector<std::string>{"t"});
  for (int64_t r = 0; r < rows; ++r) {
    ASSERT_EQ(TensorAt(idx, r), TensorOf(r)) << "row " << r;
  }
}

std::string CacheBytes(const TestTable& t, int64_t version) {
  auto s = ReadFileToString(LocalStorage(), SampleIndex::CachePath(t.dir(), version));
  return s.ok() ? *s : std::string();
}
void WriteCache(const TestTable& t, int64_t version, const std::string& bytes) {
  ASSERT_TRUE(WriteFileAtomically(LocalStorage(), SampleIndex::CachePath(t.dir(), version), AsBytes(bytes)).ok());
}

// Recomputes both CRCs of a cache image (offsets from the layout in sample_index.h), so tests can
// reach the semantic checks behind them.
void FixCrcs(std::string* bytes) {
  auto* b = reinterpret_cast<uint8_t*>(bytes->data());
  StoreLE<uint32_t>(b + 120, Crc32(ByteView(b + 128, bytes->size() - 128)));
  StoreLE<uint32_t>(b + 124, Crc32(ByteView(b, 124)));
}

// Three files: one row group of 1,000 rows; four row groups of 500; one row group of 10,000 rows
// (several 64 KiB pages).
int64_t MakeThreeFileTable(TestTable& t) {
  t.AppendFile(0, 1000, 1000);
  t.AppendFile(1000, 2000, 500);
  return t.AppendFile(3000, 10000, 10000);
}

TEST(SampleIndex, LocatesEveryRowsPage) {
  TestTable t;
  const int64_t v = MakeThreeFileTable(t);
  auto idx = SampleIndex::Open(t.dir());
  ASSERT_TRUE(idx.ok()) << idx.status().ToString();
  EXPECT_EQ(idx->version(), v);
  EXPECT_FALSE(idx->from_cache());
  EXPECT_EQ(idx->num_files(), 3u);
  ExpectEveryRowLocated(*idx, 13000);
  // File boundaries and file-relative rows.
  EXPECT_EQ(idx->Find(999, 0).file, 0u);
  EXPECT_EQ(idx->Find(1000, 0).file, 1u);
  EXPECT_EQ(idx->Find(1000, 0).row_in_file, 0);
  EXPECT_EQ(idx->Find(12999, 0).row_in_file, 9999);
  EXPECT_EQ(idx->FilePath(2), t.dir() + "/part-3000.parquet");
  EXPECT_EQ(idx->file_size(2), std::filesystem::file_size(idx->FilePath(2)));
  // The 10,000-row group spans several pages.
  EXPECT_NE(idx->Find(3000, 0).offset, idx->Find(12999, 0).offset);
  EXPECT_LT(idx->Find(3000, 0).rows_in_page, 10000u);
}

// A table of more files than one batch of footer reads (64), small ones read whole and larger ones
// (rows of 40 KiB: files over the 64 KiB read ahead, whose leading magic comes with the batch),
// including files the batch cannot serve: one whose size in the log is larger than the file (a
// short read) and one whose log size is smaller (the tail read ends before the file's trailer).
// Each of those is read again alone; every row is located, as in a table without them.
TEST(SampleIndex, FootersReadInBatchesAndFilesTheBatchCannotServe) {
  for (const int64_t tensor_len : {int64_t{16}, int64_t{40 << 10}}) {
    TestTable t(tensor_len);
    std::vector<delta::AddFile> adds;
    for (int64_t i = 0; i < 150; ++i) {
      adds.push_back(WriteDataFile(t.dir(), "part-" + std::to_string(i) + ".parquet", i * 2, 2, 1000, tensor_len));
    }
    adds[7].size += 10;
    adds[100].size -= 3;
    CommitAdds(t, adds);
    SampleIndex::Options options;
    options.use_cache = false;
    auto idx = SampleIndex::Open(t.dir(), std::nullopt, options);
    ASSERT_TRUE(idx.ok()) << idx.status().ToString();
    EXPECT_EQ(idx->num_files(), 150u);
    ASSERT_EQ(idx->num_rows(), 300);
    for (int64_t r = 0; r < 300; ++r) {
      const SampleIndex::Location loc = idx->Find(r, 0);
      ASSERT_EQ(loc.file, static_cast<size_t>(r / 2)) << r;
      ASSERT_EQ(TensorAt(*idx, r), TensorOf(r, tensor_len)) << "row " << r;
    }
  }
}

// A missing data file fails the build with an error naming it, as when footers are read one by one.
TEST(SampleIndex, MissingDataFileAmongManyIsNamed) {
  TestTable t;
  std::vector<delta::AddFile> adds;
  for (int64_t i = 0; i < 80; ++i) adds.push_back(WriteDataFile(t.dir(), "p" + std::to_string(i) + ".parquet", i, 1, 1));
  CommitAdds(t, adds);
  std::filesystem::remove(t.dir() + "/p70.parquet");
  SampleIndex::Options options;
  options.use_cache = false;
  auto idx = SampleIndex::Open(t.dir(), std::nullopt, options);
  ASSERT_FALSE(idx.ok());
  EXPECT_EQ(idx.status().code(), StatusCode::kNotFound) << idx.status().ToString();
  EXPECT_NE(idx.status().message().find("p70.parquet"), std::string::npos) << idx.status().ToString();
}

// FindMany answers as Find does, for rows in any order (repeated, across files and pages).
TEST(SampleIndex, FindManyAnswersAsFindDoes) {
  TestTable t;
  MakeThreeFileTable(t);
  auto idx = SampleIndex::Open(t.dir());
  ASSERT_TRUE(idx.ok()) << idx.status().ToString();
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < 13000; i += 7) rows.push_back((i * 7919) % 13000);
  rows.push_back(0);
  rows.push_back(12999);
  rows.push_back(12999);
  std::vector<SampleIndex::Location> many(rows.size());
  idx->FindMany(rows.data(), rows.size(), 0, many.data());
  for (size_t i = 0; i < rows.size(); ++i) {
    const SampleIndex::Location one = idx->Find(rows[i], 0);
    EXPECT_EQ(many[i].file, one.file) << rows[i];
    EXPECT_EQ(many[i].offset, one.offset) << rows[i];
    EXPECT_EQ(many[i].length, one.length) << rows[i];
    EXPECT_EQ(many[i].row_in_page, one.row_in_page) << rows[i];
    EXPECT_EQ(many[i].rows_in_page, one.rows_in_page) << rows[i];
    EXPECT_EQ(many[i].row_in_file, one.row_in_file) << rows[i];
    EXPECT_EQ(many[i].codec, one.codec) << rows[i];
  }
  idx->FindMany(rows.data(), 0, 0, many.data());  // nothing to find
}

// A blob column (encoded images: values of any length, one per page) is indexed page per row as a
// tensor column is, so that the loader can read one image with one read.
TEST(SampleIndex, IndexesBlobColumnsPagePerRow) {
  TestTable t;
  const std::vector<ColumnSpec> cols = {{.name = "id", .type = parquet::Type::kInt64},
                                        {.name = "image", .type = parquet::Type::kByteArray, .blob = true}};
  std::vector<std::string> values;
  auto w = ParquetFileWriter::Create(LocalStorage(), t.dir() + "/part-0.parquet", cols, WriterOptions{});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  RowGroupEncoder enc((*w)->columns(), (*w)->options());
  for (int g = 0; g < 3; ++g) {
    std::vector<int64_t> ids;
    for (int r = 0; r < 40; ++r) {
      const int64_t id = g * 40 + r;
      values.push_back(TensorOf(id, 10 + id * 37));  // a different length per row
      ASSERT_TRUE(enc.AppendTensor(1, AsBytes(values.back())).ok());
      ids.push_back(id);
    }
    ASSERT_TRUE(enc.SetScalars(0, ColumnValues{ids, {}}).ok());
    auto rg = enc.Finish();
    ASSERT_TRUE(rg.ok()) << rg.status().ToString();
    ASSERT_TRUE((*w)->WriteRowGroup(std::move(*rg)).ok());
  }
  ASSERT_TRUE((*w)->Close().ok());
  delta::AddFile add;
  add.path = "part-0.parquet";
  add.size = static_cast<int64_t>((*w)->bytes_written());
  add.stats = delta::StatsJsonFromFooter((*w)->metadata(), cols);
  delta::Metadata m;
  m.id = "00000000-0000-4000-8000-000000000001";
  m.schema_string = delta::SchemaToSparkJson(cols);
  m.configuration[kBlobsMetadataKey] = BlobColumnsToJson(cols);
  auto v = t.log().Commit(-1, {delta::Protocol{}, m, add}, delta::CommitKind::kExclusive, "WRITE", nlohmann::json::object());
  ASSERT_TRUE(v.ok()) << v.status().ToString();

  for (bool cached : {false, true}) {
    auto idx = SampleIndex::Open(t.dir());
    ASSERT_TRUE(idx.ok()) << idx.status().ToString();
    EXPECT_EQ(idx->from_cache(), cached);
    ASSERT_EQ(idx->tensor_columns(), std::vector<std::string>{"image"});
    ASSERT_EQ(idx->num_rows(), 120);
    for (int64_t r = 0; r < 120; ++r) {
      const SampleIndex::Location loc = idx->Find(r, 0);
      EXPECT_FALSE(loc.needs_decode);
      EXPECT_EQ(loc.rows_in_page, 1u);
      EXPECT_EQ(loc.row_in_file, r);
      ASSERT_EQ(TensorAt(*idx, r, 0, 1), values[static_cast<size_t>(r)]) << "row " << r;
    }
  }
}

TEST(SampleIndex, SecondOpenComesFromTheCache) {
  TestTable t;
  MakeThreeFileTable(t);
  auto first = SampleIndex::Open(t.dir());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_FALSE(first->from_cache());
  EXPECT_TRUE(std::filesystem::exists(SampleIndex::CachePath(t.dir(), 2)));
  EXPECT_TRUE(SampleIndex::ValidateCache(AsBytes(CacheBytes(t, 2))).ok());
  auto second = SampleIndex::Open(t.dir());
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_TRUE(second->from_cache());
  EXPECT_EQ(second->version(), 2);
  for (uint32_t f = 0; f < 3; ++f) EXPECT_EQ(second->FilePath(f), first->FilePath(f));
  for (int64_t r = 0; r < 13000; ++r) {
    auto a = first->Find(r, 0), b = second->Find(r, 0);
    ASSERT_TRUE(a.file == b.file && a.offset == b.offset && a.length == b.length && a.row_in_page == b.row_in_page &&
                a.rows_in_page == b.rows_in_page && a.row_in_file == b.row_in_file)
        << "row " << r;
  }
  ExpectEveryRowLocated(*second, 13000);
  // use_cache = false builds again.
  auto rebuilt = SampleIndex::Open(t.dir(), std::nullopt, {.use_cache = false});
  ASSERT_TRUE(rebuilt.ok());
  EXPECT_FALSE(rebuilt->from_cache());
}

TEST(SampleIndex, OlderVersionsHaveTheirOwnIndex) {
  TestTable t;
  MakeThreeFileTable(t);
  auto v0 = SampleIndex::Open(t.dir(), 0);
  ASSERT_TRUE(v0.ok()) << v0.status().ToString();
  EXPECT_EQ(v0->num_rows(), 1000);
  auto v2 = SampleIndex::Open(t.dir(), 2);
  ASSERT_TRUE(v2.ok());
  EXPECT_EQ(v2->num_rows(), 13000);
  auto again = SampleIndex::Open(t.dir(), 0);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->from_cache());
  EXPECT_EQ(again->num_rows(), 1000);
}

TEST(SampleIndex, CacheOfAnotherVersionIsNotUsed) {
  TestTable t;
  MakeThreeFileTable(t);
  ASSERT_TRUE(SampleIndex::Open(t.dir(), 1).ok());  // writes the cache of version 1
  WriteCache(t, 2, CacheBytes(t, 1));                // ...and puts it where version 2's belongs
  auto idx = SampleIndex::Open(t.dir(), 2);
  ASSERT_TRUE(idx.ok()) << idx.status().ToString();
  EXPECT_FALSE(idx->from_cache());
  EXPECT_EQ(idx->version(), 2);
  ExpectEveryRowLocated(*idx, 13000);
  // Rewritten with the right contents.
  auto cached = SampleIndex::Open(t.dir(), 2);
  ASSERT_TRUE(cached.ok());
  EXPECT_TRUE(cached->from_cache());
  EXPECT_EQ(cached->num_rows(), 13000);
}

TEST(SampleIndex, TableRecreatedAtTheSameVersionDoesNotReuseTheCache) {
  TestTable t;
  t.AppendFile(0, 100, 100);
  ASSERT_TRUE(SampleIndex::Open(t.dir()).ok());
  const std::string stale = CacheBytes(t, 0);
  // Recreate the table at version 0 with other contents, keeping the old cache.
  std::filesystem::remove_all(t.dir() + "/_delta_log");
  std::filesystem::remove(t.dir() + "/part-0.parquet");
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  t.AppendFile(0, 300, 100);
  WriteCache(t, 0, stale);
  auto idx = SampleIndex::Open(t.dir());
  ASSERT_TRUE(idx.ok()) << idx.status().ToString();
  EXPECT_FALSE(idx->from_cache());
  ExpectEveryRowLocated(*idx, 300);
}

TEST(SampleIndex, CorruptCacheIsRebuilt) {
  TestTable t;
  MakeThreeFileTable(t);
  ASSERT_TRUE(SampleIndex::Open(t.dir()).ok());
  const std::string good = CacheBytes(t, 2);
  ASSERT_GT(good.size(), 128u);

  std::vector<std::pair<std::string, std::string>> cases;
  cases.push_back({"empty", ""});
  cases.push_back({"garbage", std::string(4096, '\x5a')});
  cases.push_back({"magic only", "STKIDX01"});
  for (size_t len : {size_t{7}, size_t{127}, size_t{128}, good.size() / 2, good.size() - 1}) {
    cases.push_back({"truncated to " + std::to_string(len), good.substr(0, len)});
  }
  cases.push_back({"extended", good + std::string(8, '\0')});
  // Every header byte, and about 60 bytes spread over the body (each case rebuilds and rewrites).
  const size_t body_stride = std::max<size_t>(97, (good.size() - 128) / 60);
  for (size_t i = 0; i < good.size(); i += (i < 128 ? 1 : body_stride)) {
    std::string b = good;
    b[i] = static_cast<char>(b[i] ^ 0x10);
    cases.push_back({"byte " + std::to_string(i) + " flipped", b});
  }
  for (const auto& [what, bytes] : cases) {
    SCOPED_TRACE(what);
    EXPECT_FALSE(SampleIndex::ValidateCache(AsBytes(bytes)).ok());
    WriteCache(t, 2, bytes);
    auto idx = SampleIndex::Open(t.dir());
    ASSERT_TRUE(idx.ok()) << idx.status().ToString();
    EXPECT_FALSE(idx->from_cache());
    ASSERT_EQ(idx->num_rows(), 13000);
    for (int64_t r : {0, 999, 1000, 2999, 3000, 8000, 12999}) ASSERT_EQ(TensorAt(*idx, r), TensorOf(r)) << "row " << r;
    EXPECT_EQ(CacheBytes(t, 2), good);  // rewritten
  }
  auto idx = SampleIndex::Open(t.dir());
  ASSERT_TRUE(idx.ok());
  EXPECT_TRUE(idx->from_cache());
  ExpectEveryRowLocated(*idx, 13000);
}

TEST(SampleIndex, ValidateCacheChecksEntriesBehindAValidCrc) {
  TestTable t;
  MakeThreeFileTable(t);
  ASSERT_TRUE(SampleIndex::Open(t.dir()).ok());
  const std::string good = CacheBytes(t, 2);
  auto b = [&](const std::string& s) { return reinterpret_cast<const uint8_t*>(s.data()); };
  const uint64_t num_files = LoadLE<uint32_t>(b(good) + 32), num_pages = LoadLE<uint64_t>(b(good) + 40);
  const uint64_t pages_off = LoadLE<uint64_t>(b(good) + 64), rows_off = LoadLE<uint64_t>(b(good) + 72);
  ASSERT_GT(num_pages, 2u);
  auto mutated = [&](auto&& edit) {
    std::string s = good;
    edit(reinterpret_cast<uint8_t*>(s.data()));
    FixCrcs(&s);
    return s;
  };
  std::vector<std::pair<std::string, std::string>> cases = {
      {"row names another page", mutated([&](uint8_t* p) { StoreLE<uint32_t>(p + rows_off + 4 * 5, 1); })},
      {"row names no page", mutated([&](uint8_t* p) { StoreLE<uint32_t>(p + rows_off, 0xffffffff); })},
      {"page file out of range", mutated([&](uint8_t* p) { StoreLE<uint32_t>(p + pages_off + 16, num_files); })},
      {"page past its file", mutated([&](uint8_t* p) { StoreLE<uint64_t>(p + pages_off, 1ull << 40); })},
      {"page length 0", mutated([&](uint8_t* p) { StoreLE<uint32_t>(p + pages_off + 20, 0); })},
      {"page rows changed", mutated([&](uint8_t* p) { StoreLE<uint32_t>(p + pages_off + 24, 999); })},
      {"unknown flag", mutated([&](uint8_t* p) { StoreLE<uint32_t>(p + pages_off + 28, 4); })},
      {"levels flag on a needs-decode page", mutated([&](uint8_t* p) { StoreLE<uint32_t>(p + pages_off + 28, 3); })},
      {"rows count huge", mutated([&](uint8_t* p) { StoreLE<uint64_t>(p + 24, 1ull << 62); })},
      {"pages count huge", mutated([&](uint8_t* p) { StoreLE<uint64_t>(p + 40, ~0ull); })},
      {"file rows changed", mutated([&](uint8_t* p) { StoreLE<uint64_t>(p + 128 + 16, 1001); })},
      {"path past strings", mutated([&](uint8_t* p) { StoreLE<uint64_t>(p + 128 + 24, 1ull << 40); })},
      {"format version", mutated([&](uint8_t* p) { StoreLE<uint32_t>(p + 8, 3); })},
      {"old format version", mutated([&](uint8_t* p) { StoreLE<uint32_t>(p + 8, 1); })},
      {"unknown codec", mutated([&](uint8_t* p) { StoreLE<uint32_t>(p + pages_off + 28, 200u << 8); })},
  };
  for (const auto& [what, bytes] : cases) {
    SCOPED_TRACE(what);
    EXPECT_FALSE(SampleIndex::ValidateCache(AsBytes(bytes)).ok());
    WriteCache(t, 2, bytes);
    auto idx = SampleIndex::Open(t.dir());
    ASSERT_TRUE(idx.ok()) << idx.status().ToString();
    EXPECT_FALSE(idx->from_cache());
    for (int64_t r : {0, 5, 1000, 12999}) ASSERT_EQ(TensorAt(*idx, r), TensorOf(r)) << "row " << r;
  }
}

TEST(SampleIndex, FileWithoutOffsetIndexGetsAPageMapFromItsPageHeaders) {
  TestTable t;
  std::vector<delta::AddFile> adds = {WriteDataFile(t.dir(), "a.parquet", 0, 700, 300),
                                      WriteDataFile(t.dir(), "b.parquet", 700, 500, 200),
                                      WriteDataFile(t.dir(), "c.parquet", 1200, 100, 100)};
  // b's pages as its OffsetIndexes list them, before the indexes are dropped.
  std::vector<parquet::PageLocation> listed;  // file-relative first rows
  {
    auto b = ParquetReader::Open(LocalStorage(), t.dir() + "/b.parquet");
    ASSERT_TRUE(b.ok());
    for (int g = 0; g < (*b)->num_row_groups(); ++g) {
      auto oi = (*b)->ReadOffsetIndex(g, 3);
      ASSERT_TRUE(oi.ok() && oi->has_value());
      for (auto loc : (*oi)->page_locations) {
        loc.first_row_index += (*b)->row_group_starts()[g];
        listed.push_back(loc);
      }
    }
  }
  adds[1].size = DropOffsetIndex(t.dir() + "/b.parquet", 3);
  CommitAdds(t, adds);
  for (bool cached : {false, true}) {
    auto idx = SampleIndex::Open(t.dir());
    ASSERT_TRUE(idx.ok()) << idx.status().ToString();
    EXPECT_EQ(idx->from_cache(), cached);
    for (int64_t r = 0; r < 1300; ++r) {
      const auto loc = idx->Find(r, 0);
      ASSERT_FALSE(loc.needs_decode) << r;
      ASSERT_FALSE(loc.definition_levels) << r;
      ASSERT_EQ(TensorAt(*idx, r), TensorOf(r)) << r;
      if (r < 700 || r >= 1200) continue;
      // The walked page is the one the OffsetIndex listed.
      auto page = std::upper_bound(listed.begin(), listed.end(), r - 700, [](int64_t row, const parquet::PageLocation& p) {
                    return row < p.first_row_index;
                  }) - 1;
      EXPECT_EQ(loc.offset, static_cast<uint64_t>(page->offset)) << r;
      EXPECT_EQ(loc.length, static_cast<uint32_t>(page->compressed_page_size)) << r;
      EXPECT_EQ(loc.row_in_page, static_cast<uint32_t>(r - 700 - page->first_row_index)) << r;
    }
  }
}

TEST(SampleIndex, IncrementalBuildMapsFilesAnOlderIndexLeftToTheDecodePath) {
  TestTable t;
  std::vector<delta::AddFile> adds = {WriteDataFile(t.dir(), "b.parquet", 0, 500, 200)};
  adds[0].size = DropOffsetIndex(t.dir() + "/b.parquet", 3);
  CommitAdds(t, adds);
  auto v0 = SampleIndex::Open(t.dir(), std::nullopt, {.map_pages = false});
  ASSERT_TRUE(v0.ok());
  ASSERT_TRUE(v0->Find(10, 0).needs_decode);
  t.AppendFile(500, 100, 100);
  auto v1 = SampleIndex::Open(t.dir());
  ASSERT_TRUE(v1.ok()) << v1.status().ToString();
  for (int64_t r = 0; r < 600; ++r) {
    ASSERT_FALSE(v1->Find(r, 0).needs_decode) << r;
    ASSERT_EQ(TensorAt(*v1, r), TensorOf(r)) << r;
  }
}

TEST(SampleIndex, FileWithoutOffsetIndexNeedsDecodeWithoutAPageMap) {
  TestTable t;
  std::vector<delta::AddFile> adds = {WriteDataFile(t.dir(), "a.parquet", 0, 700, 300),
                                      WriteDataFile(t.dir(), "b.parquet", 700, 500, 200),
                                      WriteDataFile(t.dir(), "c.parquet", 1200, 100, 100)};
  adds[1].size = DropOffsetIndex(t.dir() + "/b.parquet", 3);
  CommitAdds(t, adds);
  for (bool cached : {false, true}) {
    auto idx = SampleIndex::Open(t.dir(), std::nullopt, {.map_pages = false});
    ASSERT_TRUE(idx.ok()) << idx.status().ToString();
    EXPECT_EQ(idx->from_cache(), cached);
    ASSERT_EQ(idx->num_rows(), 1300);
    auto b = ParquetReader::Open(LocalStorage(), t.dir() + "/b.parquet");
    ASSERT_TRUE(b.ok());
    for (int64_t r = 0; r < 1300; ++r) {
      const auto loc = idx->Find(r, 0);
      if (r >= 700 && r < 1200) {
        ASSERT_TRUE(loc.needs_decode) << r;
        EXPECT_EQ(loc.file, 1u);
        EXPECT_EQ(loc.length, 0u);
        EXPECT_EQ(loc.row_in_file, r - 700);
        EXPECT_EQ(loc.rows_in_page, 500u);  // b's row groups (200, 200, 100) in one record
        AlignedBuffer cell;
        ASSERT_TRUE((*b)->ReadBinaryCell(loc.row_in_file, 3, &cell).ok());
        ASSERT_EQ(AsChars(cell.view()), TensorOf(r)) << r;
      } else {
        ASSERT_FALSE(loc.needs_decode) << r;
        ASSERT_EQ(TensorAt(*idx, r), TensorOf(r)) << r;
      }
    }
  }
}

TEST(SampleIndex, ReadOnlyTableBuildsWithoutCaching) {
  TestTable t;
  MakeThreeFileTable(t);
  // A file where the _stoke directory should be: the cache cannot be written (as with a read-only
  // table, even when the tests run as root).
  ASSERT_TRUE(WriteFileAtomically(LocalStorage(), t.dir() + "/_stoke", AsBytes("x")).ok());
  for (int i = 0; i < 2; ++i) {
    auto idx = SampleIndex::Open(t.dir());
    ASSERT_TRUE(idx.ok()) << idx.status().ToString();
    EXPECT_FALSE(idx->from_cache());
    ExpectEveryRowLocated(*idx, 13000);
  }
  // write_cache = false writes nothing.
  TestTable u;
  u.AppendFile(0, 10, 10);
  auto idx = SampleIndex::Open(u.dir(), std::nullopt, {.write_cache = false});
  ASSERT_TRUE(idx.ok());
  EXPECT_FALSE(std::filesystem::exists(u.dir() + "/_stoke"));
}

TEST(SampleIndex, EmptyTableAndMissingTable) {
  TestTable t;
  CommitAdds(t, {});
  for (int i = 0; i < 2; ++i) {
    auto idx = SampleIndex::Open(t.dir());
    ASSERT_TRUE(idx.ok()) << idx.status().ToString();
    EXPECT_EQ(idx->num_rows(), 0);
    EXPECT_EQ(idx->num_files(), 0u);
    EXPECT_EQ(idx->from_cache(), i == 1);
  }
  TestTable none;
  EXPECT_EQ(SampleIndex::Open(none.dir()).status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(SampleIndex::Open(t.dir(), 5).ok());
}

// After an append, the new version's index reuses the previous version's index for the files it
// already holds: only the new file's footer is read (the others are moved away meanwhile), and the
// result is the index a build from scratch makes.
TEST(SampleIndex, IndexAfterAnAppendReadsOnlyTheNewFiles) {
  TestTable t;
  t.AppendFile(0, 300, 100);
  t.AppendFile(300, 200, 50);
  auto v1 = SampleIndex::Open(t.dir());
  ASSERT_TRUE(v1.ok()) << v1.status().ToString();
  const std::vector<std::string> old_files = {v1->FilePath(0), v1->FilePath(1)};
  t.AppendFile(500, 120, 40);
  for (const auto& f : old_files) std::filesystem::rename(f, f + ".away");
  auto v2 = SampleIndex::Open(t.dir());
  for (const auto& f : old_files) std::filesystem::rename(f + ".away", f);
  ASSERT_TRUE(v2.ok()) << v2.status().ToString();
  EXPECT_FALSE(v2->from_cache());
  ASSERT_EQ(v2->num_rows(), 620);
  auto scratch = SampleIndex::Open(t.dir(), std::nullopt, {.use_cache = false, .write_cache = false});
  ASSERT_TRUE(scratch.ok()) << scratch.status().ToString();
  ASSERT_EQ(scratch->num_files(), v2->num_files());
  for (uint32_t f = 0; f < v2->num_files(); ++f) {
    EXPECT_EQ(v2->FilePath(f), scratch->FilePath(f));
    EXPECT_EQ(v2->file_size(f), scratch->file_size(f));
    EXPECT_EQ(v2->file_first_row(f), scratch->file_first_row(f));
  }
  for (int64_t r = 0; r < 620; ++r) {
    const auto a = v2->Find(r, 0), b = scratch->Find(r, 0);
    ASSERT_EQ(a.file, b.file) << r;
    ASSERT_EQ(a.offset, b.offset) << r;
    ASSERT_EQ(a.length, b.length) << r;
    ASSERT_EQ(a.row_in_page, b.row_in_page) << r;
    ASSERT_EQ(a.rows_in_page, b.rows_in_page) << r;
    ASSERT_EQ(a.codec, b.codec) << r;
    ASSERT_EQ(TensorAt(*v2, r), TensorOf(r)) << r;
  }
  // The new version's index is cached as usual.
  auto again = SampleIndex::Open(t.dir());
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->from_cache());
}

// Opening every version in turn keeps the newest caches only: the current one and two older ones
// (the older ones serve incremental builds); an older version opened later is rebuilt and cached.
TEST(SampleIndex, OlderCachesArePrunedToTheNewestFew) {
  TestTable t;
  auto caches = [&] {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(t.dir() + "/_stoke/sample_index")) {
      names.push_back(e.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  };
  for (int64_t v = 0; v < 6; ++v) {
    ASSERT_EQ(t.AppendFile(v * 10, 10), v);
    auto idx = SampleIndex::Open(t.dir());
    ASSERT_TRUE(idx.ok()) << idx.status().ToString();
    EXPECT_EQ(idx->num_rows(), (v + 1) * 10);
    EXPECT_EQ(caches().size(), static_cast<size_t>(std::min<int64_t>(v + 1, 3))) << v;
  }
  EXPECT_EQ(caches(), (std::vector<std::string>{"00000000000000000003.idx", "00000000000000000004.idx",
                                                "00000000000000000005.idx"}));
  // Time travel to a pruned version: built again, correct, and cached; newer caches stay.
  auto v1 = SampleIndex::Open(t.dir(), 1);
  ASSERT_TRUE(v1.ok()) << v1.status().ToString();
  EXPECT_FALSE(v1->from_cache());
  EXPECT_EQ(v1->num_rows(), 20);
  for (int64_t r = 0; r < 20; ++r) ASSERT_EQ(TensorAt(*v1, r), TensorOf(r)) << r;
  EXPECT_EQ(caches().size(), 4u);
}

// A cached open reads the cache alone: with every data file gone, the index of 200,000 rows in 500
// files still opens from its cache and answers every row. (Its timing is a benchmark:
// bench/loader_open.sh.)
TEST(SampleIndex, CachedOpenOf200kRowsIn500FilesReadsNoDataFile) {
  TestTable t;
  std::vector<delta::AddFile> adds;
  for (int64_t f = 0; f < 500; ++f) {
    adds.push_back(WriteDataFile(t.dir(), "part-" + std::to_string(f) + ".parquet", f * 400, 400, 400));
  }
  CommitAdds(t, adds);
  auto built = SampleIndex::Open(t.dir());
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  ASSERT_FALSE(built->from_cache());
  std::vector<std::pair<int64_t, SampleIndex::Location>> want;
  for (int64_t r = 0; r < 200000; r += 997) want.push_back({r, built->Find(r, 0)});
  for (int64_t f = 0; f < 500; ++f) std::filesystem::remove(t.dir() + "/part-" + std::to_string(f) + ".parquet");
  auto cached = SampleIndex::Open(t.dir());
  ASSERT_TRUE(cached.ok()) << cached.status().ToString();
  ASSERT_TRUE(cached->from_cache());
  ASSERT_EQ(cached->num_rows(), 200000);
  for (const auto& [r, loc] : want) {
    const auto got = cached->Find(r, 0);
    ASSERT_EQ(got.file, loc.file) << r;
    ASSERT_EQ(got.offset, loc.offset) << r;
    ASSERT_EQ(got.length, loc.length) << r;
    ASSERT_EQ(got.row_in_page, loc.row_in_page) << r;
  }
  // Without the cache, the missing files are an error naming one.
  auto rebuilt = SampleIndex::Open(t.dir(), std::nullopt, {.use_cache = false, .write_cache = false});
  ASSERT_FALSE(rebuilt.ok());
  EXPECT_NE(rebuilt.status().message().find("part-"), std::string::npos) << rebuilt.status().ToString();
}

}  // namespace
}  // namespace stoke
