#include "loader/binary_cells.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <optional>

#include "format/image.h"
#include "format/npy.h"
#include "format/parquet_nested.h"
#include "format/parquet_writer.h"
#include "io/local_files.h"
#include "stoke/loader.h"

namespace stoke {
namespace {

using json = nlohmann::json;

// A .npy file's bytes: float32 [2, 3], element k = id + k / 10.
std::string NpyOf(int64_t id, std::vector<int64_t> shape = {2, 3}) {
  std::vector<float> v(6);
  for (size_t k = 0; k < v.size(); ++k) v[k] = static_cast<float>(id) + static_cast<float>(k) / 10;
  return EncodeNpyHeader(DType::kFloat32, shape) + std::string(reinterpret_cast<const char*>(v.data()), 24);
}

// A 4x3 RGB PNG whose pixels are id * 10 + k.
std::string PngOf(int64_t id) {
  std::vector<uint8_t> px(4 * 3 * 3);
  for (size_t k = 0; k < px.size(); ++k) px[k] = static_cast<uint8_t>(id * 10 + static_cast<int64_t>(k));
  auto png = EncodePng(ByteView(px.data(), px.size()), 4, 3, 3);
  EXPECT_TRUE(png.ok());
  return *png;
}

// A plain Parquet dataset (no Delta log) of one file, `id` INT64 and `cell` binary, in row groups of
// `per_group` rows and pages of `per_page`; nullopt cells are nulls.
class BinaryDataset {
 public:
  BinaryDataset(const std::vector<std::optional<std::string>>& cells, int64_t per_group, int64_t per_page = 20000) {
    auto tmp = TemporaryDirectory::Create("stoke_binary_cells");
    EXPECT_TRUE(tmp.ok());
    tmp_.emplace(std::move(*tmp));
    const std::vector<ColumnSpec> cols = {{.name = "id", .type = parquet::Type::kInt64},
                                          {.name = "cell", .type = parquet::Type::kByteArray, .optional = true}};
    WriterOptions wo;
    wo.scalar_page_rows = per_page;
    auto w = ParquetFileWriter::Create(LocalStorage(), dir() + "/part-0.parquet", cols, wo);
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    for (size_t g = 0; g < cells.size(); g += static_cast<size_t>(per_group)) {
      RowGroupEncoder enc((*w)->columns(), (*w)->options());
      std::vector<int64_t> ids;
      std::vector<std::string> present;
      std::vector<uint8_t> defined;
      for (size_t r = g; r < std::min(cells.size(), g + static_cast<size_t>(per_group)); ++r) {
        ids.push_back(static_cast<int64_t>(r));
        defined.push_back(cells[r].has_value());
        if (cells[r]) present.push_back(*cells[r]);
      }
      EXPECT_TRUE(enc.SetScalars(0, ColumnValues{ids, {}}).ok());
      EXPECT_TRUE(enc.SetScalars(1, ColumnValues{present, defined}).ok());
      auto rg = enc.Finish();
      EXPECT_TRUE(rg.ok()) << rg.status().ToString();
      EXPECT_TRUE((*w)->WriteRowGroup(std::move(*rg)).ok());
    }
    EXPECT_TRUE((*w)->Close().ok());
  }
  const std::string& dir() const { return tmp_->path(); }

 private:
  std::optional<TemporaryDirectory> tmp_;
};

// Every batch of an epoch over `location` (a global shuffle unless `o` says otherwise), columns id
// and cell; *pages_decoded, when given: the loader's count at the end.
Result<std::vector<Batch>> LoadAll(const std::string& location, LoaderOptions o = {}, int64_t* pages_decoded = nullptr) {
  o.columns = {"id", "cell"};
  o.batch_size = 3;
  STOKE_ASSIGN_OR_RETURN(auto loader, Loader::Open(location, o));
  std::vector<Batch> batches;
  for (;;) {
    STOKE_ASSIGN_OR_RETURN(std::optional<Batch> b, loader->Next());
    if (!b) break;
    batches.push_back(std::move(*b));
  }
  if (pages_decoded != nullptr) *pages_decoded = loader->stats().pages_decoded;
  return batches;
}

int64_t IdAt(const Batch& b, int64_t r) {
  int64_t id;
  std::memcpy(&id, static_cast<const uint8_t*>(b.column("id")->data()) + r * 8, 8);
  return id;
}

TEST(BinaryCells, NpyCellsLoadAsTensorsWithEveryRowsValues) {
  std::vector<std::optional<std::string>> cells;
  for (int64_t id = 0; id < 11; ++id) cells.push_back(NpyOf(id));
  BinaryDataset ds(cells, 4);
  auto batches = LoadAll(ds.dir());
  ASSERT_TRUE(batches.ok()) << batches.status().ToString();
  int64_t seen = 0;
  for (const Batch& b : *batches) {
    const BatchColumn* cell = b.column("cell");
    ASSERT_NE(cell, nullptr);
    EXPECT_EQ(cell->dtype, DType::kFloat32);
    EXPECT_EQ(cell->shape, (std::vector<int64_t>{b.size(), 2, 3}));
    for (int64_t r = 0; r < b.size(); ++r) {
      const std::string want = NpyOf(IdAt(b, r)).substr(NpyOf(0).size() - 24);
      EXPECT_EQ(std::memcmp(static_cast<const uint8_t*>(cell->data()) + r * 24, want.data(), 24), 0);
      ++seen;
    }
  }
  EXPECT_EQ(seen, 11);
}

TEST(BinaryCells, APageIsDecodedAloneAndEveryRowComesFromItsOwn) {
  std::vector<std::optional<std::string>> cells;
  for (int64_t id = 0; id < 60; ++id) cells.push_back(id % 7 == 5 ? std::nullopt : std::optional(NpyOf(id)));
  BinaryDataset ds(cells, 20, 4);  // 3 row groups of 5 pages
  for (auto shuffle : {LoaderOptions::Shuffle::kGlobal, LoaderOptions::Shuffle::kBlock}) {
    LoaderOptions o;
    o.shuffle = shuffle;
    o.on_error = LoaderOptions::OnError::kSkip;  // the nulls
    int64_t pages = 0;
    auto batches = LoadAll(ds.dir(), o, &pages);
    ASSERT_TRUE(batches.ok()) << batches.status().ToString();
    std::vector<int> seen(60, 0);
    for (const Batch& b : *batches) {
      for (int64_t r = 0; r < b.size(); ++r) {
        const int64_t id = IdAt(b, r);
        ++seen[static_cast<size_t>(id)];
        const std::string want = NpyOf(id).substr(NpyOf(0).size() - 24);
        EXPECT_EQ(std::memcmp(static_cast<const uint8_t*>(b.column("cell")->data()) + r * 24, want.data(), 24), 0);
      }
    }
    for (int64_t id = 0; id < 60; ++id) EXPECT_EQ(seen[static_cast<size_t>(id)], id % 7 == 5 ? 0 : 1) << id;
    EXPECT_EQ(pages, 15);  // each page once (the cache holds them all), not its row group's chunk
  }
}

TEST(BinaryCells, ANullOrOtherShapedCellFailsItsRowOrIsSkipped) {
  std::vector<std::optional<std::string>> cells = {NpyOf(0), NpyOf(1), std::nullopt, NpyOf(3), NpyOf(4, {3, 2})};
  BinaryDataset ds(cells, 2);
  auto raised = LoadAll(ds.dir());
  ASSERT_FALSE(raised.ok());
  EXPECT_NE(raised.status().message().find("part-0.parquet row"), std::string::npos) << raised.status().ToString();
  LoaderOptions skip;
  skip.on_error = LoaderOptions::OnError::kSkip;
  auto skipped = LoadAll(ds.dir(), skip);
  ASSERT_TRUE(skipped.ok()) << skipped.status().ToString();
  int64_t rows = 0;
  for (const Batch& b : *skipped) rows += b.size();
  EXPECT_EQ(rows, 3);
}

TEST(BinaryCells, CellsThatAreNeitherNpyNorImagesAreRefusedAtOpenNamingTheColumn) {
  BinaryDataset ds({std::string("PK\x03\x04 a zip"), std::string("x")}, 2);
  auto r = LoadAll(ds.dir());
  ASSERT_EQ(r.status().code(), StatusCode::kUnsupported) << r.status().ToString();
  EXPECT_NE(r.status().message().find("column 'cell'"), std::string::npos) << r.status().ToString();
}

TEST(BinaryCells, PngCellsAndHuggingFaceImageStructsDecodeAsImages) {
  std::vector<std::optional<std::string>> cells;
  for (int64_t id = 0; id < 5; ++id) cells.push_back(PngOf(id));
  BinaryDataset flat(cells, 2);
  // The same images as Hugging Face's Image feature: a struct {bytes, path}.
  SchemaNode bytes{.name = "bytes", .type = parquet::Type::kByteArray};
  SchemaNode path{.name = "path", .type = parquet::Type::kByteArray, .is_string = true};
  SchemaNode id{.name = "id", .repetition = parquet::Repetition::kRequired, .type = parquet::Type::kInt64};
  SchemaNode cell{.name = "cell", .kind = SchemaNode::Kind::kStruct, .children = {bytes, path}};
  SchemaNode root{.name = "schema", .repetition = parquet::Repetition::kRequired, .kind = SchemaNode::Kind::kStruct,
                  .children = {id, cell}};
  std::vector<json> rows;
  for (int64_t i = 0; i < 5; ++i) rows.push_back(json{{"id", i}, {"cell", {{"bytes", *cells[i]}, {"path", "x.png"}}}});
  auto tmp = TemporaryDirectory::Create("stoke_hf_images");
  ASSERT_TRUE(tmp.ok());
  WriterOptions wo;
  wo.row_group_rows = 2;
  ASSERT_TRUE(WriteNestedParquet(LocalStorage(), tmp->path() + "/train-0.parquet", root, rows, wo).ok());
  for (const std::string& location : {flat.dir(), tmp->path() + "/train-*.parquet"}) {
    auto batches = LoadAll(location);
    ASSERT_TRUE(batches.ok()) << location << ": " << batches.status().ToString();
    int64_t seen = 0;
    for (const Batch& b : *batches) {
      const BatchColumn* c = b.column("cell");
      ASSERT_NE(c, nullptr);
      EXPECT_EQ(c->dtype, DType::kUInt8);
      EXPECT_EQ(c->shape, (std::vector<int64_t>{b.size(), 3, 4, 3}));  // [H, W, C]
      for (int64_t r = 0; r < b.size(); ++r) {
        const auto* px = static_cast<const uint8_t*>(c->data()) + r * 36;
        for (int64_t k = 0; k < 36; ++k) EXPECT_EQ(px[k], static_cast<uint8_t>(IdAt(b, r) * 10 + k)) << location;
        ++seen;
      }
    }
    EXPECT_EQ(seen, 5) << location;
  }
}

}  // namespace
}  // namespace stoke
