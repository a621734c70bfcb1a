// stoke/gpu_images.h: image columns finished on a CUDA device. With transforms_on kCuda the loader's
// threads decode and crop, and each image column arrives as records that the device resamples and
// normalizes; the result equals the CPU path's bytes. This example finishes the records on the host
// (FinishGpuImagesOnHost, the kernel's reference), so it runs without a GPU too.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "example_support.h"
#include "stoke/gpu_images.h"
#include "stoke/ingest.h"
#include "stoke/loader.h"
#include "stoke/tools.h"

// The first batch of `table` through `options`.
stoke::Result<std::optional<stoke::Batch>> FirstBatch(const std::string& table, const stoke::LoaderOptions& options) {
  STOKE_ASSIGN_OR_RETURN(std::unique_ptr<stoke::Loader> loader, stoke::Loader::Open(table, options));
  return loader->Next();  // the batch outlives the loader
}

stoke::Status Example(const std::string& dir) {
  stoke::SynthImagesOptions synth;
  synth.out_dir = dir + "/jpegs";
  synth.images = 32;
  synth.classes = 2;
  synth.progress = false;
  STOKE_RETURN_IF_ERROR(stoke::SynthImages(synth).status());
  stoke::IngestOptions ingest;
  ingest.source_dir = synth.out_dir;
  ingest.table_dir = dir + "/images";
  ingest.progress = false;
  STOKE_RETURN_IF_ERROR(stoke::IngestSources(ingest).status());

  stoke::LoaderOptions options;
  options.columns = {"image"};
  options.batch_size = 16;
  options.transforms = {stoke::TransformSpec::RandomResizedCrop({64, 64}), stoke::TransformSpec::RandomHorizontalFlip(),
                        stoke::TransformSpec::ToTensor(stoke::DType::kFloat16),
                        stoke::TransformSpec::Normalize({0.485, 0.456, 0.406}, {0.229, 0.224, 0.225})};
  STOKE_ASSIGN_OR_RETURN(std::optional<stoke::Batch> on_cpu, FirstBatch(ingest.table_dir, options));
  options.transforms_on = stoke::LoaderOptions::TransformsOn::kCuda;
  STOKE_ASSIGN_OR_RETURN(std::optional<stoke::Batch> records, FirstBatch(ingest.table_dir, options));

  const stoke::BatchColumn* column = records->column("image");
  STOKE_ASSIGN_OR_RETURN(stoke::GpuImagesShape shape, stoke::GpuImagesShapeOf(*column));
  STOKE_RETURN_IF_ERROR(example::Expect(column->gpu_images && shape.dtype == stoke::DType::kFloat16 &&
                                            shape.shape == std::vector<int64_t>{16, 3, 64, 64},
                                        "records of float16 [16, 3, 64, 64] images"));
  // On a device: cudaMemcpyAsync the column's bytes there, then FinishGpuImages(records, record_bytes,
  // shape, images, stream); GpuImageFinisher does both for a whole batch.
  std::vector<uint8_t> images(shape.num_bytes);
  STOKE_RETURN_IF_ERROR(stoke::FinishGpuImagesOnHost(column->data(), static_cast<size_t>(column->shape[1]), shape,
                                                     images.data()));
  const stoke::BatchColumn* expected = on_cpu->column("image");
  return example::Expect(expected->num_bytes == images.size() &&
                             std::equal(images.begin(), images.end(), static_cast<const uint8_t*>(expected->data())),
                         "the CPU path's bytes");
}

int main() { return example::Run(Example); }
