#include "loader/mapped_reads.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <utility>

#include "core/clock.h"
#include "core/log.h"
#include "io/read_cache.h"

namespace stoke {
namespace {

constexpr int64_t kMinRefreshNs = 100'000'000;  // 100 ms
constexpr int64_t kRefreshCostFactor = 50;      // the interval is at least 50 times a lookup's cost
constexpr int64_t kLookupShare = 50;            // lookups take at most 1/50 (2 %) of the time
// The lookups' debt (their cost beyond the 2 % of the time so far) is forgiven beyond this: the first
// lookups of many large files cannot hold every refresh back for long (at most 50 x 100 ms = 5 s).
constexpr int64_t kMaxLookupDebtNs = 100'000'000;
// A cache block not mapped yet is looked for again after this, doubling up to kMaxRetryNs: an entry
// is written just after the first epoch's read of its block, and one that stays away (not resident,
// or its residency not reported) costs a failed attempt per minute.
constexpr int64_t kFirstRetryNs = 1'000'000'000;
constexpr int64_t kMaxRetryNs = 64'000'000'000;

}  // namespace

MappedReads::MappedReads(std::shared_ptr<const std::vector<std::string>> paths)
    : paths_(std::move(paths)), max_regions_(kMaxMappedFiles), start_ns_(NowNanos()), now_ns_(start_ns_) {}

MappedReads::MappedReads(std::shared_ptr<const std::vector<std::string>> paths, std::shared_ptr<ReadCache> cache,
                         std::vector<std::string> identities, std::vector<uint64_t> sizes)
    : paths_(std::move(paths)),
      cache_(std::move(cache)),
      identities_(std::move(identities)),
      sizes_(std::move(sizes)),
      block_bytes_(cache_->options().block_bytes),
      max_regions_(kMaxMappedBlocks),
      start_ns_(NowNanos()),
      now_ns_(start_ns_) {}

MappedReads::~MappedReads() = default;

void MappedReads::BeginBatch() { now_ns_ = NowNanos(); }

MappedReads::Region& MappedReads::RegionOf(uint64_t key, uint32_t file, uint64_t block) {
  if (key != last_key_) {
    auto it = regions_.find(key);
    if (it == regions_.end()) {
      // Past the most regions, a region is not even remembered: a table of 650,000 files would
      // otherwise keep an entry for each.
      if (regions_.size() >= max_regions_) return unmapped_;
      it = regions_.try_emplace(key).first;
      Map(it->second, file, block);
    }
    last_key_ = key;
    last_ = &it->second;
  }
  Region& r = *last_;
  if (r.map == nullptr && r.retry_ns != 0 && now_ns_ >= r.retry_ns) MapBlock(r, file, block);
  return r;
}

void MappedReads::Map(Region& r, uint32_t file, uint64_t block) {
  if (cache_ != nullptr) {
    r.retry_interval_ns = kFirstRetryNs;
    MapBlock(r, file, block);
    return;
  }
  Result<MappedFile> map = MappedFile::Open(path(file));
  if (map.ok() && map->residency_known() && map->size() > 0) {
    r.map = std::make_unique<MappedFile>(std::move(*map));
    r.data_length = r.map->size();
    ++mapped_;
  }
}

void MappedReads::MapBlock(Region& r, uint32_t file, uint64_t block) {
  Result<std::optional<MappedCacheBlock>> got = cache_->MapBlock(identities_[file], sizes_[file], block);
  if (!got.ok() || !got->has_value()) {
    // Not cached yet, not all in the page cache, damaged (logged and deleted by the cache, whose
    // threads fetch the block again) or not mappable now (a disk error, no memory maps left): read
    // through the cache meanwhile, and looked for again later.
    if (!got.ok() && got.status().code() != StatusCode::kCorruption && !logged_map_error_) {
      logged_map_error_ = true;
      STOKE_LOG(kWarn, "loader.cache_block_not_mapped",
                "file={} block={} error=\"{}\" (read through the cache; looked for again later; logged once)",
                path(file), block, got.status().ToString());
    }
    r.retry_ns = now_ns_ + r.retry_interval_ns;
    r.retry_interval_ns = std::min(kMaxRetryNs, 2 * r.retry_interval_ns);
    return;
  }
  MappedCacheBlock& b = **got;
  r.map = std::make_unique<MappedFile>(std::move(b.map));
  r.data_offset = b.data_offset;
  r.data_length = b.data_length;
  r.entry_path = std::move(b.path);
  r.touched_ns = now_ns_;
  r.retry_ns = 0;
  ++mapped_;
}

void MappedReads::Touch(Region& r) {
  const int64_t interval = std::chrono::duration_cast<std::chrono::nanoseconds>(ReadCache::touch_interval()).count();
  if (now_ns_ - r.touched_ns < interval) return;
  ReadCache::Touch(r.entry_path);
  r.touched_ns = now_ns_;
}

void MappedReads::Refresh(Region& r) {
  const bool never = r.looked_ns == 0;
  const int64_t interval = std::max(kMinRefreshNs, kRefreshCostFactor * r.lookup_cost_ns);
  if (!never && now_ns_ - r.looked_ns < interval) return;
  const int64_t allowed = (now_ns_ - start_ns_) / kLookupShare;
  if (!never && lookups_ns_ > allowed) return;
  const int64_t began = NowNanos();
  if (!r.map->Resident(&r.resident)) r.resident.clear();  // the kernel refused: nothing is resident
  const int64_t ended = NowNanos();
  r.looked_ns = ended;
  r.lookup_cost_ns = ended - began;
  lookups_ns_ = std::min(lookups_ns_ + r.lookup_cost_ns, allowed + kMaxLookupDebtNs);
}

MappedRange MappedReads::Within(Region& r, uint64_t offset, uint32_t length) {
  if (r.map == nullptr || r.map->shrunk()) return {};
  if (offset > r.data_length || length > r.data_length - offset) return {};
  Refresh(r);
  if (!r.entry_path.empty()) Touch(r);
  const uint64_t at = r.data_offset + offset;
  const uint64_t last = (at + length - 1) / page_;
  if (last / 64 >= r.resident.size()) return {};
  for (uint64_t p = at / page_; p <= last; ++p) {
    if ((r.resident[p / 64] >> (p % 64) & 1) == 0) return {};
  }
  return {r.map.get(), at};
}

MappedRange MappedReads::Find(uint32_t file, uint64_t offset, uint32_t length) {
  if (length == 0) return {};
  if (cache_ == nullptr) return Within(RegionOf(file, file, 0), offset, length);
  const uint64_t block = offset / block_bytes_;
  const uint64_t last = (offset + length - 1) / block_bytes_;
  if (file >= sizes_.size() || last > block + 1 || last >= std::numeric_limits<uint32_t>::max()) return {};
  const uint64_t from = offset - block * block_bytes_;
  if (last == block) return Within(RegionOf(uint64_t{file} << 32 | block, file, block), from, length);
  // Across two blocks: the first's end, then the second's start.
  const uint32_t first_length = static_cast<uint32_t>(block_bytes_ - from);
  MappedRange m = Within(RegionOf(uint64_t{file} << 32 | block, file, block), from, first_length);
  if (m.map == nullptr) return {};
  const MappedRange rest = Within(RegionOf(uint64_t{file} << 32 | last, file, last), 0, length - first_length);
  if (rest.map == nullptr) return {};
  m.next = rest.map;
  m.next_offset = rest.offset;
  m.first_length = first_length;
  return m;
}

bool MappedRange::Copy(size_t head_n, uint8_t* head, size_t tail_n, uint8_t* tail, uint32_t* tail_crc,
                       CopyStores tail_stores) const {
  if (next == nullptr) return map->Copy(offset, head_n, head, tail_n, tail, tail_crc, tail_stores);  // one guarded
  return CopyPart(0, head_n, head, nullptr, CopyStores::kCached) &&
         CopyPart(head_n, tail_n, tail, tail_crc, tail_stores);
}

bool MappedRange::CopyPart(uint64_t from, size_t n, uint8_t* out, uint32_t* crc, CopyStores stores) const {
  const size_t in_first = from < first_length ? std::min<size_t>(n, first_length - from) : 0;
  uint32_t part_crc = crc != nullptr ? *crc : 0;  // *crc changes only once both parts are copied
  uint32_t* c = crc != nullptr ? &part_crc : nullptr;
  if (in_first > 0 && !map->Copy(offset + from, 0, nullptr, in_first, out, c, stores)) return false;
  const uint64_t in_next = next_offset + (from + in_first - first_length);
  if (in_first < n && !next->Copy(in_next, 0, nullptr, n - in_first, out + in_first, c, stores)) return false;
  if (crc != nullptr) *crc = part_crc;
  return true;
}

}  // namespace stoke
