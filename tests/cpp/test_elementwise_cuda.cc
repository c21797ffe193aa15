// The CUDA elementwise backend without a GPU: every variant's generated source
// compiles with NVRTC (CUBIN for sm_80 and sm_90, PTX for compute_90 that ptxas
// assembles); user code errors point at the computation string; the kernels,
// built as host C++ with CUDA builtins shimmed, compute the right values through
// the planned launches (indexing, vector widths, offsets, casts, extras); and the
// host logic (geometry, magic division, argument packing, 32-bit splitting, the
// missing driver) is checked as plain arithmetic.
//
// The NVRTC tests skip when libnvrtc cannot be loaded; nothing needs a driver.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cuda/codegen_cuda.h"
#include "cuda/cuda_cache.h"
#include "cuda/cuda_launch.h"
#include "cuda/nvrtc.h"
#include "kjit/build.h"
#include "kjit/errors.h"
#include "kjit/kernel.h"
#include "loop_operands.h"
#include "test_dirs.h"

namespace kjit {
namespace ew {
namespace {

namespace fs = std::filesystem;
using kjit_test::TempDir;
using kjit_test::write_file;
using T = EwType;
using detail::LoopLayout;

using kjit_test::dims;

/// Gives the loop one operand per entry, with these byte strides (fastest first).
void set_strides(LoopLayout* loop, const std::vector<std::vector<int64_t>>& strides) {
  loop->operands = kjit_test::operands_fastest_first(strides);
}

void set_data(LoopLayout* loop, const std::vector<char*>& data) {
  loop->operands.resize(data.size());
  for (size_t op = 0; op < data.size(); ++op) loop->operands[op].data = data[op];
}

std::vector<std::vector<int64_t>> operand_strides(const LoopLayout& loop) {
  std::vector<std::vector<int64_t>> out;
  for (const OperandInfo& op : loop.operands) out.emplace_back(op.strides.begin(), op.strides.end());
  return out;
}

// ---------------------------------------------------------------------------
// Kernels and the type combinations they are compiled for.

const char* kAdd = "template <typename T>\nT add(T a, T b) {\n  return a + b;\n}\n";
const char* kMath = R"(template <typename T> T helper(T x) { return std::sqrt(std::abs(x)) + exp(x); }
template <typename T> T math(T a, T b) { return helper(a) * b - std::max(a, b); })";
const char* kDivmod = "template <typename T> void divmod(T a, T b, T& q, T& r) {\n  q = a / b;\n  r = a - q * b;\n}\n";
const char* kAxpy = "template <typename T> T axpy(T x, T y, T alpha, T beta) { return alpha * x + beta * y; }\n";
const char* kComplex = "template <typename T> T cfma(T a, T b) { return a * b + std::exp(a) / b - conj(a) * 2; }\n";
const char* kSum8 =
    "template <typename T> T sum8(T a, T b, T c, T d, T e, T f, T g, T h) { return a + b + c + d + e + f + g + h; "
    "}\n";
const char* kMixed = "int64_t shift(int64_t a, int64_t b) { return (a << 3) ^ b; }\n";

struct Case {
  const char* name;
  const char* code;
  const char* entry;
  EwKernelTypes types;
};

/// `extra`: the travel type of each extra scalar (ew::extra_travel_type).
EwKernelTypes types_of(std::vector<T> outputs, std::vector<T> inputs, T compute, std::vector<T> extra = {}) {
  EwKernelTypes t;
  t.outputs = std::move(outputs);
  t.inputs = std::move(inputs);
  t.compute = compute;
  t.extra = std::move(extra);
  return t;
}

/// `t` with inputs passed by value where `flags` says (Python scalars in a CUDA call).
EwKernelTypes by_value(EwKernelTypes t, std::vector<bool> flags) {
  t.by_value = std::move(flags);
  return t;
}

std::vector<Case> cases() {
  return {
      {"add_float32", kAdd, "add", types_of({T::kFloat32}, {T::kFloat32, T::kFloat32}, T::kFloat32)},
      {"add_float64", kAdd, "add", types_of({T::kFloat64}, {T::kFloat64, T::kFloat64}, T::kFloat64)},
      {"add_int32", kAdd, "add", types_of({T::kInt32}, {T::kInt32, T::kInt32}, T::kInt32)},
      {"add_int64", kAdd, "add", types_of({T::kInt64}, {T::kInt64, T::kInt64}, T::kInt64)},
      {"add_bool", kAdd, "add", types_of({T::kBool}, {T::kBool, T::kBool}, T::kBool)},
      {"add_uint8", kAdd, "add", types_of({T::kUInt8}, {T::kUInt8, T::kUInt8}, T::kUInt8)},
      {"add_float16", kAdd, "add", types_of({T::kFloat16}, {T::kFloat16, T::kFloat16}, T::kFloat32)},
      {"add_bfloat16", kAdd, "add", types_of({T::kBFloat16}, {T::kBFloat16, T::kBFloat16}, T::kFloat32)},
      {"add_int32_float32", kAdd, "add", types_of({T::kFloat32}, {T::kInt32, T::kFloat32}, T::kFloat32)},
      {"add_float16_into_float64", kAdd, "add", types_of({T::kFloat64}, {T::kFloat16, T::kBFloat16}, T::kFloat64)},
      {"add_int8_into_float16", kAdd, "add", types_of({T::kFloat16}, {T::kInt8, T::kUInt8}, T::kFloat32)},
      {"math_float32", kMath, "math", types_of({T::kFloat32}, {T::kFloat32, T::kFloat32}, T::kFloat32)},
      {"divmod_float32", kDivmod, "divmod",
       types_of({T::kFloat32, T::kFloat32}, {T::kFloat32, T::kFloat32}, T::kFloat32)},
      {"divmod_int64_cast", kDivmod, "divmod", types_of({T::kInt64, T::kInt32}, {T::kInt32, T::kInt16}, T::kInt64)},
      {"divmod_float16_cast", kDivmod, "divmod",
       types_of({T::kFloat16, T::kBFloat16}, {T::kFloat16, T::kFloat16}, T::kFloat32)},
      {"axpy_extra_float64", kAxpy, "axpy",
       types_of({T::kFloat64}, {T::kFloat64, T::kFloat64}, T::kFloat64, {T::kFloat64, T::kInt64})},
      {"axpy_extra_float16", kAxpy, "axpy",
       types_of({T::kFloat16}, {T::kFloat16, T::kFloat16}, T::kFloat32, {T::kFloat64, T::kInt64})},
      {"complex64", kComplex, "cfma", types_of({T::kComplex64}, {T::kComplex64, T::kComplex64}, T::kComplex64)},
      {"complex128_cast", kComplex, "cfma", types_of({T::kComplex128}, {T::kFloat64, T::kComplex64}, T::kComplex128)},
      {"complex_into_bool", kAdd, "add", types_of({T::kBool}, {T::kComplex64, T::kInt32}, T::kComplex64)},
      {"sum8_int16", kSum8, "sum8", types_of({T::kInt16}, std::vector<T>(8, T::kInt16), T::kInt16)},
      {"plain_function_uint64", kMixed, "shift", types_of({T::kInt64}, {T::kUInt64, T::kInt64}, T::kInt64)},
      {"add_float32_scalar_right", kAdd, "add",
       by_value(types_of({T::kFloat32}, {T::kFloat32, T::kFloat32}, T::kFloat32), {false, true})},
      {"shift_scalar_left", kMixed, "shift",
       by_value(types_of({T::kInt64}, {T::kUInt64, T::kInt64}, T::kInt64), {true, false})},
      {"add_float16_float_scalar", kAdd, "add",
       by_value(types_of({T::kFloat16}, {T::kFloat16, T::kFloat32}, T::kFloat32), {false, true})},
      {"complex128_scalar", kComplex, "cfma",
       by_value(types_of({T::kComplex128}, {T::kComplex128, T::kComplex128}, T::kComplex128), {false, true})},
      {"axpy_scalars_and_extra", kAxpy, "axpy",
       by_value(types_of({T::kFloat64}, {T::kFloat64, T::kFloat64}, T::kFloat64, {T::kFloat64, T::kInt64}),
                {false, true})},
  };
}

std::vector<EwCudaVariant> variants_for(const EwKernelTypes& t) {
  if (ew_cuda_needs_cast(t)) return {EwCudaVariant::kCastContiguous, EwCudaVariant::kCastStrided};
  return {EwCudaVariant::kVectorized, EwCudaVariant::kStrided, EwCudaVariant::kCastContiguous,
          EwCudaVariant::kCastStrided};
}

struct CaseVariant {
  Case c;
  EwCudaVariant variant;
};
void PrintTo(const CaseVariant& cv, std::ostream* os) { *os << cv.c.name << "/" << ew_cuda_variant_name(cv.variant); }

std::vector<CaseVariant> case_variants() {
  std::vector<CaseVariant> out;
  for (const Case& c : cases()) {
    for (EwCudaVariant v : variants_for(c.types)) out.push_back({c, v});
  }
  return out;
}

/// The extern "C" kernels a variant's source defines.
std::vector<std::string> kernel_names(const CaseVariant& cv) {
  if (cv.variant != EwCudaVariant::kVectorized) return {ew_cuda_kernel_name(cv.variant)};
  std::vector<std::string> names;
  for (int vec : {4, 2, 1}) {
    if (ew_cuda_vec_width_allowed(vec, ew_cuda_max_operand_size(cv.c.types))) {
      names.push_back(ew_cuda_kernel_name(cv.variant, vec));
    }
  }
  return names;
}

// ---------------------------------------------------------------------------
// NVRTC and ptxas.

std::string nvrtc_skip_reason() {
  try {
    cuda::nvrtc_version();
    return "";
  } catch (const ToolchainError& e) {
    return e.what();
  }
}

std::string ptxas_path() {
  try {
    std::string p = find_cuda_toolchain().root + "/bin/ptxas";
    return fs::exists(p) ? p : "";
  } catch (const ToolchainError&) {
    return "";
  }
}

class ElementwiseCudaNvrtc : public ::testing::TestWithParam<CaseVariant> {
 protected:
  void SetUp() override {
    std::string skip = nvrtc_skip_reason();
    if (!skip.empty()) GTEST_SKIP() << skip;
  }
  cuda::NvrtcResult compile(const std::string& arch) {
    const CaseVariant& cv = GetParam();
    return cuda::compile_elementwise_cuda(cv.c.code, cv.c.entry, cv.c.types, cv.variant, arch);
  }
};

TEST_P(ElementwiseCudaNvrtc, SourceIsSelfContained) {
  const CaseVariant& cv = GetParam();
  std::string src = emit_elementwise_cuda(cv.c.code, cv.c.entry, cv.c.types, cv.variant);
  EXPECT_EQ(src.find("#include"), std::string::npos);
  EXPECT_NE(src.find("#line 1 \"code\"\n" + std::string(cv.c.code)), std::string::npos);
  for (const std::string& k : kernel_names(cv))
    EXPECT_NE(src.find("extern \"C\" __global__ void " + k + "("), std::string::npos) << k;
  EXPECT_NE(src.find(cv.c.types.text()), std::string::npos);
}

TEST_P(ElementwiseCudaNvrtc, CompilesToCubinForSm80AndSm90) {
  std::future<cuda::NvrtcResult> sm90 = std::async(std::launch::async, [this] { return compile("sm_90"); });  // 2 cores
  std::map<std::string, cuda::NvrtcResult> results;
  results["sm_80"] = compile("sm_80");
  results["sm_90"] = sm90.get();
  for (const auto& [arch, r] : results) {
    EXPECT_FALSE(r.ptx);
    EXPECT_EQ(r.log.find("warning"), std::string::npos) << arch << ":\n" << r.log;  // the generated code is clean
    ASSERT_GT(r.binary.size(), 4u) << arch;
    EXPECT_EQ(r.binary.compare(0, 4,
                               "\x7f"
                               "ELF"),
              0)
        << arch;
    for (const std::string& k : kernel_names(GetParam())) {
      EXPECT_NE(r.binary.find(k + '\0'), std::string::npos) << arch << " lacks " << k;
    }
  }
}

TEST_P(ElementwiseCudaNvrtc, PtxForCompute90AssemblesWithPtxas) {
  std::string ptxas = ptxas_path();
  if (ptxas.empty()) GTEST_SKIP() << "no ptxas in the CUDA toolkit";
  cuda::NvrtcResult r = compile("compute_90");
  ASSERT_TRUE(r.ptx);
  EXPECT_NE(r.binary.find(".target sm_90"), std::string::npos);
  for (const std::string& k : kernel_names(GetParam()))
    EXPECT_NE(r.binary.find(".entry " + k + "("), std::string::npos) << k;
  TempDir tmp;
  write_file(tmp / "k.ptx", r.binary);
  ProcessResult p = run_process({ptxas, "-arch=sm_90", (tmp / "k.ptx").string(), "-o", (tmp / "k.cubin").string()});
  EXPECT_EQ(p.exit_code, 0) << p.output;
  EXPECT_GT(fs::file_size(tmp / "k.cubin"), 0u);
}

INSTANTIATE_TEST_SUITE_P(ElementwiseCuda, ElementwiseCudaNvrtc, ::testing::ValuesIn(case_variants()),
                         [](const ::testing::TestParamInfo<CaseVariant>& info) {
                           return std::string(info.param.c.name) + "_" + ew_cuda_variant_name(info.param.variant);
                         });

class ElementwiseCudaErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string skip = nvrtc_skip_reason();
    if (!skip.empty()) GTEST_SKIP() << skip;
  }
  /// The CompileError's message, or "" when it compiled.
  static std::string error_of(const char* code, const char* entry, const EwKernelTypes& t, EwCudaVariant v) {
    try {
      cuda::compile_elementwise_cuda(code, entry, t, v, "sm_80");
    } catch (const CompileError& e) {
      EXPECT_NE(e.command().find("--gpu-architecture=sm_80"), std::string::npos) << e.command();
      EXPECT_FALSE(e.log().empty());
      return e.what();
    }
    return "";
  }
};

/// `#define word 1` for every common word: the names a user's macros may take,
/// which kjit's code after the user's must not use (issue 38).
std::string common_word_macros() {
  std::string out;
  for (const char* w :
       {"count",   "n",     "data",      "out",    "identity", "value", "map", "combine", "store", "better",    "Acc",
        "Value",   "kArg",  "kOperands", "kSizes", "i",        "j",     "k",   "u",       "e",     "v",         "w",
        "r",       "s",     "p",         "b",      "d",        "q",     "V",   "S",       "start", "remaining", "off",
        "oc",      "sc",    "ex",        "in",     "in0",      "out0",  "r0",  "out_off", "vec_t", "linear",    "sizes",
        "strides", "ndim",  "divisor",   "magic",  "shift",    "x",     "y",   "part",    "parts", "partials",  "acc",
        "index",   "level", "leaf",      "block",  "lanes",    "base"}) {
    out += std::string("#define ") + w + " 1\n";
  }
  return out;
}

TEST_F(ElementwiseCudaErrors, UserMacrosNamedLikeCommonWordsDoNotReachTheGeneratedCode) {
  const std::string code =
      common_word_macros() + "template <typename Tz> Tz f(Tz lhs, Tz rhs, double scale) { return lhs * rhs; }";
  const EwKernelTypes t = types_of({T::kFloat32}, {T::kInt32, T::kFloat32}, T::kFloat32, {T::kFloat64});
  for (EwCudaVariant v : {EwCudaVariant::kCastContiguous, EwCudaVariant::kCastStrided}) {
    EXPECT_EQ(error_of(code.c_str(), "f", t, v), "") << ew_cuda_variant_name(v);
  }
  const std::string plain = common_word_macros() + "template <typename Tz> Tz f(Tz lhs, Tz rhs) { return lhs * rhs; }";
  const EwKernelTypes same = types_of({T::kFloat32}, {T::kFloat32, T::kFloat32}, T::kFloat32);
  for (EwCudaVariant v : {EwCudaVariant::kVectorized, EwCudaVariant::kStrided}) {
    EXPECT_EQ(error_of(plain.c_str(), "f", same, v), "") << ew_cuda_variant_name(v);
  }
}

TEST_F(ElementwiseCudaErrors, UserCodeErrorPointsAtTheCodeLineAndNamesTheDtypes) {
  const char* code = "template <typename T>\nT f(T a, T b) {\n  return a + undefined_name;\n}\n";
  EwKernelTypes t = types_of({T::kFloat32}, {T::kInt32, T::kFloat32}, T::kFloat32);
  std::string msg = error_of(code, "f", t, EwCudaVariant::kCastStrided);
  EXPECT_NE(msg.find("code(3): error: identifier \"undefined_name\" is undefined"), std::string::npos) << msg;
  EXPECT_NE(msg.find("kjit.elementwise 'f' (int32, float32) -> float32, computing in float32"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("cast_strided"), std::string::npos) << msg;
  EXPECT_NE(msg.find("lines of 'code' are lines of the computation string"), std::string::npos) << msg;
}

TEST_F(ElementwiseCudaErrors, ErrorOnlyForSomeDtypesNamesThem) {
  const char* code = "template <typename T> T rem(T a, T b) { return a % b; }\n";
  EXPECT_EQ(error_of(code, "rem", types_of({T::kInt32}, {T::kInt32, T::kInt32}, T::kInt32), EwCudaVariant::kVectorized),
            "");
  std::string msg =
      error_of(code, "rem", types_of({T::kFloat64}, {T::kFloat64, T::kFloat64}, T::kFloat64), EwCudaVariant::kStrided);
  EXPECT_NE(msg.find("code(1): error"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(float64, float64) -> float64"), std::string::npos) << msg;
  EXPECT_NE(msg.find("T=double"), std::string::npos) << msg;
}

TEST_F(ElementwiseCudaErrors, MissingEntryIsReported) {
  std::string msg =
      error_of(kAdd, "sub", types_of({T::kInt64}, {T::kInt64, T::kInt64}, T::kInt64), EwCudaVariant::kCastContiguous);
  EXPECT_NE(msg.find("namespace \"kjit_user_code\" has no member \"sub\""), std::string::npos) << msg;
}

TEST_F(ElementwiseCudaErrors, AnyEntryNameAndEitherOutputFormCompile) {
  // Issue 15 classes 1, 2 and 8: the generated code's own names, math names, and
  // a single output written through a reference.
  const EwKernelTypes t = types_of({T::kFloat32}, {T::kInt32, T::kFloat32}, T::kFloat32, {T::kFloat64});
  for (const char* name : {"n",
                           "data",
                           "oc",
                           "sc",
                           "ex",
                           "j",
                           "k",
                           "i",
                           "r",
                           "r0",
                           "start",
                           "remaining",
                           "off",
                           "in0",
                           "out0",
                           "kjit_complex",
                           "kjit_unrolled",
                           "kjit_ptrs",
                           "sin",
                           "abs",
                           "div"}) {
    const std::string code = std::string("template <typename T> T ") + name + "(T a, T b, double s) { return a * b; }";
    EXPECT_EQ(error_of(code.c_str(), name, t, EwCudaVariant::kCastStrided), "") << name;
  }
  const char* by_ref = "template <typename T> void neg(T a, T& out) { out = -a; }";
  EXPECT_EQ(error_of(by_ref, "neg", types_of({T::kFloat64}, {T::kFloat64}, T::kFloat64), EwCudaVariant::kVectorized),
            "");
}

TEST_F(ElementwiseCudaErrors, OutputsOfTheEntrysOwnTypeCompile) {
  // `bool lt(T, T)`: the result comes out of the entry as bool, whatever T is, and
  // is stored into the output's type from there (not through the compute type).
  EwKernelTypes lt = types_of({T::kBool}, {T::kFloat32, T::kFloat32}, T::kFloat32);
  lt.results = {T::kBool};
  const char* less = "template <typename T> bool lt(T a, T b) { return a < b; }";
  for (EwCudaVariant v : {EwCudaVariant::kCastContiguous, EwCudaVariant::kCastStrided}) {
    EXPECT_EQ(error_of(less, "lt", lt, v), "") << ew_cuda_variant_name(v);
    EXPECT_NE(emit_elementwise_cuda(less, "lt", lt, v).find("bool __r0;"), std::string::npos);
  }
  EwKernelTypes two = types_of({T::kBool, T::kFloat64}, {T::kFloat64}, T::kFloat64);
  two.results = {T::kBool, T::kFloat64};
  const char* by_ref = "template <typename T> void sgn(T a, bool& pos, T& twice) { pos = a > 0; twice = a + a; }";
  EXPECT_EQ(error_of(by_ref, "sgn", two, EwCudaVariant::kCastStrided), "");
}

TEST_F(ElementwiseCudaErrors, BadArchIsAValueError) {
  EXPECT_THROW(cuda::compile_cuda("extern \"C\" __global__ void k() {}", "gfx90a"), ValueError);
  try {
    cuda::compile_cuda("extern \"C\" __global__ void k() {}", "sm_1");
    FAIL() << "sm_1 compiled";
  } catch (const CompileError& e) {
    EXPECT_NE(std::string(e.what()).find("sm_1"), std::string::npos) << e.what();
  }
}

TEST_F(ElementwiseCudaErrors, NvrtcKnowsSm80AndSm90) {
  cuda::NvrtcVersion v = cuda::nvrtc_version();
  EXPECT_GE(v.major, 11);
  std::vector<int> archs = cuda::nvrtc_supported_archs();
  EXPECT_NE(std::find(archs.begin(), archs.end(), 80), archs.end());
  EXPECT_NE(std::find(archs.begin(), archs.end(), 90), archs.end());
}

TEST_F(ElementwiseCudaErrors, ConcurrentCompilesSucceed) {
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (T t : {T::kFloat32, T::kInt64, T::kFloat64}) {
    threads.emplace_back([&ok, t] {
      cuda::NvrtcResult r =
          cuda::compile_elementwise_cuda(kAdd, "add", types_of({t}, {t, t}, t), EwCudaVariant::kStrided, "sm_80");
      if (!r.binary.empty()) ++ok;
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(ok.load(), 3);
}

TEST(ElementwiseCudaSource, NoCastVariantForCastTypesIsAnInternalError) {
  EXPECT_THROW(emit_elementwise_cuda(kAdd, "add", types_of({T::kFloat32}, {T::kInt32, T::kFloat32}, T::kFloat32),
                                     EwCudaVariant::kVectorized),
               InternalError);
}

TEST(ElementwiseCudaSource, KernelNamesAndWorkPerThread) {
  EXPECT_EQ(ew_cuda_kernel_name(EwCudaVariant::kVectorized, 4), "kjit_ew_vectorized4");
  EXPECT_EQ(ew_cuda_kernel_name(EwCudaVariant::kStrided), "kjit_ew_strided");
  EXPECT_EQ(ew_cuda_kernel_name(EwCudaVariant::kCastContiguous), "kjit_ew_cast_contiguous");
  EXPECT_EQ(ew_cuda_kernel_name(EwCudaVariant::kCastStrided), "kjit_ew_cast_strided");
  EXPECT_EQ(ew_cuda_work_per_thread(types_of({T::kUInt8}, {T::kUInt8, T::kBool}, T::kUInt8)), 16);
  EXPECT_EQ(ew_cuda_work_per_thread(types_of({T::kBool}, {T::kFloat32}, T::kFloat32)), 8);
  EXPECT_EQ(ew_cuda_work_per_thread(types_of({T::kFloat16}, {T::kFloat16}, T::kFloat32)), 8);
  EXPECT_EQ(ew_cuda_offsets_bytes(3), 4u * (1 + 3 * 16 + 16 * 3));
}

TEST(ElementwiseCudaSource, OffsetStructSizeIsPinnedInTheSource) {
  EwKernelTypes t = types_of({T::kFloat32}, {T::kFloat32, T::kFloat32}, T::kFloat32);
  std::string src = emit_elementwise_cuda(kAdd, "add", t, EwCudaVariant::kStrided);
  EXPECT_NE(src.find("static_assert(sizeof(kjit_offsets) == " + std::to_string(ew_cuda_offsets_bytes(3))),
            std::string::npos);
}

// ---------------------------------------------------------------------------
// Launch geometry and vector width.

TEST(ElementwiseCudaGeometry, GridCoversEveryElement) {
  const int64_t max32 = std::numeric_limits<int32_t>::max();
  const std::map<int64_t, uint32_t> grid8 = {{0, 0},    {1, 1},    {127, 1},        {128, 1},
                                             {1024, 1}, {1025, 2}, {max32, 2097152}};
  const std::map<int64_t, uint32_t> grid16 = {{0, 0},    {1, 1},    {127, 1},        {128, 1},
                                              {1025, 1}, {2049, 2}, {max32, 1048576}};
  for (const auto& [n, grid] : grid8) {
    cuda::CudaGeometry g = cuda::cuda_geometry(n, 8);
    EXPECT_EQ(g.grid, grid) << n;
    EXPECT_EQ(g.block, 128u);
    EXPECT_EQ(g.work, 8);
  }
  for (const auto& [n, grid] : grid16) EXPECT_EQ(cuda::cuda_geometry(n, 16).grid, grid) << n;
  for (int64_t n : {int64_t{1}, int64_t{127}, int64_t{128}, int64_t{1025}, max32}) {
    cuda::CudaGeometry g = cuda::cuda_geometry(n, 8);
    const int64_t block_work = int64_t{g.block} * g.work;
    EXPECT_GE(int64_t{g.grid} * block_work, n);      // enough threads
    EXPECT_LT(int64_t{g.grid - 1} * block_work, n);  // no idle block
  }
}

TEST(ElementwiseCudaGeometry, ElementLayoutCoversEachIndexOnce) {
  // Element j of thread t in block b is b * 1024 + t + j * 128 (work 8): a bijection onto [0, n).
  for (int64_t n : {1, 127, 128, 1025, 5000}) {
    cuda::CudaGeometry g = cuda::cuda_geometry(n, 8);
    std::vector<int> seen(n, 0);
    for (uint32_t b = 0; b < g.grid; ++b) {
      for (uint32_t t = 0; t < g.block; ++t) {
        for (int j = 0; j < g.work; ++j) {
          int64_t i = int64_t{b} * g.block * g.work + t + int64_t{j} * g.block;
          if (i < n) ++seen[i];
        }
      }
    }
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[i], 1) << "n " << n << " i " << i;
  }
}

TEST(ElementwiseCudaGeometry, BeyondInt32IsAnInternalError) {
  EXPECT_THROW(cuda::cuda_geometry(int64_t{1} << 31, 8), InternalError);
  EXPECT_THROW(cuda::cuda_geometry(-1, 8), InternalError);
}

char* at(uintptr_t address) { return reinterpret_cast<char*>(address); }

TEST(ElementwiseCudaGeometry, VectorWidthFromAlignmentAndSixteenBytes) {
  const uintptr_t base = 0x10000;  // 64 KiB: aligned to everything
  EXPECT_EQ(cuda::cuda_vector_width({at(base), at(base), at(base)}, 4), 4);
  EXPECT_EQ(cuda::cuda_vector_width({at(base)}, 1), 4);
  EXPECT_EQ(cuda::cuda_vector_width({at(base)}, 2), 4);
  EXPECT_EQ(cuda::cuda_vector_width({at(base)}, 8), 2);   // 4 * 8 bytes > 16
  EXPECT_EQ(cuda::cuda_vector_width({at(base)}, 16), 1);  // complex128
  EXPECT_EQ(cuda::cuda_vector_width({at(base), at(base + 8)}, 4), 2);
  EXPECT_EQ(cuda::cuda_vector_width({at(base), at(base + 4)}, 4), 1);
  EXPECT_EQ(cuda::cuda_vector_width({at(base + 2), at(base)}, 1), 2);
  EXPECT_EQ(cuda::cuda_vector_width({at(base + 1), at(base)}, 1), 1);
  EXPECT_EQ(cuda::cuda_vector_width({at(base + 16)}, 8), 2);
  EXPECT_EQ(cuda::cuda_vector_width({at(base + 24)}, 8), 1);
  EXPECT_EQ(cuda::cuda_vector_width({at(base + 16)}, 16), 1);
}

TEST(ElementwiseCudaGeometry, MisalignedOperandIsAValueError) {
  LoopLayout loop;
  loop.shape = dims({10});
  set_strides(&loop, {{4}, {4}});
  set_data(&loop, {at(0x1000), at(0x1002)});
  EwKernelTypes t = types_of({T::kFloat32}, {T::kFloat32}, T::kFloat32);
  EXPECT_THROW(cuda::check_cuda_alignment(loop, t), ValueError);
  loop.operands[1].data = at(0x1004);
  EXPECT_NO_THROW(cuda::check_cuda_alignment(loop, t));
  loop.operands[1].strides = dims({6});
  EXPECT_THROW(cuda::check_cuda_alignment(loop, t), ValueError);
}

TEST(ElementwiseCudaGeometry, VariantChoice) {
  EwKernelTypes same = types_of({T::kFloat32}, {T::kFloat32, T::kFloat32}, T::kFloat32);
  EwKernelTypes cast = types_of({T::kFloat32}, {T::kInt32, T::kFloat32}, T::kFloat32);
  LoopLayout contiguous;
  contiguous.shape = dims({100});
  set_strides(&contiguous, {{4}, {4}, {4}});
  set_data(&contiguous, {at(0x1000), at(0x2000), at(0x3000)});
  LoopLayout broadcast = contiguous;
  broadcast.operands[2].strides = dims({0});
  LoopLayout two_d = contiguous;
  two_d.shape = dims({10, 10});
  set_strides(&two_d, {{4, 40}, {4, 40}, {4, 40}});
  LoopLayout single = broadcast;
  single.shape = dims({1});
  EXPECT_EQ(cuda::choose_cuda_variant(contiguous, same), EwCudaVariant::kVectorized);
  EXPECT_EQ(cuda::choose_cuda_variant(broadcast, same), EwCudaVariant::kStrided);
  EXPECT_EQ(cuda::choose_cuda_variant(two_d, same), EwCudaVariant::kStrided);
  EXPECT_EQ(cuda::choose_cuda_variant(single, same), EwCudaVariant::kVectorized);
  EXPECT_EQ(cuda::choose_cuda_variant(contiguous, cast), EwCudaVariant::kCastContiguous);
  EXPECT_EQ(cuda::choose_cuda_variant(broadcast, cast), EwCudaVariant::kCastStrided);
}

TEST(ElementwiseCudaGeometry, NvrtcArchForDevice) {
  const std::vector<int> supported = {75, 80, 86, 89, 90, 100, 120};
  EXPECT_EQ(cuda::nvrtc_arch_for(80, supported), "sm_80");
  EXPECT_EQ(cuda::nvrtc_arch_for(90, supported), "sm_90");
  EXPECT_EQ(cuda::nvrtc_arch_for(87, supported), "compute_86");
  EXPECT_EQ(cuda::nvrtc_arch_for(130, supported), "compute_120");
  EXPECT_EQ(cuda::nvrtc_arch_for(70, {}), "sm_70");
  EXPECT_THROW(cuda::nvrtc_arch_for(70, supported), RuntimeError);
}

// ---------------------------------------------------------------------------
// Magic-number division and argument packing.

TEST(ElementwiseCudaPacking, MagicDivisionIsExactBelowTwoToThe31) {
  const uint32_t max = static_cast<uint32_t>(std::numeric_limits<int32_t>::max());
  std::vector<uint32_t> divisors = {1,   2,    3,     5,     7,        10,      127,     128,
                                    129, 1000, 65535, 65537, 1u << 20, 1000003, max - 1, max};
  std::vector<uint32_t> numerators = {0, 1, 2, 3, 127, 128, 1u << 30, max - 1, max};
  uint32_t x = 12345;
  for (int i = 0; i < 2000; ++i) {
    x = x * 1664525u + 1013904223u;  // LCG: numbers across the whole range
    numerators.push_back(x & max);
    if (i < 200) divisors.push_back((x >> 3) % max + 1);
  }
  for (uint32_t d : divisors) {
    cuda::CudaDivider div = cuda::CudaDivider::of(d);
    EXPECT_LE(div.shift, 31u);
    for (uint32_t n : numerators) ASSERT_EQ(div.div(n), n / d) << n << " / " << d;
    for (uint32_t n : {d - 1, d, d + 1, 2 * d - 1, 2 * d}) {
      if (n <= max) {
        ASSERT_EQ(div.div(n), n / d) << n << " / " << d;
      }
    }
  }
}

/// Reads the int32 at word `w` of packed offsets.
int32_t word(const std::vector<uint32_t>& words, size_t w) { return static_cast<int32_t>(words.at(w)); }

TEST(ElementwiseCudaPacking, StridedArgumentsLayout) {
  LoopLayout loop;
  loop.shape = dims({5, 1, 3});  // the size-1 dim is dropped
  set_strides(&loop, {{4, 999, 20}, {8, 0, -40}, {0, 0, 2}});
  set_data(&loop, {at(0x1000), at(0x2000 + 80), at(0x3000)});
  cuda::CudaKernelArgs a = cuda::pack_cuda_args(loop, EwCudaVariant::kCastStrided, {});
  ASSERT_EQ(a.offsets.size() * 4, ew_cuda_offsets_bytes(3));
  EXPECT_EQ(word(a.offsets, 0), 2);  // ndim
  EXPECT_EQ(a.offsets[1], 5u);       // divisor of dim 0
  EXPECT_EQ(a.offsets[4], 3u);       // divisor of dim 1 (the original dim 2)
  EXPECT_EQ(a.offsets[7], 1u);       // unused dims divide by 1
  const cuda::CudaDivider five{a.offsets[1], a.offsets[2], a.offsets[3]};
  EXPECT_EQ(five.div(17), 3u);
  const size_t s = 1 + 3 * kEwCudaMaxDims;
  EXPECT_EQ(word(a.offsets, s + 0), 4);  // [dim 0][op 0]
  EXPECT_EQ(word(a.offsets, s + 1), 8);
  EXPECT_EQ(word(a.offsets, s + 2), 0);
  EXPECT_EQ(word(a.offsets, s + 3), 20);  // [dim 1][op 0]
  EXPECT_EQ(word(a.offsets, s + 4), -40);
  EXPECT_EQ(word(a.offsets, s + 5), 2);

  std::vector<void*> p = a.pointers();
  ASSERT_EQ(p.size(), 3u);  // n, data, offsets
  EXPECT_EQ(*static_cast<int32_t*>(p[0]), 15);
  EXPECT_EQ(static_cast<char**>(p[1])[1], loop.operands[1].data);
  EXPECT_EQ(static_cast<char**>(p[1])[2], loop.operands[2].data);
  EXPECT_EQ(p[2], a.offsets.data());
}

TEST(ElementwiseCudaPacking, ContiguousArgumentsWithExtraScalars) {
  LoopLayout loop;
  loop.shape = dims({1000});
  set_strides(&loop, {{8}, {8}});
  set_data(&loop, {at(0x1000), at(0x9000)});
  std::vector<unsigned char> extra = cuda::pack_extra({EwOperand::of_float(2.5), EwOperand::of_float(-3)},
                                                      types_of({}, {}, T::kFloat64, {T::kFloat64, T::kFloat64}));
  cuda::CudaKernelArgs a = cuda::pack_cuda_args(loop, EwCudaVariant::kVectorized, extra);
  EXPECT_TRUE(a.offsets.empty());
  std::vector<void*> p = a.pointers();
  ASSERT_EQ(p.size(), 3u);  // n, data, extra
  EXPECT_EQ(*static_cast<int32_t*>(p[0]), 1000);
  double v[2];
  std::memcpy(&v[0], static_cast<char*>(p[2]), sizeof(double));
  std::memcpy(&v[1], static_cast<char*>(p[2]) + kEwExtraSlotBytes, sizeof(double));
  EXPECT_EQ(v[0], 2.5);
  EXPECT_EQ(v[1], -3.0);
  EXPECT_EQ(cuda::pack_cuda_args(loop, EwCudaVariant::kStrided, extra).pointers().size(), 4u);
}

TEST(ElementwiseCudaPacking, ExtraScalarsInTheirTravelTypes) {
  std::vector<unsigned char> b = cuda::pack_extra({EwOperand::of_int(int64_t{1} << 40), EwOperand::of_bool(true)},
                                                  types_of({}, {}, T::kInt32, {T::kInt64, T::kBool}));
  ASSERT_EQ(b.size(), 2 * kEwExtraSlotBytes);
  int64_t i = 0;
  std::memcpy(&i, b.data(), sizeof(i));
  EXPECT_EQ(i, int64_t{1} << 40);
  EXPECT_EQ(b[kEwExtraSlotBytes], 1);
  b = cuda::pack_extra({EwOperand::of_complex(1.5, -2)}, types_of({}, {}, T::kComplex64, {T::kComplex64}));
  ASSERT_EQ(b.size(), kEwExtraSlotBytes);
  float c[2];
  std::memcpy(c, b.data(), sizeof(c));
  EXPECT_EQ(c[0], 1.5f);
  EXPECT_EQ(c[1], -2.0f);
  b = cuda::pack_extra({EwOperand::of_float(2.5)}, types_of({}, {}, T::kInt32, {T::kFloat64}));
  double d = 0;
  std::memcpy(&d, b.data(), sizeof(d));
  EXPECT_EQ(d, 2.5);  // not cast to the int32 compute type
  DLTensor t{};
  EXPECT_THROW(cuda::pack_extra({EwOperand::of(&t)}, types_of({}, {}, T::kFloat32, {T::kFloat32})), TypeError);
}

TEST(ElementwiseCudaPacking, ScalarsLayoutFollowsNaturalAlignment) {
  EwKernelTypes t =
      by_value(types_of({T::kFloat64}, {T::kInt8, T::kFloat64, T::kFloat64, T::kComplex128, T::kBool}, T::kComplex128),
               {true, false, true, true, true});
  const std::vector<size_t> layout = ew_cuda_scalars_layout(t);
  EXPECT_EQ(layout[0], 0u);
  EXPECT_EQ(layout[2], 8u);   // double: 8-aligned after the int8
  EXPECT_EQ(layout[3], 16u);  // complex<double>: 16-aligned
  EXPECT_EQ(layout[4], 32u);
  EXPECT_EQ(layout.back(), 48u);  // the struct's size: a multiple of its 16-byte alignment
  const int8_t i8 = -7;
  const double f = 2.5;
  const std::complex<double> c(1.5, -3);
  const bool b = true;
  std::vector<unsigned char> packed = cuda::pack_scalars(t, {&i8, nullptr, &f, &c, &b});
  ASSERT_EQ(packed.size(), 48u);
  EXPECT_EQ(static_cast<int8_t>(packed[0]), -7);
  double got_f;
  std::complex<double> got_c;
  std::memcpy(&got_f, packed.data() + 8, 8);
  std::memcpy(&got_c, packed.data() + 16, 16);
  EXPECT_EQ(got_f, 2.5);
  EXPECT_EQ(got_c, c);
  EXPECT_EQ(packed[32], 1);
  EXPECT_THROW(cuda::pack_scalars(t, {nullptr, nullptr, &f, &c, &b}),
               InternalError);  // a by-value input needs its value

  // The kernel's kjit_scalars comes after the offsets and before the extra scalars.
  LoopLayout loop;
  loop.shape = dims({10});
  set_strides(&loop, {{8}, {0}, {8}, {0}, {0}, {0}});
  set_data(&loop, {at(0x1000), nullptr, at(0x2000), nullptr, nullptr, nullptr});
  cuda::CudaKernelArgs a = cuda::pack_cuda_args(
      loop, EwCudaVariant::kCastStrided,
      cuda::pack_extra({EwOperand::of_float(1)}, types_of({}, {}, T::kFloat64, {T::kFloat64})), packed);
  std::vector<void*> p = a.pointers();
  ASSERT_EQ(p.size(), 5u);  // n, data, offsets, scalars, extra
  EXPECT_EQ(p[3], a.scalars.data());
  EXPECT_EQ(p[4], a.extra.data());
}

TEST(ElementwiseCudaSource, ScalarsStructSizeIsPinnedInTheSource) {
  EwKernelTypes t = by_value(types_of({T::kFloat64}, {T::kInt8, T::kFloat64}, T::kFloat64), {true, true});
  const std::string src = emit_elementwise_cuda(kAdd, "add", t, EwCudaVariant::kCastContiguous);
  EXPECT_NE(src.find("struct kjit_scalars { int8_t __s0; double __s1; };"), std::string::npos) << src;
  EXPECT_NE(src.find("static_assert(sizeof(kjit_scalars) == 16"), std::string::npos) << src;
  EXPECT_NE(src.find("kjit_scalars __sc"), std::string::npos);
  // Without by-value inputs the parameter is absent.
  EXPECT_EQ(emit_elementwise_cuda(kAdd, "add", types_of({T::kFloat64}, {T::kFloat64, T::kFloat64}, T::kFloat64),
                                  EwCudaVariant::kStrided)
                .find("kjit_scalars"),
            std::string::npos);
}

TEST(ElementwiseCudaGeometry, ByValueInputsDoNotBreakContiguity) {
  EwKernelTypes t = by_value(types_of({T::kFloat32}, {T::kFloat32, T::kFloat32}, T::kFloat32), {false, true});
  LoopLayout loop;
  loop.shape = dims({4096});
  set_strides(&loop, {{4}, {4}, {0}});
  set_data(&loop, {at(0x1000), at(0x2000), nullptr});
  EXPECT_TRUE(cuda::is_contiguous_loop(loop, t));
  EXPECT_EQ(cuda::choose_cuda_variant(loop, t), EwCudaVariant::kVectorized);
  t.by_value = {};  // the same operand as a broadcast tensor: strided
  EXPECT_EQ(cuda::choose_cuda_variant(loop, t), EwCudaVariant::kStrided);
}

// ---------------------------------------------------------------------------
// 32-bit index splitting.

/// Every element's byte offset in operand 0 (a non-overlapping output) over the
/// sub-loops, relative to `base`.
std::multiset<int64_t> output_offsets(const std::vector<LoopLayout>& subs, const char* base) {
  std::multiset<int64_t> out;
  for (const LoopLayout& l : subs) {
    std::vector<int64_t> idx(l.shape.size(), 0);
    for (int64_t e = 0; e < l.numel(); ++e) {
      int64_t off = l.operands[0].data - base;
      for (size_t d = 0; d < l.shape.size(); ++d) off += idx[d] * l.operands[0].strides[d];
      out.insert(off);
      for (size_t d = 0; d < l.shape.size() && ++idx[d] == l.shape[d]; ++d) idx[d] = 0;
    }
  }
  return out;
}

TEST(ElementwiseCudaSplit, SmallLoopWithHugeStridesIsCoveredExactlyOnce) {
  LoopLayout loop;
  loop.shape = dims({3, 5, 7});
  set_strides(&loop, {{4, int64_t{1} << 29, int64_t{3} << 30},  // output: 6 * 3 GiB offsets
                      {0, 8, -(int64_t{1} << 31)},              // input with a negative stride
                      {2, 0, 0}});                              // broadcast input
  const uintptr_t base = uintptr_t{1} << 40;
  set_data(&loop, {at(base), at(base + (uintptr_t{6} << 31)), at(base)});
  ASSERT_FALSE(cuda::fits_32bit_indexing(loop));
  std::vector<LoopLayout> subs = cuda::split_for_32bit_indexing(loop);
  EXPECT_GT(subs.size(), 1u);
  int64_t total = 0;
  for (const LoopLayout& l : subs) {
    EXPECT_TRUE(cuda::fits_32bit_indexing(l));
    total += l.numel();
    EXPECT_EQ(operand_strides(l), operand_strides(loop));
  }
  EXPECT_EQ(total, loop.numel());
  std::multiset<int64_t> want = output_offsets({loop}, loop.operands[0].data);
  EXPECT_EQ(output_offsets(subs, loop.operands[0].data), want);
  EXPECT_EQ(std::set<int64_t>(want.begin(), want.end()).size(), want.size());  // each exactly once
}

TEST(ElementwiseCudaSplit, LargeLoopSplitsIntoFittingBoxes) {
  // 2^20 x 2^11 float32 output (8 GiB of offsets), an input broadcast along dim 1
  // and a transposed float64 input.
  LoopLayout loop;
  loop.shape = dims({int64_t{1} << 20, int64_t{1} << 11});
  set_strides(&loop, {{4, int64_t{4} << 20}, {2, 0}, {int64_t{8} << 11, 8}});
  const uintptr_t base = uintptr_t{1} << 40;
  set_data(&loop, {at(base), at(base), at(base)});
  ASSERT_FALSE(cuda::fits_32bit_indexing(loop));
  std::vector<LoopLayout> subs = cuda::split_for_32bit_indexing(loop);
  // Boxes in index space, decoded from the output's offset (row-major in dim 1).
  struct Box {
    int64_t lo0, lo1, n0, n1;
  };
  std::vector<Box> boxes;
  int64_t total = 0;
  for (const LoopLayout& l : subs) {
    ASSERT_TRUE(cuda::fits_32bit_indexing(l));
    ASSERT_LE(l.numel(), std::numeric_limits<int32_t>::max());
    int64_t off = l.operands[0].data - loop.operands[0].data;
    Box b{(off % (int64_t{4} << 20)) / 4, off / (int64_t{4} << 20), l.shape[0], l.shape[1]};
    EXPECT_EQ(l.operands[1].data - loop.operands[1].data, b.lo0 * 2);
    EXPECT_EQ(l.operands[2].data - loop.operands[2].data, b.lo0 * (int64_t{8} << 11) + b.lo1 * 8);
    EXPECT_LE(b.lo0 + b.n0, loop.shape[0]);
    EXPECT_LE(b.lo1 + b.n1, loop.shape[1]);
    boxes.push_back(b);
    total += l.numel();
  }
  EXPECT_EQ(total, loop.numel());
  for (size_t i = 0; i < boxes.size(); ++i) {
    for (size_t j = i + 1; j < boxes.size(); ++j) {
      const Box &a = boxes[i], &b = boxes[j];
      bool disjoint = a.lo0 + a.n0 <= b.lo0 || b.lo0 + b.n0 <= a.lo0 || a.lo1 + a.n1 <= b.lo1 || b.lo1 + b.n1 <= a.lo1;
      EXPECT_TRUE(disjoint) << i << " and " << j << " overlap";
    }
  }
}

TEST(ElementwiseCudaSplit, ContiguousLoopSplitsIntoContiguousHalves) {
  LoopLayout loop;
  loop.shape = dims({(int64_t{1} << 31) + 5});
  set_strides(&loop, {{4}, {4}});
  set_data(&loop, {at(uintptr_t{1} << 40), at(uintptr_t{2} << 40)});
  EwKernelTypes t = types_of({T::kFloat32}, {T::kFloat32}, T::kFloat32);
  std::vector<LoopLayout> subs = cuda::split_for_32bit_indexing(loop);
  int64_t next = 0;
  for (const LoopLayout& l : subs) {
    EXPECT_TRUE(cuda::fits_32bit_indexing(l));
    EXPECT_TRUE(cuda::is_contiguous_loop(l, t));
    EXPECT_EQ(l.operands[0].data - loop.operands[0].data, next * 4);  // in order, no gap, no overlap
    EXPECT_EQ(l.operands[1].data - loop.operands[1].data, next * 4);
    next += l.shape[0];
  }
  EXPECT_EQ(next, loop.numel());
}

TEST(ElementwiseCudaSplit, FittingAndEmptyLoops) {
  LoopLayout loop;
  loop.shape = dims({1000});
  set_strides(&loop, {{4}});
  set_data(&loop, {at(0x1000)});
  EXPECT_EQ(cuda::split_for_32bit_indexing(loop).size(), 1u);
  loop.shape = dims({0});
  EXPECT_TRUE(cuda::split_for_32bit_indexing(loop).empty());
  loop.shape = dims({(int64_t{1} << 29) - 1});  // the largest offset is just below 2^31
  EXPECT_TRUE(cuda::fits_32bit_indexing(loop));
  loop.shape = dims({(int64_t{1} << 29) + 1});
  EXPECT_FALSE(cuda::fits_32bit_indexing(loop));
}

// ---------------------------------------------------------------------------
// The kernels executed: the generated source built as host C++ (CUDA builtins
// shimmed by cuda_host_shim.h) and run block by block, thread by thread, with the
// planned launches' packed arguments. No __syncthreads in the kernels, so a serial
// run is exact.

std::vector<std::string> variant_kernels(const EwKernelTypes& t, EwCudaVariant v) {
  return kernel_names({{"", "", "", t}, v});
}

/// `kjit_emulate_<kernel>(grid, args)`: cuLaunchKernel's job, serially.
std::string emulation_entry(const std::string& kernel, const EwKernelTypes& t, EwCudaVariant v) {
  const bool strided = v == EwCudaVariant::kStrided || v == EwCudaVariant::kCastStrided;
  std::string call = kernel + "(*static_cast<int*>(args[0]), *static_cast<kjit_ptrs*>(args[1])";
  int next = 2;
  if (strided) call += ", *static_cast<kjit_offsets*>(args[" + std::to_string(next++) + "])";
  const bool scalars = std::find(t.by_value.begin(), t.by_value.end(), true) != t.by_value.end();
  if (scalars) call += ", *static_cast<kjit_scalars*>(args[" + std::to_string(next++) + "])";
  if (!t.extra.empty()) call += ", *static_cast<kjit_extra*>(args[" + std::to_string(next++) + "])";
  return "extern \"C\" void kjit_emulate_" + kernel + "(unsigned grid, void** args) {\n" +
         "  for (unsigned b = 0; b < grid; ++b) {\n    for (unsigned t = 0; t < " + std::to_string(kEwCudaThreads) +
         "; ++t) {\n      blockIdx.x = b;\n      threadIdx.x = t;\n      " + call + ");\n    }\n  }\n}\n";
}

/// One variant's kernels as a host shared library.
class EmulatedModule {
 public:
  using Entry = void (*)(unsigned, void**);
  EmulatedModule(const std::string& code, const std::string& entry, const EwKernelTypes& t, EwCudaVariant v) {
    std::string src = emit_elementwise_cuda(code, entry, t, v);
    for (const std::string& k : variant_kernels(t, v)) src += emulation_entry(k, t, v);
    write_file(dir_ / "k.cc", src);
    std::vector<std::string> argv = find_toolchain().compiler;
    argv.insert(argv.end(), {"-std=c++17", "-O1", "-fPIC", "-shared", "-Wall", "-Wno-unknown-pragmas", "-include",
                             KJIT_TEST_CUDA_HOST_SHIM, (dir_ / "k.cc").string(), "-o", (dir_ / "k.so").string()});
    ProcessResult r = run_process(argv);
    log_ = r.output;
    if (r.exit_code == 0) lib_ = dlopen((dir_ / "k.so").string().c_str(), RTLD_NOW | RTLD_LOCAL);
  }
  ~EmulatedModule() {
    if (lib_ != nullptr) dlclose(lib_);
  }
  bool ok() const { return lib_ != nullptr; }
  const std::string& log() const { return log_; }
  Entry entry(const std::string& kernel) const {
    return reinterpret_cast<Entry>(dlsym(lib_, ("kjit_emulate_" + kernel).c_str()));
  }

 private:
  TempDir dir_;
  std::string log_;
  void* lib_ = nullptr;
};

/// Memory with a chosen misalignment: data() is `offset` bytes past a 64-byte boundary.
class Buffer {
 public:
  Buffer(size_t bytes, size_t offset = 0) : raw_(bytes + 64 + offset), offset_(offset) {}
  char* data() {
    uintptr_t p = reinterpret_cast<uintptr_t>(raw_.data());
    return reinterpret_cast<char*>((p + 63) / 64 * 64 + offset_);
  }
  template <typename V>
  V* as() {
    return reinterpret_cast<V*>(data());
  }

 private:
  std::vector<char> raw_;
  size_t offset_;
};

/// Plans the launches of `loop` and runs each in the emulator; returns the plan.
std::vector<cuda::CudaLaunch> run_emulated(const char* code, const char* entry, const EwKernelTypes& t,
                                           const LoopLayout& loop, const std::vector<EwOperand>& extra = {},
                                           const std::vector<const void*>& scalar_values = {}) {
  std::vector<unsigned char> scalars =
      scalar_values.empty() ? std::vector<unsigned char>{} : cuda::pack_scalars(t, scalar_values);
  std::vector<cuda::CudaLaunch> launches = cuda::plan_cuda_launches(loop, t, cuda::pack_extra(extra, t), scalars);
  std::map<EwCudaVariant, std::unique_ptr<EmulatedModule>> modules;
  for (cuda::CudaLaunch& l : launches) {
    std::unique_ptr<EmulatedModule>& m = modules[l.variant];
    if (!m) m = std::make_unique<EmulatedModule>(code, entry, t, l.variant);
    EXPECT_TRUE(m->ok()) << m->log();
    if (!m->ok()) break;
    EXPECT_EQ(m->log().find("warning"), std::string::npos) << m->log();
    EmulatedModule::Entry fn = m->entry(ew_cuda_kernel_name(l.variant, l.vec));
    EXPECT_NE(fn, nullptr);
    std::vector<void*> args = l.args.pointers();
    if (fn != nullptr) fn(l.geometry.grid, args.data());
  }
  return launches;
}

LoopLayout contiguous_loop(int64_t n, const std::vector<char*>& data, const std::vector<int>& sizes) {
  LoopLayout loop;
  loop.shape = dims({n});
  for (int s : sizes) loop.operands.push_back(kjit_test::operands_fastest_first({{s}})[0]);
  set_data(&loop, data);
  return loop;
}

class ElementwiseCudaEmulated : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      find_toolchain();
    } catch (const ToolchainError& e) {
      GTEST_SKIP() << e.what();
    }
  }
};

TEST_F(ElementwiseCudaEmulated, VectorizedAtEachWidthWithTail) {
  const int64_t n = 5000;  // 4 full blocks of 1024 and a tail of 904
  for (auto [misalign, vec] : std::vector<std::pair<size_t, int>>{{0, 4}, {8, 2}, {4, 1}}) {
    Buffer out(n * 4), a(n * 4, misalign), b(n * 4);
    for (int64_t i = 0; i < n; ++i) {
      a.as<float>()[i] = static_cast<float>(i);
      b.as<float>()[i] = 0.5f * static_cast<float>(i % 7);
    }
    EwKernelTypes t = types_of({T::kFloat32}, {T::kFloat32, T::kFloat32}, T::kFloat32);
    auto launches = run_emulated(kAdd, "add", t, contiguous_loop(n, {out.data(), a.data(), b.data()}, {4, 4, 4}));
    ASSERT_EQ(launches.size(), 1u);
    EXPECT_EQ(launches[0].variant, EwCudaVariant::kVectorized);
    EXPECT_EQ(launches[0].vec, vec);
    EXPECT_EQ(launches[0].geometry.grid, 5u);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out.as<float>()[i], a.as<float>()[i] + b.as<float>()[i]) << i;
  }
}

TEST_F(ElementwiseCudaEmulated, VectorizedBytesWorkSixteenPerThread) {
  const int64_t n = 5000;  // 2 full blocks of 2048 and a tail
  Buffer out(n), a(n), b(n);
  for (int64_t i = 0; i < n; ++i) {
    a.as<uint8_t>()[i] = static_cast<uint8_t>(i);
    b.as<uint8_t>()[i] = static_cast<uint8_t>(3 * i + 100);
  }
  EwKernelTypes t = types_of({T::kUInt8}, {T::kUInt8, T::kUInt8}, T::kUInt8);
  auto launches = run_emulated(kAdd, "add", t, contiguous_loop(n, {out.data(), a.data(), b.data()}, {1, 1, 1}));
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].vec, 4);
  EXPECT_EQ(launches[0].geometry.work, 16);
  EXPECT_EQ(launches[0].geometry.grid, 3u);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(out.as<uint8_t>()[i], static_cast<uint8_t>(a.as<uint8_t>()[i] + b.as<uint8_t>()[i])) << i;
  }
}

TEST_F(ElementwiseCudaEmulated, VectorizedWithExtraScalars) {
  const int64_t n = 3000;
  Buffer out(n * 8), x(n * 8), y(n * 8);
  for (int64_t i = 0; i < n; ++i) {
    x.as<double>()[i] = static_cast<double>(i);
    y.as<double>()[i] = static_cast<double>(n - i);
  }
  EwKernelTypes t = types_of({T::kFloat64}, {T::kFloat64, T::kFloat64}, T::kFloat64, {T::kFloat64, T::kInt64});
  auto launches = run_emulated(kAxpy, "axpy", t, contiguous_loop(n, {out.data(), x.data(), y.data()}, {8, 8, 8}),
                               {EwOperand::of_float(0.5), EwOperand::of_int(-2)});
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].vec, 2);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out.as<double>()[i], 0.5 * i - 2.0 * (n - i)) << i;
}

TEST_F(ElementwiseCudaEmulated, VectorizedWithAScalarOnEitherSide) {
  const int64_t n = 3000;  // 2 full blocks of 1024 and a tail
  Buffer out(n * 4), a(n * 4);
  for (int64_t i = 0; i < n; ++i) a.as<float>()[i] = static_cast<float>(i);
  const char* code = "template <typename T> T f(T a, T b) { return a - 2 * b; }";
  const float s = 0.25f;
  for (bool scalar_first : {false, true}) {
    EwKernelTypes t =
        by_value(types_of({T::kFloat32}, {T::kFloat32, T::kFloat32}, T::kFloat32), {scalar_first, !scalar_first});
    LoopLayout loop = contiguous_loop(n, {out.data(), a.data(), nullptr}, {4, 4, 0});
    if (scalar_first) {
      std::swap(loop.operands[1].data, loop.operands[2].data);
      std::swap(loop.operands[1].strides, loop.operands[2].strides);
    }
    std::vector<const void*> values =
        scalar_first ? std::vector<const void*>{&s, nullptr} : std::vector<const void*>{nullptr, &s};
    auto launches = run_emulated(code, "f", t, loop, {}, values);
    ASSERT_EQ(launches.size(), 1u);
    EXPECT_EQ(launches[0].variant, EwCudaVariant::kVectorized);
    EXPECT_EQ(launches[0].vec, 4);
    for (int64_t i = 0; i < n; ++i) {
      const float x = a.as<float>()[i];
      ASSERT_EQ(out.as<float>()[i], scalar_first ? s - 2 * x : x - 2 * s) << i;
    }
  }
}

TEST_F(ElementwiseCudaEmulated, CastStridedWithScalarsOfMixedWidthAndExtra) {
  // f(a, s, b, alpha): an int32 tensor stored transposed, a double and an int8
  // scalar by value, one extra; computes in float64 into a C-order output.
  const char* code = "template <typename T> T f(T a, T s, T b, T alpha) { return a * s + b * alpha; }";
  const int64_t rows = 19, cols = 23, n = rows * cols;
  Buffer out(n * 8), a(n * 4);
  for (int64_t i = 0; i < n; ++i) a.as<int32_t>()[i] = static_cast<int32_t>(i % 37) - 18;
  LoopLayout loop;
  loop.shape = dims({cols, rows});
  set_strides(&loop, {{8, 8 * cols}, {4 * rows, 4}, {0, 0}, {0, 0}});
  set_data(&loop, {out.data(), a.data(), nullptr, nullptr});
  EwKernelTypes t = by_value(types_of({T::kFloat64}, {T::kInt32, T::kFloat64, T::kInt8}, T::kFloat64, {T::kFloat64}),
                             {false, true, true});
  const double s = 1.5;
  const int8_t b = -3;
  auto launches = run_emulated(code, "f", t, loop, {EwOperand::of_float(10)}, {nullptr, &s, &b});
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].variant, EwCudaVariant::kCastStrided);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const double av = a.as<int32_t>()[c * rows + r];
      ASSERT_EQ(out.as<double>()[r * cols + c], av * 1.5 - 30.0) << r << " " << c;
    }
  }
}

TEST_F(ElementwiseCudaEmulated, StridedThreeDimsWithBroadcastAndPermutation) {
  // Output (7, 3, 5) C-order; `a` stored as (5, 7, 3); `b` broadcast along the middle dim.
  const int64_t d0 = 5, d1 = 3, d2 = 7;  // loop dims, fastest first
  const int64_t n = d0 * d1 * d2;
  Buffer out(n * 8), a(n * 8), b(d0 * d2 * 8);
  for (int64_t i = 0; i < n; ++i) a.as<double>()[i] = static_cast<double>(i);
  for (int64_t i = 0; i < d0 * d2; ++i) b.as<double>()[i] = 1000.0 * static_cast<double>(i);
  LoopLayout loop;
  loop.shape = dims({d0, d1, d2});
  set_strides(&loop, {{8, 8 * d0, 8 * d0 * d1},  // out[i2][i1][i0]
                      {8 * d2 * d1, 8, 8 * d1},  // a[i0][i2][i1]
                      {8, 0, 8 * d0}});          // b[i2][i0]
  set_data(&loop, {out.data(), a.data(), b.data()});
  const char* code = "template <typename T> T f(T a, T b) { return a * 2 + b; }";
  EwKernelTypes t = types_of({T::kFloat64}, {T::kFloat64, T::kFloat64}, T::kFloat64);
  auto launches = run_emulated(code, "f", t, loop);
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].variant, EwCudaVariant::kStrided);
  for (int64_t i2 = 0; i2 < d2; ++i2) {
    for (int64_t i1 = 0; i1 < d1; ++i1) {
      for (int64_t i0 = 0; i0 < d0; ++i0) {
        double want = 2.0 * a.as<double>()[(i0 * d2 + i2) * d1 + i1] + b.as<double>()[i2 * d0 + i0];
        ASSERT_EQ(out.as<double>()[(i2 * d1 + i1) * d0 + i0], want) << i0 << " " << i1 << " " << i2;
      }
    }
  }
}

TEST_F(ElementwiseCudaEmulated, CastStridedMultiOutputWithExtra) {
  const char* code = "template <typename T> void f(T a, T b, T s, T& x, T& y) { x = a * s + b; y = a - b; }";
  const int64_t rows = 37, cols = 53, n = rows * cols;
  Buffer x(n * 8), y(n * 2), a(n * 4), b(cols * 4);
  for (int64_t i = 0; i < n; ++i) a.as<int32_t>()[i] = static_cast<int32_t>(i % 101) - 50;
  for (int64_t j = 0; j < cols; ++j) b.as<float>()[j] = 0.25f * static_cast<float>(j);
  LoopLayout loop;  // outputs (rows, cols) C-order; a stored transposed (cols, rows); b one row, broadcast
  loop.shape = dims({cols, rows});
  set_strides(&loop, {{8, 8 * cols}, {2, 2 * cols}, {4 * rows, 4}, {4, 0}});
  set_data(&loop, {x.data(), y.data(), a.data(), b.data()});
  EwKernelTypes t = types_of({T::kFloat64, T::kInt16}, {T::kInt32, T::kFloat32}, T::kFloat32, {T::kFloat64});
  auto launches = run_emulated(code, "f", t, loop, {EwOperand::of_float(2.5)});
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].variant, EwCudaVariant::kCastStrided);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      float av = static_cast<float>(a.as<int32_t>()[c * rows + r]), bv = b.as<float>()[c];
      ASSERT_EQ(x.as<double>()[r * cols + c], static_cast<double>(av * 2.5f + bv)) << r << " " << c;
      ASSERT_EQ(y.as<int16_t>()[r * cols + c], static_cast<int16_t>(av - bv)) << r << " " << c;
    }
  }
}

/// IEEE binary16 -> float, independently of the kernels' bit tricks.
float half_value(uint16_t h) {
  int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float v = exp == 0    ? std::ldexp(static_cast<float>(mant), -24)
            : exp == 31 ? (mant ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity())
                        : std::ldexp(static_cast<float>(mant + 1024), exp - 25);
  return (h & 0x8000) ? -v : v;
}

float bfloat16_value(uint16_t b) {
  uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

uint32_t float_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  return x;
}

TEST_F(ElementwiseCudaEmulated, HalfAndBfloat16LoadEveryBitPattern) {
  const char* code = "template <typename T> void conv(T a, T b, T& x, T& y) { x = a; y = b; }";
  const int64_t n = 65536;
  Buffer x(n * 4), y(n * 4), a(n * 2), b(n * 2);
  for (int64_t i = 0; i < n; ++i) a.as<uint16_t>()[i] = b.as<uint16_t>()[i] = static_cast<uint16_t>(i);
  EwKernelTypes t = types_of({T::kFloat32, T::kFloat32}, {T::kFloat16, T::kBFloat16}, T::kFloat32);
  auto launches =
      run_emulated(code, "conv", t, contiguous_loop(n, {x.data(), y.data(), a.data(), b.data()}, {4, 4, 2, 2}));
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].variant, EwCudaVariant::kCastContiguous);
  for (int64_t i = 0; i < n; ++i) {
    float hx = half_value(static_cast<uint16_t>(i)), bx = bfloat16_value(static_cast<uint16_t>(i));
    float gx = x.as<float>()[i], gy = y.as<float>()[i];
    if (std::isnan(hx)) {
      EXPECT_TRUE(std::isnan(gx)) << i;
    } else {
      ASSERT_EQ(float_bits(gx), float_bits(hx)) << i;
    }
    if (std::isnan(bx)) {
      EXPECT_TRUE(std::isnan(gy)) << i;
    } else {
      ASSERT_EQ(float_bits(gy), float_bits(bx)) << i;
    }
  }
}

/// Floats and the 16-bit value they must round to (nearest, ties to even): every
/// finite value, the midpoints to the next value and their neighbours.
std::vector<std::pair<float, uint16_t>> rounding_cases(float (*value)(uint16_t), uint16_t max_finite) {
  std::vector<std::pair<float, uint16_t>> out;
  for (uint32_t h = 0; h < max_finite; ++h) {
    float lo = value(static_cast<uint16_t>(h)), hi = value(static_cast<uint16_t>(h + 1));
    float mid = lo + (hi - lo) / 2;
    uint16_t even = (h & 1) ? static_cast<uint16_t>(h + 1) : static_cast<uint16_t>(h);
    out.push_back({lo, static_cast<uint16_t>(h)});
    out.push_back({mid, even});
    out.push_back({std::nextafter(mid, 0.0f), static_cast<uint16_t>(h)});
    out.push_back({std::nextafter(mid, hi), static_cast<uint16_t>(h + 1)});
    out.push_back({-lo, static_cast<uint16_t>(h | 0x8000)});
  }
  out.push_back({value(max_finite), max_finite});
  return out;
}

TEST_F(ElementwiseCudaEmulated, HalfAndBfloat16StoreRoundToNearestEven) {
  const char* code = "template <typename T> void conv(T a, T b, T& x, T& y) { x = a; y = b; }";
  auto half = rounding_cases(half_value, 0x7bff);  // 65504
  auto bf16 = rounding_cases(bfloat16_value, 0x7f7f);
  half.push_back({65520.0f, 0x7c00});  // the midpoint past 65504 rounds to inf
  half.push_back({65519.996f, 0x7bff});
  half.push_back({1e30f, 0x7c00});
  half.push_back({-std::numeric_limits<float>::infinity(), 0xfc00});
  bf16.push_back({std::numeric_limits<float>::infinity(), 0x7f80});
  const int64_t n = static_cast<int64_t>(std::max(half.size(), bf16.size())) + 1;
  Buffer x(n * 2), y(n * 2), a(n * 4), b(n * 4);
  for (int64_t i = 0; i < n; ++i) {
    a.as<float>()[i] = i + 1 < n && i < static_cast<int64_t>(half.size()) ? half[i].first : 0.0f;
    b.as<float>()[i] = i + 1 < n && i < static_cast<int64_t>(bf16.size()) ? bf16[i].first : 0.0f;
  }
  a.as<float>()[n - 1] = b.as<float>()[n - 1] = std::numeric_limits<float>::quiet_NaN();
  EwKernelTypes t = types_of({T::kFloat16, T::kBFloat16}, {T::kFloat32, T::kFloat32}, T::kFloat32);
  run_emulated(code, "conv", t, contiguous_loop(n, {x.data(), y.data(), a.data(), b.data()}, {2, 2, 4, 4}));
  for (size_t i = 0; i < half.size(); ++i) ASSERT_EQ(x.as<uint16_t>()[i], half[i].second) << half[i].first;
  for (size_t i = 0; i < bf16.size(); ++i) ASSERT_EQ(y.as<uint16_t>()[i], bf16[i].second) << bf16[i].first;
  EXPECT_TRUE(std::isnan(half_value(x.as<uint16_t>()[n - 1])));
  EXPECT_TRUE(std::isnan(bfloat16_value(y.as<uint16_t>()[n - 1])));
}

TEST_F(ElementwiseCudaEmulated, ComplexVectorizedAndCastStrided) {
  const int64_t n = 2500;
  using C64 = std::complex<float>;
  using C128 = std::complex<double>;
  Buffer out(n * 8), a(n * 8), b(n * 8);
  for (int64_t i = 0; i < n; ++i) {
    a.as<C64>()[i] = C64(static_cast<float>(i % 13) - 6, 0.5f * static_cast<float>(i % 5));
    b.as<C64>()[i] = C64(1.0f + static_cast<float>(i % 3), -static_cast<float>(i % 4));
  }
  const char* code = "template <typename T> T f(T a, T b) { return a * b + conj(a) - b / T(2); }";
  EwKernelTypes t = types_of({T::kComplex64}, {T::kComplex64, T::kComplex64}, T::kComplex64);
  auto launches = run_emulated(code, "f", t, contiguous_loop(n, {out.data(), a.data(), b.data()}, {8, 8, 8}));
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].vec, 2);
  for (int64_t i = 0; i < n; ++i) {
    C64 av = a.as<C64>()[i], bv = b.as<C64>()[i];
    ASSERT_EQ(out.as<C64>()[i], av * bv + std::conj(av) - bv / 2.0f) << i;
  }
  // float64 and complex64 inputs, complex128 output, every other element.
  Buffer out2(n * 16 * 2), r(n * 8);
  for (int64_t i = 0; i < n; ++i) r.as<double>()[i] = 0.25 * static_cast<double>(i);
  LoopLayout loop;
  loop.shape = dims({n});
  set_strides(&loop, {{32}, {8}, {8}});
  set_data(&loop, {out2.data(), r.data(), b.data()});
  EwKernelTypes t2 = types_of({T::kComplex128}, {T::kFloat64, T::kComplex64}, T::kComplex128);
  launches = run_emulated("template <typename T> T g(T a, T b) { return a * b - std::abs(b); }", "g", t2, loop);
  EXPECT_EQ(launches[0].variant, EwCudaVariant::kCastStrided);
  for (int64_t i = 0; i < n; ++i) {
    C128 bv(b.as<C64>()[i]);
    C128 want = r.as<double>()[i] * bv - std::abs(bv);
    C128 got = out2.as<C128>()[2 * i];
    ASSERT_NEAR(got.real(), want.real(), 1e-12) << i;
    ASSERT_NEAR(got.imag(), want.imag(), 1e-12) << i;
  }
}

// ---------------------------------------------------------------------------
// No driver.

bool driver_installed() {
  if (void* lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL)) {
    dlclose(lib);
    return true;
  }
  return false;
}

const char* kNoDriverPrefix = "kjit: CUDA driver not available: libcuda.so.1 could not be loaded (";
const char* kNoDriverSuffix = "); running on CUDA tensors needs an NVIDIA driver";

TEST(ElementwiseCudaNoDriver, DriverLoaderThrowsRuntimeError) {
  if (driver_installed()) GTEST_SKIP() << "a CUDA driver (libcuda.so.1) is installed";
  for (int attempt = 0; attempt < 2; ++attempt) {  // the failure is remembered
    try {
      cuda::cuda_driver();
      FAIL() << "cuda_driver() succeeded without a driver";
    } catch (const RuntimeError& e) {
      std::string msg = e.what();
      EXPECT_EQ(msg.rfind(kNoDriverPrefix, 0), 0u) << msg;
      EXPECT_EQ(msg.substr(msg.size() - std::strlen(kNoDriverSuffix)), kNoDriverSuffix) << msg;
      EXPECT_STREQ(e.kind(), "RuntimeError");
    }
  }
}

TEST(ElementwiseCudaNoDriver, ConcurrentFirstUseGivesTheSameError) {
  if (driver_installed()) GTEST_SKIP() << "a CUDA driver (libcuda.so.1) is installed";
  std::vector<std::string> messages(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < messages.size(); ++i) {
    threads.emplace_back([&messages, i] {
      try {
        cuda::cuda_driver();
      } catch (const RuntimeError& e) {
        messages[i] = e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& m : messages) EXPECT_EQ(m, messages[0]);
  EXPECT_EQ(messages[0].rfind(kNoDriverPrefix, 0), 0u);
}

TEST(ElementwiseCudaNoDriver, LaunchFailsBeforeCompiling) {
  if (driver_installed()) GTEST_SKIP() << "a CUDA driver (libcuda.so.1) is installed";
  // Broken code: a compile would raise CompileError, so RuntimeError shows none ran.
  cuda::CudaElementwiseKernel kernel("template <typename T> T f(T a) { return a +; }", "f",
                                     types_of({T::kFloat32}, {T::kFloat32}, T::kFloat32));
  LoopLayout loop;
  loop.shape = dims({16});
  set_strides(&loop, {{4}, {4}});
  set_data(&loop, {at(0x1000), at(0x2000)});
  try {
    cuda::launch_elementwise_cuda(kernel, loop, {}, {}, 0, nullptr);
    FAIL() << "launched without a driver";
  } catch (const RuntimeError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(kNoDriverPrefix, 0), 0u) << e.what();
  }
  EXPECT_THROW(kernel.function(EwCudaVariant::kVectorized, 4, 80), RuntimeError);
}

}  // namespace
}  // namespace ew
}  // namespace kjit

// The NVRTC image disk cache: a second kernel object (a fresh process, as far as
// the cache is concerned) reads the image instead of compiling.
TEST(ElementwiseCudaDiskCache, SecondCompileIsAHit) {
  std::string dir = ::testing::TempDir() + "kjit-ew-cuda-cache-" + std::to_string(::getpid());
  kjit::EwKernelTypes types;
  types.outputs = {kjit::EwType::kFloat32};
  types.inputs = {kjit::EwType::kFloat32, kjit::EwType::kFloat32};
  types.compute = kjit::EwType::kFloat32;
  const std::string code = "template <typename T> T add(T a, T b) { return a + b; }";
  bool hit = true;
  kjit::cuda::NvrtcResult first;
  try {
    first =
        kjit::cuda::cached_elementwise_cuda(code, "add", types, kjit::EwCudaVariant::kStrided, "sm_80", {}, dir, &hit);
  } catch (const kjit::ToolchainError& e) {
    GTEST_SKIP() << "NVRTC does not load here: " << e.what();
  }
  EXPECT_FALSE(hit);
  kjit::cuda::NvrtcResult second =
      kjit::cuda::cached_elementwise_cuda(code, "add", types, kjit::EwCudaVariant::kStrided, "sm_80", {}, dir, &hit);
  EXPECT_TRUE(hit);
  EXPECT_EQ(first.binary, second.binary);
  EXPECT_FALSE(second.ptx);
  // Another arch is another image.
  kjit::cuda::cached_elementwise_cuda(code, "add", types, kjit::EwCudaVariant::kStrided, "compute_90", {}, dir, &hit);
  EXPECT_FALSE(hit);
  std::filesystem::remove_all(dir);
}
