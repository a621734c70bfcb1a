// Writer and reader together: what the writer writes, the reader reads back byte for byte.
#include "format/parquet_reader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/random.h"
#include "format/codec.h"
#include "format/parquet_encoding.h"
#include "format/parquet_testing.h"
#include "format/parquet_writer.h"

namespace stoke {
namespace {

using parquet::Codec;
using parquet::Type;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = std::filesystem::temp_directory_path() / "stoke_parquet_XXXXXX";
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Counts positioned reads, to check the one-read-per-sample promise; `remote` says what remote() does.
class CountingFile : public RandomAccessFile {
 public:
  explicit CountingFile(std::unique_ptr<RandomAccessFile> f, bool remote = false) : f_(std::move(f)), remote_(remote) {}
  Status ReadAt(uint64_t offset, MutableByteView dst) const override {
    ++reads;
    return f_->ReadAt(offset, dst);
  }
  uint64_t size() const override { return f_->size(); }
  const std::string& path() const override { return f_->path(); }
  bool remote() const override { return remote_; }
  mutable std::atomic<int> reads{0};

 private:
  std::unique_ptr<RandomAccessFile> f_;
  const bool remote_;
};

std::string RandomBytes(Rng& rng, size_t n) {
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng.Next());
  return s;
}

// Writes `rows` rows of (id INT64, t tensor) split into row groups of `rows_per_group`.
std::vector<std::string> WriteTensorFile(const std::string& path, const TensorSpec& spec, Codec codec, int rows,
                                         int rows_per_group) {
  std::vector<ColumnSpec> cols = {{.name = "id", .type = Type::kInt64},
                                  {.name = "t", .type = Type::kByteArray, .tensor = spec}};
  WriterOptions opts;
  opts.codec = codec;
  auto w = ParquetFileWriter::Create(LocalStorage(), path, cols, opts);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  Rng rng(static_cast<uint64_t>(rows) * 31 + static_cast<uint64_t>(codec));
  std::vector<std::string> data;
  RowGroupEncoder enc((*w)->columns(), (*w)->options());
  std::vector<int64_t> ids;
  for (int r = 0; r < rows; ++r) {
    data.push_back(RandomBytes(rng, static_cast<size_t>(spec.num_bytes())));
    EXPECT_TRUE(enc.AppendTensor(1, AsBytes(data.back())).ok());
    ids.push_back(r);
    if (static_cast<int>(ids.size()) == rows_per_group || r == rows - 1) {
      EXPECT_TRUE(enc.SetScalars(0, ColumnValues{ids, {}}).ok());
      auto rg = enc.Finish();
      EXPECT_TRUE(rg.ok()) << rg.status().ToString();
      EXPECT_TRUE((*w)->WriteRowGroup(std::move(*rg)).ok());
      ids.clear();
    }
  }
  EXPECT_TRUE((*w)->Close().ok());
  return data;
}

struct DtypeCodec {
  DType dtype;
  Codec codec;
};

class TensorRoundTrip : public ::testing::TestWithParam<DtypeCodec> {};

TEST_P(TensorRoundTrip, EverySampleReadByIndexEqualsTheSourceBytes) {
  TempDir dir;
  const auto [dtype, codec] = GetParam();
  // A large shape (one page per row) and a small one (rows packed into ~64 KiB pages).
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{20, 20, 20}, std::vector<int64_t>{3, 5}}) {
    TensorSpec spec{dtype, shape};
    std::string path = dir.File("t.parquet");
    auto data = WriteTensorFile(path, spec, codec, 25, 10);
    auto r = ParquetReader::Open(LocalStorage(), path);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ((*r)->num_rows(), 25);
    ASSERT_EQ((*r)->num_row_groups(), 3);
    ASSERT_TRUE((*r)->columns()[1].tensor.has_value());
    EXPECT_EQ(*(*r)->columns()[1].tensor, spec);
    AlignedBuffer cell;
    for (int row = 24; row >= 0; --row) {  // backwards: no reliance on sequential state
      ASSERT_TRUE((*r)->ReadBinaryCell(row, 1, &cell).ok()) << row;
      ASSERT_EQ(AsChars(cell.view()), data[row]) << "row " << row;
    }
    auto all = (*r)->ReadColumn(1);
    ASSERT_TRUE(all.ok()) << all.status().ToString();
    EXPECT_EQ(std::get<std::vector<std::string>>(all->values), data);
    auto ids = (*r)->ReadColumn(0);
    ASSERT_TRUE(ids.ok());
    EXPECT_EQ(std::get<std::vector<int64_t>>(ids->values)[24], 24);
  }
}

std::vector<DtypeCodec> AllDtypesAndCodecs() {
  std::vector<DtypeCodec> out;
  for (int d = 0; d <= static_cast<int>(DType::kFloat64); ++d) {
    for (Codec c : {Codec::kUncompressed, Codec::kZstd, Codec::kSnappy, Codec::kLz4Raw, Codec::kGzip}) {
      out.push_back({static_cast<DType>(d), c});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(AllDtypesAndCodecs, TensorRoundTrip, ::testing::ValuesIn(AllDtypesAndCodecs()),
                         [](const auto& info) {
                           return std::string(DTypeName(info.param.dtype)) + "_" +
                                  std::string(parquet::CodecName(info.param.codec));
                         });

TEST(ParquetLayout, LargeTensorsGetOnePagePerRowListedInTheOffsetIndex) {
  TempDir dir;
  std::string path = dir.File("big.parquet");
  WriteTensorFile(path, TensorSpec{DType::kFloat32, {30, 30, 10, 10}}, Codec::kZstd, 12, 12);
  auto r = ParquetReader::Open(LocalStorage(), path);
  ASSERT_TRUE(r.ok());
  auto pages = (*r)->ListPages(0, 1);
  ASSERT_TRUE(pages.ok());
  ASSERT_EQ(pages->size(), 12u);
  for (const auto& p : *pages) {
    EXPECT_EQ(p.header.type, parquet::PageType::kDataPage);
    EXPECT_EQ(p.header.data_page_header->num_values, 1);
    EXPECT_EQ(p.header.uncompressed_page_size, 4 + 360000);
    EXPECT_TRUE(p.header.crc.has_value());
  }
  auto oi = (*r)->ReadOffsetIndex(0, 1);
  ASSERT_TRUE(oi.ok() && oi->has_value());
  ASSERT_EQ((*oi)->page_locations.size(), 12u);
  for (size_t i = 0; i < 12; ++i) {
    EXPECT_EQ((*oi)->page_locations[i].first_row_index, static_cast<int64_t>(i));
    EXPECT_EQ((*oi)->page_locations[i].offset, (*pages)[i].offset);
    EXPECT_EQ((*oi)->page_locations[i].compressed_page_size, (*pages)[i].header_size + (*pages)[i].header.compressed_page_size);
  }
  // Tensor columns carry null_count only, and no ColumnIndex.
  const auto& stats = (*r)->metadata().row_groups[0].columns[1].meta_data->statistics;
  ASSERT_TRUE(stats.has_value());
  EXPECT_EQ(stats->null_count, 0);
  EXPECT_FALSE(stats->min_value.has_value());
  auto ci = (*r)->ReadColumnIndex(0, 1);
  ASSERT_TRUE(ci.ok());
  EXPECT_FALSE(ci->has_value());
}

TEST(ParquetLayout, ReadingASampleIsOnePositionedRead) {
  TempDir dir;
  std::string path = dir.File("big.parquet");
  auto data = WriteTensorFile(path, TensorSpec{DType::kFloat32, {30, 30, 10, 10}}, Codec::kZstd, 8, 8);
  auto file = LocalStorage().OpenForRead(path);
  ASSERT_TRUE(file.ok());
  auto counting = std::make_unique<CountingFile>(std::move(*file));
  CountingFile* counter = counting.get();
  auto r = ParquetReader::Open(std::move(counting));
  ASSERT_TRUE(r.ok());
  AlignedBuffer cell;
  ASSERT_TRUE((*r)->ReadBinaryCell(0, 1, &cell).ok());  // loads the OffsetIndex once
  for (int row = 1; row < 8; ++row) {
    int before = counter->reads.load();
    ASSERT_TRUE((*r)->ReadBinaryCell(row, 1, &cell).ok());
    EXPECT_EQ(counter->reads.load() - before, 1) << "row " << row;
    EXPECT_EQ(AsChars(cell.view()), data[row]);
  }
}

// Opening reads the file's last 64 KiB once: a file that small is read whole by that read, and its
// page indexes, column chunks and cells come from memory after it. A larger file takes one more
// read for its leading magic, except on an object store (a request each), and its pages are read
// from the file.
TEST(ParquetLayout, OpeningReadsTheTailOnceAndServesWhatLiesInIt) {
  TempDir dir;
  auto open_counting = [](const std::string& path, CountingFile** counter, bool remote = false) {
    auto file = LocalStorage().OpenForRead(path);
    EXPECT_TRUE(file.ok());
    auto counting = std::make_unique<CountingFile>(std::move(*file), remote);
    *counter = counting.get();
    auto r = ParquetReader::Open(std::move(counting));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return std::move(*r);
  };
  const std::string small = dir.File("small.parquet");
  auto data = WriteTensorFile(small, TensorSpec{DType::kUInt8, {100}}, Codec::kUncompressed, 20, 10);
  CountingFile* counter = nullptr;
  auto r = open_counting(small, &counter);
  EXPECT_EQ(counter->reads.load(), 1) << "the whole file, once";
  EXPECT_TRUE(r->HoldsRange(0, r->file_size()));
  EXPECT_FALSE(r->HoldsRange(1, r->file_size()));
  auto oi = r->ReadOffsetIndex(1, 1);
  ASSERT_TRUE(oi.ok()) << oi.status().ToString();
  ASSERT_TRUE(oi->has_value());
  auto ids = r->ReadColumnChunk(1, 0);
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  EXPECT_EQ(std::get<std::vector<int64_t>>(ids->values).front(), 10);
  AlignedBuffer cell;
  for (int row = 0; row < 20; ++row) {
    ASSERT_TRUE(r->ReadBinaryCell(row, 1, &cell).ok());
    EXPECT_EQ(AsChars(cell.view()), data[row]) << "row " << row;
  }
  EXPECT_EQ(counter->reads.load(), 1) << "nothing read again";

  const std::string big = dir.File("big.parquet");
  data = WriteTensorFile(big, TensorSpec{DType::kUInt8, {40000}}, Codec::kUncompressed, 6, 3);
  r = open_counting(big, &counter);
  EXPECT_EQ(counter->reads.load(), 2) << "the tail, then the leading magic";
  EXPECT_FALSE(r->HoldsRange(0, 4));
  EXPECT_TRUE(r->HoldsRange(r->file_size() - (64 << 10), 64 << 10));
  EXPECT_FALSE(r->HoldsRange(r->file_size() - (64 << 10) - 1, 2));
  for (int row = 0; row < 6; ++row) {
    ASSERT_TRUE(r->ReadBinaryCell(row, 1, &cell).ok());
    EXPECT_EQ(AsChars(cell.view()), data[row]) << "row " << row;
  }
  r = open_counting(big, &counter, /*remote=*/true);
  EXPECT_EQ(counter->reads.load(), 1) << "the tail only";
  for (int row = 0; row < 6; ++row) {
    ASSERT_TRUE(r->ReadBinaryCell(row, 1, &cell).ok());
    EXPECT_EQ(AsChars(cell.view()), data[row]) << "row " << row;
  }

  // A damaged leading magic: refused where it is read; on an object store the file opens, as it
  // does in Arrow and parquet-mr.
  {
    std::fstream f(big, std::ios::in | std::ios::out | std::ios::binary);
    f.write("PAR0", 4);
  }
  for (bool remote : {false, true}) {
    auto file = LocalStorage().OpenForRead(big);
    ASSERT_TRUE(file.ok());
    auto opened = ParquetReader::Open(std::make_unique<CountingFile>(std::move(*file), remote));
    if (remote) {
      EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    } else {
      ASSERT_FALSE(opened.ok());
      EXPECT_EQ(opened.status().code(), StatusCode::kCorruption);
      EXPECT_NE(opened.status().message().find("offset 0: not a Parquet file"), std::string::npos)
          << opened.status().message();
    }
  }
}

// OpenWithEnds: given the tail (and the leading magic of a file larger than it), opening reads
// nothing, and the reader answers as one opened by reading; reads outside the tail go to the file.
// A wrong leading magic, a tail that is not the file's end, or a tail too short are refused.
TEST(ParquetLayout, OpenWithEndsReadsNothingToOpen) {
  TempDir dir;
  for (const int tensor_bytes : {100, 40000}) {
    const std::string path = dir.File("f" + std::to_string(tensor_bytes) + ".parquet");
    auto data = WriteTensorFile(path, TensorSpec{DType::kUInt8, {static_cast<int64_t>(tensor_bytes)}},
                                Codec::kUncompressed, 6, 3);
    auto whole = ReadFileToString(LocalStorage(), path);
    ASSERT_TRUE(whole.ok());
    const std::string& bytes = *whole;
    const size_t tail_size = std::min<size_t>(bytes.size(), ParquetReader::kDefaultReadAhead);
    auto ends = [&](size_t n, size_t skip_end = 0) {
      AlignedBuffer tail(n);
      std::memcpy(tail.data(), bytes.data() + bytes.size() - skip_end - n, n);
      return tail;
    };
    auto counting_file = [&](CountingFile** counter) {
      auto file = LocalStorage().OpenForRead(path);
      EXPECT_TRUE(file.ok());
      auto counting = std::make_unique<CountingFile>(std::move(*file));
      *counter = counting.get();
      return counting;
    };
    CountingFile* counter = nullptr;
    auto r = ParquetReader::OpenWithEnds(counting_file(&counter), ends(tail_size), AsBytes(bytes.substr(0, 4)));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(counter->reads.load(), 0) << "nothing read to open";
    auto read = ParquetReader::Open(LocalStorage(), path);
    ASSERT_TRUE(read.ok());
    EXPECT_EQ((*r)->num_rows(), (*read)->num_rows());
    EXPECT_EQ((*r)->footer_size(), (*read)->footer_size());
    EXPECT_EQ((*r)->row_group_starts(), (*read)->row_group_starts());
    AlignedBuffer cell;
    for (int row = 0; row < 6; ++row) {
      ASSERT_TRUE((*r)->ReadBinaryCell(row, 1, &cell).ok());
      EXPECT_EQ(AsChars(cell.view()), data[row]) << "row " << row;
    }
    EXPECT_EQ(counter->reads.load() > 0, bytes.size() > tail_size) << "only rows outside the tail are read";

    if (bytes.size() > tail_size) {
      auto bad = ParquetReader::OpenWithEnds(counting_file(&counter), ends(tail_size), AsBytes(std::string("PAR0")));
      ASSERT_FALSE(bad.ok());
      EXPECT_NE(bad.status().message().find("offset 0: not a Parquet file"), std::string::npos) << bad.status().ToString();
      // Without the head, a local file's magic is read, as Open does.
      auto no_head = ParquetReader::OpenWithEnds(counting_file(&counter), ends(tail_size), ByteView());
      ASSERT_TRUE(no_head.ok()) << no_head.status().ToString();
      EXPECT_EQ(counter->reads.load(), 1);
    }
    auto shifted = ParquetReader::OpenWithEnds(counting_file(&counter), ends(tail_size - 3, 3), AsBytes(bytes.substr(0, 4)));
    ASSERT_FALSE(shifted.ok());
    EXPECT_EQ(shifted.status().code(), StatusCode::kCorruption) << shifted.status().ToString();
    auto tiny = ParquetReader::OpenWithEnds(counting_file(&counter), ends(5), AsBytes(bytes.substr(0, 4)));
    EXPECT_EQ(tiny.status().code(), StatusCode::kInvalidArgument) << tiny.status().ToString();
  }
}

TEST(ParquetScalars, RoundTripWithNullsStatisticsAndColumnIndex) {
  TempDir dir;
  std::string path = dir.File("s.parquet");
  std::vector<ColumnSpec> cols = {
      {.name = "i32", .type = Type::kInt32, .optional = true}, {.name = "i64", .type = Type::kInt64},
      {.name = "f", .type = Type::kFloat},                     {.name = "d", .type = Type::kDouble, .optional = true},
      {.name = "b", .type = Type::kBoolean},                   {.name = "s", .type = Type::kByteArray, .optional = true, .is_string = true}};
  WriterOptions opts;
  opts.scalar_page_rows = 100;  // several pages per chunk
  auto w = ParquetFileWriter::Create(LocalStorage(), path, cols, opts);
  ASSERT_TRUE(w.ok());
  const int n = 1000;
  std::vector<int32_t> i32;
  std::vector<uint8_t> i32_def, d_def, s_def, b;
  std::vector<int64_t> i64;
  std::vector<float> f;
  std::vector<double> d;
  std::vector<std::string> s;
  for (int r = 0; r < n; ++r) {
    i32_def.push_back(r % 3 != 0);
    if (r % 3 != 0) i32.push_back(r - 500);
    i64.push_back(int64_t{r} << 33);
    f.push_back(r == 10 ? -0.0f : r * 0.5f - 3);
    d_def.push_back(r % 7 != 0);
    if (r % 7 != 0) d.push_back(r * 1.25);
    b.push_back(r % 2);
    s_def.push_back(r % 5 != 0);
    if (r % 5 != 0) s.push_back("value-" + std::to_string(r % 37));
  }
  RowGroupEncoder enc((*w)->columns(), (*w)->options());
  ASSERT_TRUE(enc.SetScalars(0, ColumnValues{i32, i32_def}).ok());
  ASSERT_TRUE(enc.SetScalars(1, ColumnValues{i64, {}}).ok());
  ASSERT_TRUE(enc.SetScalars(2, ColumnValues{f, {}}).ok());
  ASSERT_TRUE(enc.SetScalars(3, ColumnValues{d, d_def}).ok());
  ASSERT_TRUE(enc.SetScalars(4, ColumnValues{b, {}}).ok());
  ASSERT_TRUE(enc.SetScalars(5, ColumnValues{s, s_def}).ok());
  auto rg = enc.Finish();
  ASSERT_TRUE(rg.ok()) << rg.status().ToString();
  ASSERT_TRUE((*w)->WriteRowGroup(std::move(*rg)).ok());
  ASSERT_TRUE((*w)->Close().ok());

  auto r = ParquetReader::Open(LocalStorage(), path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto c0 = (*r)->ReadColumn(0);
  ASSERT_TRUE(c0.ok()) << c0.status().ToString();
  EXPECT_EQ(std::get<std::vector<int32_t>>(c0->values), i32);
  EXPECT_EQ(c0->defined, i32_def);
  EXPECT_EQ(std::get<std::vector<int64_t>>((*r)->ReadColumn(1)->values), i64);
  EXPECT_EQ(std::get<std::vector<float>>((*r)->ReadColumn(2)->values), f);
  auto c3 = (*r)->ReadColumn(3);
  EXPECT_EQ(std::get<std::vector<double>>(c3->values), d);
  EXPECT_EQ(c3->defined, d_def);
  EXPECT_EQ(std::get<std::vector<uint8_t>>((*r)->ReadColumn(4)->values), b);
  auto c5 = (*r)->ReadColumn(5);
  EXPECT_EQ(std::get<std::vector<std::string>>(c5->values), s);
  EXPECT_EQ(c5->defined, s_def);
  EXPECT_TRUE((*r)->columns()[5].is_string);

  const auto& meta = (*r)->metadata().row_groups[0].columns;
  auto st = *meta[0].meta_data->statistics;
  EXPECT_EQ(st.null_count, 334);
  EXPECT_EQ(LoadLE<int32_t>(AsBytes(*st.min_value).data()), -499);
  EXPECT_EQ(LoadLE<int32_t>(AsBytes(*st.max_value).data()), 498);  // row 999 is null
  auto fst = *meta[2].meta_data->statistics;
  EXPECT_TRUE(std::signbit(LoadLE<float>(AsBytes(*fst.min_value).data())) ||
              LoadLE<float>(AsBytes(*fst.min_value).data()) < 0);
  EXPECT_EQ(*meta[5].meta_data->statistics->min_value, "value-0");
  EXPECT_EQ(*meta[5].meta_data->statistics->max_value, "value-9");
  auto ci = (*r)->ReadColumnIndex(0, 1);
  ASSERT_TRUE(ci.ok() && ci->has_value());
  EXPECT_EQ((*ci)->null_pages.size(), 10u);
  EXPECT_EQ((*ci)->boundary_order, parquet::BoundaryOrder::kAscending);
  auto oi = (*r)->ReadOffsetIndex(0, 0);
  ASSERT_TRUE(oi.ok() && oi->has_value());
  EXPECT_EQ((*oi)->page_locations[3].first_row_index, 300);
}

TEST(ParquetWriter, RejectsBadSchemasAndRows) {
  TempDir dir;
  std::vector<ColumnSpec> dup = {{.name = "a", .type = Type::kInt32}, {.name = "a", .type = Type::kInt64}};
  EXPECT_FALSE(ParquetFileWriter::Create(LocalStorage(), dir.File("x.parquet"), dup).ok());
  std::vector<ColumnSpec> opt_tensor = {
      {.name = "t", .type = Type::kByteArray, .optional = true, .tensor = TensorSpec{DType::kInt8, {2}}}};
  EXPECT_FALSE(ParquetFileWriter::Create(LocalStorage(), dir.File("x.parquet"), opt_tensor).ok());

  std::vector<ColumnSpec> cols = {{.name = "id", .type = Type::kInt64},
                                  {.name = "t", .type = Type::kByteArray, .tensor = TensorSpec{DType::kInt8, {4}}}};
  WriterOptions opts;
  RowGroupEncoder enc(cols, opts);
  EXPECT_FALSE(enc.AppendTensor(1, AsBytes("abc")).ok());  // wrong size
  EXPECT_FALSE(enc.AppendTensor(0, AsBytes("abcd")).ok());  // not a tensor column
  ASSERT_TRUE(enc.AppendTensor(1, AsBytes("abcd")).ok());
  ASSERT_TRUE(enc.SetScalars(0, ColumnValues{std::vector<int64_t>{1, 2}, {}}).ok());
  EXPECT_FALSE(enc.Finish().ok());  // 2 ids, 1 tensor row
  EXPECT_FALSE(enc.SetScalars(0, ColumnValues{std::vector<int32_t>{1}, {}}).ok());  // wrong type
  EXPECT_FALSE(enc.SetScalars(0, ColumnValues{std::vector<int64_t>{1}, {0, 1}}).ok());  // nulls in REQUIRED
}

// Data page v2, as Spark and parquet-mr write it (DuckDB writes v1 pages): levels uncompressed and
// without a length prefix, values compressed separately. Built by hand: our writer writes v1 only.
// A file of one OPTIONAL INT32 column "v" in one DATA_PAGE_V2 (levels uncompressed, values snappy),
// written by hand as Arrow and Spark write it. Where no value is present the values section is left
// empty, not compressed.
std::string WriteV2Int32File(TempDir& dir, const std::vector<uint8_t>& defined, const std::vector<int32_t>& present) {
  std::string levels;
  std::vector<uint32_t> defs(defined.begin(), defined.end());
  parquet::EncodeRleBitPackedHybrid(defs, 1, &levels);
  std::string plain;
  parquet::EncodePlain(std::span<const int32_t>(present), &plain);
  AlignedBuffer compressed;
  if (!present.empty()) {
    EXPECT_TRUE(Compress(Codec::kSnappy, AsBytes(plain), 0, &compressed).ok());
  }
  const auto rows = static_cast<int32_t>(defined.size());
  parquet::PageHeader h;
  h.type = parquet::PageType::kDataPageV2;
  h.uncompressed_page_size = static_cast<int32_t>(levels.size() + plain.size());
  h.compressed_page_size = static_cast<int32_t>(levels.size() + compressed.size());
  h.data_page_header_v2 = parquet::DataPageHeaderV2{.num_values = rows, .num_nulls = rows - static_cast<int32_t>(present.size()),
                                                    .num_rows = rows, .encoding = parquet::Encoding::kPlain,
                                                    .definition_levels_byte_length = static_cast<int32_t>(levels.size())};
  std::string file = "PAR1";
  std::string header;
  parquet::SerializePageHeader(h, &header);
  file += header + levels + std::string(AsChars(compressed.view()));

  parquet::FileMetaData m;
  m.schema.push_back({.name = "schema", .num_children = 1});
  m.schema.push_back({.type = Type::kInt32, .repetition = parquet::Repetition::kOptional, .name = "v"});
  m.num_rows = rows;
  parquet::ColumnChunk cc;
  cc.file_offset = 4;
  cc.meta_data = parquet::ColumnMetaData{.type = Type::kInt32, .encodings = {parquet::Encoding::kPlain, parquet::Encoding::kRle},
                                         .path_in_schema = {"v"}, .codec = Codec::kSnappy, .num_values = rows,
                                         .total_uncompressed_size = static_cast<int64_t>(header.size()) + h.uncompressed_page_size,
                                         .total_compressed_size = static_cast<int64_t>(file.size() - 4),
                                         .data_page_offset = 4};
  m.row_groups.push_back({.columns = {cc}, .total_byte_size = 40, .num_rows = rows});
  std::string footer;
  parquet::SerializeFileMetaData(m, &footer);
  uint8_t len[4];
  StoreLE<uint32_t>(len, static_cast<uint32_t>(footer.size()));
  file += footer + std::string(reinterpret_cast<char*>(len), 4) + "PAR1";
  std::string path = dir.File("v2.parquet");
  EXPECT_TRUE(WriteFileAtomically(LocalStorage(), path, AsBytes(file)).ok());
  return path;
}

TEST(ParquetForeign, ReadsDataPageV2WithNullsAndSnappyValues) {
  TempDir dir;
  const std::vector<uint8_t> defined = {1, 0, 1, 1, 0, 1, 1, 1, 0, 1};
  const std::vector<int32_t> present = {10, 30, 40, 60, 70, 80, 100};
  auto r = ParquetReader::Open(LocalStorage(), WriteV2Int32File(dir, defined, present));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto v = (*r)->ReadColumn(0);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(std::get<std::vector<int32_t>>(v->values), present);
  EXPECT_EQ(v->defined, defined);
}

TEST(ParquetForeign, ReadsADataPageV2OfOnlyNullsWithAnEmptyValuesSection) {
  TempDir dir;
  auto r = ParquetReader::Open(LocalStorage(), WriteV2Int32File(dir, {0, 0, 0}, {}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto v = (*r)->ReadColumn(0);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_TRUE(std::get<std::vector<int32_t>>(v->values).empty());
  EXPECT_EQ(v->defined, (std::vector<uint8_t>{0, 0, 0}));
}

// A file of 2 row groups of 5 rows (columns "id" INT64 and "name" STRING), as stoke writes it.
std::string WriteTwoRowGroups(TempDir& dir) {
  const std::string path = dir.File("two.parquet");
  std::vector<ColumnSpec> cols = {{.name = "id", .type = Type::kInt64},
                                  {.name = "name", .type = Type::kByteArray, .is_string = true}};
  auto w = ParquetFileWriter::Create(LocalStorage(), path, cols, WriterOptions{});
  EXPECT_TRUE(w.ok());
  for (int g = 0; g < 2; ++g) {
    std::vector<int64_t> ids;
    std::vector<std::string> names;
    for (int i = 0; i < 5; ++i) {
      ids.push_back(g * 5 + i);
      names.push_back("n" + std::to_string(g * 5 + i));
    }
    RowGroupEncoder enc((*w)->columns(), (*w)->options());
    EXPECT_TRUE(enc.SetScalars(0, ColumnValues{std::move(ids), {}}).ok());
    EXPECT_TRUE(enc.SetScalars(1, ColumnValues{std::move(names), {}}).ok());
    auto rg = enc.Finish();
    EXPECT_TRUE(rg.ok());
    EXPECT_TRUE((*w)->WriteRowGroup(std::move(*rg)).ok());
  }
  EXPECT_TRUE((*w)->Close().ok());
  return path;
}

std::vector<int64_t> Ids(const std::string& path) {
  auto r = ParquetReader::Open(LocalStorage(), path);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return {};
  auto v = (*r)->ReadColumn(0);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return v.ok() ? std::get<std::vector<int64_t>>(v->values) : std::vector<int64_t>{};
}

// Row groups of 7 rows (the last 4) of an optional BYTE_ARRAY column "b", every third row null, in
// pages of 3 rows, compressed with `codec`; values of growing length, some empty.
std::string WriteOptionalBinary(TempDir& dir, Codec codec, std::vector<std::string>* values, std::vector<uint8_t>* defined) {
  const std::string path = dir.File("binary.parquet");
  WriterOptions wo;
  wo.codec = codec;
  wo.min_codec_saving = 0;
  wo.scalar_page_rows = 3;
  auto w = ParquetFileWriter::Create(LocalStorage(), path, {{.name = "b", .type = Type::kByteArray, .optional = true}}, wo);
  EXPECT_TRUE(w.ok());
  for (int first = 0; first < 18; first += 7) {
    ColumnValues group{std::vector<std::string>{}, {}};
    auto& strings = std::get<std::vector<std::string>>(group.values);
    for (int row = first; row < std::min(first + 7, 18); ++row) {
      group.defined.push_back(row % 3 != 1);
      defined->push_back(group.defined.back());
      if (!group.defined.back()) continue;
      strings.push_back(std::string(static_cast<size_t>(row * 37 % 50), static_cast<char>('a' + row)));
      values->push_back(strings.back());
    }
    RowGroupEncoder enc((*w)->columns(), (*w)->options());
    EXPECT_TRUE(enc.SetScalars(0, std::move(group)).ok());
    auto rg = enc.Finish();
    EXPECT_TRUE(rg.ok());
    EXPECT_TRUE((*w)->WriteRowGroup(std::move(*rg)).ok());
  }
  EXPECT_TRUE((*w)->Close().ok());
  return path;
}

// Checks `got`'s rows against rows *row.. of `defined` and values *value.. of `values`, moving both.
void ExpectRows(const ByteArrayChunk& got, const std::vector<uint8_t>& defined, const std::vector<std::string>& values,
                size_t* row, size_t* value) {
  for (uint32_t at : got.offsets) {
    ASSERT_LT(*row, defined.size());
    ASSERT_EQ(at == ByteArrayChunk::kNull, !defined[*row]) << "row " << *row;
    ++*row;
    if (at == ByteArrayChunk::kNull) continue;
    uint32_t length = 0;
    std::memcpy(&length, got.body.data() + at, sizeof(length));
    ASSERT_LT(*value, values.size());
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(got.body.data()) + at + 4, length), values[(*value)++]);
  }
}

TEST(ParquetForeign, AByteArrayChunkIsFoundInPlaceWithItsNulls) {
  for (Codec codec : {Codec::kUncompressed, Codec::kSnappy, Codec::kZstd}) {
    TempDir dir;
    std::vector<std::string> values;
    std::vector<uint8_t> defined;
    auto r = ParquetReader::Open(LocalStorage(), WriteOptionalBinary(dir, codec, &values, &defined));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ((*r)->num_row_groups(), 3);
    size_t row = 0, value = 0;
    for (int g = 0; g < 3; ++g) {
      ByteArrayChunk chunk;
      ASSERT_TRUE((*r)->ReadByteArrayChunk(g, 0, &chunk).ok()) << g;
      ASSERT_EQ(chunk.offsets.size(), g < 2 ? 7u : 4u);
      ExpectRows(chunk, defined, values, &row, &value);
    }
    EXPECT_EQ(row, defined.size());
    EXPECT_EQ(value, values.size());
    // Page by page (pages of 3 rows), as ListDataPages finds them: the same rows and values.
    row = 0, value = 0;
    for (int g = 0; g < 3; ++g) {
      auto pages = (*r)->ListDataPages(g, 0);
      ASSERT_TRUE(pages.ok()) << pages.status().ToString();
      const std::vector<int64_t> rows = g < 2 ? std::vector<int64_t>{3, 3, 1} : std::vector<int64_t>{3, 1};
      ASSERT_EQ(pages->size(), rows.size());
      for (size_t k = 0; k < rows.size(); ++k) {
        const DataPageSpan& p = (*pages)[k];
        EXPECT_EQ(p.rows, rows[k]);
        EXPECT_EQ(p.first_row, static_cast<int64_t>(3 * k));
        EXPECT_EQ(p.encoding, parquet::Encoding::kPlain);
        EXPECT_FALSE(p.v2);
        ByteArrayChunk page;
        ASSERT_TRUE((*r)->ReadByteArrayPage(g, 0, static_cast<uint64_t>(p.offset), static_cast<uint64_t>(p.length), &page)
                        .ok());
        EXPECT_EQ(page.offsets.size(), static_cast<size_t>(rows[k]));
        ExpectRows(page, defined, values, &row, &value);
      }
    }
    EXPECT_EQ(row, defined.size());
    EXPECT_EQ(value, values.size());
  }
}

TEST(ParquetForeign, AByteArrayChunkIsRefusedForOtherColumnsAndCutPages) {
  TempDir dir;
  ByteArrayChunk chunk;
  auto ids = ParquetReader::Open(LocalStorage(), WriteTwoRowGroups(dir));
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ((*ids)->ReadByteArrayChunk(0, 0, &chunk).code(), StatusCode::kUnsupported);  // INT64
  EXPECT_EQ((*ids)->ReadByteArrayChunk(5, 1, &chunk).code(), StatusCode::kInvalidArgument);
  // A footer that says the row group has more rows than its pages: Corruption naming the counts.
  std::vector<std::string> values;
  std::vector<uint8_t> defined;
  const std::string path = WriteOptionalBinary(dir, Codec::kUncompressed, &values, &defined);
  testing_support::RewriteFooter(path, [](parquet::FileMetaData& m) { m.row_groups[2].num_rows = 9; });
  auto r = ParquetReader::Open(LocalStorage(), path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Status s = (*r)->ReadByteArrayChunk(2, 0, &chunk);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("pages hold 4 rows, the row group 9"), std::string::npos) << s.ToString();
  const auto listed = (*r)->ListDataPages(2, 0);
  EXPECT_EQ(listed.status().code(), StatusCode::kCorruption);
  EXPECT_NE(listed.status().message().find("the data pages hold 4 rows, the row group 9"), std::string::npos)
      << listed.status().ToString();
  // A page read at an offset that is not a data page's header: Corruption naming the file and the
  // header.
  auto pages = (*r)->ListPages(0, 0);
  ASSERT_TRUE(pages.ok());
  const Status off = (*r)->ReadByteArrayPage(0, 0, static_cast<uint64_t>((*pages)[0].offset) + 1, 64, &chunk);
  EXPECT_EQ(off.code(), StatusCode::kCorruption) << off.ToString();
  EXPECT_NE(off.message().find("binary.parquet: row group 0 column 'b' page header: offset"), std::string::npos)
      << off.ToString();
}

TEST(ParquetForeign, RowGroupsWinOverAFooterRowCountThatDisagrees) {
  TempDir dir;
  const std::string path = WriteTwoRowGroups(dir);
  testing_support::RewriteFooter(path, [](parquet::FileMetaData& m) { m.num_rows = 0; });
  auto r = ParquetReader::Open(LocalStorage(), path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->num_rows(), 10);
  EXPECT_EQ(Ids(path).size(), 10u);
}

TEST(ParquetForeign, AnEmptyRowGroupIsNeverRead) {
  TempDir dir;
  const std::string path = WriteTwoRowGroups(dir);
  testing_support::RewriteFooter(path, [](parquet::FileMetaData& m) {
    parquet::RowGroup empty = m.row_groups[0];
    empty.num_rows = 0;
    for (auto& c : empty.columns) {  // offsets some writers leave in an empty row group
      c.meta_data->data_page_offset = 0;
      c.meta_data->dictionary_page_offset.reset();
      c.meta_data->total_compressed_size = 14;
    }
    m.row_groups.insert(m.row_groups.begin() + 1, empty);
  });
  EXPECT_EQ(Ids(path), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(ParquetForeign, APageRunningPastItsChunkIsReadUpToTheFooter) {
  // Some old writers recorded total_compressed_size short of the chunk's last page (PARQUET-816).
  TempDir dir;
  const std::string path = WriteTwoRowGroups(dir);
  testing_support::RewriteFooter(path, [](parquet::FileMetaData& m) {
    m.row_groups[0].columns[0].meta_data->total_compressed_size -= 3;
  });
  EXPECT_EQ(Ids(path).size(), 10u);
}

TEST(ParquetForeign, EncryptedFilesAreRefusedSayingSo) {
  TempDir dir;
  const std::string path = dir.File("secret.parquet");
  std::string bytes = "PARE" + std::string(64, '\x5a');
  uint8_t len[4];
  StoreLE<uint32_t>(len, 40);
  bytes += std::string(reinterpret_cast<char*>(len), 4) + "PARE";
  ASSERT_TRUE(WriteFileAtomically(LocalStorage(), path, AsBytes(bytes)).ok());
  auto r = ParquetReader::Open(LocalStorage(), path);
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(r.status().message().find("encrypted Parquet file"), std::string::npos) << r.status().ToString();
}

// ---- corrupt files ----

class CorruptFile : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.File("good.parquet");
    data_ = WriteTensorFile(path_, TensorSpec{DType::kFloat32, {30, 30, 10, 10}}, Codec::kZstd, 4, 2);
    bytes_ = *ReadFileToString(LocalStorage(), path_);
  }
  std::string WriteVariant(const std::string& bytes) {
    std::string p = dir_.File("bad.parquet");
    EXPECT_TRUE(WriteFileAtomically(LocalStorage(), p, AsBytes(bytes)).ok());
    return p;
  }
  TempDir dir_;
  std::string path_, bytes_;
  std::vector<std::string> data_;
};

TEST_F(CorruptFile, FlippedByteInAPageIsCaughtByTheCrc) {
  auto r0 = ParquetReader::Open(LocalStorage(), path_);
  ASSERT_TRUE(r0.ok());
  auto oi = (*r0)->ReadOffsetIndex(1, 1);
  ASSERT_TRUE(oi.ok() && oi->has_value());
  const auto& loc = (*oi)->page_locations[1];  // row 3
  std::string bad = bytes_;
  bad[loc.offset + loc.compressed_page_size - 100] ^= 0x01;
  std::string p = WriteVariant(bad);
  auto r = ParquetReader::Open(LocalStorage(), p);
  ASSERT_TRUE(r.ok());
  AlignedBuffer cell;
  Status s = (*r)->ReadBinaryCell(3, 1, &cell);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("CRC mismatch"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("bad.parquet"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("row 3"), std::string::npos) << s.message();
  EXPECT_TRUE((*r)->ReadBinaryCell(2, 1, &cell).ok());  // other rows are fine
  EXPECT_FALSE((*r)->ReadColumn(1).ok());
}

TEST_F(CorruptFile, EveryTruncationGivesAnErrorNotACrash) {
  // Every cut in the last 4 KiB (footer, page indexes) and a spread of cuts through the data.
  std::vector<size_t> cuts;
  for (size_t n = bytes_.size() > 4096 ? bytes_.size() - 4096 : 0; n < bytes_.size(); ++n) cuts.push_back(n);
  for (size_t n = 0; n < bytes_.size(); n += 9973) cuts.push_back(n);
  for (size_t n : cuts) {
    std::string p = WriteVariant(bytes_.substr(0, n));
    auto r = ParquetReader::Open(LocalStorage(), p);
    EXPECT_FALSE(r.ok()) << "truncated to " << n << " bytes opened";
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("bad.parquet"), std::string::npos) << r.status().message();
    }
  }
}

TEST_F(CorruptFile, BadFooterLengthIsNamed) {
  std::string bad = bytes_;
  StoreLE<uint32_t>(reinterpret_cast<uint8_t*>(bad.data() + bad.size() - 8), 0x7fffffff);
  auto r = ParquetReader::Open(LocalStorage(), WriteVariant(bad));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("footer length"), std::string::npos) << r.status().message();
  StoreLE<uint32_t>(reinterpret_cast<uint8_t*>(bad.data() + bad.size() - 8), 3);
  EXPECT_FALSE(ParquetReader::Open(LocalStorage(), WriteVariant(bad)).ok());
}

TEST_F(CorruptFile, NotParquetAtAll) {
  auto r = ParquetReader::Open(LocalStorage(), WriteVariant(std::string(1000, 'x')));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a Parquet file"), std::string::npos);
}

TEST_F(CorruptFile, RandomByteFlipsInTheFooterNeverCrash) {
  Rng rng(99);
  uint32_t footer_len = LoadLE<uint32_t>(reinterpret_cast<const uint8_t*>(bytes_.data() + bytes_.size() - 8));
  size_t footer_start = bytes_.size() - 8 - footer_len;
  int rejected = 0, opened = 0, read_errors = 0;
  for (int i = 0; i < 300; ++i) {
    std::string bad = bytes_;
    bad[footer_start + rng.Below(footer_len)] = static_cast<char>(rng.Next());
    auto r = ParquetReader::Open(LocalStorage(), WriteVariant(bad));
    if (!r.ok()) {
      ++rejected;
      EXPECT_NE(r.status().message().find("bad.parquet"), std::string::npos) << r.status().ToString();
      continue;
    }
    ++opened;
    // When the footer still parses, reading must either succeed or fail cleanly, naming the file.
    AlignedBuffer cell;
    for (int row = 0; row < (*r)->num_rows() && row < 4; ++row) {
      for (size_t c = 0; c < (*r)->columns().size(); ++c) {
        std::vector<Status> reads = {(*r)->ReadColumn(c).status()};
        if ((*r)->columns()[c].type == Type::kByteArray) reads.push_back((*r)->ReadBinaryCell(row, c, &cell));
        for (const Status& st : reads) {
          if (st.ok()) continue;
          ++read_errors;
          EXPECT_NE(st.message().find("bad.parquet"), std::string::npos) << st.ToString();
        }
      }
    }
  }
  // Both outcomes happen: flips in the schema or offsets are refused at open, flips in statistics
  // or names are not (and the data still reads, or fails naming the file).
  EXPECT_GT(rejected, 0);
  EXPECT_GT(opened, 0);
  RecordProperty("rejected", rejected);
  RecordProperty("read_errors", read_errors);
}

}  // namespace
}  // namespace stoke
