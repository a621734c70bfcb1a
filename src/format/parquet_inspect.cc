// `stoke inspect` and `stoke cat` over a Parquet file.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/progress.h"
#include "format/logical_value.h"
#include "format/parquet_nested.h"
#include "format/parquet_reader.h"
#include "format/parquet_writer.h"
#include "format/row_printer.h"
#include "io/uri.h"
#include "stoke/tools.h"

namespace stoke {
namespace {

using parquet::Type;

// At most `max` bytes of `s`, cut at a UTF-8 character boundary, with "..." when shortened.
std::string Shorten(const std::string& s, size_t max) {
  if (s.size() <= max) return s;
  size_t n = max - 3;
  while (n > 0 && (static_cast<uint8_t>(s[n]) & 0xC0) == 0x80) --n;  // not inside a character
  return s.substr(0, n) + "...";
}

// JSON output: invalid UTF-8 (other writers' STRING columns may hold any bytes) becomes U+FFFD
// instead of an exception.
std::string DumpJson(const nlohmann::ordered_json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

// The shortest text that reads back as the same value of its own type (float or double).
template <typename T>
std::string FormatFloat(T d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  return fmt::format("{}", d);
}

// A statistics value (PLAIN-encoded) as text.
std::string StatText(const LeafColumn& col, const std::string& v) {
  auto p = reinterpret_cast<const uint8_t*>(v.data());
  switch (col.type) {
    case Type::kBoolean: return v.size() == 1 ? (v[0] ? "true" : "false") : "?";
    case Type::kInt32: return v.size() == 4 ? fmt::format("{}", LoadLE<int32_t>(p)) : "?";
    case Type::kInt64: return v.size() == 8 ? fmt::format("{}", LoadLE<int64_t>(p)) : "?";
    case Type::kFloat: return v.size() == 4 ? FormatFloat(LoadLE<float>(p)) : "?";
    case Type::kDouble: return v.size() == 8 ? FormatFloat(LoadLE<double>(p)) : "?";
    default:
      if (col.is_string) return Shorten(v, 40);
      return BinaryCell(v);
  }
}

std::string TypeText(const parquet::FileMetaData& m, const LeafColumn& col) {
  std::string s(parquet::TypeName(col.type));
  if (col.type == Type::kFixedLenByteArray) s += fmt::format("({})", col.type_length);
  const auto& e = m.schema[col.schema_index];
  s += " ";
  s += parquet::RepetitionName(e.repetition.value_or(parquet::Repetition::kRequired));
  if (col.is_string) s += " STRING";
  if (col.tensor) s += fmt::format(" tensor {}[{}]", DTypeName(col.tensor->dtype), fmt::join(col.tensor->shape, ","));
  if (col.blob) s += " blob";
  return s;
}

std::string EncodingsText(const std::vector<parquet::Encoding>& encs) {
  std::vector<std::string_view> names;
  for (auto e : encs) names.push_back(parquet::EncodingName(e));
  return fmt::format("{}", fmt::join(names, ","));
}

}  // namespace

namespace {

using Json = nlohmann::ordered_json;

// A column chunk's page list (`inspect --pages`): a line per page in `text`, and jc["page_list"].
void DescribePages(const std::vector<PageInfo>& pages, std::ostringstream& text, Json* jc) {
  Json jp = Json::array();
  for (const auto& p : pages) {
    const auto& h = p.header;
    int64_t values = h.data_page_header ? h.data_page_header->num_values
                     : h.data_page_header_v2 ? h.data_page_header_v2->num_values
                     : h.dictionary_page_header ? h.dictionary_page_header->num_values : 0;
    parquet::Encoding enc = h.data_page_header ? h.data_page_header->encoding
                            : h.data_page_header_v2 ? h.data_page_header_v2->encoding
                            : h.dictionary_page_header ? h.dictionary_page_header->encoding : parquet::Encoding::kPlain;
    text << fmt::format("      page @{:<12} {:<15} values {:<7} header {:>4} B  stored {:>10} B  raw {:>10} B  {:<16} crc {}\n",
                        p.offset, parquet::PageTypeName(h.type), values, p.header_size, h.compressed_page_size,
                        h.uncompressed_page_size, parquet::EncodingName(enc),
                        h.crc ? fmt::format("{:08x}", static_cast<uint32_t>(*h.crc)) : "none");
    jp.push_back({{"offset", p.offset}, {"type", parquet::PageTypeName(h.type)}, {"values", values},
                  {"header_size", p.header_size}, {"compressed_size", h.compressed_page_size},
                  {"uncompressed_size", h.uncompressed_page_size}, {"encoding", parquet::EncodingName(enc)},
                  {"crc", h.crc.has_value()}});
  }
  (*jc)["page_list"] = jp;
}

// The codec choice stoke recorded in a chunk's key-value metadata, when there is one.
void DescribeCodecChoice(const parquet::ColumnMetaData& cm, size_t name_w, std::ostringstream& text, Json* jc) {
  for (const auto& kv : cm.key_value_metadata) {
    if (kv.key != kCodecChoiceKey || !kv.value) continue;
    auto choice = Json::parse(*kv.value, nullptr, false);
    if (choice.is_discarded()) continue;
    (*jc)["codec_choice"] = choice;
    const std::string why = CodecChoiceText(*kv.value);
    if (!why.empty()) text << fmt::format("  {:<{}}  codec chosen: {}\n", "", name_w, why);
  }
}

// One column chunk of row group g: a line in `text`, an entry of jg["columns"].
Status DescribeChunk(const ParquetReader& reader, int g, size_t c, size_t name_w, bool list_pages,
                     std::ostringstream& text, Json* jg) {
  const auto& cols = reader.columns();
  const auto& cm = *reader.metadata().row_groups[g].columns[c].meta_data;
  STOKE_ASSIGN_OR_RETURN(auto pages, reader.ListPages(g, c));
  STOKE_ASSIGN_OR_RETURN(auto oi, reader.ReadOffsetIndex(g, c));
  STOKE_ASSIGN_OR_RETURN(auto ci, reader.ReadColumnIndex(g, c));
  std::string range = "-";
  std::string nulls = "-";
  if (cm.statistics) {
    const auto& s = *cm.statistics;
    auto lo = s.min_value ? s.min_value : s.min;
    auto hi = s.max_value ? s.max_value : s.max;
    if (lo && hi && !cols[c].tensor && !cols[c].blob) range = StatText(cols[c], *lo) + " .. " + StatText(cols[c], *hi);
    if (s.null_count) nulls = std::to_string(*s.null_count);
  }
  double ratio = cm.total_compressed_size > 0 ? static_cast<double>(cm.total_uncompressed_size) / cm.total_compressed_size : 0;
  text << fmt::format("  {:<{}}  {:<12} {:<22} {:>7} {:>11} {:>12} {:>6.2f}  {:>6}  {:<5} {:<5}  {}\n", cols[c].name, name_w,
                      parquet::CodecName(cm.codec), EncodingsText(cm.encodings), pages.size(),
                      FormatBytes(static_cast<uint64_t>(cm.total_compressed_size)),
                      FormatBytes(static_cast<uint64_t>(cm.total_uncompressed_size)), ratio, nulls, oi ? "yes" : "no",
                      ci ? "yes" : "no", range);
  Json jc = {{"name", cols[c].name},
             {"codec", parquet::CodecName(cm.codec)},
             {"encodings", EncodingsText(cm.encodings)},
             {"num_values", cm.num_values},
             {"compressed_size", cm.total_compressed_size},
             {"uncompressed_size", cm.total_uncompressed_size},
             {"pages", pages.size()},
             {"offset_index", oi.has_value()},
             {"column_index", ci.has_value()}};
  DescribeCodecChoice(cm, name_w, text, &jc);
  if (cm.statistics && cm.statistics->null_count) jc["null_count"] = *cm.statistics->null_count;
  if (range != "-") jc["range"] = range;
  if (list_pages) DescribePages(pages, text, &jc);
  (*jg)["columns"].push_back(jc);
  return Status::OK();
}

// The file's header: size, writer, rows, key-value metadata and schema. Returns the name column's width.
size_t DescribeFile(const std::string& path, const ParquetReader& reader, std::ostringstream& text, Json* j) {
  const auto& m = reader.metadata();
  const auto& cols = reader.columns();
  (*j)["file"] = path;
  (*j)["size"] = reader.file_size();
  (*j)["footer_size"] = reader.footer_size();
  (*j)["created_by"] = m.created_by.value_or("");
  (*j)["rows"] = m.num_rows;
  (*j)["row_groups"] = Json::array();
  Json kv = Json::object();
  for (const auto& e : m.key_value_metadata) kv[e.key] = e.value.value_or("");
  (*j)["metadata"] = kv;
  (*j)["schema"] = Json::array();
  for (const auto& c : cols) (*j)["schema"].push_back({{"name", c.name}, {"type", TypeText(m, c)}});
  text << fmt::format("file        {}\n", path);
  text << fmt::format("size        {} ({} bytes), footer {} bytes\n", FormatBytes(reader.file_size()), reader.file_size(),
                      reader.footer_size());
  text << fmt::format("created_by  {}\n", m.created_by.value_or("(not set)"));
  text << fmt::format("rows        {} in {} row group{}\n", m.num_rows, m.row_groups.size(), m.row_groups.size() == 1 ? "" : "s");
  for (const auto& e : m.key_value_metadata) text << fmt::format("metadata    {} = {}\n", e.key, Shorten(e.value.value_or(""), 200));
  text << "schema\n";
  size_t name_w = 6;
  for (const auto& c : cols) name_w = std::max(name_w, c.name.size());
  for (const auto& c : cols) text << fmt::format("  {:<{}}  {}\n", c.name, name_w, TypeText(m, c));
  return name_w;
}

}  // namespace

Result<std::string> InspectParquetFile(const std::string& path, const InspectFileOptions& options) {
  STOKE_ASSIGN_OR_RETURN(StorageLocation where, ResolveStorageLocation(path));
  STOKE_ASSIGN_OR_RETURN(auto reader, ParquetReader::Open(*where.storage, where.path));
  Json j;
  std::ostringstream text;
  const size_t name_w = DescribeFile(path, *reader, text, &j);
  for (int g = 0; g < reader->num_row_groups(); ++g) {
    const auto& rg = reader->metadata().row_groups[g];
    Json jg = {{"rows", rg.num_rows}, {"first_row", reader->row_group_starts()[g]},
               {"total_byte_size", rg.total_byte_size}, {"columns", Json::array()}};
    text << fmt::format("row group {}: {} rows, {} uncompressed, first row {}\n", g, rg.num_rows,
                        FormatBytes(static_cast<uint64_t>(rg.total_byte_size)), reader->row_group_starts()[g]);
    text << fmt::format("  {:<{}}  {:<12} {:<22} {:>7} {:>11} {:>12} {:>6}  {:>6}  {:<5} {:<5}  {}\n", "column", name_w, "codec",
                        "encodings", "pages", "compressed", "uncompressed", "ratio", "nulls", "oidx", "cidx", "min .. max");
    for (size_t c = 0; c < reader->columns().size(); ++c) {
      STOKE_RETURN_IF_ERROR(DescribeChunk(*reader, g, c, name_w, options.pages, text, &jg));
    }
    j["row_groups"].push_back(jg);
  }
  if (options.format == DescriptionFormat::kJson) return DumpJson(j, 2) + "\n";
  return std::move(text).str();
}

namespace {

// One column `stoke cat` prints: a flat leaf, or a top-level struct, list or map as JSON text.
struct CatColumn {
  ColumnSpec spec;        // dates, timestamps and decimals by the file's annotations
  size_t leaf = 0;        // flat: the leaf column
  bool nested = false;    // a nested top-level field, read by its name
};

// The file's top-level fields, in order: leaves as they are, nested fields whole. Flat files whose
// shape SchemaTree does not recognise are printed leaf by leaf; where such a file has repeated
// leaves, SchemaTree's reason is the error.
Result<std::vector<std::pair<std::string, bool>>> TopLevelFields(const ParquetReader& reader) {
  std::vector<std::pair<std::string, bool>> out;  // name, nested
  auto tree = SchemaTree(reader);
  if (!tree.ok()) {
    for (const auto& c : reader.columns()) {
      if (c.max_repetition_level > 0) return tree.status().WithContext(reader.path());
      out.emplace_back(c.name, false);
    }
    return out;
  }
  for (const SchemaNode& f : tree->children) out.emplace_back(f.name, f.kind != SchemaNode::Kind::kLeaf);
  return out;
}

CatColumn LeafCatColumn(const ParquetReader& reader, size_t leaf) {
  const LeafColumn& col = reader.columns()[leaf];
  CatColumn c;
  c.spec = ColumnOfStored(reader.metadata().schema[col.schema_index]);
  c.spec.name = col.name;
  c.spec.is_string = col.is_string;
  c.leaf = leaf;
  return c;
}

CatColumn NestedCatColumn(const std::string& name) {
  CatColumn c;
  c.spec.name = name;
  c.spec.type = Type::kByteArray;
  c.spec.optional = true;
  c.nested = true;
  return c;
}

// The columns `--columns` names (a top-level field, or a leaf by its dotted path), or every
// top-level field.
Result<std::vector<CatColumn>> CatColumns(const ParquetReader& reader, const std::vector<std::string>& names) {
  STOKE_ASSIGN_OR_RETURN(const auto fields, TopLevelFields(reader));
  std::vector<CatColumn> out;
  auto add = [&](const std::string& name, bool nested) -> Status {
    if (nested) {
      out.push_back(NestedCatColumn(name));
      return Status::OK();
    }
    STOKE_ASSIGN_OR_RETURN(size_t leaf, reader.FindColumn(name));
    out.push_back(LeafCatColumn(reader, leaf));
    return Status::OK();
  };
  for (const auto& [name, nested] : fields) {
    if (names.empty()) STOKE_RETURN_IF_ERROR(add(name, nested));
  }
  for (const std::string& name : names) {
    auto it = std::find_if(fields.begin(), fields.end(), [&](const auto& f) { return f.first == name; });
    STOKE_RETURN_IF_ERROR(add(name, it != fields.end() && it->second));
  }
  return out;
}

// The values of `c` in row group g, as CellText prints them.
Result<ColumnValues> ReadCatColumn(const ParquetReader& reader, int g, const CatColumn& c) {
  if (!c.nested) {
    STOKE_ASSIGN_OR_RETURN(ColumnValues values, reader.ReadColumnChunk(g, c.leaf));
    const parquet::SchemaElement& stored = reader.metadata().schema[reader.columns()[c.leaf].schema_index];
    STOKE_RETURN_IF_ERROR(ConvertToColumnType(stored, c.spec, &values, reader.path()));
    return values;
  }
  STOKE_ASSIGN_OR_RETURN(auto rows, ReadNestedField(reader, g, c.spec.name));
  ColumnValues out{std::vector<std::string>{}, std::vector<uint8_t>(rows.size(), 0)};
  auto& texts = std::get<std::vector<std::string>>(out.values);
  for (size_t r = 0; r < rows.size(); ++r) {
    if (rows[r].is_null()) continue;
    out.defined[r] = 1;
    texts.push_back(DumpJson(rows[r]));
  }
  return out;
}

}  // namespace

Result<TextRows> CatParquetRows(const std::string& path, const CatOptions& options) {
  STOKE_ASSIGN_OR_RETURN(StorageLocation where, ResolveStorageLocation(path));
  STOKE_ASSIGN_OR_RETURN(auto reader, ParquetReader::Open(*where.storage, where.path));
  STOKE_ASSIGN_OR_RETURN(const std::vector<CatColumn> columns, CatColumns(*reader, options.columns));
  if (options.offset < 0) return Status::InvalidArgument("cat: `offset` must not be negative");
  if (options.limit < kNoLimit) {
    return Status::InvalidArgument(fmt::format("cat: `limit` must be -1 (all) or at least 0, got {}", options.limit));
  }
  const int64_t begin = std::min(options.offset, reader->num_rows());
  const int64_t end = options.limit < 0 ? reader->num_rows() : std::min(reader->num_rows(), begin + options.limit);
  std::vector<PrintedColumn> pcols;
  TextRows out;
  for (const CatColumn& c : columns) {
    pcols.push_back({c.spec.name, c.spec.type, c.spec.is_string, c.spec.logical, c.spec.scale, c.nested});
    out.columns.push_back(TextColumnOf(pcols.back()));
  }
  const auto& starts = reader->row_group_starts();
  for (int g = 0; g < reader->num_row_groups(); ++g) {
    int64_t g0 = starts[g], g1 = starts[g + 1];
    if (g1 <= begin || g0 >= end) continue;
    std::vector<ColumnValues> values(columns.size());
    for (size_t s = 0; s < columns.size(); ++s) {
      STOKE_ASSIGN_OR_RETURN(values[s], ReadCatColumn(*reader, g, columns[s]));
    }
    std::vector<size_t> next(columns.size(), 0);  // index of the next present value per column
    for (int64_t r = g0; r < std::min(g1, end); ++r) {
      std::vector<std::optional<std::string>> row(columns.size());
      for (size_t s = 0; s < columns.size(); ++s) {
        bool present = values[s].defined.empty() || values[s].defined[r - g0];
        if (!present) continue;
        if (r >= begin) row[s] = CellText(pcols[s], values[s].values, next[s]);
        ++next[s];
      }
      if (r >= begin) out.rows.push_back(std::move(row));
    }
  }
  return out;
}

}  // namespace stoke
