// See image_source.h. Planning only lists (a header read per image would double the requests on an
// object store); each row group's images are fetched together (WholeFileReader), their headers read
// (ReadImageInfo) and their bytes stored as they are.
#include "ingest/image_source.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <set>

#include "core/buffer.h"
#include "core/log.h"
#include "core/text.h"
#include "format/image.h"
#include "format/image_resample.h"

namespace stoke {
namespace {

constexpr char kImageColumn[] = "image";
constexpr char kLabelColumn[] = "label";

// The format a file name promises: .png is PNG, .jpg/.jpeg JPEG.
ImageFormat FormatOfName(std::string_view name) {
  const size_t dot = name.rfind('.');
  const std::string ext = AsciiLower(dot == std::string_view::npos ? "" : name.substr(dot + 1));
  return ext == "png" ? ImageFormat::kPng : ImageFormat::kJpeg;
}

bool Hidden(const std::string& name) { return !name.empty() && name[0] == '.'; }

// Appends the images under `dir` (path in storage), named `prefix` + their path below it.
Status ListTree(Storage& fs, const std::string& dir, const std::string& prefix, bool forced, std::string_view what,
                std::vector<DirEntry>* out) {
  STOKE_ASSIGN_OR_RETURN(auto entries, fs.List(dir));
  for (auto& e : entries) {
    if (Hidden(e.name)) continue;
    if (e.is_directory) {
      STOKE_RETURN_IF_ERROR(ListTree(fs, JoinPath(dir, e.name), prefix + e.name + "/", forced, what, out));
      continue;
    }
    auto kind = SourceFormatOfFileName(e.name);
    if (!kind) continue;
    if (*kind != SourceFormat::kImages) {
      if (forced) continue;
      return Status::InvalidArgument(fmt::format("{}: '{}{}' ({}) in a subdirectory of the source: below its top a source "
                                                 "holds images only (ImageFolder class directories); {} files are read at "
                                                 "the top of the directory given (give '{}' as the source, or `format` "
                                                 "images to skip them)", what, prefix, e.name, SourceFormatName(*kind),
                                                 SourceFormatName(*kind), dir));
    }
    e.name = prefix + e.name;
    out->push_back(std::move(e));
  }
  return Status::OK();
}

// Decodes one image to RGB and resizes it to exactly height x width (Pillow's antialiased bilinear,
// as torchvision's Resize((height, width)) on a PIL image): the cell of a decoded image column.
Status DecodeAndResize(ByteView file, const std::string& path, int32_t height, int32_t width, AlignedBuffer* decoded,
                       ResampleScratch* scratch, std::string* cell) {
  DecodeImageOptions o;
  o.channels = 3;
  STOKE_ASSIGN_OR_RETURN(DecodedImage d, DecodeImage(file, path, o, decoded));
  cell->resize(static_cast<size_t>(height) * static_cast<size_t>(width) * 3);
  ResampleRequest r;
  r.src = decoded->data();
  r.src_width = d.width;
  r.src_height = d.height;
  r.channels = 3;
  r.x1 = d.width;
  r.y1 = d.height;
  r.clip_right = d.width;
  r.clip_bottom = d.height;
  r.out_width = r.ww = width;
  r.out_height = r.wh = height;
  ResampleBilinear(r, reinterpret_cast<uint8_t*>(cell->data()), scratch);
  return Status::OK();
}

class ImageReader final : public SourceReader {
 public:
  ImageReader(const SourceSet& set, std::set<ImageFormat> formats, std::vector<int64_t> decode_size)
      : formats_(std::move(formats)), decode_size_(std::move(decode_size)), whole_files_(*set.storage) {}

  Result<uint64_t> ReadRows(const SourceSet& set, std::span<const SourceItem> items, RowGroupEncoder& enc) const override {
    const size_t c = set.first_source_column;  // width, height, channels, image
    std::vector<int32_t> width, height, channels;
    width.reserve(items.size());
    height.reserve(items.size());
    channels.reserve(items.size());
    uint64_t bytes = 0;
    AlignedBuffer decoded;  // --decode: one image at a time, reused across the row group
    ResampleScratch scratch;
    std::string cell;
    STOKE_RETURN_IF_ERROR(whole_files_.ForEach(set, items, [&](size_t i, ByteView file) -> Status {
      const std::string path = set.FilePath(items[i].file);
      STOKE_ASSIGN_OR_RETURN(ImageInfo info, ReadImageInfo(file, path));
      if (!formats_.count(info.format)) {
        // The table's stoke.images lists the formats the file names promised.
        return Status::InvalidArgument(fmt::format("{}: holds {} data, but the source's file names promise only {}; rename "
                                                   "it to .{}", path, ImageFormatName(info.format),
                                                   ImageFormatName(*formats_.begin()),
                                                   info.format == ImageFormat::kPng ? "png" : "jpg"));
      }
      if (info.format == ImageFormat::kJpeg && info.channels == 4 && decode_size_.empty()) {
        // Stored as it is, as every other image; but no load can decode it (--decode refuses it here).
        STOKE_LOG(kWarn, "ingest.cmyk_jpeg", "file={} note=\"a CMYK JPEG: stoke decodes RGB and grayscale JPEGs only, so "
                  "loading this row fails (on_error=skip drops it); convert the file to RGB and ingest it again\"", path);
      }
      width.push_back(info.width);
      height.push_back(info.height);
      channels.push_back(info.channels);
      bytes += file.size();
      if (decode_size_.empty()) return enc.AppendTensor(c + 3, file);
      STOKE_RETURN_IF_ERROR(DecodeAndResize(file, path, static_cast<int32_t>(decode_size_[0]),
                                            static_cast<int32_t>(decode_size_[1]), &decoded, &scratch, &cell));
      return enc.AppendTensor(c + 3, AsBytes(cell));
    }));
    STOKE_RETURN_IF_ERROR(enc.SetScalars(c, ColumnValues{std::move(width), {}}));
    STOKE_RETURN_IF_ERROR(enc.SetScalars(c + 1, ColumnValues{std::move(height), {}}));
    STOKE_RETURN_IF_ERROR(enc.SetScalars(c + 2, ColumnValues{std::move(channels), {}}));
    return bytes;
  }

 private:
  const std::set<ImageFormat> formats_;  // those the file names promise
  const std::vector<int64_t> decode_size_;  // {} encoded bytes, or {height, width}
  WholeFileReader whole_files_;
};

}  // namespace

Status ListImages(const SourceOptions& o, std::string_view what, SourceSet* set) {
  Storage& fs = *set->storage;
  const bool forced = o.format == SourceFormat::kImages;
  if (!o.labels_csv.empty()) return ListTree(fs, set->root, "", forced, what, &set->files);
  STOKE_ASSIGN_OR_RETURN(auto entries, fs.List(set->root));
  size_t top_level_images = 0;
  for (const auto& e : entries) {
    if (Hidden(e.name)) continue;
    if (e.is_directory) {
      set->classes.push_back(e.name);
    } else if (SourceFormatOfFileName(e.name) == SourceFormat::kImages) {
      ++top_level_images;
    }
  }
  if (set->classes.empty()) return ListTree(fs, set->root, "", forced, what, &set->files);  // no classes: the images at the top
  std::sort(set->classes.begin(), set->classes.end());
  if (top_level_images > 0) {
    STOKE_LOG(kWarn, "ingest.images_outside_classes", "root={} images={} (ImageFolder: only images in class directories count)",
              set->root, top_level_images);
  }
  for (const std::string& cls : set->classes) {
    const size_t before = set->files.size();
    STOKE_RETURN_IF_ERROR(ListTree(fs, JoinPath(set->root, cls), cls + "/", forced, what, &set->files));
    if (set->files.size() == before) {
      return Status::InvalidArgument(fmt::format("{}: class directory '{}' holds no .jpg, .jpeg or .png files (ImageFolder "
                                                 "layout: ROOT/<class>/<image>)", what, JoinPath(set->root, cls)));
    }
  }
  return Status::OK();
}

Status PlanImages(const SourceOptions& o, std::string_view what, SourceSet* set) {
  std::set<ImageFormat> formats;
  uint64_t total_bytes = 0;
  for (const auto& f : set->files) {
    formats.insert(FormatOfName(f.name));
    total_bytes += f.size;
  }
  const std::vector<std::string> taken = {"id", "file", "width", "height", "channels", kImageColumn};
  if (!set->classes.empty()) {
    if (set->classes.size() > static_cast<size_t>(INT32_MAX)) return Status::InvalidArgument("too many classes");
    LabelColumn label;
    label.spec = {.name = kLabelColumn, .type = parquet::Type::kInt32};
    label.cells.reserve(set->files.size());
    for (const auto& f : set->files) {
      const std::string cls = f.name.substr(0, f.name.find('/'));
      const auto it = std::lower_bound(set->classes.begin(), set->classes.end(), cls);
      label.cells.push_back(std::to_string(it - set->classes.begin()));
    }
    set->labels.push_back(std::move(label));
    set->metadata[kClassesMetadataKey] = nlohmann::json({{kLabelColumn, set->classes}}).dump();
  } else {
    STOKE_ASSIGN_OR_RETURN(set->labels, JoinLabelsCsv(o.labels_csv, set->files, taken));
  }
  std::vector<ColumnSpec> own = {
      {.name = "width", .type = parquet::Type::kInt32},
      {.name = "height", .type = parquet::Type::kInt32},
      {.name = "channels", .type = parquet::Type::kInt32},
      {.name = kImageColumn, .type = parquet::Type::kByteArray, .blob = true},
  };
  const std::vector<int64_t>& size = o.decode_images;
  if (!size.empty()) {
    if (size.size() != 2 || size[0] < 1 || size[1] < 1 || size[0] > 65535 || size[1] > 65535) {
      std::string got;
      for (int64_t v : size) got += (got.empty() ? "" : "x") + std::to_string(v);
      return Status::InvalidArgument(fmt::format("{}: `decode` needs HEIGHTxWIDTH (or one size for both) within 1..65535, "
                                                 "got '{}'", what, got));
    }
    // Decoded: a [height, width, 3] uint8 tensor column (the loader's image transforms take it as
    // pixels); no stoke.images entry, which names columns of encoded bytes.
    own.back().blob = false;
    own.back().tensor = TensorSpec{DType::kUInt8, {size[0], size[1], 3}};
  }
  STOKE_RETURN_IF_ERROR(SetColumns(set, /*has_index=*/false, std::move(own)));
  if (size.empty()) {
    nlohmann::json names = nlohmann::json::array();
    for (ImageFormat f : formats) names.push_back(std::string(ImageFormatName(f)));
    set->metadata[kImagesMetadataKey] = nlohmann::json({{kImageColumn, {{"formats", names}}}}).dump();
    set->sample_bytes = static_cast<int64_t>(total_bytes / std::max<size_t>(set->files.size(), 1)) + 12;
  } else {
    set->sample_bytes = size[0] * size[1] * 3 + 12;
  }
  set->item_starts.resize(set->files.size() + 1);
  for (size_t i = 0; i <= set->files.size(); ++i) set->item_starts[i] = static_cast<int64_t>(i);
  set->reader = std::make_shared<ImageReader>(*set, std::move(formats), o.decode_images);
  return Status::OK();
}

Result<std::optional<SourceSet>> MergeImageMetadata(const std::map<std::string, std::string>& table_configuration,
                                                    const SourceSet& sources) {
  auto table_json = [&](const char* key) -> Result<nlohmann::json> {
    auto it = table_configuration.find(key);
    if (it == table_configuration.end()) return nlohmann::json::object();
    auto j = nlohmann::json::parse(it->second, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) return Status::Corruption(fmt::format("the table's {} configuration is not a JSON object", key));
    return j;
  };
  auto source_json = [&](const char* key) {
    auto it = sources.metadata.find(key);
    return it == sources.metadata.end() ? nlohmann::json::object() : nlohmann::json::parse(it->second);
  };
  std::optional<SourceSet> out;
  // Classes of the label column: the table's list, then the new ones.
  STOKE_ASSIGN_OR_RETURN(nlohmann::json table_classes, table_json(kClassesMetadataKey));
  if (!sources.classes.empty() && table_classes.contains(kLabelColumn)) {
    const nlohmann::json& list = table_classes[kLabelColumn];
    std::vector<std::string> merged;
    if (!list.is_array()) return Status::Corruption(fmt::format("the table's {} is not a list of names", kClassesMetadataKey));
    for (const auto& name : list) {
      if (!name.is_string()) return Status::Corruption(fmt::format("the table's {} is not a list of names", kClassesMetadataKey));
      merged.push_back(name.get<std::string>());
    }
    for (const std::string& cls : sources.classes) {
      if (std::find(merged.begin(), merged.end(), cls) == merged.end()) merged.push_back(cls);
    }
    if (merged != sources.classes) {
      out = sources;
      out->classes = merged;
      LabelColumn& label = out->labels[0];  // ImageFolder sources have the label column first
      for (std::string& cell : label.cells) {
        const std::string& cls = sources.classes[static_cast<size_t>(std::stoll(cell))];
        cell = std::to_string(std::find(merged.begin(), merged.end(), cls) - merged.begin());
      }
      out->metadata[kClassesMetadataKey] = nlohmann::json({{kLabelColumn, merged}}).dump();
    }
  }
  // Image formats per blob column: the union.
  STOKE_ASSIGN_OR_RETURN(nlohmann::json table_images, table_json(kImagesMetadataKey));
  nlohmann::json images = source_json(kImagesMetadataKey);
  bool grew = false;
  for (auto it = table_images.begin(); it != table_images.end(); ++it) {
    if (!images.contains(it.key()) || !it.value().is_object() || !it.value().contains("formats") ||
        !it.value()["formats"].is_array()) {
      continue;
    }
    std::set<std::string> formats;
    for (const auto& f : images[it.key()]["formats"]) formats.insert(f.get<std::string>());
    const size_t before = formats.size();
    for (const auto& f : it.value()["formats"]) {
      if (f.is_string()) formats.insert(f.get<std::string>());
    }
    if (formats.size() != before) {
      images[it.key()]["formats"] = formats;
      grew = true;
    }
  }
  if (grew) {
    if (!out) out = sources;
    out->metadata[kImagesMetadataKey] = images.dump();
  }
  return out;
}

}  // namespace stoke
