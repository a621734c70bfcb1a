// The fetcher's cache of open descriptors of local files (fetcher.h): per file its descriptor and
// its pins (reads in flight, and pins for reads at once), at most max_open files open at once, the
// idle ones (open, no pin) kept in least recently used order to be evicted first. Private to
// src/loader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace stoke {

// Bookkeeping only: the caller opens and closes the descriptors (outside its lock: opens may be slow
// on network file systems) and holds its own lock around every call. Not thread-safe.
class DescriptorCache {
 public:
  // `files`: how many files the list holds (file indices 0..files-1); `max_open` >= 1.
  DescriptorCache(size_t files, size_t max_open) : entries_(files), max_open_(max_open) {}

  // File f's descriptor, pinned once more, when it is open; -1 when it is not.
  int PinOpen(uint32_t f);
  // Whether a file that is not open can take a place now: fewer than max_open are open (or being
  // opened), or an idle one can be evicted.
  bool HasRoom() const { return open_ < max_open_ || head_ != kNone; }
  // Gives file f (not open; REQUIRES: HasRoom()) a place, pinned once, while the caller opens it.
  // Returns the idle descriptor evicted for it, which the caller closes, or -1.
  int Reserve(uint32_t f);
  // The open of reserved file f gave `fd`; or failed (its place is given back).
  void Opened(uint32_t f, int fd) { entries_[f].fd = fd; }
  void OpenFailed(uint32_t f);
  // Drops one pin of file f; with none left it becomes idle: the most recently used.
  void Unpin(uint32_t f);
  // The least recently used idle descriptor, taken out of the cache (the caller closes it); -1 when
  // no descriptor is idle.
  int EvictIdle();
  bool has_idle() const { return head_ != kNone; }
  // Files open or being opened.
  size_t open() const { return open_; }
  size_t max_open() const { return max_open_; }
  // Every open descriptor, taken out of the cache (for the caller to close).
  std::vector<int> TakeAll();

 private:
  static constexpr uint32_t kNone = ~uint32_t{0};
  struct Entry {
    int fd = -1;    // -1 while closed (and while the caller opens it)
    int pins = 0;   // reads in flight on this file (plus the caller opening it)
    uint32_t prev = kNone;  // links in the list of idle open files, oldest first
    uint32_t next = kNone;
    bool idle = false;      // in that list
  };
  void RemoveIdle(uint32_t f);
  void PushIdle(uint32_t f);

  std::vector<Entry> entries_;
  const size_t max_open_;
  size_t open_ = 0;
  uint32_t head_ = kNone;  // the idle list: least recently used first
  uint32_t tail_ = kNone;
};

}  // namespace stoke
