// The loader: a table version to batches at storage speed (docs/architecture.md, "The loader").
//
//   Loader::Open(table_dir, options)      sample index (cached), scalar columns, `where` filter
//   loader->SetEpoch(e)                    per-epoch order (seeded by seed and e), this rank's shard
//   while (auto b = loader->Next()) ...    batches in sampler order; blocks only when data is late
//
// Samples are fetched one positioned read per page (io_uring or a pread pool; ranged GETs on object
// stores, neighbours within a gap merged, optionally through a local read cache), checked (page header,
// CRC) and decompressed, transformed and collated on worker threads into reusable batch buffers,
// with everything in flight bounded by one budget, `prefetch_bytes`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "stoke/dtype.h"
#include "stoke/status.h"

namespace stoke {

// One per-sample transform, applied to every tensor and image column selected, in list order, on the
// loader's worker threads. Random transforms draw from a generator seeded by (seed, epoch, row id,
// column), so a sample gets the same augmentation in every run, on every rank and at every thread
// count. Axes count over the sample's dimensions (not the batch dimension); negative axes count from
// the end.
//
// Images (docs/python.md, "Images"): a column named in the table's `stoke.images` metadata holds
// encoded JPEG/PNG files; the loader decodes each to HWC uint8 pixels (LoaderOptions::image_channels)
// and runs the column's transforms on them. The image transforms (random_resized_crop, resize,
// center_crop without axes, random_horizontal_flip, color_jitter) follow torchvision's definitions on
// PIL images, with PIL's bilinear (antialiased) resampling; they apply to decoded images and to uint8
// tensor columns of shape [H, W, C] (C 1 to 4), and must come first in the list. The list's first
// other transform starts the tensor part (to_tensor, normalize, cast, ...), which runs on the image
// part's output, whose height and width must then be the same for every sample: end the image part
// with random_resized_crop, resize to (h, w) or center_crop, or load images of one size.
struct TransformSpec {
  // Names (TransformKindName) are what the Python binding and `stoke bench load --transform` use.
  enum class Kind {
    kCast,          // convert elements to `dtype`: float32, float16 or bfloat16 (round to nearest even)
    kNormalize,     // (x - mean[c]) / std[c] per channel c along `axis` (default: the channel axis, see
                    // kChannelAxis); output float32 unless the input is float16/bfloat16/float64 already
                    // (then kept); integer inputs become float32
    kRandomFlip,    // reverse each axis in `axes` independently with probability `p`
    kRandomRot90,   // rotate by k * 90 degrees, k uniform in {0, 1, 2, 3}, in the plane of axes[0],
                    // axes[1] (both must have the same extent)
    kRandomCrop,    // a window of `size` (one entry per axis in `axes`) at a uniform random offset; an
                    // axis shorter than its size is zero-padded (the sample placed at a random offset)
    kCenterCrop,    // as kRandomCrop with the window (or the padding) centred. Without `axes`, an
                    // image's height and width (size {h, w}, or {s} for s x s) with torchvision's
                    // CenterCrop offsets: round((extent - size) / 2), half to even; zero padding split
                    // floor/ceil when the image is smaller
    kChannelsFirst, // move `axis` (the channel axis; default -1) to the front
    kChannelsLast,  // move `axis` (default 0) to the end
    // Image transforms (see above).
    kRandomResizedCrop,    // torchvision's RandomResizedCrop(size, scale, ratio): a box of area
                           // scale[0]..scale[1] of the image and aspect ratio ratio[0]..ratio[1]
                           // (log-uniform), 10 attempts then the centred fallback, resized to `size`
                           // ({h, w}, or {s}) with bilinear antialiased resampling
    kResize,               // torchvision's Resize(size): {s} scales the shorter side to s (the longer
                           // to int(s * long / short)); {h, w} to exactly h x w. Bilinear, antialiased
    kRandomHorizontalFlip, // mirror the width axis with probability `p` ([H, W, C], or [C, H, W] after
                           // to_tensor/channels_first)
    kColorJitter,          // torchvision's ColorJitter(brightness, contrast) on PIL images: factors
                           // uniform in brightness[0]..[1] and contrast[0]..[1], applied in a random
                           // order; brightness blends with black, contrast with the mean gray level
    kToTensor,             // [H, W, C] uint8 to [C, H, W] `dtype` (float32, float16 or bfloat16) in
                           // [0, 1] (x / 255 in float32), as torchvision's ToTensor
  };
  // Normalize's default axis: the sample's channel axis, the last one, or the first after
  // to_tensor or channels_first (and the last again after channels_last).
  static constexpr int kChannelAxis = -1000;
  Kind kind = Kind::kCast;           // which transform; the fields below that it reads say so
  DType dtype = DType::kFloat32;     // kCast, kToTensor
  std::vector<double> mean, std;     // kNormalize: one entry per channel, or one for all channels
  int axis = -1;                     // kNormalize (channel axis), kChannelsFirst/kChannelsLast
  std::vector<int> axes;             // kRandomFlip, kRandomRot90 (two), kRandomCrop/kCenterCrop
  // kRandomCrop/kCenterCrop: window extent per entry of `axes`; kCenterCrop without axes,
  // kRandomResizedCrop, kResize: {h, w} or {s}.
  std::vector<int64_t> size;
  double p = 0.5;                    // kRandomFlip, kRandomHorizontalFlip
  std::vector<double> scale = {0.08, 1.0};          // kRandomResizedCrop: area fraction range
  std::vector<double> ratio = {3.0 / 4.0, 4.0 / 3.0};  // kRandomResizedCrop: aspect ratio (w / h) range
  std::vector<double> brightness, contrast;         // kColorJitter: factor ranges {min, max} (empty: off)

  // The factories below set `kind` and the fields it reads; the others keep their defaults.
  // kCast to `to`.
  static TransformSpec Cast(DType to) { TransformSpec t; t.kind = Kind::kCast; t.dtype = to; return t; }
  // kNormalize with per-channel (or one) mean and std along `axis`.
  static TransformSpec Normalize(std::vector<double> mean, std::vector<double> std, int axis = kChannelAxis) {
    TransformSpec t; t.kind = Kind::kNormalize; t.mean = std::move(mean); t.std = std::move(std); t.axis = axis; return t;
  }
  // kRandomFlip of each of `axes` with probability p.
  static TransformSpec RandomFlip(std::vector<int> axes, double p = 0.5) {
    TransformSpec t; t.kind = Kind::kRandomFlip; t.axes = std::move(axes); t.p = p; return t;
  }
  // kRandomRot90 in the plane of axis0 and axis1.
  static TransformSpec RandomRot90(int axis0, int axis1) {
    TransformSpec t; t.kind = Kind::kRandomRot90; t.axes = {axis0, axis1}; return t;
  }
  // kRandomCrop: a window of size[i] along axes[i].
  static TransformSpec RandomCrop(std::vector<int> axes, std::vector<int64_t> size) {
    TransformSpec t; t.kind = Kind::kRandomCrop; t.axes = std::move(axes); t.size = std::move(size); return t;
  }
  // kCenterCrop: the centred window of size[i] along axes[i].
  static TransformSpec CenterCrop(std::vector<int> axes, std::vector<int64_t> size) {
    TransformSpec t; t.kind = Kind::kCenterCrop; t.axes = std::move(axes); t.size = std::move(size); return t;
  }
  // kChannelsFirst: move `axis` to the front.
  static TransformSpec ChannelsFirst(int axis = -1) { TransformSpec t; t.kind = Kind::kChannelsFirst; t.axis = axis; return t; }
  // kChannelsLast: move `axis` to the end.
  static TransformSpec ChannelsLast(int axis = 0) { TransformSpec t; t.kind = Kind::kChannelsLast; t.axis = axis; return t; }
  // Image transforms; `size` is {h, w} or {s}.
  // kRandomResizedCrop to `size`, with torchvision's scale and ratio ranges.
  static TransformSpec RandomResizedCrop(std::vector<int64_t> size, std::vector<double> scale = {0.08, 1.0},
                                         std::vector<double> ratio = {3.0 / 4.0, 4.0 / 3.0}) {
    TransformSpec t; t.kind = Kind::kRandomResizedCrop; t.size = std::move(size); t.scale = std::move(scale);
    t.ratio = std::move(ratio); return t;
  }
  // kResize to `size`.
  static TransformSpec Resize(std::vector<int64_t> size) { TransformSpec t; t.kind = Kind::kResize; t.size = std::move(size); return t; }
  // kCenterCrop of an image's height and width to `size`, with torchvision's offsets.
  static TransformSpec ImageCenterCrop(std::vector<int64_t> size) {
    TransformSpec t; t.kind = Kind::kCenterCrop; t.size = std::move(size); return t;
  }
  // kRandomHorizontalFlip with probability p.
  static TransformSpec RandomHorizontalFlip(double p = 0.5) { TransformSpec t; t.kind = Kind::kRandomHorizontalFlip; t.p = p; return t; }
  // torchvision's ColorJitter(brightness=b, contrast=c): factor ranges {max(0, 1 - b), 1 + b}; 0 turns one off.
  static TransformSpec ColorJitter(double brightness, double contrast) {
    TransformSpec t; t.kind = Kind::kColorJitter;
    if (brightness != 0) t.brightness = {brightness < 1 ? 1 - brightness : 0, 1 + brightness};
    if (contrast != 0) t.contrast = {contrast < 1 ? 1 - contrast : 0, 1 + contrast};
    return t;
  }
  // kToTensor: [H, W, C] uint8 to [C, H, W] `to` in [0, 1].
  static TransformSpec ToTensor(DType to = DType::kFloat32) { TransformSpec t; t.kind = Kind::kToTensor; t.dtype = to; return t; }
};

// "cast", "normalize", "random_flip", "random_rot90", "random_crop", "center_crop", "channels_first",
// "channels_last", "random_resized_crop", "resize", "random_horizontal_flip", "color_jitter",
// "to_tensor"; "unknown" otherwise.
std::string_view TransformKindName(TransformSpec::Kind kind);
// The kind named `name` (as above); InvalidArgument listing the names otherwise.
Result<TransformSpec::Kind> ParseTransformKind(std::string_view name);
// A transform written as text (`stoke bench load --transform`): KIND[:ARG[,ARG...]], each ARG
// key=value or, first, a bare value for the kind's main key (size for random_resized_crop, resize,
// center_crop and random_crop; p for the flips; dtype for cast and to_tensor). Sizes are N or HxW;
// lists (mean, std, axes, scale, ratio) are separated by '/'; brightness and contrast are a spread b
// (factors in [max(0, 1 - b), 1 + b]) or a range lo/hi. `hflip` stands for random_horizontal_flip.
// Examples: random_resized_crop:224, random_resized_crop:224,scale=0.25/1, hflip, resize:256,
// center_crop:224, color_jitter:brightness=0.4,contrast=0.4, to_tensor,
// normalize:mean=0.485/0.456/0.406,std=0.229/0.224/0.225. Defaults as in the Python classes.
// InvalidArgument naming the text and the bad part otherwise.
Result<TransformSpec> ParseTransformText(std::string_view text);

// What Loader::Open loads and how. Plain values; each field's default is its initialiser.
struct LoaderOptions {
  // Default: every column of the table. Tensor columns become [batch, ...shape] arrays; scalar
  // columns (integers, floats, booleans, strings; partition columns too) become [batch] arrays;
  // array columns (lists of numbers, booleans, dates or timestamps, nested to any depth: Spark's
  // array<float>) become [batch, n1, n2, ...] arrays of the first served row's shape, which every
  // row must have (else an error naming the file and row, or a skipped sample with kSkip).
  std::vector<std::string> columns;
  std::optional<int64_t> version;    // Default: the latest version.
  std::string where;                 // Default: all rows. A `stoke query` predicate over scalar columns.
  int64_t batch_size = 32;           // Default 32, >= 1.
  // The order of each epoch: kNone (table order), kGlobal (a uniform permutation of all rows), or
  // kBlock (the table's files in a random order, rows mixed through a buffer of shuffle_buffer rows:
  // fewer, larger reads for less mixing; see ShuffleQuality). Where array or binary columns of other
  // writers' files are selected, kBlock's blocks are the pages and row groups their rows are decoded
  // in, shuffled, and their rows mixed in windows of as many as the decoded-page caches hold (at most
  // shuffle_buffer rows): each is decoded once an epoch (docs/architecture.md, "Block shuffle over
  // pages and row groups"). The windows follow the caches' size, so such an order is the same on
  // every rank and after a Restore only with the same prefetch_bytes.
  enum class Shuffle { kNone, kGlobal, kBlock };
  Shuffle shuffle = Shuffle::kGlobal;  // Default global: a new uniform permutation every epoch.
  int64_t shuffle_buffer = 1024;     // Default 1024 rows; kBlock only: the rows mixed at once.
  uint64_t seed = 0;                 // Default 0. With the epoch, fixes order and augmentation.
  int rank = 0;                      // Default 0, in [0, world_size).
  int world_size = 1;                // Default 1. Ranks get disjoint, equal-sized shards.
  // Default false: the last short batch is delivered, and uneven shards are padded by repeating
  // samples so every rank has the same count. True: drop both.
  bool drop_last = false;
  std::vector<TransformSpec> transforms;  // Default none.
  // Default 512 MiB. One budget for bytes read and not yet decoded plus batch buffers being filled
  // or held by the consumer: batch buffers (at least 2) take at most half of it (and no more than
  // threads + 2 where every tensor column is another writer's array or binary column, decoded by the
  // workers from pages: there are no reads in flight to keep busy), reads in flight at most a quarter
  // (at least 8 MiB), the decoded pages of multi-row pages the last quarter.
  int64_t prefetch_bytes = int64_t{512} << 20;
  // Default 0 = one decode/transform worker per CPU this process may use: its affinity mask, at most
  // its cgroup's CPU limit rounded up (at least 1). Else 1 to 4096.
  int threads = 0;
  // Default 0 = by where the table is: 64 reads in flight on local files; 256 ranged GETs on object
  // stores, whose reads are latency-bound (a GET waits tens of milliseconds, and hundreds in flight
  // cost no thread each: they run on the HTTP client's event loop). Else 1 to 4096.
  int queue_depth = 0;
  // Default false. O_DIRECT reads (bypass the page cache), e.g. for cold-cache benchmarks.
  bool direct = false;
  // How local files are read: kAuto, kIoUring (io_uring only, failing where the kernel refuses it) or
  // kPread (a thread pool of pread calls).
  enum class Backend { kAuto, kIoUring, kPread };
  // Default: io_uring when the kernel allows it, else pread. Without O_DIRECT, kAuto also reads cached
  // pages of uncompressed samples at once, on the loader's producer thread and on the thread waiting
  // in Next() for their batch (no hand-off per read: LoaderStats::reads_at_once): copied out of a
  // read-only mapping of the file, with no system call, whatever their size, where the page cache
  // holds them (LoaderStats::reads_mapped); else, below 64 KiB, with a system call. Pages of 64 KiB
  // up to 1 MiB that are not copied out of a mapping go to threads of their own (one more than the
  // CPUs the process may use), which copy cached pages in parallel and checksum a sample while it is
  // in their cache; pages not cached go to io_uring.
  Backend backend = Backend::kAuto;
  // Default 1 MiB. Local files: reads of pages adjacent in one file are merged up to this size (0: never).
  int64_t coalesce_bytes = int64_t{1} << 20;
  // Object stores. Default 8 MiB. Pages of one object needed by a batch whose ranges are at most
  // remote_coalesce_gap_bytes apart are fetched with one ranged GET of up to this many bytes (the
  // bytes between them are read and dropped) and split (0: one GET per page).
  int64_t remote_coalesce_bytes = int64_t{8} << 20;
  // Object stores. Default 256 KiB: about what a link moves in the time one more request costs
  // (docs/object_storage.md). Larger merges more and reads more bytes that are dropped.
  int64_t remote_coalesce_gap_bytes = int64_t{256} << 10;
  // Default "" (none). Object stores: a local directory keeping what the loader fetched, in blocks of
  // 1 MiB verified by CRC, so that later epochs (and other processes sharing the directory) read from
  // local disk instead of the store (docs/object_storage.md, "Read cache"); uncompressed samples the
  // page cache holds there are copied out of a mapping of the block, as from a local file (whatever
  // the backend; not with `direct`). Ignored for local tables.
  std::string cache_dir;
  // Default 16 GiB. Bytes the cache directory keeps; beyond it the least recently used blocks go.
  int64_t cache_bytes = int64_t{16} << 30;
  bool verify_crc = true;            // Default true: check each page's CRC-32.
  // What a sample that cannot be read or decoded does: kRaise or kSkip (below).
  enum class OnError { kRaise, kSkip };
  // Default raise: a bad sample fails Next() with its file and row named. Skip: the sample is left out
  // of its batch (the batch is shorter), logged, and counted in LoaderStats::samples_skipped.
  OnError on_error = OnError::kRaise;
  // Default true: batch buffers in page-locked (pinned) host memory when stoke is built with CUDA and
  // a device is present, so host-to-device copies can be asynchronous; plain aligned memory otherwise.
  bool pin_memory = true;
  bool trace = false;                // Default false: record per-stage spans for WriteTrace.
  // Default none. Per array column, the shape each row is delivered as: a row's values (of the shape
  // its lists nest to) reshaped, in row-major order; the product must be the row's value count
  // (else Open fails naming the column). Lets a flat list (Spark's array<float> of a volume) arrive
  // as [30, 30, 10, 10]. Naming a column that is not a selected array column is InvalidArgument.
  std::map<std::string, std::vector<int64_t>> shapes;
  // Default none: an array column's rows must all be dense arrays of one shape, and a ragged row, an
  // empty or null list or a null row is an error naming the file and row. Per array column, a shape
  // (one length per nesting level) every row is padded to instead: each list's elements first, the
  // rest of its dimension `fill`'s value (0 without one); an empty or null list, or a null row, is
  // all padding; a list longer than its length is still an error. The rows are delivered in this
  // shape (or reshaped to `shapes`'). An empty shape, or one of another nesting depth than the
  // first served row's file gives the column, fails Open (a later file of another depth fails its
  // rows).
  std::map<std::string, std::vector<int64_t>> pad;
  // Default none: a null element inside an array is an error naming the file and row. Per array
  // column, the value null elements (and padding) take instead: for integer and boolean columns it
  // must be exact (an integer in range; 0 or 1), else Open fails; for float columns it is rounded
  // to the column's precision.
  std::map<std::string, double> fill;
  // Image columns (docs/python.md, "Images"). Default 3: decoded images are RGB (gray replicated,
  // alpha dropped: PIL's convert("RGB"), as torchvision's ImageFolder); 1 gray (PIL's convert("L"));
  // 4 RGBA.
  int image_channels = 3;
  // Default true: a JPEG whose crop is at least twice the output size in both axes is decoded at a
  // reduced scale in the DCT domain (1/2, 3/8, 1/4 or 1/8: the smallest that keeps the crop at
  // least the output size), then resized; much less work for large photos, with pixels a few levels
  // from a full decode + resize. False: every image is decoded at full size (the pixels then equal
  // torchvision's PIL pipeline given the same random choices).
  bool jpeg_dct_scaling = true;
  // Default true: a JPEG is decoded only as far as its crop box needs (the rows above the box are
  // entropy-decoded and skipped, only the iMCU columns around the box are reconstructed, and
  // decoding stops after the box's last row); the box's pixels equal a full decode's. False: every
  // JPEG is decoded whole (for comparisons).
  bool jpeg_region_decode = true;
  // Where an image column's resampling and tensor part run. Default kCpu: on the decode workers. kCuda:
  // the workers decode (and crop) only, and each image column is delivered as records
  // (BatchColumn::gpu_images) that FinishGpuImages turns into the images on a CUDA device, the same
  // bytes as kCpu gives (include/stoke/gpu_images.h). Open fails (InvalidArgument) where the chain
  // holds color_jitter, or tensor transforms besides to_tensor, normalize and cast after the image
  // transforms.
  enum class TransformsOn { kCpu, kCuda };
  TransformsOn transforms_on = TransformsOn::kCpu;  // Default kCpu (above).
};

// The names of LoaderOptions' choices, as `stoke bench load` and Python's Loader spell them:
// "none", "global", "block"; "auto", "io_uring", "pread"; "raise", "skip"; "cpu", "cuda". Each Parse* is the
// inverse, InvalidArgument naming the option and the choices for any other text ("shuffle: unknown
// value 'x' (expected one of none, global, block)").
std::string_view ShuffleName(LoaderOptions::Shuffle shuffle);
Result<LoaderOptions::Shuffle> ParseShuffle(std::string_view name);  // "shuffle: unknown value ..." otherwise
std::string_view BackendName(LoaderOptions::Backend backend);        // "auto", "io_uring" or "pread"
Result<LoaderOptions::Backend> ParseBackend(std::string_view name);  // "backend: unknown value ..." otherwise
std::string_view OnErrorName(LoaderOptions::OnError on_error);       // "raise" or "skip"
Result<LoaderOptions::OnError> ParseOnError(std::string_view name);  // "on_error: unknown value ..." otherwise
std::string_view TransformsOnName(LoaderOptions::TransformsOn on);   // "cpu" or "cuda"
Result<LoaderOptions::TransformsOn> ParseTransformsOn(std::string_view name);  // "transforms_on: unknown value ..."

// One column of a batch: a C-contiguous array, row-major, rows in sampler order. A view of the
// batch's buffer: valid while its Batch lives. Through a const BatchColumn (a const Batch's) the
// values are read-only.
struct BatchColumn {
  std::string name;                   // the column's name in the table
  ColumnKind kind = ColumnKind::kScalar;  // kScalar, kString or kTensor (image columns are tensors)
  DType dtype = DType::kFloat32;      // the element type; for string columns kUInt8 (see `strings`)
  std::vector<int64_t> shape;         // [rows] for scalars, [rows, ...sample shape] for tensors
  size_t num_bytes = 0;               // bytes at data(): shape's product * DTypeSize(dtype); 0 for strings
  // For nullable scalar columns: one byte per row, 1 = present (the value is 0 where absent); empty
  // when every row is present.
  std::vector<uint8_t> valid;
  std::vector<std::string> strings;   // string columns only: one per row ("" for null)
  // True for an image column loaded with LoaderOptions::transforms_on = kCuda: each row is a uint8
  // record (shape [rows, record bytes]) that FinishGpuImages finishes into the image on a device.
  bool gpu_images = false;

  // The values (num_bytes of them), read-only; null for string columns.
  const void* data() const { return data_; }
  // The values, writable: the consumer owns the batch's buffer until the Batch is destroyed and may
  // write into it (normalise in place, hand it to a framework that writes), within num_bytes.
  void* data() { return data_; }

 private:
  friend class Loader;  // points data_ into the batch buffer it fills
  void* data_ = nullptr;
};

// A delivered batch. Its memory is the loader's: it returns to the loader's pool when the Batch is
// destroyed (also after the Loader itself is gone). Only Loader::Next makes one. Move-only; not
// thread-safe. A const Batch is read-only.
class Batch {
 public:
  ~Batch();                                // returns the batch buffer to the loader's pool
  Batch(Batch&&) noexcept;                 // the buffer moves along; the moved-from Batch holds none
  Batch& operator=(Batch&&) noexcept;      // returns this Batch's buffer first
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  int64_t size() const;                   // rows
  int64_t epoch() const;                  // the epoch the batch belongs to
  int64_t index() const;                  // batch number within this rank's epoch, from 0
  const std::vector<int64_t>& row_ids() const;  // table row of each sample (snapshot order)
  // The columns in LoaderOptions::columns' order (the table's when it is empty), read-only.
  std::span<const BatchColumn> columns() const;
  // The columns, with writable values (BatchColumn::data()).
  std::span<BatchColumn> columns();
  // The column named `name`, or null; read-only.
  const BatchColumn* column(std::string_view name) const;
  // The column named `name`, or null; its values writable.
  BatchColumn* column(std::string_view name);
  bool pinned() const;                    // tensor buffers are page-locked CUDA host memory

 private:
  friend class Loader;  // Next() makes batches
  struct Impl;
  explicit Batch(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// True when this stoke was built with the CUDA runtime (STOKE_WITH_CUDA): batch buffers are then
// page-locked (LoaderOptions::pin_memory, Batch::pinned) whenever the runtime reports a device.
bool BuiltWithCuda();

// What a loader has done since it was opened (Loader::stats).
struct LoaderStats {
  int64_t batches = 0;                // batches delivered
  int64_t samples = 0;                // samples delivered
  int64_t samples_skipped = 0;        // samples left out (on_error=skip)
  int64_t bytes_read = 0;             // bytes fetched from storage
  int64_t sample_bytes = 0;           // tensor bytes delivered (after decompression, before transforms)
  // Tensor cells read by decoding their column chunk through the Parquet reader rather than as one
  // page read: rows of other writers' dictionary-encoded or V2 pages (see SampleIndex). 0 for
  // stoke's own files and for other writers' PLAIN pages.
  int64_t cells_decoded = 0;
  // Pages and column chunks of array and binary columns (other writers' tensors, .npy cells and
  // images, many rows a page) decoded into the loader's caches. More than the pages a run's rows lie
  // in where a cache let a page go before its last row was read: a global shuffle over more pages
  // than the cache holds (docs/architecture.md, "Block shuffle over pages and row groups").
  int64_t pages_decoded = 0;
  // Reads done at once by the loader's producer and consumer threads instead of through the fetcher:
  // pages of uncompressed samples that the page cache held (of any size out of a mapping, else below
  // 64 KiB), with the default backend (kAuto) and without O_DIRECT, or (out of mappings) from a read
  // cache's entries. 0 with the io_uring or pread backend on local files.
  int64_t reads_at_once = 0;
  // Of reads_at_once, those copied out of a read-only mapping of the data file, with no system call:
  // pages the page cache held, of local files this process owns or may write (the kernel tells
  // others nothing of the page cache), or of the read cache's entries for an object store read
  // through `cache_dir`. docs/architecture.md, "Reads out of mappings".
  int64_t reads_mapped = 0;
  double wall_seconds = 0;            // since the first Next() of the loader
  double wait_seconds = 0;            // time Next() blocked waiting for data
  double samples_per_second = 0;     // samples / wall_seconds
  double mb_per_second = 0;           // bytes_read / wall, 10^6 bytes
  double wait_share = 0;              // wait_seconds / wall_seconds
  // Busy seconds per stage (summed over threads): "fetch" (reads, from submission to completion,
  // overlapping), "decode", "transform", "collate", "wait".
  std::vector<std::pair<std::string, double>> stage_seconds;
  // "io_uring", "io_uring+pread" (kAuto without O_DIRECT) or "pread"; "storage" on object stores.
  const char* backend = "";
  // Decode/transform workers: LoaderOptions::threads, or by default one per CPU the process may use.
  int64_t workers = 0;
  // Reading threads for cached pages (kAuto without O_DIRECT on local files: one more than the CPUs
  // the process may use, at most the queue depth) or kPread's threads; 0 otherwise.
  int64_t read_threads = 0;
};

// How well an epoch's order mixes the table (Sampler::MeasureQuality), for comparing block shuffle
// with global shuffle: block shuffle reads fewer, larger neighbourhoods at the price of less mixing.
struct ShuffleQuality {
  // Mean |a - b| over consecutive samples a, b of this rank's order, in table order positions:
  // about n / 3 for a uniform permutation of n rows, 1 for no shuffle.
  double mean_jump = 0;
  // Mean over batches of (distinct data files in the batch) / (samples in it): 1 = every sample of a
  // batch from another file.
  double distinct_file_fraction = 0;
};

// One image through a column's transforms, outside any table: what the loader does to an image cell
// (decode, then the transforms, with the random choices of (seed, epoch, row, column)). For previews
// and tests; the loader itself never copies through this.
struct TransformedImage {
  DType dtype = DType::kUInt8;  // uint8 without to_tensor; to_tensor's dtype after it (or a cast's)
  std::vector<int64_t> shape;   // [H, W, C] uint8 without to_tensor; [C, H, W] after it
  std::vector<uint8_t> data;    // C order
};
// Where an image would be in a loader, which fixes its random choices.
struct ImageTransformOptions {
  int channels = 3;               // as LoaderOptions::image_channels
  bool jpeg_dct_scaling = true;   // as LoaderOptions::jpeg_dct_scaling
  uint64_t seed = 0;              // as LoaderOptions::seed
  int64_t epoch = 0;              // the epoch (Loader::SetEpoch)
  int64_t row = 0;                // the table row (its id in the sample index's row order)
  uint32_t column = 0;            // the column's position among the loaded tensor and image columns
};
// Decodes `encoded` (a JPEG or PNG file's bytes) and runs `transforms` on it as the loader would.
// Errors as the loader's (naming `path`).
Result<TransformedImage> TransformImage(std::string_view encoded, std::string_view path,
                                        const std::vector<TransformSpec>& transforms,
                                        const ImageTransformOptions& options);

// The random choices the image transforms of `transforms` make for one image of `width` x `height`
// pixels, one entry per image transform in list order, for tests that replay them with another
// library: {"kind", and per kind: random_resized_crop / center_crop "top", "left", "height",
// "width" (the box in its input image, which for center_crop may extend outside it: padding), and
// "out_height", "out_width"; resize "out_height", "out_width"; random_horizontal_flip "flip" (0/1);
// color_jitter "brightness", "contrast" (factors; 1 when off) and "brightness_first" (0/1)}.
struct ImageTransformChoice {
  TransformSpec::Kind kind = TransformSpec::Kind::kResize;  // the transform that chose
  int64_t top = 0, left = 0, height = 0, width = 0;  // random_resized_crop, center_crop: the box in its input
  int64_t out_height = 0, out_width = 0;             // random_resized_crop, center_crop, resize: the output size
  bool flip = false;                                 // random_horizontal_flip: mirrored
  double brightness = 1, contrast = 1;               // color_jitter: the factors (1 when off)
  bool brightness_first = true;                      // color_jitter: the order applied
};
// The choices, one per image transform of `transforms` (the tensor part makes none).
Result<std::vector<ImageTransformChoice>> PlanImageTransforms(const std::vector<TransformSpec>& transforms,
                                                              int64_t width, int64_t height,
                                                              const ImageTransformOptions& options);

// A table version as batches, for one rank of a training job. Move it around by its unique_ptr;
// one consumer thread calls Next().
class Loader {
 public:
  // Opens the table version, its sample index (cached under _stoke/), the selected scalar columns and
  // the `where` filter, and positions at the start of epoch 0. Starts no I/O until the first Next().
  // Errors: InvalidArgument for bad options (naming the option), NotFound for unknown columns,
  // Corruption/IOError from the table.
  static Result<std::unique_ptr<Loader>> Open(const std::string& table_dir, LoaderOptions options);
  ~Loader();  // stops the pipeline (mid-epoch too) and waits for its threads

  // Positions at the start of `epoch` (>= 0), dropping batches prefetched for the old position.
  Status SetEpoch(int64_t epoch);
  // The next batch of this rank's epoch, or nullopt at its end. Errors (with on_error=raise) name the
  // file and row; after an error the epoch cannot continue (SetEpoch or Restore starts again).
  // Not thread-safe: one consumer thread.
  Result<std::optional<Batch>> Next();

  // A resumable position (see Sampler::State): the epoch and the count of samples of the global
  // order that all ranks together have consumed through the batches returned so far. Independent of
  // world size.
  struct State {
    int64_t epoch = 0;                  // the epoch
    int64_t consumed = 0;               // samples of its global order consumed by all ranks together
  };
  // The position after the batches returned so far (save it with a checkpoint of the model).
  State state() const;
  // Continues from `state` (from any world size): the next batch is the one after it. InvalidArgument
  // for a position outside the epoch.
  Status Restore(const State& state);

  int64_t epoch() const;                // the current epoch
  int64_t num_rows() const;             // rows of the table version that pass `where`
  int64_t samples_per_epoch() const;    // this rank's samples in the current epoch (from its start
                                        // or from the restored position), the short last batch
                                        // that drop_last drops included
  int64_t batches_per_epoch() const;    // likewise, in batches
  int64_t table_version() const;        // the version loaded
  bool index_from_cache() const;        // the sample index came from its cache under _stoke/
  LoaderStats stats() const;            // the figures so far
  // The shuffle quality of this rank's order in the current epoch (from its start, or from the
  // restored position), and what a global shuffle with the same seed and epoch would give.
  ShuffleQuality shuffle_quality() const;
  // As above for a global shuffle, for comparison.
  ShuffleQuality global_shuffle_quality() const;
  // Writes the recorded spans as Chrome trace JSON (opens in Perfetto / chrome://tracing).
  // InvalidArgument unless options.trace was set.
  Status WriteTrace(const std::string& path) const;

 private:
  class Impl;
  explicit Loader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace stoke
