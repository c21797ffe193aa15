// Integer expressions over shape symbols: construction, printing, linear solving.
#include "kjit/expr.h"

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
  n->lhs = std::move(lhs);
  n->rhs = std::move(rhs);
  return n;
}

Expr make_neg(Expr operand) {
  auto n = std::make_shared<ExprNode>();
  n->op = ExprOp::kNeg;
  n->lhs = std::move(operand);
  return n;
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

std::string print(const Expr& e, const std::string& prefix, bool cpp);

std::string print_operand(const Expr& operand, int parent_prec, bool right, const std::string& prefix, bool cpp) {
  std::string s = print(operand, prefix, cpp);
  int p = precedence(operand->op);
  // Right operands of - / % need parentheses at equal precedence: a - (b - c).
  if (p < parent_prec || (right && p == parent_prec)) return "(" + s + ")";
  return s;
}

std::string print(const Expr& e, const std::string& prefix, bool cpp) {
  switch (e->op) {
    case ExprOp::kConst:
      if (cpp) return "INT64_C(" + std::to_string(e->value) + ")";
      return std::to_string(e->value);
    case ExprOp::kSymbol:
      return prefix + e->name;
    case ExprOp::kNeg:
      return "-" + print_operand(e->lhs, precedence(ExprOp::kNeg), false, prefix, cpp);
    case ExprOp::kDiv:
    case ExprOp::kMod:
      if (cpp) {
        const char* fn = e->op == ExprOp::kDiv ? "kjit_floordiv(" : "kjit_floormod(";
        return fn + print(e->lhs, prefix, cpp) + ", " + print(e->rhs, prefix, cpp) + ")";
      }
      break;
    default:
      break;
  }
  int p = precedence(e->op);
  bool right_needs_parens = e->op != ExprOp::kAdd && e->op != ExprOp::kMul;
  return print_operand(e->lhs, p, false, prefix, cpp) + op_text(e->op, cpp) +
         print_operand(e->rhs, p, right_needs_parens, prefix, cpp);
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

std::string to_string(const Expr& e) { return print(e, "", false); }

std::string to_cpp(const Expr& e, const std::string& prefix) { return print(e, prefix, true); }

Expr simplify(const Expr& e) {
  if (e->op == ExprOp::kConst || e->op == ExprOp::kSymbol) return e;
  if (e->op == ExprOp::kNeg) {
    Expr a = simplify(e->lhs);
    if (a->op == ExprOp::kConst) return make_const(-a->value);
    return make_neg(a);
  }
  Expr a = simplify(e->lhs);
  Expr b = simplify(e->rhs);
  bool ca = a->op == ExprOp::kConst;
  bool cb = b->op == ExprOp::kConst;
  switch (e->op) {
    case ExprOp::kAdd:
      if (ca && cb) return make_const(a->value + b->value);
      if (is_const(a, 0)) return b;
      if (is_const(b, 0)) return a;
      break;
    case ExprOp::kSub:
      if (ca && cb) return make_const(a->value - b->value);
      if (is_const(b, 0)) return a;
      if (is_const(a, 0)) return make_neg(b);
      break;
    case ExprOp::kMul:
      if (ca && cb) return make_const(a->value * b->value);
      if (is_const(a, 0) || is_const(b, 0)) return make_const(0);
      if (is_const(a, 1)) return b;
      if (is_const(b, 1)) return a;
      break;
    case ExprOp::kDiv:
    case ExprOp::kMod:
      if (ca && cb && b->value != 0) {
        int64_t q = a->value / b->value;
        int64_t r = a->value % b->value;
        if (r != 0 && ((r < 0) != (b->value < 0))) {
          q -= 1;
          r += b->value;
        }
        return make_const(e->op == ExprOp::kDiv ? q : r);
      }
      if (e->op == ExprOp::kDiv && is_const(b, 1)) return a;
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
