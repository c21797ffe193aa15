// kjit/expr.h — integer expressions over shape symbols ("m + n", "2*k + 1", "k % 8").
#ifndef KJIT_EXPR_H_
#define KJIT_EXPR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kjit {

struct ExprNode;
/// An immutable expression tree; shared because sub-expressions are reused.
using Expr = std::shared_ptr<const ExprNode>;

enum class ExprOp { kConst, kSymbol, kAdd, kSub, kMul, kDiv, kMod, kNeg };

struct ExprNode {
  ExprOp op;
  int64_t value = 0;  ///< kConst only
  std::string name;   ///< kSymbol only
  Expr lhs, rhs;      ///< operands (kNeg uses lhs)
  int depth = 1;      ///< nodes on the longest path to a leaf; bounds every recursion over the tree
};

/// The deepest expression tree the parsers accept (parentheses, unary minus and chained
/// operators all count). Every function below recurses over the tree, so the bound
/// keeps their stack use small.
constexpr int kMaxExprDepth = 256;

Expr make_const(int64_t value);
Expr make_symbol(const std::string& name);
Expr make_binary(ExprOp op, Expr lhs, Expr rhs);
Expr make_neg(Expr operand);

/// Symbols the expression mentions.
std::set<std::string> symbols_of(const Expr& e);
/// The value if the expression has no symbols.
std::optional<int64_t> constant_value(const Expr& e);
/// Canonical text, as a user would write it ("2*k + 1"), with exactly the parentheses
/// that make parse_expr(to_string(e)) the same tree as e.
std::string to_string(const Expr& e);
/// C++ text that evaluates the expression with every operation overflow-checked
/// (kjit_add, kjit_mul, kjit_floordiv, ... of the stub prelude); symbols become
/// `prefix + name`, and the bool lvalue `flag` is set on overflow.
std::string to_cpp(const Expr& e, const std::string& prefix, const std::string& flag = "ovf");
/// Trees with the same operators, constants and symbols.
bool same_expr(const Expr& a, const Expr& b);

/// `a op b` in int64 for a binary op, floor division and modulo as in Python; nullopt
/// when the exact result does not fit (INT64_MIN / -1, 2**62 * 4) or b is 0 for / and %.
std::optional<int64_t> fold_binary(ExprOp op, int64_t a, int64_t b);
/// The first (innermost) sub-expression without symbols whose value does not fit in
/// int64, or a division by a zero constant; nullptr when there is none.
Expr first_unfoldable_constant(const Expr& e);

/// `e == coef * unknown + rest`, with coef and rest free of `unknown`.
struct LinearForm {
  Expr coef;
  Expr rest;
};
/// Splits e as linear in `unknown`; nullopt when e is not linear in it
/// (unknown * unknown, or unknown under / or %).
std::optional<LinearForm> linearize(const Expr& e, const std::string& unknown);
/// Folds constants and drops neutral terms (x + 0, 1 * x). A fold that would overflow
/// is left unfolded.
Expr simplify(const Expr& e);
/// Sub-expressions used as divisors (rhs of / and %) that are not constants.
void collect_divisors(const Expr& e, std::set<std::string>* divisor_texts, std::vector<Expr>* divisors);

}  // namespace kjit

#endif  // KJIT_EXPR_H_
