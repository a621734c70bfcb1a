// stoke/loader.h: a table version as batches for training: shuffled per epoch, sharded per rank,
// transformed on worker threads, in reusable buffers.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "example_support.h"
#include "stoke/loader.h"

stoke::Status Example(const std::string& dir) {
  STOKE_ASSIGN_OR_RETURN(std::string table, example::MakeSmallTable(dir));
  stoke::LoaderOptions options;
  options.columns = {"volume", "label"};
  options.batch_size = 16;
  options.transforms = {stoke::TransformSpec::RandomFlip({0, 1}),  // volume is [8, 8, 4, 2]
                        stoke::TransformSpec::Cast(stoke::DType::kFloat16)};
  STOKE_ASSIGN_OR_RETURN(std::unique_ptr<stoke::Loader> loader, stoke::Loader::Open(table, options));

  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    STOKE_RETURN_IF_ERROR(loader->SetEpoch(epoch));  // a new order for each epoch
    int64_t samples = 0;
    while (true) {
      STOKE_ASSIGN_OR_RETURN(std::optional<stoke::Batch> batch, loader->Next());
      if (!batch) break;  // the end of the epoch
      const stoke::BatchColumn* volume = batch->column("volume");
      STOKE_RETURN_IF_ERROR(example::Expect(volume->dtype == stoke::DType::kFloat16 &&
                                            volume->shape == std::vector<int64_t>{16, 8, 8, 4, 2},
                                            "float16 [16, 8, 8, 4, 2]"));
      const void* values = volume->data();  // volume->num_bytes of them; writable through a non-const Batch
      STOKE_RETURN_IF_ERROR(example::Expect(values != nullptr, "values"));
      samples += batch->size();
    }  // each batch's buffer went back to the loader's pool when `batch` was reset
    STOKE_RETURN_IF_ERROR(example::Expect(samples == 64, "every sample once per epoch"));
  }
  return example::Expect(loader->stats().samples == 128, "128 samples in two epochs");
}

int main() { return example::Run(Example); }
