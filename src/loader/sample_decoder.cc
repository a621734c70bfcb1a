#include "loader/sample_decoder.h"

#include <fmt/format.h>

#include <cstring>

#include "core/clock.h"
#include "core/log.h"
#include "format/npy.h"
#include "loader/batch_queue.h"
#include "loader/out_of_memory.h"
#include "loader/page_decoder.h"

namespace stoke {

namespace {
thread_local AlignedBuffer t_page_scratch;   // decompressed pages
thread_local AlignedBuffer t_sample_scratch; // a sample before its transforms
thread_local TransformScratch t_transform_scratch;
thread_local ImageScratch t_image_scratch;
}  // namespace

Status SampleDecoder::WriteSampleInto(Slot* s, uint32_t sample, uint32_t column, ByteView sample_bytes) {
  const TensorColumn& t = tensors_[column];
  uint8_t* dest = s->tensors[column].data() + static_cast<size_t>(sample) * t.out_bytes;
  if (t.encoded_image || t.use_image) {
    ImagePipeline::Timing timing;
    const int64_t t0 = NowNanos();
    Status st = t.image.Apply(sample_bytes, MutableByteView(dest, t.out_bytes), o_.seed, s->epoch, s->rows[sample],
                              column, &t_image_scratch, &timing);
    // The image's decode counts as decode, the rest as transform.
    telemetry_->Trace(TraceStage::kDecode, t0, t0 + timing.decode_ns, s->index, static_cast<int64_t>(sample_bytes.size()));
    telemetry_->Trace(TraceStage::kTransform, t0 + timing.decode_ns, NowNanos(), s->index, static_cast<int64_t>(t.out_bytes));
    if (t.encoded_image) telemetry_->sample_bytes += static_cast<int64_t>(sample_bytes.size());
    return st;
  }
  const int64_t t0 = NowNanos();
  Status st = t.transforms.Apply(sample_bytes, MutableByteView(dest, t.out_bytes), o_.seed, s->epoch, s->rows[sample],
                                 column, &t_transform_scratch);
  telemetry_->Trace(TraceStage::kTransform, t0, NowNanos(), s->index, static_cast<int64_t>(t.out_bytes));
  return st;
}

void SampleDecoder::DecodeRead(Read& r) {
  const int64_t t0 = r.tail != nullptr ? NowNanos() : 0;
  const int64_t bytes = DecodeMembers(r);
  if (r.tail != nullptr) telemetry_->Trace(TraceStage::kDecode, t0, NowNanos(), r.slot->index, bytes);
  telemetry_->sample_bytes += bytes;
  queue_->FinishPending(r.slot, static_cast<int64_t>(r.members.size()));
}

void SampleDecoder::CheckCopies(Slot* s, std::span<const MappedCopy> copies, const CopiedHead* heads) {
  if (copies.empty()) return;
  const int64_t t0 = NowNanos();
  int64_t bytes = 0;
  for (size_t k = 0; k < copies.size(); ++k) bytes += CheckCopy(s, copies[k], heads[k]);
  telemetry_->Trace(TraceStage::kDecode, t0, NowNanos(), s->index, bytes);
  telemetry_->sample_bytes += bytes;
  queue_->FinishPending(s, static_cast<int64_t>(copies.size()));
}

int64_t SampleDecoder::CheckCopy(Slot* s, const MappedCopy& c, const CopiedHead& head) {
  const TensorColumn& t = tensors_[c.column];
  try {
    AllocationFaults::Instance().Check();
    Status st;
    if (!head.copied) {
      st = Status::IOError(fmt::format("page: the file (or its read cache entry) shrank while it was being read: the "
                                       "page's {} bytes are gone", c.length));
    } else {
      st = CheckInRow(ByteView(head.bytes, c.head_length), c.tail, t, head.body_crc);
    }
    if (st.ok()) return static_cast<int64_t>(t.in_bytes);
    FailSample(s, c.sample, st.WithContext(Context(s->rows[c.sample], c.column)));
  } catch (const std::bad_alloc&) {
    FailBatch(s, OutOfMemory([&] {
                return fmt::format("checking table row {} column '{}'", s->rows[c.sample], t.name);
              }));
  }
  return 0;
}

Status SampleDecoder::CheckInRow(ByteView head, const uint8_t* row, const TensorColumn& t,
                                 std::optional<uint32_t> body_crc) const {
  // The decoders name only "page"; the file and row are added when something failed.
  return CheckSplitSample(head, ByteView(row, t.in_bytes), page_options_, "page", body_crc);
}

int64_t SampleDecoder::DecodeMembers(Read& r) {
  Slot* s = r.slot;
  int64_t bytes = 0;
  for (const ReadMember& m : r.members) {
    try {
      const int64_t row = s->rows[m.sample];
      if (!r.status.ok()) {
        Status st = r.status.WithContext(Context(row, m.column));
        if (r.out_of_memory) {
          FailBatch(s, std::move(st));
        } else {
          FailSample(s, m.sample, st);
        }
        continue;
      }
      AllocationFaults::Instance().Check();
      // The decoders name only "page"; the file and row are added when something failed.
      if (Status st = DecodeMember(s, r, m); !st.ok()) {
        FailSample(s, m.sample, st.WithContext(Context(row, m.column)));
        continue;
      }
      bytes += static_cast<int64_t>(tensors_[m.column].in_bytes);
    } catch (const std::bad_alloc&) {
      FailBatch(s, OutOfMemory([&] {
                  return fmt::format("decoding table row {} column '{}'", s->rows[m.sample], tensors_[m.column].name);
                }));
    }
  }
  if (r.status.ok() && r.data.capacity() > 0) fetcher_->Release(std::move(r.data));  // reads at once have none
  return bytes;
}

Status SampleDecoder::DecodeMember(Slot* s, const Read& r, const ReadMember& m) {
  const TensorColumn& t = tensors_[m.column];
  // Traced by the caller (one span for a claim of reads, not a clock read per sample of a few
  // hundred bytes).
  if (r.tail != nullptr) return CheckInRow(r.bytes, r.tail, t, r.body_crc);
  const int64_t t0 = NowNanos();
  const ByteView page = r.bytes.subspan(m.offset, m.length);
  if (t.encoded_image) {  // the page's value is the encoded file: decoded and transformed in one go
    Result<ByteView> blob =
        DecodeBlobFromPage(page, m.codec, m.row_in_page, m.rows_in_page, m.definition_levels,
                           static_cast<uint64_t>(o_.max_decoded_bytes), &t_page_scratch, page_options_, "page");
    telemetry_->Trace(TraceStage::kDecode, t0, NowNanos(), s->index, 0);
    if (!blob.ok()) return blob.status();
    return WriteSampleInto(s, m.sample, m.column, *blob);
  }
  const bool direct = t.direct();
  MutableByteView dest;
  if (direct) {
    dest = MutableByteView(s->tensors[m.column].data() + static_cast<size_t>(m.sample) * t.out_bytes, t.in_bytes);
  } else {
    t_sample_scratch.Resize(t.in_bytes);
    dest = t_sample_scratch.mutable_view();
  }
  Status st = DecodeSampleFromPage(page, m.codec, m.row_in_page, m.rows_in_page, m.definition_levels, dest,
                                   &t_page_scratch, page_options_, "page");
  telemetry_->Trace(TraceStage::kDecode, t0, NowNanos(), s->index, static_cast<int64_t>(t.in_bytes));
  if (st.ok() && !direct) st = WriteSampleInto(s, m.sample, m.column, t_sample_scratch.view());
  return st;
}

Status SampleDecoder::ReadBinaryCell(const TensorColumn& t, int64_t row, AlignedBuffer* out) const {
  STOKE_RETURN_IF_ERROR(cells_.binary->ReadCell(t.file_name, row, out));
  if (t.encoded_image) return Status::OK();
  thread_local AlignedBuffer converted;  // a cell in another byte order or Fortran order
  STOKE_ASSIGN_OR_RETURN(ByteView data, NpyCellData(out->view(), t.in.dtype, t.in.shape, &converted));
  // The data follows the header: moved to the front of *out, where the transforms read it.
  std::memmove(out->data(), data.data(), data.size());
  out->Resize(data.size());
  return Status::OK();
}

Status SampleDecoder::DecodeCell(Slot* s, uint32_t sample, uint32_t column) {
  const TensorColumn& t = tensors_[column];
  const int64_t row = s->rows[sample];
  const int64_t t0 = NowNanos();
  if (t.array) {  // straight from the cached page into the batch row
    Result<ArrayCells::Cell> cell = cells_.array->ReadCell(t.file_name, t.in.dtype, t.array_shape, row);
    telemetry_->Trace(TraceStage::kDecode, t0, NowNanos(), s->index, static_cast<int64_t>(t.in_bytes));
    if (!cell.ok()) return cell.status();
    return WriteSampleInto(s, sample, column, cell->values);
  }
  Status st = t.binary_cells ? ReadBinaryCell(t, row, &t_sample_scratch)
                             : cells_.slow->ReadCell(t.name, t.in_bytes, t.encoded_image,
                                                     index_.Find(row, t.index_column), &t_sample_scratch);
  telemetry_->Trace(TraceStage::kDecode, t0, NowNanos(), s->index, static_cast<int64_t>(t.in_bytes));
  if (!st.ok()) return st;
  return WriteSampleInto(s, sample, column, t_sample_scratch.view());
}

int64_t SampleDecoder::DecodeSlowCell(Slot* s, uint32_t sample, uint32_t column) {
  const TensorColumn& t = tensors_[column];
  const int64_t row = s->rows[sample];
  try {
    AllocationFaults::Instance().Check();
    const Status st = DecodeCell(s, sample, column);
    if (st.ok()) return static_cast<int64_t>(t.in_bytes);
    FailSample(s, sample, st.WithContext(Context(row, column)));
  } catch (const std::bad_alloc&) {
    FailBatch(s, OutOfMemory([&] { return fmt::format("decoding table row {} column '{}'", row, t.name); }));
  }
  return 0;
}

void SampleDecoder::DecodeSlow(const SlowRun& run) {
  Slot* s = run.slot;
  int64_t bytes = 0;
  for (uint32_t i = run.begin; i < run.end; ++i) {
    const SlowCell& c = s->slow_cells[i];
    bytes += DecodeSlowCell(s, c.sample, c.column);
  }
  telemetry_->sample_bytes += bytes;
  queue_->FinishPending(s, run.end - run.begin);  // last: the batch may be delivered and its slot reused
}

void SampleDecoder::FailSample(Slot* s, uint32_t sample, const Status& status) {
  MutexLock l(&s->mu);
  if (o_.on_error == LoaderOptions::OnError::kSkip) {
    if (!s->skipped[sample]) {
      s->skipped[sample] = 1;
      ++s->skipped_count;
      STOKE_LOG(kWarn, "loader.sample_skipped", "error=\"{}\"", status.ToString());
    }
  } else if (s->error.ok()) {
    s->error = status;
  }
}

void SampleDecoder::FailBatch(Slot* s, Status status) {
  MutexLock l(&s->mu);
  if (s->error.ok()) s->error = std::move(status);  // a move: allocates nothing
}

void SampleDecoder::DecodeChain(Read* first) {
  for (Read* r = first; r != nullptr;) {
    // Read the link first: once its samples are done the batch may be delivered and its slot reused.
    Read* next = r->next_in_task;
    DecodeRead(*r);
    r = next;
  }
}

Status SampleDecoder::SubmitReads(Read* first) {
  CountTask();
  try {
    AllocationFaults::Instance().Check();
    // Two words of captures: std::function keeps them inline, so queueing reads allocates nothing.
    workers_.Submit([this, first] {
      DecodeChain(first);
      TaskDone();
    });
  } catch (const std::bad_alloc&) {
    TaskDone();
    return OutOfMemory([] { return std::string("queueing reads for the decode workers"); });
  }
  return Status::OK();
}

Status SampleDecoder::SubmitSlow(const SlowRun* run) {
  CountTask();
  try {
    AllocationFaults::Instance().Check();
    workers_.Submit([this, run] {
      DecodeSlow(*run);
      TaskDone();
    });
  } catch (const std::bad_alloc&) {
    TaskDone();
    return OutOfMemory([] { return std::string("queueing samples for the decode workers"); });
  }
  return Status::OK();
}

void SampleDecoder::CountTask() {
  MutexLock l(&tasks_mu_);
  ++tasks_;
}

void SampleDecoder::TaskDone() {
  MutexLock l(&tasks_mu_);
  if (--tasks_ == 0) tasks_cv_.SignalAll();
}

void SampleDecoder::WaitIdle() {
  MutexLock l(&tasks_mu_);
  while (tasks_ != 0) tasks_cv_.Wait(&tasks_mu_);
}

}  // namespace stoke
