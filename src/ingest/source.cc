// See source.h: listing, kind detection, the labels join, and the column layout every kind shares.
#include "ingest/source.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <unordered_map>

#include "core/log.h"
#include "core/text.h"
#include "format/csv.h"
#include "ingest/hdf5_source.h"
#include "ingest/image_source.h"
#include "ingest/npy_source.h"
#include "ingest/parquet_source.h"
#include "io/object_storage.h"
#include "io/uri.h"
#include "stoke/table.h"
#include "table/parquet_dataset.h"

namespace stoke {
namespace {

// A labels cell is a number only in plain decimal notation, as CSV readers (pandas, DuckDB, Spark)
// take it: an optional sign, digits, for DOUBLE a fraction and exponent, or inf/nan, with spaces
// around it ("a.npy, 1") as pandas allows. Hex ("0x1A") and the like stay strings.
std::string_view Trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}
std::string_view WithoutPlus(std::string_view s) {
  s = Trimmed(s);
  return s.size() > 1 && s[0] == '+' && s[1] != '-' && s[1] != '+' ? s.substr(1) : s;
}
bool ParseInt(std::string_view s, int64_t* out) {
  s = WithoutPlus(s);
  auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}
// [+-]digits: an integer, whether or not it fits in 64 bits.
bool IsIntegerText(std::string_view s) {
  s = WithoutPlus(s);
  if (!s.empty() && s[0] == '-') s.remove_prefix(1);
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}
bool ParseDouble(std::string_view s, double* out) {
  s = WithoutPlus(s);
  auto r = std::from_chars(s.data(), s.data() + s.size(), *out, std::chars_format::general);
  // Out of range (1e999) is still a number: from_chars leaves *out alone then, strtod gives +-inf.
  if (r.ec == std::errc::result_out_of_range && r.ptr == s.data() + s.size()) {
    *out = std::strtod(std::string(s).c_str(), nullptr);
    return true;
  }
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}
bool ParseBool(std::string_view s, bool* out) {
  s = Trimmed(s);
  if (s == "true" || s == "True" || s == "TRUE") return *out = true, true;
  if (s == "false" || s == "False" || s == "FALSE") return *out = false, true;
  return false;
}

// Integers become INT32 (INT64 when one does not fit), other numbers DOUBLE, true/false BOOLEAN,
// anything else STRING. Integers of which one does not fit in INT64 stay STRING (as DOUBLE they would
// lose digits). An empty cell is null and makes the column OPTIONAL.
ColumnSpec InferLabelColumn(const std::string& name, const std::vector<std::string>& cells) {
  bool all_int = true, all_int_text = true, all_double = true, all_bool = true, any_null = false;
  int64_t lo = 0, hi = 0;
  for (const auto& c : cells) {
    if (c.empty()) {
      any_null = true;
      continue;
    }
    int64_t i;
    double d;
    bool b;
    if (all_int && ParseInt(c, &i)) {
      lo = std::min(lo, i);
      hi = std::max(hi, i);
    } else {
      all_int = false;
    }
    if (all_int_text && !IsIntegerText(c)) all_int_text = false;
    if (all_double && !ParseDouble(c, &d)) all_double = false;
    if (all_bool && !ParseBool(c, &b)) all_bool = false;
  }
  ColumnSpec spec;
  spec.name = name;
  spec.optional = any_null;
  if (all_int) {
    spec.type = (lo >= INT32_MIN && hi <= INT32_MAX) ? parquet::Type::kInt32 : parquet::Type::kInt64;
  } else if (all_double && !all_int_text) {
    spec.type = parquet::Type::kDouble;
  } else if (all_bool) {
    spec.type = parquet::Type::kBoolean;
  } else {
    spec.type = parquet::Type::kByteArray;
    spec.is_string = true;
  }
  return spec;
}

}  // namespace

std::optional<SourceFormat> SourceFormatOfFileName(std::string_view name) {
  const std::string lower = AsciiLower(name);
  auto ends = [&](std::string_view suffix) {
    return lower.size() > suffix.size() && lower.compare(lower.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends(".npy")) return SourceFormat::kNpy;
  if (ends(".npz")) return SourceFormat::kNpz;
  if (ends(".h5") || ends(".hdf5")) return SourceFormat::kHdf5;
  if (ends(".jpg") || ends(".jpeg") || ends(".png")) return SourceFormat::kImages;
  if (ends(".parquet")) return SourceFormat::kParquet;
  return std::nullopt;
}

namespace {

Status MixedKinds(std::string_view what, const std::string& where, const std::string& a, SourceFormat ka, const std::string& b,
                  SourceFormat kb) {
  return Status::InvalidArgument(fmt::format("{}: '{}' mixes source kinds: '{}' ({}) and '{}' ({}); use one kind per "
                                             "source (or `format` to pick one)",
                                             what, where, a, SourceFormatName(ka), b, SourceFormatName(kb)));
}

}  // namespace

SourceItem SourceSet::item(int64_t k) const {
  auto it = std::upper_bound(item_starts.begin(), item_starts.end(), k);
  const size_t file = static_cast<size_t>(it - item_starts.begin()) - 1;
  return SourceItem{static_cast<uint32_t>(file), k - item_starts[file]};
}

std::string SourceSet::FilePath(uint32_t file) const { return JoinPath(root, files[file].name); }

std::string SourceSet::FileLocation(uint32_t file) const { return JoinPath(location_root, files[file].name); }

std::string SourceSet::FileVersion(uint32_t file) const {
  const DirEntry& e = files[file];
  if (!e.etag.empty()) return "etag:" + e.etag;
  return fmt::format("size:{},mtime:{}", e.size, e.modification_time_ms);
}

void SourceSet::ReleaseItems() {
  std::vector<DirEntry>().swap(files);
  std::vector<int64_t>{0}.swap(item_starts);
  for (LabelColumn& l : labels) std::vector<std::string>().swap(l.cells);
  items_released = true;
}

Result<std::vector<LabelColumn>> JoinLabelsCsv(const std::string& labels_csv, const std::vector<DirEntry>& files,
                                               const std::vector<std::string>& taken) {
  std::vector<LabelColumn> labels;
  if (labels_csv.empty()) return labels;
  STOKE_ASSIGN_OR_RETURN(StorageLocation csv_at, ResolveStorageLocation(labels_csv));
  STOKE_ASSIGN_OR_RETURN(auto text, ReadFileToString(*csv_at.storage, csv_at.path));
  STOKE_ASSIGN_OR_RETURN(auto csv, ParseCsv(text, labels_csv));
  auto file_col = std::find(csv.header.begin(), csv.header.end(), "file");
  if (file_col == csv.header.end()) {
    return Status::InvalidArgument(fmt::format("{}: needs a 'file' column naming each source file", labels_csv));
  }
  const size_t fc = static_cast<size_t>(file_col - csv.header.begin());
  std::unordered_map<std::string, size_t> by_file;
  for (size_t r = 0; r < csv.rows.size(); ++r) {
    if (!by_file.emplace(csv.rows[r][fc], r).second) {
      return Status::InvalidArgument(fmt::format("{}: file '{}' is listed twice", labels_csv, csv.rows[r][fc]));
    }
  }
  std::vector<size_t> csv_row(files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    auto it = by_file.find(files[i].name);
    if (it == by_file.end()) {
      return Status::InvalidArgument(fmt::format("{}: no row for source file '{}'", labels_csv, files[i].name));
    }
    csv_row[i] = it->second;
  }
  if (by_file.size() > files.size()) {
    STOKE_LOG(kWarn, "ingest.labels_unused", "csv={} rows_without_file={}", labels_csv, by_file.size() - files.size());
  }
  for (size_t c = 0; c < csv.header.size(); ++c) {
    if (c == fc) continue;
    const std::string& name = csv.header[c];
    if (std::any_of(taken.begin(), taken.end(), [&](const std::string& t) { return EqualsIgnoringAsciiCase(t, name); })) {
      return Status::InvalidArgument(fmt::format("{}: column '{}' clashes with a column stoke writes", labels_csv, name));
    }
    LabelColumn lc;
    lc.cells.reserve(files.size());
    for (size_t i = 0; i < files.size(); ++i) lc.cells.push_back(std::move(csv.rows[csv_row[i]][c]));
    lc.spec = InferLabelColumn(name, lc.cells);
    if (lc.spec.is_string) {
      // Parquet's STRING is UTF-8; other encodings would be misread by every reader.
      for (size_t i = 0; i < lc.cells.size(); ++i) {
        if (!IsValidUtf8(lc.cells[i])) {
          return Status::InvalidArgument(fmt::format("{}: column '{}', row for '{}': not valid UTF-8 (re-save the CSV as UTF-8)",
                                                     labels_csv, name, files[i].name));
        }
      }
    }
    labels.push_back(std::move(lc));
  }
  return labels;
}

ColumnValues LabelValues(const LabelColumn& col, std::span<const SourceItem> items) {
  ColumnValues v{EmptyValuesFor(col.spec.type), {}};
  if (col.spec.optional) v.defined.reserve(items.size());
  for (const SourceItem& item : items) {
    const std::string& c = col.cells[item.file];
    if (col.spec.optional) v.defined.push_back(!c.empty());
    if (c.empty()) continue;
    std::visit(
        [&](auto& out) {
          using T = typename std::decay_t<decltype(out)>::value_type;
          if constexpr (std::is_same_v<T, std::string>) {
            out.push_back(c);
          } else if constexpr (std::is_same_v<T, uint8_t>) {
            bool b = false;
            ParseBool(c, &b);
            out.push_back(b);
          } else if constexpr (std::is_same_v<T, double>) {
            double d = 0;
            ParseDouble(c, &d);
            out.push_back(d);
          } else {
            int64_t i = 0;
            ParseInt(c, &i);
            out.push_back(static_cast<T>(i));
          }
        },
        v.values);
  }
  return v;
}

namespace {

// Whether a labels column or one of the source's own is named like a column that records locations.
bool NamesLocationColumn(const SourceSet& set, const std::vector<ColumnSpec>& own) {
  auto clashes = [](const std::string& name) {
    return EqualsIgnoringAsciiCase(name, kSourceLocationColumn) || EqualsIgnoringAsciiCase(name, kSourceVersionColumn);
  };
  return std::any_of(set.labels.begin(), set.labels.end(), [&](const LabelColumn& l) { return clashes(l.spec.name); }) ||
         std::any_of(own.begin(), own.end(), [&](const ColumnSpec& c) { return clashes(c.name); });
}

}  // namespace

Status SetColumns(SourceSet* set, bool has_index, std::vector<ColumnSpec> own) {
  if (set->has_locations && NamesLocationColumn(*set, own)) {
    // The source's own column keeps its name; rows then match by their `file` name, as in tables
    // written before stoke recorded locations.
    STOKE_LOG(kWarn, "ingest.locations_not_recorded", "source={} note=\"a column of the source is named {} or {}: rows do "
              "not record their file's location, and appends match files by name\"", set->location_root,
              kSourceLocationColumn, kSourceVersionColumn);
    set->has_locations = false;
  }
  std::vector<ColumnSpec> columns;
  columns.push_back({.name = "id", .type = parquet::Type::kInt64});
  columns.push_back({.name = "file", .type = parquet::Type::kByteArray, .is_string = true});
  if (set->has_locations) {
    // Optional: tables written before stoke recorded them gain them, null in their older rows.
    columns.push_back({.name = kSourceLocationColumn, .type = parquet::Type::kByteArray, .optional = true, .is_string = true});
    columns.push_back({.name = kSourceVersionColumn, .type = parquet::Type::kByteArray, .optional = true, .is_string = true});
  }
  if (has_index) columns.push_back({.name = "index", .type = parquet::Type::kInt64});
  for (const auto& l : set->labels) columns.push_back(l.spec);
  set->has_index = has_index;
  set->first_source_column = columns.size();
  for (auto& c : own) columns.push_back(std::move(c));
  // Names the labels CSV shares with the source's own columns: the writer would refuse them later
  // as duplicates; say where they come from.
  for (const auto& l : set->labels) {
    for (size_t c = set->first_source_column; c < columns.size(); ++c) {
      if (EqualsIgnoringAsciiCase(columns[c].name, l.spec.name)) {
        return Status::InvalidArgument(fmt::format("labels column '{}' clashes with a column of the {} source", l.spec.name,
                                                   SourceFormatName(set->kind)));
      }
    }
  }
  STOKE_RETURN_IF_ERROR(ValidateColumns(columns));
  set->columns = std::move(columns);
  return Status::OK();
}

Status AdoptTableLabelTypes(const std::vector<ColumnSpec>& table, const std::string& labels_csv,
                            const std::function<bool(uint32_t)>& written, SourceSet* set) {
  for (size_t l = 0; l < set->labels.size(); ++l) {
    const size_t column = set->first_label_column() + l;
    LabelColumn& label = set->labels[l];
    if (column >= table.size() || table[column].name != label.spec.name) continue;
    const ColumnSpec& want = table[column];
    if (want.tensor || want.blob) continue;
    const ColumnSpec& have = label.spec;
    if (want.type == have.type && want.is_string == have.is_string && (want.optional || !have.optional)) continue;
    auto converts = [&](const std::string& cell) {
      if (want.is_string) return true;
      int64_t i = 0;
      double d = 0;
      bool b = false;
      switch (want.type) {
        case parquet::Type::kInt32: return ParseInt(cell, &i) && i >= INT32_MIN && i <= INT32_MAX;
        case parquet::Type::kInt64: return ParseInt(cell, &i);
        case parquet::Type::kDouble: return ParseDouble(cell, &d);
        case parquet::Type::kBoolean: return ParseBool(cell, &b);
        default: return false;
      }
    };
    for (uint32_t f = 0; f < label.cells.size(); ++f) {
      if (!written(f)) continue;
      const std::string& cell = label.cells[f];
      if (cell.empty() ? want.optional : converts(cell)) continue;
      return Status::InvalidArgument(fmt::format(
          "{}: file '{}': {} in column '{}', which the table holds as {}{}", labels_csv, set->files[f].name,
          cell.empty() ? "an empty cell (null)" : "the cell '" + cell + "'", want.name,
          want.is_string ? "STRING" : std::string(parquet::TypeName(want.type)),
          cell.empty() ? " REQUIRED (no nulls)" : ""));
    }
    label.spec.type = want.type;
    label.spec.is_string = want.is_string;
    label.spec.optional = want.optional;
    set->columns[column] = label.spec;
  }
  return Status::OK();
}

SourceSet WithoutLabel(const SourceSet& sources, size_t label) {
  SourceSet s = sources;
  s.labels.erase(s.labels.begin() + static_cast<std::ptrdiff_t>(label));
  s.columns.erase(s.columns.begin() + static_cast<std::ptrdiff_t>(sources.first_label_column() + label));
  s.first_source_column -= 1;
  return s;
}

WholeFileReader::WholeFileReader(Storage& storage) : objects_(storage.objects()) {
  if (objects_ != nullptr) pool_ = std::make_unique<ThreadPool>(kFetchThreads);
}

WholeFileReader::~WholeFileReader() = default;

Status WholeFileReader::ForEach(const SourceSet& set, std::span<const SourceItem> items,
                                const std::function<Status(size_t, ByteView)>& use) const {
  if (objects_ == nullptr) {
    AlignedBuffer buffer;
    int64_t loaded = -1;  // the file in `buffer`
    for (size_t i = 0; i < items.size(); ++i) {
      if (static_cast<int64_t>(items[i].file) != loaded) {
        STOKE_ASSIGN_OR_RETURN(auto f, set.storage->OpenForRead(set.FilePath(items[i].file)));
        buffer.Resize(f->size());
        STOKE_RETURN_IF_ERROR(f->ReadAt(0, buffer.mutable_view()));
        loaded = items[i].file;
      }
      STOKE_RETURN_IF_ERROR(use(i, buffer.view()));
    }
    return Status::OK();
  }
  std::vector<AlignedBuffer> fetched;
  std::vector<size_t> slot(items.size());  // items[i]'s file in `fetched`
  for (size_t begin = 0; begin < items.size();) {
    // The next batch: up to kBatch distinct files.
    std::vector<uint32_t> files;
    size_t end = begin;
    for (; end < items.size(); ++end) {
      if (files.empty() || files.back() != items[end].file) {
        if (files.size() == kBatch) break;
        files.push_back(items[end].file);
      }
      slot[end] = files.size() - 1;
    }
    fetched.clear();
    fetched.resize(files.size());
    STOKE_RETURN_IF_ERROR(ParallelFor(*pool_, files.size(), [&](size_t j) -> Status {
      fetched[j].Resize(set.files[files[j]].size);
      return objects_->ReadRanges(set.FilePath(files[j]), {ByteRangeRead{0, fetched[j].mutable_view()}})[0];
    }));
    for (size_t i = begin; i < end; ++i) STOKE_RETURN_IF_ERROR(use(i, fetched[slot[i]].view()));
    begin = end;
  }
  return Status::OK();
}

// The directory of the source (`source` itself, or a single file's directory) as CanonicalLocation
// spells it; `root` is its path in the source's storage. A local file's directory is resolved on its
// own, as the file may be a symbolic link to another name.
Result<std::string> SourceRootLocation(const std::string& source, const std::string& root, bool single_file) {
  STOKE_ASSIGN_OR_RETURN(StorageUri uri, ParseStorageUri(source));
  if (uri.scheme == StorageScheme::kLocal) return CanonicalLocation(root.empty() ? "." : root);
  STOKE_ASSIGN_OR_RETURN(std::string location, CanonicalLocation(source));
  return single_file ? ParentPath(location) : location;
}

// InvalidArgument when `o` sets options of another kind than `kind` (--decode, --dataset,
// --hdf5-samples).
Status CheckKindOptions(const SourceOptions& o, std::string_view what, SourceFormat kind) {
  if (!o.decode_images.empty() && kind != SourceFormat::kImages) {
    return Status::InvalidArgument(fmt::format("{}: `decode` applies to image sources; '{}' holds {} files", what,
                                               o.source, SourceFormatName(kind)));
  }
  if (kind != SourceFormat::kHdf5 && (!o.datasets.empty() || o.hdf5_samples != Hdf5Samples::kAuto)) {
    return Status::InvalidArgument(fmt::format("{}: {} applies to HDF5 sources; '{}' holds {} files", what,
                                               o.datasets.empty() ? "`hdf5_samples`" : "`datasets`", o.source,
                                               SourceFormatName(kind)));
  }
  return Status::OK();
}

// Sorts the listing by name, checks that the names (the `file` column, a Parquet STRING) are UTF-8,
// and records where the source is when o.record_locations is set.
Status FinishListing(const SourceOptions& o, std::string_view what, bool single_file, SourceSet* set) {
  std::sort(set->files.begin(), set->files.end(), [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
  for (const DirEntry& e : set->files) {
    if (!IsValidUtf8(e.name)) {
      return Status::InvalidArgument(fmt::format("{}: source file name '{}' in '{}' is not valid UTF-8 (rename it)", what,
                                                 EscapeNonUtf8(e.name), o.source));
    }
  }
  if (!o.record_locations) return Status::OK();
  set->has_locations = true;
  STOKE_ASSIGN_OR_RETURN(set->location_root, SourceRootLocation(o.source, set->root, single_file));
  return Status::OK();
}

// Lists the source directory set->root: its kind (the files' names, or `o.format`; key=value
// directories are a Parquet dataset, other directories alone ImageFolder classes) and, unless it is
// kParquet (planned from the dataset instead), its files in set->files.
Result<SourceFormat> ListSourceDirectory(const SourceOptions& o, std::string_view what, SourceSet* set) {
  const std::optional<SourceFormat> forced =
      o.format == SourceFormat::kAuto ? std::nullopt : std::optional<SourceFormat>(o.format);
  STOKE_ASSIGN_OR_RETURN(auto entries, set->storage->List(set->root));
  std::optional<SourceFormat> kind = forced;
  std::string first_name;
  bool has_directories = false;
  bool hive_directories = false;  // key=value: a partitioned Parquet dataset
  bool parquet_files = false;     // a Parquet dataset, unless other sample files are there too
  for (auto& e : entries) {
    if (e.is_directory) {
      has_directories = has_directories || e.name.empty() || e.name[0] != '.';
      hive_directories = hive_directories || e.name.find('=') != std::string::npos;
      continue;
    }
    auto k = SourceFormatOfFileName(e.name);
    if (!k) continue;
    if (*k == SourceFormat::kParquet) {  // a labels.parquet beside .npy files is not a sample
      parquet_files = true;
      continue;
    }
    if (forced) {
      if (*k != *forced) continue;
    } else if (kind && *k != *kind) {
      return MixedKinds(what, o.source, first_name, *kind, e.name, *k);
    }
    if (!kind) first_name = e.name;
    kind = *k;
    if (*k != SourceFormat::kImages) set->files.push_back(std::move(e));
  }
  if (!kind && (hive_directories || parquet_files)) kind = SourceFormat::kParquet;
  if (kind == SourceFormat::kParquet) return *kind;
  // Images in class directories (ImageFolder) and none at the top.
  if (!kind && has_directories) kind = SourceFormat::kImages;
  if (!kind) {
    return Status::InvalidArgument(fmt::format("{}: no .npy, .npz, .h5, .hdf5, .jpg, .jpeg, .png or .parquet files in "
                                               "'{}'", what, o.source));
  }
  set->kind = *kind;
  if (set->kind == SourceFormat::kImages) {
    set->files.clear();
    STOKE_RETURN_IF_ERROR(ListImages(o, what, set));
  } else if (has_directories) {
    STOKE_LOG(kWarn, "ingest.subdirectories_not_read", "source={} kind={} note=\"{} sources are read at the top of "
              "the directory only: files in its subdirectories are not ingested\"", o.source,
              SourceFormatName(set->kind), SourceFormatName(set->kind));
  }
  if (set->files.empty()) {
    return Status::InvalidArgument(fmt::format("{}: no {} files in '{}'", what, SourceFormatName(set->kind), o.source));
  }
  return *kind;
}

Result<SourceSet> PlanSources(const SourceOptions& o, std::string_view what) {
  if (o.source.empty()) return Status::InvalidArgument(fmt::format("{}: a source directory or file is required", what));
  // A forced kind, or none: detected from the file names.
  const std::optional<SourceFormat> forced =
      o.format == SourceFormat::kAuto ? std::nullopt : std::optional<SourceFormat>(o.format);
  // A Parquet source (a table, a glob) is a dataset, not a listing of sample files.
  if (o.format == SourceFormat::kParquet ||
      (o.format == SourceFormat::kAuto && (IsGlobLocation(o.source) || IsTableDirectory(o.source)))) {
    return PlanParquetSource(o, what);
  }
  STOKE_ASSIGN_OR_RETURN(StorageLocation where, ResolveStorageLocation(o.source));
  SourceSet set;
  set.storage = std::move(where.storage);
  Storage& fs = *set.storage;

  // One file, or a directory.
  auto stat = fs.Stat(where.path);
  const bool single_file = stat.ok() && !stat->is_directory;
  if (single_file) {
    auto kind = forced ? forced : SourceFormatOfFileName(stat->name);
    if (!kind) {
      return Status::InvalidArgument(fmt::format("{}: '{}' is not a .npy, .npz, .h5, .hdf5, .jpg, .jpeg, .png or .parquet "
                                                 "file (or give `format`)", what, o.source));
    }
    set.kind = *kind;
    if (set.kind == SourceFormat::kParquet) return PlanParquetSource(o, what);
    set.root = ParentPath(where.path);
    DirEntry e = *stat;
    set.files.push_back(std::move(e));
  } else {
    set.root = where.path;
    STOKE_ASSIGN_OR_RETURN(set.kind, ListSourceDirectory(o, what, &set));
    if (set.kind == SourceFormat::kParquet) return PlanParquetSource(o, what);
  }
  STOKE_RETURN_IF_ERROR(FinishListing(o, what, single_file, &set));
  STOKE_RETURN_IF_ERROR(CheckKindOptions(o, what, set.kind));
  switch (set.kind) {
    case SourceFormat::kNpy:
    case SourceFormat::kNpz: STOKE_RETURN_IF_ERROR(PlanNpy(o, what, &set)); break;
    case SourceFormat::kHdf5: STOKE_RETURN_IF_ERROR(PlanHdf5(o, what, &set)); break;
    case SourceFormat::kImages: STOKE_RETURN_IF_ERROR(PlanImages(o, what, &set)); break;
    case SourceFormat::kParquet:
    case SourceFormat::kAuto: return Status::Internal(fmt::format("{}: the kind of '{}' was not decided", what, o.source));
  }
  return set;
}

}  // namespace stoke
