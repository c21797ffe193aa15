// The C++ API end to end: spec -> stub -> build -> load -> call, and its errors.
#include <gtest/gtest.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>

#include <cstdlib>
#include <vector>

#include "ffi_error.h"
#include "kjit/build.h"
#include "kjit/errors.h"
#include "kjit/runtime.h"

namespace kjit {
namespace {

const char* kAxpy = R"(
#include <kjit/kernel.h>
void axpy(const kjit::TensorView x, kjit::TensorView y, float alpha) {
  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] += alpha * x.data<float>()[i];
}
double total(const float* x, int64_t n) {  // typed pointer and a symbol passed as a scalar
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += x[i];
  return s;
}
void boom(int how) {
  if (how == 0) throw std::out_of_range("index 7 is past the end");
  if (how == 1) throw kjit::TypeError("wrong layout");
  throw 42;
}
)";

struct Vec {
  std::vector<float> data;
  int64_t shape[1];
  DLTensor t{};
  explicit Vec(std::vector<float> v) : data(std::move(v)) {
    shape[0] = static_cast<int64_t>(data.size());
    t.data = data.data();
    t.ndim = 1;
    t.shape = shape;
    t.dtype = {kDLFloat, 32, 1};
    t.device = {kDLCPU, 0};
  }
};

Module axpy_module() {
  return load_inline("cpp_axpy", {kAxpy},
                     SignatureList{{"axpy", "x: float32[n], y: float32[n] out, alpha: float32"},
                                   {"total", "x: float32[n], n: int64"},
                                   {"boom", "how: int32"}});
}

using kjit_test::error_of;

TEST(LoadInline, CallsACheckedKernel) {
  Module m = axpy_module();
  Vec x({1, 2, 3}), y({10, 10, 10});
  m.function("axpy")(&x.t, &y.t, 2.0);
  EXPECT_EQ(y.data, (std::vector<float>{12, 14, 16}));
  double total = m.function("total")(&x.t, 3).cast<double>();
  EXPECT_EQ(total, 6.0);
}

// A kernel written for tvm_ffi.cpp.load_inline: tvm-ffi types, no includes.
const char* kTvmFfiKernels = R"(
double first(tvm::ffi::Tensor x) { return static_cast<const float*>(x.data_ptr())[0]; }
double first_view(tvm::ffi::TensorView x) { return static_cast<const float*>(x.data_ptr())[0]; }
)";

TEST(LoadInline, TvmFfiTensorParameterNeedsAnOwnedTensor) {
  Module m = load_inline("cpp_tvm_ffi_kernels", {kTvmFfiKernels},
                         SignatureList{{"first", "x: float32[n]"}, {"first_view", "x: float32[n] optional"}});
  Vec x({5, 6});
  // A borrowed DLTensor* reaches a TensorView, but cannot become an owning Tensor.
  EXPECT_EQ(m.function("first_view")(&x.t).cast<double>(), 5.0);
  EXPECT_EQ(error_of(m.function("first"), &x.t),
            "TypeError: first: argument #0 'x': the kernel takes tvm::ffi::Tensor, which owns its tensor, but the "
            "caller passed a borrowed DLTensor*; take tvm::ffi::TensorView to accept it");
  EXPECT_EQ(error_of(m.function("first_view"), nullptr),
            "TypeError: first_view: argument #0 'x': None cannot become a tvm::ffi::TensorView; take "
            "tvm::ffi::Optional<tvm::ffi::Tensor> or kjit::TensorView (defined() is false for None)");
}

TEST(LoadInline, RejectsBadArgumentsWithFullMessages) {
  Module m = axpy_module();
  Vec x({1, 2, 3}), short_y({1, 2});
  EXPECT_EQ(error_of(m.function("axpy"), &x.t, &short_y.t, 1.0),
            "ValueError: axpy: argument #1 'y': shape[0] must equal n = 3 (bound by x.shape[0]), got 2");
  EXPECT_EQ(error_of(m.function("total"), &x.t, 4),
            "ValueError: total: argument #1 'n': value must equal n = 3 (bound by x.shape[0]), got 4");
  EXPECT_EQ(error_of(m.function("axpy"), &x.t),
            "TypeError: axpy: expected 3 arguments (x: float32[n], y: float32[n] out, alpha: float32), got 1");
}

TEST(LoadInline, MapsKernelExceptionsToErrorKinds) {
  Module m = axpy_module();
  EXPECT_EQ(error_of(m.function("boom"), 0), "IndexError: boom: index 7 is past the end");
  EXPECT_EQ(error_of(m.function("boom"), 1), "TypeError: boom: wrong layout");
  EXPECT_EQ(error_of(m.function("boom"), 2),
            "RuntimeError: boom: the kernel threw an exception that is not a std::exception");
}

// Device checks need no GPU: the stub reads only DLTensor fields, and a kernel
// that never touches the data can be handed descriptors of "CUDA" tensors.
TEST(LoadInline, ChecksDeviceTypeAndId) {
  std::string src =
      "#include <kjit/kernel.h>\nvoid cpu_only(const kjit::TensorView, const kjit::TensorView) {}\n"
      "void on_cuda(const kjit::TensorView, const kjit::TensorView) {}\n";
  Module d = load_inline("cpp_devices2", {src},
                         SignatureList{{"cpu_only", "a: float32[n], b: float32[n]"},
                                       {"on_cuda", "a: float32[n] @cuda, b: float32[n] @cuda"}});
  Vec a({1, 2}), b({3, 4});
  b.t.device = {kDLCUDA, 0};
  EXPECT_EQ(error_of(d.function("cpu_only"), &a.t, &b.t),
            "ValueError: cpu_only: argument #1 'b': device must be cpu, got cuda:0");
  EXPECT_EQ(error_of(d.function("on_cuda"), &a.t, &b.t),
            "ValueError: on_cuda: argument #0 'a': device must be cuda, got cpu");
  a.t.device = {kDLCUDA, 1};
  EXPECT_EQ(error_of(d.function("on_cuda"), &a.t, &b.t),
            "ValueError: on_cuda: argument #1 'b': device must be cuda:1 (the device of 'a'), got cuda:0");
  b.t.device = {kDLCUDA, 1};
  EXPECT_EQ(error_of(d.function("on_cuda"), &a.t, &b.t), "");  // same device: the (empty) kernel runs
}

TEST(LoadInline, RejectsNullDataAndBadByteOffset) {
  Module m = axpy_module();
  Vec x({1, 2, 3}), y({1, 2, 3});
  y.t.data = nullptr;
  EXPECT_EQ(error_of(m.function("axpy"), &x.t, &y.t, 1.0),
            "ValueError: axpy: argument #1 'y': data pointer is NULL but the tensor is not empty");
  y.t.data = y.data.data();
  y.t.byte_offset = 2;
  EXPECT_EQ(error_of(m.function("axpy"), &x.t, &y.t, 1.0),
            "ValueError: axpy: argument #1 'y': byte_offset must be a multiple of the element size 4, got 2");
}

TEST(LoadInline, RepeatedLoadIsALookup) {
  Module a = axpy_module();
  Module b = axpy_module();
  EXPECT_EQ(a.path(), b.path());
  EXPECT_NE(a.host_source("axpy").find("__tvm_ffi_axpy"), std::string::npos);
  EXPECT_THROW(a.function("nope"), SpecError);
}

TEST(LoadInline, CompileErrorsPointIntoTheUserSource) {
  try {
    load_inline("cpp_broken", {"#include <kjit/kernel.h>\n\nvoid f(kjit::TensorView a) { undefined_name(); }\n"},
                SignatureList{{"f", "a: float32[n]"}});
    FAIL() << "expected CompileError";
  } catch (const CompileError& e) {
    EXPECT_NE(e.log().find("cpp_sources:3:"), std::string::npos) << e.log();
    EXPECT_NE(e.command().find("-O2"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("compiling module 'cpp_broken' failed"), std::string::npos);
  }
}

TEST(LoadInline, SpecErrorsComeBeforeAnyCompile) {
  EXPECT_THROW(load_inline("bad", {""}, SignatureList{{"f", "a: float33[n]"}}), SpecError);
  EXPECT_THROW(load_inline("bad name", {""}, SignatureList{{"f", "a: float32[n]"}}), SpecError);
  EXPECT_THROW(load_inline("bad", {""}, SignatureList{}), SpecError);
  EXPECT_THROW(load_inline("bad", {""}, SignatureList{{"f-g", "a: float32[n]"}}), SpecError);
}

TEST(Toolchain, MissingCompilerIsAToolchainErrorNamingTheSearch) {
  const char* old = std::getenv("CXX");
  std::string saved = old ? old : "";
  setenv("CXX", "/nonexistent/c++", 1);
  try {
    find_toolchain();
    FAIL() << "expected ToolchainError";
  } catch (const ToolchainError& e) {
    EXPECT_NE(std::string(e.what()).find("CXX='/nonexistent/c++'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("searched PATH="), std::string::npos) << e.what();
  }
  if (old) {
    setenv("CXX", saved.c_str(), 1);
  } else {
    unsetenv("CXX");
  }
}

// Packed sub-byte storage: an int4 tensor arrives as the sub-byte dtype itself
// (shape in values) or as bytes packing two values each (shape in bytes).
const char* kPacked = R"(
#include <kjit/kernel.h>
int64_t count(const kjit::TensorView x, int64_t n) { return n * 100 + x.dtype().bits; }
int64_t values(const kjit::TensorView, int64_t n) { return n; }
int64_t bits(const kjit::TensorView, int64_t n) { return n; }
)";

struct Bytes {
  std::vector<uint8_t> data;
  int64_t shape[1];
  DLTensor t{};
  Bytes(size_t n, DLDataType dtype, int64_t extent) : data(n) {
    shape[0] = extent;
    t.data = data.data();
    t.ndim = 1;
    t.shape = shape;
    t.dtype = dtype;
    t.device = {kDLCPU, 0};
  }
};

TEST(LoadInline, PackedTensorsTakeTheSubByteDtypeOrBytes) {
  Module m = load_inline("cpp_packed", {kPacked}, SignatureList{{"count", "x: int4[n], n: int64 symbol"}});
  Bytes exact(3, {kDLInt, 4, 1}, 5), bytes(3, {kDLUInt, 8, 1}, 3), wrong(3, {kDLFloat, 8, 1}, 3);
  EXPECT_EQ(m.function("count")(&exact.t).cast<int64_t>(), 504);  // 5 values, shape in values
  EXPECT_EQ(m.function("count")(&bytes.t).cast<int64_t>(), 608);  // 3 bytes hold 6 values
  EXPECT_EQ(error_of(m.function("count"), &wrong.t),
            "TypeError: count: argument #0 'x': dtype must be int4 (or int8/uint8 bytes packing its values, 2 per "
            "byte), got float8");
}

TEST(LoadInline, PackedValueCountsAreExactOrRefused) {
  Module m = load_inline("cpp_packed", {kPacked},
                         SignatureList{{"count", "x: int4[n], n: int64 symbol"},
                                       {"values", "x: int4[n], n: int64 symbol"},
                                       {"bits", "x: uint1[n], n: int64 symbol"}});
  // 2^61 bytes hold 2^62 int4 values: n is that, not a saturated INT64_MAX (the
  // checks read only the metadata, so 3 real bytes stand in for them).
  Bytes huge(3, {kDLUInt, 8, 1}, int64_t{1} << 61), most(3, {kDLUInt, 8, 1}, (int64_t{1} << 60) - 1),
      bits63(3, {kDLUInt, 8, 1}, int64_t{1} << 60), max(3, {kDLUInt, 8, 1}, INT64_MAX);
  EXPECT_EQ(m.function("values")(&huge.t).cast<int64_t>(), int64_t{1} << 62);
  EXPECT_EQ(m.function("bits")(&most.t).cast<int64_t>(), INT64_MAX - 7);  // 2^63 - 8 uint1 values
  EXPECT_EQ(error_of(m.function("bits"), &bits63.t),
            "ValueError: bits: argument #0 'x': its last dim of 1152921504606846976 bytes of uint8 holds more 1-bit "
            "uint1 values than int64 counts (2^63 or more)");
  EXPECT_EQ(error_of(m.function("values"), &max.t),
            "ValueError: values: argument #0 'x': its last dim of 9223372036854775807 bytes of uint8 holds more "
            "4-bit int4 values than int64 counts (2^63 or more)");
}

// Every generated stub compiles warning-free under -Wall -Wextra -Werror, with the
// compiler CXX names (the default one when `cxx` is empty).
void compile_stubs_with_werror(const std::string& module, const char* cxx) {
  const char* kernels = R"(
#include <kjit/kernel.h>
void k1(const kjit::TensorView, kjit::TensorView, float, double, bool) {}
void k2(const kjit::TensorView, const kjit::TensorView, kjit::TensorView, int8_t, int16_t, int32_t, int64_t) {}
void k3(const kjit::TensorView, uint8_t, uint16_t, uint32_t, uint64_t, kjit::Stream) {}
void k4(const kjit::TensorView, const kjit::TensorView, const kjit::TensorView) {}
void k5(const kjit::TensorView, kjit::TensorView) {}
int64_t k6(const int8_t*, const float*) { return 0; }
void k7(const kjit::TensorView, const kjit::TensorView) {}
void k8(const float*, float*, int64_t n, int m, uint64_t ld) { (void)n, (void)m, (void)ld; }
void k9(const uint8_t*, const kjit::TensorView, kjit::TensorView) {}
)";
  SignatureList sigs = {
      {"k1", "a: float16|bfloat16[m, n] align(16), b: any[] out optional, x: float32, y: float64, f: bool"},
      {"k2",
       "a: float32[m], b: float32[m + n] strided, c: float32[2*n + 1] out, p: int8, q: int16, r: int32, "
       "s: int64; m % 4 == 0, n <= 4096, m / (n + 1) >= 0"},
      {"k3", "a: bool[n] @cpu, p: uint8, q: uint16, r: uint32, s: uint64, st: stream"},
      {"k4", "a: float32[n, ld] strides[ld, 1], b: float8_e4m3fn[n*k], c: complex64[k]"},
      {"k5", "a: int32[m] optional, b: int32[m] optional; m > 0"},
      {"k6", "a: int8[n], b: float32[n]"},
      {"k7", "a: float64[m + n], b: float64[m]"},
      {"k8",
       "a: float32[n, m] strides[ld, 1], b: float32[n, m] out optional, n: int64 symbol, m: int32 symbol, "
       "ld: uint64 symbol"},
      {"k9", "a: int4[m, 2*k], b: float6_e2m3fn[n] strided, c: uint4|int4[m, n] out optional"},
  };
  InlineOptions opts;
  opts.extra_cflags = {"-Wall", "-Wextra", "-Werror"};
  const char* old = std::getenv("CXX");
  std::string saved = old ? old : "";
  if (cxx) setenv("CXX", cxx, 1);
  Module m = load_inline(module, {kernels}, sigs, opts);
  if (old) {
    setenv("CXX", saved.c_str(), 1);
  } else {
    unsetenv("CXX");
  }
  EXPECT_EQ(m.specs().size(), sigs.size());
}

TEST(GeneratedStubs, CompileWithWerror) { compile_stubs_with_werror("cpp_werror", nullptr); }

// clang also warns on unused inline helpers, which g++ does not.
TEST(GeneratedStubs, CompileWithWerrorUnderClang) {
  if (std::system("clang++ --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "clang++ is not installed";
  compile_stubs_with_werror("cpp_werror_clang", "clang++");
}

}  // namespace
}  // namespace kjit
