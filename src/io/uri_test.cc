#include "io/uri.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <map>

#include "io/azure_storage.h"

namespace stoke {
namespace {

EnvLookup FakeEnv(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) {
    auto it = vars.find(name);
    return it == vars.end() ? std::string() : it->second;
  };
}

TEST(SplitUrl, SchemeHostAndPath) {
  UrlParts a = SplitUrl("http://127.0.0.1:10000/devstoreaccount1");
  EXPECT_EQ(a.scheme, "http");
  EXPECT_EQ(a.host, "127.0.0.1:10000");
  EXPECT_EQ(a.path, "/devstoreaccount1");
  UrlParts b = SplitUrl("https://acct.blob.core.windows.net");
  EXPECT_EQ(b.scheme, "https");
  EXPECT_EQ(b.host, "acct.blob.core.windows.net");
  EXPECT_EQ(b.path, "");
  UrlParts c = SplitUrl("minio:9000/base/x");
  EXPECT_EQ(c.scheme, "");
  EXPECT_EQ(c.host, "minio:9000");
  EXPECT_EQ(c.path, "/base/x");
  EXPECT_EQ(SplitUrl("").host, "");
}

TEST(StorageUri, ParsesEverySupportedForm) {
  auto u = ParseStorageUri("az://data/tables/volumes");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->scheme, StorageScheme::kAzureBlob);
  EXPECT_EQ(u->container, "data");
  EXPECT_EQ(u->path, "tables/volumes");
  EXPECT_EQ(u->account, "");

  u = ParseStorageUri("abfss://data@myacct.dfs.core.windows.net/t");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->scheme, StorageScheme::kAzureBlob);
  EXPECT_EQ(u->account, "myacct");
  EXPECT_EQ(u->container, "data");
  EXPECT_EQ(u->path, "t");

  u = ParseStorageUri("https://myacct.blob.core.windows.net/data/a/b");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->account, "myacct");
  EXPECT_EQ(u->container, "data");
  EXPECT_EQ(u->path, "a/b");

  u = ParseStorageUri("s3://bucket");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->scheme, StorageScheme::kS3);
  EXPECT_EQ(u->container, "bucket");
  EXPECT_EQ(u->path, "");

  u = ParseStorageUri("file:///tmp/x");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->scheme, StorageScheme::kLocal);
  EXPECT_EQ(u->path, "/tmp/x");

  for (const char* local : {"/data/t", "data/t", "./a:b", "rel/a:b"}) {
    u = ParseStorageUri(local);
    ASSERT_TRUE(u.ok()) << local;
    EXPECT_EQ(u->scheme, StorageScheme::kLocal);
    EXPECT_EQ(u->path, local);
  }
}

TEST(StorageUri, RejectsMalformedAndUnknownUris) {
  for (const char* bad : {"az:/x", "az:x", "foo://x", "az://", "az:///path", "s3://", "abfss://c/p",
                          "abfss://c@acct.example.com/p", "https://example.com/c/p", "https://a.blob.core.windows.net/",
                          "file://relative", "az://UPPER/x", "", "http://127.0.0.1:1/x"}) {
    auto u = ParseStorageUri(bad);
    EXPECT_FALSE(u.ok()) << bad;
    if (!u.ok()) {
      EXPECT_EQ(u.status().code(), StatusCode::kInvalidArgument) << bad;
    }
    // Never a local directory named "az:".
    auto loc = ResolveStorageLocation(bad, FakeEnv({}));
    EXPECT_FALSE(loc.ok()) << bad;
  }
}

TEST(StorageUri, ColonsInLocalPathsAreNotSchemes) {
  for (const char* local : {"run:1/table", "with: colon/t", "a:b", "data:v2", "./az:/x", "/abs/s3:/x"}) {
    auto u = ParseStorageUri(local);
    ASSERT_TRUE(u.ok()) << local << ": " << u.status().ToString();
    EXPECT_EQ(u->scheme, StorageScheme::kLocal) << local;
    EXPECT_EQ(u->path, local);
  }
  // Storage schemes without "//" stay errors, in any case.
  for (const char* bad : {"AZ:/x", "S3:bucket/x", "gs:/b/x", "hdfs:/x", "file:relative"}) {
    EXPECT_FALSE(ParseStorageUri(bad).ok()) << bad;
  }
}

TEST(StorageUri, CanonicalLocationsSpellEachPlaceOneWay) {
  EXPECT_EQ(*CanonicalLocation("az://c/a//b/"), "az://c/a/b");
  EXPECT_EQ(*CanonicalLocation("abfss://c@acct.dfs.core.windows.net/a/b"), "az://c/a/b");
  EXPECT_EQ(*CanonicalLocation("https://acct.blob.core.windows.net/c/a/b"), "az://c/a/b");
  EXPECT_EQ(*CanonicalLocation("s3://bkt"), "s3://bkt");
  EXPECT_EQ(*CanonicalLocation("s3://bkt/x/y.npy"), "s3://bkt/x/y.npy");
  EXPECT_EQ(*CanonicalLocation("test://mem/t/x"), "test://mem/t/x");
  EXPECT_FALSE(CanonicalLocation("az:/x").ok());

  // Local paths: absolute, normalised, symbolic links resolved, whether or not the file exists.
  auto dir = std::filesystem::temp_directory_path() / ("stoke_uri_test_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "real");
  std::filesystem::create_directory_symlink(dir / "real", dir / "link");
  const std::string real = *CanonicalLocation((dir / "real").string());
  EXPECT_EQ(*CanonicalLocation((dir / "link").string()), real);
  EXPECT_EQ(*CanonicalLocation((dir / "link" / ".." / "real" / "x.npy").string()), real + "/x.npy");
  EXPECT_EQ(*CanonicalLocation("file://" + (dir / "link/").string()), real);
  EXPECT_EQ(*CanonicalLocation((dir / "real" / "missing" / "y").string()), real + "/missing/y");
  const std::string cwd = std::filesystem::current_path().string();
  std::filesystem::current_path(dir);
  EXPECT_EQ(*CanonicalLocation("link/z.npy"), real + "/z.npy");
  std::filesystem::current_path(cwd);
  EXPECT_EQ(*CanonicalLocation("/"), "/");
  std::filesystem::remove_all(dir);
}

TEST(StorageUri, LocalPathsResolveToLocalStorage) {
  auto loc = ResolveStorageLocation("/tmp/some/table", FakeEnv({}));
  ASSERT_TRUE(loc.ok());
  EXPECT_EQ(loc->storage.get(), &LocalStorage());
  EXPECT_EQ(loc->path, "/tmp/some/table");
  loc = ResolveStorageLocation("file:///tmp/x", FakeEnv({}));
  ASSERT_TRUE(loc.ok());
  EXPECT_EQ(loc->path, "/tmp/x");
}

TEST(StorageUri, ObjectStoresNeedCredentialsAndShareOneStorage) {
  auto none = ResolveStorageLocation("az://c/t", FakeEnv({}));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find("AZURE_STORAGE_CONNECTION_STRING"), std::string::npos);

  auto env = FakeEnv({{"AZURE_STORAGE_ACCOUNT", "acct"}, {"AZURE_STORAGE_SAS_TOKEN", "sv=1&sig=SECRET"}});
  auto a = ResolveStorageLocation("az://c/t1", env);
  auto b = ResolveStorageLocation("abfss://c@acct.dfs.core.windows.net/t2", env);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(a->storage, b->storage);  // one connection pool per container
  EXPECT_EQ(a->path, "t1");
  EXPECT_EQ(b->path, "t2");

  auto other = ResolveStorageLocation("abfss://c@other.dfs.core.windows.net/t", env);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().message().find("SECRET"), std::string::npos);

  auto s3 = ResolveStorageLocation("s3://bucket/p", FakeEnv({{"AWS_ACCESS_KEY_ID", "AKID"}}));
  ASSERT_FALSE(s3.ok());  // secret missing
  s3 = ResolveStorageLocation("s3://bucket/p", FakeEnv({{"AWS_ACCESS_KEY_ID", "AKID"}, {"AWS_SECRET_ACCESS_KEY", "S"},
                                                        {"AWS_ENDPOINT_URL", "http://127.0.0.1:9"}}));
  ASSERT_TRUE(s3.ok());
  EXPECT_EQ(s3->path, "p");
}

TEST(AzureConnectionStrings, ParsesTheUsualForms) {
  auto c = ParseAzureConnectionString(
      "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
      "AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;"
      "BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->account_name, "devstoreaccount1");
  EXPECT_EQ(c->blob_endpoint, "http://127.0.0.1:10000/devstoreaccount1");
  EXPECT_EQ(c->account_key.size(), 88u);

  c = ParseAzureConnectionString("AccountName=acct;AccountKey=a2V5;EndpointSuffix=core.chinacloudapi.cn");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->blob_endpoint, "https://acct.blob.core.chinacloudapi.cn");

  c = ParseAzureConnectionString("BlobEndpoint=https://acct.blob.core.windows.net/;SharedAccessSignature=sv=2021&sig=abc%3D");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->account_name, "acct");
  EXPECT_EQ(c->sas_token, "sv=2021&sig=abc%3D");

  c = ParseAzureConnectionString("UseDevelopmentStorage=true");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->blob_endpoint, "http://127.0.0.1:10000/devstoreaccount1");
}

TEST(AzureConnectionStrings, RejectsBadInputWithoutEchoingSecrets) {
  for (const char* bad : {"", ";;", "AccountName=a", "AccountName=a;SECRETKEYMATERIAL", "=x;AccountName=a;AccountKey=a2V5",
                          "AccountName=a;AccountKey=SECRET!!", "AccountKey=a2V5", "DefaultEndpointsProtocol=ftp;AccountName=a;AccountKey=a2V5"}) {
    auto c = ParseAzureConnectionString(bad);
    EXPECT_FALSE(c.ok()) << bad;
    if (!c.ok()) {
      EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
      EXPECT_EQ(c.status().message().find("SECRET"), std::string::npos) << c.status().message();
    }
  }
}

}  // namespace
}  // namespace stoke
