// The parsed form of a `--where` predicate (table/predicate.h), shared by the predicate's files:
// predicate_parse.cc (lexer and parser), predicate_text.cc (the canonical text) and predicate.cc
// (binding, evaluation and skipping). Private to src/table.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "table/predicate.h"

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

namespace predicate {

using Node = PredicateNode;
using Kind = PredicateNode::Kind;

// Text (predicate_text.cc).
inline constexpr std::string_view kKeywords[] = {"AND", "OR", "NOT", "IN", "IS", "NULL", "BETWEEN", "TRUE", "FALSE"};
inline bool IsIdentStart(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
inline bool IsDigit(char c) { return c >= '0' && c <= '9'; }
inline bool IsIdentChar(char c) { return IsIdentStart(c) || IsDigit(c) || c == '.'; }
inline bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool EqualsIgnoreCase(std::string_view a, std::string_view b);
bool IsKeyword(std::string_view word);
// `s` between quotes `q`, a `q` inside doubled.
std::string Quote(std::string_view s, char q);
// A column name as the lexer reads it back: bare when it is a plain identifier, else double-quoted.
std::string ColumnText(std::string_view name);
// The shortest text that reads back as `d`, always lexing as a real.
std::string RealText(double d);
// A literal as the lexer reads it back (DATE '...' and TIMESTAMP '...' as written).
std::string LiteralText(const Value& v, const PredicateNode::LiteralSource& source = {});
std::string_view OpText(CompareOp op);
// `lit op column` is `column Flip(op) lit`.
CompareOp Flip(CompareOp op);
// The canonical text of `n`, every node parenthesised (Predicate::ToString).
void AppendText(const Node& n, std::string* out);

// The tree of `text` and the columns it names, sorted (predicate_parse.cc). InvalidArgument naming
// the offset and what was expected.
Result<std::unique_ptr<Node>> ParseTree(std::string_view text, std::vector<std::string>* columns);

}  // namespace predicate
}  // namespace stoke
