// Image sources end to end: ImageFolder and labels-CSV layouts into a table, byte for byte; appends
// with new classes; resuming; optimize; bad images.
#include "ingest/image_source.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <map>
#include <set>

#include "core/random.h"
#include "format/image.h"
#include "format/parquet_reader.h"
#include "ingest/source.h"
#include "io/fault_storage.h"
#include "io/object_storage.h"
#include "io/object_store_testing.h"
#include "io/uri.h"
#include "stoke/ingest.h"
#include "stoke/maintenance.h"
#include "stoke/tools.h"
#include "table/delta_log.h"
#include "table/sample_index.h"

namespace stoke {
namespace {

namespace fsys = std::filesystem;

// One row of an image table, as read back.
struct ImageRow {
  int64_t id;
  std::string file;
  int32_t label;  // -1 without a label column
  int32_t width, height, channels;
  std::string image;
};

class ImageIngestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = fsys::temp_directory_path() / "stoke_images_XXXXXX";
    dir_ = mkdtemp(tmpl.data());
    src_ = dir_ + "/src";
    table_ = dir_ + "/table";
  }
  void TearDown() override { fsys::remove_all(dir_); }

  // Writes src/<rel> as a noisy JPEG (or PNG) of w x h x channels; returns its bytes.
  std::string AddImage(const std::string& rel, int w, int h, int channels = 3, bool png = false) {
    Rng rng(std::hash<std::string>()(rel));
    std::vector<uint8_t> pixels(static_cast<size_t>(w) * h * channels);
    for (auto& p : pixels) p = static_cast<uint8_t>(rng.Next());
    auto bytes = png ? EncodePng(ByteView(pixels.data(), pixels.size()), w, h, channels)
                     : EncodeJpeg(ByteView(pixels.data(), pixels.size()), w, h, channels, 85);
    EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
    fsys::create_directories(fsys::path(src_ + "/" + rel).parent_path());
    EXPECT_TRUE(WriteFileAtomically(LocalStorage(), src_ + "/" + rel, AsBytes(*bytes)).ok());
    sources_[rel] = *bytes;
    return *bytes;
  }
  IngestOptions Options() {
    IngestOptions o;
    o.source_dir = src_;
    o.table_dir = table_;
    o.progress = false;
    return o;
  }
  delta::Snapshot Snapshot() {
    auto snap = delta::DeltaLog(LocalStorage(), table_).ReadSnapshot(std::nullopt);
    EXPECT_TRUE(snap.ok()) << snap.status().ToString();
    return *snap;
  }
  // Every row of the table's current version, sorted by id, the image read cell by cell.
  std::vector<ImageRow> Rows() {
    std::vector<ImageRow> rows;
    for (const auto& f : Snapshot().files) {
      auto r = ParquetReader::Open(LocalStorage(), table_ + "/" + *delta::DecodePath(f.path));
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      auto column = [&](const char* name) -> std::optional<ColumnValues> {
        auto idx = (*r)->FindColumn(name);
        if (!idx.ok()) return std::nullopt;
        auto v = (*r)->ReadColumn(*idx);
        EXPECT_TRUE(v.ok()) << v.status().ToString();
        return *v;
      };
      auto ids = std::get<std::vector<int64_t>>(column("id")->values);
      auto files = std::get<std::vector<std::string>>(column("file")->values);
      auto label = column("label");
      auto w = std::get<std::vector<int32_t>>(column("width")->values);
      auto h = std::get<std::vector<int32_t>>(column("height")->values);
      auto c = std::get<std::vector<int32_t>>(column("channels")->values);
      const size_t image_col = *(*r)->FindColumn("image");
      EXPECT_TRUE((*r)->columns()[image_col].blob);
      for (size_t i = 0; i < ids.size(); ++i) {
        AlignedBuffer cell;
        EXPECT_TRUE((*r)->ReadBinaryCell(static_cast<int64_t>(i), image_col, &cell).ok());
        rows.push_back({ids[i], files[i], label ? std::get<std::vector<int32_t>>(label->values)[i] : -1, w[i], h[i], c[i],
                        std::string(AsChars(cell.view()))});
      }
    }
    std::sort(rows.begin(), rows.end(), [](const ImageRow& a, const ImageRow& b) { return a.id < b.id; });
    return rows;
  }
  std::string Config(const char* key) {
    auto snap = Snapshot();
    auto it = snap.metadata.configuration.find(key);
    return it == snap.metadata.configuration.end() ? "" : it->second;
  }

  std::string dir_, src_, table_;
  std::map<std::string, std::string> sources_;  // relative path -> bytes
};

TEST_F(ImageIngestTest, ImageFolderBecomesATableByteForByte) {
  AddImage("cat/1.jpg", 40, 30);
  AddImage("cat/2.jpg", 17, 90, 1);
  AddImage("dog/x/3.png", 33, 21, 4, /*png=*/true);
  AddImage("dog/4.jpg", 64, 64);
  IngestOptions o = Options();
  o.rows_per_file = 3;
  auto r = IngestSources(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rows, 4);
  auto rows = Rows();
  ASSERT_EQ(rows.size(), 4u);
  const std::vector<std::tuple<std::string, int, int, int, int>> want = {
      {"cat/1.jpg", 0, 40, 30, 3}, {"cat/2.jpg", 0, 17, 90, 1}, {"dog/4.jpg", 1, 64, 64, 3}, {"dog/x/3.png", 1, 33, 21, 4}};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(rows[i].id, static_cast<int64_t>(i));
    EXPECT_EQ(rows[i].file, std::get<0>(want[i]));
    EXPECT_EQ(rows[i].label, std::get<1>(want[i]));
    EXPECT_EQ(rows[i].width, std::get<2>(want[i]));
    EXPECT_EQ(rows[i].height, std::get<3>(want[i]));
    EXPECT_EQ(rows[i].channels, std::get<4>(want[i]));
    EXPECT_EQ(rows[i].image, sources_[rows[i].file]) << rows[i].file;  // the encoded bytes, unchanged
  }
  EXPECT_EQ(Config(kClassesMetadataKey), R"({"label":["cat","dog"]})");
  EXPECT_EQ(Config(kImagesMetadataKey), R"({"image":{"formats":["jpeg","png"]}})");
  EXPECT_EQ(Config(kBlobsMetadataKey), R"(["image"])");
  // Every data file's footer carries the same metadata, and one page per image.
  for (const auto& f : Snapshot().files) {
    auto reader = ParquetReader::Open(LocalStorage(), table_ + "/" + f.path);
    ASSERT_TRUE(reader.ok());
    std::map<std::string, std::string> kv;
    for (const auto& e : (*reader)->metadata().key_value_metadata) kv[e.key] = e.value.value_or("");
    EXPECT_EQ(kv[kClassesMetadataKey], R"({"label":["cat","dog"]})");
    EXPECT_EQ(kv[kImagesMetadataKey], R"({"image":{"formats":["jpeg","png"]}})");
    EXPECT_EQ(kv[kBlobsMetadataKey], R"(["image"])");
    const size_t image_col = *(*reader)->FindColumn("image");
    for (int g = 0; g < (*reader)->num_row_groups(); ++g) {
      auto oi = (*reader)->ReadOffsetIndex(g, image_col);
      ASSERT_TRUE(oi.ok() && oi->has_value());
      EXPECT_EQ(static_cast<int64_t>((*oi)->page_locations.size()), (*reader)->metadata().row_groups[g].num_rows);
      // Noisy JPEG and PNG bytes do not compress: the automatic codec stores them as they are.
      EXPECT_EQ((*reader)->metadata().row_groups[g].columns[image_col].meta_data->codec, parquet::Codec::kUncompressed);
    }
  }
  // The sample index locates each image's page (the loader's future one read per image).
  auto idx = SampleIndex::Open(table_);
  ASSERT_TRUE(idx.ok()) << idx.status().ToString();
  EXPECT_EQ(idx->tensor_columns(), std::vector<std::string>{"image"});
  for (int64_t row = 0; row < 4; ++row) EXPECT_EQ(idx->Find(row, 0).rows_in_page, 1u);
  // Re-running finds nothing to do.
  auto again = IngestSources(Options());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->files_added, 0);
  EXPECT_EQ(again->skipped, 4);
}

TEST_F(ImageIngestTest, AppendKeepsClassIndexesAndAddsNewClassesAfterThem) {
  AddImage("cat/1.jpg", 20, 20);
  AddImage("dog/2.jpg", 20, 20);
  ASSERT_TRUE(IngestSources(Options()).ok());
  AddImage("cat/3.jpg", 20, 20);
  AddImage("ant/4.png", 20, 20, 3, true);  // sorts first, but the table's classes keep their indexes
  auto r = IngestSources(Options());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rows, 2);
  EXPECT_EQ(r->skipped, 2);
  std::map<std::string, int32_t> labels;
  for (const ImageRow& row : Rows()) labels[row.file] = row.label;
  EXPECT_EQ(labels, (std::map<std::string, int32_t>{{"cat/1.jpg", 0}, {"dog/2.jpg", 1}, {"cat/3.jpg", 0}, {"ant/4.png", 2}}));
  EXPECT_EQ(Config(kClassesMetadataKey), R"({"label":["cat","dog","ant"]})");
  EXPECT_EQ(Config(kImagesMetadataKey), R"({"image":{"formats":["jpeg","png"]}})");
  auto again = IngestSources(Options());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->files_added, 0);
}

TEST_F(ImageIngestTest, AnInterruptedIngestResumesWithTheRest) {
  for (int i = 0; i < 12; ++i) AddImage(fmt::format("c{}/{:02}.jpg", i % 3, i), 16 + i, 16);
  // The first run is cut short by an I/O error on the table's storage; it commits nothing.
  FaultInjectingStorage faulty(LocalStorage());
  ScopedStorageRegistration reg("images_resume", faulty);
  IngestOptions o = Options();
  o.table_dir = reg.Uri(table_);
  o.rows_per_file = 1;
  faulty.FailOperation(15, FaultKind::kEIO);
  EXPECT_FALSE(IngestSources(o).ok());
  // A shard of the listing commits, then the whole ingest adds exactly the rest.
  o.shard_index = 0;
  o.shard_count = 2;
  auto half = IngestSources(o);
  ASSERT_TRUE(half.ok()) << half.status().ToString();
  EXPECT_EQ(half->rows, 6);
  o.shard_count = 1;
  auto rest = IngestSources(o);
  ASSERT_TRUE(rest.ok()) << rest.status().ToString();
  EXPECT_EQ(rest->rows, 6);
  EXPECT_EQ(rest->skipped, 6);
  auto rows = Rows();
  ASSERT_EQ(rows.size(), 12u);
  std::set<int64_t> ids;
  for (const ImageRow& row : rows) {
    ids.insert(row.id);
    EXPECT_EQ(row.image, sources_[row.file]);
  }
  EXPECT_EQ(ids.size(), 12u);
}

TEST_F(ImageIngestTest, OptimizeKeepsTheLayoutAndTheMetadata) {
  for (int i = 0; i < 6; ++i) AddImage(fmt::format("k{}/{}.jpg", i % 2, i), 30, 10 + i);
  IngestOptions o = Options();
  o.rows_per_file = 1;
  ASSERT_TRUE(IngestSources(o).ok());
  const auto before = Rows();
  OptimizeOptions oo;
  oo.table_dir = table_;
  oo.progress = false;
  auto r = OptimizeTable(oo);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->files_after, 1);
  const auto after = Rows();
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < after.size(); ++i) EXPECT_EQ(after[i].image, before[i].image);
  const auto snap = Snapshot();
  ASSERT_EQ(snap.files.size(), 1u);
  auto reader = ParquetReader::Open(LocalStorage(), table_ + "/" + snap.files[0].path);
  ASSERT_TRUE(reader.ok());
  std::map<std::string, std::string> kv;
  for (const auto& e : (*reader)->metadata().key_value_metadata) kv[e.key] = e.value.value_or("");
  EXPECT_EQ(kv[kClassesMetadataKey], R"({"label":["k0","k1"]})");
  EXPECT_EQ(kv[kImagesMetadataKey], R"({"image":{"formats":["jpeg"]}})");
  EXPECT_EQ(kv[kBlobsMetadataKey], R"(["image"])");
  auto oi = (*reader)->ReadOffsetIndex(0, *(*reader)->FindColumn("image"));
  ASSERT_TRUE(oi.ok() && oi->has_value());
  EXPECT_EQ((*oi)->page_locations.size(), 6u);
}

TEST_F(ImageIngestTest, BadImagesAreErrorsNamingTheFileAndLeaveTheTableAlone) {
  AddImage("a/1.jpg", 10, 10);
  ASSERT_TRUE(IngestSources(Options()).ok());
  const std::string jpeg = AddImage("a/2.jpg", 10, 10);
  // A truncated header, then garbage under a .png name, then PNG bytes under a .jpg name in a
  // source whose names promise only JPEG.
  for (const auto& [rel, bytes] : std::vector<std::pair<std::string, std::string>>{
           {"a/2.jpg", jpeg.substr(0, 30)}, {"a/2.png", std::string("not a png at all")}}) {
    fsys::remove(src_ + "/a/2.jpg");
    fsys::remove(src_ + "/a/2.png");
    ASSERT_TRUE(WriteFileAtomically(LocalStorage(), src_ + "/" + rel, AsBytes(bytes)).ok());
    auto r = IngestSources(Options());
    ASSERT_FALSE(r.ok()) << rel;
    EXPECT_NE(r.status().message().find(rel), std::string::npos) << r.status().message();
    EXPECT_EQ(Snapshot().version, 0);
  }
  fsys::remove(src_ + "/a/2.png");
  std::vector<uint8_t> pixels(4 * 4 * 3, 1);
  auto png = EncodePng(ByteView(pixels.data(), pixels.size()), 4, 4, 3);
  ASSERT_TRUE(WriteFileAtomically(LocalStorage(), src_ + "/a/3.jpg", AsBytes(*png)).ok());
  auto r = IngestSources(Options());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("a/3.jpg"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("png"), std::string::npos) << r.status().message();
}

TEST_F(ImageIngestTest, LabelsCsvJoinsOnThePathUnderTheRoot) {
  AddImage("x/1.jpg", 10, 12);
  AddImage("2.jpg", 14, 16);
  ASSERT_TRUE(WriteFileAtomically(LocalStorage(), dir_ + "/labels.csv",
                                  AsBytes(std::string("file,split,score\nx/1.jpg,train,0.5\n2.jpg,val,\n"))).ok());
  IngestOptions o = Options();
  o.labels_csv = dir_ + "/labels.csv";
  ASSERT_TRUE(IngestSources(o).ok());
  auto snap = Snapshot();
  auto columns = delta::ColumnsFromMetadata(snap.metadata, table_);
  ASSERT_TRUE(columns.ok());
  std::vector<std::string> names;
  for (const auto& c : *columns) names.push_back(c.name);
  EXPECT_EQ(names, (std::vector<std::string>{"id", "file", "source_location", "source_version", "split", "score", "width", "height",
                                             "channels", "image"}));
  EXPECT_EQ(snap.metadata.configuration.count(kClassesMetadataKey), 0u);
  auto rows = Rows();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].file, "2.jpg");
  EXPECT_EQ(rows[0].image, sources_["2.jpg"]);
}

// Images on an object store (Azurite): each row group's images are fetched many at a time, as .npy
// files are; more than one batch of them here.
TEST_F(ImageIngestTest, ImagesOnAnObjectStoreIngestByteForByte) {
  STOKE_REQUIRE_TEST_SERVERS();
  testing::TestServer* server = testing::SharedServer("azurite");
  ASSERT_NE(server, nullptr);
  const std::string container = testing::UniqueName("images");
  const std::string cs = fmt::format("DefaultEndpointsProtocol=http;AccountName={};AccountKey={};BlobEndpoint={}/{};",
                                     testing::kAzuriteAccount, testing::kAzuriteKey, server->url(),
                                     testing::kAzuriteAccount);
  ::setenv("AZURE_STORAGE_CONNECTION_STRING", cs.c_str(), 1);
  auto where = ResolveStorageLocation("az://" + container + "/imgs");
  ASSERT_TRUE(where.ok()) << where.status().ToString();
  ASSERT_TRUE(dynamic_cast<ObjectStorage&>(*where->storage).client().CreateContainer().ok());
  const int n = static_cast<int>(WholeFileReader::kBatch) + 9;
  for (int i = 0; i < n; ++i) {
    const std::string rel = fmt::format("c{}/{:03}.{}", i % 3, i, i % 5 == 0 ? "png" : "jpg");
    const std::string bytes = AddImage(rel, 12 + i % 7, 9, 3, i % 5 == 0);
    auto f = where->storage->Create(JoinPath(where->path, rel));
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE((*f)->Append(AsBytes(bytes)).ok());
    ASSERT_TRUE((*f)->Close().ok());
  }
  IngestOptions o = Options();
  o.source_dir = "az://" + container + "/imgs";
  o.row_group_bytes = 1 << 30;  // one row group: the batches of one encoding task
  auto r = IngestSources(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rows, n);
  auto rows = Rows();
  ASSERT_EQ(rows.size(), static_cast<size_t>(n));
  for (const ImageRow& row : rows) {
    EXPECT_EQ(row.image, sources_[row.file]) << row.file;
    EXPECT_EQ(row.label, row.file[1] - '0');
  }
  // HDF5 on the same store is refused: libhdf5 reads through file names.
  IngestOptions h = Options();
  h.source_dir = "az://" + container + "/imgs/c0/000.png";
  h.format = SourceFormat::kHdf5;
  h.table_dir = dir_ + "/h5table";
  auto refused = IngestSources(h);
  EXPECT_EQ(refused.status().code(), StatusCode::kUnsupported) << refused.status().ToString();
  ::unsetenv("AZURE_STORAGE_CONNECTION_STRING");
}

}  // namespace
}  // namespace stoke
