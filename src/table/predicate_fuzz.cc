// libFuzzer target: the --where predicate parser. Whatever parses must print a canonical form that
// parses again to the same canonical form, and evaluating or skipping must not crash.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "table/predicate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto p = stoke::Predicate::Parse(text);
  if (!p.ok()) {
    if (p.status().code() != stoke::StatusCode::kInvalidArgument &&
        p.status().code() != stoke::StatusCode::kUnsupported) {
      __builtin_trap();
    }
    return 0;
  }
  std::string once = p->ToString();
  auto q = stoke::Predicate::Parse(once);
  if (!q.ok() || q->ToString() != once || q->columns() != p->columns()) __builtin_trap();
  // Unknown statistics must never allow skipping (unless nothing can be TRUE regardless, which
  // MayMatch may only claim from literals; with no stats and rows present it has no such claim for
  // a predicate without NULL literals, so only check it does not crash).
  (void)p->MayMatch({}, 10);
  // Binding converts date, timestamp and decimal literals from their text (one-letter names, so that
  // random input meets them).
  auto column = [](const char* name, stoke::parquet::Type type, stoke::LogicalType logical) {
    stoke::ColumnSpec c;
    c.name = name;
    c.type = type;
    c.logical = logical;
    c.optional = true;
    if (logical == stoke::LogicalType::kDecimal) {
      c.precision = 10;
      c.scale = 2;
    }
    return c;
  };
  using stoke::LogicalType;
  using T = stoke::parquet::Type;
  const std::vector<stoke::ColumnSpec> schema = {
      column("x", T::kInt64, LogicalType::kNone), column("d", T::kInt32, LogicalType::kDate),
      column("t", T::kInt64, LogicalType::kTimestamp), column("p", T::kInt64, LogicalType::kDecimal)};
  if (p->Bind(schema).ok()) {
    stoke::Predicate::ColumnStats st{stoke::Value{int64_t{1}}, stoke::Value{int64_t{100}}, 0};
    (void)p->MayMatch({{"x", st}, {"d", st}, {"t", st}, {"p", st}}, 10);
  }
  return 0;
}
