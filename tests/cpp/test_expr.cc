// Expressions: printing, simplification and the linear solver's splitting.
#include <gtest/gtest.h>

#include "kjit/expr.h"
#include "kjit/spec.h"

namespace kjit {
namespace {

TEST(Expr, PrintsWithMinimalParentheses) {
  EXPECT_EQ(to_string(parse_expr("2*k + 1")), "2*k + 1");
  EXPECT_EQ(to_string(parse_expr("(m + n) * 2")), "(m + n)*2");
  EXPECT_EQ(to_string(parse_expr("a - (b - c)")), "a - (b - c)");
  EXPECT_EQ(to_string(parse_expr("a - b - c")), "a - b - c");
  EXPECT_EQ(to_string(parse_expr("k % 8")), "k % 8");
}

TEST(Expr, CollectsSymbols) {
  auto s = symbols_of(parse_expr("m + 2*n - m*k"));
  EXPECT_EQ(s, (std::set<std::string>{"k", "m", "n"}));
}

TEST(Expr, FoldsConstants) {
  EXPECT_EQ(constant_value(parse_expr("2*3 + 4")), 10);
  EXPECT_EQ(constant_value(parse_expr("-7 / 2")), -4);  // floor division
  EXPECT_EQ(constant_value(parse_expr("-7 % 2")), 1);   // floor modulo
  EXPECT_FALSE(constant_value(parse_expr("n + 1")).has_value());
}

TEST(Expr, LinearizesInOneUnknown) {
  auto f = linearize(parse_expr("2*k + 1"), "k");
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(to_string(simplify(f->coef)), "2");
  EXPECT_EQ(to_string(simplify(f->rest)), "1");

  auto g = linearize(parse_expr("n*k"), "k");
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(to_string(simplify(g->coef)), "n");
  EXPECT_EQ(to_string(simplify(g->rest)), "0");

  auto h = linearize(parse_expr("m + n"), "n");
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(to_string(simplify(h->coef)), "1");
  EXPECT_EQ(to_string(simplify(h->rest)), "m");
}

TEST(Expr, RefusesNonLinearForms) {
  EXPECT_FALSE(linearize(parse_expr("k*k"), "k").has_value());
  EXPECT_FALSE(linearize(parse_expr("k / 2"), "k").has_value());
  EXPECT_FALSE(linearize(parse_expr("n % k"), "k").has_value());
}

TEST(Expr, EmitsCppWithFloorHelpers) {
  EXPECT_EQ(to_cpp(parse_expr("n / 4 + 1"), "s_"), "kjit_add(kjit_floordiv(s_n, INT64_C(4), ovf), INT64_C(1), ovf)");
  EXPECT_EQ(to_cpp(parse_expr("-n * -9223372036854775808"), "s_", "f"), "kjit_mul(kjit_neg(s_n, f), INT64_MIN, f)");
}

TEST(Expr, CollectsSymbolicDivisorsOnly) {
  std::set<std::string> texts;
  std::vector<Expr> divisors;
  collect_divisors(parse_expr("n % k + m / 4"), &texts, &divisors);
  ASSERT_EQ(divisors.size(), 1u);
  EXPECT_EQ(to_string(divisors[0]), "k");
}

}  // namespace
}  // namespace kjit
