// The loader over object storage, against Azurite behind the fault proxy (tests/servers), which logs
// every request it receives: what opening a table asks for, GETs merged within a gap and split
// byte-equal to separate GETs, later epochs read from the local cache without requests (uncompressed
// samples copied out of its mapped entries), and loading
// through 503s and connection resets with the cache and merging on.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <thread>
#include <nlohmann/json.hpp>
#include <set>

#include "io/http_client.h"
#include "io/object_store_testing.h"
#include "stoke/loader.h"
#include "table/sample_index.h"
#include "table/test_table.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;
using testing_support::TensorOf;
using testing_support::TestTable;

// Samples of 100,000 bytes: one page each (stoke's layout for samples of 64 KiB and more).
constexpr int64_t kTensorLen = 100000;
constexpr int64_t kRows = 120;

class LoaderOnObjectStore : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!testing::TestServersInstalled()) return;
    azurite_ = testing::SharedServer("azurite");
    if (azurite_ != nullptr) proxy_ = testing::TestServer::Start("proxy", std::to_string(azurite_->port())).release();
  }
  static void TearDownTestSuite() {
    delete proxy_;
    proxy_ = nullptr;
  }

  void SetUp() override {
    STOKE_REQUIRE_TEST_SERVERS();
    ASSERT_NE(azurite_, nullptr);
    ASSERT_NE(proxy_, nullptr);
    // The loader finds the store through the environment; a fresh container per test gets a fresh
    // Storage (and connection pool) from the resolver.
    ::setenv("AZURE_STORAGE_CONNECTION_STRING",
             fmt::format("DefaultEndpointsProtocol=http;AccountName={};AccountKey={};BlobEndpoint={}/{};",
                         testing::kAzuriteAccount, testing::kAzuriteKey, proxy_->url(), testing::kAzuriteAccount)
                 .c_str(),
             1);
    container_ = testing::UniqueName("loader");
    // Two files of 60 rows; uploaded straight to Azurite (not through the proxy).
    table_.AppendFile(0, kRows / 2);
    table_.AppendFile(kRows / 2, kRows / 2);
    auto direct = NewAzureBlobStorage(testing::AzuriteOptions(azurite_->port(), container_));
    ASSERT_TRUE(direct.ok()) << direct.status().ToString();
    ASSERT_TRUE((*direct)->client().CreateContainer().ok());
    Upload(table_, "t");
    uri_ = fmt::format("az://{}/t", container_);
    std::string tmpl = (fs::temp_directory_path() / "stoke_loader_cache_XXXXXX").string();
    cache_dir_ = ::mkdtemp(tmpl.data());
    Control("set?methods=GET");
  }
  void TearDown() override {
    if (proxy_ != nullptr) Control("set?methods=GET");
    if (!cache_dir_.empty()) fs::remove_all(cache_dir_);
  }

  // Uploads the table's files under `prefix` of the test's container, straight to Azurite.
  void Upload(const TestTable& table, const std::string& prefix) {
    auto direct = NewAzureBlobStorage(testing::AzuriteOptions(azurite_->port(), container_));
    ASSERT_TRUE(direct.ok()) << direct.status().ToString();
    for (const auto& e : fs::recursive_directory_iterator(table.dir())) {
      if (!e.is_regular_file()) continue;
      const std::string rel = fs::relative(e.path(), table.dir()).string();
      auto bytes = ReadFileToString(LocalStorage(), e.path().string());
      ASSERT_TRUE(bytes.ok());
      ASSERT_TRUE(WriteFileAtomically(**direct, prefix + "/" + rel, AsBytes(*bytes)).ok()) << rel;
    }
  }
  // The 1 MiB blocks of the table's data files.
  static size_t DataBlocks(const TestTable& table) {
    size_t blocks = 0;
    for (const auto& e : fs::directory_iterator(table.dir())) {
      if (e.path().filename().string().rfind("part-", 0) == 0) blocks += (e.file_size() + (1 << 20) - 1) >> 20;
    }
    return blocks;
  }
  // Waits until the cache directory holds `n` entries (they are written just after the reads they
  // served).
  void WaitForEntries(size_t n) const {
    for (int i = 0; i < 5000 && CacheEntries() < n; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_EQ(CacheEntries(), n);
  }

  // A control request to the proxy ("set?...", "stats", "requests"); returns the body.
  static std::string Control(const std::string& what) {
    HttpClient client;
    HttpRequest req;
    req.url = proxy_->url() + "/__fault/" + what;
    auto r = client.Execute(req);
    EXPECT_TRUE(r.ok() && r->status == 200) << (r.ok() ? r->body : r.status().ToString());
    return r.ok() ? r->body : "";
  }
  // The requests the proxy received since the last "set", as "METHOD /path?query".
  static std::vector<std::string> Requests() {
    auto j = nlohmann::json::parse(Control("requests"));
    return j.get<std::vector<std::string>>();
  }
  // GETs of data files among them.
  static int64_t DataGets(const std::vector<std::string>& requests) {
    return std::count_if(requests.begin(), requests.end(), [](const std::string& r) {
      return r.rfind("GET ", 0) == 0 && r.find("/part-") != std::string::npos;
    });
  }

  // Every sample of one epoch: checks bytes against TensorOf(row) and returns the rows in order.
  static std::vector<int64_t> DrainEpoch(Loader& loader) {
    std::vector<int64_t> rows;
    for (;;) {
      auto next = loader.Next();
      EXPECT_TRUE(next.ok()) << next.status().ToString();
      if (!next.ok() || !next->has_value()) break;
      const Batch& b = **next;
      const BatchColumn* t = b.column("t");
      EXPECT_NE(t, nullptr);
      if (t == nullptr) break;
      for (int64_t i = 0; i < b.size(); ++i) {
        const int64_t row = b.row_ids()[static_cast<size_t>(i)];
        const std::string want = TensorOf(row, kTensorLen);
        EXPECT_EQ(0, std::memcmp(static_cast<const uint8_t*>(t->data()) + i * kTensorLen, want.data(), want.size()))
            << "row " << row;
        rows.push_back(row);
      }
    }
    return rows;
  }

  std::unique_ptr<Loader> Open(LoaderOptions o) {
    auto l = Loader::Open(uri_, o);
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    return l.ok() ? std::move(*l) : nullptr;
  }

  // Blocks the cache directory holds (entries, not temporary files).
  size_t CacheEntries() const {
    size_t n = 0;
    for (const auto& e : fs::recursive_directory_iterator(cache_dir_)) {
      if (e.is_regular_file() && e.path().filename().string().find(".tmp.") == std::string::npos) ++n;
    }
    return n;
  }

  static testing::TestServer* azurite_;
  static testing::TestServer* proxy_;
  TestTable table_{kTensorLen};
  std::string container_;
  std::string uri_;
  std::string cache_dir_;
};

testing::TestServer* LoaderOnObjectStore::azurite_ = nullptr;
testing::TestServer* LoaderOnObjectStore::proxy_ = nullptr;

TEST_F(LoaderOnObjectStore, OpeningListsOnlyTheLogAndHeadsNoDataFile) {
  LoaderOptions o;
  o.columns = {"id", "label", "t"};
  // First open: builds the sample index from the footers and writes it under _stoke/.
  ASSERT_NE(Open(o), nullptr);
  std::vector<std::string> first = Requests();
  Control("set?methods=GET");
  // Later opens: the log, the cached index, the scalar columns' footers and chunks.
  auto loader = Open(o);
  ASSERT_NE(loader, nullptr);
  EXPECT_TRUE(loader->index_from_cache());
  std::vector<std::string> later = Requests();
  for (const auto* requests : {&first, &later}) {
    for (const std::string& r : *requests) {
      // Listings: only of _delta_log/ (and the index cache's directory when it is rebuilt).
      if (r.find("comp=list") != std::string::npos) {
        EXPECT_TRUE(r.find("prefix=t%2F_delta_log%2F") != std::string::npos ||
                    r.find("prefix=t%2F_stoke%2F") != std::string::npos)
            << "a listing of more than the log: " << r;
      }
      EXPECT_FALSE(r.rfind("HEAD ", 0) == 0 && r.find("/part-") != std::string::npos) << "a HEAD of a data file: " << r;
    }
  }
  // A few requests per data file (footer, scalar chunks) and a few for the log and the index.
  EXPECT_LE(later.size(), 6u + 6u * 2) << fmt::format("{}", fmt::join(later, "\n"));
  // These data files are smaller than a footer read: the one GET of the footer holds the whole file,
  // scalar chunks included, and nothing of it is fetched again.
  for (const std::string file : {"/part-0.parquet", "/part-60.parquet"}) {
    EXPECT_EQ(std::count_if(later.begin(), later.end(), [&](const std::string& r) { return r.find(file) != std::string::npos; }), 1)
        << file << "\n" << fmt::format("{}", fmt::join(later, "\n"));
  }
  // Loading makes GETs of pages only.
  Control("set?methods=GET");
  ASSERT_EQ(DrainEpoch(*loader).size(), static_cast<size_t>(kRows));
  for (const std::string& r : Requests()) EXPECT_EQ(r.rfind("GET ", 0), 0u) << r;
}

TEST_F(LoaderOnObjectStore, GetsMergedWithinAGapAreSplitByteEqual) {
  // label = 0 selects rows 0, 3, 6, ...: in table order two pages lie between consecutive needed
  // pages. The gaps between them, from the sample index (pages are compressed, so sizes vary):
  auto index = SampleIndex::Open(table_.dir());
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  int64_t min_gap = INT64_MAX, max_gap = 0;
  for (int64_t row = 3; row < kRows; row += 3) {
    const auto a = index->Find(row - 3, 0), b = index->Find(row, 0);
    if (a.file != b.file) continue;
    const int64_t gap = static_cast<int64_t>(b.offset - (a.offset + a.length));
    min_gap = std::min(min_gap, gap);
    max_gap = std::max(max_gap, gap);
  }
  ASSERT_GT(min_gap, 0);
  LoaderOptions o;
  o.columns = {"t"};
  o.where = "label = 0";
  o.shuffle = LoaderOptions::Shuffle::kNone;
  o.batch_size = 8;
  // Loads an epoch and returns its rows and the GETs of data it made (the open's not counted).
  auto load = [&](int64_t max_merged, int64_t gap) {
    o.remote_coalesce_bytes = max_merged;
    o.remote_coalesce_gap_bytes = gap;
    auto loader = Open(o);
    EXPECT_NE(loader, nullptr);
    Control("set?methods=GET");
    std::vector<int64_t> rows = loader ? DrainEpoch(*loader) : std::vector<int64_t>{};
    return std::pair(rows, DataGets(Requests()));
  };
  const auto [rows_separate, gets_separate] = load(0, max_gap);  // one GET per page
  const auto [rows_merged, gets_merged] = load(LoaderOptions{}.remote_coalesce_bytes, max_gap);
  const auto [rows_narrow, gets_narrow] = load(LoaderOptions{}.remote_coalesce_bytes, min_gap - 1);

  ASSERT_EQ(rows_separate.size(), static_cast<size_t>(kRows / 3));
  EXPECT_EQ(rows_merged, rows_separate);  // and each sample's bytes checked by DrainEpoch
  EXPECT_EQ(rows_narrow, rows_separate);
  EXPECT_EQ(gets_separate, kRows / 3);
  // Batches of 8 in one file: one GET each (a batch spanning both files: two).
  EXPECT_EQ(gets_merged, kRows / 3 / 8 + 1);
  // A gap smaller than the pages between: nothing merges.
  EXPECT_EQ(gets_narrow, kRows / 3);
}

TEST_F(LoaderOnObjectStore, LaterEpochsReadFromTheCacheWithoutRequests) {
  LoaderOptions o;
  o.columns = {"t"};
  o.cache_dir = cache_dir_;
  o.seed = 5;
  auto loader = Open(o);
  ASSERT_NE(loader, nullptr);
  Control("set?methods=GET");
  std::vector<int64_t> rows = DrainEpoch(*loader);
  ASSERT_EQ(rows.size(), static_cast<size_t>(kRows));
  const int64_t first_gets = DataGets(Requests());
  EXPECT_GT(first_gets, 0);
  // Each 1 MiB block of the data files fetched once (blocks are fetched whole).
  const size_t blocks = DataBlocks(table_);
  EXPECT_LE(first_gets, static_cast<int64_t>(blocks));
  WaitForEntries(blocks);
  Control("set?methods=GET");

  ASSERT_TRUE(loader->SetEpoch(1).ok());
  std::vector<int64_t> again = DrainEpoch(*loader);
  EXPECT_NE(again, rows) << "another epoch, another order";
  std::sort(again.begin(), again.end());
  std::sort(rows.begin(), rows.end());
  EXPECT_EQ(again, rows);
  EXPECT_EQ(DataGets(Requests()), 0) << fmt::format("{}", fmt::join(Requests(), "\n"));

  // Another loader on the same directory (as another process would be): no GET of data either.
  auto other = Open(o);
  ASSERT_NE(other, nullptr);
  Control("set?methods=GET");
  EXPECT_EQ(DrainEpoch(*other).size(), static_cast<size_t>(kRows));
  EXPECT_EQ(DataGets(Requests()), 0);
}

// Uncompressed samples (stoke's default for tensors) of a later epoch are copied straight out of the
// cache's entries, mapped, with no request and no read system call each; an entry damaged on disk is
// not mapped but dropped, and its block fetched again.
TEST_F(LoaderOnObjectStore, LaterEpochsCopyUncompressedSamplesOutOfMappedCacheEntries) {
  TestTable plain(kTensorLen, parquet::Codec::kUncompressed);
  plain.AppendFile(0, kRows);
  Upload(plain, "u");
  uri_ = fmt::format("az://{}/u", container_);
  LoaderOptions o;
  o.columns = {"t"};
  o.cache_dir = cache_dir_;
  std::vector<int64_t> want(kRows);
  std::iota(want.begin(), want.end(), 0);
  {
    auto first = Open(o);
    ASSERT_NE(first, nullptr);
    EXPECT_EQ(DrainEpoch(*first).size(), static_cast<size_t>(kRows));
  }
  const size_t blocks = DataBlocks(plain);
  WaitForEntries(blocks);
  Control("set?methods=GET");
  auto later = Open(o);  // as another process would, later
  ASSERT_NE(later, nullptr);
  std::vector<int64_t> rows = DrainEpoch(*later);
  std::sort(rows.begin(), rows.end());
  EXPECT_EQ(rows, want);
  EXPECT_EQ(DataGets(Requests()), 0);
  // Every sample, those across two blocks too (copied out of both entries).
  EXPECT_EQ(later->stats().reads_mapped, kRows);

  // A flipped byte in the data of every entry: each fails its check when mapped, is dropped and
  // fetched again, and no damaged byte reaches a batch (DrainEpoch checks every sample).
  for (const auto& e : fs::recursive_directory_iterator(cache_dir_)) {
    if (!e.is_regular_file()) continue;
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    const auto at = static_cast<std::streamoff>(e.file_size() - 7);
    char c;
    f.seekg(at);
    f.read(&c, 1);
    c ^= 0x20;
    f.seekp(at);
    f.write(&c, 1);
  }
  Control("set?methods=GET");
  auto damaged = Open(o);
  ASSERT_NE(damaged, nullptr);
  rows = DrainEpoch(*damaged);
  std::sort(rows.begin(), rows.end());
  EXPECT_EQ(rows, want);
  EXPECT_GT(DataGets(Requests()), 0) << "the damaged blocks were fetched again";
  // Written again whole: mapped again.
  WaitForEntries(blocks);
  auto mended = Open(o);
  ASSERT_NE(mended, nullptr);
  EXPECT_EQ(DrainEpoch(*mended).size(), static_cast<size_t>(kRows));
  EXPECT_EQ(mended->stats().reads_mapped, kRows);
}

TEST_F(LoaderOnObjectStore, FaultsWithCacheAndMergingLoseAndRepeatNothing) {
  LoaderOptions o;
  o.columns = {"id", "t"};
  o.cache_dir = cache_dir_;
  o.shuffle = LoaderOptions::Shuffle::kBlock;
  o.shuffle_buffer = 16;  // batches of neighbours: their GETs merge
  o.batch_size = 8;
  auto loader = Open(o);
  ASSERT_NE(loader, nullptr);
  // 1 % of the GETs answered 503 and 1 % reset mid-body, and a few of each for sure (few requests
  // are made: the cache fetches whole blocks).
  Control("set?methods=GET&p503=0.01&preset=0.01&status503=2&reset=2");
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    ASSERT_TRUE(loader->SetEpoch(epoch).ok());
    std::vector<int64_t> rows = DrainEpoch(*loader);
    std::sort(rows.begin(), rows.end());
    std::vector<int64_t> want(kRows);
    std::iota(want.begin(), want.end(), 0);
    EXPECT_EQ(rows, want) << "epoch " << epoch << ": samples lost or repeated";
  }
  auto stats = nlohmann::json::parse(Control("stats"));
  EXPECT_GE(stats["injected"].get<int64_t>(), 4) << stats.dump();
}

}  // namespace
}  // namespace stoke
