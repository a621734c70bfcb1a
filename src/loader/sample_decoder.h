// The loader's decode stage (docs/architecture.md, "The loader"): each read's pages are checked,
// decompressed and transformed into their rows of a batch slot, on the calling thread or on the
// worker pool; failures are recorded per sample or per batch. Private to src/loader.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/mutex.h"
#include "core/thread_pool.h"
#include "loader/array_cells.h"
#include "loader/batch_slots.h"
#include "loader/binary_cells.h"
#include "loader/fetcher.h"
#include "loader/loader_telemetry.h"
#include "loader/page_decoder.h"
#include "loader/slow_cells.h"
#include "loader/tensor_column.h"
#include "stoke/loader.h"
#include "table/sample_index.h"

namespace stoke {

class BatchQueue;

// Decodes a batch's reads and slow-path cells into its slot; each one done counts its samples off
// the slot (BatchQueue::FinishPending).
//
// Thread-safe: any number of threads decode at once (each into rows of its own); the count of
// queued tasks has its own lock.
class SampleDecoder {
 public:
  struct Options {
    bool verify_crc = true;
    LoaderOptions::OnError on_error = LoaderOptions::OnError::kRaise;
    uint64_t seed = 0;
    int64_t max_decoded_bytes = int64_t{64} << 20;  // one decoded image (or a blob page's body)
    size_t threads = 1;                              // the worker pool's
  };
  // The stages where cells that are not a page of their own are read (array and binary may be
  // null when no such column is selected).
  struct Cells {
    SlowCells* slow = nullptr;
    ArrayCells* array = nullptr;
    BinaryCells* binary = nullptr;
  };
  // Every pointer and reference outlives it; `fetcher` is null when no tensor column is selected.
  SampleDecoder(const SampleIndex& index, const std::vector<TensorColumn>& tensors, Cells cells, Fetcher* fetcher,
                BatchQueue* queue, LoaderTelemetry* telemetry, Options o)
      : index_(index), tensors_(tensors), cells_(cells), fetcher_(fetcher), queue_(queue), telemetry_(telemetry),
        o_(o), page_options_{.verify_crc = o.verify_crc}, workers_(o.threads) {}

  // Decodes the read's samples into their rows, gives its buffer back to the fetcher and counts its
  // samples done, on the calling thread.
  void DecodeRead(Read& r);
  // Checks samples copied out of mappings into their batch rows (ReadsNow): copies[k]'s page header
  // and length prefix are in heads[k] (CheckSplitSample), a copy cut short fails its sample; records
  // the failures, then traces one decode span and counts the samples done once for all (those are
  // shared by every thread that copies), on the calling thread.
  void CheckCopies(Slot* s, std::span<const MappedCopy> copies, const CopiedHead* heads);
  // Decodes a run of slow-path cells into their rows, one after another (each cell's decode traced by
  // itself), and counts them done once, on the calling thread.
  void DecodeSlow(const SlowRun& run);
  // Whether page CRCs are checked (LoaderOptions::verify_crc).
  bool verify_crc() const { return o_.verify_crc; }
  // The bytes DecodeRead still has to go through: a split read whose body's CRC the fetcher took, or
  // that is not checked, leaves only its head, a few dozen bytes.
  uint64_t DecodeBytes(const Read& r) const {
    if (r.tail != nullptr && (r.body_crc.has_value() || !o_.verify_crc)) return r.bytes.size();
    return r.length;
  }

  // Queues the decode of a chain of reads (`first`, linked by next_in_task), or of a run of
  // slow-path cells (which stays where it is until its batch is done), on the workers. An
  // out-of-memory error when the task cannot be queued (then it will not run).
  Status SubmitReads(Read* first) EXCLUDES(tasks_mu_);
  Status SubmitSlow(const SlowRun* run) EXCLUDES(tasks_mu_);
  size_t workers() const { return workers_.size(); }
  // Waits until every task queued so far has finished.
  void WaitIdle() EXCLUDES(tasks_mu_);

  // Records the failure of one sample; `status` names the file and row.
  void FailSample(Slot* s, uint32_t sample, const Status& status) EXCLUDES(s->mu);
  // Fails the whole batch, whatever on_error says (out of memory is not the sample's fault).
  // Allocates nothing.
  static void FailBatch(Slot* s, Status status) EXCLUDES(s->mu);

 private:
  // Decodes the read's samples and gives its buffer back; returns the decoded samples' bytes.
  int64_t DecodeMembers(Read& r);
  Status DecodeMember(Slot* s, const Read& r, const ReadMember& m);
  // CheckCopies' work for one copy: its failure recorded. Returns its bytes (0 when it failed).
  int64_t CheckCopy(Slot* s, const MappedCopy& c, const CopiedHead& head);
  // Checks a sample of column `t` split on its way into its batch row `row`: `head` is its page
  // header and length prefix, `body_crc` the CRC of the value when taken while it was copied
  // (CheckSplitSample).
  Status CheckInRow(ByteView head, const uint8_t* row, const TensorColumn& t, std::optional<uint32_t> body_crc) const;
  // DecodeSlow's work for one cell: read and written into its batch row, its failure recorded.
  // Returns its bytes (0 when it failed).
  int64_t DecodeSlowCell(Slot* s, uint32_t sample, uint32_t column);
  Status DecodeCell(Slot* s, uint32_t sample, uint32_t column);
  Status WriteSampleInto(Slot* s, uint32_t sample, uint32_t column, ByteView sample_bytes);
  // A binary-cell column's value of table row `row` as the decode stage sees it: an image's bytes, or a
  // .npy cell's array data (into *out either way).
  Status ReadBinaryCell(const TensorColumn& t, int64_t row, AlignedBuffer* out) const;
  // Decodes a chain of reads (linked by next_in_task).
  void DecodeChain(Read* first);
  // A task queued on the workers is counted until it finishes.
  void CountTask() EXCLUDES(tasks_mu_);
  void TaskDone() EXCLUDES(tasks_mu_);
  std::string Context(int64_t row, uint32_t column) const { return CellContext(index_, tensors_, row, column); }

  const SampleIndex& index_;
  const std::vector<TensorColumn>& tensors_;
  const Cells cells_;
  Fetcher* const fetcher_;
  BatchQueue* const queue_;
  LoaderTelemetry* const telemetry_;
  const Options o_;
  const PageDecodeOptions page_options_;  // o_'s, as the page decoders take them
  ThreadPool workers_;
  Mutex tasks_mu_;
  CondVar tasks_cv_;  // tasks_ reached 0
  int64_t tasks_ GUARDED_BY(tasks_mu_) = 0;  // queued and not finished
};

}  // namespace stoke
