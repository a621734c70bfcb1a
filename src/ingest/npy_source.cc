// See npy_source.h. Local .npy files are read straight into a reused buffer; on object stores each
// row group's files are fetched many at once (WholeFileReader) and decoded from memory.
#include "ingest/npy_source.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/text.h"
#include "format/npy.h"
#include "format/npz.h"
#include "io/object_storage.h"

namespace stoke {
namespace {

std::string ShapeString(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

// The arrays of one source file, by tensor column.
Result<std::vector<std::pair<std::string, NpyArray>>> ReadArrays(Storage& fs, const std::string& path, bool npz,
                                                                 const std::string& npy_column, AlignedBuffer reuse) {
  if (npz) return ReadNpzFile(fs, path);
  STOKE_ASSIGN_OR_RETURN(auto a, ReadNpyFile(fs, path, std::move(reuse)));
  std::vector<std::pair<std::string, NpyArray>> out;
  out.emplace_back(npy_column, std::move(a));
  return out;
}

class NpyReader final : public SourceReader {
 public:
  NpyReader(const SourceSet& set, bool npz, std::string npy_column, std::vector<std::pair<std::string, TensorSpec>> tensors)
      : npz_(npz), npy_column_(std::move(npy_column)), tensors_(std::move(tensors)), whole_files_(*set.storage) {
    remote_ = !npz && set.storage->remote();
  }

  Result<uint64_t> ReadRows(const SourceSet& set, std::span<const SourceItem> items, RowGroupEncoder& enc) const override {
    uint64_t bytes = 0;
    auto append = [&](const SourceItem& item, const std::vector<std::pair<std::string, NpyArray>>& arrays) -> Status {
      const std::string path = set.FilePath(item.file);
      // An archive's members are matched by name (numpy's NpzFile is a mapping), in any order.
      auto member_names = [&] {
        std::string names;
        for (const auto& [n, spec] : tensors_) names += (names.empty() ? "'" : ", '") + n + "'";
        return names;
      };
      // Plain references, not structured bindings: clang before 16 cannot capture those in a lambda.
      for (const auto& array : arrays) {
        const std::string& name = array.first;
        if (std::none_of(tensors_.begin(), tensors_.end(), [&](const auto& t) { return t.first == name; })) {
          return Status::InvalidArgument(fmt::format("{}: array '{}' is not in '{}' (its arrays, the table's tensor "
                                                     "columns: {})", path, name, set.files[0].name, member_names()));
        }
      }
      for (size_t t = 0; t < tensors_.size(); ++t) {
        const std::string& want_name = tensors_[t].first;
        const TensorSpec& want = tensors_[t].second;
        auto found = std::find_if(arrays.begin(), arrays.end(), [&](const auto& a) { return a.first == want_name; });
        if (found == arrays.end()) {
          return Status::InvalidArgument(fmt::format("{}: no array '{}' ('{}' has {})", path, want_name,
                                                     set.files[0].name, member_names()));
        }
        const auto& [name, arr] = *found;
        if (arr.dtype != want.dtype || arr.shape != want.shape) {
          return Status::InvalidArgument(fmt::format("{}: array '{}' is {}{}, but '{}' set the column '{}' to {}{}", path, name,
                                                     DTypeName(arr.dtype), ShapeString(arr.shape), set.files[0].name,
                                                     want_name, DTypeName(want.dtype), ShapeString(want.shape)));
        }
        STOKE_RETURN_IF_ERROR(enc.AppendTensor(set.first_source_column + t, arr.data.view()));
        bytes += arr.data.size();
      }
      return Status::OK();
    };
    if (remote_) {
      STOKE_RETURN_IF_ERROR(whole_files_.ForEach(set, items, [&](size_t i, ByteView file) -> Status {
        STOKE_ASSIGN_OR_RETURN(NpyArray a, DecodeNpy(file, set.FilePath(items[i].file)));
        std::vector<std::pair<std::string, NpyArray>> arrays;
        arrays.emplace_back(npy_column_, std::move(a));
        return append(items[i], arrays);
      }));
      return bytes;
    }
    AlignedBuffer reuse;
    for (const SourceItem& item : items) {
      STOKE_ASSIGN_OR_RETURN(auto arrays, ReadArrays(*set.storage, set.FilePath(item.file), npz_, npy_column_, std::move(reuse)));
      STOKE_RETURN_IF_ERROR(append(item, arrays));
      if (!npz_) reuse = std::move(arrays[0].second.data);
    }
    return bytes;
  }

 private:
  const bool npz_;
  const std::string npy_column_;
  const std::vector<std::pair<std::string, TensorSpec>> tensors_;  // the tensor columns, in column order
  WholeFileReader whole_files_;
  bool remote_ = false;  // .npy on an object store: fetched many at once, decoded from memory
};

}  // namespace

Status PlanNpy(const SourceOptions& o, std::string_view what, SourceSet* set) {
  const bool npz = set->kind == SourceFormat::kNpz;
  // The tensor columns come from the first file; every other file must match them.
  std::vector<std::pair<std::string, TensorSpec>> tensors;
  {
    STOKE_ASSIGN_OR_RETURN(auto first, ReadArrays(*set->storage, set->FilePath(0), npz, o.npy_column, {}));
    for (auto& [name, arr] : first) tensors.push_back({name, TensorSpec{arr.dtype, arr.shape}});
    if (tensors.empty()) return Status::InvalidArgument(fmt::format("{}: the archive holds no arrays", set->FilePath(0)));
  }
  std::vector<std::string> taken = {"id", "file"};
  for (const auto& tensor : tensors) {
    const std::string& name = tensor.first;
    if (std::any_of(taken.begin(), taken.end(), [&](const std::string& t) { return EqualsIgnoringAsciiCase(t, name); })) {
      return Status::InvalidArgument(fmt::format("{}: array '{}' would be a column named like stoke's own '{}' column "
                                                 "(rename it{})", set->FilePath(0), name, name,
                                                 npz ? " in the archives" : " with `tensor_column`"));
    }
  }
  std::vector<ColumnSpec> own;
  set->sample_bytes = 0;
  for (const auto& [name, spec] : tensors) {
    taken.push_back(name);
    own.push_back({.name = name, .type = parquet::Type::kByteArray, .tensor = spec});
    set->sample_bytes += spec.num_bytes();
  }
  STOKE_ASSIGN_OR_RETURN(set->labels, JoinLabelsCsv(o.labels_csv, set->files, taken));
  STOKE_RETURN_IF_ERROR(SetColumns(set, /*has_index=*/false, std::move(own)));
  set->item_starts.resize(set->files.size() + 1);
  for (size_t i = 0; i <= set->files.size(); ++i) set->item_starts[i] = static_cast<int64_t>(i);
  set->reader = std::make_shared<NpyReader>(*set, npz, o.npy_column, std::move(tensors));
  return Status::OK();
}

}  // namespace stoke
