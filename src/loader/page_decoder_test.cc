// DecodeSampleFromPage against real pages written by stoke's writer, taken out of the file through
// its OffsetIndex exactly as the loader fetches them.
#include "loader/page_decoder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/random.h"
#include "format/codec.h"
#include "format/parquet_encoding.h"
#include "format/parquet_metadata.h"
#include "format/parquet_reader.h"
#include "format/parquet_writer.h"

namespace stoke {
namespace {

using parquet::Codec;
using parquet::Encoding;
using parquet::PageType;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = std::filesystem::temp_directory_path() / "stoke_page_decoder_XXXXXX";
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// One page as the fetcher reads it: header + stored body, and the rows it holds.
struct FetchedPage {
  std::string bytes;
  uint32_t first_row = 0;  // in the file (one row group per file here)
  uint32_t rows = 0;
};

struct WrittenColumn {
  std::vector<std::string> rows;  // the source bytes of every row
  std::vector<FetchedPage> pages;
};

// A tensor at least 64 KiB (one row per page) and a small one (many rows per page).
const TensorSpec kLargeTensor{DType::kUInt8, {256, 257}};  // 65,792 bytes
const TensorSpec kSmallTensor{DType::kFloat32, {3, 5}};    // 60 bytes

// Writes `num_rows` rows of one tensor column in one row group, then slices every page out of the
// file bytes at the offsets its OffsetIndex gives.
WrittenColumn WriteAndFetchPages(const std::string& path, const TensorSpec& spec, Codec codec, int num_rows) {
  WrittenColumn out;
  std::vector<ColumnSpec> cols = {{.name = "t", .type = parquet::Type::kByteArray, .tensor = spec}};
  // The codec as given for every chunk, and small rows packed into pages: the decoder must handle
  // both layouts, whatever the writer's defaults.
  WriterOptions opts;
  opts.codec = codec;
  opts.min_codec_saving = 0;
  opts.small_tensor_page_bytes = 64 << 10;
  auto w = ParquetFileWriter::Create(LocalStorage(), path, cols, opts);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  if (!w.ok()) return out;
  RowGroupEncoder enc((*w)->columns(), (*w)->options());
  Rng rng(static_cast<uint64_t>(codec) * 1000 + static_cast<uint64_t>(spec.num_bytes()));
  for (int r = 0; r < num_rows; ++r) {
    // Half compressible (small values), half noise, so every codec has real work to do.
    std::string row(static_cast<size_t>(spec.num_bytes()), '\0');
    for (size_t i = 0; i < row.size(); ++i) {
      row[i] = static_cast<char>(i < row.size() / 2 ? rng.Next() % 4 : rng.Next());
    }
    EXPECT_TRUE(enc.AppendTensor(0, AsBytes(row)).ok());
    out.rows.push_back(std::move(row));
  }
  auto rg = enc.Finish();
  EXPECT_TRUE(rg.ok()) << rg.status().ToString();
  EXPECT_TRUE((*w)->WriteRowGroup(std::move(*rg)).ok());
  EXPECT_TRUE((*w)->Close().ok());

  auto reader = ParquetReader::Open(LocalStorage(), path);
  EXPECT_TRUE(reader.ok()) << reader.status().ToString();
  if (!reader.ok()) return out;
  auto oi = (*reader)->ReadOffsetIndex(0, 0);
  EXPECT_TRUE(oi.ok() && oi->has_value());
  if (!oi.ok() || !oi->has_value()) return out;
  std::ifstream f(path, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const auto& locs = (*oi)->page_locations;
  for (size_t p = 0; p < locs.size(); ++p) {
    FetchedPage page;
    page.bytes = file.substr(static_cast<size_t>(locs[p].offset), static_cast<size_t>(locs[p].compressed_page_size));
    page.first_row = static_cast<uint32_t>(locs[p].first_row_index);
    const int64_t end = p + 1 < locs.size() ? locs[p + 1].first_row_index : num_rows;
    page.rows = static_cast<uint32_t>(end - locs[p].first_row_index);
    out.pages.push_back(std::move(page));
  }
  return out;
}

Status Decode(const FetchedPage& page, Codec codec, uint32_t row_in_page, std::string* dest, AlignedBuffer* scratch,
              PageDecodeOptions options = {}) {
  return DecodeSampleFromPage(AsBytes(page.bytes), codec, row_in_page, page.rows,
                              MutableByteView(reinterpret_cast<uint8_t*>(dest->data()), dest->size()), scratch,
                              options, "t.parquet row " + std::to_string(page.first_row + row_in_page));
}

// Size of the header at the front of a page.
size_t HeaderSize(const std::string& page) {
  parquet::PageHeader h;
  size_t consumed = 0;
  EXPECT_TRUE(parquet::ParsePageHeader(AsBytes(page), "test", 0, &h, &consumed).ok());
  return consumed;
}

// A page with a hand-made header over `body` (CRC filled in).
std::string MakePage(parquet::PageHeader h, const std::string& body) {
  h.compressed_page_size = static_cast<int32_t>(body.size());
  h.crc = static_cast<int32_t>(Crc32(AsBytes(body)));
  std::string page;
  parquet::SerializePageHeader(h, &page);
  return page + body;
}

// A PLAIN body of `rows` values of `n` bytes each.
std::string PlainBody(uint32_t rows, size_t n) {
  std::string body;
  for (uint32_t r = 0; r < rows; ++r) {
    const uint32_t len = static_cast<uint32_t>(n);
    body.append(reinterpret_cast<const char*>(&len), 4);
    body.append(n, static_cast<char>('a' + r));
  }
  return body;
}

class PageDecoderCodecTest : public ::testing::TestWithParam<Codec> {
 protected:
  TempDir dir_;
};

TEST_P(PageDecoderCodecTest, DecodesEveryRowOfLargeAndSmallTensorPages) {
  const Codec codec = GetParam();
  for (const auto& [spec, rows] : {std::pair{kLargeTensor, 5}, std::pair{kSmallTensor, 3000}}) {
    WrittenColumn col = WriteAndFetchPages(dir_.File("t.parquet"), spec, codec, rows);
    ASSERT_FALSE(col.pages.empty());
    if (spec.num_bytes() >= (64 << 10)) {
      ASSERT_EQ(col.pages.size(), static_cast<size_t>(rows)) << "one row per page";
    } else {
      ASSERT_GT(col.pages.size(), 1u);
      ASSERT_GT(col.pages[0].rows, 1u) << "several rows per page";
    }
    AlignedBuffer scratch;
    std::string dest(static_cast<size_t>(spec.num_bytes()), '\0');
    for (int pass = 0; pass < 2; ++pass) {
      const uint8_t* scratch_before = scratch.data();
      for (const FetchedPage& page : col.pages) {
        for (uint32_t r = 0; r < page.rows; ++r) {
          Status s = Decode(page, codec, r, &dest, &scratch);
          ASSERT_TRUE(s.ok()) << s.ToString();
          ASSERT_EQ(dest, col.rows[page.first_row + r]) << "row " << page.first_row + r;
        }
      }
      // The second pass reuses the grown scratch buffer: no allocation in steady state.
      if (pass == 1) {
        EXPECT_EQ(scratch.data(), scratch_before);
      }
    }
    if (codec == Codec::kUncompressed) {
      EXPECT_EQ(scratch.capacity(), 0u) << "an uncompressed body is used in place";
    }
  }
}

TEST_P(PageDecoderCodecTest, FlippedBodyByteIsCrcMismatchNamingTheContext) {
  const Codec codec = GetParam();
  for (const auto& [spec, rows] : {std::pair{kLargeTensor, 2}, std::pair{kSmallTensor, 1200}}) {
    WrittenColumn col = WriteAndFetchPages(dir_.File("t.parquet"), spec, codec, rows);
    ASSERT_FALSE(col.pages.empty());
    FetchedPage page = col.pages.back();
    const size_t header = HeaderSize(page.bytes);
    page.bytes[header + (page.bytes.size() - header) / 2] ^= 0x10;
    AlignedBuffer scratch;
    std::string dest(static_cast<size_t>(spec.num_bytes()), '\0');
    Status s = Decode(page, codec, 0, &dest, &scratch);
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
    EXPECT_NE(s.message().find("CRC mismatch"), std::string::npos) << s.ToString();
    EXPECT_NE(s.message().find("t.parquet row " + std::to_string(page.first_row)), std::string::npos) << s.ToString();
    EXPECT_NE(s.message().find("offset " + std::to_string(header)), std::string::npos) << s.ToString();
  }
}

// With verification off, the CRC does not catch a flipped body byte. What happens then depends on the
// codec: an uncompressed page (and most compressed literals) decodes to wrong bytes; a flip in a
// compressed stream's structure (or GZIP's own CRC) fails decompression with an error that is not
// the page CRC's. Either is accepted; a silent correct result is not possible for the flip we make,
// since the flipped byte carries data in every codec's stream.
TEST_P(PageDecoderCodecTest, WithoutCrcVerificationAFlipIsNotReportedAsCrcMismatch) {
  const Codec codec = GetParam();
  WrittenColumn col = WriteAndFetchPages(dir_.File("t.parquet"), kLargeTensor, codec, 1);
  ASSERT_EQ(col.pages.size(), 1u);
  FetchedPage page = col.pages[0];
  const size_t header = HeaderSize(page.bytes);
  page.bytes[header + (page.bytes.size() - header) / 2] ^= 0x10;
  AlignedBuffer scratch;
  std::string dest(static_cast<size_t>(kLargeTensor.num_bytes()), '\0');
  Status s = Decode(page, codec, 0, &dest, &scratch, PageDecodeOptions{.verify_crc = false});
  if (s.ok()) {
    EXPECT_NE(dest, col.rows[0]) << "decoded bytes should show the flip";
  } else {
    EXPECT_EQ(s.message().find("CRC mismatch"), std::string::npos) << s.ToString();
    EXPECT_NE(s.code(), StatusCode::kOk);
  }
  if (codec == Codec::kUncompressed) {
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_NE(dest, col.rows[0]);
  }
}

TEST_P(PageDecoderCodecTest, PageSizeThatDoesNotFitTheTensorIsCorruption) {
  const Codec codec = GetParam();
  WrittenColumn col = WriteAndFetchPages(dir_.File("t.parquet"), kSmallTensor, codec, 100);
  ASSERT_FALSE(col.pages.empty());
  AlignedBuffer scratch;
  for (size_t n : {static_cast<size_t>(kSmallTensor.num_bytes()) - 1, static_cast<size_t>(kSmallTensor.num_bytes()) + 1,
                   size_t{0}}) {
    std::string dest(n, '\0');
    Status s = Decode(col.pages[0], codec, 0, &dest, &scratch);
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << n << ": " << s.ToString();
    EXPECT_NE(s.message().find("uncompressed page size"), std::string::npos) << s.ToString();
  }
}

TEST_P(PageDecoderCodecTest, TruncatedPageIsCorruption) {
  const Codec codec = GetParam();
  WrittenColumn col = WriteAndFetchPages(dir_.File("t.parquet"), kSmallTensor, codec, 50);
  ASSERT_EQ(col.pages.size(), 1u);
  const FetchedPage& whole = col.pages[0];
  AlignedBuffer scratch;
  std::string dest(static_cast<size_t>(kSmallTensor.num_bytes()), '\0');
  // Every cut inside the header, and a spread of cuts inside the body.
  std::vector<size_t> cuts;
  const size_t header = HeaderSize(whole.bytes);
  for (size_t n = 0; n <= header; ++n) cuts.push_back(n);
  for (size_t n = header + 1; n < whole.bytes.size(); n += 97) cuts.push_back(n);
  cuts.push_back(whole.bytes.size() - 1);
  for (size_t n : cuts) {
    FetchedPage page = whole;
    page.bytes.resize(n);
    Status s = Decode(page, codec, 0, &dest, &scratch);
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << "cut at " << n << ": " << s.ToString();
  }
  // Extra bytes after the page are as wrong as missing ones.
  FetchedPage longer = whole;
  longer.bytes += "x";
  EXPECT_EQ(Decode(longer, codec, 0, &dest, &scratch).code(), StatusCode::kCorruption);
}

TEST_P(PageDecoderCodecTest, RowOutsideThePageIsInvalidArgumentAndRowCountMismatchIsCorruption) {
  const Codec codec = GetParam();
  WrittenColumn col = WriteAndFetchPages(dir_.File("t.parquet"), kSmallTensor, codec, 10);
  ASSERT_EQ(col.pages.size(), 1u);
  AlignedBuffer scratch;
  std::string dest(static_cast<size_t>(kSmallTensor.num_bytes()), '\0');
  EXPECT_EQ(Decode(col.pages[0], codec, 10, &dest, &scratch).code(), StatusCode::kInvalidArgument);
  FetchedPage page = col.pages[0];
  page.rows = 11;  // an OffsetIndex that disagrees with the page header
  EXPECT_EQ(Decode(page, codec, 0, &dest, &scratch).code(), StatusCode::kCorruption);
}

INSTANTIATE_TEST_SUITE_P(Codecs, PageDecoderCodecTest,
                         ::testing::Values(Codec::kUncompressed, Codec::kZstd, Codec::kSnappy, Codec::kLz4Raw,
                                           Codec::kGzip),
                         [](const ::testing::TestParamInfo<Codec>& info) {
                           switch (info.param) {
                             case Codec::kUncompressed: return std::string("Uncompressed");
                             case Codec::kZstd: return std::string("Zstd");
                             case Codec::kSnappy: return std::string("Snappy");
                             case Codec::kLz4Raw: return std::string("Lz4Raw");
                             case Codec::kGzip: return std::string("Gzip");
                             default: return std::string("Other");
                           }
                         });

TEST(PageDecoderTest, HandMadeV1PlainPageDecodes) {
  parquet::PageHeader h;
  h.type = PageType::kDataPage;
  h.data_page_header = parquet::DataPageHeader{.num_values = 3};
  const std::string body = PlainBody(3, 8);
  h.uncompressed_page_size = static_cast<int32_t>(body.size());
  const std::string page = MakePage(h, body);
  std::string dest(8, '\0');
  ASSERT_TRUE(DecodeSampleFromPage(AsBytes(page), Codec::kUncompressed, 2, 3,
                                   MutableByteView(reinterpret_cast<uint8_t*>(dest.data()), 8), nullptr, {}, "ctx")
                  .ok());
  EXPECT_EQ(dest, std::string(8, 'c'));
}

// An OPTIONAL column's page as other writers write it: definition levels (RLE, bit width 1, 4-byte
// length) before the PLAIN values of the present rows.
std::string LeveledPage(const std::vector<uint32_t>& levels, size_t n, Codec codec,
                        Encoding level_encoding = Encoding::kRle) {
  std::string body;
  parquet::EncodeLengthPrefixedRleBitPackedHybrid(levels, 1, &body);
  body += PlainBody(static_cast<uint32_t>(std::count(levels.begin(), levels.end(), 1u)), n);
  parquet::PageHeader h;
  h.type = PageType::kDataPage;
  h.data_page_header = parquet::DataPageHeader{.num_values = static_cast<int32_t>(levels.size()),
                                               .definition_level_encoding = level_encoding};
  h.uncompressed_page_size = static_cast<int32_t>(body.size());
  if (codec == Codec::kUncompressed) return MakePage(h, body);
  AlignedBuffer compressed;
  EXPECT_TRUE(Compress(codec, AsBytes(body), 0, &compressed).ok());
  return MakePage(h, std::string(reinterpret_cast<const char*>(compressed.data()), compressed.size()));
}

TEST(PageDecoderTest, OptionalColumnPageDecodesPresentRowsAndReportsNulls) {
  const std::vector<uint32_t> levels = {1, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1};  // values a, b, c, d
  for (Codec codec : {Codec::kUncompressed, Codec::kZstd, Codec::kSnappy}) {
    SCOPED_TRACE(static_cast<int>(codec));
    const std::string page = LeveledPage(levels, 8, codec);
    AlignedBuffer scratch;
    std::string dest(8, '\0');
    auto decode = [&](uint32_t row) {
      return DecodeSampleFromPage(AsBytes(page), codec, row, static_cast<uint32_t>(levels.size()), true,
                                  MutableByteView(reinterpret_cast<uint8_t*>(dest.data()), 8), &scratch, {}, "ctx");
    };
    const std::vector<std::pair<uint32_t, char>> present = {{0, 'a'}, {2, 'b'}, {3, 'c'}, {12, 'd'}};
    for (auto [row, want] : present) {
      ASSERT_TRUE(decode(row).ok()) << row << ": " << decode(row).ToString();
      EXPECT_EQ(dest, std::string(8, want)) << row;
    }
    Status null_row = decode(1);
    EXPECT_EQ(null_row.code(), StatusCode::kNotFound) << null_row.ToString();
    EXPECT_NE(null_row.message().find("null"), std::string::npos) << null_row.ToString();
    // Read as a REQUIRED column's page, the levels are not values: an error, never wrong bytes.
    Status required = DecodeSampleFromPage(AsBytes(page), codec, 0, static_cast<uint32_t>(levels.size()), false,
                                           MutableByteView(reinterpret_cast<uint8_t*>(dest.data()), 8), &scratch, {},
                                           "ctx");
    EXPECT_EQ(required.code(), StatusCode::kCorruption) << required.ToString();
  }
}

TEST(PageDecoderTest, WholePageDecodesEveryRowOnce) {
  const std::vector<uint32_t> levels = {1, 0, 1, 1, 0, 1};  // values a, b, c, d
  for (Codec codec : {Codec::kUncompressed, Codec::kZstd, Codec::kSnappy}) {
    SCOPED_TRACE(static_cast<int>(codec));
    DecodedPage page;
    ASSERT_TRUE(DecodeWholePage(AsBytes(LeveledPage(levels, 8, codec)), codec, 6, true, 8, {}, "ctx", &page).ok());
    ASSERT_EQ(page.offsets.size(), 6u);
    const std::string want = "a.bc.d";
    for (size_t r = 0; r < 6; ++r) {
      if (want[r] == '.') {
        EXPECT_EQ(page.offsets[r], DecodedPage::kNull) << r;
      } else {
        ASSERT_NE(page.offsets[r], DecodedPage::kNull) << r;
        EXPECT_EQ(std::string(reinterpret_cast<const char*>(page.body.data()) + page.offsets[r], 8),
                  std::string(8, want[r])) << r;
      }
    }
    // Values of another size than the tensor's: corruption, not a partial page.
    Status s = DecodeWholePage(AsBytes(LeveledPage(levels, 8, codec)), codec, 6, true, 7, {}, "ctx", &page);
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
  }
  // A REQUIRED column's page (no levels), with a flipped body byte: the CRC names it.
  parquet::PageHeader h;
  h.type = PageType::kDataPage;
  h.data_page_header = parquet::DataPageHeader{.num_values = 3};
  const std::string body = PlainBody(3, 8);
  h.uncompressed_page_size = static_cast<int32_t>(body.size());
  std::string flipped = MakePage(h, body);
  DecodedPage page;
  ASSERT_TRUE(DecodeWholePage(AsBytes(flipped), Codec::kUncompressed, 3, false, 8, {}, "ctx", &page).ok());
  EXPECT_EQ(page.offsets[2], 4u + 12u + 12u);
  flipped[flipped.size() - 3] ^= 1;
  Status s = DecodeWholePage(AsBytes(flipped), Codec::kUncompressed, 3, false, 8, {}, "ctx", &page);
  EXPECT_NE(s.message().find("CRC mismatch"), std::string::npos) << s.ToString();
}

TEST(PageDecoderTest, OptionalColumnPageWithBadLevelsIsAnError) {
  AlignedBuffer scratch;
  std::string dest(8, '\0');
  auto decode = [&](const std::string& page, uint32_t rows) {
    return DecodeSampleFromPage(AsBytes(page), Codec::kUncompressed, 0, rows, true,
                                MutableByteView(reinterpret_cast<uint8_t*>(dest.data()), 8), &scratch, {}, "ctx");
  };
  // BIT_PACKED levels (deprecated) are refused by name.
  Status bit_packed = decode(LeveledPage({1, 1}, 8, Codec::kUncompressed, Encoding::kBitPacked), 2);
  EXPECT_EQ(bit_packed.code(), StatusCode::kUnsupported) << bit_packed.ToString();
  // A levels length running past the body.
  std::string page = LeveledPage({1, 1}, 8, Codec::kUncompressed);
  const size_t header = HeaderSize(page);
  std::string bad = page;
  bad[header] = static_cast<char>(0x7f);
  bad[header + 1] = static_cast<char>(0x7f);
  parquet::PageHeader h;
  size_t consumed = 0;
  ASSERT_TRUE(parquet::ParsePageHeader(AsBytes(page), "test", 0, &h, &consumed).ok());
  Status s = decode(MakePage(h, bad.substr(header)), 2);
  EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find("definition levels"), std::string::npos) << s.ToString();
  // More values than the page's rows can hold: the declared size is refused before any allocation.
  h.uncompressed_page_size = 1 << 30;
  Status huge = DecodeSampleFromPage(AsBytes(MakePage(h, page.substr(header))), Codec::kZstd, 0, 2, true,
                                     MutableByteView(reinterpret_cast<uint8_t*>(dest.data()), 8), &scratch, {}, "ctx");
  EXPECT_EQ(huge.code(), StatusCode::kCorruption) << huge.ToString();
  EXPECT_LT(scratch.capacity(), size_t{1} << 20);
}

TEST(PageDecoderTest, DictionaryPageIsUnsupported) {
  parquet::PageHeader h;
  h.type = PageType::kDictionaryPage;
  h.dictionary_page_header = parquet::DictionaryPageHeader{.num_values = 1};
  const std::string body = PlainBody(1, 8);
  h.uncompressed_page_size = static_cast<int32_t>(body.size());
  const std::string page = MakePage(h, body);
  std::string dest(8, '\0');
  Status s = DecodeSampleFromPage(AsBytes(page), Codec::kUncompressed, 0, 1,
                                  MutableByteView(reinterpret_cast<uint8_t*>(dest.data()), 8), nullptr, {}, "ctx");
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.ToString();
  EXPECT_NE(s.message().find("DICTIONARY_PAGE"), std::string::npos) << s.ToString();
}

TEST(PageDecoderTest, DataPageV2IsUnsupported) {
  parquet::PageHeader h;
  h.type = PageType::kDataPageV2;
  h.data_page_header_v2 = parquet::DataPageHeaderV2{.num_values = 1, .num_rows = 1, .is_compressed = false};
  const std::string body = PlainBody(1, 8);
  h.uncompressed_page_size = static_cast<int32_t>(body.size());
  const std::string page = MakePage(h, body);
  std::string dest(8, '\0');
  Status s = DecodeSampleFromPage(AsBytes(page), Codec::kUncompressed, 0, 1,
                                  MutableByteView(reinterpret_cast<uint8_t*>(dest.data()), 8), nullptr, {}, "ctx");
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.ToString();
  EXPECT_NE(s.message().find("DATA_PAGE_V2"), std::string::npos) << s.ToString();
}

TEST(PageDecoderTest, NonPlainEncodingIsUnsupported) {
  parquet::PageHeader h;
  h.type = PageType::kDataPage;
  h.data_page_header = parquet::DataPageHeader{.num_values = 1, .encoding = Encoding::kRleDictionary};
  const std::string body = PlainBody(1, 8);
  h.uncompressed_page_size = static_cast<int32_t>(body.size());
  const std::string page = MakePage(h, body);
  std::string dest(8, '\0');
  Status s = DecodeSampleFromPage(AsBytes(page), Codec::kUncompressed, 0, 1,
                                  MutableByteView(reinterpret_cast<uint8_t*>(dest.data()), 8), nullptr, {}, "ctx");
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.ToString();
}

TEST(PageDecoderTest, LengthPrefixRunningPastTheBodyIsCorruption) {
  parquet::PageHeader h;
  h.type = PageType::kDataPage;
  h.data_page_header = parquet::DataPageHeader{.num_values = 2};
  std::string body = PlainBody(2, 8);
  body[0] = static_cast<char>(0xff);  // first length 255: runs past the 24-byte body
  h.uncompressed_page_size = static_cast<int32_t>(body.size());
  const std::string page = MakePage(h, body);
  std::string dest(8, '\0');
  Status s = DecodeSampleFromPage(AsBytes(page), Codec::kUncompressed, 1, 2,
                                  MutableByteView(reinterpret_cast<uint8_t*>(dest.data()), 8), nullptr, {}, "ctx");
  EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find("runs past"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace stoke

namespace stoke {
namespace {

// A split read: header + length prefix in one buffer, the value in its destination.
TEST(PageDecoderSplitTest, SplitUncompressedPageChecksLikeTheWholePage) {
  TempDir dir;
  WrittenColumn col = WriteAndFetchPages(dir.File("t.parquet"), kLargeTensor, Codec::kUncompressed, 3);
  ASSERT_EQ(col.pages.size(), 3u);
  const size_t value = static_cast<size_t>(kLargeTensor.num_bytes());
  for (size_t p = 0; p < 3; ++p) {
    const std::string& bytes = col.pages[p].bytes;
    const std::string head = bytes.substr(0, bytes.size() - value);
    std::string sample = bytes.substr(bytes.size() - value);
    EXPECT_EQ(sample, col.rows[p]);
    EXPECT_TRUE(CheckSplitSample(AsBytes(head), AsBytes(sample), {}, "ctx").ok());
    // The body's CRC taken by the sample's reader, from the prefix's on: the same verdicts.
    const uint32_t prefix = SplitPrefixCrc(static_cast<uint32_t>(value));
    EXPECT_EQ(prefix, Crc32(AsBytes(head).last(4)));
    EXPECT_TRUE(CheckSplitSample(AsBytes(head), AsBytes(sample), {}, "ctx", Crc32(AsBytes(sample), prefix)).ok());
    // A flipped byte in the sample part fails the CRC (continued from the prefix)...
    sample[value / 3] ^= 0x01;
    Status s = CheckSplitSample(AsBytes(head), AsBytes(sample), {}, "t.parquet row 1");
    EXPECT_EQ(s.code(), StatusCode::kCorruption);
    EXPECT_NE(s.message().find("CRC mismatch"), std::string::npos) << s.ToString();
    EXPECT_NE(s.message().find("t.parquet row 1"), std::string::npos) << s.ToString();
    Status combined =
        CheckSplitSample(AsBytes(head), AsBytes(sample), {}, "t.parquet row 1", Crc32(AsBytes(sample), prefix));
    EXPECT_EQ(combined.code(), StatusCode::kCorruption);
    EXPECT_EQ(combined.message(), s.message());
    // ...and passes without verification.
    PageDecodeOptions no_crc;
    no_crc.verify_crc = false;
    EXPECT_TRUE(CheckSplitSample(AsBytes(head), AsBytes(sample), no_crc, "ctx").ok());
    // A flipped byte in the length prefix is caught even without the CRC.
    std::string bad_head = head;
    bad_head[bad_head.size() - 2] ^= 0x01;
    EXPECT_EQ(CheckSplitSample(AsBytes(bad_head), AsBytes(col.rows[p]), no_crc, "ctx").code(), StatusCode::kCorruption);
    // The wrong split point (a head one byte short) is an error, not an out-of-bounds read.
    EXPECT_FALSE(CheckSplitSample(AsBytes(head).first(head.size() - 1), AsBytes(bytes).last(value + 1), {}, "ctx").ok());
    // Every truncation of the head is an error.
    for (size_t n = 0; n < head.size(); ++n) {
      EXPECT_FALSE(CheckSplitSample(AsBytes(head).first(n), AsBytes(col.rows[p]), {}, "ctx").ok()) << n;
    }
  }
}

TEST(PageDecoderSplitTest, PackedPageIsNotASplitPage) {
  TempDir dir;
  WrittenColumn col = WriteAndFetchPages(dir.File("t.parquet"), kSmallTensor, Codec::kUncompressed, 50);
  ASSERT_FALSE(col.pages.empty());
  ASSERT_GT(col.pages[0].rows, 1u);
  const std::string& bytes = col.pages[0].bytes;
  const size_t value = static_cast<size_t>(kSmallTensor.num_bytes());
  Status s = CheckSplitSample(AsBytes(bytes).first(bytes.size() - value), AsBytes(bytes).last(value), {}, "ctx");
  EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
}

}  // namespace
}  // namespace stoke
