// Sources of samples for `stoke ingest` and `stoke convert`: one interface over directories of
// .npy/.npz files, HDF5 files and JPEG/PNG images. Planning a source lists its files, decides the
// table's columns and numbers its items (an item is one sample: a source file and the sample's
// position in it); a reader fills the source's columns for a run of items, one row group at a time,
// so that each kind reads its own way (HDF5 a hyperslab of rows at once, images and .npy on object
// stores many files in flight). The writer (source_writer.h) and the table ingest work on any source.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "format/parquet_column.h"
#include "format/parquet_writer.h"
#include "stoke/source_format.h"
#include "io/storage.h"

namespace stoke {

class ObjectStorage;

// The kind a file name says by its extension, in any case: .npy, .npz, .h5/.hdf5, .jpg/.jpeg/.png.
std::optional<SourceFormat> SourceFormatOfFileName(std::string_view name);

// One sample of a source: file `file` (an index into SourceSet::files), sample `index` within it
// (0 for files of one sample).
struct SourceItem {
  uint32_t file = 0;
  int64_t index = 0;
};

// One labels column: its Parquet type and its cell per source file (a file's samples share it).
struct LabelColumn {
  ColumnSpec spec;
  std::vector<std::string> cells;  // by source file index; "" = null
};

// What planning is asked for. The options of every kind, each used by its kind only.
struct SourceOptions {
  std::string source;                     // a directory or a single file; a local path or a URI
  std::string labels_csv;                 // optional CSV with a `file` column (the file's name relative to
                                          // the source directory), joined on it
  SourceFormat format = SourceFormat::kAuto;  // kAuto detects the kind from the file names
  std::string npy_column = "data";        // .npy: the tensor column's name
  std::vector<std::string> datasets;      // HDF5: the datasets to read (empty: all of them)
  Hdf5Samples hdf5_samples = Hdf5Samples::kAuto;  // HDF5 (docs/format.md, "HDF5 sources")
  std::vector<int64_t> decode_images;     // images: {} encoded bytes, or {height, width} (IngestOptions)
  size_t threads = 0;                     // planning threads for sources that open every file; 0 = 8
  // Adds the columns `source_location` and `source_version` (ingest: where each row came from, and which
  // version of that file; see SourceSet::FileLocation and FileVersion).
  bool record_locations = false;
};

// The planning options of a tool's options (IngestOptions, ConvertOptions: the same field names).
template <typename ToolOptions>
SourceOptions SourceOptionsOf(const ToolOptions& o) {
  SourceOptions so;
  so.source = o.source_dir;
  so.labels_csv = o.labels_csv;
  so.format = o.format;
  so.npy_column = o.tensor_column;
  so.datasets = o.datasets;
  so.hdf5_samples = o.hdf5_samples;
  so.decode_images = o.decode_images;
  so.threads = o.threads;
  return so;
}

class SourceReader;

// The columns naming where a row came from (SourceOptions::record_locations).
inline constexpr char kSourceLocationColumn[] = "source_location";
inline constexpr char kSourceVersionColumn[] = "source_version";

// A planned source: where it is, its items in order, and the columns of the rows they become.
struct SourceSet {
  SourceFormat kind = SourceFormat::kNpy;  // the kind planned: never kAuto
  std::shared_ptr<Storage> storage;       // where the sources are (local, Azure Blob, S3)
  std::string root;                       // the source directory's path in `storage`
  std::string location_root;              // the source directory as CanonicalLocation spells it
  std::vector<DirEntry> files;            // sorted by name; names relative to root ("cat/0001.jpg")
  // Items of file f are [item_starts[f], item_starts[f + 1]): sample i of file f is item
  // item_starts[f] + i. item_starts.size() == files.size() + 1.
  std::vector<int64_t> item_starts;
  std::vector<LabelColumn> labels;
  // id, file, [source_location, source_version], [index], labels..., the source's own columns (scalars first,
  // then tensors and blobs).
  std::vector<ColumnSpec> columns;
  bool has_locations = false;             // columns[2] and [3] are `source_location` and `source_version`
  bool has_index = false;                 // columns[index_column()] is `index` (files of several samples)
  size_t first_source_column = 0;         // index in `columns` of the first of the source's own columns
  int64_t sample_bytes = 0;               // bytes per row, for row group and file sizes (mean for blobs)
  // Key-value metadata the data files' footers carry and the Delta configuration records, besides
  // stoke.tensors and stoke.blobs (e.g. stoke.images, stoke.classes).
  std::map<std::string, std::string> metadata;
  // ImageFolder: the class names, label i = classes[i] (also in metadata under stoke.classes).
  std::vector<std::string> classes;
  std::shared_ptr<const SourceReader> reader;

  // Frees what the plan holds per source file once its rows are written: the listing, the item
  // numbering and the labels' cells (about 230 bytes a file: 150 MB at 650,000 files), keeping the
  // columns, metadata and classes. Only planning again gives the items back (num_items() is then 0).
  void ReleaseItems();
  bool items_released = false;            // ReleaseItems was called

  int64_t num_items() const { return item_starts.back(); }
  SourceItem item(int64_t k) const;       // REQUIRES: 0 <= k < num_items()
  size_t index_column() const { return has_locations ? 4 : 2; }
  size_t first_label_column() const { return index_column() + (has_index ? 1 : 0); }
  std::string FilePath(uint32_t file) const;  // the file's path in `storage`
  // Where file `file` is, as CanonicalLocation spells it ("/data/a/volume_000000.npy",
  // "az://container/a/volume_000000.npy"): with FileVersion, what identifies a source file.
  std::string FileLocation(uint32_t file) const;
  // Which version of the file this is: "etag:<ETag>" on object stores, else
  // "size:<bytes>,mtime:<milliseconds since the epoch>".
  std::string FileVersion(uint32_t file) const;
};

// Reads the source's own columns (columns[first_source_column...]) of a run of items into a row group.
class SourceReader {
 public:
  virtual ~SourceReader() = default;
  // Appends the cells of `items` (in order) to `enc`: one AppendTensor per item for each tensor and
  // blob column, one SetScalars for each scalar column. Returns the source bytes read, for progress.
  // Errors name the file (and the dataset or row where it applies). Thread-safe: encoding tasks call
  // it concurrently, each with its own encoder.
  virtual Result<uint64_t> ReadRows(const SourceSet& set, std::span<const SourceItem> items, RowGroupEncoder& enc) const = 0;
};

// Plans a source: lists it (a directory, or one file), finds its kind (options.format, or the file
// names: .npy, .npz, .h5/.hdf5, .jpg/.jpeg/.png; kinds cannot be mixed), reads what sets the columns
// (the first .npy/.npz file, every HDF5 file's layout, the image directory tree) and joins the labels
// CSV. `what` names the command in errors ("convert", "ingest").
Result<SourceSet> PlanSources(const SourceOptions& options, std::string_view what);

// The same sources without label column `label` (a partition column: its values go into directory
// names and the table log, not into the data files).
SourceSet WithoutLabel(const SourceSet& sources, size_t label);

// Appending: gives each labels column the type of the table's column of the same name and position
// when every cell of the files to write (`written(file index)`) converts to it: integers to INT64 or
// DOUBLE, any cell to STRING, an empty cell where the table's column is OPTIONAL. A cell that does
// not convert is InvalidArgument naming the CSV, the file and the cell. Columns the table does not
// have (or has under another name there) are left to the schema check.
Status AdoptTableLabelTypes(const std::vector<ColumnSpec>& table, const std::string& labels_csv,
                            const std::function<bool(uint32_t)>& written, SourceSet* set);

// ---- used by the kinds' planners (source.cc, *_source.cc) ----------------------------------------

// Joins the labels CSV on the files' names (each file needs a row) and infers each column's type:
// integers INT32 (INT64 when one does not fit), other numbers DOUBLE, true/false BOOLEAN, anything
// else STRING (UTF-8 checked); an empty cell is null and makes the column OPTIONAL. `taken` holds the
// column names stoke writes itself, which the CSV may not use.
Result<std::vector<LabelColumn>> JoinLabelsCsv(const std::string& labels_csv, const std::vector<DirEntry>& files,
                                               const std::vector<std::string>& taken);

// The cells of `col` for `items`, as typed values.
ColumnValues LabelValues(const LabelColumn& col, std::span<const SourceItem> items);

// Fills set->columns (id, file, [source_location, source_version] when set->has_locations, [index], labels,
// then `own`), first_source_column and has_index, and validates the schema.
Status SetColumns(SourceSet* set, bool has_index, std::vector<ColumnSpec> own);

// Whole source files for a reader. On an object store every file costs a request of tens of
// milliseconds, so files are fetched kBatch at a time (one GET each, sizes from the listing) on a
// pool of kFetchThreads threads shared by every caller; elsewhere they are read one at a time.
// Memory: kBatch files per caller. Thread-safe.
class WholeFileReader {
 public:
  static constexpr size_t kBatch = 64;
  static constexpr size_t kFetchThreads = 32;
  explicit WholeFileReader(Storage& storage);
  ~WholeFileReader();
  // Calls use(i, bytes) for i in [0, items.size()), in order, with the whole file of items[i] (items
  // of the same file in a row share one read).
  Status ForEach(const SourceSet& set, std::span<const SourceItem> items,
                 const std::function<Status(size_t, ByteView)>& use) const;

 private:
  ObjectStorage* objects_ = nullptr;  // the storage when it is an object store
  std::unique_ptr<ThreadPool> pool_;  // object stores only
};

}  // namespace stoke
