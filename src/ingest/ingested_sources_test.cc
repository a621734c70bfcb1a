#include "ingest/ingested_sources.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>

#include "format/npy.h"
#include "io/storage.h"
#include "stoke/ingest.h"
#include "table/delta_log.h"

namespace stoke {
namespace {

namespace fsys = std::filesystem;

// A table of four .npy sources (v_0 ... v_3) as stoke's ingest writes it, and the source planned
// again as an append plans it.
class IngestedSourcesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = fsys::temp_directory_path() / "stoke_ingested_XXXXXX";
    dir_ = mkdtemp(tmpl.data());
    src_ = dir_ + "/src";
    table_ = dir_ + "/table";
    ASSERT_TRUE(LocalStorage().CreateDirectories(src_).ok());
    for (int i = 0; i < 4; ++i) WriteSource(i, 1.0f);
    IngestOptions o;
    o.source_dir = src_;
    o.table_dir = table_;
    o.progress = false;
    o.rows_per_file = 2;
    ASSERT_TRUE(IngestSources(o).ok());
  }
  void TearDown() override { fsys::remove_all(dir_); }

  void WriteSource(int i, float value) {
    std::vector<float> v(4, value);
    ASSERT_TRUE(WriteNpyFile(LocalStorage(), src_ + "/v_" + std::to_string(i) + ".npy", DType::kFloat32, std::vector<int64_t>{4},
                             ByteView(reinterpret_cast<const uint8_t*>(v.data()), 16))
                    .ok());
  }
  // What the table holds of the planned sources, and its largest id.
  SourcesInTable Read(int64_t* max_id) {
    SourceOptions so;
    so.source = src_;
    so.record_locations = true;
    auto planned = PlanSources(so, "ingest");
    EXPECT_TRUE(planned.ok()) << planned.status().ToString();
    auto snap = delta::DeltaLog(LocalStorage(), table_).ReadSnapshot();
    EXPECT_TRUE(snap.ok()) << snap.status().ToString();
    SourcesInTable out;
    if (!planned.ok() || !snap.ok()) return out;
    auto columns = delta::ColumnsFromMetadata(snap->metadata, table_);
    EXPECT_TRUE(columns.ok()) << columns.status().ToString();
    if (!columns.ok()) return out;
    Status st = ReadIngestedFiles(LocalStorage(), *snap, *columns, table_, *planned, 0, planned->files, "", &out, max_id);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return out;
  }

  std::string dir_, src_, table_;
};

TEST_F(IngestedSourcesTest, TheTablesFilesAreFoundNewOnesAreNotAndIdsContinue) {
  WriteSource(4, 1.0f);
  int64_t max_id = -1;
  SourcesInTable in = Read(&max_id);
  EXPECT_EQ(in.state, (std::vector<InTable>{InTable::kYes, InTable::kYes, InTable::kYes, InTable::kYes, InTable::kNo}));
  EXPECT_EQ(max_id, 3);
  EXPECT_TRUE(in.table_versions.empty());
  EXPECT_EQ(in.Of(4), InTable::kNo);
  EXPECT_EQ(in.Of(99), InTable::kNo);  // outside the candidates
}

// A source rewritten at its location (another size and time) is changed, with the version the
// table holds.
TEST_F(IngestedSourcesTest, AFileRewrittenInPlaceIsChanged) {
  const std::string path = src_ + "/v_2.npy";
  std::vector<float> v(8, 2.0f);
  ASSERT_TRUE(WriteNpyFile(LocalStorage(), path, DType::kFloat32, std::vector<int64_t>{8}, ByteView(reinterpret_cast<const uint8_t*>(v.data()), 32)).ok());
  int64_t max_id = -1;
  SourcesInTable in = Read(&max_id);
  EXPECT_EQ(in.state[2], InTable::kChanged);
  EXPECT_EQ(in.state[1], InTable::kYes);
  ASSERT_EQ(in.table_versions.count(2), 1u);
  EXPECT_FALSE(in.table_versions.at(2).empty());
}

}  // namespace
}  // namespace stoke
