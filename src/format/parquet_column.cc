#include "format/parquet_column.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace stoke {

int64_t TensorSpec::num_bytes() const {
  int64_t n = static_cast<int64_t>(DTypeSize(dtype));
  for (int64_t d : shape) n *= d;
  return n;
}

size_t ColumnValues::num_values() const {
  return std::visit([](const auto& v) { return v.size(); }, values);
}

void AppendColumnValues(ColumnValues* dst, ColumnValues src) {
  if (!src.defined.empty() || !dst->defined.empty()) {
    if (dst->defined.empty()) dst->defined.assign(dst->num_values(), 1);
    if (src.defined.empty()) src.defined.assign(src.num_values(), 1);
    dst->defined.insert(dst->defined.end(), src.defined.begin(), src.defined.end());
  }
  std::visit(
      [&](auto& d) {
        auto& s = std::get<std::decay_t<decltype(d)>>(src.values);
        d.insert(d.end(), std::make_move_iterator(s.begin()), std::make_move_iterator(s.end()));
      },
      dst->values);
}

ColumnValues TakeRows(const ColumnValues& src, const std::vector<size_t>& rows) {
  ColumnValues out{ValueVector(), {}};
  // Position of each row's value among the present values (-1: null).
  std::vector<int64_t> value_of;
  if (!src.defined.empty()) {
    value_of.resize(src.defined.size());
    int64_t next = 0;
    for (size_t r = 0; r < src.defined.size(); ++r) value_of[r] = src.defined[r] ? next++ : -1;
  }
  std::visit(
      [&](const auto& in) {
        std::decay_t<decltype(in)> taken;
        taken.reserve(rows.size());
        for (size_t r : rows) {
          int64_t v = value_of.empty() ? static_cast<int64_t>(r) : value_of[r];
          if (!src.defined.empty()) out.defined.push_back(v >= 0);
          if (v >= 0) taken.push_back(in[static_cast<size_t>(v)]);
        }
        out.values = std::move(taken);
      },
      src.values);
  return out;
}

ValueVector EmptyValuesFor(parquet::Type type) {
  switch (type) {
    case parquet::Type::kBoolean: return std::vector<uint8_t>{};
    case parquet::Type::kInt32: return std::vector<int32_t>{};
    case parquet::Type::kInt64: return std::vector<int64_t>{};
    case parquet::Type::kFloat: return std::vector<float>{};
    case parquet::Type::kDouble: return std::vector<double>{};
    default: return std::vector<std::string>{};
  }
}

std::string TensorSpecsToJson(const std::vector<ColumnSpec>& columns) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& c : columns) {
    if (!c.tensor) continue;
    j[c.file_name()] = {{"dtype", std::string(DTypeName(c.tensor->dtype))}, {"shape", c.tensor->shape}};
  }
  return j.dump();
}

std::string BlobColumnsToJson(const std::vector<ColumnSpec>& columns) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& c : columns) {
    if (c.blob) j.push_back(c.file_name());
  }
  return j.dump();
}

Result<std::set<std::string>> BlobColumnsFromJson(std::string_view json, std::string_view context) {
  nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  std::set<std::string> out;
  if (j.is_array()) {
    for (const auto& name : j) {
      if (!name.is_string()) break;
      out.insert(name.get<std::string>());
    }
    if (out.size() == j.size()) return out;
  }
  return Status::Corruption(fmt::format("{}: {} metadata: expected a JSON array of column names", context, kBlobsMetadataKey));
}

Result<std::map<std::string, TensorSpec>> TensorSpecsFromJson(std::string_view json, std::string_view context) {
  auto bad = [&](std::string_view why) {
    return Status::Corruption(fmt::format("{}: {} metadata: {}", context, kTensorsMetadataKey, why));
  };
  nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return bad("not valid JSON");
  if (!j.is_object()) return bad("expected a JSON object");
  std::map<std::string, TensorSpec> out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const auto& v = it.value();
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v["dtype"].is_string() ||
        !v["shape"].is_array()) {
      return bad(fmt::format("column '{}' needs a string \"dtype\" and an array \"shape\"", it.key()));
    }
    TensorSpec spec;
    auto dtype = ParseDType(v["dtype"].get<std::string>());
    if (!dtype.ok()) return bad(dtype.status().message());
    spec.dtype = *dtype;
    int64_t elements = 1;
    for (const auto& d : v["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) return bad(fmt::format("column '{}': bad shape", it.key()));
      int64_t dim = d.get<int64_t>();
      if (__builtin_mul_overflow(elements, dim, &elements) || elements > (int64_t{1} << 40)) {
        return bad(fmt::format("column '{}': shape too large", it.key()));
      }
      spec.shape.push_back(dim);
    }
    out[it.key()] = std::move(spec);
  }
  return out;
}

}  // namespace stoke
