// The loader's decode stage (loader_impl.h): on the worker pool, each read's pages are checked,
// decompressed and transformed into their rows of a batch slot; failures are recorded per sample or per
// batch; a finished slot is compacted and collated into the consumer's columns.
#include "loader/loader_impl.h"

namespace stoke {

std::string Loader::Impl::Context(int64_t row, uint32_t column) const {
  if (tensors_[column].chunked()) {
    const uint32_t file = index_->FileOfRow(row);
    return fmt::format("{} row {} (table row {}) column '{}'", index_->FilePath(file), row - index_->file_first_row(file),
                       row, tensors_[column].name);
  }
  const SampleIndex::Location loc = index_->Find(row, tensors_[column].index_column);
  return fmt::format("{} row {} (table row {}) column '{}'", index_->FilePath(loc.file), loc.row_in_file, row,
                     tensors_[column].name);
}

namespace {
thread_local AlignedBuffer t_page_scratch;   // decompressed pages
thread_local AlignedBuffer t_sample_scratch; // a sample before its transforms
thread_local TransformScratch t_transform_scratch;
thread_local ImageScratch t_image_scratch;
}  // namespace

Status Loader::Impl::WriteSampleInto(Slot* s, uint32_t sample, uint32_t column, ByteView sample_bytes) {
  const TensorColumn& t = tensors_[column];
  uint8_t* dest = s->tensors[column].data() + static_cast<size_t>(sample) * t.out_bytes;
  if (t.encoded_image || t.use_image) {
    ImagePipeline::Timing timing;
    const int64_t t0 = NowNanos();
    Status st = t.image.Apply(sample_bytes, MutableByteView(dest, t.out_bytes), o_.seed, s->epoch, s->rows[sample],
                              column, &t_image_scratch, &timing);
    // The image's decode counts as decode, the rest as transform.
    Trace(TraceStage::kDecode, t0, t0 + timing.decode_ns, s->index, static_cast<int64_t>(sample_bytes.size()));
    Trace(TraceStage::kTransform, t0 + timing.decode_ns, NowNanos(), s->index, static_cast<int64_t>(t.out_bytes));
    if (t.encoded_image) stat_sample_bytes_ += static_cast<int64_t>(sample_bytes.size());
    return st;
  }
  const int64_t t0 = NowNanos();
  Status st = t.transforms.Apply(sample_bytes, MutableByteView(dest, t.out_bytes), o_.seed, s->epoch, s->rows[sample],
                                 column, &t_transform_scratch);
  Trace(TraceStage::kTransform, t0, NowNanos(), s->index, static_cast<int64_t>(t.out_bytes));
  return st;
}

void Loader::Impl::DecodeRead(Read& r) {
  Slot* s = r.slot;
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
      stat_sample_bytes_ += static_cast<int64_t>(tensors_[m.column].in_bytes);
    } catch (const std::bad_alloc&) {
      FailBatch(s, OutOfMemory([&] {
                  return fmt::format("decoding table row {} column '{}'", s->rows[m.sample], tensors_[m.column].name);
                }));
    }
  }
  if (r.status.ok() && r.data.capacity() > 0) fetcher_->Release(std::move(r.data));  // reads at once have none
  FinishPending(s, static_cast<int64_t>(r.members.size()));
}

Status Loader::Impl::DecodeMember(Slot* s, const Read& r, const ReadMember& m) {
  const TensorColumn& t = tensors_[m.column];
  const int64_t t0 = NowNanos();
  PageDecodeOptions po;
  po.verify_crc = o_.verify_crc;
  if (r.tail != nullptr) {  // the sample is already in its batch row: check the header and the CRC
    Status st = CheckSplitSample(r.bytes, ByteView(r.tail, t.in_bytes), po, "page", r.tail_crc);
    Trace(TraceStage::kDecode, t0, NowNanos(), s->index, static_cast<int64_t>(t.in_bytes));
    return st;
  }
  const ByteView page = r.bytes.subspan(m.offset, m.length);
  if (t.encoded_image) {  // the page's value is the encoded file: decoded and transformed in one go
    Result<ByteView> blob = DecodeBlobFromPage(page, m.codec, m.row_in_page, m.rows_in_page, m.definition_levels,
                                               static_cast<uint64_t>(max_decoded_bytes_), &t_page_scratch, po, "page");
    Trace(TraceStage::kDecode, t0, NowNanos(), s->index, 0);
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
                                   &t_page_scratch, po, "page");
  Trace(TraceStage::kDecode, t0, NowNanos(), s->index, static_cast<int64_t>(t.in_bytes));
  if (st.ok() && !direct) st = WriteSampleInto(s, m.sample, m.column, t_sample_scratch.view());
  return st;
}

Status Loader::Impl::ReadBinaryCell(const TensorColumn& t, int64_t row, AlignedBuffer* out) const {
  STOKE_RETURN_IF_ERROR(binary_cells_->ReadCell(t.file_name, row, out));
  if (t.encoded_image) return Status::OK();
  thread_local AlignedBuffer converted;  // a cell in another byte order or Fortran order
  STOKE_ASSIGN_OR_RETURN(ByteView data, NpyCellData(out->view(), t.in.dtype, t.in.shape, &converted));
  // The data follows the header: moved to the front of *out, where the transforms read it.
  std::memmove(out->data(), data.data(), data.size());
  out->Resize(data.size());
  return Status::OK();
}

void Loader::Impl::DecodeSlow(Slot* s, uint32_t sample, uint32_t column) {
  const TensorColumn& t = tensors_[column];
  const int64_t row = s->rows[sample];
  try {
    AllocationFaults::Instance().Check();
    const int64_t t0 = NowNanos();
    Status st = t.array          ? array_cells_->ReadCell(t.file_name, t.in.dtype, t.array_shape, row, &t_sample_scratch)
                : t.binary_cells ? ReadBinaryCell(t, row, &t_sample_scratch)
                                 : slow_cells_->ReadCell(t.name, t.in_bytes, t.encoded_image,
                                                         index_->Find(row, t.index_column), &t_sample_scratch);
    Trace(TraceStage::kDecode, t0, NowNanos(), s->index, static_cast<int64_t>(t.in_bytes));
    if (st.ok()) st = WriteSampleInto(s, sample, column, t_sample_scratch.view());
    if (!st.ok()) {
      FailSample(s, sample, st.WithContext(Context(row, column)));
    } else {
      stat_sample_bytes_ += static_cast<int64_t>(t.in_bytes);
    }
  } catch (const std::bad_alloc&) {
    FailBatch(s, OutOfMemory([&] { return fmt::format("decoding table row {} column '{}'", row, t.name); }));
  }
  FinishPending(s, 1);
}

void Loader::Impl::FailSample(Slot* s, uint32_t sample, const Status& status) {
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

void Loader::Impl::FailBatch(Slot* s, Status status) {
  MutexLock l(&s->mu);
  if (s->error.ok()) s->error = std::move(status);  // a move: allocates nothing
}

void Loader::Impl::FinishPending(Slot* s, int64_t n) {
  if (s->pending.fetch_sub(n, std::memory_order_acq_rel) != n) return;
  ready_events_.fetch_add(1, std::memory_order_release);
  // The batch is ready. A consumer that saw it pending holds mu_ until it sleeps on cv_, so taking mu_
  // here orders this signal after that wait (no lost wake-up). Nothing touches `s` from here on: the
  // consumer may already own it.
  { MutexLock l(&mu_); }
  cv_.SignalAll();
}

void Loader::Impl::CompactSkipped(Slot* s) {
  if (s->skipped_count == 0) return;
  const size_t n = static_cast<size_t>(s->size);
  size_t w = 0;
  for (size_t i = 0; i < n; ++i) {
    if (s->skipped[i]) continue;
    if (w != i) {
      for (size_t c = 0; c < tensors_.size(); ++c) {
        const size_t b = tensors_[c].out_bytes;
        std::memmove(s->tensors[c].data() + w * b, s->tensors[c].data() + i * b, b);
      }
      for (size_t k = 0; k < scalars_.size(); ++k) {
        if (scalars_.column(k).is_string) {
          s->strings[k][w] = std::move(s->strings[k][i]);
        } else {
          const size_t es = DTypeSize(scalars_.column(k).dtype);
          std::memmove(s->scalars[k].data() + w * es, s->scalars[k].data() + i * es, es);
        }
        if (!s->scalar_valid[k].empty()) s->scalar_valid[k][w] = s->scalar_valid[k][i];
      }
      s->rows[w] = s->rows[i];
    }
    ++w;
  }
  s->rows.resize(w);
  for (size_t k = 0; k < scalars_.size(); ++k) {
    if (scalars_.column(k).is_string) s->strings[k].resize(w);
    if (!s->scalar_valid[k].empty()) s->scalar_valid[k].resize(w);
  }
  s->size = static_cast<int64_t>(w);
}

Status Loader::Impl::BuildColumns(Slot* s) {
  try {
    AllocationFaults::Instance().Check();
    s->columns.clear();
    size_t ti = 0, si = 0;
    for (const auto& name : column_order_) {
      BatchColumn bc;
      bc.name = name;
      if (ti < tensors_.size() && tensors_[ti].name == name) {
        const TensorColumn& t = tensors_[ti];
        bc.kind = ColumnKind::kTensor;
        bc.dtype = t.out_dtype;
        bc.shape.push_back(s->size);
        for (int64_t d : t.out_shape) bc.shape.push_back(d);
        bc.data_ = s->tensors[ti].data();
        bc.num_bytes = static_cast<size_t>(s->size) * t.out_bytes;
        bc.gpu_images = (t.encoded_image || t.use_image) && o_.transforms_on == LoaderOptions::TransformsOn::kCuda;
        ++ti;
      } else {
        const ScalarColumn& c = scalars_.column(si);
        bc.shape = {s->size};
        bc.dtype = c.dtype;
        bc.kind = c.is_string ? ColumnKind::kString : ColumnKind::kScalar;
        if (c.is_string) {
          bc.strings = s->strings[si];
        } else {
          bc.data_ = s->scalars[si].data();
          bc.num_bytes = static_cast<size_t>(s->size) * DTypeSize(c.dtype);
        }
        bc.valid = s->scalar_valid[si];
        ++si;
      }
      s->columns.push_back(std::move(bc));
    }
  } catch (const std::bad_alloc&) {
    return OutOfMemory([&] { return fmt::format("the consumer's view of batch {}", s->index); });
  }
  return Status::OK();
}

}  // namespace stoke
