// ParsePageHeader's fast path for the common data page header against the general Thrift reader
// (ParsePageHeaderInFull): the same result on the headers writers make and on damaged ones.
#include "format/parquet_metadata.h"

#include <gtest/gtest.h>

#include <climits>
#include <string>
#include <vector>

namespace stoke::parquet {
namespace {

const std::string kContext = "a.parquet page header";

ByteView View(const std::string& s) { return ByteView(reinterpret_cast<const uint8_t*>(s.data()), s.size()); }

std::string Serialized(const PageHeader& h) {
  std::string out;
  SerializePageHeader(h, &out);
  return out;
}

PageHeader DataPage(int32_t uncompressed, int32_t compressed, std::optional<int32_t> crc, int32_t values) {
  PageHeader h;
  h.type = PageType::kDataPage;
  h.uncompressed_page_size = uncompressed;
  h.compressed_page_size = compressed;
  h.crc = crc;
  h.data_page_header = DataPageHeader{values, Encoding::kPlain, Encoding::kRle, Encoding::kRle};
  return h;
}

// Both parsers on `bytes` (followed by `trailing` bytes of a page body): the same status, message,
// header and length.
void ExpectSameParse(const std::string& bytes, const std::string& what) {
  PageHeader fast, full;
  size_t fast_size = 0, full_size = 0;
  const Status a = ParsePageHeader(View(bytes), kContext, 100, &fast, &fast_size);
  const Status b = ParsePageHeaderInFull(View(bytes), kContext, 100, &full, &full_size);
  ASSERT_EQ(a.ok(), b.ok()) << what << ": " << a.ToString() << " / " << b.ToString();
  if (!a.ok()) {
    EXPECT_EQ(a.ToString(), b.ToString()) << what;
    return;
  }
  EXPECT_TRUE(fast == full) << what;
  EXPECT_EQ(fast_size, full_size) << what;
}

TEST(ParsePageHeader, ReadsTheCommonDataPageHeaderAsTheGeneralReaderDoes) {
  const std::vector<PageHeader> headers = {
      DataPage(516, 516, 0x1234567, 1),
      DataPage(516, 516, std::nullopt, 1),
      DataPage(0, 0, 0, 0),
      DataPage(INT32_MAX, INT32_MAX, INT32_MIN, INT32_MAX),
      DataPage(1 << 20, 300000, -1, 1000),
      DataPage(-1, 10, 5, 1),  // a negative size: both refuse it
      DataPage(10, -7, std::nullopt, 1),
  };
  for (const PageHeader& h : headers) {
    const std::string bytes = Serialized(h);
    ExpectSameParse(bytes, "serialized");
    ExpectSameParse(bytes + std::string(64, '\x55'), "with a body after it");
    if (h.uncompressed_page_size >= 0 && h.compressed_page_size >= 0) {
      PageHeader got;
      size_t size = 0;
      ASSERT_TRUE(ParsePageHeader(View(bytes + "body"), kContext, 0, &got, &size).ok());
      EXPECT_TRUE(got == h);
      EXPECT_EQ(size, bytes.size());
    }
  }
}

TEST(ParsePageHeader, OtherHeadersGoToTheGeneralReader) {
  PageHeader dict;
  dict.type = PageType::kDictionaryPage;
  dict.uncompressed_page_size = dict.compressed_page_size = 40;
  dict.dictionary_page_header = DictionaryPageHeader{10, Encoding::kPlain, true};
  ExpectSameParse(Serialized(dict), "dictionary page");
  PageHeader v2;
  v2.type = PageType::kDataPageV2;
  v2.uncompressed_page_size = v2.compressed_page_size = 40;
  v2.crc = 7;
  v2.data_page_header_v2 = DataPageHeaderV2{.num_values = 3, .num_nulls = 1, .num_rows = 3};
  ExpectSameParse(Serialized(v2), "V2 page");
  // A data page header with statistics (field 5 of DataPageHeader: an empty struct) before its stop.
  std::string with_stats = Serialized(DataPage(516, 516, 99, 1));
  ASSERT_EQ(with_stats.substr(with_stats.size() - 2), std::string(2, '\0'));
  with_stats.insert(with_stats.size() - 2, std::string("\x1c\x00", 2));
  ExpectSameParse(with_stats, "statistics");
  PageHeader got;
  ASSERT_TRUE(ParsePageHeader(View(with_stats), kContext, 0, &got, nullptr).ok());
  EXPECT_EQ(got.data_page_header->num_values, 1);
  // A varint padded to 6 bytes (0x80 continuation bytes): valid Thrift, not the canonical form.
  std::string padded = Serialized(DataPage(2, 2, std::nullopt, 1));
  ASSERT_EQ(padded[1], '\x00');  // type 0: DATA_PAGE
  padded.replace(1, 1, std::string("\x80\x80\x80\x80\x80\x00", 6));
  ExpectSameParse(padded, "padded varint");
}

TEST(ParsePageHeader, AgreesWithTheGeneralReaderOnEveryCutAndFlippedByte) {
  for (const PageHeader& h : {DataPage(516, 516, 0x7eadbeef, 1), DataPage(70000, 65536, std::nullopt, 12)}) {
    const std::string bytes = Serialized(h);
    for (size_t n = 0; n < bytes.size(); ++n) ExpectSameParse(bytes.substr(0, n), "cut at " + std::to_string(n));
    for (size_t i = 0; i < bytes.size(); ++i) {
      for (const uint8_t mask : {0x01, 0x10, 0x20, 0x40, 0x80, 0xff}) {
        std::string damaged = bytes;
        damaged[i] = static_cast<char>(damaged[i] ^ mask);
        ExpectSameParse(damaged + "tail", "byte " + std::to_string(i) + " ^ " + std::to_string(mask));
      }
    }
  }
}

}  // namespace
}  // namespace stoke::parquet
