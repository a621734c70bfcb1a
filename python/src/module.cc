// stoke._stoke: the pybind11 boundary between the C++ Loader and Python (python/stoke/table.py,
// transforms.py and loader.py hold the public API, re-exported by __init__.py; this module is their
// private engine).
//
// Contracts:
// - Errors: every stoke::Status is converted in one place, ThrowIfError (the code picks the Python
//   exception class, the message is passed through unchanged).
// - Batches are not copied: a delivered stoke::Batch moves to the heap, owned by one py::capsule that
//   is the `base` of every array of the batch. The batch buffer returns to the loader's pool when the
//   last array (or torch tensor made from one) is garbage collected. Arrays are writeable views: the
//   consumer owns the buffer until then.
// - The GIL is released while Loader::Next (and SetEpoch / Restore / the destructor, which may wait for
//   worker threads) run; afterwards pending signals are checked, so Ctrl-C raises KeyboardInterrupt.
// - One consumer: Loader::Next is not thread-safe, so the wrapper refuses concurrent calls.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "stoke/codec.h"
#include "stoke/dtype.h"
#include "stoke/ingest.h"
#include "stoke/loader.h"
#include "stoke/maintenance.h"
#include "stoke/process.h"
#include "stoke/status.h"
#include "stoke/table.h"
#include "stoke/tools.h"
#include "binding.h"

namespace stoke_python {
namespace {

// stoke.NotFoundError: both FileNotFoundError (a missing table or file) and KeyError (a missing
// column), since kNotFound covers both. Created in PYBIND11_MODULE.
PyObject* g_not_found_error = nullptr;

}  // namespace

// Raises the Python exception for `status` (REQUIRES: !status.ok()). The message is kept verbatim.
[[noreturn]] void ThrowStatus(const stoke::Status& status) {
  PyObject* type = PyExc_RuntimeError;  // kConflict, kAlreadyExists, kCancelled, kInternal
  switch (status.code()) {
    case stoke::StatusCode::kInvalidArgument: type = PyExc_ValueError; break;
    case stoke::StatusCode::kNotFound: type = g_not_found_error ? g_not_found_error : PyExc_FileNotFoundError; break;
    case stoke::StatusCode::kCorruption:
    case stoke::StatusCode::kIOError: type = PyExc_OSError; break;
    case stoke::StatusCode::kUnsupported: type = PyExc_NotImplementedError; break;
    default: break;
  }
  // Parameters whose Python keyword differs from their C++ name (RenameParameters); the others keep
  // their backquoted names.
  static constexpr std::pair<std::string_view, std::string_view> kKeywords[] = {{"table_dir", "`table`"}};
  // OSError(str) keeps the message as args[0] and str(e) == message (no errno: none travels in Status).
  PyErr_SetString(type, stoke::RenameParameters(status.message(), kKeywords).c_str());
  throw py::error_already_set();
}

void ThrowIfError(const stoke::Status& status) {
  if (!status.ok()) ThrowStatus(status);
}

// After a call that ran without the GIL: a signal that arrived meanwhile (SIGINT) raises now.
void RaisePendingSignals() {
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

namespace {

stoke::DType ParseDType(const std::string& name) { return Parsed(stoke::ParseDType(name)); }

// One transform from its dict form, e.g. {"kind": "random_flip", "axes": [0, 1], "p": 0.5}.
stoke::TransformSpec ParseTransform(const py::handle& obj) {
  if (!py::isinstance<py::dict>(obj)) {
    throw py::type_error("transforms: each entry must be a dict with a 'kind' (got " +
                         std::string(py::str(py::type::of(obj))) + ")");
  }
  auto d = py::reinterpret_borrow<py::dict>(obj);
  if (!d.contains("kind")) throw py::value_error("transforms: an entry has no 'kind'");
  const auto kind_name = d["kind"].cast<std::string>();
  using K = stoke::TransformSpec::Kind;
  stoke::TransformSpec t;
  {
    auto kind = stoke::ParseTransformKind(kind_name);
    if (!kind.ok()) throw py::value_error("transforms: " + kind.status().message());
    t.kind = *kind;
  }
  if (t.kind == K::kChannelsLast) t.axis = 0;  // the C++ default for channels_last
  if (t.kind == K::kNormalize) t.axis = stoke::TransformSpec::kChannelAxis;
  if (t.kind == K::kRandomRot90) t.axes = {0, 1};
  // A scalar mean/std stands for one value for all channels; a scalar size for both sides.
  auto doubles = [](const py::handle& v) {
    if (py::isinstance<py::float_>(v) || py::isinstance<py::int_>(v)) return std::vector<double>{v.cast<double>()};
    return v.cast<std::vector<double>>();
  };
  auto sizes = [](const py::handle& v) {
    if (py::isinstance<py::int_>(v)) return std::vector<int64_t>{v.cast<int64_t>()};
    return v.cast<std::vector<int64_t>>();
  };
  for (const auto& [key_obj, value] : d) {
    const auto key = key_obj.cast<std::string>();
    try {
      if (key == "kind") continue;
      if (key == "dtype") t.dtype = ParseDType(py::str(value));
      else if (key == "mean") t.mean = doubles(value);
      else if (key == "std") t.std = doubles(value);
      else if (key == "axis") t.axis = value.is_none() ? stoke::TransformSpec::kChannelAxis : value.cast<int>();
      else if (key == "axes") t.axes = value.is_none() ? std::vector<int>{} : value.cast<std::vector<int>>();
      else if (key == "size") t.size = sizes(value);
      else if (key == "p") t.p = value.cast<double>();
      else if (key == "scale") t.scale = value.cast<std::vector<double>>();
      else if (key == "ratio") t.ratio = value.cast<std::vector<double>>();
      else if (key == "brightness") t.brightness = value.is_none() ? std::vector<double>{} : value.cast<std::vector<double>>();
      else if (key == "contrast") t.contrast = value.is_none() ? std::vector<double>{} : value.cast<std::vector<double>>();
      else throw py::value_error("transform '" + kind_name + "': unknown key '" + key + "'");
    } catch (const py::cast_error&) {
      throw py::type_error("transform '" + kind_name + "': bad value for '" + key + "': " +
                           std::string(py::repr(value)));
    }
  }
  return t;
}

std::vector<stoke::TransformSpec> ParseTransforms(const py::list& transforms) {
  std::vector<stoke::TransformSpec> out;
  for (const auto& t : transforms) out.push_back(ParseTransform(t));
  return out;
}

}  // namespace

py::dtype NumpyDType(stoke::DType dtype) {
  switch (dtype) {
    case stoke::DType::kBool: return py::dtype::of<bool>();
    case stoke::DType::kInt8: return py::dtype::of<int8_t>();
    case stoke::DType::kInt16: return py::dtype::of<int16_t>();
    case stoke::DType::kInt32: return py::dtype::of<int32_t>();
    case stoke::DType::kInt64: return py::dtype::of<int64_t>();
    case stoke::DType::kUInt8: return py::dtype::of<uint8_t>();
    case stoke::DType::kUInt16: return py::dtype::of<uint16_t>();
    case stoke::DType::kUInt32: return py::dtype::of<uint32_t>();
    case stoke::DType::kUInt64: return py::dtype::of<uint64_t>();
    case stoke::DType::kFloat16: return py::dtype("float16");
    case stoke::DType::kFloat32: return py::dtype::of<float>();
    case stoke::DType::kFloat64: return py::dtype::of<double>();
    case stoke::DType::kBFloat16: return py::dtype::of<uint16_t>();  // same bits; marked "__bfloat16__"
  }
  throw py::value_error("unknown stoke dtype " + std::to_string(static_cast<int>(dtype)));
}

namespace {

// numpy's limit on an array's dimensions: 32 before numpy 2, 64 from it.
size_t NumpyMaxDims() {
  static const size_t max_dims = [] {
    const std::string version = py::str(py::module_::import("numpy").attr("__version__"));
    return version.rfind("1.", 0) == 0 ? size_t{32} : size_t{64};
  }();
  return max_dims;
}

}  // namespace

// A column of samples of `sample_dims` dimensions, as one array with the rows first: refused in
// words naming the column when numpy cannot hold that many dimensions (numpy's own error names none).
void CheckNumpyDims(const std::string& column, size_t sample_dims) {
  if (sample_dims + 1 > NumpyMaxDims()) {
    throw py::value_error("column '" + column + "' holds samples of " + std::to_string(sample_dims) +
                          " dimensions: a batch of them needs " + std::to_string(sample_dims + 1) +
                          ", more than this numpy's " + std::to_string(NumpyMaxDims()));
  }
}

namespace {

// A batch as {column: ndarray | list[str | None], "<column>.valid": uint8 ndarray (nullable columns
// with nulls), "__row_ids__": int64 ndarray, "__bfloat16__": [column...], "__gpu_images__": [column...]
// (transforms_on cuda: records to finish on the device), "__epoch__", "__index__"}.
py::dict BatchToDict(stoke::Batch&& batch) {
  struct Owned {
    stoke::Batch batch;
    pid_t pid;  // the process whose loader the batch's buffer goes back to
  };
  auto* owned = new Owned{std::move(batch), getpid()};
  // Destroyed with the GIL held when the last array referencing it goes; ~Batch only returns the
  // slot to the pool (a short lock), so that is fine. In a child forked after the batch was made,
  // the pool's lock may have been held by a thread that does not exist there: the child leaves
  // the batch alone (its memory is the child's copy, freed with the process).
  py::capsule base(owned, [](void* p) {
    auto* o = static_cast<Owned*>(p);
    if (o->pid == getpid()) delete o;
  });
  stoke::Batch& b = owned->batch;  // not const: the arrays are writeable views of its buffer

  py::dict out;
  py::list bfloat16_columns, gpu_image_columns;
  for (stoke::BatchColumn& c : b.columns()) {
    if (c.kind == stoke::ColumnKind::kString) {
      py::list values(c.strings.size());
      for (size_t i = 0; i < c.strings.size(); ++i) {
        if (!c.valid.empty() && c.valid[i] == 0) {
          values[i] = py::none();
          continue;
        }
        // surrogateescape: bytes that are not UTF-8 survive the round trip instead of failing the batch.
        PyObject* s = PyUnicode_DecodeUTF8(c.strings[i].data(), static_cast<Py_ssize_t>(c.strings[i].size()),
                                           "surrogateescape");
        if (s == nullptr) throw py::error_already_set();
        values[i] = py::reinterpret_steal<py::object>(s);
      }
      out[py::str(c.name)] = std::move(values);
      continue;
    }
    CheckNumpyDims(c.name, c.shape.size() - 1);  // shape: [batch, sample...]
    std::vector<py::ssize_t> shape(c.shape.begin(), c.shape.end());
    // An empty column (0 rows) may carry no buffer; numpy needs a non-null pointer to wrap.
    static const uint64_t kEmpty = 0;
    void* data = c.data() != nullptr ? c.data() : const_cast<uint64_t*>(&kEmpty);
    out[py::str(c.name)] = py::array(NumpyDType(c.dtype), shape, {}, data, base);
    if (c.dtype == stoke::DType::kBFloat16) bfloat16_columns.append(py::str(c.name));
    if (c.gpu_images) gpu_image_columns.append(py::str(c.name));
    if (!c.valid.empty()) {
      out[py::str(c.name + ".valid")] =
          py::array(py::dtype::of<uint8_t>(), {static_cast<py::ssize_t>(c.valid.size())}, {},
                    c.valid.data(), base);
    }
  }
  const auto& row_ids = b.row_ids();
  static const int64_t kNoRows = 0;
  out["__row_ids__"] = py::array(py::dtype::of<int64_t>(), {static_cast<py::ssize_t>(row_ids.size())}, {},
                                 row_ids.empty() ? &kNoRows : row_ids.data(), base);
  if (py::len(bfloat16_columns) > 0) out["__bfloat16__"] = std::move(bfloat16_columns);
  if (py::len(gpu_image_columns) > 0) out["__gpu_images__"] = std::move(gpu_image_columns);
  out["__epoch__"] = b.epoch();
  out["__index__"] = b.index();
  return out;
}

py::dict StatsToDict(const stoke::LoaderStats& s) {
  py::dict d;
  d["batches"] = s.batches;
  d["samples"] = s.samples;
  d["samples_skipped"] = s.samples_skipped;
  d["cells_decoded"] = s.cells_decoded;
  d["pages_decoded"] = s.pages_decoded;
  d["reads_at_once"] = s.reads_at_once;
  d["reads_mapped"] = s.reads_mapped;
  d["workers"] = s.workers;
  d["read_threads"] = s.read_threads;
  d["bytes_read"] = s.bytes_read;
  d["sample_bytes"] = s.sample_bytes;
  d["wall_seconds"] = s.wall_seconds;
  d["wait_seconds"] = s.wait_seconds;
  d["samples_per_second"] = s.samples_per_second;
  d["mb_per_second"] = s.mb_per_second;
  d["wait_share"] = s.wait_share;
  py::dict stages;
  for (const auto& [name, seconds] : s.stage_seconds) stages[py::str(name)] = seconds;
  d["stage_seconds"] = std::move(stages);
  d["backend"] = std::string(s.backend ? s.backend : "");
  return d;
}

py::dict QualityToDict(const stoke::ShuffleQuality& q) {
  py::dict d;
  d["mean_jump"] = q.mean_jump;
  d["distinct_file_fraction"] = q.distinct_file_fraction;
  return d;
}

// The Python-facing loader: a stoke::Loader plus the one-consumer guard. stoke::Loader is not
// thread-safe and Next runs without the GIL, so every use goes through Use(), which refuses (rather
// than waits: the waiter would hold the GIL that Next needs back) while another thread is inside.
class PyLoader {
 public:
  explicit PyLoader(std::unique_ptr<stoke::Loader> loader) : loader_(std::move(loader)) {}
  ~PyLoader() {
    // pybind11 holds a reference during every call, so no call is in flight here.
    if (!loader_) return;
    if (Forked()) {
      // The pipeline's threads stayed in the parent: the destructor would wait for them forever.
      // The child's copy of the loader is left to the end of the process.
      (void)loader_.release();
      return;
    }
    py::gil_scoped_release release;  // the destructor waits for the pipeline's threads
    loader_.reset();
  }

  // Calls f(loader) under the one-consumer guard; `what` names the call in the error.
  template <typename F>
  auto Use(const char* what, F&& f) const {
    std::unique_lock<std::mutex> guard(busy_, std::try_to_lock);
    if (!guard.owns_lock()) {
      throw std::runtime_error(std::string("Loader.") + what +
                               ": another thread is using this Loader (one consumer thread only)");
    }
    if (!loader_) throw py::value_error(std::string("Loader.") + what + ": the Loader is closed");
    if (Forked()) {
      throw std::runtime_error(std::string("Loader.") + what + ": this Loader was created in process " +
                               std::to_string(pid_) +
                               " before this process forked; its threads stayed there. Create a Loader in this process");
    }
    return f(*loader_);
  }

  std::optional<py::dict> Next() {
    auto r = Use("next", [](stoke::Loader& l) {
      py::gil_scoped_release release;
      return l.Next();
    });
    // A batch delivered together with a pending Ctrl-C is dropped (returned to the pool) here.
    RaisePendingSignals();
    if (!r.ok()) ThrowStatus(r.status());
    if (!r->has_value()) return std::nullopt;
    return BatchToDict(std::move(**r));
  }

  void SetEpoch(int64_t epoch) {
    ThrowIfError(Use("set_epoch", [&](stoke::Loader& l) {
      py::gil_scoped_release release;  // drops prefetched batches, may wait for reads in flight
      return l.SetEpoch(epoch);
    }));
  }

  void Restore(int64_t epoch, int64_t consumed) {
    ThrowIfError(Use("restore", [&](stoke::Loader& l) {
      py::gil_scoped_release release;
      return l.Restore(stoke::Loader::State{epoch, consumed});
    }));
  }

  // Stops the pipeline and waits for its threads, without the GIL. Batches already delivered stay valid.
  void Close() {
    std::unique_ptr<stoke::Loader> l;
    if (loader_ && Forked()) {
      (void)loader_.release();  // as in the destructor
      return;
    }
    Use("close", [&](stoke::Loader&) {
      l = std::move(loader_);
      return 0;
    });
    py::gil_scoped_release release;
    l.reset();
  }
  bool closed() const { return loader_ == nullptr; }

 private:
  // Whether this process is a child forked after the loader was opened.
  bool Forked() const { return getpid() != pid_; }

  pid_t pid_ = getpid();
  mutable std::unique_ptr<stoke::Loader> loader_;
  mutable std::mutex busy_;  // held by the one thread using loader_
};

std::unique_ptr<PyLoader> OpenLoader(const std::string& table_dir, std::optional<std::vector<std::string>> columns,
                                     std::optional<int64_t> version, const std::string& where, int64_t batch_size,
                                     const std::string& shuffle, int64_t shuffle_buffer, uint64_t seed, int rank,
                                     int world_size, bool drop_last, const py::list& transforms,
                                     int64_t prefetch_bytes, int threads, int queue_depth, bool direct,
                                     const std::string& backend, int64_t coalesce_bytes,
                                     int64_t remote_coalesce_bytes, int64_t remote_coalesce_gap_bytes,
                                     const std::string& cache_dir, int64_t cache_bytes, bool verify_crc,
                                     const std::string& on_error, bool pin_memory, bool trace, int image_channels,
                                     bool jpeg_dct_scaling, std::map<std::string, std::vector<int64_t>> shapes,
                                     std::map<std::string, std::vector<int64_t>> pad, std::map<std::string, double> fill,
                                     const std::string& transforms_on) {
  using O = stoke::LoaderOptions;
  O o;
  if (columns) o.columns = std::move(*columns);
  o.version = version;
  o.where = where;
  o.batch_size = batch_size;
  o.shuffle = Parsed(stoke::ParseShuffle(shuffle));
  o.shuffle_buffer = shuffle_buffer;
  o.seed = seed;
  o.rank = rank;
  o.world_size = world_size;
  o.drop_last = drop_last;
  o.transforms = ParseTransforms(transforms);
  o.prefetch_bytes = prefetch_bytes;
  o.threads = threads;
  o.queue_depth = queue_depth;
  o.direct = direct;
  o.backend = Parsed(stoke::ParseBackend(backend));
  o.coalesce_bytes = coalesce_bytes;
  o.remote_coalesce_bytes = remote_coalesce_bytes;
  o.remote_coalesce_gap_bytes = remote_coalesce_gap_bytes;
  o.cache_dir = cache_dir;
  o.cache_bytes = cache_bytes;
  o.verify_crc = verify_crc;
  o.on_error = Parsed(stoke::ParseOnError(on_error));
  o.pin_memory = pin_memory;
  o.trace = trace;
  o.image_channels = image_channels;
  o.jpeg_dct_scaling = jpeg_dct_scaling;
  o.shapes = std::move(shapes);
  o.pad = std::move(pad);
  o.fill = std::move(fill);
  o.transforms_on = Parsed(stoke::ParseTransformsOn(transforms_on));

  stoke::Result<std::unique_ptr<stoke::Loader>> r = stoke::Status::Internal("unset");
  {
    py::gil_scoped_release release;  // reads the log, the sample index and the scalar columns
    r = stoke::Loader::Open(table_dir, std::move(o));
  }
  RaisePendingSignals();
  if (!r.ok()) ThrowStatus(r.status());
  return std::make_unique<PyLoader>(std::move(*r));
}

// ---------------------------------------------------------------------------
// Images outside a table (previews and tests): one encoded image through a transform chain, and the
// random choices a chain makes for an image size.

stoke::ImageTransformOptions ImageOptions(int channels, bool jpeg_dct_scaling, uint64_t seed, int64_t epoch,
                                          int64_t row, uint32_t column) {
  stoke::ImageTransformOptions o;
  o.channels = channels;
  o.jpeg_dct_scaling = jpeg_dct_scaling;
  o.seed = seed;
  o.epoch = epoch;
  o.row = row;
  o.column = column;
  return o;
}

py::array TransformImageTool(const py::bytes& encoded, const py::list& transforms, int channels, bool jpeg_dct_scaling,
                             uint64_t seed, int64_t epoch, int64_t row, uint32_t column, const std::string& path) {
  const std::string bytes = encoded;
  const auto specs = ParseTransforms(transforms);
  const auto o = ImageOptions(channels, jpeg_dct_scaling, seed, epoch, row, column);
  auto image = std::make_unique<stoke::TransformedImage>(RunTool([&] { return stoke::TransformImage(bytes, path, specs, o); }));
  std::vector<py::ssize_t> shape(image->shape.begin(), image->shape.end());
  void* data = image->data.data();
  const stoke::DType dtype = image->dtype;
  py::capsule base(image.release(), [](void* p) { delete static_cast<stoke::TransformedImage*>(p); });
  return py::array(NumpyDType(dtype), shape, {}, data, base);
}

py::list PlanImageTransformsTool(const py::list& transforms, int64_t width, int64_t height, int channels,
                                 uint64_t seed, int64_t epoch, int64_t row, uint32_t column) {
  const auto specs = ParseTransforms(transforms);
  const auto o = ImageOptions(channels, true, seed, epoch, row, column);
  const auto choices = RunTool([&] { return stoke::PlanImageTransforms(specs, width, height, o); });
  py::list out;
  for (const auto& c : choices) {
    py::dict d;
    d["kind"] = std::string(stoke::TransformKindName(c.kind));
    using K = stoke::TransformSpec::Kind;
    switch (c.kind) {
      case K::kRandomResizedCrop:
      case K::kCenterCrop:
        d["top"] = c.top;
        d["left"] = c.left;
        d["height"] = c.height;
        d["width"] = c.width;
        d["out_height"] = c.out_height;
        d["out_width"] = c.out_width;
        break;
      case K::kResize:
        d["out_height"] = c.out_height;
        d["out_width"] = c.out_width;
        break;
      case K::kRandomHorizontalFlip:
        d["flip"] = c.flip;
        break;
      case K::kColorJitter:
        d["brightness"] = c.brightness;
        d["contrast"] = c.contrast;
        d["brightness_first"] = c.brightness_first;
        break;
      default: break;
    }
    out.append(std::move(d));
  }
  return out;
}

// The one definition of the loader's defaults: LoaderOptions'. The binding's keyword defaults,
// python/stoke (via loader_defaults()) and the CLI take them from here, and
// python/tests/test_option_defaults.py checks that all of them agree (ingest's: table_tools.cc).
const stoke::LoaderOptions kLoaderDefaults{};

py::dict LoaderDefaults() {
  const stoke::LoaderOptions& d = kLoaderDefaults;
  py::dict out;
  out["where"] = d.where;
  out["batch_size"] = d.batch_size;
  out["shuffle"] = std::string(stoke::ShuffleName(d.shuffle));
  out["shuffle_buffer"] = d.shuffle_buffer;
  out["seed"] = d.seed;
  out["rank"] = d.rank;
  out["world_size"] = d.world_size;
  out["drop_last"] = d.drop_last;
  out["prefetch_bytes"] = d.prefetch_bytes;
  out["threads"] = d.threads;
  out["queue_depth"] = d.queue_depth;
  out["direct"] = d.direct;
  out["backend"] = std::string(stoke::BackendName(d.backend));
  out["coalesce_bytes"] = d.coalesce_bytes;
  out["remote_coalesce_bytes"] = d.remote_coalesce_bytes;
  out["remote_coalesce_gap_bytes"] = d.remote_coalesce_gap_bytes;
  out["cache_dir"] = d.cache_dir;
  out["cache_bytes"] = d.cache_bytes;
  out["verify_crc"] = d.verify_crc;
  out["on_error"] = std::string(stoke::OnErrorName(d.on_error));
  out["pin_memory"] = d.pin_memory;
  out["trace"] = d.trace;
  out["image_channels"] = d.image_channels;
  out["jpeg_dct_scaling"] = d.jpeg_dct_scaling;
  out["shapes"] = py::dict();  // d.shapes: none
  out["pad"] = py::dict();     // d.pad: none
  out["fill"] = py::dict();    // d.fill: none
  return out;
}

// stoke.NotFoundError: a FileNotFoundError and a KeyError.
void RegisterNotFoundError(py::module_& m) {
  py::tuple bases = py::make_tuple(py::handle(PyExc_FileNotFoundError), py::handle(PyExc_KeyError));
  g_not_found_error = PyErr_NewExceptionWithDoc(
      "stoke.NotFoundError", "A table, file, version or column that does not exist (FileNotFoundError and KeyError).",
      bases.ptr(), nullptr);
  if (g_not_found_error == nullptr) throw py::error_already_set();
  // Also stored in the module, which keeps it alive for the life of the process.
  m.attr("NotFoundError") = py::handle(g_not_found_error);
}

// What the build has, and the test hooks.
void BindMisc(py::module_& m) {
  m.def("built_with_cuda", &stoke::BuiltWithCuda,
        "True when stoke was built with the CUDA runtime: batch buffers are page-locked when a device is present.");
  // A test hook (stoke/process.h): the n-th allocation the loader checks from now fails as if the
  // allocator had refused it (0 disarms). Production code never arms it.
  m.def("_fail_nth_allocation", &stoke::FailNthLoaderAllocation, py::arg("n"),
        "Test hook: the n-th allocation the loader's pipeline checks from now fails (0 disarms).");
  m.def("is_table", &stoke::IsTableDirectory, py::arg("path"), "True when `path` is a directory holding a Delta log.");
  m.def(
      "check_table", [](const std::string& path, std::optional<int64_t> version) { ThrowIfError(stoke::CheckTable(path, version)); },
      py::arg("path"), py::arg("version") = py::none(),
      "Raises what opening `path` for reading raises (NotFoundError where there is no table and no Parquet dataset).");
}

// One image through its transforms, as the loader would (previews and tests).
void BindImageTools(py::module_& m) {
  m.def("transform_image", &TransformImageTool, py::arg("encoded"), py::arg("transforms") = py::list(), py::kw_only(),
        py::arg("channels") = 3, py::arg("jpeg_dct_scaling") = true, py::arg("seed") = 0, py::arg("epoch") = 0,
        py::arg("row") = 0, py::arg("column") = 0, py::arg("path") = "image",
        "Decodes one encoded JPEG/PNG and runs `transforms` on it as the loader would for (seed, epoch, row, column).");
  m.def("plan_image_transforms", &PlanImageTransformsTool, py::arg("transforms"), py::arg("width"), py::arg("height"),
        py::kw_only(), py::arg("channels") = 3, py::arg("seed") = 0, py::arg("epoch") = 0, py::arg("row") = 0,
        py::arg("column") = 0, "The random choices of the image transforms for one image, as the loader makes them.");
}

// The loader and its defaults.
void BindLoader(py::module_& m) {
  m.def("loader_defaults", &LoaderDefaults, "LoaderOptions' defaults, keyed as the Loader's keywords.");
  // Every default is LoaderOptions' (loader_defaults(), which python/stoke/loader.py uses).
  py::class_<PyLoader>(m, "Loader")
      .def(py::init(&OpenLoader), py::arg("table_dir"), py::kw_only(), py::arg("columns") = py::none(),
           py::arg("version") = py::none(), py::arg("where") = kLoaderDefaults.where,
           py::arg("batch_size") = kLoaderDefaults.batch_size,
           py::arg("shuffle") = std::string(stoke::ShuffleName(kLoaderDefaults.shuffle)),
           py::arg("shuffle_buffer") = kLoaderDefaults.shuffle_buffer, py::arg("seed") = kLoaderDefaults.seed,
           py::arg("rank") = kLoaderDefaults.rank, py::arg("world_size") = kLoaderDefaults.world_size,
           py::arg("drop_last") = kLoaderDefaults.drop_last, py::arg("transforms") = py::list(),
           py::arg("prefetch_bytes") = kLoaderDefaults.prefetch_bytes, py::arg("threads") = kLoaderDefaults.threads,
           py::arg("queue_depth") = kLoaderDefaults.queue_depth, py::arg("direct") = kLoaderDefaults.direct,
           py::arg("backend") = std::string(stoke::BackendName(kLoaderDefaults.backend)),
           py::arg("coalesce_bytes") = kLoaderDefaults.coalesce_bytes,
           py::arg("remote_coalesce_bytes") = kLoaderDefaults.remote_coalesce_bytes,
           py::arg("remote_coalesce_gap_bytes") = kLoaderDefaults.remote_coalesce_gap_bytes,
           py::arg("cache_dir") = kLoaderDefaults.cache_dir, py::arg("cache_bytes") = kLoaderDefaults.cache_bytes,
           py::arg("verify_crc") = kLoaderDefaults.verify_crc,
           py::arg("on_error") = std::string(stoke::OnErrorName(kLoaderDefaults.on_error)),
           py::arg("pin_memory") = kLoaderDefaults.pin_memory, py::arg("trace") = kLoaderDefaults.trace,
           py::arg("image_channels") = kLoaderDefaults.image_channels,
           py::arg("jpeg_dct_scaling") = kLoaderDefaults.jpeg_dct_scaling,
           py::arg("shapes") = kLoaderDefaults.shapes, py::arg("pad") = kLoaderDefaults.pad,
           py::arg("fill") = kLoaderDefaults.fill,
           py::arg("transforms_on") = std::string(stoke::TransformsOnName(kLoaderDefaults.transforms_on)))
      .def("next", &PyLoader::Next, "The next batch of this rank's epoch as a dict, or None at its end.")
      .def("set_epoch", &PyLoader::SetEpoch, py::arg("epoch"))
      .def("state", [](const PyLoader& l) {
        auto s = l.Use("state", [](stoke::Loader& x) { return x.state(); });
        return py::make_tuple(s.epoch, s.consumed);
      })
      .def("restore", &PyLoader::Restore, py::arg("epoch"), py::arg("consumed"))
      .def("close", [](PyLoader& l) { if (!l.closed()) l.Close(); })
      .def_property_readonly("closed", &PyLoader::closed)
      .def_property_readonly("epoch", [](const PyLoader& l) { return l.Use("epoch", [](stoke::Loader& x) { return x.epoch(); }); })
      .def_property_readonly("num_rows", [](const PyLoader& l) { return l.Use("num_rows", [](stoke::Loader& x) { return x.num_rows(); }); })
      .def_property_readonly("samples_per_epoch", [](const PyLoader& l) { return l.Use("samples_per_epoch", [](stoke::Loader& x) { return x.samples_per_epoch(); }); })
      .def_property_readonly("batches_per_epoch", [](const PyLoader& l) { return l.Use("batches_per_epoch", [](stoke::Loader& x) { return x.batches_per_epoch(); }); })
      .def_property_readonly("table_version", [](const PyLoader& l) { return l.Use("table_version", [](stoke::Loader& x) { return x.table_version(); }); })
      .def_property_readonly("index_from_cache", [](const PyLoader& l) { return l.Use("index_from_cache", [](stoke::Loader& x) { return x.index_from_cache(); }); })
      .def("stats", [](const PyLoader& l) { return StatsToDict(l.Use("stats", [](stoke::Loader& x) { return x.stats(); })); })
      .def("shuffle_quality", [](const PyLoader& l) { return QualityToDict(l.Use("shuffle_quality", [](stoke::Loader& x) { return x.shuffle_quality(); })); })
      .def("global_shuffle_quality", [](const PyLoader& l) { return QualityToDict(l.Use("global_shuffle_quality", [](stoke::Loader& x) { return x.global_shuffle_quality(); })); })
      .def("write_trace", [](const PyLoader& l, const std::string& path) { ThrowIfError(l.Use("write_trace", [&](stoke::Loader& x) { return x.WriteTrace(path); })); },
           py::arg("path"));
}

}  // namespace
}  // namespace stoke_python

PYBIND11_MODULE(_stoke, m) {
  m.doc() = "stoke's C++ loader (private; use the `stoke` package)";
  stoke_python::RegisterNotFoundError(m);
  stoke_python::BindMisc(m);
  stoke_python::BindTableTools(m);
  stoke_python::BindImageTools(m);
  stoke_python::BindGpuImages(m);
  stoke_python::BindLoader(m);
}
