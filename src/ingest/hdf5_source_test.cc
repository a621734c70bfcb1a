// HDF5 sources end to end: multi-sample files (chunked, gzip + shuffle), single-sample files, several
// datasets and attributes into a table, value for value; sharded and resumed ingests; bad files.
#include "ingest/hdf5_source.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "format/hdf5_testing.h"
#include "format/parquet_reader.h"
#include "io/fault_storage.h"
#include "io/storage.h"
#include "io/uri.h"
#include "stoke/ingest.h"
#include "table/delta_log.h"

namespace stoke {
namespace {

namespace fsys = std::filesystem;
using testing_support::DatasetSpec;
using testing_support::NumberAttribute;
using testing_support::StringAttribute;
using testing_support::WriteDataset;

// What file f's datasets hold: images (n, 5, 7) float32, label (n,) int16, weight (scalar float64).
float ImageValue(int f, int row, int k) { return static_cast<float>(f * 10000 + row * 100 + k) * 0.5f; }

class Hdf5IngestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = fsys::temp_directory_path() / "stoke_h5ingest_XXXXXX";
    dir_ = mkdtemp(tmpl.data());
    src_ = dir_ + "/src";
    table_ = dir_ + "/table";
    fsys::create_directories(src_);
  }
  void TearDown() override { fsys::remove_all(dir_); }

  // File f with n samples; images chunked (chunk_rows, 5, 7) with shuffle + gzip when chunk_rows > 0.
  void WriteFile(int f, hsize_t n, hsize_t chunk_rows) {
    std::vector<float> images(n * 35);
    std::vector<int16_t> labels(n);
    for (hsize_t r = 0; r < n; ++r) {
      for (int k = 0; k < 35; ++k) images[r * 35 + k] = ImageValue(f, static_cast<int>(r), k);
      labels[r] = static_cast<int16_t>((f + r) % 5 - 2);
    }
    const double weight = 1.5 * f;
    const std::string path = fmt::format("{}/f{:02}.h5", src_, f);
    hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(file, 0);
    if (chunk_rows > 0) {
      WriteDataset(file, {"images", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {n, 5, 7}, {chunk_rows, 5, 7}, true, 4, false,
                          images.data()});
    } else {
      WriteDataset(file, {"images", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {n, 5, 7}, {}, false, -1, false, images.data()});
    }
    WriteDataset(file, {"meta/label", H5T_STD_I16LE, H5T_NATIVE_INT16, {n}, {}, false, -1, false, labels.data()});
    WriteDataset(file, {"weight", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, {}, {}, false, -1, false, &weight});
    StringAttribute(file, "instrument", fmt::format("probe-{}", f), true);
    NumberAttribute<int32_t>(file, "run", H5T_NATIVE_INT32, 100 + f);
    H5Fclose(file);
  }
  IngestOptions Options() {
    IngestOptions o;
    o.source_dir = src_;
    o.table_dir = table_;
    o.progress = false;
    return o;
  }
  // Every row of the current version as column name -> cell (raw bytes for tensors, text for the
  // rest), sorted by id.
  std::vector<std::map<std::string, std::string>> Rows() {
    auto snap = delta::DeltaLog(LocalStorage(), table_).ReadSnapshot(std::nullopt);
    EXPECT_TRUE(snap.ok()) << snap.status().ToString();
    std::vector<std::map<std::string, std::string>> rows;
    for (const auto& f : snap->files) {
      auto r = ParquetReader::Open(LocalStorage(), table_ + "/" + *delta::DecodePath(f.path));
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      const size_t first = rows.size();
      rows.resize(first + static_cast<size_t>((*r)->num_rows()));
      for (size_t c = 0; c < (*r)->columns().size(); ++c) {
        const LeafColumn& col = (*r)->columns()[c];
        for (int64_t i = 0; i < (*r)->num_rows(); ++i) {
          std::string cell;
          if (col.tensor) {
            AlignedBuffer buf;
            EXPECT_TRUE((*r)->ReadBinaryCell(i, c, &buf).ok());
            cell.assign(AsChars(buf.view()));
          }
          rows[first + static_cast<size_t>(i)][col.name] = cell;
        }
        if (col.tensor) continue;
        auto v = (*r)->ReadColumn(c);
        EXPECT_TRUE(v.ok());
        std::visit(
            [&](const auto& values) {
              for (size_t i = 0; i < values.size(); ++i) {
                using T = typename std::decay_t<decltype(values)>::value_type;
                if constexpr (std::is_same_v<T, std::string>) {
                  rows[first + i][col.name] = values[i];
                } else {
                  rows[first + i][col.name] = fmt::format("{}", values[i]);
                }
              }
            },
            v->values);
      }
    }
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return std::stoll(a.at("id")) < std::stoll(b.at("id")); });
    return rows;
  }
  static std::string ImageRow(int f, int row) {
    std::string s(35 * 4, '\0');
    for (int k = 0; k < 35; ++k) {
      const float v = ImageValue(f, row, k);
      std::memcpy(s.data() + k * 4, &v, 4);
    }
    return s;
  }
  // Checks every row against the source files: (file, index) pairs once each, values equal.
  void ExpectTableHoldsFiles(const std::vector<int>& samples_per_file) {
    auto rows = Rows();
    size_t total = 0;
    for (int n : samples_per_file) total += static_cast<size_t>(n);
    ASSERT_EQ(rows.size(), total);
    std::set<std::pair<std::string, int>> seen;
    std::set<std::string> ids;
    for (const auto& row : rows) {
      const int f = std::stoi(row.at("file").substr(1, 2));
      const int index = std::stoi(row.at("index"));
      EXPECT_TRUE(seen.insert({row.at("file"), index}).second) << row.at("file") << " " << index;
      ids.insert(row.at("id"));
      ASSERT_EQ(row.at("images"), ImageRow(f, index)) << row.at("file") << " row " << index;
      EXPECT_EQ(row.at("meta/label"), std::to_string((f + index) % 5 - 2));
      EXPECT_EQ(row.at("weight"), fmt::format("{}", 1.5 * f));
      EXPECT_EQ(row.at("instrument"), fmt::format("probe-{}", f));
      EXPECT_EQ(row.at("run"), std::to_string(100 + f));
    }
    EXPECT_EQ(ids.size(), total);
  }

  std::string dir_, src_, table_;
};

TEST_F(Hdf5IngestTest, SamplesAlongAxisZeroOfChunkedGzipFilesValueForValue) {
  WriteFile(0, 23, 4);   // 23 rows in chunks of 4: row groups cut through chunks
  WriteFile(1, 1, 1);
  WriteFile(2, 17, 0);   // contiguous
  WriteFile(3, 40, 7);
  IngestOptions o = Options();
  o.row_group_bytes = 9 * 140;  // 9 rows per row group: runs span files and start mid-chunk
  o.target_file_bytes = 30 * 140;
  o.threads = 3;
  auto r = IngestSources(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->source_files, 4);
  EXPECT_EQ(r->rows, 81);
  ExpectTableHoldsFiles({23, 1, 17, 40});
  auto snap = delta::DeltaLog(LocalStorage(), table_).ReadSnapshot(std::nullopt);
  ASSERT_TRUE(snap.ok());
  auto columns = delta::ColumnsFromMetadata(snap->metadata, table_);
  ASSERT_TRUE(columns.ok());
  std::vector<std::string> names;
  for (const auto& c : *columns) names.push_back(c.name);
  EXPECT_EQ(names, (std::vector<std::string>{"id", "file", "source_location", "source_version", "index", "instrument", "run",
                                             "meta/label", "weight", "images"}));
  EXPECT_EQ(columns->back().tensor->shape, (std::vector<int64_t>{5, 7}));
  EXPECT_EQ((*columns)[7].type, parquet::Type::kInt32);  // int16 samples widen to INT32
  auto again = IngestSources(Options());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->files_added, 0);
}

TEST_F(Hdf5IngestTest, OneSamplePerFileWhenAsked) {
  WriteFile(0, 3, 2);
  WriteFile(1, 3, 0);
  IngestOptions o = Options();
  o.hdf5_samples = Hdf5Samples::kFile;
  o.datasets = {"images", "weight"};
  auto r = IngestSources(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rows, 2);
  auto rows = Rows();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].count("index"), 0u);
  EXPECT_EQ(rows[0].count("meta/label"), 0u);
  EXPECT_EQ(rows[1].at("images"), ImageRow(1, 0) + ImageRow(1, 1) + ImageRow(1, 2));  // the whole dataset
  EXPECT_EQ(rows[1].at("weight"), "1.5");
}

TEST_F(Hdf5IngestTest, ShardsAndResumesKeepEachFilesSamplesTogether) {
  for (int f = 0; f < 6; ++f) WriteFile(f, static_cast<hsize_t>(3 + f), 2);
  IngestOptions o = Options();
  o.shard_index = 1;
  o.shard_count = 3;
  auto one = IngestSources(o);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->source_files, 2);
  EXPECT_EQ(one->rows, 5 + 6);
  // Ids of a sharded run are the samples' places in the whole listing: files 2 and 3 start at 3 + 4.
  auto rows = Rows();
  ASSERT_EQ(rows.size(), 11u);
  EXPECT_EQ(rows.front().at("id"), "7");
  EXPECT_EQ(rows.back().at("id"), "17");
  // The other shards, then an unsharded run with nothing left to do.
  for (int64_t shard : {0, 2}) {
    o.shard_index = shard;
    ASSERT_TRUE(IngestSources(o).ok());
  }
  auto rest = IngestSources(Options());
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(rest->files_added, 0);
  EXPECT_EQ(rest->skipped, 6);
  ExpectTableHoldsFiles({3, 4, 5, 6, 7, 8});
  const auto all = Rows();
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i].at("id"), std::to_string(i));  // dense over the run
}

TEST_F(Hdf5IngestTest, NewFilesAreAppendedWhole) {
  WriteFile(0, 4, 2);
  ASSERT_TRUE(IngestSources(Options()).ok());
  WriteFile(1, 6, 4);
  auto r = IngestSources(Options());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->skipped, 1);
  EXPECT_EQ(r->rows, 6);
  ExpectTableHoldsFiles({4, 6});
}

TEST_F(Hdf5IngestTest, BadFilesAreErrorsNamingFileAndDatasetAndChangeNothing) {
  WriteFile(0, 4, 2);
  ASSERT_TRUE(IngestSources(Options()).ok());
  // Not HDF5 under an .h5 name.
  ASSERT_TRUE(WriteFileAtomically(LocalStorage(), src_ + "/f01.h5", AsBytes(std::string("plain text"))).ok());
  auto r = IngestSources(Options());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("f01.h5"), std::string::npos) << r.status().message();
  // A file whose dataset has another per-sample shape.
  fsys::remove(src_ + "/f01.h5");
  {
    std::vector<float> images(2 * 5 * 8, 0.0f);
    hid_t file = H5Fcreate((src_ + "/f02.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    WriteDataset(file, {"images", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {2, 5, 8}, {}, false, -1, false, images.data()});
    H5Fclose(file);
  }
  IngestOptions o = Options();
  o.datasets = {"images"};
  r = IngestSources(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("f02.h5"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("'images'"), std::string::npos) << r.status().message();
  // A truncated copy of a good file.
  fsys::remove(src_ + "/f02.h5");
  auto bytes = ReadFileToString(LocalStorage(), src_ + "/f00.h5");
  ASSERT_TRUE(bytes.ok());
  ASSERT_TRUE(WriteFileAtomically(LocalStorage(), src_ + "/f03.h5", AsBytes(bytes->substr(0, bytes->size() / 2))).ok());
  r = IngestSources(Options());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("f03.h5"), std::string::npos) << r.status().message();
  auto snap = delta::DeltaLog(LocalStorage(), table_).ReadSnapshot(std::nullopt);
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(snap->version, 0);
}

TEST_F(Hdf5IngestTest, SourcesNotOnTheLocalFileSystemAreRefused) {
  // libhdf5 reads through file names: files on any other storage would have to be copied first.
  WriteFile(0, 2, 0);
  FaultInjectingStorage elsewhere(LocalStorage());
  ScopedStorageRegistration reg("h5_elsewhere", elsewhere);
  IngestOptions o = Options();
  o.source_dir = reg.Uri(src_);
  auto r = IngestSources(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(r.status().message().find("local files"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace stoke
