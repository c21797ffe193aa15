// Issue 12's guarantees for specs and checks: bounded parsers, overflow-free constant
// folding and stub arithmetic, printing that round-trips, builder names that stay
// names, float16 rounded once, and malformed DLTensors rejected before the kernel.
#include <gtest/gtest.h>
#include <tvm/ffi/container/tensor.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "ffi_error.h"
#include "kjit/detail/float16_conversions.h"
#include "kjit/errors.h"
#include "kjit/expr.h"
#include "kjit/runtime.h"
#include "kjit/spec.h"

namespace kjit {
namespace {

using kjit_test::error_of;

std::string spec_error(const std::string& signature) {
  try {
    parse_signature("f", signature);
  } catch (const SpecError& e) {
    return e.what();
  }
  return "";
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// ---- round trip: parse_expr(to_string(e)) is e ----

/// A small deterministic generator (no <random> distribution differences across libstdc++).
struct Lcg {
  uint64_t state;
  uint64_t next() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 33;
  }
  int below(int n) { return static_cast<int>(next() % static_cast<uint64_t>(n)); }
};

Expr random_expr(Lcg* g, int depth) {
  static const int64_t kConsts[] = {0, 1, 2, 3, 7, -1, -2, -5, INT64_MAX, INT64_MIN, 1ll << 62};
  static const char* const kSyms[] = {"n", "k", "m"};
  int pick = depth <= 0 ? g->below(2) : g->below(8);
  switch (pick) {
    case 0:
      return make_const(kConsts[g->below(11)]);
    case 1:
      return make_symbol(kSyms[g->below(3)]);
    case 2:
      return make_neg(random_expr(g, depth - 1));
    default: {
      static const ExprOp kOps[] = {ExprOp::kAdd, ExprOp::kSub, ExprOp::kMul, ExprOp::kDiv, ExprOp::kMod};
      ExprOp op = kOps[g->below(5)];
      Expr lhs = random_expr(g, depth - 1);
      return make_binary(op, lhs, random_expr(g, depth - 1));
    }
  }
}

bool divides_by_zero(const Expr& e) {
  if (!e || e->op == ExprOp::kConst || e->op == ExprOp::kSymbol) return false;
  if ((e->op == ExprOp::kDiv || e->op == ExprOp::kMod) && constant_value(e->rhs) == 0) return true;
  return divides_by_zero(e->lhs) || divides_by_zero(e->rhs);
}

TEST(CheckGuarantees, PrintedExpressionsParseBackToTheSameTree) {
  Lcg g{12};
  int checked = 0;
  for (int i = 0; i < 20000; ++i) {
    Expr e = random_expr(&g, 1 + g.below(5));
    if (first_unfoldable_constant(e) || divides_by_zero(e)) continue;  // the parser rejects those (tested below)
    std::string text = to_string(e);
    Expr back = parse_expr(text);
    ASSERT_TRUE(same_expr(back, e)) << text << " came back as " << to_string(back);
    ++checked;
  }
  EXPECT_GT(checked, 10000);
}

TEST(CheckGuarantees, PrintingParenthesisesWhatTheGrammarWouldRegroup) {
  auto n = make_symbol("n"), k = make_symbol("k");
  EXPECT_EQ(to_string(make_binary(ExprOp::kMul, n, make_binary(ExprOp::kDiv, k, make_const(2)))), "n*(k / 2)");
  EXPECT_EQ(to_string(make_binary(ExprOp::kAdd, n, make_binary(ExprOp::kAdd, k, make_const(1)))), "n + (k + 1)");
  EXPECT_EQ(to_string(make_binary(ExprOp::kMod, n, make_binary(ExprOp::kMod, k, make_const(3)))), "n % (k % 3)");
  EXPECT_EQ(to_string(make_neg(make_const(5))), "-(5)");
  EXPECT_EQ(to_string(make_const(-5)), "-5");
  EXPECT_EQ(to_string(make_binary(ExprOp::kSub, n, make_const(-5))), "n - -5");
  EXPECT_EQ(to_string(make_neg(make_binary(ExprOp::kMul, n, k))), "-(n*k)");
  EXPECT_EQ(to_string(make_const(INT64_MIN)), "-9223372036854775808");
  EXPECT_EQ(parse_expr("-9223372036854775808")->value, INT64_MIN);
  EXPECT_EQ(spec_error("a: float32[n*(k/2)], b: float32[n, k]"), "");
  EXPECT_EQ(to_string(parse_signature("f", "a: float32[n*(k/2)], b: float32[n, k]")),
            "a: float32[n*(k / 2)], b: float32[n, k]");
}

// ---- bounded recursion ----

TEST(CheckGuarantees, DeepNestingIsASpecErrorNotAStackOverflow) {
  std::string parens = std::string(20000, '(') + "n" + std::string(20000, ')');
  EXPECT_EQ(first_line(spec_error("a: float32[" + parens + "]")),
            "signature of 'f': the expression nests more than 256 levels deep (parentheses and unary minus); "
            "simplify it");
  EXPECT_EQ(first_line(spec_error("a: float32[n], b: float32[" + std::string(100000, '-') + "n]")),
            "signature of 'f': the expression nests more than 256 levels deep (parentheses and unary minus); "
            "simplify it");
  std::string chain = "n";
  for (int i = 0; i < 100000; ++i) chain += " + 1";
  EXPECT_EQ(first_line(spec_error("a: float32[" + chain + "]")),
            "signature of 'f': the expression is more than 256 operators deep (chained or nested terms); simplify it");
  std::string products = "n";
  for (int i = 0; i < 1000; ++i) products += "*2";
  EXPECT_NE(spec_error("a: float32[n], b: float32[" + products + "]").find("operators deep"), std::string::npos);
  // Within the bound, deep trees parse, print, fold and compile their checks.
  std::string ok = std::string(200, '(') + "n" + std::string(200, ')');
  for (int i = 0; i < 200; ++i) ok += " + 1";
  EXPECT_EQ(to_string(parse_signature("f", "a: float32[n], b: float32[" + ok + "]")).size() > 800, true);
}

// ---- constant folding ----

TEST(CheckGuarantees, ConstantFoldingThatOverflowsIsASpecError) {
  EXPECT_EQ(spec_error("a: float32[(-9223372036854775807 - 1) / -1]"),
            "signature of 'f': '(-9223372036854775807 - 1) / -1' overflows int64 (the exact value is outside "
            "[-2**63, 2**63 - 1])\n  a: float32[(-9223372036854775807 - 1) / -1]\n             "
            "^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~");
  EXPECT_EQ(first_line(spec_error("a: float32[n]; n < 9223372036854775807 + 1")),
            "signature of 'f': '9223372036854775807 + 1' overflows int64 (the exact value is outside [-2**63, "
            "2**63 - 1])");
  EXPECT_EQ(first_line(spec_error("a: float32[n]; n > -(-9223372036854775808)")),
            "signature of 'f': '--9223372036854775808' overflows int64 (the exact value is outside [-2**63, "
            "2**63 - 1])");
  EXPECT_EQ(first_line(spec_error("a: float32[n * (4611686018427387904 * 2)]")),
            "signature of 'f': '4611686018427387904*2' overflows int64 (the exact value is outside [-2**63, "
            "2**63 - 1])");
  EXPECT_EQ(first_line(spec_error("a: float32[n]; n > 9223372036854775808")),
            "signature of 'f': number '9223372036854775808' does not fit in int64 (at most 2**63 - 1)");
  // x % -1 is 0 for every x: no trap, no overflow.
  EXPECT_EQ(constant_value(parse_expr("(-9223372036854775807 - 1) % -1")), 0);
  EXPECT_EQ(fold_binary(ExprOp::kDiv, INT64_MIN, -1), std::nullopt);
  EXPECT_EQ(fold_binary(ExprOp::kMod, INT64_MIN, -1), 0);
  EXPECT_EQ(fold_binary(ExprOp::kDiv, -7, 2), -4);
  EXPECT_EQ(fold_binary(ExprOp::kMod, -7, 2), 1);
  EXPECT_EQ(fold_binary(ExprOp::kMul, 1ll << 62, 2), std::nullopt);
  EXPECT_EQ(fold_binary(ExprOp::kSub, INT64_MIN, 1), std::nullopt);
}

// ---- clear errors ----

TEST(CheckGuarantees, NonAsciiAndControlBytesAreQuoted) {
  EXPECT_EQ(spec_error("a: float32[\xc3\xa9]"),
            "signature of 'f': unexpected non-ASCII character '\xc3\xa9' (U+00E9): a signature is ASCII (names are C "
            "identifiers)\n  a: float32[\xc3\xa9]\n             ^");
  EXPECT_EQ(spec_error(std::string("a: float32[n]\0, b", 17)),
            "signature of 'f': unexpected NUL byte ('\\0')\n  a: float32[n]\\0, b\n               ^~");
  EXPECT_EQ(first_line(spec_error("a: float32[n] \xff")),
            "signature of 'f': unexpected byte '\\xFF', which is not UTF-8: a signature is ASCII (names are C "
            "identifiers)");
  try {
    parse_signature(std::string("f\0g", 3), "a: float32[n]");
    FAIL();
  } catch (const SpecError& e) {
    EXPECT_EQ(std::string(e.what()),
              "function name 'f\\0g' is not a C identifier (letters, digits and '_', not starting with a digit); it "
              "has a NUL byte ('\\0')");
  }
}

TEST(CheckGuarantees, ConflictingAttributesAreSpecErrors) {
  EXPECT_EQ(first_line(spec_error("a: float32[n] align(16) align(32)")),
            "signature of 'f': 'align(32)' conflicts with 'align(16)' given before: tensor 'a' takes one 'align' "
            "attribute");
  EXPECT_EQ(first_line(spec_error("a: float32[n] @cpu @cuda")),
            "signature of 'f': '@cuda' conflicts with '@cpu' given before: tensor 'a' takes one device");
  EXPECT_EQ(first_line(spec_error("a: float32[n] out out")),
            "signature of 'f': 'out' conflicts with 'out' given before: tensor 'a' takes one 'out' attribute");
  EXPECT_EQ(first_line(spec_error("a: float32[n] align(9223372036854775808)")),
            "signature of 'f': number '9223372036854775808' does not fit in int64 (at most 2**63 - 1)");
}

// ---- the builder ----

std::string builder_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const SpecError& e) {
    return first_line(e.what());
  }
  return "";
}

TEST(CheckGuarantees, BuilderNamesAndPiecesCannotSpliceText) {
  EXPECT_EQ(builder_error([] { SpecBuilder("f").tensor("a: float32[n], b", "float32", {"n"}).build(); }),
            "builder of 'f': tensor('a: float32[n], b', ...): the name must be an identifier (letters, digits and "
            "'_', not starting with a digit)");
  EXPECT_EQ(builder_error([] { SpecBuilder("f").scalar("x: float32[n], y", "float32").build(); }),
            "builder of 'f': scalar('x: float32[n], y', ...): the name must be an identifier (letters, digits and "
            "'_', not starting with a digit)");
  EXPECT_EQ(builder_error([] { SpecBuilder("f").stream("s t").build(); }),
            "builder of 'f': stream('s t', ...): the name must be an identifier (letters, digits and '_', not "
            "starting with a digit)");
  EXPECT_EQ(builder_error([] { SpecBuilder("f").tensor("a", "float32", {"n] out strides[1"}).build(); }),
            "builder of 'f': tensor('a', ...): dim 'n] out strides[1' is not one expression: ']' cannot appear in it");
  EXPECT_EQ(builder_error([] { SpecBuilder("f").tensor("a", "float32[n], b: float32", {"n"}).build(); }),
            "builder of 'f': tensor('a', ...): dtype 'float32[n], b: float32' is not one expression: '[' cannot "
            "appear in it");
  EXPECT_EQ(builder_error([] { SpecBuilder("f").tensor("a", "float32", {"n"}).constraint("n > 0, n < 9").build(); }),
            "builder of 'f': constraint('n > 0, n < 9', ...): constraint 'n > 0, n < 9' is not one constraint: ',' "
            "cannot appear in it");
  EXPECT_EQ(builder_error([] { SpecBuilder("f").tensor("\xc3\xa9", "float32", {"n"}).build(); }),
            "builder of 'f': tensor('\xc3\xa9', ...): the name must be an identifier (letters, digits and '_', not "
            "starting with a digit); it has a non-ASCII character '\xc3\xa9' (U+00E9)");
}

// ---- float16 and bfloat16 scalars ----

TEST(CheckGuarantees, Float16RoundsOnceToNearestEven) {
  using kjit_float16::float16_bits;
  using kjit_float16::float16_value;
  int checked = 0;
  for (uint32_t h = 0; h < 0x7c00u; ++h) {
    double lo = float16_value(static_cast<uint16_t>(h));
    double hi = h == 0x7bffu ? 65536.0 : float16_value(static_cast<uint16_t>(h + 1));
    double mid = (lo + hi) / 2;  // exact in double
    uint16_t even = static_cast<uint16_t>((h & 1u) ? h + 1 : h);
    if (h == 0x7bffu) even = 0x7c00u;  // 65520 ties to 65536 = inf
    ASSERT_EQ(float16_bits(lo), h);
    ASSERT_EQ(float16_bits(mid), even) << "h=" << h;
    ASSERT_EQ(float16_bits(std::nextafter(mid, 1e300)), h + 1) << "h=" << h;  // float would round to mid
    ASSERT_EQ(float16_bits(std::nextafter(mid, -1e300)), h) << "h=" << h;
    ASSERT_EQ(float16_bits(-std::nextafter(mid, -1e300)), h | 0x8000u) << "h=" << h;
    ++checked;
  }
  EXPECT_EQ(checked, 0x7c00);
  EXPECT_EQ(float16_bits(1e300), 0x7c00u);
  EXPECT_EQ(float16_bits(-1e300), 0xfc00u);
  EXPECT_EQ(float16_bits(NAN), 0x7e00u);
  EXPECT_EQ(float16_bits(-0.0), 0x8000u);
  EXPECT_EQ(float16_bits(std::ldexp(1.0, -25)), 0u);                       // half the smallest subnormal: even
  EXPECT_EQ(float16_bits(std::nextafter(std::ldexp(1.0, -25), 1.0)), 1u);  // just above it
  EXPECT_EQ(float16_bits(5e-324), 0u);
}

// The elementwise loops' float forms (branch-free, so they vectorise) give the double
// forms' bits: every half and bfloat16 read, floats written at a stride through every
// bit pattern and densely about each boundary of the rounding.
namespace {
uint32_t bits_of(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  return x;
}
float float_of(uint32_t x) {
  float f;
  std::memcpy(&f, &x, sizeof(f));
  return f;
}
void expect_float_forms_agree(uint32_t x) {
  const float f = float_of(x);
  ASSERT_EQ(kjit_float16::float16_bits(f), kjit_float16::float16_bits(static_cast<double>(f))) << std::hex << x;
  ASSERT_EQ(kjit_float16::bfloat16_bits(f), kjit_float16::bfloat16_bits(static_cast<double>(f))) << std::hex << x;
}
}  // namespace

TEST(CheckGuarantees, HalfReadsAsFloatGiveTheDoubleFormsValues) {
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    const auto b = static_cast<uint16_t>(h);
    ASSERT_EQ(bits_of(kjit_float16::float16_float(b)), bits_of(static_cast<float>(kjit_float16::float16_value(b))))
        << std::hex << h;
    ASSERT_EQ(bits_of(kjit_float16::bfloat16_float(b)), h << 16);
    ASSERT_EQ(bits_of(kjit_float16::bfloat16_float(b)), bits_of(static_cast<float>(kjit_float16::bfloat16_value(b))));
  }
}

TEST(CheckGuarantees, HalfWritesFromFloatGiveTheDoubleFormsBits) {
  for (uint64_t x = 0; x <= 0xffffffffu; x += 251) expect_float_forms_agree(static_cast<uint32_t>(x));
  // About 0, 2^-25 (half the smallest subnormal), 2^-14, the largest half and 65520
  // (ties to inf), 2^16, FLT_MAX, inf and NaN; positive and negative.
  for (uint32_t edge : {0x00000000u, 0x33000000u, 0x38800000u, 0x477fe000u, 0x477ff000u, 0x47800000u, 0x7f7fffffu,
                        0x7f800000u, 0x7fc00000u}) {
    for (uint32_t d = 0; d < 20000; ++d) {
      for (uint32_t sign : {0u, 0x80000000u}) {
        expect_float_forms_agree((edge + d) | sign);
        expect_float_forms_agree((edge - d) | sign);
      }
    }
  }
}

TEST(CheckGuarantees, Bfloat16MatchesTheFrameworksRoundingThroughFloat) {
  using kjit_float16::bfloat16_bits;
  EXPECT_EQ(bfloat16_bits(1.0), 0x3f80u);
  EXPECT_EQ(bfloat16_bits(1e300), 0x7f80u);  // beyond float: inf, without the undefined cast
  EXPECT_EQ(bfloat16_bits(-1e300), 0xff80u);
  EXPECT_EQ(bfloat16_bits(NAN), 0x7fc0u);
  EXPECT_EQ(bfloat16_bits(1 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40)), 0x3f80u);  // as ml_dtypes.bfloat16
}

// ---- generated checks at call time ----

const char* kKernels = R"(
#include <kjit/kernel.h>
int64_t first(const kjit::TensorView a) { return a.ndim(); }
int64_t div_dim(int64_t, int64_t, const kjit::TensorView a) { return a.size(0); }
int64_t scaled(int64_t, const kjit::TensorView a) { return a.size(0); }
int64_t bounded(int64_t n, const kjit::TensorView) { return n; }
int64_t solved(const kjit::TensorView a, const kjit::TensorView b) { return a.size(0) + b.size(0); }
int64_t any_rank(const kjit::TensorView a) { return a.ndim(); }
int64_t two(const kjit::TensorView a, const kjit::TensorView b) { return a.ndim() + b.ndim(); }
)";

Module checks_module() {
  return load_inline("cpp_check_guarantees", {kKernels},
                     SignatureList{{"first", "a: int8[n] strided"},
                                   {"div_dim", "n: int64, d: int64, a: int8[n / d] strided"},
                                   {"scaled", "n: int64, a: int8[4*n] strided"},
                                   {"bounded", "n: int64, a: int8[n] strided; n*4 < 100"},
                                   {"solved", "a: int8[m] strided, b: int8[4*m + k] strided"},
                                   {"any_rank", "a: any[...] strided"},
                                   {"two", "a: int8[n], b: int8[n]"}});
}

struct Raw {
  int64_t shape[3] = {4, 1, 1};
  int64_t strides[3] = {1, 1, 1};
  char byte = 0;
  DLTensor t{};
  explicit Raw(int64_t extent) {
    shape[0] = extent;
    t.data = &byte;
    t.ndim = 1;
    t.shape = shape;
    t.strides = strides;
    t.dtype = {kDLInt, 8, 1};
    t.device = {kDLCPU, 0};
  }
};

TEST(CheckGuarantees, ShapeArithmeticOverflowIsAValueErrorNamingTheExpression) {
  Module m = checks_module();
  Raw a(4);
  EXPECT_EQ(error_of(m.function("scaled"), (int64_t{1} << 62) + 1, &a.t),
            "ValueError: scaled: argument #1 'a': shape[0] must equal 4*n, which overflows int64 with n = "
            "4611686018427387905 (bound by argument 'n')");
  Raw big(int64_t{1} << 62);
  EXPECT_EQ(error_of(m.function("bounded"), int64_t{1} << 62, &big.t),
            "ValueError: bounded: constraint 'n*4 < 100' needs n*4, which overflows int64 with n = "
            "4611686018427387904 (bound by argument 'n')");
  EXPECT_EQ(error_of(m.function("div_dim"), INT64_MIN, int64_t{-1}, &a.t),
            "ValueError: div_dim: argument #2 'a': shape[0] must equal n / d, which overflows int64 with d = -1 "
            "(bound by argument 'd'), n = -9223372036854775808 (bound by argument 'n')");
  Raw b(INT64_MAX);
  EXPECT_EQ(error_of(m.function("solved"), &b.t, &a.t),
            "ValueError: solved: argument #1 'b': solving shape[0] == 4*m + k for k, which overflows int64 with m = "
            "9223372036854775807 (bound by a.shape[0])");
  Raw small(24);
  EXPECT_EQ(error_of(m.function("bounded"), int64_t{24}, &small.t), "");
  EXPECT_EQ(error_of(m.function("scaled"), int64_t{1}, &a.t), "");
}

TEST(CheckGuarantees, MalformedDLTensorsNeverReachTheKernel) {
  Module m = checks_module();
  auto err = [&](const char* fn, DLTensor* t) { return error_of(m.function(fn), t); };
  Raw neg(-3);
  EXPECT_EQ(err("first", &neg.t),
            "ValueError: first: argument #0 'a': malformed DLTensor: an extent (shape[i]) is negative (ndim 1, shape "
            "[-3], dtype code 0 bits 8 lanes 1)");
  Raw zero_bits(4);
  zero_bits.t.dtype = {kDLInt, 0, 1};
  EXPECT_EQ(err("any_rank", &zero_bits.t),
            "ValueError: any_rank: argument #0 'a': malformed DLTensor: dtype has 0 bits (ndim 1, shape [4], dtype "
            "code 0 bits 0 lanes 1)");
  Raw zero_lanes(4);
  zero_lanes.t.dtype = {kDLInt, 8, 0};
  EXPECT_EQ(err("any_rank", &zero_lanes.t),
            "ValueError: any_rank: argument #0 'a': malformed DLTensor: dtype has 0 lanes (ndim 1, shape [4], dtype "
            "code 0 bits 8 lanes 0)");
  Raw neg_ndim(4);
  neg_ndim.t.ndim = -1;
  EXPECT_EQ(err("any_rank", &neg_ndim.t),
            "ValueError: any_rank: argument #0 'a': malformed DLTensor: ndim is negative (ndim -1, shape [], dtype "
            "code 0 bits 8 lanes 1)");
  EXPECT_EQ(err("first", &neg_ndim.t), "TypeError: first: argument #0 'a': ndim must be 1 (int8[n] strided), got -1");
  Raw null_shape(4);
  null_shape.t.shape = nullptr;
  EXPECT_EQ(err("any_rank", &null_shape.t),
            "ValueError: any_rank: argument #0 'a': malformed DLTensor: shape is NULL but ndim is not 0 (ndim 1, "
            "shape [], dtype code 0 bits 8 lanes 1)");
  Raw huge(int64_t{1} << 40);
  huge.t.ndim = 3;
  huge.shape[1] = int64_t{1} << 20;
  huge.shape[2] = int64_t{1} << 10;
  EXPECT_EQ(err("any_rank", &huge.t),
            "ValueError: any_rank: argument #0 'a': malformed DLTensor: the size in bytes (product of the extents "
            "and the element size) overflows int64 (ndim 3, shape [1099511627776, 1048576, 1024], dtype code 0 "
            "bits 8 lanes 1)");
  huge.shape[0] = 0;  // empty: zero bytes, whatever the other extents
  EXPECT_EQ(err("any_rank", &huge.t), "");
  Raw fine(4);
  EXPECT_EQ(err("any_rank", &fine.t), "");
}

TEST(CheckGuarantees, CpuDeviceIdMismatchNamesBothIds) {
  Module m = checks_module();
  Raw a(4), b(4);
  a.t.strides = b.t.strides = nullptr;
  b.t.device = {kDLCPU, 1};
  EXPECT_EQ(error_of(m.function("two"), &a.t, &b.t),
            "ValueError: two: argument #1 'b': device must be cpu:0 (the device of 'a'), got cpu:1");
}

}  // namespace
}  // namespace kjit
