// The object-store backends against real servers (Azurite and s3rver, started by the tests through
// tests/servers/launch.mjs), one parameterised suite for both, plus unit tests of the shared parts.
#include "io/object_storage.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <thread>

#include "io/azure_storage.h"
#include "io/crypto.h"
#include "io/object_store_testing.h"
#include "io/s3_storage.h"
#include "io/uri.h"

namespace stoke {
namespace {

using testing::TestBytes;

// Child mode for the cross-process race: when the environment names a put, this process performs
// it before main() and exits with 10 (won), 11 (AlreadyExists) or 12 (other error).
const bool kChildPutDone = [] {
  const char* port = ::getenv("STOKE_IO_TEST_CHILD_PORT");
  if (port == nullptr) return false;
  std::string container = ::getenv("STOKE_IO_TEST_CHILD_CONTAINER");
  std::string data = ::getenv("STOKE_IO_TEST_CHILD_DATA");
  int64_t start_ms = std::atoll(::getenv("STOKE_IO_TEST_CHILD_START_MS"));
  auto s = NewAzureBlobStorage(testing::AzuriteOptions(std::atoi(port), container));
  if (!s.ok()) std::_Exit(12);
  std::this_thread::sleep_until(std::chrono::system_clock::time_point(std::chrono::milliseconds(start_ms)));
  Status st = (*s)->PutIfAbsent("_delta_log/00000000000000000000.json", AsBytes(data));
  std::_Exit(st.ok() ? 10 : st.code() == StatusCode::kAlreadyExists ? 11 : 12);
}();

TEST(ObjectKeys, NormalisePaths) {
  EXPECT_EQ(*ObjectKeyFromPath("/a//b/./c", false), "a/b/c");
  EXPECT_EQ(*ObjectKeyFromPath("", true), "");
  EXPECT_FALSE(ObjectKeyFromPath("", false).ok());
  EXPECT_FALSE(ObjectKeyFromPath("/", false).ok());
  EXPECT_EQ(ObjectKeyFromPath("a/../b", false).status().code(), StatusCode::kInvalidArgument);
}

TEST(ObjectParsing, DatesAndSizes) {
  EXPECT_EQ(*ParseHttpDateMs("Sun, 06 Nov 1994 08:49:37 GMT"), 784111777000);
  EXPECT_EQ(*ParseIso8601Ms("1994-11-06T08:49:37.5Z"), 784111777500);
  EXPECT_EQ(*ParseIso8601Ms("1994-11-06T08:49:37Z"), 784111777000);
  EXPECT_EQ(*ParseDecimalU64("18446744073709551615"), UINT64_MAX);
  for (const char* bad : {"", "06 Nov 1994", "Sun, 06 Nov 1994 08:49:37 GMTx", "Sun, 99 Foo 1994 08:49:37 GMT"}) {
    EXPECT_FALSE(ParseHttpDateMs(bad).ok()) << bad;
  }
  for (const char* bad : {"", "1994-11-06", "1994-11-06T08:49:37", "1994-11-06T08:49:37.Z", "1994-11-06T08:49:37+01:00"}) {
    EXPECT_FALSE(ParseIso8601Ms(bad).ok()) << bad;
  }
  for (const char* bad : {"", "-1", "1x", " 1", "18446744073709551616", "123456789012345678901"}) {
    EXPECT_FALSE(ParseDecimalU64(bad).ok()) << bad;
  }
}

TEST(ObjectParsing, Etags) {
  EXPECT_EQ(UnquotedEtag("\"abc\""), "abc");
  EXPECT_EQ(UnquotedEtag("W/\"abc\""), "abc");
  EXPECT_EQ(UnquotedEtag("0x8D4BCC2E4835CD0"), "0x8D4BCC2E4835CD0");
  EXPECT_EQ(UnquotedEtag("\""), "\"");
  EXPECT_EQ(UnquotedEtag(""), "");
}

TEST(ListingParsers, AzureBlobListing) {
  auto l = ParseAzureBlobListing(
      "<?xml version=\"1.0\" encoding=\"utf-8\"?><EnumerationResults><Blobs>"
      "<Blob><Name>t/a.json</Name><Properties><Last-Modified>Sun, 06 Nov 1994 08:49:37 GMT</Last-Modified>"
      "<Etag>0x8D4BCC2E4835CD0</Etag><Content-Length>12</Content-Length></Properties></Blob><BlobPrefix><Name>t/d/</Name></BlobPrefix>"
      "</Blobs><NextMarker>2!abc</NextMarker></EnumerationResults>",
      "list az://c/t/");
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ASSERT_EQ(l->objects.size(), 1u);
  EXPECT_EQ(l->objects[0].key, "t/a.json");
  EXPECT_EQ(l->objects[0].size, 12u);
  EXPECT_EQ(l->objects[0].modification_time_ms, 784111777000);
  EXPECT_EQ(l->objects[0].etag, "0x8D4BCC2E4835CD0");
  EXPECT_EQ(l->prefixes, std::vector<std::string>{"t/d/"});
  EXPECT_EQ(l->next_token, "2!abc");
  for (const char* bad : {"", "<Error><Code>x</Code></Error>", "<EnumerationResults><Blobs><Blob></Blob></Blobs></EnumerationResults>",
                          "<EnumerationResults><Blobs><Blob><Name>a</Name><Properties><Content-Length>-1</Content-Length>"
                          "</Properties></Blob></Blobs></EnumerationResults>",
                          "<EnumerationResults><Blobs>"}) {
    auto r = ParseAzureBlobListing(bad, "list az://c/t/");
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << bad;
    EXPECT_NE(r.status().message().find("az://c/t/"), std::string::npos) << r.status().message();
  }
}

TEST(ListingParsers, S3Listing) {
  auto l = ParseS3Listing(
      "<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>tok=</NextContinuationToken>"
      "<Contents><Key>t/a</Key><Size>5</Size><LastModified>1994-11-06T08:49:37.000Z</LastModified>"
      "<ETag>&quot;9b2cf535f27731c974343645a3985328&quot;</ETag></Contents>"
      "<CommonPrefixes><Prefix>t/d/</Prefix></CommonPrefixes></ListBucketResult>",
      "list s3://b/t/");
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ASSERT_EQ(l->objects.size(), 1u);
  EXPECT_EQ(l->objects[0].size, 5u);
  EXPECT_EQ(l->objects[0].modification_time_ms, 784111777000);
  EXPECT_EQ(l->objects[0].etag, "9b2cf535f27731c974343645a3985328");
  EXPECT_EQ(l->prefixes, std::vector<std::string>{"t/d/"});
  EXPECT_EQ(l->next_token, "tok=");
  for (const char* bad : {"<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",
                          "<ListBucketResult><Contents><Size>1</Size></Contents></ListBucketResult>",
                          "<ListBucketResult><Contents><Key>k</Key><Size>x</Size></Contents></ListBucketResult>",
                          "<EnumerationResults/>", "<ListBucketResult>"}) {
    auto r = ParseS3Listing(bad, "list s3://b/t/");
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << bad;
  }
}

struct BackendConfig {
  int list_page_size = 0;
  uint64_t part_size = uint64_t{8} << 20;
  bool create_container = true;
  std::string bad_secret;  // when set, credentials that the server rejects
  int port = 0;            // 0: the shared server of the backend
  std::string container;   // "": a fresh one
};

class ObjectStoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    STOKE_REQUIRE_TEST_SERVERS();
    server_ = testing::SharedServer(GetParam());
    ASSERT_NE(server_, nullptr) << "could not start " << GetParam();
  }
  bool is_azure() const { return GetParam() == "azurite"; }

  std::shared_ptr<ObjectStorage> Make(const BackendConfig& c, std::string* container_out = nullptr) {
    std::string container = c.container.empty() ? testing::UniqueName("stoke") : c.container;
    if (container_out) *container_out = container;
    int port = c.port ? c.port : server_->port();
    Result<std::shared_ptr<ObjectStorage>> s = Status::Internal("unset");
    if (is_azure()) {
      AzureBlobOptions o = testing::AzuriteOptions(port, container);
      o.list_page_size = c.list_page_size;
      o.storage.part_size = c.part_size;
      if (!c.bad_secret.empty()) o.account_key = c.bad_secret;
      s = NewAzureBlobStorage(o);
    } else {
      S3Options o = testing::S3rverOptions(port, container);
      o.list_page_size = c.list_page_size;
      o.storage.part_size = c.part_size;
      if (!c.bad_secret.empty()) {
        // s3rver does not verify SigV4 signatures, only that the access key id is known: a wrong
        // secret alone would pass there (the signer is checked against AWS's examples instead).
        o.credentials.access_key_id = "WRONGKEYID";
        o.credentials.secret_access_key = c.bad_secret;
      }
      s = NewS3Storage(o);
    }
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (!s.ok()) return nullptr;
    if (c.create_container) {
      Status cs = (*s)->client().CreateContainer();
      EXPECT_TRUE(cs.ok()) << cs.ToString();
    }
    return *s;
  }

  static Status Write(Storage& s, const std::string& path, const std::string& data, size_t chunk = 0) {
    STOKE_ASSIGN_OR_RETURN(auto f, s.Create(path));
    size_t step = chunk ? chunk : std::max<size_t>(data.size(), 1);
    for (size_t i = 0; i < data.size(); i += step) {
      STOKE_RETURN_IF_ERROR(f->Append(AsBytes(std::string_view(data).substr(i, step))));
    }
    STOKE_RETURN_IF_ERROR(f->Sync());
    return f->Close();
  }

  testing::TestServer* server_ = nullptr;
};

TEST_P(ObjectStoreTest, WritesReadsRangesAndStats) {
  auto s = Make({});
  ASSERT_NE(s, nullptr);
  // What an object store is (Storage's capability questions).
  EXPECT_TRUE(s->remote());
  EXPECT_FALSE(s->local_files());
  EXPECT_TRUE(s->CreateIsAtomic());
  EXPECT_EQ(s->objects(), s.get());
  EXPECT_EQ(s->parallelism(), Storage::kRemoteParallelism);
  std::string data = TestBytes(100000, 1);
  ASSERT_TRUE(Write(*s, "t/part-0.parquet", data, 7000).ok());
  auto f = s->OpenForRead("t/part-0.parquet");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->size(), data.size());
  std::string got(5000, '\0');
  ASSERT_TRUE((*f)->ReadAt(12345, MutableByteView(reinterpret_cast<uint8_t*>(got.data()), got.size())).ok());
  EXPECT_EQ(got, data.substr(12345, 5000));
  auto whole = ReadFileToString(*s, "/t//part-0.parquet");
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(*whole, data);

  uint8_t buf[10];
  Status past = (*f)->ReadAt(data.size() - 5, MutableByteView(buf, 10));
  EXPECT_FALSE(past.ok());
  EXPECT_NE(past.message().find("t/part-0.parquet"), std::string::npos) << past.message();

  auto st = s->Stat("t/part-0.parquet");
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->size, data.size());
  EXPECT_EQ(st->name, "part-0.parquet");
  EXPECT_GT(st->modification_time_ms, 1600000000000);
  // The ETag identifies this version of the object: the listing gives the one HEAD gives, without
  // quotes, and a rewrite changes it.
  ASSERT_FALSE(st->etag.empty());
  EXPECT_EQ(st->etag.find('"'), std::string::npos) << st->etag;
  auto listed = s->List("t");
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  ASSERT_FALSE(listed->empty());
  EXPECT_EQ((*listed)[0].etag, st->etag);
  ASSERT_TRUE(Write(*s, "t/part-0.parquet", data + "more").ok());
  EXPECT_NE(s->Stat("t/part-0.parquet")->etag, st->etag);
  auto dir = s->Stat("t");
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  EXPECT_TRUE(dir->is_directory);
  EXPECT_EQ(s->Stat("t/missing").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(s->OpenForRead("t/missing").status().code(), StatusCode::kNotFound);

  // Empty objects and keys needing escaping.
  ASSERT_TRUE(Write(*s, "t/empty", "").ok());
  EXPECT_EQ(*ReadFileToString(*s, "t/empty"), "");
  ASSERT_TRUE(Write(*s, "t/odd name+%&=.json", "x y").ok());
  EXPECT_EQ(*ReadFileToString(*s, "t/odd name+%&=.json"), "x y");
}

TEST_P(ObjectStoreTest, ListsAcrossPages) {
  auto s = Make({.list_page_size = 2});
  ASSERT_NE(s, nullptr);
  std::vector<std::string> names;
  for (int i = 6; i >= 0; --i) {
    names.push_back(fmt::format("{:020d}.json", i));
    ASSERT_TRUE(s->PutIfAbsent("t/_delta_log/" + names.back(), AsBytes(std::to_string(i))).ok());
  }
  ASSERT_TRUE(s->PutIfAbsent("t/_delta_log/0-sub/deeper.json", AsBytes("x")).ok());
  ASSERT_TRUE(s->PutIfAbsent("t/_delta_log_other", AsBytes("x")).ok());
  std::sort(names.begin(), names.end());
  auto listed = s->ListNames("t/_delta_log");
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(*listed, names);
  // A prefix lists only its keys (across pages too); nothing under "0-sub/".
  EXPECT_EQ(*s->ListNamesWithPrefix("t/_delta_log", "0000000000000000000"), names);
  EXPECT_EQ(*s->ListNamesWithPrefix("t/_delta_log/", "00000000000000000003"), std::vector<std::string>{names[3]});
  EXPECT_TRUE(s->ListNamesWithPrefix("t/_delta_log", "1")->empty());
  auto entries = s->List("t/_delta_log/");
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 8u);
  EXPECT_EQ((*entries)[0].name, "0-sub");
  EXPECT_TRUE((*entries)[0].is_directory);
  EXPECT_EQ((*entries)[1].name, names[0]);
  EXPECT_EQ((*entries)[1].size, 1u);
  EXPECT_FALSE((*entries)[1].is_directory);
  auto root = s->List("");
  ASSERT_TRUE(root.ok());
  ASSERT_EQ(root->size(), 1u);
  EXPECT_EQ((*root)[0].name, "t");
  auto empty = s->ListNames("nothing/here");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST_P(ObjectStoreTest, LargeWritesGoThroughPartsAndReadBack) {
  auto s = Make({.part_size = 64 << 10});
  ASSERT_NE(s, nullptr);
  std::string data = TestBytes((64 << 10) * 4 + 1234, 2);
  ASSERT_TRUE(Write(*s, "big.bin", data, 10000).ok());
  EXPECT_EQ(*ReadFileToString(*s, "big.bin"), data);
  // Exactly one part's worth is one PUT; one byte more is two parts.
  ASSERT_TRUE(Write(*s, "one-part.bin", data.substr(0, 64 << 10)).ok());
  ASSERT_TRUE(Write(*s, "two-parts.bin", data.substr(0, (64 << 10) + 1)).ok());
  EXPECT_EQ(*ReadFileToString(*s, "one-part.bin"), data.substr(0, 64 << 10));
  EXPECT_EQ(*ReadFileToString(*s, "two-parts.bin"), data.substr(0, (64 << 10) + 1));
  // Exclusive creation of an existing object fails.
  EXPECT_EQ(s->Create("big.bin", true).status().code(), StatusCode::kAlreadyExists);
}

TEST_P(ObjectStoreTest, InterruptedUploadLeavesNoObject) {
  auto s = Make({.part_size = 64 << 10});
  ASSERT_NE(s, nullptr);
  {
    auto f = s->Create("partial.bin");
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE((*f)->Append(AsBytes(TestBytes(200 << 10, 3))).ok());  // parts already uploaded
    // destroyed without Close(): a crash before the commit
  }
  {
    auto f = s->Create("small-partial.bin");
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE((*f)->Append(AsBytes("abc")).ok());
  }
  EXPECT_EQ(s->Stat("partial.bin").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(s->Stat("small-partial.bin").status().code(), StatusCode::kNotFound);
  auto names = s->ListNames("");
  ASSERT_TRUE(names.ok());
  EXPECT_TRUE(names->empty());
}

TEST_P(ObjectStoreTest, DeleteAndRename) {
  auto s = Make({});
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(Write(*s, "a/x.tmp", "payload").ok());
  ASSERT_TRUE(s->CreateDirectories("a/b/c").ok());
  ASSERT_TRUE(s->Rename("a/x.tmp", "a/x").ok());
  EXPECT_EQ(*ReadFileToString(*s, "a/x"), "payload");
  EXPECT_EQ(s->Stat("a/x.tmp").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(WriteFileAtomically(*s, "a/y", AsBytes("atomic")).ok());
  EXPECT_EQ(*ReadFileToString(*s, "a/y"), "atomic");
  ASSERT_TRUE(s->Delete("a/x").ok());
  EXPECT_EQ(s->Delete("a/x").code(), StatusCode::kNotFound);
  EXPECT_EQ(*s->ListNames("a"), std::vector<std::string>{"y"});
}

TEST_P(ObjectStoreTest, PutIfAbsentAndTheConditionalPutProbe) {
  auto s = Make({});
  ASSERT_NE(s, nullptr);
  Status probe = ProbeConditionalPut(*s, "t/_delta_log");
  if (is_azure()) {
    ASSERT_TRUE(probe.ok()) << probe.ToString();
    ASSERT_TRUE(s->PutIfAbsent("t/_delta_log/0.json", AsBytes("first")).ok());
    Status again = s->PutIfAbsent("t/_delta_log/0.json", AsBytes("second"));
    EXPECT_EQ(again.code(), StatusCode::kAlreadyExists) << again.ToString();
    EXPECT_EQ(*ReadFileToString(*s, "t/_delta_log/0.json"), "first");
    // Exclusive Create commits conditionally too (block list with If-None-Match).
    auto f = s->Create("t/_delta_log/1.json", true);
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE(s->PutIfAbsent("t/_delta_log/1.json", AsBytes("winner")).ok());
    ASSERT_TRUE((*f)->Append(AsBytes("loser")).ok());
    EXPECT_EQ((*f)->Close().code(), StatusCode::kAlreadyExists);
    EXPECT_EQ(*ReadFileToString(*s, "t/_delta_log/1.json"), "winner");
  } else {
    // s3rver ignores If-None-Match on PUT: the probe must say so (real S3 honours it since 2024).
    EXPECT_EQ(probe.code(), StatusCode::kUnsupported) << probe.ToString();
    EXPECT_NE(probe.message().find("If-None-Match"), std::string::npos);
  }
  // The probe object is gone.
  EXPECT_TRUE(s->ListNames("t/_delta_log")->size() <= 2u);
}

TEST_P(ObjectStoreTest, PutIfAbsentRaceHasOneWinner) {
  auto s = Make({});
  ASSERT_NE(s, nullptr);
  if (!is_azure()) {
    // s3rver ignores If-None-Match, so several writers may "win"; what must hold is that the probe
    // tells (real S3 honours the condition).
    EXPECT_EQ(ProbeConditionalPut(*s, "_delta_log").code(), StatusCode::kUnsupported);
    return;
  }
  for (int round = 0; round < 5; ++round) {
    std::string path = fmt::format("_delta_log/{:020d}.json", round);
    std::atomic<int> wins{0}, exists{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        Status st = s->PutIfAbsent(path, AsBytes("writer " + std::to_string(t)));
        if (st.ok()) ++wins;
        if (st.code() == StatusCode::kAlreadyExists) ++exists;
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(wins.load(), 1) << "round " << round;
    EXPECT_EQ(exists.load(), 3) << "round " << round;
  }
}

TEST_P(ObjectStoreTest, PutIfAbsentRaceAcrossProcessesHasOneWinner) {
  std::string container;
  auto s = Make({}, &container);
  ASSERT_NE(s, nullptr);
  if (!is_azure()) {
    EXPECT_EQ(ProbeConditionalPut(*s, "_delta_log").code(), StatusCode::kUnsupported);  // see above
    return;
  }
  int64_t start_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch()).count() + 300;
  std::vector<pid_t> children;
  for (int i = 0; i < 3; ++i) {
    std::vector<std::string> env_s;
    for (char** e = environ; *e; ++e) env_s.emplace_back(*e);
    env_s.push_back("STOKE_IO_TEST_CHILD_PORT=" + std::to_string(server_->port()));
    env_s.push_back("STOKE_IO_TEST_CHILD_CONTAINER=" + container);
    env_s.push_back("STOKE_IO_TEST_CHILD_DATA=process " + std::to_string(i));
    env_s.push_back("STOKE_IO_TEST_CHILD_START_MS=" + std::to_string(start_ms));
    std::vector<char*> envp;
    for (auto& e : env_s) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::string self = "/proc/self/exe";
    char* argv[] = {self.data(), nullptr};
    pid_t pid;
    ASSERT_EQ(posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv, envp.data()), 0);
    children.push_back(pid);
  }
  int won = 0, lost = 0;
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    won += WEXITSTATUS(status) == 10;
    lost += WEXITSTATUS(status) == 11;
  }
  EXPECT_EQ(won, 1);
  EXPECT_EQ(lost, 2);
  auto content = ReadFileToString(*s, "_delta_log/00000000000000000000.json");
  ASSERT_TRUE(content.ok());
  EXPECT_EQ(content->rfind("process ", 0), 0u);
}

TEST_P(ObjectStoreTest, MissingContainerIsNotFoundNamingIt) {
  std::string container;
  auto s = Make({.create_container = false}, &container);
  ASSERT_NE(s, nullptr);
  const char* kind = is_azure() ? "container" : "bucket";
  auto check = [&](const Status& st, const char* op) {
    EXPECT_EQ(st.code(), StatusCode::kNotFound) << op << ": " << st.ToString();
    EXPECT_NE(st.message().find(fmt::format("{} '{}'", kind, container)), std::string::npos) << op << ": " << st.message();
  };
  check(s->OpenForRead("t/x").status(), "open");
  check(s->ListNames("t").status(), "list");
  check(s->PutIfAbsent("t/x", AsBytes("x")), "put");
  check(Write(*s, "t/y", "y"), "write");
}

TEST_P(ObjectStoreTest, BadCredentialsGiveAClearErrorWithoutSecrets) {
  const std::string secret = is_azure() ? "V1JPTkdLRVlXUk9OR0tFWVdST05HS0VZ" : "WRONGSECRETWRONGSECRET";
  std::string container;
  auto good = Make({}, &container);
  ASSERT_NE(good, nullptr);
  BackendConfig c;
  c.container = container;
  c.bad_secret = secret;
  c.create_container = false;
  auto bad = Make(c);
  ASSERT_NE(bad, nullptr);
  Status st = bad->PutIfAbsent("x", AsBytes("x"));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("access denied"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("403"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find(secret), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find(is_azure() ? testing::kAzuriteKey : "S3RVER:"), std::string::npos);
  EXPECT_EQ(st.message().find("Signature="), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find("SharedKey"), std::string::npos) << st.message();
}

TEST_P(ObjectStoreTest, ManyRangedReadsInOneBatchAndFromManyThreads) {
  auto s = Make({});
  ASSERT_NE(s, nullptr);
  std::string data = TestBytes(1 << 20, 4);
  ASSERT_TRUE(Write(*s, "samples.bin", data).ok());
  constexpr int kRanges = 200;
  std::vector<std::string> bufs(kRanges);
  std::vector<ByteRangeRead> ranges;
  for (int i = 0; i < kRanges; ++i) {
    bufs[i].resize(1000 + i * 17);
    ranges.push_back({static_cast<uint64_t>(i) * 5000, MutableByteView(reinterpret_cast<uint8_t*>(bufs[i].data()), bufs[i].size())});
  }
  ranges.push_back({123, MutableByteView()});  // empty: OK without a request
  std::string past(10, '\0');
  ranges.push_back({data.size() - 5, MutableByteView(reinterpret_cast<uint8_t*>(past.data()), past.size())});
  auto results = s->ReadRanges("samples.bin", ranges);
  ASSERT_EQ(results.size(), ranges.size());
  for (int i = 0; i < kRanges; ++i) {
    ASSERT_TRUE(results[i].ok()) << results[i].ToString();
    ASSERT_EQ(bufs[i], data.substr(ranges[i].offset, bufs[i].size())) << "range " << i;
  }
  EXPECT_TRUE(results[kRanges].ok()) << results[kRanges].ToString();
  EXPECT_FALSE(results.back().ok());

  auto f = s->OpenForRead("samples.bin");
  ASSERT_TRUE(f.ok());
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::string buf(4096, '\0');
      for (int i = 0; i < 20; ++i) {
        uint64_t off = (static_cast<uint64_t>(t) * 131071 + i * 7919) % (data.size() - buf.size());
        Status st = (*f)->ReadAt(off, MutableByteView(reinterpret_cast<uint8_t*>(buf.data()), buf.size()));
        if (!st.ok() || buf != data.substr(off, buf.size())) ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(Servers, ObjectStoreTest, ::testing::Values("azurite", "s3rver"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// An account SAS (service blob, all resource types) for Azurite, signed with the account key: the
// 2015-04-05 string-to-sign layout, version 2019-12-12.
std::string AzuriteAccountSas() {
  std::string expiry = "2099-01-01T00:00:00Z";
  std::string sts = fmt::format("{}\nrwdlac\nb\nsco\n\n{}\n\n\n2019-12-12\n", testing::kAzuriteAccount, expiry);
  std::string sig = Base64Encode(HmacSha256(*Base64Decode(testing::kAzuriteKey), sts));
  return fmt::format("sv=2019-12-12&ss=b&srt=sco&sp=rwdlac&se={}&sig={}", UriEncode(expiry, false),
                     UriEncode(sig, false));
}

TEST(AzureSas, ReadsWritesAndListsWithASasToken) {
  STOKE_REQUIRE_TEST_SERVERS();
  testing::TestServer* server = testing::SharedServer("azurite");
  ASSERT_NE(server, nullptr);
  std::string container = testing::UniqueName("sas");
  AzureBlobOptions o = testing::AzuriteOptions(server->port(), container);
  o.account_key.clear();
  o.sas_token = "?" + AzuriteAccountSas();
  o.list_page_size = 1;
  auto s = NewAzureBlobStorage(o);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->client().CreateContainer().ok());
  ASSERT_TRUE((*s)->PutIfAbsent("t/a", AsBytes("sas bytes")).ok());
  ASSERT_TRUE((*s)->PutIfAbsent("t/b", AsBytes("more")).ok());
  EXPECT_EQ((*s)->PutIfAbsent("t/a", AsBytes("other")).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(*ReadFileToString(**s, "t/a"), "sas bytes");
  EXPECT_EQ(*(*s)->ListNames("t"), (std::vector<std::string>{"a", "b"}));
  ASSERT_TRUE((*s)->Rename("t/b", "t/c").ok());  // the copy source carries the SAS too
  EXPECT_EQ(*ReadFileToString(**s, "t/c"), "more");

  // A token whose signature does not match: access denied, and the signature is not repeated.
  AzureBlobOptions bad = o;
  std::string forged = "sv=2019-12-12&ss=b&srt=sco&sp=rwdlac&se=2099-01-01T00%3A00%3A00Z&sig=Rk9SR0VEU0lHTkFUVVJF";
  bad.sas_token = forged;
  auto b = NewAzureBlobStorage(bad);
  ASSERT_TRUE(b.ok());
  auto r = (*b)->OpenForRead("t/a");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("access denied"), std::string::npos) << r.status().message();
  EXPECT_EQ(r.status().message().find("Rk9SR0VEU0lHTkFUVVJF"), std::string::npos) << r.status().message();
}

// The resolver end to end: an Azurite connection string in the environment, an az:// URI.
TEST(StorageForUriLive, AzuriteThroughAConnectionString) {
  STOKE_REQUIRE_TEST_SERVERS();
  testing::TestServer* server = testing::SharedServer("azurite");
  ASSERT_NE(server, nullptr);
  std::string container = testing::UniqueName("uri");
  std::string cs = fmt::format("DefaultEndpointsProtocol=http;AccountName={};AccountKey={};BlobEndpoint={}/{};",
                               testing::kAzuriteAccount, testing::kAzuriteKey, server->url(), testing::kAzuriteAccount);
  EnvLookup env = [&](const std::string& n) { return n == "AZURE_STORAGE_CONNECTION_STRING" ? cs : std::string(); };
  auto loc = ResolveStorageLocation("az://" + container + "/tables/t1", env);
  ASSERT_TRUE(loc.ok()) << loc.status().ToString();
  auto* object_storage = dynamic_cast<ObjectStorage*>(loc->storage.get());
  ASSERT_NE(object_storage, nullptr);
  ASSERT_TRUE(object_storage->client().CreateContainer().ok());
  ASSERT_TRUE(loc->storage->PutIfAbsent(JoinPath(loc->path, "_delta_log/0.json"), AsBytes("{}")).ok());
  auto again = ResolveStorageLocation("az://" + container + "/tables/t1/_delta_log/0.json", env);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->storage, loc->storage);
  EXPECT_EQ(*ReadFileToString(*again->storage, again->path), "{}");
}

TEST(StorageForUriLive, S3rverThroughTheEnvironment) {
  STOKE_REQUIRE_TEST_SERVERS();
  testing::TestServer* server = testing::SharedServer("s3rver");
  ASSERT_NE(server, nullptr);
  std::string bucket = testing::UniqueName("uri");
  std::map<std::string, std::string> vars = {{"AWS_ACCESS_KEY_ID", "S3RVER"}, {"AWS_SECRET_ACCESS_KEY", "S3RVER"},
                                             {"AWS_REGION", "us-east-1"}, {"AWS_ENDPOINT_URL", server->url()}};
  EnvLookup env = [&](const std::string& n) { return vars.count(n) ? vars[n] : std::string(); };
  auto loc = ResolveStorageLocation("s3://" + bucket + "/t", env);
  ASSERT_TRUE(loc.ok()) << loc.status().ToString();
  ASSERT_TRUE(dynamic_cast<ObjectStorage&>(*loc->storage).client().CreateContainer().ok());
  ASSERT_TRUE(WriteFileAtomically(*loc->storage, JoinPath(loc->path, "a.txt"), AsBytes("s3 bytes")).ok());
  EXPECT_EQ(*ReadFileToString(*loc->storage, "t/a.txt"), "s3 bytes");
}

}  // namespace
}  // namespace stoke
