// The signature grammar: what parses, its canonical form, and how errors point.
#include <gtest/gtest.h>

#include "kjit/errors.h"
#include "kjit/spec.h"
#include "signature/binding_plan.h"

namespace kjit {
namespace {

std::string canonical(const std::string& sig) { return to_string(parse_signature("f", sig)); }

/// The SpecError message for `sig`, or "" if it parsed.
std::string error_of(const std::string& sig) {
  try {
    parse_signature("f", sig);
  } catch (const SpecError& e) {
    return e.what();
  }
  return "";
}

TEST(SignatureParser, ParsesTheIssueExample) {
  FunctionSpec s =
      parse_signature("gemm", "a: float16[m, k], b: float16[k, n], c: float16[m, n] out, alpha: float32; k % 8 == 0");
  ASSERT_EQ(s.params.size(), 4u);
  EXPECT_EQ(s.params[0].kind, ParamKind::kTensor);
  EXPECT_EQ(s.params[0].tensor.shape.size(), 2u);
  EXPECT_TRUE(s.params[2].tensor.out);
  EXPECT_EQ(s.params[3].kind, ParamKind::kScalar);
  EXPECT_EQ(s.params[3].scalar, ScalarType::kFloat32);
  ASSERT_EQ(s.constraints.size(), 1u);
  EXPECT_EQ(s.constraints[0].op, CmpOp::kEq);
}

TEST(SignatureParser, RoundTripsCanonicalText) {
  for (const char* sig : {
           "a: float32[n], b: float32[n] out",
           "x: float16|bfloat16[m, 2*k + 1] optional strided align(16) @cpu",
           "x: any[] out",
           "a: int8[n, ld] strides[ld, 1], s: stream, alpha: float64; n <= 4096, ld >= n",
           "flag: bool, q: uint64, x: float8_e4m3fn[n]",
       }) {
    std::string once = canonical(sig);
    EXPECT_EQ(canonical(once), once) << sig;
  }
  EXPECT_EQ(canonical("a:float32[ n ,m ]"), "a: float32[n, m]");
}

TEST(SignatureParser, RankZeroAndStream) {
  FunctionSpec s = parse_signature("f", "x: float32[], s: stream");
  EXPECT_TRUE(s.params[0].tensor.shape.empty());
  EXPECT_EQ(s.params[1].kind, ParamKind::kStream);
  EXPECT_EQ(s.call_args().size(), 1u);  // the stream is not a caller argument
}

TEST(SignatureParser, DefaultDeviceFollowsTheModule) {
  FunctionSpec s = parse_signature("f", "x: float32[n]", DeviceKind::kCUDA);
  EXPECT_EQ(s.params[0].tensor.device, DeviceKind::kCUDA);
  FunctionSpec t = parse_signature("f", "x: float32[n] @cpu", DeviceKind::kCUDA);
  EXPECT_EQ(t.params[0].tensor.device, DeviceKind::kCPU);
}

TEST(SignatureParser, UnknownDtypeListsKnownOnesAndPointsAtIt) {
  std::string e = error_of("a: float32[n], b: flaot32[n]");
  EXPECT_NE(e.find("unknown dtype 'flaot32'"), std::string::npos) << e;
  EXPECT_NE(e.find("bfloat16"), std::string::npos) << e;
  // The caret line sits under "flaot32" (2 spaces of indent + its offset).
  std::string caret = "\n  " + std::string(std::string("a: float32[n], b: ").size(), ' ') + "^~~~~~~";
  EXPECT_NE(e.find(caret), std::string::npos) << e;
}

TEST(SignatureParser, SyntaxErrorsNameWhatWasExpected) {
  EXPECT_NE(error_of("a float32[n]").find("expected ':' after parameter name 'a'"), std::string::npos);
  EXPECT_NE(error_of("a: float32[n").find("expected ']' to close the shape"), std::string::npos);
  EXPECT_NE(error_of("a: float32[n] b: float32[n]").find("unknown attribute 'b'"), std::string::npos);
  EXPECT_NE(error_of(",").find("expected a parameter name"), std::string::npos);
  EXPECT_NE(error_of("a: float32[2k]").find("write 2*k"), std::string::npos);
  EXPECT_NE(error_of("a: float32[n] $").find("unexpected character '$'"), std::string::npos);
  EXPECT_NE(error_of("a: float32[n]; n").find("expected a comparison"), std::string::npos);
}

TEST(SignatureParser, TypeErrorsExplainScalarsAndTensors) {
  EXPECT_NE(error_of("a: float8_e4m3fn").find("'float8_e4m3fn' without a shape is not a scalar type"),
            std::string::npos);
  EXPECT_NE(error_of("a: any").find("'any[...]' for any rank"), std::string::npos);
  EXPECT_NE(error_of("a: tensor").find("unknown type 'tensor'"), std::string::npos);
  EXPECT_NE(error_of("a: float32[n] @tpu").find("unknown device 'tpu'"), std::string::npos);
}

TEST(SignatureParser, AttributeErrors) {
  EXPECT_NE(error_of("a: float32[n] align(3)").find("power of two"), std::string::npos);
  EXPECT_NE(error_of("a: float32[n, m] strides[1]").find("strides[...] has 1 entries but the shape has rank 2"),
            std::string::npos);
  EXPECT_NE(error_of("a: float32[n] strided strides[1]").find("conflicts with 'strided'"), std::string::npos);
  EXPECT_NE(error_of("a: float32[-1]").find("must not be negative"), std::string::npos);
  EXPECT_NE(error_of("a: float32[n / 0]").find("division by zero"), std::string::npos);
  EXPECT_NE(error_of("a: float32[99999999999999999999]").find("does not fit in int64"), std::string::npos);
}

TEST(SignatureParser, ValidationErrors) {
  EXPECT_NE(error_of("a: float32[n], a: float32[n]").find("duplicate parameter name 'a'"), std::string::npos);
  EXPECT_NE(error_of("s: stream, t: stream").find("a second stream parameter 't'"), std::string::npos);
  EXPECT_NE(error_of("n: float32[n]").find("shape symbol 'n' has the name of tensor parameter 'n'"), std::string::npos);
  EXPECT_NE(error_of("a: float32[n]; k > 0").find("constraint uses 'k', which no parameter or dimension binds"),
            std::string::npos);
  EXPECT_NE(error_of("a: float32[m + n]").find("can never be solved"), std::string::npos);
  EXPECT_NE(error_of("a: float32[n], n: float32").find("must be an integer type"), std::string::npos);
}

TEST(SignatureParser, ErrorsAreSpecErrorsWhichAreInvalidArgument) {
  EXPECT_THROW(parse_signature("f", "a: nope[n]"), SpecError);
  EXPECT_THROW(parse_signature("f", "a: nope[n]"), std::invalid_argument);
}

TEST(SignatureParser, ScalarDefaultsAreCanonical) {
  FunctionSpec s = parse_signature("f", "x: float32[n], a: float32 = +1.5, b: bool = True, k: int8 = -128");
  EXPECT_EQ(s.params[1].default_value, "1.5");
  EXPECT_EQ(s.params[2].default_value, "true");
  EXPECT_EQ(s.params[3].default_value, "-128");
  EXPECT_EQ(to_string(s), "x: float32[n], a: float32 = 1.5, b: bool = true, k: int8 = -128");
  EXPECT_EQ(canonical(to_string(s)), to_string(s));
  EXPECT_EQ(canonical("x: float32[n], s: stream, q: uint64 = 18446744073709551615, e: float64 = 1e-3"),
            "x: float32[n], s: stream, q: uint64 = 18446744073709551615, e: float64 = 1e-3");
}

TEST(SignatureParser, BadDefaultsPointAtTheValue) {
  EXPECT_EQ(error_of("x: float32[n], k: int8 = 128"),
            "signature of 'f': bad default '128' of 'k': the default 128 is out of the range of int8\n"
            "  x: float32[n], k: int8 = 128\n"
            "                           ^~~");
  EXPECT_NE(error_of("x: float32[n] = 1").find("parameter 'x' is a tensor: only scalars take a default"),
            std::string::npos);
  EXPECT_NE(error_of("x: float32[n], s: stream = 1").find("parameter 's' is a stream: only scalars take a default"),
            std::string::npos);
  EXPECT_NE(error_of("x: float32[n], a: float32 = 1, b: int32")
                .find("parameter 'b' has no default but follows 'a', which has one"),
            std::string::npos);
  // The stream is not a caller argument: it may follow a default.
  EXPECT_EQ(error_of("x: float32[n], a: float32 = 1, s: stream"), "");
}

TEST(SignatureParser, ReturnedTensors) {
  FunctionSpec s = parse_signature("f", "x: float16|bfloat16[n], y: dtype(x)[2*n] return, z: int64[n, 4] return");
  EXPECT_TRUE(s.params[1].tensor.returned);
  EXPECT_TRUE(s.params[1].tensor.out);  // the kernel sees an output
  EXPECT_EQ(s.params[1].tensor.dtype_of, "x");
  EXPECT_TRUE(s.params[1].tensor.dtypes.empty());
  EXPECT_EQ(to_string(s), "x: float16|bfloat16[n], y: dtype(x)[2*n] return, z: int64[n, 4] return");
  EXPECT_NE(error_of("x: float32[n], y: float32[m] return")
                .find("returned tensor 'y': symbol 'm' of its shape must be a whole dim of an input tensor"),
            std::string::npos);
  // dtype(x) on an input ties it to x's dtype (docs/spec.md, Dtype variables).
  EXPECT_EQ(error_of("x: float32|float64[n], y: dtype(x)[n]"), "");
  EXPECT_NE(error_of("x: float32[n], y: dtype(z)[n]").find("dtype(z)"), std::string::npos);
  // An integer parameter named like the symbol gives it too.
  EXPECT_EQ(error_of("x: float32[...], y: float32[m] return, m: int64"), "");
  // Returned tensors are not caller arguments: a default may precede one.
  EXPECT_EQ(error_of("x: float32[n], a: float32 = 1, y: float32[n] return"), "");
}

TEST(SpecBuilder, ReturnedMarksTheLastTensor) {
  FunctionSpec s = SpecBuilder("f").tensor("x", "float32", {"n"}).tensor("y", "dtype(x)", {"n"}).returned().build();
  EXPECT_EQ(to_string(s), "x: float32[n], y: dtype(x)[n] return");
}

TEST(SpecBuilder, DefaultValueOfTheLastScalar) {
  FunctionSpec s = SpecBuilder("f").tensor("x", "float32", {"n"}).scalar("a", "float32").default_value("2").build();
  EXPECT_EQ(to_string(s), "x: float32[n], a: float32 = 2");
  try {
    SpecBuilder("f").tensor("x", "float32", {"n"}).default_value("1");
    FAIL() << "a default on a tensor was accepted";
  } catch (const SpecError& e) {
    EXPECT_STREQ(e.what(),
                 "builder of 'f': default_value('1') applies to the last scalar added, but the last parameter 'x' is "
                 "not a scalar");
  }
}

TEST(SpecBuilder, BuildsTheSameSpecAsTheString) {
  FunctionSpec built = SpecBuilder("gemm")
                           .tensor("a", "float16", {"m", "k"})
                           .tensor("b", "float16", {"k", "n"})
                           .tensor("c", "float16", {"m", "n"})
                           .out()
                           .scalar("alpha", "float32")
                           .constraint("k % 8 == 0")
                           .build();
  EXPECT_EQ(to_string(built),
            canonical("a: float16[m, k], b: float16[k, n], c: float16[m, n] out, alpha: float32; k % 8 == 0"));
}

TEST(SpecBuilder, ModifiersApplyToTheLastTensor) {
  FunctionSpec s =
      SpecBuilder("f").tensor("x", "float32", {"n", "ld"}).strides({"ld", "1"}).align(64).optional().build();
  EXPECT_EQ(to_string(s), "x: float32[n, ld] optional strides[ld, 1] align(64)");
  EXPECT_THROW(SpecBuilder("f").scalar("a", "int32").out(), SpecError);
  EXPECT_THROW(SpecBuilder("f").out(), SpecError);
  EXPECT_THROW(SpecBuilder("f").scalar("a", "int3"), SpecError);
  EXPECT_THROW(SpecBuilder("f").tensor("a", "float32", {"m + n"}).build(), SpecError);
}

// ---- symbols passed to the kernel ("n: int64 symbol") ----

TEST(DTypeVars, ParseRoundTripAndMarkTheirCarriers) {
  for (const char* sig : {"<T: float32|float64> x: T[m, n], w: T[n], y: T[m, n] return, eps: T = 1e-06",
                          "<T: float16|bfloat16, I: int32|int64> a: T[n] optional, i: I[k], b: T[n] out, k: I",
                          "x: float32|float64[n], w: dtype(x)[n]"}) {
    EXPECT_EQ(canonical(sig), sig);
    EXPECT_EQ(canonical(canonical(sig)), canonical(sig));
  }
  const FunctionSpec s = parse_signature("f", "<T: float32|float64> x: T[n], eps: T, k: int64");
  ASSERT_EQ(s.dtype_vars.size(), 1u);
  EXPECT_EQ(s.dtype_vars[0].dtypes.size(), 2u);
  EXPECT_EQ(s.params[0].tensor.dtype_var, "T");
  EXPECT_EQ(s.params[0].tensor.dtypes.size(), 2u);  // the variable's alternatives, checked per tensor
  EXPECT_EQ(s.params[1].scalar_var, "T");
  EXPECT_EQ(s.params[1].scalar, ScalarType::kFloat64);  // read as a float, converted to T's dtype
  EXPECT_EQ(parse_signature("f", "<U: int8|uint16> j: U[n], k: U").params[1].scalar, ScalarType::kInt64);
}

TEST(DTypeVars, MistakesPointAtTheVariable) {
  EXPECT_EQ(error_of("<T: float32|float64> x: float32[n]"),
            "signature of 'f': dtype variable T is carried by no input or out tensor (x: T[n]): nothing would bind "
            "it\n  <T: float32|float64> x: float32[n]\n   ^~~~~~~~~~~~~~~~~~");
  EXPECT_NE(error_of("<T: float32, T: float64> x: T[n]").find("dtype variable 'T' is declared twice"),
            std::string::npos);
  EXPECT_NE(error_of("<T: float32|int8> x: T[n], s: T").find("T's dtypes must be all floating"), std::string::npos);
}

TEST(DTypeVars, TheBuilderDeclaresThem) {
  const FunctionSpec s = SpecBuilder("rms")
                             .dtype_var("T", "float32|float64")
                             .tensor("x", "T", {"m", "n"})
                             .tensor("y", "T", {"m", "n"})
                             .returned()
                             .scalar("eps", "T")
                             .build();
  EXPECT_EQ(to_string(s), "<T: float32|float64> x: T[m, n], y: T[m, n] return, eps: T");
}

TEST(Independent, ParsesAmongTheConstraintsAndPrintsAfterThem) {
  const FunctionSpec s = parse_signature("f", "x: float32[m, n], y: float32[m, n] out; independent(m), n > 0");
  EXPECT_EQ(s.independent, std::vector<std::string>{"m"});
  ASSERT_EQ(s.constraints.size(), 1u);
  EXPECT_EQ(to_string(s), "x: float32[m, n], y: float32[m, n] out; n > 0, independent(m)");
  EXPECT_EQ(canonical("x: float32[m, n]; independent(m, n)"), "x: float32[m, n]; independent(m, n)");
  // a symbol named like the clause is still a symbol where it is not followed by '('
  EXPECT_EQ(canonical("x: float32[independent]; independent > 1"), "x: float32[independent]; independent > 1");
  const FunctionSpec b =
      SpecBuilder("f").tensor("x", "float32", {"m", "n"}).constraint("n > 0").independent({"m"}).build();
  EXPECT_EQ(to_string(b), "x: float32[m, n]; n > 0, independent(m)");
}

TEST(Independent, NamesOnlySymbolsThatAreWholeDims) {
  EXPECT_EQ(error_of("x: float32[m, n]; independent(k)"),
            "signature of 'f': independent(k): 'k' is not a dim of any tensor; independent(...) names shape symbols "
            "(x: float32[m, n] has m and n)");
  EXPECT_EQ(error_of("x: float32[m, n]; independent(m, m)"), "signature of 'f': independent(m) names 'm' twice");
  EXPECT_EQ(error_of("x: float32[*b, n]; independent(b)"),
            "signature of 'f': independent(b): 'b' is a batch group, whose dims are independent already");
  EXPECT_EQ(error_of("x: float32[m], y: float32[2*m] out; independent(m)"),
            "signature of 'f': independent(m): tensor 'y' has the dim '2*m', which kjit cannot split with 'm': a "
            "symbol that is independent is only ever a whole dim");
  EXPECT_NE(error_of("x: float32[m]; independent(3)").find("expected a shape symbol in independent(...), got '3'"),
            std::string::npos);
  EXPECT_NE(error_of("x: float32[m]; independent(m").find("expected ')' to close independent(...)"), std::string::npos);
  EXPECT_THROW(SpecBuilder("f").tensor("x", "float32", {"m"}).independent({"m)"}), SpecError);
}

TEST(SymbolParams, ParseRoundTripAndLeaveTheCallerArguments) {
  FunctionSpec s = parse_signature("f", "x: float32[n], y: float32[n] out, n: int64 symbol, alpha: float32 = 1");
  EXPECT_TRUE(s.params[2].symbol);
  EXPECT_EQ(s.params[2].scalar, ScalarType::kInt64);
  EXPECT_EQ(to_string(s), "x: float32[n], y: float32[n] out, n: int64 symbol, alpha: float32 = 1");
  std::vector<std::string> passed;
  for (const Param* p : s.call_args()) passed.push_back(p->name);
  EXPECT_EQ(passed, (std::vector<std::string>{"x", "y", "alpha"}));
  // Bound by a stride, by a solved dim, or only by optional tensors: all fine.
  EXPECT_EQ(error_of("x: float32[m, k] strides[ld, 1], ld: int64 symbol"), "");
  EXPECT_EQ(error_of("x: float32[2*k + 1], k: int32 symbol"), "");
  EXPECT_EQ(error_of("x: float32[n] optional, n: int64 symbol"), "");
}

TEST(SymbolParams, ErrorsSayWhatToWriteInstead) {
  EXPECT_EQ(error_of("x: float32[n], n: float32 symbol"),
            "signature of 'f': parameter 'n' is a symbol (kjit passes the value the shapes bind to 'n') but has "
            "type float32; symbols are integers: write 'n: int64 symbol' (or another integer type)\n"
            "  x: float32[n], n: float32 symbol\n"
            "                 ^~~~~~~~~~~~~~~~~");
  EXPECT_NE(error_of("x: float32[n], m: int64 symbol")
                .find("parameter 'm' is a symbol (kjit passes the value the shapes bind to 'm'), but no tensor's "
                      "shape or strides bind a symbol 'm' (its symbols: n); name it after one of them, or drop "
                      "'symbol' to have the caller pass 'm'"),
            std::string::npos);
  EXPECT_NE(error_of("k: int64 symbol; k > 0").find("(the spec has no shape symbols)"), std::string::npos);
  EXPECT_NE(error_of("x: float32[n], n: int64 symbol, n: int64")
                .find("duplicate parameter name 'n': 'n: int64 symbol' is passed by kjit (the value the shapes "
                      "bind), so the caller cannot pass 'n: int64' too; keep one"),
            std::string::npos);
  EXPECT_NE(error_of("x: float32[n], n: int64 symbol = 3")
                .find("parameter 'n' is a symbol (kjit passes the value the shapes bind, the caller never does): it "
                      "takes no default; write 'n: int64 symbol'"),
            std::string::npos);
  EXPECT_NE(
      error_of("x: float32[n], n: int64 out").find("unknown attribute 'out' of scalar 'n': a scalar takes 'symbol'"),
      std::string::npos);
  // A returned tensor's dims must be known before the call: a symbol scalar is not.
  EXPECT_NE(error_of("x: float32[n + 1], n: int64 symbol, y: float32[n] return")
                .find("returned tensor 'y': symbol 'n' of its shape must be a whole dim"),
            std::string::npos);
}

TEST(SymbolParams, BuilderMarksASymbol) {
  FunctionSpec s = SpecBuilder("f").tensor("x", "float32", {"n", "m"}).symbol("n").symbol("m", "int32").build();
  EXPECT_EQ(to_string(s), "x: float32[n, m], n: int64 symbol, m: int32 symbol");
  EXPECT_THROW(SpecBuilder("f").tensor("x", "float32", {"n"}).symbol("k").build(), SpecError);
}

// ---- packed sub-byte tensors ----

TEST(PackedTensors, SubByteDtypesArePacked) {
  for (const char* name : {"int1", "int2", "int4", "uint1", "uint2", "uint4", "float4_e2m1fn", "float6_e2m3fn"}) {
    ASSERT_NE(find_dtype(name), nullptr) << name;
    EXPECT_TRUE(is_packed(*find_dtype(name))) << name;
  }
  for (const char* name : {"bool", "int8", "uint8", "float8_e4m3fn"})
    EXPECT_FALSE(is_packed(*find_dtype(name))) << name;
  FunctionSpec s = parse_signature("f", "w: uint4|int4[k, 2*m] strided, x: int4[...]");
  EXPECT_TRUE(is_packed(s.params[0].tensor));
  EXPECT_EQ(to_string(s), "w: uint4|int4[k, 2*m] strided, x: int4[...]");
}

TEST(PackedTensors, ValidationNamesTheProblem) {
  EXPECT_NE(error_of("x: int4|int8[n]").find("packed dtype int4 cannot be listed with int8"), std::string::npos);
  EXPECT_NE(error_of("x: uint1|int4[n]").find("packed dtype uint1 cannot be listed with int4"), std::string::npos);
  EXPECT_NE(error_of("x: int4[]").find("needs rank >= 1"), std::string::npos);
  EXPECT_NE(error_of("x: int4[m, n] strides[n, 1]").find("strides[...] would mix bytes and values"), std::string::npos);
  EXPECT_NE(error_of("x: float32[n], y: uint4[n] return").find("returned tensor 'y' is packed (uint4)"),
            std::string::npos);
  EXPECT_NE(error_of("x: int4[n], y: dtype(x)[n] return").find("dtype(x) names packed tensor 'x'"), std::string::npos);
  // The packed last dim counts values Python cannot see; outer dims are whole dims.
  EXPECT_NE(error_of("x: int4[m, n], y: float32[n] return").find("symbol 'n' of its shape must be a whole dim"),
            std::string::npos);
  EXPECT_EQ(error_of("x: int4[m, n], y: float32[m] return"), "");
}

}  // namespace
}  // namespace kjit

namespace kjit {
namespace {

TEST(BatchGroups, ParseRoundTripAndNameTheirCarriers) {
  for (const char* sig : {"x: float32[*batch, n], w: float32[n], y: float32[*batch, n] return",
                          "a: float32[*g] optional, b: int32[*g, 2, k] out", "x: float32[*b], y: float32[*b] return"}) {
    EXPECT_EQ(canonical(sig), sig);
  }
  const FunctionSpec s =
      parse_signature("f", "x: float32[*batch, n], r: float32[*batch] out, y: float32[*batch, n] return");
  EXPECT_EQ(s.params[0].tensor.batch, "batch");
  EXPECT_EQ(s.params[0].tensor.shape.size(), 1u);  // the declared dims only
  EXPECT_TRUE(s.params[1].tensor.shape.empty());
  EXPECT_EQ(batch_groups(s), std::vector<std::string>{"batch"});
  EXPECT_EQ(batch_carrier_names(s, "batch"), "x, r");
  EXPECT_EQ(shape_field_text(s.params[0].tensor, "shape", 0), "shape[-1]");
}

TEST(BatchGroups, MistakesPointAtTheTensor) {
  EXPECT_EQ(error_of("x: float32[n, *b]"),
            "signature of 'f': a shape has at most one batch group (*batch), first: it names the leading dims\n"
            "  x: float32[n, *b]\n                ^");
  EXPECT_NE(error_of("x: float32[*n, n]").find("batch group *n has the name of a shape symbol (x)"), std::string::npos);
  EXPECT_NE(error_of("x: float32[n], y: float32[*b] return").find("batch group *b is named by no input or out tensor"),
            std::string::npos);
  EXPECT_NE(error_of("x: float32[..., n]").find("name a batch group: [*batch, n]"), std::string::npos);
}

}  // namespace
}  // namespace kjit
