// See hdf5.h. Every call into libhdf5 happens under g_library (ours): Debian's build is thread-safe
// and takes its own global lock anyway, and a build that is not would need it; raw-chunk
// decompression runs outside it.
#include "format/hdf5.h"

#include <fmt/format.h>
#include <hdf5.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "core/mutex.h"

namespace stoke {
namespace {

Mutex g_library;

// libhdf5 prints its error stack to stderr unless told not to; in a thread-safe build the setting is
// per thread.
void SilenceLibraryErrors() {
  thread_local bool silenced = false;
  if (!silenced) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    silenced = true;
  }
}

// Holds g_library for its scope and silences the error stack printing of this thread.
class SCOPED_CAPABILITY LibraryLock {
 public:
  LibraryLock() ACQUIRE(g_library) {
    g_library.Lock();
    SilenceLibraryErrors();
  }
  ~LibraryLock() RELEASE() { g_library.Unlock(); }
  LibraryLock(const LibraryLock&) = delete;
  LibraryLock& operator=(const LibraryLock&) = delete;
};

// The calling thread's libhdf5 error stack as text (outermost and innermost descriptions), cleared.
// REQUIRES: g_library held.
std::string TakeLibraryError() {
  std::vector<std::string> descs;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_DOWNWARD,
      [](unsigned, const H5E_error2_t* e, void* data) -> herr_t {
        auto* out = static_cast<std::vector<std::string>*>(data);
        if (e->desc != nullptr && *e->desc != '\0') out->emplace_back(e->desc);
        return 0;
      },
      &descs);
  H5Eclear2(H5E_DEFAULT);
  if (descs.empty()) return "libhdf5 gave no reason";
  if (descs.size() == 1 || descs.front() == descs.back()) return descs.front();
  return descs.front() + ": " + descs.back();
}

// Closes an hid_t with `close` when it goes out of scope. REQUIRES: g_library held then.
class Handle {
 public:
  Handle() = default;
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  Handle(Handle&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = H5I_INVALID_HID; }
  Handle& operator=(Handle&& o) noexcept {
    std::swap(id_, o.id_);
    std::swap(close_, o.close_);
    return *this;
  }
  ~Handle() {
    if (id_ >= 0 && close_ != nullptr) close_(id_);
  }
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_ = H5I_INVALID_HID;
  herr_t (*close_)(hid_t) = nullptr;
};

constexpr int kMaxRank = 32;  // H5S_MAX_RANK
// Larger chunks go through H5Dread (which streams them) rather than two scratch buffers of their size.
constexpr size_t kMaxRawChunkBytes = size_t{256} << 20;

// The stoke dtype of a stored element type, or why there is none.
Result<DType> DTypeOfType(hid_t type) {
  const H5T_class_t cls = H5Tget_class(type);
  const size_t size = H5Tget_size(type);
  switch (cls) {
    case H5T_INTEGER: {
      if (H5Tget_precision(type) != size * 8 || H5Tget_offset(type) != 0) {
        return Status::Unsupported(fmt::format("a {}-bit integer type padded to {} bytes", H5Tget_precision(type), size));
      }
      const bool is_signed = H5Tget_sign(type) != H5T_SGN_NONE;
      switch (size) {
        case 1: return is_signed ? DType::kInt8 : DType::kUInt8;
        case 2: return is_signed ? DType::kInt16 : DType::kUInt16;
        case 4: return is_signed ? DType::kInt32 : DType::kUInt32;
        case 8: return is_signed ? DType::kInt64 : DType::kUInt64;
        default: return Status::Unsupported(fmt::format("a {}-byte integer type", size));
      }
    }
    case H5T_FLOAT: {
      size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
      if (H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize) < 0) return Status::Unsupported("an unreadable float type");
      // IEEE 754 binary16/32/64 layouts only (h5py stores float16 as a custom float of this layout).
      if (size == 2 && spos == 15 && epos == 10 && esize == 5 && mpos == 0 && msize == 10) return DType::kFloat16;
      if (size == 4 && spos == 31 && epos == 23 && esize == 8 && mpos == 0 && msize == 23) return DType::kFloat32;
      if (size == 8 && spos == 63 && epos == 52 && esize == 11 && mpos == 0 && msize == 52) return DType::kFloat64;
      return Status::Unsupported(fmt::format("a {}-byte float type that is not IEEE 754", size));
    }
    case H5T_ENUM: {
      // h5py's bool: an enum over int8 with FALSE = 0 and TRUE = 1.
      if (size == 1 && H5Tget_nmembers(type) == 2) {
        int8_t v0 = -1, v1 = -1;
        char* n0 = H5Tget_member_name(type, 0);
        char* n1 = H5Tget_member_name(type, 1);
        const bool named = n0 != nullptr && n1 != nullptr && std::strcmp(n0, "FALSE") == 0 && std::strcmp(n1, "TRUE") == 0;
        if (n0 != nullptr) H5free_memory(n0);
        if (n1 != nullptr) H5free_memory(n1);
        if (named && H5Tget_member_value(type, 0, &v0) >= 0 && H5Tget_member_value(type, 1, &v1) >= 0 && v0 == 0 && v1 == 1) {
          return DType::kBool;
        }
      }
      return Status::Unsupported("an enum type (only h5py's bool enum is read)");
    }
    case H5T_STRING: return Status::Unsupported(H5Tis_variable_str(type) > 0 ? "variable-length strings" : "fixed-length strings");
    case H5T_COMPOUND: return Status::Unsupported("a compound type");
    case H5T_VLEN: return Status::Unsupported("a variable-length type");
    case H5T_ARRAY: return Status::Unsupported("an array type");
    case H5T_OPAQUE: return Status::Unsupported("an opaque type");
    case H5T_REFERENCE: return Status::Unsupported("a reference type");
    case H5T_BITFIELD: return Status::Unsupported("a bitfield type");
    case H5T_TIME: return Status::Unsupported("a time type");
    default: return Status::Unsupported("an unknown type class");
  }
}

// The native memory type the library converts to for `as` (ReadRows' conversions).
hid_t NativeTypeFor(DType as) {
  switch (as) {
    case DType::kInt32: return H5T_NATIVE_INT32;
    case DType::kInt64: return H5T_NATIVE_INT64;
    case DType::kFloat32: return H5T_NATIVE_FLOAT;
    case DType::kFloat64: return H5T_NATIVE_DOUBLE;
    default: return H5I_INVALID_HID;
  }
}

bool IsIntegerDType(DType d) {
  switch (d) {
    case DType::kBool:
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64:
    case DType::kUInt8:
    case DType::kUInt16:
    case DType::kUInt32:
    case DType::kUInt64: return true;
    default: return false;
  }
}

std::string FilterName(H5Z_filter_t id, const char* name) {
  switch (id) {
    case H5Z_FILTER_DEFLATE: return "deflate";
    case H5Z_FILTER_SHUFFLE: return "shuffle";
    case H5Z_FILTER_FLETCHER32: return "fletcher32";
    case H5Z_FILTER_SZIP: return "szip";
    case H5Z_FILTER_NBIT: return "nbit";
    case H5Z_FILTER_SCALEOFFSET: return "scaleoffset";
    default: return fmt::format("filter {}{}", id, name != nullptr && *name ? fmt::format(" ({})", name) : "");
  }
}

// Describes an open dataset. REQUIRES: g_library held.
Result<Hdf5Dataset> DescribeOpen(hid_t ds, const std::string& name, const std::string& path) {
  auto fail = [&](std::string_view what) {
    return Status::Corruption(fmt::format("{}: dataset '{}': {}: {}", path, name, what, TakeLibraryError()));
  };
  Hdf5Dataset d;
  d.name = name;
  Handle type(H5Dget_type(ds), H5Tclose);
  if (!type.ok()) return fail("reading its type");
  auto dtype = DTypeOfType(type.get());
  if (dtype.ok()) {
    d.dtype = *dtype;
    d.big_endian = DTypeSize(*dtype) > 1 && H5Tget_order(type.get()) == H5T_ORDER_BE;
  } else {
    d.unsupported = dtype.status().message();
  }
  Handle space(H5Dget_space(ds), H5Sclose);
  if (!space.ok()) return fail("reading its shape");
  const H5S_class_t sclass = H5Sget_simple_extent_type(space.get());
  if (sclass == H5S_NULL) {
    if (d.unsupported.empty()) d.unsupported = "an empty (null) dataspace";
    d.dtype.reset();
    return d;
  }
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0 || rank > kMaxRank) return fail("reading its rank");
  hsize_t dims[kMaxRank];
  if (rank > 0 && H5Sget_simple_extent_dims(space.get(), dims, nullptr) < 0) return fail("reading its shape");
  int64_t elements = 1;
  for (int i = 0; i < rank; ++i) {
    if (dims[i] > static_cast<hsize_t>(INT64_MAX) || __builtin_mul_overflow(elements, static_cast<int64_t>(dims[i]), &elements)) {
      return Status::Corruption(fmt::format("{}: dataset '{}': shape too large", path, name));
    }
    d.shape.push_back(static_cast<int64_t>(dims[i]));
  }
  Handle plist(H5Dget_create_plist(ds), H5Pclose);
  if (!plist.ok()) return fail("reading its creation properties");
  if (H5Pget_layout(plist.get()) == H5D_CHUNKED) {
    hsize_t chunk[kMaxRank];
    const int crank = H5Pget_chunk(plist.get(), kMaxRank, chunk);
    if (crank != rank) return fail("reading its chunk shape");
    for (int i = 0; i < crank; ++i) {
      if (chunk[i] == 0 || chunk[i] > static_cast<hsize_t>(INT64_MAX)) {
        return Status::Corruption(fmt::format("{}: dataset '{}': bad chunk shape", path, name));
      }
      d.chunk.push_back(static_cast<int64_t>(chunk[i]));
    }
  }
  const int nfilters = H5Pget_nfilters(plist.get());
  for (int i = 0; i < nfilters; ++i) {
    unsigned flags = 0, config = 0;
    size_t nvalues = 0;
    char fname[64] = {0};
    H5Z_filter_t id = H5Pget_filter2(plist.get(), static_cast<unsigned>(i), &flags, &nvalues, nullptr, sizeof(fname), fname, &config);
    if (id < 0) return fail("reading its filters");
    d.filters.push_back(FilterName(id, fname));
  }
  return d;
}

// Reads a scalar attribute's value. REQUIRES: g_library held.
Status ReadAttribute(hid_t attr, Hdf5Attribute* out, const std::string& path) {
  auto fail = [&](std::string_view what) {
    return Status::Corruption(fmt::format("{}: attribute '{}': {}: {}", path, out->name, what, TakeLibraryError()));
  };
  auto unsupported = [&](std::string_view what) {
    return Status::Unsupported(fmt::format("{}: attribute '{}' is {}; only single numbers and strings become columns",
                                           path, out->name, what));
  };
  Handle space(H5Aget_space(attr), H5Sclose);
  if (!space.ok()) return fail("reading its shape");
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  if (H5Sget_simple_extent_type(space.get()) == H5S_NULL) return unsupported("empty");
  if (n != 1) return unsupported(fmt::format("an array of {} values", n));
  Handle type(H5Aget_type(attr), H5Tclose);
  if (!type.ok()) return fail("reading its type");
  if (H5Tget_class(type.get()) == H5T_STRING) {
    out->is_string = true;
    if (H5Tis_variable_str(type.get()) > 0) {
      Handle mem(H5Tcopy(H5T_C_S1), H5Tclose);
      if (!mem.ok() || H5Tset_size(mem.get(), H5T_VARIABLE) < 0 || H5Tset_cset(mem.get(), H5Tget_cset(type.get())) < 0) {
        return fail("reading its string type");
      }
      char* value = nullptr;
      if (H5Aread(attr, mem.get(), &value) < 0) return fail("reading its value");
      if (value != nullptr) out->string_value = value;
      H5Dvlen_reclaim(mem.get(), space.get(), H5P_DEFAULT, &value);
    } else {
      const size_t size = H5Tget_size(type.get());
      if (size == 0 || size > (size_t{1} << 24)) return unsupported(fmt::format("a string of {} bytes", size));
      std::string value(size, '\0');
      Handle mem(H5Tcopy(type.get()), H5Tclose);
      if (!mem.ok() || H5Aread(attr, mem.get(), value.data()) < 0) return fail("reading its value");
      // Fixed-length strings are padded with NULs or spaces.
      const H5T_str_t pad = H5Tget_strpad(type.get());
      const size_t nul = value.find('\0');
      if (nul != std::string::npos) value.resize(nul);
      if (pad == H5T_STR_SPACEPAD) {
        while (!value.empty() && value.back() == ' ') value.pop_back();
      }
      out->string_value = std::move(value);
    }
    return Status::OK();
  }
  auto dtype = DTypeOfType(type.get());
  if (!dtype.ok()) return unsupported(dtype.status().message());
  out->dtype = *dtype;
  if (*dtype == DType::kFloat16 || *dtype == DType::kFloat32 || *dtype == DType::kFloat64) {
    if (H5Aread(attr, H5T_NATIVE_DOUBLE, &out->float_value) < 0) return fail("reading its value");
  } else if (*dtype == DType::kBool) {
    uint8_t v = 0;
    Handle mem(H5Tcopy(type.get()), H5Tclose);
    if (!mem.ok() || H5Aread(attr, mem.get(), &v) < 0) return fail("reading its value");
    out->int_value = v != 0;
  } else if (*dtype == DType::kUInt64) {
    uint64_t v = 0;
    if (H5Aread(attr, H5T_NATIVE_UINT64, &v) < 0) return fail("reading its value");
    if (v > static_cast<uint64_t>(INT64_MAX)) return unsupported(fmt::format("the unsigned value {}, above 2^63-1", v));
    out->int_value = static_cast<int64_t>(v);
  } else {
    if (H5Aread(attr, H5T_NATIVE_INT64, &out->int_value) < 0) return fail("reading its value");
  }
  return Status::OK();
}

// HDF5's shuffle filter stores byte b of element i at b * n + i; this puts it back.
void Unshuffle(const uint8_t* in, size_t size, size_t element, uint8_t* out) {
  const size_t n = size / element;
  for (size_t b = 0; b < element; ++b) {
    const uint8_t* src = in + b * n;
    for (size_t i = 0; i < n; ++i) out[i * element + b] = src[i];
  }
  std::memcpy(out + n * element, in + n * element, size - n * element);  // a trailing partial element, as stored
}

// Copies the part of a decoded chunk (origin `corigin`, shape `cshape`, C order) that lies inside the
// request (rows [first, first + count) along axis 0, whole extents `dims` along the others) into
// `dst` (the request, C order). `esize` bytes per element.
void CopyChunkPart(const uint8_t* chunk, const std::vector<int64_t>& corigin, const std::vector<int64_t>& cshape,
                   const std::vector<int64_t>& dims, int64_t first, int64_t count, size_t esize, uint8_t* dst) {
  const size_t rank = dims.size();
  // Per axis: the overlap [lo, hi) in dataset coordinates.
  std::vector<int64_t> lo(rank), hi(rank);
  for (size_t a = 0; a < rank; ++a) {
    const int64_t req_lo = a == 0 ? first : 0, req_hi = a == 0 ? first + count : dims[a];
    lo[a] = std::max(corigin[a], req_lo);
    hi[a] = std::min(corigin[a] + cshape[a], req_hi);
    if (lo[a] >= hi[a]) return;
  }
  // Strides (elements) of the chunk and of the request.
  std::vector<int64_t> cstride(rank), dstride(rank);
  int64_t cs = 1, ds = 1;
  for (size_t a = rank; a-- > 0;) {
    cstride[a] = cs;
    dstride[a] = ds;
    cs *= cshape[a];
    ds *= a == 0 ? count : dims[a];
  }
  const size_t run = static_cast<size_t>(hi[rank - 1] - lo[rank - 1]) * esize;
  std::vector<int64_t> at(lo.begin(), lo.end());  // the current position; the last axis is copied as one run
  while (true) {
    int64_t coff = 0, doff = 0;
    for (size_t a = 0; a < rank; ++a) {
      coff += (at[a] - corigin[a]) * cstride[a];
      doff += (at[a] - (a == 0 ? first : 0)) * dstride[a];
    }
    std::memcpy(dst + static_cast<size_t>(doff) * esize, chunk + static_cast<size_t>(coff) * esize, run);
    size_t a = rank - 1;
    while (a-- > 0) {
      if (++at[a] < hi[a]) break;
      at[a] = lo[a];
    }
    if (a == static_cast<size_t>(-1)) return;
  }
}

}  // namespace

int64_t Hdf5Dataset::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool Hdf5LibraryIsThreadSafe() {
  LibraryLock lock;
  hbool_t ts = false;
  return H5is_library_threadsafe(&ts) >= 0 && ts;
}

struct Hdf5File::OpenDataset {
  Handle dataset;
  Handle file_space;
  Handle raw_type;  // the stored type with little-endian byte order
  Hdf5Dataset info;
  // Raw chunk reads: the filters' positions in the pipeline (-1: absent).
  bool raw_chunks = false;
  int shuffle_at = -1, deflate_at = -1;
};

Hdf5File::Hdf5File(std::string path, int64_t id, Hdf5ReadOptions options)
    : path_(std::move(path)), id_(id), options_(options) {}

Hdf5File::~Hdf5File() {
  LibraryLock lock;
  open_.clear();
  if (id_ >= 0) H5Fclose(static_cast<hid_t>(id_));
}

Result<std::unique_ptr<Hdf5File>> Hdf5File::Open(const std::string& path, Hdf5ReadOptions options) {
  LibraryLock lock;
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (!fapl.ok()) return Status::Internal(fmt::format("{}: {}", path, TakeLibraryError()));
  // File systems without locks (some network mounts) would otherwise refuse every open.
  H5Pset_file_locking(fapl.get(), true, /*ignore_when_disabled=*/true);
  const hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get());
  if (id < 0) {
    return Status::InvalidArgument(fmt::format("{}: not a readable HDF5 file: {}", path, TakeLibraryError()));
  }
  return std::unique_ptr<Hdf5File>(new Hdf5File(path, id, options));
}

Result<std::vector<Hdf5Dataset>> Hdf5File::ListDatasets() {
  std::vector<std::string> names;
  {
    LibraryLock lock;
    auto visit = [](hid_t, const char* name, const H5O_info_t* info, void* data) -> herr_t {
      if (info->type == H5O_TYPE_DATASET) static_cast<std::vector<std::string>*>(data)->emplace_back(name);
      return 0;
    };
    if (H5Ovisit2(static_cast<hid_t>(id_), H5_INDEX_NAME, H5_ITER_INC, visit, &names, H5O_INFO_BASIC) < 0) {
      return Status::Corruption(fmt::format("{}: listing its datasets: {}", path_, TakeLibraryError()));
    }
  }
  std::sort(names.begin(), names.end());
  std::vector<Hdf5Dataset> out;
  for (const auto& n : names) {
    STOKE_ASSIGN_OR_RETURN(Hdf5Dataset d, Describe(n));
    out.push_back(std::move(d));
  }
  return out;
}

Result<Hdf5File::OpenDataset*> Hdf5File::Dataset(const std::string& name) {
  auto it = open_.find(name);
  if (it != open_.end()) return it->second.get();
  LibraryLock lock;
  // H5Dopen2 on a missing name fails deep in the library; ask first, so that the message is plain.
  // H5LTpath_valid's approach: every link along the path must exist.
  std::string prefix;
  size_t pos = 0;
  while (true) {
    const size_t slash = name.find('/', pos);
    prefix = name.substr(0, slash);
    if (prefix.empty() || H5Lexists(static_cast<hid_t>(id_), prefix.c_str(), H5P_DEFAULT) <= 0) {
      H5Eclear2(H5E_DEFAULT);
      return Status::NotFound(fmt::format("{}: no dataset '{}'", path_, name));
    }
    if (slash == std::string::npos) break;
    pos = slash + 1;
  }
  auto d = std::make_unique<OpenDataset>();
  d->dataset = Handle(H5Dopen2(static_cast<hid_t>(id_), name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!d->dataset.ok()) {
    return Status::InvalidArgument(fmt::format("{}: '{}' is not a readable dataset: {}", path_, name, TakeLibraryError()));
  }
  STOKE_ASSIGN_OR_RETURN(d->info, DescribeOpen(d->dataset.get(), name, path_));
  d->file_space = Handle(H5Dget_space(d->dataset.get()), H5Sclose);
  if (!d->file_space.ok()) {
    return Status::Corruption(fmt::format("{}: dataset '{}': reading its shape: {}", path_, name, TakeLibraryError()));
  }
  if (d->info.dtype) {
    Handle stored(H5Dget_type(d->dataset.get()), H5Tclose);
    d->raw_type = Handle(H5Tcopy(stored.get()), H5Tclose);
    if (!d->raw_type.ok() ||
        (DTypeSize(*d->info.dtype) > 1 && H5Tget_class(stored.get()) != H5T_ENUM && H5Tset_order(d->raw_type.get(), H5T_ORDER_LE) < 0)) {
      return Status::Internal(fmt::format("{}: dataset '{}': {}", path_, name, TakeLibraryError()));
    }
    // Raw chunks: a chunked dataset whose filters are only shuffle and deflate, stored little-endian.
    if (options_.decompress_outside_library && !d->info.chunk.empty() && !d->info.big_endian) {
      bool only_known = true;
      for (size_t i = 0; i < d->info.filters.size(); ++i) {
        if (d->info.filters[i] == "shuffle" && d->shuffle_at < 0) d->shuffle_at = static_cast<int>(i);
        else if (d->info.filters[i] == "deflate" && d->deflate_at < 0) d->deflate_at = static_cast<int>(i);
        else only_known = false;
      }
      d->raw_chunks = only_known && !d->info.filters.empty();
    }
  }
  return open_.emplace(name, std::move(d)).first->second.get();
}

Result<Hdf5Dataset> Hdf5File::Describe(const std::string& dataset) {
  STOKE_ASSIGN_OR_RETURN(OpenDataset * d, Dataset(dataset));
  return d->info;
}

Result<std::vector<Hdf5Attribute>> Hdf5File::RootAttributes() {
  LibraryLock lock;
  Handle root(H5Gopen2(static_cast<hid_t>(id_), "/", H5P_DEFAULT), H5Gclose);
  if (!root.ok()) return Status::Corruption(fmt::format("{}: opening the root group: {}", path_, TakeLibraryError()));
  H5O_info_t info;
  if (H5Oget_info2(root.get(), &info, H5O_INFO_NUM_ATTRS) < 0) {
    return Status::Corruption(fmt::format("{}: reading the root group's attributes: {}", path_, TakeLibraryError()));
  }
  std::vector<Hdf5Attribute> out;
  for (hsize_t i = 0; i < info.num_attrs; ++i) {
    Handle attr(H5Aopen_by_idx(root.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    if (!attr.ok()) return Status::Corruption(fmt::format("{}: opening attribute {}: {}", path_, i, TakeLibraryError()));
    Hdf5Attribute a;
    const ssize_t len = H5Aget_name(attr.get(), 0, nullptr);
    if (len < 0 || len > 65535) return Status::Corruption(fmt::format("{}: attribute {}: bad name: {}", path_, i, TakeLibraryError()));
    a.name.resize(static_cast<size_t>(len) + 1);
    H5Aget_name(attr.get(), a.name.size(), a.name.data());
    a.name.resize(static_cast<size_t>(len));
    STOKE_RETURN_IF_ERROR(ReadAttribute(attr.get(), &a, path_));
    out.push_back(std::move(a));
  }
  std::sort(out.begin(), out.end(), [](const Hdf5Attribute& x, const Hdf5Attribute& y) { return x.name < y.name; });
  return out;
}

Status Hdf5File::ReadRows(const std::string& dataset, int64_t first, int64_t count, DType as, MutableByteView dst) {
  STOKE_ASSIGN_OR_RETURN(OpenDataset * d, Dataset(dataset));
  const Hdf5Dataset& info = d->info;
  auto where = [&] { return fmt::format("{}: dataset '{}'", path_, dataset); };
  if (!info.dtype) return Status::Unsupported(fmt::format("{}: element type: {}", where(), info.unsupported));
  const DType stored = *info.dtype;
  const bool raw = as == stored;
  if (!raw) {
    const bool widen_int = IsIntegerDType(stored) && stored != DType::kBool && (as == DType::kInt32 || as == DType::kInt64);
    const bool widen_float = !IsIntegerDType(stored) && (as == DType::kFloat32 || as == DType::kFloat64);
    if (!widen_int && !widen_float) {
      return Status::InvalidArgument(fmt::format("{}: cannot read {} elements as {}", where(), DTypeName(stored), DTypeName(as)));
    }
  }
  const size_t rank = info.shape.size();
  if (rank == 0 ? (first != 0 || count != 1) : (first < 0 || count < 0 || first > info.shape[0] - count)) {
    return Status::InvalidArgument(fmt::format("{}: rows [{}, {}) outside its {} rows", where(), first, first + count,
                                               rank == 0 ? 1 : info.shape[0]));
  }
  int64_t row_elements = 1;
  for (size_t a = 1; a < rank; ++a) row_elements *= info.shape[a];
  const uint64_t want = static_cast<uint64_t>(count) * static_cast<uint64_t>(row_elements) * DTypeSize(as);
  if (dst.size() != want) {
    return Status::InvalidArgument(fmt::format("{}: {} rows need a buffer of {} bytes, got {}", where(), count, want, dst.size()));
  }
  if (count == 0) return Status::OK();
  if (raw && d->raw_chunks && rank > 0) {
    bool done = false;
    STOKE_RETURN_IF_ERROR(ReadRawChunks(*d, first, count, dst, &done));
    if (done) return Status::OK();
  }
  LibraryLock lock;
  Handle mem_space;
  if (rank == 0) {
    mem_space = Handle(H5Screate(H5S_SCALAR), H5Sclose);
    if (H5Sselect_all(d->file_space.get()) < 0) return Status::Internal(fmt::format("{}: {}", where(), TakeLibraryError()));
  } else {
    hsize_t start[kMaxRank] = {0}, block[kMaxRank];
    start[0] = static_cast<hsize_t>(first);
    block[0] = static_cast<hsize_t>(count);
    for (size_t a = 1; a < rank; ++a) block[a] = static_cast<hsize_t>(info.shape[a]);
    if (H5Sselect_hyperslab(d->file_space.get(), H5S_SELECT_SET, start, nullptr, block, nullptr) < 0) {
      return Status::Internal(fmt::format("{}: selecting rows: {}", where(), TakeLibraryError()));
    }
    mem_space = Handle(H5Screate_simple(static_cast<int>(rank), block, nullptr), H5Sclose);
  }
  if (!mem_space.ok()) return Status::Internal(fmt::format("{}: {}", where(), TakeLibraryError()));
  const hid_t mem_type = raw ? d->raw_type.get() : NativeTypeFor(as);
  if (H5Dread(d->dataset.get(), mem_type, mem_space.get(), d->file_space.get(), H5P_DEFAULT, dst.data()) < 0) {
    return Status::Corruption(fmt::format("{}: reading rows [{}, {}): {}", where(), first, first + count, TakeLibraryError()));
  }
  return Status::OK();
}

Result<ByteView> Hdf5File::UndoFilters(const OpenDataset& d, uint32_t filter_mask, size_t chunk_bytes, int64_t row) {
  const Hdf5Dataset& info = d.info;
  const size_t esize = DTypeSize(*info.dtype);
  auto where = [&] { return fmt::format("{}: dataset '{}'", path_, info.name); };
  // Undo the filters in reverse pipeline order (a set bit in filter_mask: that filter was skipped).
  // Each filter reads `data` (one of the two scratch buffers) and writes the other.
  ByteView data = raw_.view();
  AlignedBuffer* spare = &inflated_;
  auto applied = [&](int at_pos) { return at_pos >= 0 && (filter_mask & (1u << at_pos)) == 0; };
  const int last = static_cast<int>(info.filters.size()) - 1;
  for (int f = last; f >= 0; --f) {
    if (f == d.deflate_at && applied(f)) {
      spare->Resize(chunk_bytes);
      uLongf out_len = static_cast<uLongf>(chunk_bytes);
      const int rc = uncompress(spare->data(), &out_len, data.data(), static_cast<uLong>(data.size()));
      if (rc != Z_OK || out_len != chunk_bytes) {
        return Status::Corruption(fmt::format("{}: the chunk at row {} does not inflate to {} bytes (zlib: {})", where(),
                                              row, chunk_bytes, rc == Z_OK ? "short" : zError(rc)));
      }
      data = spare->view();
      spare = spare == &inflated_ ? &raw_ : &inflated_;
    } else if (f == d.shuffle_at && applied(f)) {
      if (data.size() != chunk_bytes) {
        return Status::Corruption(fmt::format("{}: the chunk at row {} holds {} bytes, not {}", where(), row, data.size(),
                                              chunk_bytes));
      }
      spare->Resize(chunk_bytes);
      Unshuffle(data.data(), chunk_bytes, esize, spare->data());
      data = spare->view();
      spare = spare == &inflated_ ? &raw_ : &inflated_;
    }
  }
  if (data.size() != chunk_bytes) {
    return Status::Corruption(fmt::format("{}: the chunk at row {} holds {} bytes, not {}", where(), row, data.size(),
                                          chunk_bytes));
  }
  return data;
}

Status Hdf5File::ReadRawChunks(OpenDataset& d, int64_t first, int64_t count, MutableByteView dst, bool* done) {
  const Hdf5Dataset& info = d.info;
  const size_t rank = info.shape.size();
  const size_t esize = DTypeSize(*info.dtype);
  const std::vector<int64_t>& cshape = info.chunk;
  int64_t chunk_elements = 1;
  for (int64_t c : cshape) {
    if (__builtin_mul_overflow(chunk_elements, c, &chunk_elements)) return Status::OK();  // the library's path decides
  }
  const size_t chunk_bytes = static_cast<size_t>(chunk_elements) * esize;
  if (chunk_bytes > kMaxRawChunkBytes) return Status::OK();  // (HDF5 itself caps chunks at 4 GiB)
  auto where = [&] { return fmt::format("{}: dataset '{}'", path_, info.name); };
  // The chunk grid positions covering the request: rows [first, first + count) along axis 0, all of
  // the other axes.
  std::vector<int64_t> lo(rank), hi(rank);  // chunk indices per axis, [lo, hi)
  for (size_t a = 0; a < rank; ++a) {
    const int64_t a_lo = a == 0 ? first : 0, a_hi = a == 0 ? first + count : info.shape[a];
    lo[a] = a_lo / cshape[a];
    hi[a] = (a_hi + cshape[a] - 1) / cshape[a];
    if (lo[a] >= hi[a]) {
      *done = true;  // an empty extent: nothing to read
      return Status::OK();
    }
  }
  std::vector<int64_t> at(lo);
  std::vector<int64_t> origin(rank);
  while (true) {
    hsize_t offset[kMaxRank];
    for (size_t a = 0; a < rank; ++a) {
      origin[a] = at[a] * cshape[a];
      offset[a] = static_cast<hsize_t>(origin[a]);
    }
    uint32_t filter_mask = 0;
    {
      LibraryLock lock;
      hsize_t stored = 0;
      // A chunk never written has no storage: its elements are the fill value, which only the
      // library knows. Read the whole request through it then.
      if (H5Dget_chunk_storage_size(d.dataset.get(), offset, &stored) < 0 || stored == 0) {
        H5Eclear2(H5E_DEFAULT);
        return Status::OK();
      }
      // Deflate grows incompressible data by well under 1 %; anything larger is a damaged index.
      if (stored > chunk_bytes + chunk_bytes / 8 + 4096) {
        return Status::Corruption(fmt::format("{}: chunk at row {} stores {} bytes for a {}-byte chunk", where(), origin[0],
                                              stored, chunk_bytes));
      }
      raw_.Resize(static_cast<size_t>(stored));
      if (H5Dread_chunk(d.dataset.get(), H5P_DEFAULT, offset, &filter_mask, raw_.data()) < 0) {
        return Status::Corruption(fmt::format("{}: reading the chunk at row {}: {}", where(), origin[0], TakeLibraryError()));
      }
    }
    STOKE_ASSIGN_OR_RETURN(ByteView data, UndoFilters(d, filter_mask, chunk_bytes, origin[0]));
    CopyChunkPart(data.data(), origin, cshape, info.shape, first, count, esize, dst.data());
    // The next chunk position, last axis fastest.
    size_t a = rank;
    while (a-- > 0) {
      if (++at[a] < hi[a]) break;
      at[a] = lo[a];
    }
    if (a == static_cast<size_t>(-1)) break;
  }
  *done = true;
  return Status::OK();
}

}  // namespace stoke
