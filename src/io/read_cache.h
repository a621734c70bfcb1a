// A local read cache for object-store files (the loader's `cache_dir`): the bytes a read fetches
// are kept on a local disk in blocks, so that later reads of them (later epochs) make no request.
//
// Entries are blocks of `block_bytes` at multiples of it in their object (an object's last block is
// shorter): a read fetches every block it touches that is not cached (consecutive ones with one
// request), so whatever ranges later reads take, and however the loader coalesced them, they are
// answered from the blocks. Layout under the directory:
//
//   <dir>/blocks-v1/<hh>/<40 hex>-<block index>    an entry; <40 hex> is the start of the SHA-256
//                                                  of the object's identity (Wrap), <hh> its first two
//   <dir>/blocks-v1/<hh>/<name>.tmp.<pid>.<n>      an entry being written
//
// An entry is a header followed by the block's bytes (little-endian):
//   0  magic "STKRCB01"        8  header_size u32 (a multiple of 4096; the data starts there)
//   12 chunk_bytes u32         16 block_offset u64 (the block's offset in its object)
//   24 data_length u32         28 identity_length u32
//   32 num_chunks u32          36 header_crc u32: CRC-32 of bytes [0, 36) and [40, header_size)
//   40 identity bytes, then num_chunks u32 CRC-32s, one per chunk_bytes of data (the last chunk
//      shorter), then zeros up to header_size
// The header repeats the identity, so a hash collision reads as a miss, never as wrong bytes.
//
// Several processes may share one directory:
//  - entries appear whole or not at all: written under a temporary name in the same directory, then
//    renamed over the entry's name (rename(2) is atomic). A process killed mid-write leaves only a
//    temporary file, which no reader opens and which scans delete after an hour.
//  - a reader reads an entry through the descriptor it opened, so an entry evicted (unlinked) or
//    replaced meanwhile by another process is still read whole: published entries never change.
//  - every read is verified: the header's CRC, identity, offset and lengths, the file's size, and
//    the CRC-32 of each chunk of data it serves. An entry that fails is deleted and its block
//    fetched again (a torn write before a power loss, a disk error, another program's writes); its
//    bytes are never delivered.
//  - recency is the entry's modification time, refreshed by a hit at most once a minute. Each process
//    counts the directory's bytes (a scan at Open, plus what it writes since); when its count passes
//    capacity_bytes, or it has written capacity_bytes / 8 since its last scan, it scans again and
//    deletes the least recently used entries down to 90 % of the capacity. The directory can thus
//    exceed the capacity by up to capacity / 8 per process writing at the same time.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/buffer.h"
#include "core/mutex.h"
#include "core/thread_pool.h"
#include "io/mapped_file.h"
#include "io/storage.h"

namespace stoke {

struct ReadCacheOptions {
  std::string dir;  // Required. Created (with its parents) when missing.
  // Default 16 GiB. Bytes of entries (headers included) kept in `dir`; beyond it the least recently
  // used entries are deleted (approximately when processes share `dir`: see above).
  uint64_t capacity_bytes = uint64_t{16} << 30;
  // Default 1 MiB. The size of an entry's block (at least 4096). Larger blocks make fewer entries
  // and requests; smaller ones fetch less around a read that misses.
  uint32_t block_bytes = uint32_t{1} << 20;
  // Default 64 MiB. Memory for blocks being fetched or written at once: a read that misses waits
  // for room (one read's blocks are always admitted when nothing else holds any, so it cannot hang).
  uint64_t max_fetch_bytes = uint64_t{64} << 20;
  // Default 4. Threads that read hits from disk (with their CRC checks) and write fetched blocks.
  size_t threads = 4;
};

struct ReadCacheStats {
  uint64_t hits = 0;             // blocks served from disk
  uint64_t misses = 0;           // blocks fetched from the object store
  uint64_t bytes_fetched = 0;    // bytes of those blocks
  uint64_t corrupt_entries = 0;  // entries that failed verification (deleted, fetched again)
  uint64_t entries_written = 0;
  uint64_t entries_evicted = 0;  // by this process's scans
  uint64_t write_errors = 0;     // entries not written (disk full, ...); their reads still succeeded
  uint64_t blocks_mapped = 0;    // entries mapped for reads with no system call each (MapBlock)
};

// A cache entry mapped read-only (ReadCache::MapBlock): the block's bytes are those of `map` from
// data_offset on, data_length of them.
struct MappedCacheBlock {
  MappedFile map;
  uint32_t data_offset = 0;
  uint32_t data_length = 0;
  std::string path;  // the entry's (ReadCache::Touch)
};

// Thread-safe. REQUIRES: the cache outlives every read in flight through its files (each file keeps
// the cache alive; a file must stay open until its reads complete, as for any RandomAccessFile).
class ReadCache : public std::enable_shared_from_this<ReadCache> {
 public:
  // Creates the directory when missing and scans it (its size; stale temporary files; eviction
  // when over capacity). InvalidArgument for bad options, IOError naming the directory when it
  // cannot be created or written.
  static Result<std::shared_ptr<ReadCache>> Open(ReadCacheOptions options);
  ~ReadCache();
  ReadCache(const ReadCache&) = delete;
  ReadCache& operator=(const ReadCache&) = delete;

  // A file that reads `base` through the cache. `identity` names the object's bytes for good: its
  // URI, size and modification time (a Delta table's data files never change under one name;
  // Wrap appends base->size()). ReadAtAsync answers from the reader threads (hits) or from the
  // base's completion (misses); ReadAt waits for ReadAtAsync. Identities of more than 2 KiB are
  // not cached (reads go to `base`).
  std::unique_ptr<RandomAccessFile> Wrap(std::unique_ptr<RandomAccessFile> base, std::string identity);

  // Maps the entry of block `block` (of options().block_bytes) of the object `identity` of `size`
  // bytes (both as given to Wrap, which appends the size), for a reader that copies its bytes with no
  // system call per read: where the entry exists and the page cache holds all of it, after checking
  // its header and the CRC of every chunk. Those checks are done once: copies out of the mapping are
  // not verified again (the loader checks each sample's page CRC). Refreshes the entry's recency.
  // nullopt where the block is past the object, there is no entry, its identity is too long to be
  // cached, the page cache lacks some of it or the kernel does not say (then read through Wrap,
  // which brings it in); Corruption (the entry deleted, as on a read) when it fails a check; IOError.
  Result<std::optional<MappedCacheBlock>> MapBlock(std::string identity, uint64_t size, uint64_t block);
  // Refreshes the recency of the entry at `entry_path` (MappedCacheBlock::path), as a read through the
  // cache does, so that eviction keeps entries read through their mappings: a reader of a mapped
  // entry calls it once per touch_interval() while it reads. Best effort.
  static void Touch(const std::string& entry_path);
  // How often a hit refreshes its entry's recency: once a minute.
  static std::chrono::seconds touch_interval();

  ReadCacheStats stats() const;
  const ReadCacheOptions& options() const { return options_; }
  // The entry file of block `block` of the object `identity` (as Wrap completes it), for tests.
  std::string EntryPath(const std::string& identity, uint64_t block) const;

 private:
  class CachedFile;
  struct Read;
  struct Waiter;
  struct Fetch;

  explicit ReadCache(ReadCacheOptions options);
  // Serves one read of `file`: hits from disk, misses registered and fetched. Reader thread.
  void Process(const CachedFile& file, Read* read) EXCLUDES(mu_);
  // What ServeOrClaim did with a block's part of a read.
  enum class BlockRoute {
    kServed,   // copied out: from a fetch being written, or from the entry file
    kWaiting,  // registered with a fetch in flight, which serves it
    kClaimed,  // registered on a new pending entry: the caller fetches the block
  };
  // Serves `w`, the part of a read in block `path` of `file` (at block_offset, block_length bytes),
  // or registers it. An entry published between the entry file's miss and the registration
  // (another read fetched and wrote the block meanwhile) sends it round again, so that a block is
  // fetched once however reads interleave.
  BlockRoute ServeOrClaim(const CachedFile& file, const std::string& path, uint64_t block_offset,
                          uint32_t block_length, const Waiter& w) EXCLUDES(mu_);
  // Fetches blocks [first, last] of `file` with one read of its base.
  void StartFetch(const CachedFile& file, uint64_t first, uint64_t last) EXCLUDES(mu_);
  void OnFetched(const std::shared_ptr<Fetch>& fetch, Status status) EXCLUDES(mu_);
  // Writes a fetched block's entry under a temporary name and renames it into place, then forgets
  // the block's pending entry. Writer thread.
  void Publish(const std::shared_ptr<const Fetch>& fetch, size_t k) EXCLUDES(mu_);
  // Forgets the pending entries of `fetch`'s blocks (written, or not to be).
  void ForgetPending(const std::shared_ptr<const Fetch>& fetch) EXCLUDES(mu_);
  // Copies a waiter's bytes out of block `k` of a fetch.
  void CopyOut(const Fetch& fetch, size_t k, const Waiter& w) const;
  // Copies bytes [from, from + length) of the block's entry at `path` to `out`, after verifying
  // them. NotFound when there is no entry; Corruption (the entry is then deleted) when it fails a
  // check; IOError when the disk fails.
  Status ServeFromEntry(const std::string& path, const std::string& identity, uint64_t block_offset,
                        uint32_t block_length, uint32_t from, uint32_t length, uint8_t* out);
  // Checks a mapped entry (MapBlock) whole: its header against the block and every chunk's CRC.
  Status VerifyMapped(const MappedFile& map, const std::string& path, const std::string& identity,
                      uint64_t block_offset, uint32_t block_length, uint32_t* data_offset);
  // An entry that failed a check: counted, logged and deleted, so that its block is fetched again.
  // Returns `why`.
  Status DropCorrupt(const std::string& path, Status why);
  // Counts the directory's bytes, deletes temporary files older than an hour, and with `evict`
  // deletes the oldest entries while over capacity (down to 90 % of it).
  void Scan(bool evict) EXCLUDES(mu_);
  void AcquireFetchBudget(uint64_t bytes) EXCLUDES(mu_);
  void ReleaseFetchBudget(uint64_t bytes) EXCLUDES(mu_);
  // Counts one of the read's parts done (with its status); the last one calls the read's callback.
  static void Finish(Read* read, const Status& status);

  const ReadCacheOptions options_;
  const std::string root_;  // <dir>/blocks-v1

  mutable Mutex mu_;
  CondVar budget_cv_;  // fetch budget freed
  // Blocks this process is fetching (with the reads waiting for them) or has fetched and not yet
  // written (reads copy them from memory: no second fetch while the entry is being written), by
  // entry path.
  struct Pending {
    std::vector<Waiter> waiters;
    std::shared_ptr<const Fetch> fetched;  // set when the bytes arrived: block `index` of it
    size_t index = 0;
  };
  std::unordered_map<std::string, Pending> pending_ GUARDED_BY(mu_);
  uint64_t published_ GUARDED_BY(mu_) = 0;  // pending entries Publish has forgotten so far
  uint64_t fetch_charged_ GUARDED_BY(mu_) = 0;

  std::atomic<uint64_t> usage_{0};         // bytes in the directory, as this process counts them
  std::atomic<uint64_t> written_since_scan_{0};
  std::atomic<bool> scanning_{false};
  std::atomic<uint64_t> temp_counter_{0};
  std::atomic<bool> logged_write_error_{false};
  std::atomic<uint64_t> hits_{0}, misses_{0}, bytes_fetched_{0}, corrupt_{0}, written_{0}, evicted_{0},
      write_errors_{0}, mapped_{0};

  // Last: destroyed first, running the tasks already queued (which use the members above).
  std::unique_ptr<ThreadPool> writers_;
  std::unique_ptr<ThreadPool> readers_;
};

// --- The entry format, exposed for tests and the fuzz target --------------------------------------

struct ReadCacheEntryHeader {
  uint32_t header_size = 0;
  uint32_t chunk_bytes = 0;
  uint64_t block_offset = 0;
  uint32_t data_length = 0;
  std::string identity;
  std::vector<uint32_t> chunk_crcs;
};

// The header of an entry holding `data` (header_size bytes, zero-padded).
std::string EncodeReadCacheEntryHeader(std::string_view identity, uint64_t block_offset, ByteView data);
// The header_size an entry's first bytes declare (0 when fewer than 12 bytes or no magic), so that a
// reader knows how much to read before parsing.
uint32_t ReadCacheDeclaredHeaderSize(ByteView first_bytes);
// Parses and checks a header from `bytes` (at least header_size of them): magic, sizes, the CRC.
// Corruption naming `what` and what is wrong otherwise.
Result<ReadCacheEntryHeader> ParseReadCacheEntryHeader(ByteView bytes, std::string_view what);
// Checks `chunks`, the entry's data from chunk `first_chunk` on (whole chunks; the last one may end
// with the data), against the header's CRCs. Corruption naming `what` and the chunk otherwise.
Status VerifyReadCacheChunks(const ReadCacheEntryHeader& header, uint32_t first_chunk, ByteView chunks,
                             std::string_view what);

}  // namespace stoke
