// Buffers in transparent huge pages, for reads with O_DIRECT.
//
// A direct read is handed to the device as a scatter-gather list with one entry per physically
// contiguous run of its buffer. A buffer of ordinary 4 KiB pages is, to the device, about one entry
// per page; a virtio-blk device without indirect descriptors takes a slot of its ring (a few hundred)
// per entry, so only 3 to 8 reads of 360 KB fit in it at once, whatever the queue depth asked for
// (measured here: 3-8 reads in flight at the device, /sys/block/vda/inflight, for stoke's 64 and for
// fio's). In a 2 MiB huge page a read is one or two entries, and the whole queue depth reaches the
// device (57-64 in flight; docs/benchmarks.md, "Cold reads and the buffers' pages"). Other devices
// gain less, as fewer entries cost them less, and lose nothing. Where transparent huge pages are off
// or none is free, the kernel backs the same memory with ordinary pages: reads stay correct.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "core/buffer.h"
#include "core/mutex.h"

namespace stoke {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// `bytes` (rounded up to 4 KiB) of anonymous memory starting on a huge-page boundary, advised
// MADV_HUGEPAGE, for a large buffer of its own; nullptr when it cannot be mapped. Free it with
// UnmapHugePageRegion(p, bytes). Large buffers filled by the CPU gain too: a huge page is one fault
// where 4 KiB pages were 512 (faults cost several microseconds in a virtual machine: the loader's
// first batches, which touch its slots for the first time, were mostly page faults here).
uint8_t* MapHugePageRegion(size_t bytes);
void UnmapHugePageRegion(uint8_t* p, size_t bytes);

// Hands out buffers carved out of memory mapped on 2 MiB boundaries and advised MADV_HUGEPAGE.
// Buffers below 2 MiB are rounded up to a size class (a multiple of 64 KiB) and packed several to a
// huge page (five of 384 KiB: 94 % of it used); larger ones get a region of their own, aligned to a
// huge page and rounded up to 4 KiB only (a region that ended on a whole huge page would take all
// of its last 2 MiB as soon as that page is touched). A returned buffer goes back to its class's
// free list for the next Take. Memory stays bounded by what is in use at once: there are at most 31
// classes below 2 MiB, each as large as its own peak, and returned regions of 2 MiB and more are
// kept only up to kMaxIdleLargeBytes in all (the rest is unmapped at once), so reads of ever new
// large sizes do not pile up memory. The rest is unmapped when the last buffer and the owner have
// let go of the HugePageBlocks (each buffer holds a reference). Thread-safe.
class HugePageBlocks final : public BufferMemory, public std::enable_shared_from_this<HugePageBlocks> {
 public:
  static std::shared_ptr<HugePageBlocks> Create();
  ~HugePageBlocks() override;
  HugePageBlocks(const HugePageBlocks&) = delete;
  HugePageBlocks& operator=(const HugePageBlocks&) = delete;

  // An empty buffer with at least `size` bytes of capacity (size > 0). Throws std::bad_alloc when the
  // memory cannot be mapped.
  AlignedBuffer Take(size_t size) EXCLUDES(mu_);
  void Return(uint8_t* data, size_t capacity) override EXCLUDES(mu_);

  // Bytes mapped now (all classes, free or handed out).
  size_t mapped_bytes() const EXCLUDES(mu_);
  // The capacity Take(size) gives: the size class below 2 MiB, else size rounded up to 4 KiB.
  static size_t CapacityFor(size_t size);

  // Returned buffers of 2 MiB and more kept for reuse, in bytes, at most.
  static constexpr size_t kMaxIdleLargeBytes = size_t{64} << 20;

 private:
  HugePageBlocks() = default;

  struct SizeClass {
    std::vector<uint8_t*> free;  // capacity >= blocks: Return never allocates
    size_t blocks = 0;           // handed out or free
  };

  mutable Mutex mu_;
  std::map<size_t, SizeClass> classes_ GUARDED_BY(mu_);  // by capacity
  std::vector<std::pair<uint8_t*, size_t>> regions_ GUARDED_BY(mu_);  // every mapping, for the destructor
  size_t mapped_ GUARDED_BY(mu_) = 0;
  size_t idle_large_ GUARDED_BY(mu_) = 0;  // bytes in the free lists of classes from 2 MiB up
};

}  // namespace stoke
