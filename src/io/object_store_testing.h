// Test-only helpers (included by *_test.cc, never by the library): start the real object-store
// servers of tests/servers/ (Azurite, s3rver, the fault proxy) through tests/servers/launch.mjs and
// build storages pointed at them.
//
// When the servers are not installed (`npm ci` in tests/servers, see scripts/bootstrap.sh), tests
// using STOKE_REQUIRE_TEST_SERVERS() fail if the environment variable CI is set and skip otherwise.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <random>
#include <filesystem>
#include <memory>
#include <string>

#include "io/azure_storage.h"
#include "io/s3_storage.h"

extern char** environ;

namespace stoke::testing {

inline std::string ServersDir() { return std::string(STOKE_SOURCE_DIR) + "/tests/servers"; }

inline bool TestServersInstalled() {
  namespace fs = std::filesystem;
  return fs::exists(ServersDir() + "/node_modules/azurite/dist/src/blob/main.js") &&
         fs::exists(ServersDir() + "/node_modules/s3rver/package.json") && ::system("node --version >/dev/null 2>&1") == 0;
}

#define STOKE_REQUIRE_TEST_SERVERS()                                                                       \
  do {                                                                                                     \
    if (!::stoke::testing::TestServersInstalled()) {                                                       \
      if (::getenv("CI") != nullptr) {                                                                     \
        FAIL() << "object-store test servers missing: run `npm ci` in tests/servers (scripts/bootstrap.sh)"; \
      }                                                                                                    \
      GTEST_SKIP() << "object-store test servers not installed (npm ci in tests/servers); set CI to fail instead"; \
    }                                                                                                      \
  } while (false)

// A server process started by launch.mjs; stopped (SIGTERM, then wait) when destroyed. The child
// also stops by itself when this process dies (its stdin pipe closes).
class TestServer {
 public:
  // kind: "azurite", "s3rver" or "proxy" (args: the upstream port). Empty on failure (see error()).
  static std::unique_ptr<TestServer> Start(const std::string& kind, const std::string& arg = "") {
    auto s = std::unique_ptr<TestServer>(new TestServer());
    int out[2], in[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(in, O_CLOEXEC) != 0) return nullptr;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    std::string script = ServersDir() + "/launch.mjs";
    std::vector<std::string> argv_s = {"node", script, kind};
    if (!arg.empty()) argv_s.push_back(arg);
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    int rc = posix_spawnp(&s->pid_, "node", &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(out[1]);
    ::close(in[0]);
    s->stdin_fd_ = in[1];
    if (rc != 0) {
      ::close(out[0]);
      return nullptr;
    }
    // Wait for "READY <port>\n".
    std::string line;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (line.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      struct pollfd p = {out[0], POLLIN, 0};
      if (::poll(&p, 1, 200) <= 0) continue;
      char buf[256];
      ssize_t n = ::read(out[0], buf, sizeof(buf));
      if (n <= 0) break;
      line.append(buf, static_cast<size_t>(n));
    }
    ::close(out[0]);
    if (line.rfind("READY ", 0) != 0) return nullptr;
    s->port_ = std::atoi(line.c_str() + 6);
    return s->port_ > 0 ? std::move(s) : nullptr;
  }
  ~TestServer() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status;
      ::waitpid(pid_, &status, 0);
    }
    if (stdin_fd_ >= 0) ::close(stdin_fd_);
  }
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  TestServer() = default;
  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  int port_ = 0;
};

// One server of each kind per test binary, started on first use.
inline TestServer* SharedServer(const std::string& kind) {
  static std::unique_ptr<TestServer> azurite, s3rver;
  auto& slot = kind == "azurite" ? azurite : s3rver;
  if (!slot) slot = TestServer::Start(kind);
  return slot.get();
}

inline constexpr const char* kAzuriteAccount = "devstoreaccount1";
inline constexpr const char* kAzuriteKey =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

// A fresh container name per call (tests never share state): the process id, a counter, and a
// random part, so that processes in different PID namespaces (which may share a pid) never meet.
inline std::string UniqueName(const std::string& base) {
  static std::atomic<int> n{0};
  static const uint32_t salt = std::random_device{}();
  return base + "-" + std::to_string(::getpid()) + "-" + std::to_string(salt % 100000) + "-" +
         std::to_string(n.fetch_add(1));
}

// Fast retries for tests: faults are injected on purpose.
inline HttpClientOptions TestHttpOptions() {
  HttpClientOptions o;
  o.retry.initial_backoff_us = 5'000;
  o.retry.max_backoff_us = 50'000;
  o.request_timeout_ms = 10000;
  return o;
}

inline AzureBlobOptions AzuriteOptions(int port, const std::string& container) {
  AzureBlobOptions o;
  o.endpoint = "http://127.0.0.1:" + std::to_string(port) + "/" + kAzuriteAccount;
  o.account = kAzuriteAccount;
  o.account_key = kAzuriteKey;
  o.container = container;
  o.http = TestHttpOptions();
  return o;
}

inline S3Options S3rverOptions(int port, const std::string& bucket) {
  S3Options o;
  o.endpoint = "http://127.0.0.1:" + std::to_string(port);
  o.bucket = bucket;
  o.credentials.access_key_id = "S3RVER";
  o.credentials.secret_access_key = "S3RVER";
  o.http = TestHttpOptions();
  return o;
}

// Deterministic test bytes.
inline std::string TestBytes(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    s[i] = static_cast<char>(x >> 24);
  }
  return s;
}

}  // namespace stoke::testing
