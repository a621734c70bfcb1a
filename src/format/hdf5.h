// HDF5 files through libhdf5 (Debian's libhdf5-dev: the serial build, compiled thread-safe, which
// means one global lock around every call into the library). What stoke needs of a file: its
// datasets (name, element type, shape, chunking, filters), the root group's attributes, and rows
// along axis 0 of a dataset read into a caller's buffer, so that memory stays bounded by what the
// caller asks for, never by the dataset.
//
// Chunked datasets whose filters are only shuffle and deflate (what h5py's compression="gzip",
// shuffle=True writes) can be read without the library's own decompression: the stored chunks are
// fetched raw (H5Dread_chunk, under the library's lock, I/O only) and inflated and unshuffled with
// zlib on the calling thread, so several threads decompress at once instead of queueing on the
// lock. Other layouts and filters go through H5Dread. Both give the same bytes.
//
// libhdf5 prints its error stack to stderr by default; stoke silences it on every thread that calls
// in and turns the stack into the message of the Status it returns, which names the file and the
// dataset or attribute.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "format/dtype.h"
#include "stoke/status.h"

namespace stoke {

// One dataset of a file.
struct Hdf5Dataset {
  std::string name;                  // path from the root group without the leading '/': "x", "group/y"
  std::optional<DType> dtype;        // the element type, when stoke reads it (see `unsupported`)
  std::string unsupported;           // why the element type cannot be read ("" when dtype is set)
  std::vector<int64_t> shape;        // empty for a scalar dataset
  std::vector<int64_t> chunk;        // chunk shape of a chunked dataset; empty when contiguous or compact
  std::vector<std::string> filters;  // the filter pipeline in order: "shuffle", "deflate", "fletcher32", "szip", ...
  bool big_endian = false;           // stored big-endian (read as little-endian)

  int64_t num_elements() const;      // product of shape (1 for a scalar dataset)
};

// One attribute of the root group: a number or a string. Arrays of one element count as scalars.
struct Hdf5Attribute {
  std::string name;
  bool is_string = false;
  DType dtype = DType::kInt64;       // numbers: the stored element type
  int64_t int_value = 0;             // booleans and integers (unsigned values above 2^63-1 are errors)
  double float_value = 0;            // floating-point numbers
  std::string string_value;          // strings (fixed or variable length), trailing padding removed
};

// Reading options.
struct Hdf5ReadOptions {
  // Default true: chunked datasets filtered with only shuffle and deflate are read as raw chunks and
  // decompressed on the calling thread (see the file comment). false: always H5Dread.
  bool decompress_outside_library = true;
};

// An HDF5 file open for reading. Not thread-safe: use one per thread (the library serialises calls
// across objects anyway; decompression outside the library runs in parallel).
class Hdf5File {
 public:
  // Opens a local file read-only. Errors name the file and carry libhdf5's reason ("file signature
  // not found" for a file that is not HDF5, "truncated file" for a cut one).
  static Result<std::unique_ptr<Hdf5File>> Open(const std::string& path, Hdf5ReadOptions options = {});
  ~Hdf5File();
  Hdf5File(const Hdf5File&) = delete;
  Hdf5File& operator=(const Hdf5File&) = delete;

  const std::string& path() const { return path_; }

  // Every dataset reachable from the root group through hard links, sorted by name. A dataset whose
  // element type stoke cannot read is listed with `unsupported` set, not an error: it matters only
  // when selected.
  Result<std::vector<Hdf5Dataset>> ListDatasets();
  // One dataset by name (as ListDatasets names it). NotFound naming the file and dataset.
  Result<Hdf5Dataset> Describe(const std::string& dataset);
  // The root group's attributes, sorted by name. An attribute that is not a single number or string
  // (an array, a compound, a reference) is an error naming the file and the attribute.
  Result<std::vector<Hdf5Attribute>> RootAttributes();

  // Reads elements [first, first + count) along axis 0 of `dataset` (all of a scalar dataset: first
  // 0, count 1) into `dst` as elements of type `as`, little-endian, C order. `as` is the dataset's own
  // dtype (the stored bytes, byte-swapped when big-endian) or a wider type of the same kind that the
  // library converts to (int32 and int64 for integers and booleans stored as integers, float32 and
  // float64 for floats). REQUIRES: dst.size() == count * (elements per row) * DTypeSize(as).
  Status ReadRows(const std::string& dataset, int64_t first, int64_t count, DType as, MutableByteView dst);

 private:
  struct OpenDataset;  // an open dataset and what ReadRows needs of it
  Hdf5File(std::string path, int64_t id, Hdf5ReadOptions options);
  Result<OpenDataset*> Dataset(const std::string& dataset);
  Status ReadRawChunks(OpenDataset& d, int64_t first, int64_t count, MutableByteView dst, bool* done);
  // The chunk at `row` read into raw_, with the filters filter_mask says were applied undone (in
  // raw_ or inflated_): chunk_bytes bytes, or Corruption.
  Result<ByteView> UndoFilters(const OpenDataset& d, uint32_t filter_mask, size_t chunk_bytes, int64_t row);

  std::string path_;
  int64_t id_ = -1;  // hid_t of the file
  Hdf5ReadOptions options_;
  std::map<std::string, std::unique_ptr<OpenDataset>> open_;  // datasets opened so far, kept open
  AlignedBuffer raw_, inflated_;  // scratch for raw chunk reads
};

// True when the linked libhdf5 is built thread-safe (H5is_library_threadsafe): calls from several
// threads are then safe but serialised by one lock.
bool Hdf5LibraryIsThreadSafe();

}  // namespace stoke
