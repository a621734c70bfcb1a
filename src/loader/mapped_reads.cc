#include "loader/mapped_reads.h"

#include <algorithm>
#include <utility>

#include "core/clock.h"

namespace stoke {
namespace {

constexpr int64_t kMinRefreshNs = 100'000'000;  // 100 ms
constexpr int64_t kRefreshCostFactor = 50;      // the interval is at least 50 times a lookup's cost
constexpr int64_t kLookupShare = 50;            // lookups take at most 1/50 (2 %) of the time
// The lookups' debt (their cost beyond the 2 % of the time so far) is forgiven beyond this: the first
// lookups of many large files cannot hold every refresh back for long (at most 50 x 100 ms = 5 s).
constexpr int64_t kMaxLookupDebtNs = 100'000'000;

}  // namespace

MappedReads::MappedReads(std::shared_ptr<const std::vector<std::string>> paths)
    : paths_(std::move(paths)), start_ns_(NowNanos()), now_ns_(start_ns_) {}

void MappedReads::BeginBatch() { now_ns_ = NowNanos(); }

MappedReads::File& MappedReads::FileOf(uint32_t file) {
  if (file == last_file_) return *last_;
  auto it = files_.find(file);
  if (it == files_.end()) {
    // Past the most files mapped, a file is not even remembered: a table of 650,000 files would
    // otherwise keep an entry for each.
    if (mapped_ >= kMaxMappedFiles) return unmapped_;
    it = files_.try_emplace(file).first;
    Map(file, it->second);
  }
  last_file_ = file;
  last_ = &it->second;
  return it->second;
}

void MappedReads::Map(uint32_t file, File& f) {
  Result<MappedFile> map = MappedFile::Open(path(file));
  if (map.ok() && map->residency_known() && map->size() > 0) {
    f.map = std::make_unique<MappedFile>(std::move(*map));
    ++mapped_;
  }
}

void MappedReads::Refresh(File& f) {
  const bool never = f.looked_ns == 0;
  const int64_t interval = std::max(kMinRefreshNs, kRefreshCostFactor * f.lookup_cost_ns);
  if (!never && now_ns_ - f.looked_ns < interval) return;
  const int64_t allowed = (now_ns_ - start_ns_) / kLookupShare;
  if (!never && lookups_ns_ > allowed) return;
  const int64_t began = NowNanos();
  if (!f.map->Resident(&f.resident)) f.resident.clear();  // the kernel refused: nothing is resident
  const int64_t ended = NowNanos();
  f.looked_ns = ended;
  f.lookup_cost_ns = ended - began;
  lookups_ns_ = std::min(lookups_ns_ + f.lookup_cost_ns, allowed + kMaxLookupDebtNs);
}

const MappedFile* MappedReads::Find(uint32_t file, uint64_t offset, uint32_t length) {
  File& f = FileOf(file);
  if (f.map == nullptr || f.map->shrunk() || length == 0) return nullptr;
  if (offset > f.map->size() || length > f.map->size() - offset) return nullptr;
  Refresh(f);
  const uint64_t last = (offset + length - 1) / page_;
  if (last / 64 >= f.resident.size()) return nullptr;
  for (uint64_t p = offset / page_; p <= last; ++p) {
    if ((f.resident[p / 64] >> (p % 64) & 1) == 0) return nullptr;
  }
  return f.map.get();
}

}  // namespace stoke
