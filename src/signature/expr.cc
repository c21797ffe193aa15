// Integer expressions over shape symbols: construction, printing, linear solving.
#include "kjit/expr.h"

#include <algorithm>
#include <climits>

#include "kjit/errors.h"

namespace kjit {

Expr make_const(int64_t value) {
  auto n = std::make_shared<ExprNode>();
  n->op = ExprOp::kConst;
  n->value = value;
  return n;
}

Expr make_symbol(const std::string& name) {
  auto n = std::make_shared<ExprNode>();
  n->op = ExprOp::kSymbol;
  n->name = name;
  return n;
}

Expr make_binary(ExprOp op, Expr lhs, Expr rhs) {
  auto n = std::make_shared<ExprNode>();
  n->op = op;
  n->depth = 1 + std::max(lhs->depth, rhs->depth);
  n->lhs = std::move(lhs);
  n->rhs = std::move(rhs);
  return n;
}

Expr make_neg(Expr operand) {
  auto n = std::make_shared<ExprNode>();
  n->op = ExprOp::kNeg;
  n->depth = 1 + operand->depth;
  n->lhs = std::move(operand);
  return n;
}

std::optional<int64_t> fold_binary(ExprOp op, int64_t a, int64_t b) {
  int64_t r = 0;
  switch (op) {
    case ExprOp::kAdd:
      if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
      return r;
    case ExprOp::kSub:
      if (__builtin_sub_overflow(a, b, &r)) return std::nullopt;
      return r;
    case ExprOp::kMul:
      if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
      return r;
    case ExprOp::kDiv:
    case ExprOp::kMod: {
      if (b == 0) return std::nullopt;
      if (b == -1) {  // a / -1 traps for INT64_MIN; a % -1 is always 0
        if (op == ExprOp::kMod) return 0;
        if (a == INT64_MIN) return std::nullopt;
        return -a;
      }
      int64_t q = a / b;
      int64_t m = a % b;
      if (m != 0 && ((m < 0) != (b < 0))) {  // floor, as in Python
        q -= 1;
        m += b;
      }
      return op == ExprOp::kDiv ? q : m;
    }
    default:
      throw InternalError("kjit internal error: fold_binary of a non-binary op");
  }
}

namespace {

void collect_symbols(const Expr& e, std::set<std::string>* out) {
  if (!e) return;
  if (e->op == ExprOp::kSymbol) out->insert(e->name);
  collect_symbols(e->lhs, out);
  collect_symbols(e->rhs, out);
}

/// Binding strength, for printing with the fewest parentheses.
int precedence(ExprOp op) {
  switch (op) {
    case ExprOp::kAdd:
    case ExprOp::kSub:
      return 1;
    case ExprOp::kMul:
    case ExprOp::kDiv:
    case ExprOp::kMod:
      return 2;
    case ExprOp::kNeg:
      return 3;
    default:
      return 4;
  }
}

const char* op_text(ExprOp op, bool spaced) {
  switch (op) {
    case ExprOp::kAdd:
      return " + ";
    case ExprOp::kSub:
      return " - ";
    case ExprOp::kMul:
      return spaced ? " * " : "*";
    case ExprOp::kDiv:
      return " / ";
    case ExprOp::kMod:
      return " % ";
    default:
      throw InternalError("kjit internal error: op_text of a non-binary op");
  }
}

std::string print(const Expr& e);

/// An operand, in parentheses unless it binds tighter than its parent; the right
/// operand also at equal strength, since the grammar is left-associative
/// (a - (b - c), n*(k / 2)).
std::string print_operand(const Expr& operand, int parent_prec, bool right) {
  std::string s = print(operand);
  int p = precedence(operand->op);
  if (p < parent_prec || (right && p == parent_prec)) return "(" + s + ")";
  return s;
}

std::string print(const Expr& e) {
  switch (e->op) {
    case ExprOp::kConst:
      return std::to_string(e->value);  // "-5" parses back as the literal -5
    case ExprOp::kSymbol:
      return e->name;
    case ExprOp::kNeg:
      // -(5) keeps a negated literal apart from the literal -5.
      if (e->lhs->op == ExprOp::kConst && e->lhs->value >= 0) return "-(" + print(e->lhs) + ")";
      return "-" + print_operand(e->lhs, precedence(ExprOp::kNeg), false);
    default:
      break;
  }
  int p = precedence(e->op);
  return print_operand(e->lhs, p, false) + op_text(e->op, false) + print_operand(e->rhs, p, true);
}

const char* cpp_function(ExprOp op) {
  switch (op) {
    case ExprOp::kAdd:
      return "kjit_add(";
    case ExprOp::kSub:
      return "kjit_sub(";
    case ExprOp::kMul:
      return "kjit_mul(";
    case ExprOp::kDiv:
      return "kjit_floordiv(";
    case ExprOp::kMod:
      return "kjit_floormod(";
    default:
      throw InternalError("kjit internal error: cpp_function of a non-binary op");
  }
}

std::string print_cpp(const Expr& e, const std::string& prefix, const std::string& flag) {
  switch (e->op) {
    case ExprOp::kConst:
      if (e->value == INT64_MIN) return "INT64_MIN";  // INT64_C(-9223372036854775808) is not a literal
      return "INT64_C(" + std::to_string(e->value) + ")";
    case ExprOp::kSymbol:
      return prefix + e->name;
    case ExprOp::kNeg:
      return "kjit_neg(" + print_cpp(e->lhs, prefix, flag) + ", " + flag + ")";
    default:
      return cpp_function(e->op) + print_cpp(e->lhs, prefix, flag) + ", " + print_cpp(e->rhs, prefix, flag) + ", " +
             flag + ")";
  }
}

/// Folds e with overflow checks; sets *bad to the innermost sub-expression that
/// cannot be folded (overflow, or a zero divisor) and stops there.
std::optional<int64_t> fold_checked(const Expr& e, Expr* bad) {
  switch (e->op) {
    case ExprOp::kConst:
      return e->value;
    case ExprOp::kSymbol:
      return std::nullopt;
    case ExprOp::kNeg: {
      auto a = fold_checked(e->lhs, bad);
      if (!a) return std::nullopt;
      if (*a == INT64_MIN) {
        *bad = e;
        return std::nullopt;
      }
      return -*a;
    }
    default: {
      auto a = fold_checked(e->lhs, bad);
      if (*bad) return std::nullopt;
      auto b = fold_checked(e->rhs, bad);
      if (*bad || !a || !b) return std::nullopt;
      auto r = fold_binary(e->op, *a, *b);
      if (!r) *bad = e;
      return r;
    }
  }
}

bool mentions(const Expr& e, const std::string& name) {
  if (!e) return false;
  if (e->op == ExprOp::kSymbol) return e->name == name;
  return mentions(e->lhs, name) || mentions(e->rhs, name);
}

bool is_const(const Expr& e, int64_t v) { return e->op == ExprOp::kConst && e->value == v; }

}  // namespace

std::set<std::string> symbols_of(const Expr& e) {
  std::set<std::string> out;
  collect_symbols(e, &out);
  return out;
}

std::optional<int64_t> constant_value(const Expr& e) {
  Expr s = simplify(e);
  if (s->op == ExprOp::kConst) return s->value;
  return std::nullopt;
}

std::string to_string(const Expr& e) { return print(e); }

std::string to_cpp(const Expr& e, const std::string& prefix, const std::string& flag) {
  return print_cpp(e, prefix, flag);
}

bool same_expr(const Expr& a, const Expr& b) {
  if (!a || !b) return !a && !b;
  if (a->op != b->op || a->value != b->value || a->name != b->name) return false;
  return same_expr(a->lhs, b->lhs) && same_expr(a->rhs, b->rhs);
}

Expr first_unfoldable_constant(const Expr& e) {
  Expr bad;
  fold_checked(e, &bad);
  return bad;
}

Expr simplify(const Expr& e) {
  if (e->op == ExprOp::kConst || e->op == ExprOp::kSymbol) return e;
  if (e->op == ExprOp::kNeg) {
    Expr a = simplify(e->lhs);
    if (a->op == ExprOp::kConst && a->value != INT64_MIN) return make_const(-a->value);
    return make_neg(a);
  }
  Expr a = simplify(e->lhs);
  Expr b = simplify(e->rhs);
  if (a->op == ExprOp::kConst && b->op == ExprOp::kConst) {
    if (auto v = fold_binary(e->op, a->value, b->value)) return make_const(*v);
    return make_binary(e->op, a, b);  // overflow: the parser reports it, a stub's check catches it
  }
  switch (e->op) {
    case ExprOp::kAdd:
      if (is_const(a, 0)) return b;
      if (is_const(b, 0)) return a;
      break;
    case ExprOp::kSub:
      if (is_const(b, 0)) return a;
      if (is_const(a, 0)) return make_neg(b);
      break;
    case ExprOp::kMul:
      if (is_const(a, 0) || is_const(b, 0)) return make_const(0);
      if (is_const(a, 1)) return b;
      if (is_const(b, 1)) return a;
      break;
    case ExprOp::kDiv:
      if (is_const(b, 1)) return a;
      break;
    default:
      break;
  }
  return make_binary(e->op, a, b);
}

std::optional<LinearForm> linearize(const Expr& e, const std::string& unknown) {
  if (!mentions(e, unknown)) return LinearForm{make_const(0), e};
  switch (e->op) {
    case ExprOp::kSymbol:
      return LinearForm{make_const(1), make_const(0)};
    case ExprOp::kNeg: {
      auto a = linearize(e->lhs, unknown);
      if (!a) return std::nullopt;
      return LinearForm{simplify(make_neg(a->coef)), simplify(make_neg(a->rest))};
    }
    case ExprOp::kAdd:
    case ExprOp::kSub: {
      auto a = linearize(e->lhs, unknown);
      auto b = linearize(e->rhs, unknown);
      if (!a || !b) return std::nullopt;
      return LinearForm{simplify(make_binary(e->op, a->coef, b->coef)), simplify(make_binary(e->op, a->rest, b->rest))};
    }
    case ExprOp::kMul: {
      bool in_lhs = mentions(e->lhs, unknown);
      bool in_rhs = mentions(e->rhs, unknown);
      if (in_lhs && in_rhs) return std::nullopt;
      const Expr& with = in_lhs ? e->lhs : e->rhs;
      const Expr& factor = in_lhs ? e->rhs : e->lhs;
      auto a = linearize(with, unknown);
      if (!a) return std::nullopt;
      return LinearForm{simplify(make_binary(ExprOp::kMul, a->coef, factor)),
                        simplify(make_binary(ExprOp::kMul, a->rest, factor))};
    }
    default:
      return std::nullopt;  // the unknown sits under / or %: not solvable
  }
}

void collect_divisors(const Expr& e, std::set<std::string>* divisor_texts, std::vector<Expr>* divisors) {
  if (!e) return;
  if ((e->op == ExprOp::kDiv || e->op == ExprOp::kMod) && !constant_value(e->rhs)) {
    if (divisor_texts->insert(to_string(e->rhs)).second) divisors->push_back(e->rhs);
  }
  collect_divisors(e->lhs, divisor_texts, divisors);
  collect_divisors(e->rhs, divisor_texts, divisors);
}

}  // namespace kjit
