// Identity columns (identity_columns.h).
#include "table/identity_columns.h"

#include <fmt/format.h>

#include <limits>
#include <nlohmann/json.hpp>

namespace stoke::delta {
namespace {

using ordered_json = nlohmann::ordered_json;

// The whole number at `key` of field metadata `md`, nullopt when absent; Corruption when not one.
Result<std::optional<int64_t>> WholeNumber(const ordered_json& md, const char* key, std::string_view where,
                                           const std::string& column) {
  auto it = md.find(key);
  if (it == md.end()) return std::optional<int64_t>();
  const bool too_large = it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  if (!it->is_number_integer() || too_large) {
    return Status::Corruption(fmt::format("{}: column '{}': {} is {}, not a whole number of 64 bits", where, column, key,
                                          it->dump()));
  }
  return std::optional<int64_t>(it->get<int64_t>());
}

}  // namespace

Result<std::vector<IdentityColumn>> IdentityColumns(std::string_view schema_string, std::string_view where) {
  std::vector<IdentityColumn> out;
  if (schema_string.find("\"delta.identity.") == std::string_view::npos) return out;
  const auto schema = ordered_json::parse(schema_string, nullptr, /*allow_exceptions=*/false);
  if (!schema.is_object() || !schema.contains("fields") || !schema["fields"].is_array()) return out;
  for (const auto& f : schema["fields"]) {
    if (!f.is_object() || !f.contains("metadata") || !f["metadata"].is_object()) continue;
    const ordered_json& md = f["metadata"];
    if (!md.contains("delta.identity.start") && !md.contains("delta.identity.step")) continue;
    IdentityColumn c;
    c.name = f.contains("name") && f["name"].is_string() ? f["name"].get<std::string>() : "";
    STOKE_ASSIGN_OR_RETURN(auto start, WholeNumber(md, "delta.identity.start", where, c.name));
    STOKE_ASSIGN_OR_RETURN(auto step, WholeNumber(md, "delta.identity.step", where, c.name));
    STOKE_ASSIGN_OR_RETURN(c.high_water_mark, WholeNumber(md, "delta.identity.highWaterMark", where, c.name));
    c.start = start.value_or(1);
    c.step = step.value_or(1);
    if (c.step == 0) return Status::Corruption(fmt::format("{}: column '{}': delta.identity.step is 0", where, c.name));
    auto explicit_insert = md.find("delta.identity.allowExplicitInsert");
    c.allow_explicit_insert = explicit_insert != md.end() && explicit_insert->is_boolean() && explicit_insert->get<bool>();
    out.push_back(std::move(c));
  }
  return out;
}

Result<int64_t> FirstIdentityValue(const IdentityColumn& column, int64_t used, int64_t count, std::string_view where) {
  if (column.step < 0) {
    return Status::Unsupported(fmt::format("{}: identity column '{}' counts down (delta.identity.step {}); stoke "
                                           "assigns ascending values; nothing was written",
                                           where, column.name, column.step));
  }
  const __int128 step = column.step;
  __int128 floor = used;  // the value must be above this
  if (column.high_water_mark && *column.high_water_mark > floor) floor = *column.high_water_mark;
  __int128 k = 0;
  if (floor >= column.start) k = (floor - column.start) / step + 1;
  const __int128 first = column.start + k * step;
  const __int128 last = first + (count > 0 ? count - 1 : 0) * step;
  if (last > std::numeric_limits<int64_t>::max()) {
    return Status::InvalidArgument(fmt::format("{}: identity column '{}': {} more values of step {} above {} overflow "
                                               "64 bits; nothing was written",
                                               where, column.name, count, column.step, static_cast<int64_t>(floor)));
  }
  return static_cast<int64_t>(first);
}

std::string WithHighWaterMark(std::string_view schema_string, std::string_view column, int64_t value) {
  auto schema = ordered_json::parse(schema_string, nullptr, /*allow_exceptions=*/false);
  if (!schema.is_object() || !schema.contains("fields") || !schema["fields"].is_array()) return std::string(schema_string);
  for (auto& f : schema["fields"]) {
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string() || f["name"] != column) continue;
    if (!f.contains("metadata") || !f["metadata"].is_object()) f["metadata"] = ordered_json::object();
    f["metadata"]["delta.identity.highWaterMark"] = value;
  }
  return schema.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

}  // namespace stoke::delta
