// The host side of include/stoke/gpu_images.h: the records' output shape, their finishing on the
// CPU, and FinishGpuImages where stoke is built without CUDA (gpu_images_cuda.cu has the device's).
#include "stoke/gpu_images.h"

#include <fmt/format.h>

#include <cstring>

#include "loader/gpu_image.h"

namespace stoke {
namespace {

// The header of record `row`, checked to be one; InvalidArgument otherwise.
Result<GpuImageHeader> RecordHeader(const void* records, size_t record_bytes, int64_t row) {
  GpuImageHeader h;
  std::memcpy(&h, static_cast<const uint8_t*>(records) + static_cast<size_t>(row) * record_bytes, sizeof(h));
  // The element type must be one a table can hold, of the size the header says.
  const auto dtype = static_cast<DType>(h.out_dtype);
  const bool typed = h.table_bytes == 0 ? dtype == DType::kUInt8
                                        : (dtype == DType::kFloat32 || dtype == DType::kFloat16 ||
                                           dtype == DType::kBFloat16) &&
                                              DTypeSize(dtype) == static_cast<size_t>(h.element_bytes);
  if (!GpuImageRecordFits(h, record_bytes) || !typed) {
    return Status::InvalidArgument(fmt::format("row {}: not a GPU image record", row));
  }
  return h;
}

// The output a header describes, for `rows` rows.
GpuImagesShape ShapeOfHeader(const GpuImageHeader& h, int64_t rows) {
  GpuImagesShape s;
  s.dtype = h.table_bytes == 0 ? DType::kUInt8 : static_cast<DType>(h.out_dtype);
  s.shape = h.table_bytes == 0 ? std::vector<int64_t>{rows, h.out_height, h.out_width, h.channels}
                               : std::vector<int64_t>{rows, h.channels, h.out_height, h.out_width};
  s.num_bytes = DTypeSize(s.dtype);
  for (int64_t d : s.shape) s.num_bytes *= static_cast<size_t>(d);
  return s;
}

}  // namespace

Result<GpuImagesShape> GpuImagesShapeOf(const void* records, int64_t rows, size_t record_bytes) {
  if (rows < 1) return Status::InvalidArgument("GPU image records: no rows");
  if (record_bytes < sizeof(GpuImageHeader)) {
    return Status::InvalidArgument(fmt::format("GPU image records of {} bytes: too short", record_bytes));
  }
  STOKE_ASSIGN_OR_RETURN(const GpuImageHeader h, RecordHeader(records, record_bytes, 0));
  return ShapeOfHeader(h, rows);
}

Result<GpuImagesShape> GpuImagesShapeOf(const BatchColumn& column) {
  if (!column.gpu_images || column.shape.size() != 2) {
    return Status::InvalidArgument(fmt::format("column '{}' does not hold GPU image records (load it with "
                                               "transforms_on cuda)", column.name));
  }
  auto s = GpuImagesShapeOf(column.data(), column.shape[0], static_cast<size_t>(column.shape[1]));
  if (!s.ok()) return s.status().WithContext(fmt::format("column '{}'", column.name));
  return s;
}

Status FinishGpuImagesOnHost(const void* records, size_t record_bytes, const GpuImagesShape& shape, void* out) {
  if (shape.shape.size() != 4) return Status::InvalidArgument("FinishGpuImagesOnHost: a shape of 4 dimensions expected");
  const int64_t rows = shape.shape[0];
  const size_t image_bytes = rows == 0 ? 0 : shape.num_bytes / static_cast<size_t>(rows);
  for (int64_t row = 0; row < rows; ++row) {
    STOKE_ASSIGN_OR_RETURN(const GpuImageHeader h, RecordHeader(records, record_bytes, row));
    const GpuImagesShape own = ShapeOfHeader(h, rows);
    if (own.shape != shape.shape || own.dtype != shape.dtype) {
      return Status::InvalidArgument(fmt::format("row {}: the record's image is not of the shape asked for", row));
    }
    const uint8_t* record = static_cast<const uint8_t*>(records) + static_cast<size_t>(row) * record_bytes;
    uint8_t* image = static_cast<uint8_t*>(out) + static_cast<size_t>(row) * image_bytes;
    for (int32_t y = 0; y < h.out_height; ++y) {
      for (int32_t x = 0; x < h.out_width; ++x) FinishGpuImagePixel(record, x, y, image);
    }
  }
  return Status::OK();
}

Status FinishGpuImages(const void* records, size_t record_bytes, const GpuImagesShape& shape, void* out,
                       void* stream, int device) {
#ifdef STOKE_CUDA_KERNELS
  if (shape.shape.size() != 4) return Status::InvalidArgument("FinishGpuImages: a shape of 4 dimensions expected");
  if (record_bytes < sizeof(GpuImageHeader) || record_bytes % alignof(GpuImageHeader) != 0) {
    return Status::InvalidArgument(fmt::format("FinishGpuImages: records of {} bytes are not GPU image records", record_bytes));
  }
  GpuImageLaunch e;
  e.rows = shape.shape[0];
  if (e.rows == 0) return Status::OK();
  const bool uint8 = shape.dtype == DType::kUInt8;
  e.records = static_cast<const uint8_t*>(records);
  e.record_bytes = record_bytes;
  e.channels = static_cast<int32_t>(uint8 ? shape.shape[3] : shape.shape[1]);
  e.height = static_cast<int32_t>(uint8 ? shape.shape[1] : shape.shape[2]);
  e.width = static_cast<int32_t>(uint8 ? shape.shape[2] : shape.shape[3]);
  e.element_bytes = static_cast<int32_t>(DTypeSize(shape.dtype));
  e.table_bytes = uint8 ? 0 : e.channels * 256 * e.element_bytes;
  e.image_bytes = shape.num_bytes / static_cast<size_t>(e.rows);
  e.out = static_cast<uint8_t*>(out);
  e.stream = stream;
  e.device = device;
  const char* error = nullptr;
  if (!LaunchFinishGpuImages(e, &error)) return Status::IOError(fmt::format("finishing images on the GPU: {}", error));
  return Status::OK();
#else
  return Status::Unsupported("finishing images on a GPU: this stoke was built without its CUDA kernels");
#endif
}

}  // namespace stoke
