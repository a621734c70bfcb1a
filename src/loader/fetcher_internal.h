// Private to src/loader: the fetcher's shared types, which fetcher.cc (submission, descriptors,
// completion) and fetcher_backends.cc (the backends that do the reads) both use.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/buffer.h"
#include "io/storage.h"
#include "loader/fetcher.h"

namespace stoke {

// An object-store file of the list (local files have an entry in Fetcher::descriptors_ instead):
// opened by the first read's Start (no request when the size is known), then shared by every read
// of the file. The producer thread's alone (the reads' completions do not touch it).
struct Fetcher::File {
  std::unique_ptr<RandomAccessFile> remote;
  bool open_tried = false;
  Status open_status;
};

// A read in flight. Owned by the backend between Submit and CompleteSlot.
struct Fetcher::Slot {
  FetchRequest request;
  AlignedBuffer buffer;  // read_length bytes
  uint64_t read_offset = 0;  // request.offset, rounded down to kDirectAlignment when direct
  uint64_t read_length = 0;  // bytes asked of the kernel (widened when direct)
  uint64_t head = 0;         // request.offset - read_offset
  uint64_t done = 0;         // bytes read so far
  int64_t charge = 0;        // bytes charged to the budget for this read
  int resubmits = 0;         // io_uring: resubmissions after ECANCELED
  int fd = -1;               // the file's descriptor, pinned open for this read (reads use this copy)
  bool pinned = false;       // whether this read holds a pin on its file
  iovec iov[2] = {};         // destinations of the bytes not yet read (kept here for io_uring)
  std::optional<uint32_t> tail_crc;  // FetchResult::tail_crc
  uint64_t needed() const { return head + request.length; }
  // Bytes of the range that land in `buffer` (the rest goes to request.tail).
  uint64_t buffered() const { return request.tail != nullptr ? request.head_length : read_length; }
};

class Fetcher::Backend {
 public:
  virtual ~Backend() = default;
  // Starts the read of slot `i`; the backend calls CompleteSlot(i, ...) exactly once, later or now.
  virtual void Start(int i) = 0;
  // Start for each slot; the io_uring backend submits them with one system call.
  virtual void Start(const std::vector<int>& slots) {
    for (int i : slots) Start(i);
  }
  virtual const char* name() const = 0;
  // Threads of the backend's own that do reads (Fetcher::read_threads).
  virtual size_t threads() const { return 0; }
};

}  // namespace stoke
