#include "format/parquet_writer.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <set>

#include "format/codec.h"
#include "core/text.h"
#include "format/parquet_encoding.h"

namespace stoke {

using parquet::Encoding;
using parquet::PageType;
using parquet::Type;

namespace {

constexpr char kCreatedByPrefix[] = "stoke version ";
constexpr char kCreatedBy[] = "stoke version 0.1.0";
// Statistics longer than this are left out rather than truncated (truncation needs care that
// readers get right inconsistently).
constexpr size_t kMaxStatisticsBytes = 1024;

// Min/max of one run of values, in the physical type's sort order (signed integers, IEEE floats
// with NaN ignored, unsigned bytewise for BYTE_ARRAY, false < true).
struct MinMax {
  std::optional<std::string> min, max;  // PLAIN-encoded, as statistics store them
};

template <typename T>
std::string StatBytes(const T& v) {
  if constexpr (std::is_same_v<T, std::string>) {
    return v;
  } else {
    std::string s(sizeof(T), '\0');
    std::memcpy(s.data(), &v, sizeof(T));
    return s;
  }
}

template <typename T>
MinMax ComputeMinMax(const std::vector<T>& v, size_t begin, size_t end) {
  MinMax mm;
  const T* lo = nullptr;
  const T* hi = nullptr;
  for (size_t i = begin; i < end; ++i) {
    const T& x = v[i];
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(x)) continue;
    }
    if (lo == nullptr || x < *lo) lo = &x;
    if (hi == nullptr || *hi < x) hi = &x;
  }
  if (lo == nullptr) return mm;
  T min = *lo, max = *hi;
  if constexpr (std::is_floating_point_v<T>) {
    // parquet.thrift: a zero min is written as -0.0 and a zero max as +0.0.
    if (min == 0) min = -T(0);
    if (max == 0) max = T(0);
  }
  mm.min = StatBytes(min);
  mm.max = StatBytes(max);
  if (mm.min->size() > kMaxStatisticsBytes || mm.max->size() > kMaxStatisticsBytes) return MinMax{};
  return mm;
}

// Compares two PLAIN-encoded statistics values of `type`.
int CompareStat(Type type, const std::string& a, const std::string& b) {
  auto cmp = [](auto x, auto y) { return x < y ? -1 : (y < x ? 1 : 0); };
  switch (type) {
    case Type::kBoolean: return cmp(a[0], b[0]);
    case Type::kInt32: return cmp(LoadLE<int32_t>(AsBytes(a).data()), LoadLE<int32_t>(AsBytes(b).data()));
    case Type::kInt64: return cmp(LoadLE<int64_t>(AsBytes(a).data()), LoadLE<int64_t>(AsBytes(b).data()));
    case Type::kFloat: return cmp(LoadLE<float>(AsBytes(a).data()), LoadLE<float>(AsBytes(b).data()));
    case Type::kDouble: return cmp(LoadLE<double>(AsBytes(a).data()), LoadLE<double>(AsBytes(b).data()));
    default: return a.compare(b) < 0 ? -1 : (a == b ? 0 : 1);
  }
}

// Bytes of value `index` in PLAIN encoding (booleans count a byte: page sizes are estimates).
size_t PlainSize(const ValueVector& values, size_t index) {
  return std::visit(
      [&](const auto& v) -> size_t {
        using T = typename std::decay_t<decltype(v)>::value_type;
        if constexpr (std::is_same_v<T, std::string>) {
          return 4 + v[index].size();
        } else {
          return sizeof(T);
        }
      },
      values);
}

// Appends the PLAIN encoding of values[begin, end).
void AppendPlain(const ValueVector& values, size_t begin, size_t end, std::string* out) {
  std::visit(
      [&](const auto& v) {
        using T = typename std::decay_t<decltype(v)>::value_type;
        if constexpr (std::is_same_v<T, std::string>) {
          std::vector<std::string_view> views(v.begin() + begin, v.begin() + end);
          parquet::EncodePlainByteArray(views, out);
        } else if constexpr (std::is_same_v<T, uint8_t>) {
          parquet::EncodePlainBoolean(std::span<const uint8_t>(v.data() + begin, end - begin), out);
        } else {
          parquet::EncodePlain(std::span<const T>(v.data() + begin, end - begin), out);
        }
      },
      values);
}

// At least the size of the header DataPageHeaderFor makes, serialised: 4 int32 fields (up to 6
// bytes each with their field headers), the nested data page header (4 int32 fields and a stop) and
// the stop byte come to at most 38 bytes in the compact protocol.
constexpr int64_t kMaxPageHeaderBytes = 48;

parquet::PageHeader DataPageHeaderFor(int32_t num_values, size_t uncompressed, size_t stored, uint32_t crc) {
  parquet::PageHeader h;
  h.type = PageType::kDataPage;
  h.uncompressed_page_size = static_cast<int32_t>(uncompressed);
  h.compressed_page_size = static_cast<int32_t>(stored);
  h.crc = static_cast<int32_t>(crc);
  parquet::DataPageHeader d;
  d.num_values = num_values;
  d.encoding = Encoding::kPlain;
  d.definition_level_encoding = Encoding::kRle;
  d.repetition_level_encoding = Encoding::kRle;
  h.data_page_header = d;
  return h;
}

// Appends one page, header + stored body, to `chunk` and records its location.
void AppendStoredPage(ByteView stored, size_t uncompressed_size, int32_t num_values, int64_t first_row,
                      EncodedColumnChunk* chunk) {
  std::string header;
  parquet::SerializePageHeader(DataPageHeaderFor(num_values, uncompressed_size, stored.size(), Crc32(stored)), &header);
  int64_t offset = static_cast<int64_t>(chunk->bytes.size());
  chunk->bytes.Append(AsBytes(header));
  chunk->bytes.Append(stored);
  chunk->pages.push_back({offset, static_cast<int32_t>(header.size() + stored.size()), first_row});
  chunk->meta.total_uncompressed_size += static_cast<int64_t>(header.size() + uncompressed_size);
  chunk->meta.total_compressed_size += static_cast<int64_t>(header.size() + stored.size());
}

}  // namespace

bool CreatedByStoke(const std::optional<std::string>& created_by) {
  return created_by && created_by->starts_with(kCreatedByPrefix);
}

// Compresses a column chunk's pages and chooses its codec (WriterOptions::min_codec_saving): the first
// pages, up to codec_trial_bytes of bodies, are compressed and held; the codec is kept when they shrank
// by at least min_codec_saving, and otherwise the whole chunk is stored UNCOMPRESSED (its held pages
// are written from their uncompressed bodies). Parquet has one codec per column chunk, which is why
// the choice is per chunk and made before the first page is appended. The choice is a function of
// the bytes alone, so the same data always gets the same codec.
class ChunkPageWriter {
 public:
  // `per_sample`: the chunk of a tensor or blob column (WriterOptions::sample_codec_min_saving).
  ChunkPageWriter(const WriterOptions& options, EncodedColumnChunk* chunk, bool per_sample = false)
      : options_(&options), chunk_(chunk), per_sample_(per_sample) {
    if (options.codec == parquet::Codec::kUncompressed || options.min_codec_saving <= 0) codec_ = options.codec;
    chunk_->meta.codec = options.codec;
  }

  // Appends (or holds, while the codec is undecided) one page whose uncompressed body is `body`.
  Status Add(ByteView body, int32_t num_values, int64_t first_row) {
    if (body.size() > INT32_MAX) return Status::InvalidArgument(fmt::format("page of {} bytes exceeds 2 GiB", body.size()));
    if (codec_ == parquet::Codec::kUncompressed) {
      AppendStoredPage(body, body.size(), num_values, first_row, chunk_);
      return Status::OK();
    }
    scratch_.Clear();
    STOKE_RETURN_IF_ERROR(Compress(options_->codec, body, options_->compression_level, &scratch_));
    if (codec_) {
      AppendStoredPage(scratch_.view(), body.size(), num_values, first_row, chunk_);
      return Status::OK();
    }
    held_.push_back({held_raw_.size(), body.size(), held_stored_.size(), scratch_.size(), num_values, first_row});
    held_raw_.Append(body);
    held_stored_.Append(scratch_.view());
    if (static_cast<int64_t>(held_raw_.size()) >= options_->codec_trial_bytes) Decide();
    return Status::OK();
  }

  // Decides the codec if the chunk ended before the trial did, and appends the pages still held.
  void Finish() {
    if (!codec_) Decide();
  }

 private:
  struct HeldPage {
    size_t raw_offset, raw_size, stored_offset, stored_size;
    int32_t num_values;
    int64_t first_row;
  };

  // Whether the trial pages shrank enough to keep the codec; records the choice and why.
  bool Keep() {
    const double raw = static_cast<double>(held_raw_.size());
    const double stored = static_cast<double>(held_stored_.size());
    const bool per_sample = per_sample_ && options_->sample_codec_min_page_bytes > 0;
    const double min_saving =
        per_sample ? std::max(options_->min_codec_saving, options_->sample_codec_min_saving) : options_->min_codec_saving;
    bool keep = raw > 0 && stored <= raw * (1.0 - min_saving);
    if (per_sample) keep = keep && raw >= static_cast<double>(held_.size() * options_->sample_codec_min_page_bytes);
    codec_ = keep ? options_->codec : parquet::Codec::kUncompressed;
    nlohmann::json why = {{"requested", parquet::CodecName(options_->codec)},
                          {"chosen", parquet::CodecName(*codec_)},
                          {"trial_bytes", held_raw_.size()},
                          {"trial_compressed_bytes", held_stored_.size()},
                          {"min_saving", min_saving}};
    if (per_sample) {
      why["trial_pages"] = held_.size();
      why["min_page_bytes"] = options_->sample_codec_min_page_bytes;
    }
    chunk_->meta.key_value_metadata.push_back({std::string(kCodecChoiceKey), why.dump()});
    return keep;
  }

  void Decide() {
    const bool keep = Keep();
    chunk_->meta.codec = *codec_;
    for (const HeldPage& p : held_) {
      ByteView body(held_raw_.data() + p.raw_offset, p.raw_size);
      ByteView stored_body = keep ? ByteView(held_stored_.data() + p.stored_offset, p.stored_size) : body;
      AppendStoredPage(stored_body, p.raw_size, p.num_values, p.first_row, chunk_);
    }
    held_.clear();
    held_raw_ = AlignedBuffer();
    held_stored_ = AlignedBuffer();
  }

  const WriterOptions* options_;
  EncodedColumnChunk* chunk_;
  bool per_sample_ = false;
  std::optional<parquet::Codec> codec_;  // set once decided
  AlignedBuffer scratch_;       // the compressed form of the page being added
  std::vector<HeldPage> held_;  // trial pages, in order
  AlignedBuffer held_raw_, held_stored_;
};

namespace {

void InitChunkMeta(const ColumnSpec& spec, const WriterOptions& options, parquet::ColumnMetaData* m) {
  m->type = spec.type;
  m->path_in_schema = {spec.file_name()};
  m->codec = options.codec;
  // RLE only where definition levels are written (OPTIONAL columns).
  m->encodings = spec.optional ? std::vector<Encoding>{Encoding::kPlain, Encoding::kRle} : std::vector<Encoding>{Encoding::kPlain};
  m->data_page_offset = 0;
}

// Bits needed for levels up to `max_level` (Encodings.md: the bit width of the max level).
int LevelBitWidth(int16_t max_level) {
  int w = 0;
  while ((int32_t{1} << w) <= max_level) ++w;
  return w;
}

}  // namespace

int64_t EncodedRowGroup::byte_size() const {
  int64_t n = 0;
  for (const auto& c : columns) n += static_cast<int64_t>(c.bytes.size());
  return n;
}

Status SetCodecPolicy(Codec codec, WriterOptions* options) {
  options->min_codec_saving = 0;
  options->sample_codec_min_saving = 0;
  options->sample_codec_min_page_bytes = 0;
  switch (codec) {
    case Codec::kAuto:
      options->codec = parquet::Codec::kZstd;
      options->min_codec_saving = WriterOptions{}.min_codec_saving;
      options->sample_codec_min_saving = kSampleCodecMinSaving;
      options->sample_codec_min_page_bytes = kSampleCodecMinPageBytes;
      return Status::OK();
    case Codec::kZstd: options->codec = parquet::Codec::kZstd; return Status::OK();
    case Codec::kLz4Raw: options->codec = parquet::Codec::kLz4Raw; return Status::OK();
    case Codec::kSnappy: options->codec = parquet::Codec::kSnappy; return Status::OK();
    case Codec::kGzip: options->codec = parquet::Codec::kGzip; return Status::OK();
    case Codec::kUncompressed: options->codec = parquet::Codec::kUncompressed; return Status::OK();
  }
  return Status::InvalidArgument(fmt::format("unknown codec {}", static_cast<int>(codec)));
}

Status SetCodecPolicy(std::string_view name, WriterOptions* options) {
  STOKE_ASSIGN_OR_RETURN(Codec codec, ParseCodec(name));
  return SetCodecPolicy(codec, options);
}

bool WritableType(Type type) {
  switch (type) {
    case Type::kBoolean:
    case Type::kInt32:
    case Type::kInt64:
    case Type::kFloat:
    case Type::kDouble:
    case Type::kByteArray: return true;
    default: return false;
  }
}

void AnnotateLogicalType(const ColumnSpec& c, parquet::SchemaElement* e) {
  using parquet::ConvertedType;
  using parquet::LogicalTypeId;
  constexpr int16_t kMicros = 2;  // TimeUnit's MICROS field
  switch (c.logical) {
    case LogicalType::kByte:
    case LogicalType::kShort: {
      const bool is_byte = c.logical == LogicalType::kByte;
      e->converted_type = is_byte ? ConvertedType::kInt8 : ConvertedType::kInt16;
      e->logical_type = parquet::LogicalType{.id = LogicalTypeId::kInteger, .int_bit_width = static_cast<int8_t>(is_byte ? 8 : 16)};
      break;
    }
    case LogicalType::kDate:
      e->converted_type = ConvertedType::kDate;
      e->logical_type = parquet::LogicalType{.id = LogicalTypeId::kDate};
      break;
    case LogicalType::kTimestamp:
    case LogicalType::kTimestampNtz: {
      const bool utc = c.logical == LogicalType::kTimestamp;
      if (utc) e->converted_type = ConvertedType::kTimestampMicros;  // implies UTC: never for timestamp_ntz
      e->logical_type = parquet::LogicalType{.id = LogicalTypeId::kTimestamp, .timestamp_utc = utc, .time_unit = kMicros};
      break;
    }
    case LogicalType::kDecimal:
      e->converted_type = ConvertedType::kDecimal;
      e->scale = c.scale;
      e->precision = c.precision;
      e->logical_type = parquet::LogicalType{
          .id = LogicalTypeId::kDecimal, .decimal_scale = c.scale, .decimal_precision = c.precision};
      break;
    case LogicalType::kNone: break;
  }
}

Status ValidateColumns(const std::vector<ColumnSpec>& columns) {
  if (columns.empty()) return Status::InvalidArgument("a Parquet schema needs at least one column");
  // Delta (and Spark, DuckDB) match column names ignoring case: 'Id' next to 'id' is a duplicate there.
  std::map<std::string, std::string> names;  // ASCII-lowercased name -> the name
  for (const auto& c : columns) {
    if (c.name.empty()) return Status::InvalidArgument("column with an empty name");
    auto [it, inserted] = names.emplace(AsciiLower(c.name), c.name);
    if (!inserted) {
      if (it->second == c.name) return Status::InvalidArgument(fmt::format("duplicate column '{}'", c.name));
      return Status::InvalidArgument(fmt::format("columns '{}' and '{}' differ only in case (Delta readers match column "
                                                 "names ignoring case)", it->second, c.name));
    }
    if (!WritableType(c.type)) {
      return Status::Unsupported(fmt::format("writing column '{}' of type {}", c.name, parquet::TypeName(c.type)));
    }
    if (c.tensor) {
      if (c.type != Type::kByteArray || c.optional || c.is_string) {
        return Status::InvalidArgument(fmt::format("tensor column '{}' must be a REQUIRED BYTE_ARRAY", c.name));
      }
      if (c.tensor->num_bytes() > INT32_MAX - 64) {
        return Status::InvalidArgument(fmt::format("tensor column '{}': rows of {} bytes exceed a 2 GiB page", c.name,
                                                   c.tensor->num_bytes()));
      }
    }
    if (c.blob && (c.tensor || c.type != Type::kByteArray || c.optional || c.is_string)) {
      return Status::InvalidArgument(fmt::format("blob column '{}' must be a REQUIRED BYTE_ARRAY without a STRING annotation "
                                                 "and not a tensor", c.name));
    }
  }
  return Status::OK();
}

// ---------------------------------------------------------------------------------------------
RowGroupEncoder::RowGroupEncoder(const std::vector<ColumnSpec>& columns, const WriterOptions& options, BufferPool* pool)
    : columns_(columns),
      options_(options),
      pool_(pool),
      tensors_(columns.size()),
      scalars_(columns.size()),
      leveled_(columns.size()) {
  for (size_t i = 0; i < columns_.size(); ++i) {
    if (columns_[i].paged()) ResetTensor(i);
  }
}

void RowGroupEncoder::ResetTensor(size_t column) {
  TensorState& t = tensors_[column];
  t = TensorState();
  if (pool_ != nullptr) t.chunk.bytes = pool_->Take();
  InitChunkMeta(columns_[column], options_, &t.chunk.meta);
  t.pages = std::make_unique<ChunkPageWriter>(options_, &t.chunk, /*per_sample=*/true);
}

RowGroupEncoder::~RowGroupEncoder() = default;

void RowGroupEncoder::ReserveRows(int64_t rows) {
  if (rows <= 0) return;
  for (size_t i = 0; i < columns_.size(); ++i) {
    if (!columns_[i].tensor) continue;  // blobs vary in size
    TensorState& t = tensors_[i];
    // A page body holds 4 + num_bytes per row and is closed once it reaches small_tensor_page_bytes.
    const int64_t row_bytes = columns_[i].tensor->num_bytes() + 4;
    const int64_t rows_per_page = std::max<int64_t>(1, (options_.small_tensor_page_bytes + row_bytes - 1) / row_bytes);
    const int64_t pages = (rows + rows_per_page - 1) / rows_per_page;
    t.chunk.bytes.Reserve(t.chunk.bytes.size() + static_cast<size_t>(rows * row_bytes + pages * kMaxPageHeaderBytes));
  }
}

int64_t RowGroupEncoder::tensor_rows(size_t column) const { return tensors_[column].rows; }

int64_t RowGroupEncoder::encoded_bytes() const {
  int64_t n = 0;
  for (const auto& t : tensors_) n += static_cast<int64_t>(t.chunk.bytes.size() + t.open_page.size());
  return n;
}

Status RowGroupEncoder::AppendTensor(size_t column, ByteView bytes) {
  if (column >= columns_.size() || !columns_[column].paged()) {
    return Status::InvalidArgument(fmt::format("column {} is not a tensor or blob column", column));
  }
  const ColumnSpec& spec = columns_[column];
  if (spec.tensor && static_cast<int64_t>(bytes.size()) != spec.tensor->num_bytes()) {
    return Status::InvalidArgument(fmt::format("tensor column '{}' holds {} bytes per row, got {}", spec.name,
                                               spec.tensor->num_bytes(), bytes.size()));
  }
  if (bytes.size() > static_cast<size_t>(INT32_MAX - 64)) {
    return Status::InvalidArgument(fmt::format("blob column '{}': a value of {} bytes exceeds a 2 GiB page", spec.name,
                                               bytes.size()));
  }
  TensorState& t = tensors_[column];
  uint8_t len[4];
  StoreLE<uint32_t>(len, static_cast<uint32_t>(bytes.size()));
  t.open_page.Append(len, 4);
  t.open_page.Append(bytes);
  ++t.rows_in_open_page;
  ++t.rows;
  if (static_cast<int64_t>(t.open_page.size()) >= options_.small_tensor_page_bytes) {
    STOKE_RETURN_IF_ERROR(FlushTensorPage(column));
  }
  return Status::OK();
}

Status RowGroupEncoder::FlushTensorPage(size_t column) {
  TensorState& t = tensors_[column];
  if (t.rows_in_open_page == 0) return Status::OK();
  int64_t first_row = t.rows - t.rows_in_open_page;
  STOKE_RETURN_IF_ERROR(t.pages->Add(t.open_page.view(), static_cast<int32_t>(t.rows_in_open_page), first_row));
  t.open_page.Clear();
  t.rows_in_open_page = 0;
  return Status::OK();
}

Status RowGroupEncoder::SetScalars(size_t column, ColumnValues values) {
  if (column >= columns_.size() || columns_[column].paged()) {
    return Status::InvalidArgument(fmt::format("column {} is not a scalar column", column));
  }
  const ColumnSpec& spec = columns_[column];
  if (values.values.index() != EmptyValuesFor(spec.type).index()) {
    return Status::InvalidArgument(fmt::format("column '{}': values do not match type {}", spec.name,
                                               parquet::TypeName(spec.type)));
  }
  if (!values.defined.empty()) {
    size_t present = 0;
    for (uint8_t d : values.defined) present += d != 0;
    if (present != values.num_values()) {
      return Status::InvalidArgument(fmt::format("column '{}': {} rows marked present but {} values given", spec.name,
                                                 present, values.num_values()));
    }
    if (!spec.optional && present != values.defined.size()) {
      return Status::InvalidArgument(fmt::format("column '{}' is REQUIRED but has nulls", spec.name));
    }
  }
  scalars_[column] = std::move(values);
  leveled_[column].reset();
  return Status::OK();
}

size_t LeveledValues::num_levels() const {
  if (!def_levels.empty()) return def_levels.size();
  if (!rep_levels.empty()) return rep_levels.size();
  return std::visit([](const auto& v) { return v.size(); }, values);
}

size_t LeveledValues::num_records() const {
  if (max_rep == 0) return num_levels();
  return static_cast<size_t>(std::count(rep_levels.begin(), rep_levels.end(), 0u));
}

Status RowGroupEncoder::SetLeveledColumn(size_t column, LeveledValues leveled) {
  if (column >= columns_.size() || columns_[column].paged()) {
    return Status::InvalidArgument(fmt::format("column {} is not a scalar column", column));
  }
  const ColumnSpec& spec = columns_[column];
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument(fmt::format("column '{}': {}", spec.name, why));
  };
  if (leveled.values.index() != EmptyValuesFor(spec.type).index()) {
    return bad(fmt::format("values do not match type {}", parquet::TypeName(spec.type)));
  }
  if (leveled.max_def < 0 || leveled.max_rep < 0 || leveled.max_rep > leveled.max_def) {
    return bad(fmt::format("bad maximum levels (definition {}, repetition {})", leveled.max_def, leveled.max_rep));
  }
  if ((leveled.max_def == 0) != leveled.def_levels.empty() && !(leveled.max_def > 0 && leveled.num_levels() == 0)) {
    return bad("definition levels must be given exactly when the maximum definition level is above 0");
  }
  if (leveled.max_rep > 0 && leveled.rep_levels.size() != leveled.def_levels.size()) {
    return bad(fmt::format("{} repetition levels but {} definition levels", leveled.rep_levels.size(),
                           leveled.def_levels.size()));
  }
  if (leveled.max_rep == 0 && !leveled.rep_levels.empty()) return bad("repetition levels on a non-repeated column");
  if (leveled.max_rep > 0 && !leveled.rep_levels.empty() && leveled.rep_levels[0] != 0) {
    return bad("the first repetition level must be 0");
  }
  for (uint32_t r : leveled.rep_levels) {
    if (r > static_cast<uint32_t>(leveled.max_rep)) return bad(fmt::format("repetition level {} above the maximum", r));
  }
  size_t present = leveled.max_def == 0 ? leveled.num_levels() : 0;
  for (uint32_t d : leveled.def_levels) {
    if (d > static_cast<uint32_t>(leveled.max_def)) return bad(fmt::format("definition level {} above the maximum", d));
    present += d == static_cast<uint32_t>(leveled.max_def);
  }
  size_t values = std::visit([](const auto& v) { return v.size(); }, leveled.values);
  if (present != values) return bad(fmt::format("{} entries at the maximum definition level but {} values", present, values));
  if (leveled.path_in_schema.empty()) leveled.path_in_schema = {spec.file_name()};
  leveled_[column] = std::move(leveled);
  scalars_[column].reset();
  return Status::OK();
}

Result<EncodedColumnChunk> RowGroupEncoder::EncodeLeveledColumn(size_t column, const LeveledValues& lv) const {
  const ColumnSpec& spec = columns_[column];
  EncodedColumnChunk chunk;
  InitChunkMeta(spec, options_, &chunk.meta);
  chunk.meta.path_in_schema = lv.path_in_schema;
  const bool has_levels = lv.max_def > 0 || lv.max_rep > 0;
  chunk.meta.encodings = has_levels ? std::vector<Encoding>{Encoding::kPlain, Encoding::kRle}
                                    : std::vector<Encoding>{Encoding::kPlain};
  const size_t levels = lv.num_levels();
  chunk.meta.num_values = static_cast<int64_t>(levels);
  const int def_width = LevelBitWidth(lv.max_def);
  const int rep_width = LevelBitWidth(lv.max_rep);
  auto is_present = [&](size_t i) { return lv.max_def == 0 || lv.def_levels[i] == static_cast<uint32_t>(lv.max_def); };
  auto starts_record = [&](size_t i) { return lv.max_rep == 0 || lv.rep_levels[i] == 0; };

  ChunkPageWriter pages(options_, &chunk);
  std::string body;
  std::vector<uint32_t> page_levels;
  size_t entry = 0, value = 0;
  int64_t record = 0;
  do {
    // A page takes whole records: up to scalar_page_rows records or until its values pass
    // scalar_page_bytes.
    size_t page_entries = 0, page_values = 0, page_bytes = 0;
    int64_t page_records = 0;
    while (entry + page_entries < levels) {
      size_t i = entry + page_entries;
      if (starts_record(i)) {
        if (page_records >= options_.scalar_page_rows ||
            (page_records > 0 && page_bytes >= static_cast<size_t>(options_.scalar_page_bytes))) {
          break;
        }
        ++page_records;
      }
      if (is_present(i)) {
        page_bytes += PlainSize(lv.values, value + page_values);
        ++page_values;
      }
      ++page_entries;
    }
    if (page_entries > INT32_MAX) return Status::InvalidArgument(fmt::format("column '{}': page too large", spec.name));
    body.clear();
    if (lv.max_rep > 0) {
      page_levels.assign(lv.rep_levels.begin() + entry, lv.rep_levels.begin() + entry + page_entries);
      parquet::EncodeLengthPrefixedRleBitPackedHybrid(page_levels, rep_width, &body);
    }
    if (lv.max_def > 0) {
      page_levels.assign(lv.def_levels.begin() + entry, lv.def_levels.begin() + entry + page_entries);
      parquet::EncodeLengthPrefixedRleBitPackedHybrid(page_levels, def_width, &body);
    }
    AppendPlain(lv.values, value, value + page_values, &body);
    STOKE_RETURN_IF_ERROR(pages.Add(AsBytes(body), static_cast<int32_t>(page_entries), record));
    entry += page_entries;
    value += page_values;
    record += page_records;
  } while (entry < levels);
  pages.Finish();

  parquet::Statistics stats;
  stats.null_count = static_cast<int64_t>(levels - value);
  chunk.meta.statistics = stats;
  return chunk;
}

namespace {

// A column index's boundary order: ascending or descending when consecutive non-null pages' bounds
// are monotonic, else unordered.
parquet::BoundaryOrder BoundaryOrderOf(parquet::Type type, const parquet::ColumnIndex& ci) {
  bool asc = true, desc = true;
  int prev = -1;
  for (size_t i = 0; i < ci.null_pages.size(); ++i) {
    if (ci.null_pages[i]) continue;
    if (prev >= 0) {
      int cmin = CompareStat(type, ci.min_values[prev], ci.min_values[i]);
      int cmax = CompareStat(type, ci.max_values[prev], ci.max_values[i]);
      asc = asc && cmin <= 0 && cmax <= 0;
      desc = desc && cmin >= 0 && cmax >= 0;
    }
    prev = static_cast<int>(i);
  }
  return asc ? parquet::BoundaryOrder::kAscending
             : (desc ? parquet::BoundaryOrder::kDescending : parquet::BoundaryOrder::kUnordered);
}

}  // namespace

Result<EncodedColumnChunk> RowGroupEncoder::EncodeScalarColumn(size_t column, const ColumnValues& values) const {
  const ColumnSpec& spec = columns_[column];
  EncodedColumnChunk chunk;
  InitChunkMeta(spec, options_, &chunk.meta);
  const size_t rows = values.num_rows();
  chunk.meta.num_values = static_cast<int64_t>(rows);

  parquet::ColumnIndex ci;
  bool index_ok = true;  // false once a page's min/max is left out
  MinMax chunk_mm;
  int64_t null_total = 0;
  ChunkPageWriter pages(options_, &chunk);
  std::string body;
  std::vector<uint32_t> levels;

  size_t row = 0, value = 0;
  do {
    // Pick the page's rows: up to scalar_page_rows, or until the encoded values pass scalar_page_bytes.
    size_t page_rows = 0, page_values = 0;
    size_t page_bytes = 0;
    while (row + page_rows < rows && page_rows < static_cast<size_t>(options_.scalar_page_rows) &&
           page_bytes < static_cast<size_t>(options_.scalar_page_bytes)) {
      bool present = values.defined.empty() || values.defined[row + page_rows];
      if (present) {
        page_bytes += PlainSize(values.values, value + page_values);
        ++page_values;
      }
      ++page_rows;
    }
    body.clear();
    if (spec.optional) {
      if (values.defined.empty()) {
        levels.assign(page_rows, 1);
      } else {
        levels.assign(values.defined.begin() + row, values.defined.begin() + row + page_rows);
      }
      parquet::EncodeLengthPrefixedRleBitPackedHybrid(levels, 1, &body);
    }
    AppendPlain(values.values, value, value + page_values, &body);
    STOKE_RETURN_IF_ERROR(pages.Add(AsBytes(body), static_cast<int32_t>(page_rows), static_cast<int64_t>(row)));

    MinMax mm = std::visit([&](const auto& v) { return ComputeMinMax(v, value, value + page_values); }, values.values);
    int64_t nulls = static_cast<int64_t>(page_rows - page_values);
    null_total += nulls;
    bool all_null = page_values == 0;
    if (!all_null && !mm.min) index_ok = false;  // e.g. only NaNs, or values too long
    ci.null_pages.push_back(all_null);
    ci.min_values.push_back(mm.min.value_or(""));
    ci.max_values.push_back(mm.max.value_or(""));
    ci.null_counts.push_back(nulls);
    if (mm.min) {
      if (!chunk_mm.min || CompareStat(spec.type, *mm.min, *chunk_mm.min) < 0) chunk_mm.min = mm.min;
      if (!chunk_mm.max || CompareStat(spec.type, *mm.max, *chunk_mm.max) > 0) chunk_mm.max = mm.max;
    }
    row += page_rows;
    value += page_values;
  } while (row < rows);
  pages.Finish();

  parquet::Statistics stats;
  stats.null_count = null_total;
  stats.min_value = chunk_mm.min;
  stats.max_value = chunk_mm.max;
  chunk.meta.statistics = stats;

  if (index_ok) {
    ci.boundary_order = BoundaryOrderOf(spec.type, ci);
    chunk.column_index = std::move(ci);
  }
  return chunk;
}

Result<EncodedRowGroup> RowGroupEncoder::Finish() {
  EncodedRowGroup rg;
  std::optional<int64_t> rows;
  for (size_t c = 0; c < columns_.size(); ++c) {
    int64_t n = columns_[c].paged() ? tensors_[c].rows
                : leveled_[c]          ? static_cast<int64_t>(leveled_[c]->num_records())
                                       : (scalars_[c] ? static_cast<int64_t>(scalars_[c]->num_rows()) : 0);
    if (rows && *rows != n) {
      return Status::InvalidArgument(fmt::format("row group columns differ in length: '{}' has {} rows, '{}' has {}",
                                                 columns_[0].name, *rows, columns_[c].name, n));
    }
    rows = n;
  }
  rg.num_rows = rows.value_or(0);
  for (size_t c = 0; c < columns_.size(); ++c) {
    if (columns_[c].paged()) {
      STOKE_RETURN_IF_ERROR(FlushTensorPage(c));
      TensorState& t = tensors_[c];
      t.pages->Finish();
      t.chunk.meta.num_values = t.rows;
      parquet::Statistics stats;
      stats.null_count = 0;  // no min/max for tensor and blob columns
      t.chunk.meta.statistics = stats;
      rg.columns.push_back(std::move(t.chunk));
      ResetTensor(c);
    } else if (leveled_[c]) {
      STOKE_ASSIGN_OR_RETURN(auto chunk, EncodeLeveledColumn(c, *leveled_[c]));
      rg.columns.push_back(std::move(chunk));
      leveled_[c].reset();
    } else {
      ColumnValues empty{EmptyValuesFor(columns_[c].type), {}};
      STOKE_ASSIGN_OR_RETURN(auto chunk, EncodeScalarColumn(c, scalars_[c] ? *scalars_[c] : empty));
      rg.columns.push_back(std::move(chunk));
      scalars_[c].reset();
    }
  }
  return rg;
}

// ---------------------------------------------------------------------------------------------
ParquetFileWriter::ParquetFileWriter(std::unique_ptr<WritableFile> file, std::vector<ColumnSpec> columns,
                                     WriterOptions options)
    : file_(std::move(file)), columns_(std::move(columns)), options_(std::move(options)) {}

ParquetFileWriter::~ParquetFileWriter() = default;

Result<std::unique_ptr<ParquetFileWriter>> ParquetFileWriter::Create(Storage& storage, const std::string& path,
                                                                     std::vector<ColumnSpec> columns,
                                                                     WriterOptions options) {
  STOKE_RETURN_IF_ERROR(ValidateColumns(columns));
  std::vector<parquet::SchemaElement> schema;
  parquet::SchemaElement root;
  root.name = "schema";
  root.num_children = static_cast<int32_t>(columns.size());
  schema.push_back(root);
  for (const auto& c : columns) {
    parquet::SchemaElement e;
    e.name = c.file_name();  // the physical name under column mapping (PROTOCOL.md, "Column Mapping")
    e.field_id = c.field_id;
    e.type = c.type;
    e.repetition = c.optional ? parquet::Repetition::kOptional : parquet::Repetition::kRequired;
    if (c.is_string) {
      e.converted_type = parquet::ConvertedType::kUtf8;
      e.logical_type = parquet::LogicalType{.id = parquet::LogicalTypeId::kString};
    }
    AnnotateLogicalType(c, &e);
    schema.push_back(e);
  }
  return Open(storage, path, std::move(columns), std::move(options), std::move(schema));
}

Result<std::unique_ptr<ParquetFileWriter>> ParquetFileWriter::CreateNested(Storage& storage, const std::string& path,
                                                                           std::vector<ColumnSpec> leaves,
                                                                           std::vector<parquet::SchemaElement> schema,
                                                                           WriterOptions options) {
  STOKE_RETURN_IF_ERROR(ValidateColumns(leaves));
  size_t schema_leaves = 0;
  for (size_t i = 1; i < schema.size(); ++i) schema_leaves += schema[i].num_children.value_or(0) == 0;
  if (schema.empty() || schema_leaves != leaves.size()) {
    return Status::InvalidArgument(
        fmt::format("nested schema has {} leaves but {} leaf columns are given", schema_leaves, leaves.size()));
  }
  for (const auto& c : leaves) {
    if (c.paged()) return Status::InvalidArgument(fmt::format("tensor or blob column '{}' in a nested schema", c.name));
  }
  return Open(storage, path, std::move(leaves), std::move(options), std::move(schema));
}

Result<std::unique_ptr<ParquetFileWriter>> ParquetFileWriter::Open(Storage& storage, const std::string& path,
                                                                   std::vector<ColumnSpec> columns,
                                                                   WriterOptions options,
                                                                   std::vector<parquet::SchemaElement> schema) {
  if (!CodecWritable(options.codec)) {
    return Status::Unsupported(fmt::format("writing codec {}", parquet::CodecName(options.codec)));
  }
  STOKE_ASSIGN_OR_RETURN(auto file, storage.Create(path, /*exclusive=*/false));
  STOKE_RETURN_IF_ERROR(file->Append(AsBytes(std::string_view(parquet::kMagic, 4))));
  std::unique_ptr<ParquetFileWriter> w(new ParquetFileWriter(std::move(file), std::move(columns), std::move(options)));
  w->metadata_.schema = std::move(schema);
  w->metadata_.created_by = kCreatedBy;
  w->metadata_.has_column_orders = true;
  bool has_tensors = false, has_blobs = false;
  for (const auto& c : w->columns_) {
    has_tensors |= c.tensor.has_value();
    has_blobs |= c.blob;
  }
  // The footer names tensor and blob columns as the file does (physical names under column mapping).
  std::vector<ColumnSpec> stored = w->columns_;
  for (ColumnSpec& c : stored) c.name = c.file_name();
  if (has_tensors) w->metadata_.key_value_metadata.push_back({kTensorsMetadataKey, TensorSpecsToJson(stored)});
  if (has_blobs) w->metadata_.key_value_metadata.push_back({kBlobsMetadataKey, BlobColumnsToJson(stored)});
  for (const auto& kv : w->options_.key_value_metadata) w->metadata_.key_value_metadata.push_back(kv);
  return w;
}

Status ParquetFileWriter::WriteRowGroup(EncodedRowGroup rg, BufferPool* recycle) {
  if (closed_) return Status::Internal("WriteRowGroup after Close");
  if (rg.columns.size() != columns_.size()) {
    return Status::InvalidArgument(fmt::format("row group has {} columns, the file {}", rg.columns.size(), columns_.size()));
  }
  if (rg.num_rows == 0) return Status::OK();
  if (metadata_.row_groups.size() >= INT16_MAX) return Status::InvalidArgument("more than 32767 row groups in one file");
  parquet::RowGroup out;
  out.num_rows = rg.num_rows;
  int64_t start = static_cast<int64_t>(file_->bytes_written());
  out.file_offset = start;
  out.ordinal = static_cast<int16_t>(metadata_.row_groups.size());
  int64_t total_compressed = 0, total_uncompressed = 0;
  std::vector<parquet::OffsetIndex> ois;
  std::vector<std::optional<parquet::ColumnIndex>> cis;
  for (auto& col : rg.columns) {
    int64_t base = static_cast<int64_t>(file_->bytes_written());
    STOKE_RETURN_IF_ERROR(file_->Append(col.bytes.view()));
    parquet::ColumnChunk cc;
    cc.file_offset = base;
    cc.meta_data = col.meta;
    cc.meta_data->data_page_offset += base;
    if (cc.meta_data->dictionary_page_offset) *cc.meta_data->dictionary_page_offset += base;
    total_compressed += col.meta.total_compressed_size;
    total_uncompressed += col.meta.total_uncompressed_size;
    parquet::OffsetIndex oi;
    oi.page_locations = col.pages;
    for (auto& p : oi.page_locations) p.offset += base;
    ois.push_back(std::move(oi));
    cis.push_back(std::move(col.column_index));
    out.columns.push_back(std::move(cc));
    if (recycle != nullptr) recycle->Give(std::move(col.bytes));
  }
  out.total_byte_size = total_uncompressed;
  out.total_compressed_size = total_compressed;
  metadata_.num_rows += rg.num_rows;
  metadata_.row_groups.push_back(std::move(out));
  offset_indexes_.push_back(std::move(ois));
  column_indexes_.push_back(std::move(cis));
  return Status::OK();
}

Status ParquetFileWriter::Close() {
  if (closed_) return Status::OK();
  closed_ = true;
  // Page indexes go between the last row group and the footer: all ColumnIndexes, then all
  // OffsetIndexes (PageIndex.md).
  std::string buf;
  for (size_t rg = 0; rg < column_indexes_.size(); ++rg) {
    for (size_t c = 0; c < columns_.size(); ++c) {
      if (!column_indexes_[rg][c]) continue;
      buf.clear();
      parquet::SerializeColumnIndex(*column_indexes_[rg][c], &buf);
      auto& cc = metadata_.row_groups[rg].columns[c];
      cc.column_index_offset = static_cast<int64_t>(file_->bytes_written());
      cc.column_index_length = static_cast<int32_t>(buf.size());
      STOKE_RETURN_IF_ERROR(file_->Append(AsBytes(buf)));
    }
  }
  for (size_t rg = 0; rg < offset_indexes_.size(); ++rg) {
    for (size_t c = 0; c < columns_.size(); ++c) {
      buf.clear();
      parquet::SerializeOffsetIndex(offset_indexes_[rg][c], &buf);
      auto& cc = metadata_.row_groups[rg].columns[c];
      cc.offset_index_offset = static_cast<int64_t>(file_->bytes_written());
      cc.offset_index_length = static_cast<int32_t>(buf.size());
      STOKE_RETURN_IF_ERROR(file_->Append(AsBytes(buf)));
    }
  }
  buf.clear();
  parquet::SerializeFileMetaData(metadata_, &buf);
  uint8_t trailer[8];
  StoreLE<uint32_t>(trailer, static_cast<uint32_t>(buf.size()));
  std::memcpy(trailer + 4, parquet::kMagic, 4);
  buf.append(reinterpret_cast<char*>(trailer), 8);
  STOKE_RETURN_IF_ERROR(file_->Append(AsBytes(buf)));
  if (options_.sync_on_close) STOKE_RETURN_IF_ERROR(file_->Sync());
  return file_->Close();
}

}  // namespace stoke
