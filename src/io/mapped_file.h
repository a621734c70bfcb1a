// Whole local files mapped read-only: their bytes without a system call per read, copies out of
// them that survive the file shrinking under the mapping, and which of their pages the page cache
// holds. Layers above io/ map files through here, never with mmap(2) themselves.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "io/crc32_copy.h"
#include "stoke/status.h"

namespace stoke {

// A whole local file mapped read-only (a private mapping: nothing written through it reaches the
// file); unmapped when destroyed. The mapping covers the file's size when it was opened.
//
// A file truncated by someone else while it is mapped makes any access past its new end fault
// (SIGBUS). bytes() gives the mapping to readers of files nobody truncates (stoke's own index
// files); Copy is the access for files that others may rewrite in place: it catches that fault.
//
// Thread-safe: every const method may run on several threads at once.
class MappedFile {
 public:
  // NotFound when `path` does not exist; InvalidArgument when it is not a regular file.
  static Result<MappedFile> Open(const std::string& path);
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();
  ByteView bytes() const { return ByteView(static_cast<const uint8_t*>(map_), size_); }
  size_t size() const { return size_; }

  // Copies bytes [offset, offset + n) of the file to `out`. False when the range is not inside the
  // mapping, or when the file shrank under the mapping (the fault is caught, and the file is then
  // marked shrunk: every later Copy returns false at once). A file cut inside the page that holds
  // its new end reads as zeros up to that page's end, with no fault: a checksum over the bytes
  // tells (stoke's pages carry a CRC). A page the page cache lacks is read from
  // the disk, on this thread: ask Resident first where that must not happen.
  bool Copy(uint64_t offset, size_t n, uint8_t* out) const;
  // Copy for two destinations: the first `head_n` bytes to `head`, the next `tail_n` to `tail`. With
  // `tail_crc`, also the CRC-32 of the tail's bytes, continuing from *tail_crc, taken in the same pass
  // (Crc32Copy, whose stores go as `tail_stores` says); *tail_crc is left as it was when the copy fails.
  bool Copy(uint64_t offset, size_t head_n, uint8_t* head, size_t tail_n, uint8_t* tail,
            uint32_t* tail_crc = nullptr, CopyStores tail_stores = CopyStores::kCached) const;
  // Asks the CPU to start loading the first and the last cache line of bytes [offset, offset + n),
  // so that a Copy a little later does not wait for memory for its pages' translations and first
  // bytes (the CPU's own prefetchers stream the lines between; more prefetches measured no faster).
  // Never faults, whatever the file's state.
  void Prefetch(uint64_t offset, size_t n) const {
    if (offset >= size_ || n == 0) return;
    const uint8_t* p = static_cast<const uint8_t*>(map_) + offset;
    const size_t end = std::min<size_t>(n, size_ - offset);
    PrefetchLine(p);
    if (end > 64) PrefetchLine(p + end - 1);
  }
  // Whether a Copy found that the file shrank under the mapping.
  bool shrunk() const { return shrunk_ != nullptr && shrunk_->load(std::memory_order_relaxed); }

  // Whether Resident tells the truth for this file. The kernel reports the page cache of a mapped
  // file only to a process that owns it or may write to it (mincore(2)); to others it says every
  // page is resident.
  bool residency_known() const { return residency_known_; }
  // One bit per page (page_size()) of the file, set when the page cache holds that page (mincore(2)),
  // into `pages` (bit i of pages[i / 64]). False when the kernel refused to say.
  bool Resident(std::vector<uint64_t>* pages) const;
  // The system's page size: 4 KiB on x86-64, 4 or 64 KiB on arm64 and ppc64le.
  static size_t page_size();

 private:
  // GCC drops a loop of __builtin_prefetch as having no effect: on x86-64 the instruction is asked
  // for directly.
  static void PrefetchLine(const uint8_t* p) {
#if defined(__x86_64__)
    asm volatile("prefetcht0 %0" : : "m"(*p));
#else
    __builtin_prefetch(p);
#endif
  }
  MappedFile(void* map, size_t size, bool residency_known)
      : map_(map), size_(size), residency_known_(residency_known) {}
  void* map_ = nullptr;
  size_t size_ = 0;
  bool residency_known_ = false;
  // Behind a pointer so that the object stays movable; null once moved from (then nothing is mapped
  // and no Copy gets to the fault).
  std::unique_ptr<std::atomic<bool>> shrunk_ = std::make_unique<std::atomic<bool>>(false);
};

}  // namespace stoke
