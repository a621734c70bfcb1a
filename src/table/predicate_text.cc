// The canonical text of a predicate (predicate_node.h): what ToString prints and Parse reads back.
#include <algorithm>
#include <charconv>
#include <string>

#include "table/predicate_node.h"

namespace stoke::predicate {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'a' && x <= 'z') x = static_cast<char>(x - 'a' + 'A');
    if (y >= 'a' && y <= 'z') y = static_cast<char>(y - 'a' + 'A');
    if (x != y) return false;
  }
  return true;
}

bool IsKeyword(std::string_view word) {
  for (std::string_view k : kKeywords) {
    if (EqualsIgnoreCase(word, k)) return true;
  }
  return false;
}

std::string Quote(std::string_view s, char q) {
  std::string out(1, q);
  for (char c : s) {
    out += c;
    if (c == q) out += c;
  }
  out += q;
  return out;
}

std::string ColumnText(std::string_view name) {
  bool plain = !name.empty() && IsIdentStart(name[0]) && !IsKeyword(name) &&
               std::all_of(name.begin(), name.end(), IsIdentChar);
  return plain ? std::string(name) : Quote(name, '"');
}

std::string RealText(double d) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), d);  // shortest round-trip form
  std::string s(buf, ec == std::errc() ? end : buf);
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";  // keep it lexing as a real
  return s;
}

std::string LiteralText(const Value& v, const PredicateNode::LiteralSource& source) {
  if (source.kind == PredicateNode::LiteralKind::kDate) return "DATE " + Quote(source.text, '\'');
  if (source.kind == PredicateNode::LiteralKind::kTimestamp) return "TIMESTAMP " + Quote(source.text, '\'');
  switch (v.v.index()) {
    case 1: return std::get<bool>(v.v) ? "TRUE" : "FALSE";
    case 2: return std::to_string(std::get<int64_t>(v.v));
    case 3: return RealText(std::get<double>(v.v));
    case 4: return Quote(std::get<std::string>(v.v), '\'');
    default: return "NULL";
  }
}

std::string_view OpText(CompareOp op) {
  switch (op) {
    case CompareOp::kEq: return "=";
    case CompareOp::kNe: return "!=";
    case CompareOp::kLt: return "<";
    case CompareOp::kLe: return "<=";
    case CompareOp::kGt: return ">";
    case CompareOp::kGe: return ">=";
  }
  return "?";
}

CompareOp Flip(CompareOp op) {
  switch (op) {
    case CompareOp::kLt: return CompareOp::kGt;
    case CompareOp::kLe: return CompareOp::kGe;
    case CompareOp::kGt: return CompareOp::kLt;
    case CompareOp::kGe: return CompareOp::kLe;
    default: return op;
  }
}

void AppendText(const Node& n, std::string* out) {
  out->push_back('(');
  switch (n.kind) {
    case Kind::kAnd:
    case Kind::kOr:
      for (size_t i = 0; i < n.children.size(); ++i) {
        if (i > 0) out->append(n.kind == Kind::kAnd ? " AND " : " OR ");
        AppendText(*n.children[i], out);
      }
      break;
    case Kind::kNot:
      out->append("NOT ");
      AppendText(*n.children[0], out);
      break;
    case Kind::kCompare:
      out->append(ColumnText(n.column)).append(" ").append(OpText(n.op)).append(" ");
      out->append(LiteralText(n.literals[0], n.sources[0]));
      break;
    case Kind::kIn:
      out->append(ColumnText(n.column)).append(" IN (");
      for (size_t i = 0; i < n.literals.size(); ++i) {
        if (i > 0) out->append(", ");
        out->append(LiteralText(n.literals[i], n.sources[i]));
      }
      out->push_back(')');
      break;
    case Kind::kBetween:
      out->append(ColumnText(n.column)).append(" BETWEEN ").append(LiteralText(n.literals[0], n.sources[0]));
      out->append(" AND ").append(LiteralText(n.literals[1], n.sources[1]));
      break;
    case Kind::kIsNull:
      out->append(ColumnText(n.column)).append(" IS NULL");
      break;
  }
  out->push_back(')');
}

}  // namespace stoke::predicate
