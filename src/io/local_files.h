// Local files below the Storage interface, for readers that need the kernel's own tools: descriptors
// for direct (O_DIRECT) and io_uring reads, the page cache's state, and temporary directories
// (whole-file mappings: io/mapped_file.h). Layers above io/ reach the local file system through here
// or through LocalStorage(), never with open(2), mmap(2) or std::filesystem themselves.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/buffer.h"
#include "stoke/status.h"

namespace stoke {

// Opens `path` read-only and close-on-exec, with O_DIRECT when `direct`. Returns the descriptor, or
// -1 with *error set to the errno (the caller decides: EMFILE may be worth another try).
int OpenReadDescriptor(const std::string& path, bool direct, int* error);
// Closes a descriptor from OpenReadDescriptor (negative: nothing).
void CloseDescriptor(int fd);
// Whether the file system holding `path` accepts O_DIRECT: Unsupported naming the file when it
// refuses it (tmpfs, some network file systems); OK otherwise, errors other than that included
// (the reads of the file report them).
Status CheckDirectReads(const std::string& path);

// How many of the 4 KiB pages of bytes [offset, offset + size) of `path` are in the page cache
// (mincore(2)); -1 when it cannot tell.
int64_t ResidentPages(const std::string& path, size_t offset, size_t size);
// Writes the file's dirty pages back and asks the kernel to drop its pages from the page cache
// (posix_fadvise DONTNEED). False when either fails; file systems such as tmpfs keep the pages anyway
// (ResidentPages tells).
bool AdviseDropFromPageCache(const std::string& path);

// A new, empty directory under the system's temporary directory ($TMPDIR, else /tmp), named
// `<prefix>XXXXXX`, removed with all it holds when destroyed.
class TemporaryDirectory {
 public:
  static Result<TemporaryDirectory> Create(const std::string& prefix);
  TemporaryDirectory(TemporaryDirectory&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  TemporaryDirectory& operator=(TemporaryDirectory&&) = delete;
  TemporaryDirectory(const TemporaryDirectory&) = delete;
  ~TemporaryDirectory();
  const std::string& path() const { return path_; }

 private:
  explicit TemporaryDirectory(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// Removes the local directory `path` if it is empty; true when it is gone.
bool RemoveEmptyLocalDirectory(const std::string& path);

}  // namespace stoke
