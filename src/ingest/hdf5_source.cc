// See hdf5_source.h. A row group's items are read file run by file run: each run (consecutive
// samples of one file) reads every dataset's rows as hyperslabs of at most kBlockBytes (chunk-aligned
// for chunked datasets), so memory stays bounded by the row group being encoded whatever the
// datasets' sizes. Row groups are read by the encoding threads in parallel, each with its own open
// file; libhdf5 serialises its own calls (one global lock), and gzip/shuffle chunks are decompressed
// outside it (Hdf5ReadOptions::decompress_outside_library).
#include "ingest/hdf5_source.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "core/log.h"
#include "core/text.h"
#include "core/thread_pool.h"
#include "format/hdf5.h"
#include "io/storage.h"

namespace stoke {
namespace {

// Tensor rows are read in blocks of about this many bytes (at least one row; extended to the next
// chunk boundary of a chunked dataset, so that no chunk is decompressed twice within a run).
constexpr int64_t kBlockBytes = int64_t{16} << 20;

enum class Samples { kAxis0, kFile };

// What one file holds of the selected datasets and its root attributes.
struct FileLayout {
  std::vector<Hdf5Dataset> datasets;  // selected, sorted by name
  std::vector<Hdf5Attribute> attributes;
};

// One column the source fills.
struct Hdf5Column {
  bool from_attribute = false;
  std::string source;                 // the attribute's or dataset's name
  ColumnSpec spec;
  DType stored = DType::kFloat32;     // datasets and numeric attributes: the element type as stored
  DType read_as = DType::kFloat32;    // datasets: what ReadRows delivers
  size_t rank = 0;                    // datasets: the rank in every file
  std::vector<int64_t> sample_shape;  // datasets: dims[1:] (axis0) or dims (file); a tensor's shape
  bool per_sample = false;            // datasets: one value or tensor per sample (else one per file)
};

std::string ShapeText(const std::vector<int64_t>& shape) { return fmt::format("({})", fmt::join(shape, ", ")); }

// The Parquet type of a scalar column for elements of `d`, and what to read them as.
parquet::Type ScalarType(DType d, DType* read_as) {
  switch (d) {
    case DType::kBool: *read_as = DType::kBool; return parquet::Type::kBoolean;
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kUInt8:
    case DType::kUInt16: *read_as = DType::kInt32; return parquet::Type::kInt32;
    case DType::kInt64:
    case DType::kUInt32: *read_as = DType::kInt64; return parquet::Type::kInt64;
    case DType::kUInt64: *read_as = DType::kUInt64; return parquet::Type::kInt64;  // checked against 2^63-1
    case DType::kFloat16:
    case DType::kFloat32: *read_as = DType::kFloat32; return parquet::Type::kFloat;
    default: *read_as = DType::kFloat64; return parquet::Type::kDouble;
  }
}

ColumnSpec AttributeSpec(const Hdf5Attribute& a) {
  ColumnSpec spec{.name = a.name};
  if (a.is_string) {
    spec.type = parquet::Type::kByteArray;
    spec.is_string = true;
  } else {
    DType unused;
    spec.type = ScalarType(a.dtype, &unused);
  }
  return spec;
}

// The selected datasets and the root attributes of one file.
Result<FileLayout> ReadLayout(const std::string& path, const std::vector<std::string>& selected) {
  STOKE_ASSIGN_OR_RETURN(auto file, Hdf5File::Open(path));
  FileLayout layout;
  if (selected.empty()) {
    STOKE_ASSIGN_OR_RETURN(layout.datasets, file->ListDatasets());
    if (layout.datasets.empty()) return Status::InvalidArgument(fmt::format("{}: holds no datasets", path));
  } else {
    for (const std::string& name : selected) {
      STOKE_ASSIGN_OR_RETURN(Hdf5Dataset d, file->Describe(name));
      layout.datasets.push_back(std::move(d));
    }
    std::sort(layout.datasets.begin(), layout.datasets.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  }
  for (const Hdf5Dataset& d : layout.datasets) {
    if (!d.dtype) {
      return Status::Unsupported(fmt::format("{}: dataset '{}' holds {}, which stoke does not read{}", path, d.name,
                                             d.unsupported, selected.empty() ? " (select others with `datasets`)" : ""));
    }
  }
  STOKE_ASSIGN_OR_RETURN(layout.attributes, file->RootAttributes());
  for (const Hdf5Attribute& a : layout.attributes) {
    if (a.is_string && !IsValidUtf8(a.string_value)) {
      return Status::InvalidArgument(fmt::format("{}: attribute '{}' is not valid UTF-8 text", path, a.name));
    }
  }
  return layout;
}

// The first extent shared by the rank >= 1 datasets, or nullopt when they differ (or there are none).
std::optional<int64_t> SharedFirstExtent(const FileLayout& l) {
  std::optional<int64_t> n;
  for (const Hdf5Dataset& d : l.datasets) {
    if (d.shape.empty()) continue;
    if (n && *n != d.shape[0]) return std::nullopt;
    n = d.shape[0];
  }
  return n;
}

std::string FirstExtents(const FileLayout& l) {
  std::vector<std::string> parts;
  for (const Hdf5Dataset& d : l.datasets) {
    if (!d.shape.empty()) parts.push_back(fmt::format("'{}' {}", d.name, d.shape[0]));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

// The columns the first file sets.
std::vector<Hdf5Column> ColumnsOf(const FileLayout& first, Samples samples) {
  std::vector<Hdf5Column> scalars, tensors;
  for (const Hdf5Attribute& a : first.attributes) {
    Hdf5Column c;
    c.from_attribute = true;
    c.source = a.name;
    c.spec = AttributeSpec(a);
    c.stored = a.dtype;
    scalars.push_back(std::move(c));
  }
  for (const Hdf5Dataset& d : first.datasets) {
    Hdf5Column c;
    c.source = d.name;
    c.stored = *d.dtype;
    c.rank = d.shape.size();
    c.spec.name = d.name;
    const bool axis0 = samples == Samples::kAxis0;
    c.per_sample = !d.shape.empty();
    c.sample_shape = axis0 && !d.shape.empty() ? std::vector<int64_t>(d.shape.begin() + 1, d.shape.end()) : d.shape;
    const bool scalar = axis0 ? d.shape.size() <= 1 : d.shape.empty();
    if (scalar) {
      c.spec.type = ScalarType(c.stored, &c.read_as);
      scalars.push_back(std::move(c));
    } else {
      c.read_as = c.stored;
      c.spec.type = parquet::Type::kByteArray;
      c.spec.tensor = TensorSpec{c.stored, c.sample_shape};
      tensors.push_back(std::move(c));
    }
  }
  for (auto& t : tensors) scalars.push_back(std::move(t));
  return scalars;
}

// Checks `l` (of file `path`) against the columns the first file set; returns its sample count.
Result<int64_t> CheckFile(const FileLayout& l, const std::vector<Hdf5Column>& columns, Samples samples,
                          const std::string& path, const std::string& first) {
  auto mismatch = [&](std::string_view what) {
    return Status::InvalidArgument(fmt::format("{}: {}, unlike '{}'", path, what, first));
  };
  std::vector<const Hdf5Column*> datasets, attributes;
  for (const auto& c : columns) (c.from_attribute ? attributes : datasets).push_back(&c);
  // Both lists are sorted by name (ReadLayout, RootAttributes; the columns keep that order).
  std::sort(datasets.begin(), datasets.end(), [](auto* a, auto* b) { return a->source < b->source; });
  std::sort(attributes.begin(), attributes.end(), [](auto* a, auto* b) { return a->source < b->source; });
  for (size_t i = 0; i < std::max(l.datasets.size(), datasets.size()); ++i) {
    if (i >= l.datasets.size()) return mismatch(fmt::format("it has no dataset '{}'", datasets[i]->source));
    if (i >= datasets.size() || l.datasets[i].name != datasets[i]->source) {
      const bool missing = i < datasets.size() && l.datasets[i].name > datasets[i]->source;
      return missing ? mismatch(fmt::format("it has no dataset '{}'", datasets[i]->source))
                     : mismatch(fmt::format("it has a dataset '{}'", l.datasets[i].name));
    }
    const Hdf5Dataset& d = l.datasets[i];
    const Hdf5Column& c = *datasets[i];
    if (*d.dtype != c.stored) {
      return mismatch(fmt::format("dataset '{}' holds {}, not {}", d.name, DTypeName(*d.dtype), DTypeName(c.stored)));
    }
    const std::vector<int64_t> shape =
        samples == Samples::kAxis0 && !d.shape.empty() ? std::vector<int64_t>(d.shape.begin() + 1, d.shape.end()) : d.shape;
    if (d.shape.size() != c.rank || shape != c.sample_shape) {
      return mismatch(fmt::format("dataset '{}' has shape {}, so samples of shape {}, not {}", d.name, ShapeText(d.shape),
                                  ShapeText(shape), ShapeText(c.sample_shape)));
    }
  }
  for (size_t i = 0; i < std::max(l.attributes.size(), attributes.size()); ++i) {
    if (i >= l.attributes.size()) return mismatch(fmt::format("it has no attribute '{}'", attributes[i]->source));
    if (i >= attributes.size() || l.attributes[i].name != attributes[i]->source) {
      const bool missing = i < attributes.size() && l.attributes[i].name > attributes[i]->source;
      return missing ? mismatch(fmt::format("it has no attribute '{}'", attributes[i]->source))
                     : mismatch(fmt::format("it has an attribute '{}'", l.attributes[i].name));
    }
    const ColumnSpec spec = AttributeSpec(l.attributes[i]);
    if (spec.type != attributes[i]->spec.type || spec.is_string != attributes[i]->spec.is_string) {
      return mismatch(fmt::format("attribute '{}' is a {}, not a {}", spec.name,
                                  spec.is_string ? "string" : parquet::TypeName(spec.type),
                                  attributes[i]->spec.is_string ? "string" : parquet::TypeName(attributes[i]->spec.type)));
    }
  }
  if (samples == Samples::kFile) return 1;
  auto n = SharedFirstExtent(l);
  if (!n) {
    return Status::InvalidArgument(fmt::format("{}: the datasets' first extents differ ({}); with samples along axis 0 they "
                                               "must agree (or use `hdf5_samples` file)", path, FirstExtents(l)));
  }
  return *n;
}

// Appends `n` values of type `as` from `bytes`, each `repeat` times, to a scalar column's values.
Status AppendScalars(ByteView bytes, DType as, size_t n, size_t repeat, const std::string& where, ValueVector* out) {
  auto put = [&](auto value) {
    std::visit(
        [&](auto& v) {
          using T = typename std::decay_t<decltype(v)>::value_type;
          if constexpr (!std::is_same_v<T, std::string>) v.insert(v.end(), repeat, static_cast<T>(value));
        },
        *out);
  };
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* p = bytes.data() + i * DTypeSize(as);
    switch (as) {
      case DType::kBool: put(uint8_t{*p != 0}); break;
      case DType::kInt32: put(LoadLE<int32_t>(p)); break;
      case DType::kInt64: put(LoadLE<int64_t>(p)); break;
      case DType::kUInt64: {
        const uint64_t v = LoadLE<uint64_t>(p);
        if (v > static_cast<uint64_t>(INT64_MAX)) {
          return Status::InvalidArgument(fmt::format("{}: value {} at row {} is above 2^63-1 (the column is INT64)", where, v, i));
        }
        put(static_cast<int64_t>(v));
        break;
      }
      case DType::kFloat32: put(LoadLE<float>(p)); break;
      case DType::kFloat64: put(LoadLE<double>(p)); break;
      default: return Status::Internal(fmt::format("{}: scalar read as {}", where, DTypeName(as)));
    }
  }
  return Status::OK();
}

// Appends `n` copies of a file's attribute value to a scalar column's values.
void RepeatAttribute(const Hdf5Attribute& a, size_t n, ValueVector* values) {
  std::visit(
      [&](auto& v) {
        using T = typename std::decay_t<decltype(v)>::value_type;
        if constexpr (std::is_same_v<T, std::string>) {
          v.insert(v.end(), n, a.string_value);
        } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
          v.insert(v.end(), n, static_cast<T>(a.float_value));
        } else {
          v.insert(v.end(), n, static_cast<T>(a.int_value));
        }
      },
      *values);
}

class Hdf5Reader final : public SourceReader {
 public:
  Hdf5Reader(std::vector<Hdf5Column> columns, Samples samples) : columns_(std::move(columns)), samples_(samples) {}

  Result<uint64_t> ReadRows(const SourceSet& set, std::span<const SourceItem> items, RowGroupEncoder& enc) const override {
    std::vector<ColumnValues> scalars(columns_.size());
    for (size_t c = 0; c < columns_.size(); ++c) {
      if (!columns_[c].spec.tensor) scalars[c] = ColumnValues{EmptyValuesFor(columns_[c].spec.type), {}};
    }
    uint64_t bytes = 0;
    AlignedBuffer block;
    for (size_t begin = 0; begin < items.size();) {
      // A run: consecutive samples of one file.
      size_t end = begin + 1;
      while (end < items.size() && items[end].file == items[begin].file && items[end].index == items[end - 1].index + 1) ++end;
      const uint32_t file = items[begin].file;
      const int64_t first = items[begin].index, count = static_cast<int64_t>(end - begin);
      STOKE_RETURN_IF_ERROR(ReadRun(set, file, first, count, enc, &scalars, &block, &bytes));
      begin = end;
    }
    for (size_t c = 0; c < columns_.size(); ++c) {
      if (!columns_[c].spec.tensor) STOKE_RETURN_IF_ERROR(enc.SetScalars(set.first_source_column + c, std::move(scalars[c])));
    }
    return bytes;
  }

 private:
  Status ReadRun(const SourceSet& set, uint32_t file_index, int64_t first, int64_t count, RowGroupEncoder& enc,
                 std::vector<ColumnValues>* scalars, AlignedBuffer* block, uint64_t* bytes) const {
    const std::string path = set.FilePath(file_index);
    STOKE_ASSIGN_OR_RETURN(auto file, Hdf5File::Open(path));
    const int64_t planned = set.item_starts[file_index + 1] - set.item_starts[file_index];
    std::vector<Hdf5Attribute> attributes;
    for (size_t c = 0; c < columns_.size(); ++c) {
      const Hdf5Column& col = columns_[c];
      const std::string where = fmt::format("{}: {} '{}'", path, col.from_attribute ? "attribute" : "dataset", col.source);
      ValueVector* values = col.spec.tensor ? nullptr : &(*scalars)[c].values;
      if (col.from_attribute) {
        if (attributes.empty()) {
          STOKE_ASSIGN_OR_RETURN(attributes, file->RootAttributes());
        }
        auto it = std::find_if(attributes.begin(), attributes.end(), [&](const auto& a) { return a.name == col.source; });
        if (it == attributes.end() || AttributeSpec(*it).type != col.spec.type || it->is_string != col.spec.is_string) {
          return Status::InvalidArgument(fmt::format("{}: changed since the ingest was planned", where));
        }
        RepeatAttribute(*it, static_cast<size_t>(count), values);
        continue;
      }
      // The dataset as planned (the file may have changed since).
      STOKE_ASSIGN_OR_RETURN(Hdf5Dataset d, file->Describe(col.source));
      const int64_t n_file = d.shape.empty() ? 1 : d.shape[0];
      std::vector<int64_t> sample_shape = d.shape;
      if (samples_ == Samples::kAxis0 && !d.shape.empty()) sample_shape.erase(sample_shape.begin());
      if (d.dtype != col.stored || d.shape.size() != col.rank || sample_shape != col.sample_shape ||
          (samples_ == Samples::kAxis0 && col.per_sample && n_file != planned)) {
        return Status::InvalidArgument(fmt::format("{}: changed since the ingest was planned (now {} {})", where,
                                                   d.dtype ? DTypeName(*d.dtype) : "unreadable", ShapeText(d.shape)));
      }
      if (!col.spec.tensor) {
        // A scalar per sample (rank 1 along axis 0), or one per file (rank 0) repeated.
        const bool per_sample = samples_ == Samples::kAxis0 && col.per_sample;
        const int64_t rows = per_sample ? count : 1;
        block->Resize(static_cast<size_t>(rows) * DTypeSize(col.read_as));
        STOKE_RETURN_IF_ERROR(file->ReadRows(col.source, per_sample ? first : 0, rows, col.read_as, block->mutable_view()));
        STOKE_RETURN_IF_ERROR(AppendScalars(block->view(), col.read_as, static_cast<size_t>(rows),
                                            per_sample ? 1 : static_cast<size_t>(count), where, values));
        *bytes += block->size();
        continue;
      }
      const size_t sample_bytes = static_cast<size_t>(col.spec.tensor->num_bytes());
      if (samples_ == Samples::kFile) {
        // The whole dataset is the file's one sample.
        block->Resize(sample_bytes);
        STOKE_RETURN_IF_ERROR(file->ReadRows(col.source, 0, n_file, col.read_as, block->mutable_view()));
        STOKE_RETURN_IF_ERROR(enc.AppendTensor(set.first_source_column + c, block->view()));
        *bytes += sample_bytes;
        continue;
      }
      // Rows [first, first + count) in blocks of about kBlockBytes ending on chunk boundaries.
      const int64_t chunk_rows = d.chunk.empty() ? 1 : d.chunk[0];
      const int64_t block_rows = std::max<int64_t>(1, kBlockBytes / static_cast<int64_t>(std::max<size_t>(sample_bytes, 1)));
      for (int64_t at = first; at < first + count;) {
        int64_t stop = at + block_rows;
        if (chunk_rows > 1) stop = (stop + chunk_rows - 1) / chunk_rows * chunk_rows;
        stop = std::min(stop, first + count);
        block->Resize(static_cast<size_t>(stop - at) * sample_bytes);
        STOKE_RETURN_IF_ERROR(file->ReadRows(col.source, at, stop - at, col.read_as, block->mutable_view()));
        for (int64_t r = 0; r < stop - at; ++r) {
          STOKE_RETURN_IF_ERROR(enc.AppendTensor(set.first_source_column + c,
                                                 ByteView(block->data() + static_cast<size_t>(r) * sample_bytes, sample_bytes)));
        }
        *bytes += block->size();
        at = stop;
      }
    }
    return Status::OK();
  }

  const std::vector<Hdf5Column> columns_;  // the source's own columns, in column order
  const Samples samples_;
};

}  // namespace

Status PlanHdf5(const SourceOptions& o, std::string_view what, SourceSet* set) {
  if (!set->storage->local_files()) {
    return Status::Unsupported(fmt::format("{}: HDF5 sources must be local files ('{}' is not on the local file system): libhdf5 reads "
                                           "through file names with many small reads; copy the files to a local disk first",
                                           what, o.source));
  }
  Samples samples = Samples::kAxis0;
  std::vector<std::string> selected;
  for (std::string name : o.datasets) {
    while (!name.empty() && name[0] == '/') name.erase(0, 1);
    if (name.empty()) return Status::InvalidArgument(fmt::format("{}: `datasets` needs a dataset name", what));
    if (std::find(selected.begin(), selected.end(), name) != selected.end()) {
      return Status::InvalidArgument(fmt::format("{}: `datasets` '{}' is given twice", what, name));
    }
    selected.push_back(std::move(name));
  }
  if (!Hdf5LibraryIsThreadSafe()) STOKE_LOG(kWarn, "ingest.hdf5_not_threadsafe", "libhdf5 is not thread-safe; stoke serialises its calls");

  // Every file's layout, in parallel (an open and a few metadata reads each).
  const size_t n = set->files.size();
  std::vector<FileLayout> layouts(n);
  {
    ThreadPool pool(std::min<size_t>(n, o.threads > 0 ? o.threads : 8));
    STOKE_RETURN_IF_ERROR(ParallelFor(pool, n, [&](size_t i) -> Status {
      STOKE_ASSIGN_OR_RETURN(layouts[i], ReadLayout(set->FilePath(static_cast<uint32_t>(i)), selected));
      return Status::OK();
    }));
  }
  const std::string first_path = set->FilePath(0);
  const std::optional<int64_t> shared = SharedFirstExtent(layouts[0]);
  if (o.hdf5_samples == Hdf5Samples::kFile || (o.hdf5_samples == Hdf5Samples::kAuto && !shared)) samples = Samples::kFile;
  if (samples == Samples::kAxis0 && !shared) {
    return Status::InvalidArgument(fmt::format("{}: with `hdf5_samples` axis0 the datasets' first extents must agree, but they "
                                               "are {}", first_path, FirstExtents(layouts[0]).empty() ? "absent (all scalars)"
                                                                                                        : FirstExtents(layouts[0])));
  }
  std::vector<Hdf5Column> columns = ColumnsOf(layouts[0], samples);
  set->item_starts.assign(1, 0);
  for (size_t i = 0; i < n; ++i) {
    STOKE_ASSIGN_OR_RETURN(int64_t count, CheckFile(layouts[i], columns, samples, set->FilePath(static_cast<uint32_t>(i)),
                                                    set->files[0].name));
    set->item_starts.push_back(set->item_starts.back() + count);
  }
  const bool has_index = samples == Samples::kAxis0;
  std::vector<std::string> taken = {"id", "file"};
  if (has_index) taken.push_back("index");
  std::vector<ColumnSpec> own;
  set->sample_bytes = 0;
  for (const Hdf5Column& c : columns) {
    if (std::find(taken.begin(), taken.end(), c.spec.name) != taken.end()) {
      return Status::InvalidArgument(fmt::format("{}: {} '{}' has the name of a column stoke writes ({}); select datasets "
                                                 "with `datasets`", first_path, c.from_attribute ? "attribute" : "dataset",
                                                 c.spec.name, fmt::join(taken, ", ")));
    }
    taken.push_back(c.spec.name);
    own.push_back(c.spec);
    set->sample_bytes += c.spec.tensor ? c.spec.tensor->num_bytes() : 8;
  }
  STOKE_ASSIGN_OR_RETURN(set->labels, JoinLabelsCsv(o.labels_csv, set->files, taken));
  STOKE_RETURN_IF_ERROR(SetColumns(set, has_index, std::move(own)));
  set->reader = std::make_shared<Hdf5Reader>(std::move(columns), samples);
  return Status::OK();
}

}  // namespace stoke
