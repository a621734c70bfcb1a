// The Fetcher: positioned reads of byte ranges, issued asynchronously with a bounded queue depth and a
// bounded memory budget. Backends: io_uring (one ring, a completion thread) or a pread thread pool.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/buffer_pool.h"
#include "stoke/status.h"

namespace stoke {

// One positioned read.
struct FetchRequest {
  uint32_t file = 0;     // index into the list of files given to Fetcher::Open
  uint64_t offset = 0;   // byte offset in that file
  uint32_t length = 0;   // bytes to read
  uint64_t tag = 0;      // caller's cookie, returned in the FetchResult untouched
  // Optional split read (not with O_DIRECT): when `tail` is set, bytes [0, head_length) of the range
  // arrive in FetchResult::data and bytes [head_length, length) are written by the kernel straight to
  // `tail`, which the caller owns and must not touch until the result arrives. Only head_length bytes
  // are charged to the budget (the tail is the caller's memory). Lets a sample land in its batch slot
  // without a copy in user space.
  uint8_t* tail = nullptr;
  uint32_t head_length = 0;
};

struct FetchResult {
  uint64_t tag = 0;      // FetchRequest::tag
  AlignedBuffer data;    // exactly `length` bytes on success; empty on error
  Status status;         // why the read failed (names the file path, offset and length)
};

struct FetcherOptions {
  enum class Backend {
    kAuto,     // io_uring when io_uring_queue_init works here, else kPread
    kIoUring,  // io_uring only: Open fails with kUnsupported when the kernel or sandbox refuses it
    kPread,    // a pool of threads calling pread(2)
  };
  Backend backend = Backend::kAuto;  // Default: kAuto.
  int queue_depth = 32;              // Default: 32. Reads in flight at once (submitted, not yet completed).
  // Default: 256 MiB. Bytes charged for results not yet Released; Submit blocks beyond it. Charged at
  // Submit (the request's length), refunded by Release, or at completion when the read failed. One
  // request larger than the whole budget is admitted when nothing else is charged, so it cannot hang.
  int64_t max_bytes_in_flight = int64_t{256} << 20;
  // Default: false. Open files with O_DIRECT. Reads are widened to 4096-byte alignment (offset rounded
  // down, end rounded up) and the result is moved back to the requested range (a memmove of at most
  // one buffer, as AlignedBuffer has no offset view). Open fails with kUnsupported where the file
  // system refuses O_DIRECT (tmpfs).
  bool direct = false;
  size_t pread_threads = 4;  // Default: 4. Threads of the kPread backend.
};

// Threading contract: one producer thread calls Submit, one consumer thread calls Next and Release
// (they may be the same thread only if it never lets Submit block on a budget that only its own
// Release could free). backend_name and bytes_in_flight may be called from any thread. The destructor
// must not run concurrently with any other call; it waits for reads in flight to finish and drops
// results not yet taken.
class Fetcher {
 public:
  // Opens every file (read-only; O_DIRECT when o.direct). Errors name the file that failed.
  static Result<std::unique_ptr<Fetcher>> Open(std::vector<std::string> files, FetcherOptions o);
  ~Fetcher();
  Fetcher(const Fetcher&) = delete;
  Fetcher& operator=(const Fetcher&) = delete;

  // Queues a read. Blocks while queue_depth reads are in flight or the byte budget is exhausted.
  // Returns kInvalidArgument (and queues nothing) for a file index out of range, or a split read
  // (`tail`) with O_DIRECT or with head_length > length; I/O errors, including
  // a range past the end of the file, arrive later in FetchResult::status.
  Status Submit(FetchRequest r);

  // The next completed read, in completion order, blocking until one completes; nullopt at once when
  // nothing is outstanding (every submitted read was already returned). A consumer on another thread
  // than the producer must therefore know how many reads to expect.
  std::optional<FetchResult> Next();

  // Gives back a result's buffer the consumer is done with: refunds its size to the budget and keeps
  // the memory for later reads. REQUIRES: `buffer` is a FetchResult::data of this Fetcher, unresized.
  void Release(AlignedBuffer buffer);

  const char* backend_name() const;  // "io_uring" or "pread"
  int64_t bytes_in_flight() const;   // bytes currently charged to the budget

 private:
  struct File;
  struct Slot;
  class Backend;
  class PreadBackend;
  class UringBackend;

  Fetcher(std::vector<File> files, FetcherOptions o);
  // Reads a slot synchronously (pread backend); returns the status of the whole read.
  Status ReadSlotWithPread(Slot& slot);
  // Fills slot.iov with the destinations of the bytes not yet read; returns how many entries.
  int PrepareIovecs(Slot& slot) const;
  // Finishes a slot: trims the data, queues the result, frees the slot. Any thread.
  void CompleteSlot(int slot_index, Status status);
  bool ShortDirectReadHitEnd(const Slot& slot) const;
  Status EndOfFileError(const Slot& slot) const;
  Status ReadError(const Slot& slot, int err) const;

  std::vector<File> files_;
  const FetcherOptions options_;
  BufferPool pool_;
  std::vector<Slot> slots_;  // queue_depth of them; a slot is owned by the backend while in flight

  mutable std::mutex mu_;
  std::condition_variable space_cv_;  // signalled when a slot or budget frees up, and when in_flight_ drops
  std::condition_variable done_cv_;   // signalled when a result is queued
  std::vector<int> free_slots_;       // guarded by mu_
  int in_flight_ = 0;                 // guarded by mu_: slots owned by the backend
  int64_t bytes_charged_ = 0;         // guarded by mu_
  int64_t outstanding_ = 0;           // guarded by mu_: submitted and not yet returned by Next
  // Completed results not yet taken: a circular queue that grows by doubling and never shrinks, so
  // steady state allocates nothing. Guarded by mu_.
  std::vector<FetchResult> done_;
  size_t done_head_ = 0;
  size_t done_count_ = 0;

  std::unique_ptr<Backend> backend_;  // last: destroyed first (the destructor also stops it explicitly)
};

}  // namespace stoke
