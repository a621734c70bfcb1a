#include "table/predicate.h"

#include "format/logical_value.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <set>
#include <utility>

namespace stoke {

enum class CompareOp : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe };

struct PredicateNode {
  enum class Kind : uint8_t { kAnd, kOr, kNot, kCompare, kIn, kBetween, kIsNull };
  Kind kind = Kind::kAnd;
  CompareOp op = CompareOp::kEq;  // kCompare: `column op literals[0]`
  std::string column;             // leaves (kCompare, kIn, kBetween, kIsNull)
  std::vector<Value> literals;    // kCompare: 1; kBetween: low, high; kIn: the list (>= 1)
  // One per literal: how it was written. Bind converts a literal for a date, timestamp or decimal
  // column from this (a real's digits stay exact; a typed literal's text is parsed as its type).
  enum class LiteralKind : uint8_t { kPlain, kDate, kTimestamp };
  struct LiteralSource {
    LiteralKind kind = LiteralKind::kPlain;
    std::string text;  // a number's digits as written; a DATE or TIMESTAMP literal's quoted text
  };
  std::vector<LiteralSource> sources;
  std::vector<std::unique_ptr<PredicateNode>> children;  // kAnd, kOr: >= 2; kNot: 1
  int depth = 1;                  // 1 for a leaf, else 1 + the deepest child's

  bool is_leaf() const { return kind != Kind::kAnd && kind != Kind::kOr && kind != Kind::kNot; }
};

namespace {

using Node = PredicateNode;
using Kind = PredicateNode::Kind;

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
// Text.

constexpr std::string_view kKeywords[] = {"AND", "OR", "NOT", "IN", "IS", "NULL", "BETWEEN", "TRUE", "FALSE"};

bool IsIdentStart(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsIdentChar(char c) { return IsIdentStart(c) || IsDigit(c) || c == '.'; }
bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

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

// A column name as the lexer reads it back: bare when it is a plain identifier, else double-quoted.
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

std::string LiteralText(const Value& v, const PredicateNode::LiteralSource& source = {}) {
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

// `lit op column` is `column Flip(op) lit`.
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

// ---------------------------------------------------------------------------------------------
// Lexer and recursive-descent parser.

enum class Tok : uint8_t {
  kEnd, kIdent, kInt, kReal, kString, kLParen, kRParen, kComma,
  kEq, kNe, kLt, kLe, kGt, kGe,
  kAnd, kOr, kNot, kIn, kIs, kNull, kBetween, kTrue, kFalse,
};

struct Token {
  Tok kind = Tok::kEnd;
  size_t offset = 0;
  std::string_view raw;  // the token's text in the input
  std::string text;      // kIdent: the column name (unquoted); kString: the string's value
  int64_t i = 0;         // kInt
  double d = 0;          // kReal
  PredicateNode::LiteralKind typed = PredicateNode::LiteralKind::kPlain;  // kString: DATE '..' or TIMESTAMP '..'
};

// Syntactic nesting (parentheses plus NOTs) allowed: the canonical form of a tree of depth
// Predicate::kMaxDepth nests at most 2 * kMaxDepth - 1 deep ("(NOT (...))" per NOT level).
constexpr int kMaxNesting = 2 * Predicate::kMaxDepth;

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Result<std::unique_ptr<Node>> ParseAll() {
    STOKE_RETURN_IF_ERROR(Advance());
    STOKE_ASSIGN_OR_RETURN(auto root, ParseOr(0));
    if (tok_.kind != Tok::kEnd) {
      return Error(tok_.offset, fmt::format("expected AND, OR or end of input, found {}", Describe(tok_)));
    }
    return root;
  }

  std::vector<std::string> TakeColumns() { return {columns_.begin(), columns_.end()}; }

 private:
  Status Error(size_t offset, std::string_view what) const {
    return Status::InvalidArgument(fmt::format("--where: offset {}: {}", offset, what));
  }
  Status Unsupported(size_t offset, std::string_view what) const {
    return Status::Unsupported(fmt::format("--where: offset {}: {}", offset, what));
  }

  static std::string Describe(const Token& t) {
    if (t.kind == Tok::kEnd) return "end of input";
    return Shown(t.raw);
  }
  static std::string Shown(std::string_view raw) {
    constexpr size_t kMaxShown = 40;
    if (raw.size() > kMaxShown) return fmt::format("'{}...'", raw.substr(0, kMaxShown));
    return fmt::format("'{}'", raw);
  }

  // Lexes the next token into tok_.
  Status Advance() {
    size_t n = text_.size();
    while (pos_ < n && IsSpace(text_[pos_])) ++pos_;
    tok_ = Token{};
    tok_.offset = pos_;
    if (pos_ >= n) return Status::OK();
    size_t start = pos_;
    char c = text_[pos_];
    auto single = [&](Tok k, size_t len) {
      tok_.kind = k;
      pos_ += len;
      tok_.raw = text_.substr(start, len);
      return Status::OK();
    };
    char next = pos_ + 1 < n ? text_[pos_ + 1] : '\0';
    switch (c) {
      case '(': return single(Tok::kLParen, 1);
      case ')': return single(Tok::kRParen, 1);
      case ',': return single(Tok::kComma, 1);
      case '=': return single(Tok::kEq, 1);
      case '!':
        if (next == '=') return single(Tok::kNe, 2);
        return Error(start, "unexpected character '!' (did you mean '!='?)");
      case '<':
        if (next == '=') return single(Tok::kLe, 2);
        if (next == '>') return single(Tok::kNe, 2);
        return single(Tok::kLt, 1);
      case '>':
        if (next == '=') return single(Tok::kGe, 2);
        return single(Tok::kGt, 1);
      case '\'':
      case '"': return LexQuoted(c);
      default: break;
    }
    if (c == '-' || IsDigit(c)) return LexNumber();
    if (IsIdentStart(c)) {
      while (pos_ < n && IsIdentChar(text_[pos_])) ++pos_;
      tok_.raw = text_.substr(start, pos_ - start);
      static constexpr Tok kKeywordToks[] = {Tok::kAnd, Tok::kOr,      Tok::kNot,  Tok::kIn,   Tok::kIs,
                                             Tok::kNull, Tok::kBetween, Tok::kTrue, Tok::kFalse};
      static_assert(std::size(kKeywordToks) == std::size(kKeywords));
      tok_.kind = Tok::kIdent;
      for (size_t k = 0; k < std::size(kKeywords); ++k) {
        if (EqualsIgnoreCase(tok_.raw, kKeywords[k])) tok_.kind = kKeywordToks[k];
      }
      if (tok_.kind == Tok::kIdent) tok_.text = std::string(tok_.raw);
      if (tok_.kind == Tok::kIdent) return LexTypedLiteral(start);
      return Status::OK();
    }
    auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f) return Error(start, fmt::format("unexpected character '{}'", c));
    return Error(start, fmt::format("unexpected byte 0x{:02x}", byte));
  }

  // DATE 'yyyy-mm-dd' and TIMESTAMP '...' (the word, any case, then a string): a typed literal, its
  // text checked by Bind against the column's type. Elsewhere DATE and TIMESTAMP are column names.
  Status LexTypedLiteral(size_t start) {
    PredicateNode::LiteralKind kind;
    if (EqualsIgnoreCase(tok_.raw, "DATE")) {
      kind = PredicateNode::LiteralKind::kDate;
    } else if (EqualsIgnoreCase(tok_.raw, "TIMESTAMP")) {
      kind = PredicateNode::LiteralKind::kTimestamp;
    } else {
      return Status::OK();
    }
    size_t q = pos_;
    while (q < text_.size() && IsSpace(text_[q])) ++q;
    if (q >= text_.size() || text_[q] != '\'') return Status::OK();
    pos_ = q;
    STOKE_RETURN_IF_ERROR(LexQuoted('\''));
    tok_.raw = text_.substr(start, pos_ - start);
    tok_.offset = start;
    tok_.typed = kind;
    return Status::OK();
  }

  // A 'string' or a "column name"; the quote doubled stands for itself.
  Status LexQuoted(char q) {
    size_t start = pos_++;
    std::string value;
    for (;;) {
      if (pos_ >= text_.size()) {
        return Error(start, q == '\'' ? "unterminated string literal" : "unterminated quoted column name");
      }
      char c = text_[pos_++];
      if (c == q) {
        if (pos_ < text_.size() && text_[pos_] == q) {
          value += q;
          ++pos_;
          continue;
        }
        break;
      }
      value += c;
    }
    if (q == '"' && value.empty()) return Error(start, "empty quoted column name");
    tok_.kind = q == '\'' ? Tok::kString : Tok::kIdent;
    tok_.raw = text_.substr(start, pos_ - start);
    tok_.text = std::move(value);
    return Status::OK();
  }

  // -?[0-9]+ is an int64; with a fraction (.[0-9]+) or an exponent ([eE][+-]?[0-9]+) a finite double.
  Status LexNumber() {
    size_t n = text_.size();
    size_t start = pos_;
    if (text_[pos_] == '-') ++pos_;
    if (pos_ >= n || !IsDigit(text_[pos_])) return Error(start, "expected a digit after '-'");
    while (pos_ < n && IsDigit(text_[pos_])) ++pos_;
    bool real = false;
    if (pos_ + 1 < n && text_[pos_] == '.' && IsDigit(text_[pos_ + 1])) {
      real = true;
      pos_ += 1;
      while (pos_ < n && IsDigit(text_[pos_])) ++pos_;
    }
    if (pos_ < n && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      size_t q = pos_ + 1;
      if (q < n && (text_[q] == '+' || text_[q] == '-')) ++q;
      if (q < n && IsDigit(text_[q])) {
        real = true;
        pos_ = q;
        while (pos_ < n && IsDigit(text_[pos_])) ++pos_;
      }
    }
    size_t end = pos_;
    while (pos_ < n && IsIdentChar(text_[pos_])) ++pos_;  // swallow the rest for the message
    tok_.raw = text_.substr(start, pos_ - start);
    if (pos_ != end) return Error(start, fmt::format("malformed number {}", Shown(tok_.raw)));
    const char* first = text_.data() + start;
    const char* last = text_.data() + end;
    if (real) {
      auto [p, ec] = std::from_chars(first, last, tok_.d);
      if (ec != std::errc() || p != last || !std::isfinite(tok_.d)) {
        return Error(start, fmt::format("real literal {} is out of range", Shown(tok_.raw)));
      }
      tok_.kind = Tok::kReal;
    } else {
      auto [p, ec] = std::from_chars(first, last, tok_.i);
      if (ec != std::errc() || p != last) {
        return Error(start, fmt::format("integer literal {} is out of the range of a 64-bit integer", Shown(tok_.raw)));
      }
      tok_.kind = Tok::kInt;
    }
    return Status::OK();
  }

  static bool IsLiteral(Tok k) {
    return k == Tok::kInt || k == Tok::kReal || k == Tok::kString || k == Tok::kTrue || k == Tok::kFalse ||
           k == Tok::kNull;
  }

  static Value LiteralOf(const Token& t) {
    switch (t.kind) {
      case Tok::kInt: return Value{t.i};
      case Tok::kReal: return Value{t.d};
      case Tok::kString: return Value{t.text};
      case Tok::kTrue: return Value{true};
      case Tok::kFalse: return Value{false};
      default: return Value{};
    }
  }

  static PredicateNode::LiteralSource SourceOf(const Token& t) {
    if (t.typed != PredicateNode::LiteralKind::kPlain) return {t.typed, t.text};
    if (t.kind == Tok::kInt || t.kind == Tok::kReal) return {PredicateNode::LiteralKind::kPlain, std::string(t.raw)};
    return {};
  }

  static void AddLiteral(Node* node, const Token& t) {
    node->literals.push_back(LiteralOf(t));
    node->sources.push_back(SourceOf(t));
  }

  // Expects a literal and adds it to `node`; `what` names where, for the error ("after BETWEEN").
  Status ParseLiteral(std::string_view what, Node* node) {
    if (!IsLiteral(tok_.kind)) {
      return Error(tok_.offset, fmt::format("expected a value {}, found {}", what, Describe(tok_)));
    }
    AddLiteral(node, tok_);
    return Advance();
  }

  // kAnd / kOr of `children` (or the single child itself); checks the depth limit.
  Result<std::unique_ptr<Node>> Combine(Kind kind, std::vector<std::unique_ptr<Node>> children, size_t offset) {
    if (children.size() == 1) return std::move(children[0]);
    auto node = std::make_unique<Node>();
    node->kind = kind;
    node->children = std::move(children);
    for (const auto& c : node->children) node->depth = std::max(node->depth, c->depth + 1);
    if (node->depth > Predicate::kMaxDepth) return TooDeep(offset);
    return node;
  }

  Status TooDeep(size_t offset) const {
    return Error(offset, fmt::format("expression nested deeper than {} levels", Predicate::kMaxDepth));
  }

  Result<std::unique_ptr<Node>> ParseOr(int nesting) {
    size_t offset = tok_.offset;
    std::vector<std::unique_ptr<Node>> terms;
    STOKE_ASSIGN_OR_RETURN(auto first, ParseAnd(nesting));
    terms.push_back(std::move(first));
    while (tok_.kind == Tok::kOr) {
      STOKE_RETURN_IF_ERROR(Advance());
      STOKE_ASSIGN_OR_RETURN(auto term, ParseAnd(nesting));
      terms.push_back(std::move(term));
    }
    return Combine(Kind::kOr, std::move(terms), offset);
  }

  Result<std::unique_ptr<Node>> ParseAnd(int nesting) {
    size_t offset = tok_.offset;
    std::vector<std::unique_ptr<Node>> factors;
    STOKE_ASSIGN_OR_RETURN(auto first, ParseNot(nesting));
    factors.push_back(std::move(first));
    while (tok_.kind == Tok::kAnd) {
      STOKE_RETURN_IF_ERROR(Advance());
      STOKE_ASSIGN_OR_RETURN(auto factor, ParseNot(nesting));
      factors.push_back(std::move(factor));
    }
    return Combine(Kind::kAnd, std::move(factors), offset);
  }

  Result<std::unique_ptr<Node>> ParseNot(int nesting) {
    size_t offset = tok_.offset;
    if (tok_.kind == Tok::kNot || tok_.kind == Tok::kLParen) {
      if (nesting + 1 > kMaxNesting) {
        return Error(offset, fmt::format("parentheses and NOTs nested deeper than {}", kMaxNesting));
      }
    }
    if (tok_.kind == Tok::kNot) {
      STOKE_RETURN_IF_ERROR(Advance());
      STOKE_ASSIGN_OR_RETURN(auto child, ParseNot(nesting + 1));
      return Negate(std::move(child), offset);
    }
    if (tok_.kind == Tok::kLParen) {
      STOKE_RETURN_IF_ERROR(Advance());
      STOKE_ASSIGN_OR_RETURN(auto inner, ParseOr(nesting + 1));
      if (tok_.kind != Tok::kRParen) {
        return Error(tok_.offset, fmt::format("expected ')' to close the '(' at offset {}, found {}", offset,
                                              Describe(tok_)));
      }
      STOKE_RETURN_IF_ERROR(Advance());
      return inner;
    }
    return ParsePredicate();
  }

  Result<std::unique_ptr<Node>> Negate(std::unique_ptr<Node> child, size_t offset) {
    auto node = std::make_unique<Node>();
    node->kind = Kind::kNot;
    node->depth = child->depth + 1;
    node->children.push_back(std::move(child));
    if (node->depth > Predicate::kMaxDepth) return TooDeep(offset);
    return node;
  }

  std::unique_ptr<Node> Leaf(Kind kind, std::string column) {
    columns_.insert(column);
    auto node = std::make_unique<Node>();
    node->kind = kind;
    node->column = std::move(column);
    return node;
  }

  static std::optional<CompareOp> OpOf(Tok k) {
    switch (k) {
      case Tok::kEq: return CompareOp::kEq;
      case Tok::kNe: return CompareOp::kNe;
      case Tok::kLt: return CompareOp::kLt;
      case Tok::kLe: return CompareOp::kLe;
      case Tok::kGt: return CompareOp::kGt;
      case Tok::kGe: return CompareOp::kGe;
      default: return std::nullopt;
    }
  }

  Result<std::unique_ptr<Node>> ParsePredicate() {
    Token left = tok_;
    if (left.kind != Tok::kIdent && !IsLiteral(left.kind)) {
      return Error(left.offset,
                   fmt::format("expected a column name, a value, NOT or '(', found {}", Describe(left)));
    }
    bool left_is_column = left.kind == Tok::kIdent;
    STOKE_RETURN_IF_ERROR(Advance());
    Token op_tok = tok_;

    if (std::optional<CompareOp> op = OpOf(op_tok.kind)) {
      STOKE_RETURN_IF_ERROR(Advance());
      Token right = tok_;
      bool right_is_column = right.kind == Tok::kIdent;
      if (!right_is_column && !IsLiteral(right.kind)) {
        return Error(right.offset, fmt::format("expected {} after '{}', found {}",
                                               left_is_column ? "a value" : "a column name", op_tok.raw,
                                               Describe(right)));
      }
      if (left_is_column && right_is_column) {
        return Unsupported(right.offset, fmt::format("comparing column {} with column {} is not supported; "
                                                     "compare a column with a value",
                                                     Describe(left), Describe(right)));
      }
      if (!left_is_column && !right_is_column) {
        return Unsupported(left.offset, fmt::format("comparing value {} with value {}: one side must be a column",
                                                    Describe(left), Describe(right)));
      }
      STOKE_RETURN_IF_ERROR(Advance());
      const Token& column = left_is_column ? left : right;
      const Token& literal = left_is_column ? right : left;
      auto node = Leaf(Kind::kCompare, column.text);
      node->op = left_is_column ? *op : Flip(*op);
      AddLiteral(node.get(), literal);
      return node;
    }

    bool negated = false;
    if (op_tok.kind == Tok::kNot) {
      negated = true;
      STOKE_RETURN_IF_ERROR(Advance());
      if (tok_.kind != Tok::kIn && tok_.kind != Tok::kBetween) {
        return Error(tok_.offset, fmt::format("expected IN or BETWEEN after NOT, found {}", Describe(tok_)));
      }
    }
    Token kw = tok_;
    if (kw.kind != Tok::kIn && kw.kind != Tok::kBetween && kw.kind != Tok::kIs) {
      return Error(kw.offset, fmt::format("expected a comparison operator, IN, BETWEEN or IS after {}, found {}",
                                          Describe(left), Describe(kw)));
    }
    if (!left_is_column) {
      return Unsupported(left.offset, fmt::format("{} needs a column on its left, found value {}", kw.raw,
                                                  Describe(left)));
    }
    STOKE_RETURN_IF_ERROR(Advance());
    std::unique_ptr<Node> node;
    if (kw.kind == Tok::kIn) {
      node = Leaf(Kind::kIn, left.text);
      if (tok_.kind != Tok::kLParen) {
        return Error(tok_.offset, fmt::format("expected '(' after IN, found {}", Describe(tok_)));
      }
      STOKE_RETURN_IF_ERROR(Advance());
      for (;;) {
        STOKE_RETURN_IF_ERROR(ParseLiteral("in the IN list", node.get()));
        if (tok_.kind == Tok::kRParen) break;
        if (tok_.kind != Tok::kComma) {
          return Error(tok_.offset, fmt::format("expected ',' or ')' in the IN list, found {}", Describe(tok_)));
        }
        STOKE_RETURN_IF_ERROR(Advance());
      }
      STOKE_RETURN_IF_ERROR(Advance());
    } else if (kw.kind == Tok::kBetween) {
      node = Leaf(Kind::kBetween, left.text);
      STOKE_RETURN_IF_ERROR(ParseLiteral("after BETWEEN", node.get()));
      if (tok_.kind != Tok::kAnd) {
        return Error(tok_.offset, fmt::format("expected AND after BETWEEN {}, found {}",
                                              LiteralText(node->literals[0], node->sources[0]), Describe(tok_)));
      }
      STOKE_RETURN_IF_ERROR(Advance());
      STOKE_RETURN_IF_ERROR(ParseLiteral("after BETWEEN ... AND", node.get()));
    } else {  // IS [NOT] NULL
      if (tok_.kind == Tok::kNot) {
        negated = true;
        STOKE_RETURN_IF_ERROR(Advance());
      }
      if (tok_.kind != Tok::kNull) {
        return Error(tok_.offset, fmt::format("expected {} after IS{}, found {}", negated ? "NULL" : "NULL or NOT NULL",
                                              negated ? " NOT" : "", Describe(tok_)));
      }
      STOKE_RETURN_IF_ERROR(Advance());
      node = Leaf(Kind::kIsNull, left.text);
    }
    if (negated) return Negate(std::move(node), op_tok.offset);
    return node;
  }

  std::string_view text_;
  size_t pos_ = 0;  // where the lexer resumes
  Token tok_;       // the current (lookahead) token
  std::set<std::string> columns_;
};

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
        return Status::Internal(fmt::format("--where: column '{}' vanished during Evaluate", n.column));
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
    return Status::InvalidArgument(fmt::format("--where: column '{}' is {}; it cannot be compared with {}{}", spec.name,
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
          "--where: column '{}' is {} without a STRING annotation; --where cannot compare it", column,
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
      return Status::InvalidArgument(fmt::format("--where: column '{}' is {}{}; it cannot be compared with {}",
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
    return Status::InvalidArgument(fmt::format("--where: unknown column '{}' (columns: {})", n.column, names));
  }
  const ColumnSpec& spec = *it->second;
  if (n.kind == Kind::kIsNull) return bound;  // any column, tensors included, may be null
  if (spec.paged() || spec.nested()) {
    return Status::InvalidArgument(fmt::format("--where: column '{}' holds {}; --where compares scalar columns only",
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
        fmt::format("--where: the predicate is {} bytes; the limit is {}", text.size(), kMaxTextBytes));
  }
  Parser parser(text);
  STOKE_ASSIGN_OR_RETURN(std::unique_ptr<Node> root, parser.ParseAll());
  Predicate p(std::shared_ptr<const Node>(std::move(root)), parser.TakeColumns());
  // The canonical form spells out what the input may abbreviate (NOT IN, 1e5, ...); keeping it
  // within the limit too guarantees Parse(ToString()) succeeds.
  size_t canonical = p.ToString().size();
  if (canonical > kMaxTextBytes) {
    return Status::InvalidArgument(fmt::format(
        "--where: the predicate's canonical form is {} bytes; the limit is {}", canonical, kMaxTextBytes));
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
  if (!bound_) return Status::Internal("--where: Predicate::Evaluate called before a successful Bind");
  for (const std::string& name : columns_) {
    auto it = columns.find(name);
    if (it == columns.end() || it->second == nullptr) {
      return Status::InvalidArgument(fmt::format("--where: column '{}' was not provided", name));
    }
    const ColumnValues& col = *it->second;
    if (col.num_rows() != num_rows) {
      return Status::InvalidArgument(
          fmt::format("--where: column '{}' has {} rows, expected {}", name, col.num_rows(), num_rows));
    }
    if (!col.defined.empty()) {
      size_t present = static_cast<size_t>(std::count_if(col.defined.begin(), col.defined.end(),
                                                         [](uint8_t d) { return d != 0; }));
      if (present != col.num_values()) {
        return Status::InvalidArgument(fmt::format("--where: column '{}' marks {} rows present but has {} values",
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
