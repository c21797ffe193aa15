// The emitted stub: its shape, its checks' order, and its light includes.
#include <gtest/gtest.h>

#include "kjit/build.h"
#include "kjit/codegen.h"
#include "kjit/spec.h"

namespace kjit {
namespace {

std::string stub_of(const std::string& sig) { return emit_stub(parse_signature("add", sig)); }

size_t pos(const std::string& text, const std::string& needle) {
  size_t p = text.find(needle);
  EXPECT_NE(p, std::string::npos) << "missing: " << needle;
  return p;
}

TEST(StubEmitter, ExportsTheSafeCallSymbol) {
  std::string s = stub_of("a: float32[n]");
  EXPECT_NE(s.find("extern \"C\" __attribute__((visibility(\"default\"))) int __tvm_ffi_add(void*, const "
                   "TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {\n"
                   "  return kjit_checked_add(args, num_args, result, nullptr);\n}"),
            std::string::npos);
  // The checks live in one function the XLA handler shares, inlined into the safe call.
  EXPECT_NE(s.find("static inline __attribute__((always_inline)) int kjit_checked_add("), std::string::npos);
}

TEST(StubEmitter, ChecksInReadingOrder) {
  std::string s = stub_of("a: float32[m, k] align(16), b: float32[k]; k % 4 == 0");
  size_t count = pos(s, "num_args != 2");
  size_t kind = pos(s, "as_tensor(&args[0])");
  size_t ndim = pos(s, "t_a->ndim != 2");
  size_t dtype = pos(s, "fail_dtype(kFn, 0");
  size_t shape = pos(s, "by_m = \"a.shape[0]\"");
  size_t strides = pos(s, "first_noncompact_dim(t_a)");
  size_t align = pos(s, "% 16 != 0");
  size_t device = pos(s, "fail_device_type(kFn, 0");
  size_t constraint = pos(s, "fail_constraint");
  size_t call = pos(s, "::add(");
  EXPECT_LT(count, kind);
  EXPECT_LT(kind, ndim);
  EXPECT_LT(ndim, dtype);
  EXPECT_LT(dtype, shape);
  EXPECT_LT(shape, strides);
  EXPECT_LT(strides, align);
  EXPECT_LT(align, device);
  EXPECT_LT(device, constraint);
  EXPECT_LT(constraint, call);
}

TEST(StubEmitter, AcceptsExactlyTensorKinds) {
  std::string prelude = emit_stub_prelude();
  EXPECT_NE(prelude.find("a->type_index == kTVMFFITensor"), std::string::npos);
  EXPECT_NE(prelude.find("a->type_index == kTVMFFIDLTensorPtr"), std::string::npos);
  EXPECT_EQ(prelude.find(">= kTVMFFIStaticObjectBegin"), std::string::npos);
}

TEST(StubEmitter, IncludesOnlyTheCAbi) {
  ModuleSource m = emit_module_source({{"cpp_sources", "void add(kjit::TensorView) {}\n"}},
                                      {parse_signature("add", "a: float32[n]")}, "m.cc");
  // The C ABI comes with the stub headers (stub_includes.h), the first line.
  EXPECT_EQ(m.text.rfind(kStubIncludesLine, 0), 0u);
  EXPECT_EQ(m.text.find("tvm/ffi/function.h"), std::string::npos);
  EXPECT_EQ(m.text.find("tvm/ffi/container"), std::string::npos);
  EXPECT_NE(m.text.find("#line 1 \"cpp_sources\"\nvoid add"), std::string::npos);
}

TEST(StubEmitter, OptionalTensorsAreGuarded) {
  std::string s = stub_of("a: float32[n], bias: float32[n] optional");
  EXPECT_NE(s.find("if (!is_none(&args[1]))"), std::string::npos);
  EXPECT_NE(s.find("if (t_bias != nullptr) {"), std::string::npos);
}

TEST(StubEmitter, StridedSkipsTheCompactCheckAndExtentOneStridesNeverFail) {
  EXPECT_EQ(stub_of("a: float32[n] strided").find("first_noncompact_dim"), std::string::npos);
  std::string s = stub_of("a: float32[n, m] strides[m, 1]");
  EXPECT_NE(s.find("t_a->shape[0] > 1 && stride_of(t_a, 0) != expected"), std::string::npos);
  EXPECT_NE(s.find("t_a->shape[0] > 1 && ovf_expected"), std::string::npos);
}

TEST(StubEmitter, NarrowIntegersGetRangeChecks) {
  std::string s = stub_of("a: float32[n], k: int32, u: uint8");
  EXPECT_NE(s.find("v_k < INT64_C(-2147483648) || v_k > INT64_C(2147483647)"), std::string::npos);
  EXPECT_NE(s.find("v_u < INT64_C(0) || v_u > INT64_C(255)"), std::string::npos);
}

TEST(StubEmitter, SolvesLinearDimsAndRechecks) {
  std::string s = stub_of("a: float32[k], b: float32[2*k + 1], c: float32[m], d: float32[m + n]");
  EXPECT_NE(s.find("by_n = \"d.shape[0]\""), std::string::npos);
  EXPECT_NE(s.find("kjit_floormod(rest, coef, ovf)"), std::string::npos);
  EXPECT_NE(s.find("if (m != 0 || q < 0)"), std::string::npos);
  EXPECT_NE(s.find("fail_field(kFn, 3, \"d\", \"shape[0]\", \"m + n\""), std::string::npos);
}

TEST(StubEmitter, PassesTheStreamFromTheEnvironment) {
  std::string s = stub_of("a: float32[n], s: stream");
  EXPECT_NE(s.find("TVMFFIEnvGetStream(kDLCPU, 0)"), std::string::npos);
  EXPECT_NE(s.find("StreamArg{stream}"), std::string::npos);
}

TEST(StubEmitter, PassesSymbolsByValueWithRangeChecks) {
  std::string s = stub_of("a: float32[n, k] optional, n: int64 symbol, k: int32 symbol");
  EXPECT_NE(s.find("if (num_args != 1)"), std::string::npos);  // the caller passes a only
  EXPECT_NE(s.find("SymbolArg<int64_t>{s_n}, SymbolArg<int32_t>{s_k}"), std::string::npos);
  // Bound only by an optional tensor: checked before the call.
  EXPECT_NE(s.find("if (by_n == nullptr) return fail_unbound(kFn, \"n\", \"a\");"), std::string::npos);
  EXPECT_NE(s.find("s_k < INT64_C(-2147483648) || s_k > INT64_C(2147483647)) return fail_symbol_range(kFn, \"k\""),
            std::string::npos);
  EXPECT_EQ(s.find("s_n < INT64_C("), std::string::npos);  // int64 holds every symbol
}

TEST(StubEmitter, PackedTensorsAcceptBytesAndCountValues) {
  std::string s = stub_of("a: float32[n], x: int4[k, n]");
  EXPECT_NE(s.find("packs_values(t_x->dtype, 0, 4)"), std::string::npos);  // int8/uint8 bytes carry int4 values
  EXPECT_NE(s.find("packed_extent(t_x, 4)"), std::string::npos);
  EXPECT_NE(s.find("fail_packed_field(kFn, 1, \"x\", \"shape[1]\", \"n\""), std::string::npos);
  EXPECT_NE(s.find("fail_packed_stride(kFn, 1, \"x\", t_x, \"int4\")"), std::string::npos);
  EXPECT_EQ(s.find("packed_whole("), std::string::npos);  // 4-bit values always fill whole bytes
  std::string six = stub_of("x: float6_e3m2fn[n]");
  EXPECT_NE(six.find("!packed_whole(t_x, 6)) return fail_packed_bits(kFn, 0, \"x\", t_x, 6, \"float6_e3m2fn\", 3)"),
            std::string::npos);
}

}  // namespace
}  // namespace kjit