#include "loader/mapped_reads.h"

#include <algorithm>
#include <utility>

#include "core/clock.h"

namespace stoke {
namespace {

constexpr int64_t kMinRefreshNs = 100'000'000;  // 100 ms
constexpr int64_t kRefreshCostFactor = 50;      // the interval is at least 50 times a lookup's cost
constexpr int64_t kLookupShare = 50;            // lookups take at most 1/50 (2 %) of the time
constexpr uint64_t kPage = 4096;

}  // namespace

MappedReads::MappedReads(std::shared_ptr<const std::vector<std::string>> paths)
    : paths_(std::move(paths)), start_ns_(NowNanos()), now_ns_(start_ns_) {}

void MappedReads::BeginBatch() { now_ns_ = NowNanos(); }

MappedReads::File& MappedReads::FileOf(uint32_t file) {
  if (file == last_file_) return *last_;
  auto [it, added] = files_.try_emplace(file);
  last_file_ = file;
  last_ = &it->second;
  if (!added || mapped_ >= kMaxMappedFiles) return it->second;
  Result<MappedFile> map = MappedFile::Open(path(file));
  if (map.ok() && map->residency_known() && map->size() > 0) {
    it->second.map = std::make_unique<MappedFile>(std::move(*map));
    ++mapped_;
  }
  return it->second;
}

void MappedReads::Refresh(File& f) {
  const bool never = f.looked_ns == 0;
  const int64_t interval = std::max(kMinRefreshNs, kRefreshCostFactor * f.lookup_cost_ns);
  if (!never && now_ns_ - f.looked_ns < interval) return;
  if (!never && lookups_ns_ * kLookupShare > now_ns_ - start_ns_) return;
  const int64_t began = NowNanos();
  if (!f.map->Resident(&f.resident)) f.resident.clear();  // the kernel refused: nothing is resident
  const int64_t ended = NowNanos();
  f.looked_ns = ended;
  f.lookup_cost_ns = ended - began;
  lookups_ns_ += f.lookup_cost_ns;
}

const MappedFile* MappedReads::Find(uint32_t file, uint64_t offset, uint32_t length) {
  File& f = FileOf(file);
  if (f.map == nullptr || f.map->shrunk() || length == 0) return nullptr;
  if (offset > f.map->size() || length > f.map->size() - offset) return nullptr;
  Refresh(f);
  const uint64_t last = (offset + length - 1) / kPage;
  if (last / 64 >= f.resident.size()) return nullptr;
  for (uint64_t p = offset / kPage; p <= last; ++p) {
    if ((f.resident[p / 64] >> (p % 64) & 1) == 0) return nullptr;
  }
  return f.map.get();
}

}  // namespace stoke
