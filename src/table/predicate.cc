#include "table/predicate.h"

#include "table/predicate_node.h"

#include "format/logical_value.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <set>
#include <utility>

namespace stoke {

namespace {

using predicate::Kind;
using predicate::Node;
using namespace predicate;  // the text helpers (predicate_node.h)

// ---------------------------------------------------------------------------------------------
// Three-valued logic. The encoding makes AND the minimum, OR the maximum and NOT 2 - v.
using Truth = uint8_t;
constexpr Truth kFalse = 0;
constexpr Truth kNull = 1;
constexpr Truth kTrue = 2;

// ---------------------------------------------------------------------------------------------
// Comparisons return -1, 0, 1, or kUnordered (NULL, NaN, or values of kinds that do not compare).
constexpr int kUnordered = 2;

int CompareInts(int64_t a, int64_t b) { return a < b ? -1 : (a > b ? 1 : 0); }

// Exact: no int64 -> double rounding (2^53 + 1 differs from 2^53).
int CompareIntReal(int64_t a, double d) {
  if (std::isnan(d)) return kUnordered;
  constexpr double kTwo63 = 9223372036854775808.0;  // exactly representable
  if (d >= kTwo63) return -1;
  if (d < -kTwo63) return 1;
  // d is in [-2^63, 2^63): its integral part converts to int64 without overflow.
  double t = std::trunc(d);
  int64_t ti = static_cast<int64_t>(t);
  if (a != ti) return a < ti ? -1 : 1;
  if (d > t) return -1;
  if (d < t) return 1;
  return 0;
}

int CompareReals(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return kUnordered;
  return a < b ? -1 : (a > b ? 1 : 0);
}

// Bytewise over unsigned bytes, then shorter first: Parquet's order for BYTE_ARRAY statistics.
int CompareBytes(std::string_view a, std::string_view b) {
  size_t n = std::min(a.size(), b.size());
  int c = n == 0 ? 0 : std::memcmp(a.data(), b.data(), n);
  if (c != 0) return c < 0 ? -1 : 1;
  return a.size() < b.size() ? -1 : (a.size() > b.size() ? 1 : 0);
}

int CompareInt(int64_t v, const Value& lit) {
  if (auto* i = std::get_if<int64_t>(&lit.v)) return CompareInts(v, *i);
  if (auto* d = std::get_if<double>(&lit.v)) return CompareIntReal(v, *d);
  return kUnordered;
}

int CompareReal(double v, const Value& lit) {
  if (auto* d = std::get_if<double>(&lit.v)) return CompareReals(v, *d);
  if (auto* i = std::get_if<int64_t>(&lit.v)) {
    int c = CompareIntReal(*i, v);
    return c == kUnordered ? c : -c;
  }
  return kUnordered;
}

int CompareBool(bool v, const Value& lit) {
  if (auto* b = std::get_if<bool>(&lit.v)) return CompareInts(v, *b);
  return kUnordered;
}

int CompareString(std::string_view v, const Value& lit) {
  if (auto* s = std::get_if<std::string>(&lit.v)) return CompareBytes(v, *s);
  return kUnordered;
}

int CompareValues(const Value& a, const Value& b) {
  switch (a.v.index()) {
    case 1: return CompareBool(std::get<bool>(a.v), b);
    case 2: return CompareInt(std::get<int64_t>(a.v), b);
    case 3: return CompareReal(std::get<double>(a.v), b);
    case 4: return CompareString(std::get<std::string>(a.v), b);
    default: return kUnordered;  // NULL
  }
}

// One element of a decoded column against a literal.
template <typename T>
int CompareElement(const T& x, const Value& lit) {
  if constexpr (std::is_same_v<T, uint8_t>) {
    return CompareBool(x != 0, lit);
  } else if constexpr (std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>) {
    return CompareInt(x, lit);
  } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    return CompareReal(x, lit);
  } else {
    static_assert(std::is_same_v<T, std::string>);
    return CompareString(x, lit);
  }
}

Truth ApplyOp(CompareOp op, int c) {
  if (c == kUnordered) return kNull;
  bool r = false;
  switch (op) {
    case CompareOp::kEq: r = c == 0; break;
    case CompareOp::kNe: r = c != 0; break;
    case CompareOp::kLt: r = c < 0; break;
    case CompareOp::kLe: r = c <= 0; break;
    case CompareOp::kGt: r = c > 0; break;
    case CompareOp::kGe: r = c >= 0; break;
  }
  return r ? kTrue : kFalse;
}

// The truth of leaf `n` for a present (non-null) value; `cmp(lit)` compares the value with lit.
template <typename Cmp>
Truth LeafTruth(const Node& n, const Cmp& cmp) {
  switch (n.kind) {
    case Kind::kCompare: return ApplyOp(n.op, cmp(n.literals[0]));
    case Kind::kBetween:
      return std::min(ApplyOp(CompareOp::kGe, cmp(n.literals[0])), ApplyOp(CompareOp::kLe, cmp(n.literals[1])));
    case Kind::kIn: {
      Truth r = kFalse;
      for (const Value& lit : n.literals) {
        r = std::max(r, ApplyOp(CompareOp::kEq, cmp(lit)));
        if (r == kTrue) break;
      }
      return r;
    }
    case Kind::kIsNull: return kFalse;
    default: return kNull;  // not a leaf
  }
}

// ---------------------------------------------------------------------------------------------
// Evaluation.

Status EvaluateLeaf(const Node& n, const ColumnValues& col, size_t num_rows, std::vector<Truth>* out) {
  out->resize(num_rows);
  Truth* dst = out->data();
  const Truth absent = n.kind == Kind::kIsNull ? kTrue : kNull;
  std::visit(
      [&](const auto& values) {
        using T = typename std::decay_t<decltype(values)>::value_type;
        auto truth_of = [&](const T& x) {
          return LeafTruth(n, [&](const Value& lit) { return CompareElement<T>(x, lit); });
        };
        if (col.defined.empty()) {
          for (size_t i = 0; i < num_rows; ++i) dst[i] = truth_of(values[i]);
        } else {
          size_t vi = 0;
          for (size_t i = 0; i < num_rows; ++i) dst[i] = col.defined[i] ? truth_of(values[vi++]) : absent;
        }
      },
      col.values);
  return Status::OK();
}

Status EvaluateNode(const Node& n, const std::map<std::string, const ColumnValues*>& columns, size_t num_rows,
                    std::vector<Truth>* out) {
  switch (n.kind) {
    case Kind::kAnd:
    case Kind::kOr: {
      STOKE_RETURN_IF_ERROR(EvaluateNode(*n.children[0], columns, num_rows, out));
      std::vector<Truth> other;
      for (size_t c = 1; c < n.children.size(); ++c) {
        STOKE_RETURN_IF_ERROR(EvaluateNode(*n.children[c], columns, num_rows, &other));
        if (n.kind == Kind::kAnd) {
          for (size_t i = 0; i < num_rows; ++i) (*out)[i] = std::min((*out)[i], other[i]);
        } else {
          for (size_t i = 0; i < num_rows; ++i) (*out)[i] = std::max((*out)[i], other[i]);
        }
      }
      return Status::OK();
    }
    case Kind::kNot:
      STOKE_RETURN_IF_ERROR(EvaluateNode(*n.children[0], columns, num_rows, out));
      for (Truth& t : *out) t = static_cast<Truth>(kTrue - t);
      return Status::OK();
    default: {
      // Evaluate checked every referenced column is present and well-formed.
      auto it = columns.find(n.column);
      if (it == columns.end() || it->second == nullptr) {
        return Status::Internal(fmt::format("`where`: column '{}' vanished during Evaluate", n.column));
      }
      return EvaluateLeaf(n, *it->second, num_rows, out);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Skipping from statistics: whether some row may make a node TRUE, and whether some row may make it
// FALSE (needed under NOT). Over-approximations: `true` means "cannot rule it out".
// may_be_null: whether some row may make it NULL (a null cell, a NaN, a NULL literal), which is
// neither TRUE nor FALSE: a node holds for every row only when it can be neither FALSE nor NULL.
struct Outcomes {
  bool may_be_true = true;
  bool may_be_false = true;
  bool may_be_null = true;
};

// `may_have_nan`: the column is FLOAT or DOUBLE, whose statistics leave NaN out of min/max.
Outcomes AnalyzeLeaf(const Node& n, const Predicate::ColumnStats& st, int64_t num_rows, bool may_have_nan) {
  const std::optional<int64_t>& nulls = st.null_count;
  bool may_have_null = num_rows != 0 && (!nulls || *nulls > 0);
  bool may_have_value = num_rows != 0 && !(nulls && num_rows >= 0 && *nulls >= num_rows);
  if (n.kind == Kind::kIsNull) return {may_have_null, may_have_value, false};
  if (!may_have_value) return {false, false, num_rows != 0};  // every row is NULL: the leaf is NULL everywhere
  const bool value_may_be_null = may_have_null || may_have_nan;

  // [min, max] bounds every present, non-NaN value (NaN rows make leaves NULL, never TRUE or FALSE).
  bool range_known = st.min && st.max;
  if (range_known) {
    int c = CompareValues(*st.min, *st.max);
    range_known = c == -1 || c == 0;
  }
  auto compare = [&](CompareOp op, const Value& lit) -> Outcomes {
    if (std::holds_alternative<std::monostate>(lit.v)) return {false, false, true};
    if (!range_known) return {true, true, true};
    int lo = CompareValues(*st.min, lit);
    int hi = CompareValues(*st.max, lit);
    if (lo == kUnordered || hi == kUnordered) return {true, true, true};
    bool all_equal = lo == 0 && hi == 0;
    bool may_equal = lo <= 0 && hi >= 0;
    const bool null = value_may_be_null;
    switch (op) {
      case CompareOp::kEq: return {may_equal, !all_equal, null};
      case CompareOp::kNe: return {!all_equal, may_equal, null};
      case CompareOp::kLt: return {lo < 0, hi >= 0, null};
      case CompareOp::kLe: return {lo <= 0, hi > 0, null};
      case CompareOp::kGt: return {hi > 0, lo <= 0, null};
      case CompareOp::kGe: return {hi >= 0, lo < 0, null};
    }
    return {true, true, true};
  };
  switch (n.kind) {
    case Kind::kCompare: return compare(n.op, n.literals[0]);
    case Kind::kBetween: {
      Outcomes a = compare(CompareOp::kGe, n.literals[0]);
      Outcomes b = compare(CompareOp::kLe, n.literals[1]);
      Outcomes r{a.may_be_true && b.may_be_true, a.may_be_false || b.may_be_false, a.may_be_null || b.may_be_null};
      if (CompareValues(n.literals[0], n.literals[1]) == 1) r.may_be_true = false;  // empty interval
      return r;
    }
    case Kind::kIn: {
      // x IN (a, b): TRUE if some a_i equals x, else NULL if x or some a_i is NULL, else FALSE.
      Outcomes r{false, true, false};
      for (const Value& lit : n.literals) {
        Outcomes o = compare(CompareOp::kEq, lit);
        r.may_be_true = r.may_be_true || o.may_be_true;
        r.may_be_false = r.may_be_false && o.may_be_false;
        r.may_be_null = r.may_be_null || o.may_be_null;
      }
      return r;
    }
    default: return {true, true, true};
  }
}

// NULL propagates through AND, OR and NOT only from a child that may be NULL, so may_be_null is the
// OR of the children's (an over-approximation: FALSE AND NULL is FALSE).
Outcomes Analyze(const Node& n, const std::map<std::string, Predicate::ColumnStats>& stats, int64_t num_rows,
                 const std::vector<std::string>& nan_columns) {
  switch (n.kind) {
    case Kind::kAnd: {
      Outcomes r{true, false, false};
      for (const auto& c : n.children) {
        Outcomes o = Analyze(*c, stats, num_rows, nan_columns);
        r.may_be_true = r.may_be_true && o.may_be_true;
        r.may_be_false = r.may_be_false || o.may_be_false;
        r.may_be_null = r.may_be_null || o.may_be_null;
      }
      return r;
    }
    case Kind::kOr: {
      Outcomes r{false, true, false};
      for (const auto& c : n.children) {
        Outcomes o = Analyze(*c, stats, num_rows, nan_columns);
        r.may_be_true = r.may_be_true || o.may_be_true;
        r.may_be_false = r.may_be_false && o.may_be_false;
        r.may_be_null = r.may_be_null || o.may_be_null;
      }
      return r;
    }
    case Kind::kNot: {
      Outcomes o = Analyze(*n.children[0], stats, num_rows, nan_columns);
      return {o.may_be_false, o.may_be_true, o.may_be_null};
    }
    default: {
      static const Predicate::ColumnStats kUnknown;
      auto it = stats.find(n.column);
      const bool nan = std::binary_search(nan_columns.begin(), nan_columns.end(), n.column);
      return AnalyzeLeaf(n, it == stats.end() ? kUnknown : it->second, num_rows, nan);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Binding.

enum class ValueClass : uint8_t { kNull, kBool, kNumber, kString };

ValueClass ClassOf(const Value& v) {
  switch (v.v.index()) {
    case 1: return ValueClass::kBool;
    case 2:
    case 3: return ValueClass::kNumber;
    case 4: return ValueClass::kString;
    default: return ValueClass::kNull;
  }
}

// A literal for a date, timestamp or decimal column in that column's canonical form (days,
// microseconds, unscaled integers: see LogicalType); InvalidArgument when it does not convert.
Result<Value> BindLogicalLiteral(const ColumnSpec& spec, const Value& lit, const PredicateNode::LiteralSource& src) {
  using LiteralKind = PredicateNode::LiteralKind;
  if (lit.v.index() == 0) return lit;  // NULL
  auto refuse = [&](std::string_view why) {
    return Status::InvalidArgument(fmt::format("`where`: column '{}' is {}; it cannot be compared with {}{}", spec.name,
                                               SparkTypeName(spec), LiteralText(lit, src), why));
  };
  const auto* text = std::get_if<std::string>(&lit.v);
  switch (spec.logical) {
    case LogicalType::kDate: {
      if (text == nullptr || src.kind == LiteralKind::kTimestamp) return refuse(" (use DATE 'yyyy-mm-dd')");
      auto days = ParseDate(*text);
      if (!days) return refuse(" (not a date yyyy-mm-dd)");
      return Value{*days};
    }
    case LogicalType::kTimestamp:
    case LogicalType::kTimestampNtz: {
      if (text == nullptr) return refuse(" (use TIMESTAMP 'yyyy-mm-dd hh:mm:ss')");
      auto micros = ParseTimestamp(*text);
      if (!micros) return refuse(" (not a timestamp yyyy-mm-dd[ hh:mm[:ss[.ffffff]]][Z|+hh:mm])");
      return Value{*micros};
    }
    case LogicalType::kDecimal: {
      if (spec.precision > kMaxInt64DecimalPrecision) return refuse(" (decimals above 18 digits are not comparable yet)");
      if (src.kind != LiteralKind::kPlain || src.text.empty()) return refuse(" (expected a number)");
      auto d = ParseDecimal(src.text, spec.scale);
      if (!d) return refuse(" (out of the decimal's range)");
      // A literal between two values of the column's scale compares as their midpoint would.
      if (d->exact && d->floor >= INT64_MIN && d->floor <= INT64_MAX) return Value{static_cast<int64_t>(d->floor)};
      return Value{static_cast<double>(d->floor) + (d->exact ? 0.0 : 0.5)};
    }
    default:
      return lit;
  }
}

// The class of values a plain column compares with; InvalidArgument for columns that compare with none.
Result<ValueClass> ColumnClass(const ColumnSpec& spec, const std::string& column) {
  switch (spec.type) {
    case parquet::Type::kBoolean: return ValueClass::kBool;
    case parquet::Type::kInt32:
    case parquet::Type::kInt64:
    case parquet::Type::kFloat:
    case parquet::Type::kDouble: return ValueClass::kNumber;
    case parquet::Type::kByteArray:
      if (spec.is_string) return ValueClass::kString;
      [[fallthrough]];
    default:
      return Status::InvalidArgument(fmt::format(
          "`where`: column '{}' is {} without a STRING annotation; `where` cannot compare it", column,
          parquet::TypeName(spec.type)));
  }
}

// Checks leaf `n`'s literals against its column and sets `bound`'s to the column's canonical form.
Status BindLeafLiterals(const Node& n, const ColumnSpec& spec, Node* bound) {
  if (spec.logical != LogicalType::kNone && spec.logical != LogicalType::kByte && spec.logical != LogicalType::kShort) {
    for (size_t i = 0; i < n.literals.size(); ++i) {
      STOKE_ASSIGN_OR_RETURN(bound->literals[i], BindLogicalLiteral(spec, n.literals[i], n.sources[i]));
    }
    return Status::OK();
  }
  STOKE_ASSIGN_OR_RETURN(ValueClass column_class, ColumnClass(spec, n.column));
  for (size_t i = 0; i < n.literals.size(); ++i) {
    ValueClass c = ClassOf(n.literals[i]);
    if (n.sources[i].kind != PredicateNode::LiteralKind::kPlain ||
        (c != ValueClass::kNull && c != column_class)) {
      return Status::InvalidArgument(fmt::format("`where`: column '{}' is {}{}; it cannot be compared with {}",
                                                 n.column, parquet::TypeName(spec.type),
                                                 spec.is_string ? " (STRING)" : "",
                                                 LiteralText(n.literals[i], n.sources[i])));
    }
  }
  return Status::OK();
}

// A copy of `n` with every leaf's literals in its column's canonical form; errors name the column.
Result<std::unique_ptr<Node>> BindNode(const Node& n, const std::map<std::string_view, const ColumnSpec*>& by_name,
                                       const std::vector<ColumnSpec>& schema) {
  auto bound = std::make_unique<Node>();
  bound->kind = n.kind;
  bound->op = n.op;
  bound->column = n.column;
  bound->literals = n.literals;
  bound->sources = n.sources;
  bound->depth = n.depth;
  if (!n.is_leaf()) {
    for (const auto& c : n.children) {
      STOKE_ASSIGN_OR_RETURN(auto child, BindNode(*c, by_name, schema));
      bound->children.push_back(std::move(child));
    }
    return bound;
  }
  auto it = by_name.find(n.column);
  if (it == by_name.end()) {
    constexpr size_t kMaxListed = 50;
    std::string names;
    for (size_t i = 0; i < schema.size() && i < kMaxListed; ++i) {
      if (i > 0) names += ", ";
      names += schema[i].name;
    }
    if (schema.size() > kMaxListed) names += fmt::format(", ... ({} in all)", schema.size());
    return Status::InvalidArgument(fmt::format("`where`: unknown column '{}' (columns: {})", n.column, names));
  }
  const ColumnSpec& spec = *it->second;
  if (n.kind == Kind::kIsNull) return bound;  // any column, tensors included, may be null
  if (spec.paged() || spec.nested()) {
    return Status::InvalidArgument(fmt::format("`where`: column '{}' holds {}; `where` compares scalar columns only",
                                               n.column, spec.tensor ? "tensors" : spec.blob ? "blobs" : SparkTypeName(spec) + "s"));
  }
  STOKE_RETURN_IF_ERROR(BindLeafLiterals(n, spec, bound.get()));
  return bound;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

Result<Predicate> Predicate::Parse(std::string_view text) {
  if (text.size() > kMaxTextBytes) {
    return Status::InvalidArgument(
        fmt::format("`where`: the predicate is {} bytes; the limit is {}", text.size(), kMaxTextBytes));
  }
  std::vector<std::string> columns;
  STOKE_ASSIGN_OR_RETURN(std::unique_ptr<Node> root, predicate::ParseTree(text, &columns));
  Predicate p(std::shared_ptr<const Node>(std::move(root)), std::move(columns));
  // The canonical form spells out what the input may abbreviate (NOT IN, 1e5, ...); keeping it
  // within the limit too guarantees Parse(ToString()) succeeds.
  size_t canonical = p.ToString().size();
  if (canonical > kMaxTextBytes) {
    return Status::InvalidArgument(fmt::format(
        "`where`: the predicate's canonical form is {} bytes; the limit is {}", canonical, kMaxTextBytes));
  }
  return p;
}

Status Predicate::Bind(const std::vector<ColumnSpec>& schema) {
  bound_ = false;
  std::map<std::string_view, const ColumnSpec*> by_name;
  for (const ColumnSpec& c : schema) by_name.emplace(c.name, &c);
  STOKE_ASSIGN_OR_RETURN(std::unique_ptr<Node> bound, BindNode(*root_, by_name, schema));
  bound_root_ = std::shared_ptr<const Node>(std::move(bound));
  nan_columns_.clear();
  for (const std::string& name : columns_) {
    auto it = by_name.find(name);
    if (it == by_name.end()) continue;
    const parquet::Type type = it->second->type;
    if (type == parquet::Type::kFloat || type == parquet::Type::kDouble) nan_columns_.push_back(name);
  }
  bound_ = true;
  return Status::OK();
}

Status Predicate::Evaluate(const std::map<std::string, const ColumnValues*>& columns, size_t num_rows,
                           std::vector<uint8_t>* keep) const {
  if (!bound_) return Status::Internal("`where`: Predicate::Evaluate called before a successful Bind");
  for (const std::string& name : columns_) {
    auto it = columns.find(name);
    if (it == columns.end() || it->second == nullptr) {
      return Status::InvalidArgument(fmt::format("`where`: column '{}' was not provided", name));
    }
    const ColumnValues& col = *it->second;
    if (col.num_rows() != num_rows) {
      return Status::InvalidArgument(
          fmt::format("`where`: column '{}' has {} rows, expected {}", name, col.num_rows(), num_rows));
    }
    if (!col.defined.empty()) {
      size_t present = static_cast<size_t>(std::count_if(col.defined.begin(), col.defined.end(),
                                                         [](uint8_t d) { return d != 0; }));
      if (present != col.num_values()) {
        return Status::InvalidArgument(fmt::format("`where`: column '{}' marks {} rows present but has {} values",
                                                   name, present, col.num_values()));
      }
    }
  }
  std::vector<Truth> truth;
  STOKE_RETURN_IF_ERROR(EvaluateNode(*bound_root_, columns, num_rows, &truth));
  keep->resize(num_rows);
  for (size_t i = 0; i < num_rows; ++i) (*keep)[i] = truth[i] == kTrue ? 1 : 0;
  return Status::OK();
}

bool Predicate::MayMatch(const std::map<std::string, ColumnStats>& stats, int64_t num_rows) const {
  if (num_rows == 0) return false;
  return Analyze(bound_ ? *bound_root_ : *root_, stats, num_rows, nan_columns_).may_be_true;
}

bool Predicate::MustMatch(const std::map<std::string, ColumnStats>& stats, int64_t num_rows) const {
  if (!bound_ || num_rows < 0) return false;
  if (num_rows == 0) return true;
  Outcomes o = Analyze(*bound_root_, stats, num_rows, nan_columns_);
  return !o.may_be_false && !o.may_be_null;
}

std::string Predicate::ToString() const {
  std::string out;
  AppendText(*root_, &out);
  return out;
}

}  // namespace stoke
