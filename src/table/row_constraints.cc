#include "table/row_constraints.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <optional>

#include "format/parquet_reader.h"

namespace stoke {
namespace {

// `sql` with Spark's `backquoted` identifiers as the predicate language's "quoted" ones (a `` in
// one is a backquote, a " is doubled); string literals are copied as they are. InvalidArgument,
// saying why, for what Spark reads otherwise than the predicate language would: a "double-quoted"
// token (a string in Spark, a column here), a backslash in a string literal (an escape in Spark) and
// a literal right after another (joined in Spark; '' is a quote here).
Result<std::string> WithQuotedIdentifiers(std::string_view sql) {
  std::string out;
  for (size_t i = 0; i < sql.size(); ++i) {
    const char c = sql[i];
    if (c == '"') return Status::InvalidArgument("a \"double-quoted\" token, which Spark reads as a string");
    if (c == '\'') {
      const size_t end = sql.find('\'', i + 1);
      if (end == std::string_view::npos) return Status::InvalidArgument("a string literal without its closing quote");
      const std::string_view literal = sql.substr(i, end - i + 1);
      if (literal.find('\\') != std::string_view::npos) {
        return Status::InvalidArgument("a backslash in a string literal, an escape in Spark");
      }
      const size_t next = sql.find_first_not_of(" \t\r\n", end + 1);
      if (next != std::string_view::npos && sql[next] == '\'') {
        return Status::InvalidArgument("adjacent string literals, which Spark joins ('' is no quote in Spark)");
      }
      out.append(literal);
      i = end;
      continue;
    }
    if (c != '`') {
      out += c;
      continue;
    }
    out += '"';
    for (++i; i < sql.size(); ++i) {
      if (sql[i] == '`' && i + 1 < sql.size() && sql[i + 1] == '`') {
        out += '`';
        ++i;
      } else if (sql[i] == '`') {
        break;
      } else {
        out += sql[i] == '"' ? "\"\"" : std::string(1, sql[i]);
      }
    }
    out += '"';
  }
  return out;
}

// The invariants of the top-level fields of `schema_string`: (column, expression). Corruption for
// one that is not {"expression": {"expression": "<text>"}}; Unsupported for one on a nested field.
Result<std::vector<std::pair<std::string, std::string>>> Invariants(const std::string& schema_string,
                                                                    std::string_view where) {
  std::vector<std::pair<std::string, std::string>> out;
  if (schema_string.find("\"delta.invariants\"") == std::string::npos) return out;
  const auto schema = nlohmann::json::parse(schema_string, nullptr, /*allow_exceptions=*/false);
  if (!schema.is_object() || !schema.contains("fields") || !schema["fields"].is_array()) {
    return Status::Corruption(fmt::format("{}: the schema is not a struct of fields", where));
  }
  size_t found = 0;
  for (const auto& f : schema["fields"]) {
    if (!f.is_object() || !f.contains("metadata") || !f["metadata"].is_object()) continue;
    auto it = f["metadata"].find("delta.invariants");
    if (it == f["metadata"].end()) continue;
    ++found;
    const std::string column = f.contains("name") && f["name"].is_string() ? f["name"].get<std::string>() : "";
    const auto body = it->is_string() ? nlohmann::json::parse(it->get<std::string>(), nullptr, false) : nlohmann::json();
    const nlohmann::json* expr = body.is_object() && body.contains("expression") ? &body["expression"] : nullptr;
    if (expr == nullptr || !expr->is_object() || !expr->contains("expression") || !(*expr)["expression"].is_string()) {
      return Status::Corruption(fmt::format("{}: the invariant of column '{}' is not {{\"expression\": {{\"expression\": "
                                            "\"<SQL>\"}}}}: {}",
                                            where, column, it->dump()));
    }
    out.emplace_back(column, (*expr)["expression"].get<std::string>());
  }
  // Each field's metadata key appears once in the text: more of them sit on nested fields.
  size_t keys = 0;
  for (size_t at = 0; (at = schema_string.find("\"delta.invariants\"", at)) != std::string::npos; ++at) ++keys;
  if (keys > found) return Status::Unsupported(fmt::format("{}: an invariant on a nested field", where));
  return out;
}

}  // namespace

Result<RowConstraints> RowConstraints::FromMetadata(const delta::Metadata& metadata, const std::vector<ColumnSpec>& columns,
                                                    const std::vector<std::string>& partition_columns,
                                                    std::string_view command, std::string_view table) {
  const std::string where = fmt::format("{}: table '{}'", command, table);
  auto refuse = [&](const std::string& rule, const std::string& expression, std::string_view why) {
    return Status::Unsupported(fmt::format("{} has the {} ({}), which stoke cannot check on new rows: {}; nothing was "
                                           "written",
                                           where, rule, expression, why));
  };
  std::vector<std::pair<std::string, std::string>> stated;  // (rule, expression)
  for (const auto& [key, value] : metadata.configuration) {
    if (key.rfind("delta.constraints.", 0) == 0) {
      stated.emplace_back(fmt::format("CHECK constraint '{}'", key.substr(18)), value);
    }
  }
  auto invariants = Invariants(metadata.schema_string, where);
  if (!invariants.ok() && invariants.status().code() == StatusCode::kUnsupported) {
    return refuse("invariant", "on a nested field", "stoke checks invariants of top-level columns");
  }
  STOKE_RETURN_IF_ERROR(invariants.status());
  for (auto& [column, expression] : *invariants) stated.emplace_back(fmt::format("invariant of column '{}'", column), expression);

  RowConstraints out;
  for (const ColumnSpec& c : columns) {
    if (c.file_name() != c.name) out.file_names_[c.name] = c.file_name();
  }
  for (auto& [rule, expression] : stated) {
    auto text = WithQuotedIdentifiers(expression);
    if (!text.ok()) return refuse(rule, expression, text.status().message());
    auto parsed = Predicate::Parse(*text);
    if (!parsed.ok()) return refuse(rule, expression, parsed.status().message());
    for (const std::string& c : parsed->columns()) {
      if (std::find(partition_columns.begin(), partition_columns.end(), c) != partition_columns.end()) {
        return refuse(rule, expression, fmt::format("column '{}' is a partition column", c));
      }
    }
    Status bound = parsed->Bind(columns);
    if (!bound.ok()) return refuse(rule, expression, bound.message());
    out.rules_.push_back({std::move(rule), std::move(expression), std::move(*parsed)});
  }
  return out;
}

namespace {

// "row 3 (file 'volume_000003.npy', index 0)": the row and, where the file has them, its `file` and
// `index` values (in `values`, read for row group rows starting at `first`).
std::string DescribeRow(const std::map<std::string, ColumnValues>& values, int64_t first, size_t r) {
  std::string out = fmt::format("row {}", first + static_cast<int64_t>(r));
  std::vector<std::string> named;
  auto file = values.find("file");
  if (file != values.end() && file->second.defined.empty()) {
    if (const auto* v = std::get_if<std::vector<std::string>>(&file->second.values); v != nullptr && r < v->size()) {
      named.push_back(fmt::format("file '{}'", (*v)[r]));
    }
  }
  auto index = values.find("index");
  if (index != values.end() && index->second.defined.empty()) {
    if (const auto* v = std::get_if<std::vector<int64_t>>(&index->second.values); v != nullptr && r < v->size()) {
      named.push_back(fmt::format("index {}", (*v)[r]));
    }
  }
  return named.empty() ? out : fmt::format("{} ({})", out, fmt::join(named, ", "));
}

}  // namespace

Status RowConstraints::CheckFile(Storage& storage, const std::string& path) const {
  if (rules_.empty()) return Status::OK();
  STOKE_ASSIGN_OR_RETURN(auto reader, ParquetReader::Open(storage, path));
  std::vector<std::string> needed = {"file", "index"};
  for (const Rule& rule : rules_) needed.insert(needed.end(), rule.predicate.columns().begin(), rule.predicate.columns().end());
  int64_t first = 0;
  for (int g = 0; g < reader->num_row_groups(); ++g) {
    const int64_t rows = reader->metadata().row_groups[g].num_rows;
    std::map<std::string, ColumnValues> values;
    for (const std::string& name : needed) {
      if (values.count(name)) continue;
      auto renamed = file_names_.find(name);
      auto column = reader->FindColumn(renamed == file_names_.end() ? name : renamed->second);
      if (!column.ok()) continue;  // `file` and `index` are optional; a missing rule column fails in Evaluate
      STOKE_ASSIGN_OR_RETURN(values[name], reader->ReadColumnChunk(g, *column));
    }
    std::map<std::string, const ColumnValues*> by_name;
    for (const auto& [name, v] : values) by_name[name] = &v;
    for (const Rule& rule : rules_) {
      std::vector<uint8_t> keep;
      STOKE_RETURN_IF_ERROR(rule.predicate.Evaluate(by_name, static_cast<size_t>(rows), &keep));
      auto bad = std::find(keep.begin(), keep.end(), 0);
      if (bad == keep.end()) continue;
      return Status::InvalidArgument(fmt::format("{}: {} violates the table's {} ({}): it is false or null there",
                                                 path, DescribeRow(values, first, static_cast<size_t>(bad - keep.begin())),
                                                 rule.name, rule.expression));
    }
    first += rows;
  }
  return Status::OK();
}

}  // namespace stoke
