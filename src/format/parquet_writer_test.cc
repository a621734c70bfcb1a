// The writer's choices: the codec of each column chunk (WriterOptions::min_codec_saving, and
// sample_codec_min_saving for tensor chunks under `auto`) and the page layout of tensor columns.
// Reading back byte for byte is checked in parquet_reader_test.cc.
#include "format/parquet_writer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "core/random.h"
#include "format/codec.h"
#include "format/parquet_reader.h"

namespace stoke {
namespace {

using parquet::Codec;
using parquet::Type;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = std::filesystem::temp_directory_path() / "stoke_writer_XXXXXX";
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Random bits: nothing to compress (noisy float data, such as the seed volumes, saves a few percent).
std::string NoiseTensor(Rng& rng, size_t floats) {
  std::string s(floats * 4, '\0');
  for (size_t i = 0; i < floats; ++i) {
    uint32_t bits = static_cast<uint32_t>(rng.Next());
    std::memcpy(s.data() + i * 4, &bits, 4);
  }
  return s;
}

// A tensor that compresses well: a few distinct values in long runs.
std::string SmoothTensor(size_t floats, int row) {
  std::string s(floats * 4, '\0');
  for (size_t i = 0; i < floats; ++i) {
    float f = static_cast<float>((i / 64 + row) % 4);
    std::memcpy(s.data() + i * 4, &f, 4);
  }
  return s;
}

struct Written {
  std::vector<std::string> rows;
  std::string path;
};

// Writes one row group of (id INT64, label INT32, t float32[floats]) with tensors from `make`.
template <typename Make>
Written WriteFile(const TempDir& dir, const std::string& name, size_t floats, int rows, WriterOptions opts, Make make) {
  Written w;
  w.path = dir.File(name);
  std::vector<ColumnSpec> cols = {{.name = "id", .type = Type::kInt64},
                                  {.name = "label", .type = Type::kInt32},
                                  {.name = "t", .type = Type::kByteArray,
                                   .tensor = TensorSpec{DType::kFloat32, {static_cast<int64_t>(floats)}}}};
  auto writer = ParquetFileWriter::Create(LocalStorage(), w.path, cols, opts);
  EXPECT_TRUE(writer.ok()) << writer.status().ToString();
  RowGroupEncoder enc((*writer)->columns(), (*writer)->options());
  std::vector<int64_t> ids;
  std::vector<int32_t> labels;
  for (int r = 0; r < rows; ++r) {
    w.rows.push_back(make(r));
    EXPECT_TRUE(enc.AppendTensor(2, AsBytes(w.rows.back())).ok());
    ids.push_back(r);
    labels.push_back(r % 2);
  }
  EXPECT_TRUE(enc.SetScalars(0, ColumnValues{ids, {}}).ok());
  EXPECT_TRUE(enc.SetScalars(1, ColumnValues{labels, {}}).ok());
  auto rg = enc.Finish();
  EXPECT_TRUE(rg.ok()) << rg.status().ToString();
  EXPECT_TRUE((*writer)->WriteRowGroup(std::move(*rg)).ok());
  EXPECT_TRUE((*writer)->Close().ok());
  return w;
}

const parquet::ColumnMetaData& ChunkMeta(const ParquetReader& r, size_t column) {
  return *r.metadata().row_groups[0].columns[column].meta_data;
}

std::optional<nlohmann::json> CodecChoice(const parquet::ColumnMetaData& m) {
  for (const auto& kv : m.key_value_metadata) {
    if (kv.key == kCodecChoiceKey && kv.value) return nlohmann::json::parse(*kv.value);
  }
  return std::nullopt;
}

void ExpectRowsReadBack(const Written& w, size_t column) {
  auto r = ParquetReader::Open(LocalStorage(), w.path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  AlignedBuffer cell;
  for (size_t i = 0; i < w.rows.size(); ++i) {
    ASSERT_TRUE((*r)->ReadBinaryCell(static_cast<int64_t>(i), column, &cell).ok());
    ASSERT_EQ(std::string(reinterpret_cast<const char*>(cell.data()), cell.size()), w.rows[i]) << "row " << i;
  }
}

TEST(CodecChoice, NoisyFloatTensorsAreStoredUncompressedAndLabelsCompressed) {
  TempDir dir;
  Rng rng(7);
  Written w = WriteFile(dir, "noise.parquet", 9000, 40, WriterOptions{}, [&](int) { return NoiseTensor(rng, 9000); });
  auto r = ParquetReader::Open(LocalStorage(), w.path);
  ASSERT_TRUE(r.ok());
  const auto& tensor = ChunkMeta(**r, 2);
  EXPECT_EQ(tensor.codec, Codec::kUncompressed);
  auto why = CodecChoice(tensor);
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ((*why)["requested"], "ZSTD");
  EXPECT_EQ((*why)["chosen"], "UNCOMPRESSED");
  // The trial stops at the first page that brings it past codec_trial_bytes (36,000 bytes a page).
  EXPECT_GE((*why)["trial_bytes"].get<int64_t>(), WriterOptions{}.codec_trial_bytes);
  EXPECT_LT((*why)["trial_bytes"].get<int64_t>(), WriterOptions{}.codec_trial_bytes + 36008);
  EXPECT_GT((*why)["trial_compressed_bytes"].get<double>(), 0.9 * (*why)["trial_bytes"].get<double>());
  // Every page of the chunk is stored as it is: stored size == uncompressed size.
  EXPECT_EQ(tensor.total_compressed_size, tensor.total_uncompressed_size);
  EXPECT_EQ(ChunkMeta(**r, 1).codec, Codec::kZstd);  // 0/1 labels shrink by far more than 10 %
  ExpectRowsReadBack(w, 2);
}

TEST(CodecChoice, CompressibleTensorsKeepTheCodec) {
  TempDir dir;
  Written w = WriteFile(dir, "smooth.parquet", 9000, 40, WriterOptions{}, [&](int r) { return SmoothTensor(9000, r); });
  auto r = ParquetReader::Open(LocalStorage(), w.path);
  ASSERT_TRUE(r.ok());
  const auto& tensor = ChunkMeta(**r, 2);
  EXPECT_EQ(tensor.codec, Codec::kZstd);
  auto why = CodecChoice(tensor);
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ((*why)["chosen"], "ZSTD");
  EXPECT_LT(tensor.total_compressed_size, tensor.total_uncompressed_size / 10);
  // Pages held during the trial and pages written after it are all read back.
  ExpectRowsReadBack(w, 2);
}

TEST(CodecChoice, ChunkShorterThanTheTrialIsDecidedOnWhatItHas) {
  TempDir dir;
  Rng rng(3);
  Written w = WriteFile(dir, "short.parquet", 100, 5, WriterOptions{}, [&](int) { return NoiseTensor(rng, 100); });
  auto r = ParquetReader::Open(LocalStorage(), w.path);
  ASSERT_TRUE(r.ok());
  auto why = CodecChoice(ChunkMeta(**r, 2));
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ((*why)["trial_bytes"].get<int64_t>(), 5 * (400 + 4));  // length prefix + values, all five pages
  ExpectRowsReadBack(w, 2);
}

TEST(CodecChoice, IsAFunctionOfTheBytes) {
  TempDir dir;
  auto make = [](uint64_t seed) {
    return [rng = Rng(seed)](int r) mutable { return r % 3 == 0 ? SmoothTensor(3000, r) : NoiseTensor(rng, 3000); };
  };
  Written a = WriteFile(dir, "a.parquet", 3000, 200, WriterOptions{}, make(11));
  Written b = WriteFile(dir, "b.parquet", 3000, 200, WriterOptions{}, make(11));
  auto ra = ReadFileToString(LocalStorage(), a.path);
  auto rb = ReadFileToString(LocalStorage(), b.path);
  ASSERT_TRUE(ra.ok() && rb.ok());
  EXPECT_EQ(*ra, *rb);
}

TEST(CodecChoice, ExplicitCodecIsAlwaysUsedAndNotAnnotated) {
  TempDir dir;
  Rng rng(5);
  WriterOptions forced;
  ASSERT_TRUE(SetCodecPolicy("zstd", &forced).ok());
  Written w = WriteFile(dir, "forced.parquet", 9000, 6, forced, [&](int) { return NoiseTensor(rng, 9000); });
  auto r = ParquetReader::Open(LocalStorage(), w.path);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(ChunkMeta(**r, 2).codec, Codec::kZstd);
  EXPECT_FALSE(CodecChoice(ChunkMeta(**r, 2)).has_value());
  ExpectRowsReadBack(w, 2);
}

WriterOptions AutoPolicy() {
  WriterOptions o;
  EXPECT_TRUE(SetCodecPolicy("auto", &o).ok());
  return o;
}

TEST(CodecChoice, AutoKeepsZstdForSamplePagesOnlyWhereTheyAreLargeAndShrinkALot) {
  TempDir dir;
  // 36 KB pages that ZSTD shrinks by over 90 %: below 64 KiB a read costs a request whatever its
  // size, so the tensor stays uncompressed; the labels are compressed as before.
  Written small = WriteFile(dir, "small.parquet", 9000, 40, AutoPolicy(), [&](int r) { return SmoothTensor(9000, r); });
  auto r = ParquetReader::Open(LocalStorage(), small.path);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(ChunkMeta(**r, 2).codec, Codec::kUncompressed);
  EXPECT_EQ(ChunkMeta(**r, 1).codec, Codec::kZstd);
  auto why = CodecChoice(ChunkMeta(**r, 2));
  ASSERT_TRUE(why.has_value());
  EXPECT_DOUBLE_EQ((*why)["min_saving"].get<double>(), kSampleCodecMinSaving);
  EXPECT_EQ((*why)["min_page_bytes"].get<int64_t>(), kSampleCodecMinPageBytes);
  EXPECT_EQ((*why)["trial_pages"].get<int64_t>(), 30);  // 30 pages of 36,004 bytes pass the 1 MiB trial
  EXPECT_LT((*why)["trial_compressed_bytes"].get<double>(), 0.1 * (*why)["trial_bytes"].get<double>());
  EXPECT_FALSE(CodecChoice(ChunkMeta(**r, 1)).value().contains("trial_pages"));
  ExpectRowsReadBack(small, 2);

  // 80 KB pages that shrink by over 90 %: kept.
  Written large = WriteFile(dir, "large.parquet", 20000, 20, AutoPolicy(), [&](int r) { return SmoothTensor(20000, r); });
  r = ParquetReader::Open(LocalStorage(), large.path);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(ChunkMeta(**r, 2).codec, Codec::kZstd);
  ExpectRowsReadBack(large, 2);

  // 80 KB pages, half noise and half zeros (ZSTD saves about half): not enough.
  Rng rng(9);
  Written half = WriteFile(dir, "half.parquet", 20000, 20, AutoPolicy(),
                           [&](int) { return NoiseTensor(rng, 10000) + std::string(40000, '\0'); });
  r = ParquetReader::Open(LocalStorage(), half.path);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(ChunkMeta(**r, 2).codec, Codec::kUncompressed);
  why = CodecChoice(ChunkMeta(**r, 2));
  ASSERT_TRUE(why.has_value());
  const double saved = 1 - (*why)["trial_compressed_bytes"].get<double>() / (*why)["trial_bytes"].get<double>();
  EXPECT_GT(saved, 0.4);
  EXPECT_LT(saved, kSampleCodecMinSaving);
  ExpectRowsReadBack(half, 2);
}

TEST(CodecChoice, TheRecordedChoiceReadsAsText) {
  EXPECT_EQ(CodecChoiceText(R"({"requested":"ZSTD","chosen":"UNCOMPRESSED","trial_bytes":1048576,)"
                            R"("trial_compressed_bytes":419430,"min_saving":0.75,"trial_pages":4,"min_page_bytes":65536})"),
            "ZSTD saved 60.0 % of the first 1.0 MiB (4 pages of 256.0 KiB on average); kept when >= 75 % and pages "
            "average >= 64.0 KiB");
  EXPECT_EQ(CodecChoiceText(R"({"requested":"ZSTD","chosen":"ZSTD","trial_bytes":2048,"trial_compressed_bytes":1024,)"
                            R"("min_saving":0.1})"),
            "ZSTD saved 50.0 % of the first 2.0 KiB; kept when >= 10 %");
  EXPECT_EQ(CodecChoiceText("not json"), "");
  EXPECT_EQ(CodecChoiceText(R"({"trial_bytes":0})"), "");
}

TEST(CodecChoice, PolicyNames) {
  WriterOptions o;
  ASSERT_TRUE(SetCodecPolicy("AUTO", &o).ok());
  EXPECT_EQ(o.codec, Codec::kZstd);
  EXPECT_DOUBLE_EQ(o.min_codec_saving, 0.10);
  EXPECT_DOUBLE_EQ(o.sample_codec_min_saving, kSampleCodecMinSaving);
  EXPECT_EQ(o.sample_codec_min_page_bytes, kSampleCodecMinPageBytes);
  ASSERT_TRUE(SetCodecPolicy("uncompressed", &o).ok());
  EXPECT_EQ(o.codec, Codec::kUncompressed);
  EXPECT_EQ(o.min_codec_saving, 0);
  EXPECT_EQ(o.sample_codec_min_saving, 0);
  EXPECT_EQ(o.sample_codec_min_page_bytes, 0);
  ASSERT_TRUE(SetCodecPolicy("lz4_raw", &o).ok());
  EXPECT_EQ(o.codec, Codec::kLz4Raw);
  Status bad = SetCodecPolicy("brotli", &o);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("auto"), std::string::npos) << bad.message();
}

TEST(TensorPages, EveryRowIsAPageOfItsOwnByDefault) {
  TempDir dir;
  Rng rng(9);
  Written w = WriteFile(dir, "small.parquet", 128, 300, WriterOptions{}, [&](int) { return NoiseTensor(rng, 128); });
  auto r = ParquetReader::Open(LocalStorage(), w.path);
  ASSERT_TRUE(r.ok());
  auto oi = (*r)->ReadOffsetIndex(0, 2);
  ASSERT_TRUE(oi.ok() && oi->has_value());
  ASSERT_EQ((*oi)->page_locations.size(), 300u);
  for (size_t i = 0; i < 300; ++i) EXPECT_EQ((*oi)->page_locations[i].first_row_index, static_cast<int64_t>(i));
  ExpectRowsReadBack(w, 2);
}

TEST(TensorPages, SmallRowsArePackedWhenAsked) {
  TempDir dir;
  Rng rng(9);
  WriterOptions packed;
  packed.small_tensor_page_bytes = 4096;
  Written w = WriteFile(dir, "packed.parquet", 128, 300, packed, [&](int) { return NoiseTensor(rng, 128); });
  auto r = ParquetReader::Open(LocalStorage(), w.path);
  ASSERT_TRUE(r.ok());
  auto oi = (*r)->ReadOffsetIndex(0, 2);
  ASSERT_TRUE(oi.ok() && oi->has_value());
  EXPECT_EQ((*oi)->page_locations.size(), 38u);  // 8 rows of 516 bytes reach 4096; 300 = 37 * 8 + 4
  ExpectRowsReadBack(w, 2);
}

// Blob columns (encoded images): variable-length values laid out as tensors are.
TEST(BlobPages, EveryValueIsAPageWithItsCrcInTheOffsetIndex) {
  TempDir dir;
  Rng rng(21);
  const std::string path = dir.File("blobs.parquet");
  std::vector<ColumnSpec> cols = {{.name = "id", .type = Type::kInt64}, {.name = "b", .type = Type::kByteArray, .blob = true}};
  std::vector<std::string> values;
  for (int r = 0; r < 25; ++r) values.push_back(NoiseTensor(rng, 1000 + 997 * static_cast<size_t>(r)).substr(0, 3000 + 2001 * r));
  values[3].clear();  // an empty value is a value too
  auto writer = ParquetFileWriter::Create(LocalStorage(), path, cols);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  RowGroupEncoder enc((*writer)->columns(), (*writer)->options());
  std::vector<int64_t> ids;
  for (int r = 0; r < 25; ++r) {
    ASSERT_TRUE(enc.AppendTensor(1, AsBytes(values[r])).ok());
    ids.push_back(r);
  }
  EXPECT_EQ(enc.SetScalars(1, ColumnValues{std::vector<std::string>{}, {}}).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(enc.SetScalars(0, ColumnValues{ids, {}}).ok());
  auto rg = enc.Finish();
  ASSERT_TRUE(rg.ok()) << rg.status().ToString();
  ASSERT_TRUE((*writer)->WriteRowGroup(std::move(*rg)).ok());
  ASSERT_TRUE((*writer)->Close().ok());

  auto r = ParquetReader::Open(LocalStorage(), path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const LeafColumn& col = (*r)->columns()[1];
  EXPECT_TRUE(col.blob);
  EXPECT_FALSE(col.is_string);
  EXPECT_FALSE(col.tensor.has_value());
  bool listed = false;
  for (const auto& kv : (*r)->metadata().key_value_metadata) {
    if (kv.key == kBlobsMetadataKey) listed = kv.value == std::optional<std::string>("[\"b\"]");
  }
  EXPECT_TRUE(listed);
  const auto& meta = ChunkMeta(**r, 1);
  EXPECT_EQ(meta.codec, Codec::kUncompressed);  // random bytes: the auto codec gives up on them
  ASSERT_TRUE(meta.statistics.has_value());
  EXPECT_EQ(meta.statistics->null_count, 0);
  EXPECT_FALSE(meta.statistics->min_value.has_value() || meta.statistics->max_value.has_value());
  auto ci = (*r)->ReadColumnIndex(0, 1);
  ASSERT_TRUE(ci.ok());
  EXPECT_FALSE(ci->has_value());
  auto oi = (*r)->ReadOffsetIndex(0, 1);
  ASSERT_TRUE(oi.ok() && oi->has_value());
  ASSERT_EQ((*oi)->page_locations.size(), 25u);
  auto pages = (*r)->ListPages(0, 1);
  ASSERT_TRUE(pages.ok());
  ASSERT_EQ(pages->size(), 25u);
  auto file = ReadFileToString(LocalStorage(), path);
  ASSERT_TRUE(file.ok());
  for (size_t i = 0; i < 25; ++i) {
    const PageInfo& p = (*pages)[i];
    const auto& loc = (*oi)->page_locations[i];
    EXPECT_EQ(loc.offset, p.offset);
    EXPECT_EQ(loc.first_row_index, static_cast<int64_t>(i));
    EXPECT_EQ(loc.compressed_page_size, p.header_size + p.header.compressed_page_size);
    // The body: the 4-byte length, then the value's bytes; its CRC in the header.
    const std::string body = file->substr(static_cast<size_t>(p.offset + p.header_size), p.header.compressed_page_size);
    ASSERT_EQ(body.size(), 4 + values[i].size());
    EXPECT_EQ(LoadLE<uint32_t>(AsBytes(body).data()), values[i].size());
    EXPECT_EQ(body.substr(4), values[i]);
    ASSERT_TRUE(p.header.crc.has_value());
    EXPECT_EQ(static_cast<uint32_t>(*p.header.crc), Crc32(AsBytes(body)));
    ASSERT_TRUE(p.header.data_page_header.has_value());
    EXPECT_EQ(p.header.data_page_header->num_values, 1);
  }
  Written w{values, path};
  ExpectRowsReadBack(w, 1);
}

TEST(BlobPages, SchemaRulesForBlobColumns) {
  auto check = [](ColumnSpec c) { return ValidateColumns({{.name = "id", .type = Type::kInt64}, c}).code(); };
  EXPECT_EQ(check({.name = "b", .type = Type::kByteArray, .blob = true}), StatusCode::kOk);
  EXPECT_EQ(check({.name = "b", .type = Type::kByteArray, .optional = true, .blob = true}), StatusCode::kInvalidArgument);
  EXPECT_EQ(check({.name = "b", .type = Type::kByteArray, .is_string = true, .blob = true}), StatusCode::kInvalidArgument);
  EXPECT_EQ(check({.name = "b", .type = Type::kInt64, .blob = true}), StatusCode::kInvalidArgument);
  EXPECT_EQ(check({.name = "b", .type = Type::kByteArray, .tensor = TensorSpec{DType::kUInt8, {4}}, .blob = true}),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace stoke
