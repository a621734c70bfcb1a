#include "loader/loader_columns.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>

#include "format/image.h"
#include "format/npy.h"
#include "io/storage.h"
#include "loader/page_decoder.h"
#include "table/parquet_dataset.h"

namespace stoke {

namespace {

// The indices in view.columns of the columns `names` asks for, in its order (every column, in table
// order, when it is empty). NotFound for a name the table lacks, InvalidArgument for one listed twice.
Result<std::vector<size_t>> SelectColumns(const TableView& view, const std::vector<std::string>& names) {
  std::vector<size_t> selected;
  if (names.empty()) {
    for (size_t c = 0; c < view.columns.size(); ++c) selected.push_back(c);
    return selected;
  }
  for (const auto& name : names) {
    auto it = std::find_if(view.columns.begin(), view.columns.end(), [&](const ColumnSpec& c) { return c.name == name; });
    if (it == view.columns.end()) {
      std::vector<std::string> all;
      for (const auto& c : view.columns) all.push_back(c.name);
      return Status::NotFound(fmt::format("columns: unknown column '{}' (the table has: {})", name, fmt::join(all, ", ")));
    }
    const size_t c = static_cast<size_t>(it - view.columns.begin());
    if (std::find(selected.begin(), selected.end(), c) != selected.end()) {
      return Status::InvalidArgument(fmt::format("columns: '{}' is listed twice", name));
    }
    selected.push_back(c);
  }
  return selected;
}

// The image columns: blob columns named in the table's stoke.images (docs/format.md). Corruption,
// naming `dir`, when that configuration is not a JSON object.
Result<std::vector<std::string>> ImageColumnNames(const TableView& view, const std::string& dir) {
  std::vector<std::string> image_columns;
  const auto& config = view.snapshot.metadata.configuration;
  auto it = config.find(kImagesMetadataKey);
  if (it == config.end()) return image_columns;
  const auto images = nlohmann::json::parse(it->second, nullptr, /*allow_exceptions=*/false);
  if (!images.is_object()) {
    return Status::Corruption(fmt::format("{}: the table's {} configuration is not a JSON object", dir, kImagesMetadataKey));
  }
  for (auto e = images.begin(); e != images.end(); ++e) image_columns.push_back(e.key());
  return image_columns;
}

// Whether the loader reads `spec` through BinaryCells: a plain binary column (not stoke's tensor or
// blob layout), or a struct with a binary field `bytes` (a Hugging Face Image).
bool HoldsBinaryCells(const ColumnSpec& spec) {
  if (!spec.nested()) return spec.type == parquet::Type::kByteArray && !spec.is_string && !spec.paged();
  const auto type = nlohmann::json::parse(spec.nested_type, nullptr, false);
  if (!type.is_object() || type.value("type", "") != "struct" || !type.contains("fields")) return false;
  for (const auto& f : type["fields"]) {
    if (f.is_object() && f.value("name", "") == "bytes" && f.contains("type") && f["type"] == "binary") return true;
  }
  return false;
}

// The predicate `where` bound to `columns`; nullopt when `where` is empty.
Result<std::optional<Predicate>> BindWhere(const std::string& where, const std::vector<ColumnSpec>& columns) {
  std::optional<Predicate> predicate;
  if (where.empty()) return predicate;
  auto parsed = Predicate::Parse(where);
  if (!parsed.ok()) return parsed.status();
  predicate = std::move(*parsed);
  STOKE_RETURN_IF_ERROR(predicate->Bind(columns));
  return predicate;
}

}  // namespace

Status LoaderColumns::Select(const TableView& view, const SampleIndex& index, const ScalarColumns::ReadOptions& read) {
  index_ = &index;
  STOKE_ASSIGN_OR_RETURN(std::vector<size_t> selected, SelectColumns(view, o_.columns));
  STOKE_ASSIGN_OR_RETURN(std::vector<std::string> image_columns, ImageColumnNames(view, dir_));
  if (o_.image_channels != 1 && o_.image_channels != 3 && o_.image_channels != 4) {
    return Status::InvalidArgument(fmt::format("image_channels must be 1, 3 or 4, got {}", o_.image_channels));
  }
  STOKE_RETURN_IF_ERROR(SortColumns(view, selected, image_columns));
  STOKE_RETURN_IF_ERROR(CheckArrayColumnNames("shapes", o_.shapes));
  STOKE_RETURN_IF_ERROR(CheckArrayColumnNames("pad", o_.pad));
  for (const auto& [name, shape] : o_.pad) {
    if (shape.empty()) return Status::InvalidArgument(fmt::format("pad['{}']: an empty shape (give one length per level)", name));
  }
  STOKE_RETURN_IF_ERROR(CheckArrayColumnNames("fill", o_.fill));
  STOKE_ASSIGN_OR_RETURN(std::optional<Predicate> where, BindWhere(o_.where, view.columns));
  const auto& config = view.snapshot.metadata.configuration;
  if (auto hf = config.find(kHuggingFaceMetadataKey); hf != config.end()) metadata_shapes_ = HuggingFaceArrayShapes(hf->second);
  // Scalar columns and the filter, file by file (in parallel: footers are small, latency-bound reads).
  return scalars_.Read(view, where, read);
}

Status LoaderColumns::SortColumns(const TableView& view, const std::vector<size_t>& selected,
                                  const std::vector<std::string>& image_columns) {
  for (size_t c : selected) {
    const ColumnSpec& spec = view.columns[c];
    order_.push_back(spec.name);
    if (spec.blob && std::find(image_columns.begin(), image_columns.end(), spec.name) == image_columns.end()) {
      return Status::Unsupported(fmt::format("column '{}' is a blob column without image metadata (stoke.images); the "
                                             "loader delivers image columns and tensors: select other columns",
                                             spec.name));
    }
    if (spec.tensor || spec.blob) {
      STOKE_ASSIGN_OR_RETURN(TensorColumn t, MakeTensorColumn(spec));
      tensors_.push_back(std::move(t));
    } else if (spec.nested() && nlohmann::json::parse(spec.nested_type, nullptr, false).value("type", "") == "array") {
      TensorColumn t;
      t.name = spec.name;
      t.file_name = spec.file_name();
      t.array = true;
      tensors_.push_back(std::move(t));
    } else if (HoldsBinaryCells(spec)) {
      TensorColumn t;
      t.name = spec.name;
      t.file_name = spec.file_name();
      t.binary_cells = true;
      tensors_.push_back(std::move(t));
    } else {
      STOKE_RETURN_IF_ERROR(scalars_.Add(spec, c));
    }
  }
  return Status::OK();
}

Result<TensorColumn> LoaderColumns::MakeTensorColumn(const ColumnSpec& spec) const {
  const auto& names = index_->tensor_columns();
  auto it = std::find(names.begin(), names.end(), spec.file_name());  // the index names columns as files do
  if (it == names.end()) return Status::Internal(fmt::format("tensor column '{}' is not in the sample index", spec.name));
  TensorColumn t;
  t.name = spec.name;
  t.index_column = static_cast<size_t>(it - names.begin());
  if (spec.blob) {
    t.encoded_image = true;  // the pipeline is made once the rows are known (CreateImagePipelines)
    return t;
  }
  t.in = *spec.tensor;
  STOKE_RETURN_IF_ERROR(SetTransforms(&t));
  return t;
}

Status LoaderColumns::SetTransforms(TensorColumn* t) const {
  t->in_bytes = static_cast<size_t>(t->in.num_bytes());
  if (ImagePipeline::HasImageTransforms(o_.transforms)) {
    if (t->in.dtype != DType::kUInt8) {
      return Status::InvalidArgument(fmt::format("column '{}': image transforms need images: an image column or a "
                                                 "uint8 [H, W, C] tensor column, not {}", t->name,
                                                 DTypeName(t->in.dtype)));
    }
    t->use_image = true;  // made in CreateImagePipelines too
    return Status::OK();
  }
  auto pipeline = TransformPipeline::Create(o_.transforms, t->in.dtype, t->in.shape);
  if (!pipeline.ok()) return pipeline.status().WithContext(fmt::format("column '{}'", t->name));
  t->transforms = std::move(*pipeline);
  t->out_bytes = t->transforms.out_bytes();
  t->out_dtype = t->transforms.out_dtype();
  t->out_shape = t->transforms.out_shape();
  return Status::OK();
}

Status LoaderColumns::SetUpCells(int64_t cache_bytes, int64_t max_decoded_bytes) {
  // The decoded pages of multi-row tensor pages and the decoded chunks of array and binary columns
  // share cache_bytes in equal parts.
  const bool arrays = std::any_of(tensors_.begin(), tensors_.end(), [](const TensorColumn& t) { return t.array; });
  const bool binary = std::any_of(tensors_.begin(), tensors_.end(), [](const TensorColumn& t) { return t.binary_cells; });
  const size_t part = static_cast<size_t>(cache_bytes) / (1 + arrays + binary);
  cell_cache_bytes_ = part;
  slow_cells_ = std::make_unique<SlowCells>(*index_, part, o_.verify_crc);
  if (arrays) array_cells_ = std::make_unique<ArrayCells>(*index_, *slow_cells_, part, ArrayPaddings());
  if (binary) binary_cells_ = std::make_unique<BinaryCells>(*slow_cells_, part);
  const std::optional<int64_t> first = scalars_.FirstRow(index_->num_rows());
  for (TensorColumn& t : tensors_) {
    if (t.binary_cells) STOKE_RETURN_IF_ERROR(SetUpBinaryColumn(&t, first));
    if (t.array) STOKE_RETURN_IF_ERROR(SetUpArrayColumn(&t, first));
  }
  return CreateImagePipelines(max_decoded_bytes);
}

template <typename Map>
Status LoaderColumns::CheckArrayColumnNames(std::string_view option, const Map& by_column) const {
  for (const auto& entry : by_column) {
    const std::string& name = entry.first;  // not a structured binding: clang 14 cannot capture those
    if (std::none_of(tensors_.begin(), tensors_.end(), [&](const TensorColumn& t) { return t.array && t.name == name; })) {
      return Status::InvalidArgument(fmt::format("{}: '{}' is not an array column the loader delivers (selected array "
                                                 "columns only)", option, name));
    }
  }
  return Status::OK();
}

std::map<std::string, ArrayPadding> LoaderColumns::ArrayPaddings() const {
  std::map<std::string, ArrayPadding> by_field;  // keyed as the data files name the columns
  for (const TensorColumn& t : tensors_) {
    if (!t.array) continue;
    ArrayPadding p;
    if (auto it = o_.pad.find(t.name); it != o_.pad.end()) p.shape = it->second;
    if (auto it = o_.fill.find(t.name); it != o_.fill.end()) p.fill = it->second;
    if (p.active()) by_field[t.file_name] = std::move(p);
  }
  return by_field;
}

Status LoaderColumns::SetUpArrayColumn(TensorColumn* t, std::optional<int64_t> first) {
  if (first) {
    auto probed = array_cells_->Probe(t->file_name, *first);
    if (!probed.ok()) return probed.status().WithContext(fmt::format("table '{}' column '{}'", dir_, t->name));
    t->in = TensorSpec{probed->first, probed->second};
  } else {
    t->in = TensorSpec{DType::kFloat32, {0}};  // no row is served: nothing is delivered
  }
  t->array_shape = t->in.shape;
  STOKE_RETURN_IF_ERROR(ReshapeArrayColumn(t));
  return SetTransforms(t);
}

Status LoaderColumns::SetUpBinaryColumn(TensorColumn* t, std::optional<int64_t> first) {
  if (!first) {  // no row is served: nothing is delivered
    t->in = TensorSpec{DType::kUInt8, {0}};
    return SetTransforms(t);
  }
  AlignedBuffer cell;
  if (Status st = binary_cells_->ReadCell(t->file_name, *first, &cell); !st.ok()) {
    return st.WithContext(Context(*first, static_cast<uint32_t>(t - tensors_.data())));
  }
  switch (BinaryCellKindOf(cell.view())) {
    case BinaryCellKind::kImage:
      t->encoded_image = true;  // the pipeline is made once the rows are known (CreateImagePipelines)
      return Status::OK();
    case BinaryCellKind::kNpy: {
      auto header = ParseNpyHeader(cell.view(), "cell");
      if (!header.ok()) return header.status().WithContext(Context(*first, static_cast<uint32_t>(t - tensors_.data())));
      t->in = TensorSpec{header->dtype, header->shape};
      return SetTransforms(t);
    }
    case BinaryCellKind::kOther: break;
  }
  return Status::Unsupported(fmt::format("{}: its cells are neither .npy arrays nor JPEG/PNG images, which the loader "
                                         "delivers from binary columns; select other columns, or read it with a query",
                                         Context(*first, static_cast<uint32_t>(t - tensors_.data()))));
}

Status LoaderColumns::ReshapeArrayColumn(TensorColumn* t) const {
  auto given = o_.shapes.find(t->name);
  std::string source = fmt::format("shapes['{}']", t->name);
  if (given == o_.shapes.end()) {
    given = metadata_shapes_.find(t->name);
    if (given == metadata_shapes_.end()) return Status::OK();
    source = fmt::format("the Hugging Face features' shape of '{}'", t->name);
  }
  int64_t n = 1;
  for (int64_t d : given->second) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) {
      return Status::InvalidArgument(fmt::format("{}: [{}] is not a shape", source, fmt::join(given->second, ", ")));
    }
  }
  int64_t have = 1;
  for (int64_t d : t->array_shape) have *= d;
  const bool served = t->array_shape != std::vector<int64_t>{0};  // {0}: no row is served (dense rows are never empty)
  if (served && n != have) {
    return Status::InvalidArgument(fmt::format("{}: [{}] holds {} values, but the column's rows hold {} ([{}])",
                                               source, fmt::join(given->second, ", "), n, have,
                                               fmt::join(t->array_shape, ", ")));
  }
  t->in.shape = given->second;
  return Status::OK();
}

Result<std::pair<int64_t, int64_t>> LoaderColumns::ProbeImageSize(const TensorColumn& t, int64_t max_decoded_bytes) const {
  // No rows: any size batches nothing.
  const std::optional<int64_t> first = scalars_.FirstRow(index_->num_rows());
  if (!first) return std::make_pair(int64_t{1}, int64_t{1});
  const int64_t row = *first;
  AlignedBuffer cell;
  if (t.binary_cells) {
    STOKE_RETURN_IF_ERROR(binary_cells_->ReadCell(t.file_name, row, &cell));
    STOKE_ASSIGN_OR_RETURN(ImageInfo info, ReadImageInfo(cell.view(), "image"));
    return std::make_pair(int64_t{info.height}, int64_t{info.width});
  }
  const SampleIndex::Location loc = index_->Find(row, t.index_column);
  if (loc.needs_decode) {
    STOKE_ASSIGN_OR_RETURN(StorageLocation where, ResolveStorageLocation(index_->FilePath(loc.file)));
    STOKE_ASSIGN_OR_RETURN(std::unique_ptr<ParquetReader> reader, ParquetReader::Open(*where.storage, where.path));
    STOKE_ASSIGN_OR_RETURN(size_t col, reader->FindColumn(t.name));
    STOKE_RETURN_IF_ERROR(reader->ReadBinaryCell(loc.row_in_file, col, &cell));
  } else {
    STOKE_ASSIGN_OR_RETURN(StorageLocation where, ResolveStorageLocation(index_->FilePath(loc.file)));
    STOKE_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, where.storage->OpenForRead(where.path));
    AlignedBuffer page(loc.length);
    STOKE_RETURN_IF_ERROR(file->ReadAt(loc.offset, page.mutable_view()));
    PageDecodeOptions po;
    po.verify_crc = o_.verify_crc;
    AlignedBuffer scratch;
    STOKE_ASSIGN_OR_RETURN(ByteView value, DecodeBlobFromPage(page.view(), loc.codec, loc.row_in_page, loc.rows_in_page,
                                                              loc.definition_levels, static_cast<uint64_t>(max_decoded_bytes),
                                                              &scratch, po, "page"));
    cell.Append(value);
  }
  STOKE_ASSIGN_OR_RETURN(ImageInfo info, ReadImageInfo(cell.view(), "image"));
  return std::make_pair(int64_t{info.height}, int64_t{info.width});
}

Status LoaderColumns::CreateImagePipelines(int64_t max_decoded_bytes) {
  ImagePipelineOptions io;
  io.channels = o_.image_channels;
  io.jpeg_dct_scaling = o_.jpeg_dct_scaling;
  io.jpeg_region_decode = o_.jpeg_region_decode;
  io.max_decoded_bytes = max_decoded_bytes;
  io.for_gpu = o_.transforms_on == LoaderOptions::TransformsOn::kCuda;
  const bool any_image = std::any_of(tensors_.begin(), tensors_.end(),
                                     [](const TensorColumn& t) { return t.encoded_image || t.use_image; });
  if (io.for_gpu && !any_image) {
    return Status::InvalidArgument("transforms_on cuda: no selected column is an image column with image transforms "
                                   "(it finishes images on the GPU; use transforms_on cpu)");
  }
  for (TensorColumn& t : tensors_) {
    if (!t.encoded_image && !t.use_image) continue;
    std::optional<std::pair<int64_t, int64_t>> uniform;
    if (t.encoded_image && !ImagePipeline::FixesSize(o_.transforms)) {
      auto probed = ProbeImageSize(t, max_decoded_bytes);
      if (!probed.ok()) {
        const int64_t row = scalars_.FirstRow(index_->num_rows()).value_or(0);
        return probed.status().WithContext(Context(row, static_cast<uint32_t>(&t - tensors_.data())));
      }
      uniform = *probed;
    }
    auto pipeline = ImagePipeline::Create(o_.transforms, io, t.encoded_image ? std::vector<int64_t>{} : t.in.shape, uniform);
    if (!pipeline.ok()) return pipeline.status().WithContext(fmt::format("column '{}'", t.name));
    t.image = std::move(*pipeline);
    t.out_bytes = t.image.out_bytes();
    t.out_dtype = t.image.out_dtype();
    t.out_shape = t.image.out_shape();
  }
  return Status::OK();
}

}  // namespace stoke
