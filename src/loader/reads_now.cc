#include "loader/reads_now.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "core/clock.h"
#include "io/crc32_copy.h"
#include "loader/out_of_memory.h"
#include "loader/page_decoder.h"

namespace stoke {

bool ReadsNow::TrySystemCalls() {
  if (missed_.exchange(false, std::memory_order_relaxed)) {
    backoff_ = std::min<int64_t>(std::max<int64_t>(1, backoff_ * 2), 64);
    skip_ = backoff_;
  } else if (tried_) {
    backoff_ = 0;
  }
  tried_ = false;
  if (skip_ == 0) return true;
  --skip_;
  return false;
}

void ReadsNow::Plan(Slot* s) {
  s->now_reads.clear();
  s->now_files.clear();
  s->now_next.store(0, std::memory_order_relaxed);
  s->mapped_next.store(0, std::memory_order_relaxed);
  s->now_left.store(0, std::memory_order_relaxed);
  s->mapped_claim = ClaimSize(*s);
  s->mapped_stores = StoresFor(*s);
  if (fetcher_ == nullptr || !fetcher_->read_now() || !TrySystemCalls()) return;
  // Room for every read first: a push below never throws with files pinned.
  s->now_reads.reserve(s->num_reads);
  s->now_files.reserve(s->num_reads);
  const int64_t now = NowNanos();
  uint32_t file = std::numeric_limits<uint32_t>::max();  // no file index is this large
  int fd = -1;
  for (size_t g = 0; g < s->num_reads; ++g) {
    Read& r = s->reads[g];
    if (r.tail == nullptr || r.head_length > kMaxReadNowHead || r.length >= kReadNowBytes) continue;
    // Reads are in file order: one pin (or one attempt) per file of the batch.
    if (r.file != file) {
      file = r.file;
      Result<int> pinned = fetcher_->PinForReadNow(file);  // -1: no descriptor free now
      fd = pinned.ok() ? *pinned : -1;  // an error comes again from Submit, naming the read
      if (fd >= 0) s->now_files.push_back(file);
    }
    if (fd < 0) continue;
    r.now = true;
    r.now_fd = fd;
    r.submit_ns = now;
    s->now_reads.push_back(static_cast<uint32_t>(g));
  }
  tried_ = !s->now_reads.empty();
  s->now_left.store(static_cast<uint32_t>(s->now_reads.size()), std::memory_order_relaxed);
}

uint32_t ReadsNow::ClaimSize(const Slot& s) {
  if (s.mapped_copies.empty()) return 1;
  uint64_t bytes = 0;
  for (const MappedCopy& c : s.mapped_copies) bytes += c.length;
  const uint64_t mean = std::max<uint64_t>(1, bytes / s.mapped_copies.size());
  return static_cast<uint32_t>(std::clamp<uint64_t>(kMappedClaimBytes / mean, 1, kMappedClaim));
}

CopyStores ReadsNow::StoresFor(const Slot& s) {
  uint64_t bytes = 0;
  for (const HostBuffer& t : s.tensors) bytes += t.size();
  return bytes >= kStreamBatchBytes ? CopyStores::kAroundCaches : CopyStores::kCached;
}

void ReadsNow::Unplan(Slot* s) {
  for (uint32_t f : s->now_files) fetcher_->UnpinForReadNow(f);
  s->now_files.clear();
}

void ReadsNow::Finish(Slot* s, uint32_t n) {
  if (s->now_left.fetch_sub(n, std::memory_order_acq_rel) != n) return;
  for (uint32_t f : s->now_files) fetcher_->UnpinForReadNow(f);
}

bool ReadsNow::ReadOne(Read& r, const FetchRequest& q, uint8_t* head, bool wait, Status* error) {
  // Its error message is the one allocation here: without memory for it the read fails the batch
  // (out of memory, as elsewhere) instead of an exception leaving the claim unfinished.
  try {
    Result<bool> got = fetcher_->ReadNow(r.now_fd, q, head, wait);
    if (got.ok()) return *got;
    *error = got.status();
  } catch (const std::bad_alloc&) {
    *error = NoMemoryForError(r);
  }
  return true;
}

Status ReadsNow::NoMemoryForError(Read& r) {
  r.out_of_memory = true;
  return OutOfMemory([&] { return fmt::format("the error of a {}-byte read", r.length); });
}

void ReadsNow::Prefetch(const Slot& s, uint32_t k) {
  if (k >= s.mapped_copies.size()) return;
  const MappedCopy& c = s.mapped_copies[k];
  c.from.Prefetch(c.length);
}

void ReadsNow::CopyMapped(Slot* s, uint32_t begin, uint32_t end) {
  CopiedHead heads[kMappedClaim];
  const int64_t start = NowNanos();
  const bool verify = decoder_->verify_crc();
  int64_t bytes = 0;
  for (uint32_t k = begin; k < end; ++k) {
    Prefetch(*s, k + kPrefetchReads);
    const MappedCopy& c = s->mapped_copies[k];
    CopiedHead& head = heads[k - begin];
    const uint32_t tail_bytes = c.length - c.head_length;
    // With CRCs checked, a long value's CRC is taken while it is copied: a second pass over it went
    // back to memory. A short one's is cheaper over its row, still in the core's cache, after the copy
    // (CheckSplitSample): 512-byte samples ran 0.89x as fast with the CRC folded into their copy.
    const bool crc_in_copy = verify && tail_bytes >= kCrc32CopyFoldBytes;
    uint32_t crc = crc_in_copy ? SplitPrefixCrc(tail_bytes) : 0;
    head.copied = c.from.Copy(c.head_length, head.bytes, tail_bytes, c.tail, crc_in_copy ? &crc : nullptr,
                              s->mapped_stores);
    head.body_crc.reset();
    if (head.copied && crc_in_copy) head.body_crc = crc;
    if (head.copied) bytes += c.length;
  }
  telemetry_->Trace(TraceStage::kFetch, start, NowNanos(), s->index, bytes);
  telemetry_->bytes_read += bytes;
  telemetry_->reads_at_once += end - begin;
  telemetry_->reads_mapped += end - begin;
  decoder_->CheckCopies(s, std::span<const MappedCopy>(s->mapped_copies).subspan(begin, end - begin), heads);
}

bool ReadsNow::CopyMappedOnce(Slot* s) {
  const uint32_t n = static_cast<uint32_t>(s->mapped_copies.size());
  const uint32_t claim = s->mapped_claim;
  const uint32_t begin = s->mapped_next.fetch_add(claim, std::memory_order_relaxed);
  if (begin >= n) return false;
  for (uint32_t k = begin; k < begin + kPrefetchReads; ++k) Prefetch(*s, k);
  CopyMapped(s, begin, std::min(begin + claim, n));
  return true;
}

bool ReadsNow::ReadClaimed(Slot* s, std::vector<FetchRequest>* missed) {
  const uint32_t n = static_cast<uint32_t>(s->now_reads.size());
  auto request = [s](uint32_t k) { return RequestOf(*s, s->now_reads[k]); };
  for (;;) {
    const uint32_t k = s->now_next.fetch_add(1, std::memory_order_relaxed);
    if (k >= n) return false;
    Read& r = s->reads[s->now_reads[k]];
    const FetchRequest q = request(k);
    uint8_t head[kMaxReadNowHead];
    Status error;
    const bool miss = !ReadOne(r, q, head, /*wait=*/false, &error);
    if (miss) {  // not all in the page cache
      missed_.store(true, std::memory_order_relaxed);
      if (missed != nullptr) {
        // The producer: this read and those nobody claimed yet go to the fetcher, which keeps the
        // queue depth at the disk.
        const uint32_t rest = std::min(s->now_next.exchange(n, std::memory_order_relaxed), n);
        missed->push_back(q);
        for (uint32_t j = rest; j < n; ++j) missed->push_back(request(j));
        Finish(s, 1 + (n - rest));
        return true;
      }
      ReadOne(r, q, head, /*wait=*/true, &error);  // a consumer: this batch is what it waits for
    }
    Finish(s, 1);  // before the decode counts the samples done: the slot is not handed over yet
    if (error.ok()) {
      telemetry_->Trace(TraceStage::kFetch, r.submit_ns, NowNanos(), s->index, r.length);
      telemetry_->bytes_read += r.length;
      telemetry_->reads_at_once += 1;
      r.bytes = ByteView(head, r.head_length);
    } else {
      r.status = std::move(error);
    }
    decoder_->DecodeRead(r);  // counts the read's samples done: the batch may be handed over after it
    if (miss) return true;  // a consumer: one wait for the disk per batch, the producer does the rest
  }
}

}  // namespace stoke
