#include "io/local_files.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

namespace stoke {

int OpenReadDescriptor(const std::string& path, bool direct, int* error) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));
  *error = fd < 0 ? errno : 0;
  return fd;
}

void CloseDescriptor(int fd) {
  if (fd >= 0) ::close(fd);
}

Status CheckDirectReads(const std::string& path) {
  int error = 0;
  const int fd = OpenReadDescriptor(path, /*direct=*/true, &error);
  CloseDescriptor(fd);
  if (fd < 0 && error == EINVAL) {
    return Status::Unsupported("O_DIRECT refused for " + path + " (file system without direct I/O?)");
  }
  return Status::OK();
}

int64_t ResidentPages(const std::string& path, size_t offset, size_t size) {
  int error = 0;
  const int fd = OpenReadDescriptor(path, /*direct=*/false, &error);
  if (fd < 0) return -1;
  const size_t start = offset / 4096 * 4096;
  const size_t length = offset + size - start;
  void* map = ::mmap(nullptr, length, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(start));
  CloseDescriptor(fd);
  if (map == MAP_FAILED) return -1;
  std::vector<unsigned char> resident((length + 4095) / 4096);
  const bool ok = ::mincore(map, length, resident.data()) == 0;
  ::munmap(map, length);
  if (!ok) return -1;
  int64_t n = 0;
  for (unsigned char c : resident) n += c & 1;
  return n;
}

bool AdviseDropFromPageCache(const std::string& path) {
  int error = 0;
  const int fd = OpenReadDescriptor(path, /*direct=*/false, &error);
  if (fd < 0) return false;
  const bool advised = ::fdatasync(fd) == 0 && ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0;
  CloseDescriptor(fd);
  return advised;
}

Result<TemporaryDirectory> TemporaryDirectory::Create(const std::string& prefix) {
  std::error_code ec;
  std::string tmpl = (std::filesystem::temp_directory_path(ec) / (prefix + "XXXXXX")).string();
  if (ec) tmpl = "/tmp/" + prefix + "XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    return Status::IOError(fmt::format("cannot create a temporary directory {}: {}", tmpl, std::strerror(errno)));
  }
  return TemporaryDirectory(std::move(tmpl));
}

TemporaryDirectory::~TemporaryDirectory() {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

bool RemoveEmptyLocalDirectory(const std::string& path) {
  return ::rmdir(path.c_str()) == 0 || errno == ENOENT;
}

}  // namespace stoke
