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
};

Expr make_const(int64_t value);
Expr make_symbol(const std::string& name);
Expr make_binary(ExprOp op, Expr lhs, Expr rhs);
Expr make_neg(Expr operand);

/// Symbols the expression mentions.
std::set<std::string> symbols_of(const Expr& e);
/// The value if the expression has no symbols.
std::optional<int64_t> constant_value(const Expr& e);
/// Canonical text, as a user would write it ("2*k + 1").
std::string to_string(const Expr& e);
/// C++ text that evaluates the expression; symbols become `prefix + name`.
/// Division and modulo use floor semantics through kjit_floordiv / kjit_floormod.
std::string to_cpp(const Expr& e, const std::string& prefix);

/// `e == coef * unknown + rest`, with coef and rest free of `unknown`.
struct LinearForm {
  Expr coef;
  Expr rest;
};
/// Splits e as linear in `unknown`; nullopt when e is not linear in it
/// (unknown * unknown, or unknown under / or %).
std::optional<LinearForm> linearize(const Expr& e, const std::string& unknown);
/// Folds constants and drops neutral terms (x + 0, 1 * x).
Expr simplify(const Expr& e);
/// Sub-expressions used as divisors (rhs of / and %) that are not constants.
void collect_divisors(const Expr& e, std::set<std::string>* divisor_texts, std::vector<Expr>* divisors);

}  // namespace kjit

#endif  // KJIT_EXPR_H_
