// The loader's reads out of mapped files (docs/architecture.md, "The loader"): a batch's split reads
// whose pages the page cache holds are copied out of a read-only mapping, with no system call per
// read, whatever their size. The mapping is of the data file itself for local tables, and of the
// read cache's entry of the page's block for object stores read through a cache directory (later
// epochs). Private to src/loader.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/mapped_file.h"

namespace stoke {

class ReadCache;

// Files mapped at once, at most: each mapping holds one of the process's memory maps (65,530 by
// default, vm.max_map_count). A table's files beyond the first this many read are read with a
// system call per read, as without mappings.
inline constexpr size_t kMaxMappedFiles = 1024;
// Read cache blocks kept track of, at most (16 GiB of a table in the cache's default 1 MiB blocks,
// its default capacity): those of the first this many blocks met are mapped once cached; other
// blocks are read through the cache's threads, as without mappings.
inline constexpr size_t kMaxMappedBlocks = 16384;

// Where a read's bytes lie: in `map` from `offset` on; for a read across two of a read cache's
// blocks, its first `first_length` bytes there and the rest in `next` from `next_offset` on. Null
// `map`: not in a mapping.
struct MappedRange {
  const MappedFile* map = nullptr;
  uint64_t offset = 0;
  const MappedFile* next = nullptr;
  uint64_t next_offset = 0;
  uint32_t first_length = 0;

  // Copies the read's first `head_n` bytes to `head` and the next `tail_n` to `tail`
  // (MappedFile::Copy): false when a mapping's file shrank under it. With `tail_crc`, also the
  // CRC-32 of the tail, continuing from *tail_crc, taken in the same pass (*tail_crc is left as it
  // was when the copy fails), its stores as `tail_stores` says.
  bool Copy(size_t head_n, uint8_t* head, size_t tail_n, uint8_t* tail, uint32_t* tail_crc = nullptr,
            CopyStores tail_stores = CopyStores::kCached) const;
  // Asks the CPU for the first and last cache lines of the read's first `n` bytes in `map`.
  void Prefetch(size_t n) const { map->Prefetch(offset, next != nullptr ? std::min<size_t>(n, first_length) : n); }

 private:
  // Copies bytes [from, from + n) of the read to `out`, from one mapping or both (continuing the CRC
  // `crc` over them, when not null, with `stores`).
  bool CopyPart(uint64_t from, size_t n, uint8_t* out, uint32_t* crc, CopyStores stores) const;
};

// Which of a batch's reads can be copied out of a mapping. The mappings and what the page cache holds
// of them are the producer's: Find, BeginBatch and the constructors run on the producer thread only.
// The MappedFiles Find returns stay valid until the object is destroyed, and may be copied from on
// any thread (MappedFile::Copy).
//
// What the page cache holds is looked up (mincore(2), one call per 65,536 pages) for a whole mapping
// at once and kept as one bit per page. It is looked up again when older than the refresh interval
// (50 times the last lookup's cost, at least 100 ms), while lookups take at most 2 % of the time
// (a debt of at most 100 ms is kept):
// a page dropped from the page cache since the last lookup is read from the disk by the thread that
// copies it (a page fault), so a table larger than the memory goes to the fetcher instead as soon as
// a lookup shows it.
class MappedReads {
 public:
  // Local data files at `paths`, each mapped whole at its first read.
  explicit MappedReads(std::shared_ptr<const std::vector<std::string>> paths);
  // Object-store files at `paths`, read through `cache`: a block's entry is mapped at a read of the
  // block once the cache holds it and the page cache all of it (ReadCache::MapBlock); until then
  // (or after a damaged entry, which the cache deletes and fetches again) the block is looked for
  // again after 1 s, then 2 s, up to 64 s. A mapped entry's recency is refreshed once a minute while
  // it is read (ReadCache::Touch). `identities` and `sizes` per file, as the fetcher gives them to
  // ReadCache::Wrap.
  MappedReads(std::shared_ptr<const std::vector<std::string>> paths, std::shared_ptr<ReadCache> cache,
              std::vector<std::string> identities, std::vector<uint64_t> sizes);
  ~MappedReads();

  // Takes the time for the batch being planned.
  void BeginBatch();
  // Where bytes [offset, offset + length) of file `file` lie in a mapping (for a cache, in one block's
  // entry or across two), when the page cache held each of their pages at the last lookup; a null
  // map otherwise (the read goes the other way). Maps at the first read,
  // where it can (a local regular file whose page cache the kernel reports to this process, or a
  // cache entry as above) and kMaxMappedFiles or kMaxMappedBlocks allows.
  MappedRange Find(uint32_t file, uint64_t offset, uint32_t length);
  const std::string& path(uint32_t file) const { return (*paths_)[file]; }
  size_t mapped_files() const { return mapped_; }

 private:
  // A mapped file, or a mapped cache entry.
  struct Region {
    std::unique_ptr<MappedFile> map;  // null: not mapped (now, or for good when retry_ns is 0)
    uint64_t data_offset = 0;         // where the region's bytes start in the mapping (after a header)
    uint64_t data_length = 0;
    std::vector<uint64_t> resident;   // bit per page of the mapping (MappedFile::Resident)
    int64_t looked_ns = 0;            // when, and what the lookup cost
    int64_t lookup_cost_ns = 0;
    int64_t retry_ns = 0;             // a cache block not mapped yet: when to look for it again
    int64_t retry_interval_ns = 0;
    std::string entry_path;           // a mapped cache block's entry, and when it was last touched
    int64_t touched_ns = 0;
  };
  // The region of `key` (a file, or a file's block), mapped at its first use; an empty region past
  // the limit.
  Region& RegionOf(uint64_t key, uint32_t file, uint64_t block);
  // Maps file `file` (block `block` of it, for a cache) into `r` where it can.
  void Map(Region& r, uint32_t file, uint64_t block);
  void MapBlock(Region& r, uint32_t file, uint64_t block);
  // Where bytes [offset, offset + length) of the region lie in its mapping, when resident.
  MappedRange Within(Region& r, uint64_t offset, uint32_t length);
  // Looks up what the page cache holds of `r` when the refresh interval and the 2 % allow it.
  void Refresh(Region& r);
  // Refreshes a mapped cache entry's recency once per ReadCache::touch_interval().
  void Touch(Region& r);

  const std::shared_ptr<const std::vector<std::string>> paths_;
  const std::shared_ptr<ReadCache> cache_;  // null for local files
  const std::vector<std::string> identities_;
  const std::vector<uint64_t> sizes_;
  const uint64_t block_bytes_ = 0;  // the cache's
  const size_t max_regions_;
  std::unordered_map<uint64_t, Region> regions_;  // every region Find met up to the limit; nodes never move
  Region unmapped_;                               // the region of those past the limit
  uint64_t last_key_ = ~uint64_t{0};              // the key of the last Find (a batch's reads come in file order)
  Region* last_ = nullptr;
  size_t mapped_ = 0;
  const uint64_t page_ = MappedFile::page_size();  // the residency bits' unit
  const int64_t start_ns_;
  int64_t now_ns_ = 0;        // BeginBatch's time
  int64_t lookups_ns_ = 0;    // the lookups' total cost
  bool logged_map_error_ = false;  // a cache entry failed to map for another reason than damage
};

}  // namespace stoke
