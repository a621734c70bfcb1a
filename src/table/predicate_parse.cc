// The `--where` lexer and recursive-descent parser (predicate_node.h, ParseTree).
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <set>
#include <utility>

#include "table/predicate_node.h"

namespace stoke::predicate {
namespace {

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
    return Status::InvalidArgument(fmt::format("`where`: offset {}: {}", offset, what));
  }
  Status Unsupported(size_t offset, std::string_view what) const {
    return Status::Unsupported(fmt::format("`where`: offset {}: {}", offset, what));
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

  // `left op_tok ...` with a comparison operator: one side a column, the other a value.
  Result<std::unique_ptr<Node>> ParseComparison(const Token& left, const Token& op_tok, CompareOp op) {
    const bool left_is_column = left.kind == Tok::kIdent;
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
    node->op = left_is_column ? op : Flip(op);
    AddLiteral(node.get(), literal);
    return node;
  }

  // `column IN (v, ...)`, after IN.
  Result<std::unique_ptr<Node>> ParseInList(const Token& left) {
    auto node = Leaf(Kind::kIn, left.text);
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
    return node;
  }

  // `column BETWEEN low AND high`, after BETWEEN.
  Result<std::unique_ptr<Node>> ParseBetween(const Token& left) {
    auto node = Leaf(Kind::kBetween, left.text);
    STOKE_RETURN_IF_ERROR(ParseLiteral("after BETWEEN", node.get()));
    if (tok_.kind != Tok::kAnd) {
      return Error(tok_.offset, fmt::format("expected AND after BETWEEN {}, found {}",
                                            LiteralText(node->literals[0], node->sources[0]), Describe(tok_)));
    }
    STOKE_RETURN_IF_ERROR(Advance());
    STOKE_RETURN_IF_ERROR(ParseLiteral("after BETWEEN ... AND", node.get()));
    return node;
  }

  // `column IS [NOT] NULL`, after IS; *negated set for NOT.
  Result<std::unique_ptr<Node>> ParseIsNull(const Token& left, bool* negated) {
    if (tok_.kind == Tok::kNot) {
      *negated = true;
      STOKE_RETURN_IF_ERROR(Advance());
    }
    if (tok_.kind != Tok::kNull) {
      return Error(tok_.offset, fmt::format("expected {} after IS{}, found {}", *negated ? "NULL" : "NULL or NOT NULL",
                                            *negated ? " NOT" : "", Describe(tok_)));
    }
    STOKE_RETURN_IF_ERROR(Advance());
    return Leaf(Kind::kIsNull, left.text);
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

    if (std::optional<CompareOp> op = OpOf(op_tok.kind)) return ParseComparison(left, op_tok, *op);

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
      STOKE_ASSIGN_OR_RETURN(node, ParseInList(left));
    } else if (kw.kind == Tok::kBetween) {
      STOKE_ASSIGN_OR_RETURN(node, ParseBetween(left));
    } else {
      STOKE_ASSIGN_OR_RETURN(node, ParseIsNull(left, &negated));
    }
    if (negated) return Negate(std::move(node), op_tok.offset);
    return node;
  }

  std::string_view text_;
  size_t pos_ = 0;  // where the lexer resumes
  Token tok_;       // the current (lookahead) token
  std::set<std::string> columns_;
};

}  // namespace

Result<std::unique_ptr<Node>> ParseTree(std::string_view text, std::vector<std::string>* columns) {
  Parser parser(text);
  STOKE_ASSIGN_OR_RETURN(std::unique_ptr<Node> root, parser.ParseAll());
  *columns = parser.TakeColumns();
  return root;
}

}  // namespace stoke::predicate
