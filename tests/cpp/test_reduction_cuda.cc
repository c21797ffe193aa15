// kjit.reduction's CUDA kernels without a GPU: the source NVRTC compiles to CUBIN
// for sm_80 and sm_90 and to PTX that ptxas accepts, the thread split, the packed
// problem, and the kernels executed: the generated source built as host C++ (CUDA
// builtins shimmed by cuda_host_shim.h) and run block by block, thread by thread,
// over problems the reduction planner lays out, against loops written here. The
// kernels have no shared memory or barriers, so a serial run is exact.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "cuda/nvrtc.h"
#include "kjit/build.h"
#include "kjit/errors.h"
#include "loop_operands.h"
#include "reduction/reduction_cuda.h"
#include "reduction/reduction_plan.h"
#include "test_dirs.h"

namespace kjit {
namespace red {
namespace {

namespace fs = std::filesystem;
using kjit_test::TempDir;
using kjit_test::write_file;
using T = EwType;

constexpr const char* kAdd = "template <typename T> T add(T a, T b) { return a + b; }";
constexpr const char* kMax = "template <typename T> T mx(T a, T b) { return a > b ? a : b; }";
constexpr const char* kGreater = "template <typename T> bool gt(T a, T b) { return a > b || (a != a && b == b); }";
constexpr const char* kMean =
    "template <typename T> T add(T a, T b) { return a + b; }\n"
    "template <typename T> T sqdiff(T x, T y) { return (x - y) * (x - y); }\n"
    "template <typename T> T mean(T acc, int64_t n) { return acc / static_cast<T>(n); }";

// Welford's variance: an accumulator of the code's own type (ReductionCode::accumulator),
// the alias and identity as the Reduction adds them to the code.
constexpr const char* kWelford =
    "template <typename T> struct Welford { T mean, m2; int64_t n; };\n"
    "template <typename T> Welford<T> merge(Welford<T> a, Welford<T> b) {\n"
    "  if (a.n == 0) return b;\n  if (b.n == 0) return a;\n  const int64_t n = a.n + b.n;\n"
    "  const T d = b.mean - a.mean;\n"
    "  return {a.mean + d * T(b.n) / T(n), a.m2 + b.m2 + d * d * T(a.n) * T(b.n) / T(n), n};\n}\n"
    "template <typename T> Welford<T> one(T x) { return {x, T(0), 1}; }\n"
    "template <typename T> T variance(Welford<T> a, int64_t) { return a.m2 / T(a.n); }\n"
    "template <typename T> using __kjit_accumulator = Welford<T>;\n"
    "template <typename T> inline __kjit_accumulator<T> __kjit_accumulator_identity() { return {T(0), T(0), 0}; }\n";

struct Case {
  const char* name;
  const char* code;
  RedEntries entries;
  RedKernelTypes types;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<Case> cases() {
  return {
      {"sum_float32", kAdd, {"add", "", "", false}, {{T::kFloat32}, T::kFloat32, T::kFloat32}},
      {"sum_int8_in_int64", kAdd, {"add", "", "", false}, {{T::kInt8}, T::kInt64, T::kInt64}},
      {"sum_float16_in_float32", kAdd, {"add", "", "", false}, {{T::kFloat16}, T::kFloat32, T::kFloat16}},
      {"sum_complex64", kAdd, {"add", "", "", false}, {{T::kComplex64}, T::kComplex64, T::kComplex64}},
      {"mean_sqdiff_two_inputs",
       kMean,
       {"add", "sqdiff", "mean", false},
       {{T::kFloat32, T::kFloat64}, T::kFloat64, T::kFloat64}},
      {"argmax_float32", kGreater, {"gt", "", "", true}, {{T::kFloat32}, T::kFloat32, T::kInt64}},
      {"max_float64_without_identity", kMax, {"mx", "", "", false}, {{T::kFloat64}, T::kFloat64, T::kFloat64}},
      {"welford_variance_user_accumulator",
       kWelford,
       {"merge", "one", "variance", false, true, true},
       {{T::kFloat64}, T::kFloat64, T::kFloat64}},
  };
}

std::string nvrtc_skip_reason() {
  try {
    cuda::nvrtc_version();
    return "";
  } catch (const ToolchainError& e) {
    return e.what();
  }
}

class ReductionCudaNvrtc : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    const std::string skip = nvrtc_skip_reason();
    if (!skip.empty()) GTEST_SKIP() << skip;
  }
  std::string source() const { return emit_reduction_cuda(GetParam().code, GetParam().entries, GetParam().types); }
};

TEST_P(ReductionCudaNvrtc, SourceIsSelfContained) {
  const std::string src = source();
  EXPECT_EQ(src.find("#include"), std::string::npos);
  EXPECT_NE(src.find("extern \"C\" __global__ void kjit_red_partial("), std::string::npos);
  EXPECT_NE(src.find("extern \"C\" __global__ void kjit_red_finish("), std::string::npos);
  EXPECT_NE(src.find(GetParam().types.text()), std::string::npos);
}

TEST_P(ReductionCudaNvrtc, CompilesToCubinForSm80AndSm90) {
  for (const char* arch : {"sm_80", "sm_90"}) {
    const cuda::NvrtcResult r = cuda::compile_cuda(source(), arch);
    EXPECT_FALSE(r.ptx);
    EXPECT_EQ(r.log.find("warning"), std::string::npos) << arch << ":\n" << r.log;
    ASSERT_GT(r.binary.size(), 4u) << arch;
    EXPECT_EQ(r.binary.compare(0, 4,
                               "\x7f"
                               "ELF"),
              0)
        << arch;
    for (const char* k : {"kjit_red_partial", "kjit_red_finish"}) {
      EXPECT_NE(r.binary.find(std::string(k) + '\0'), std::string::npos) << arch << " lacks " << k;
    }
  }
}

TEST_P(ReductionCudaNvrtc, PtxForCompute90AssemblesWithPtxas) {
  std::string ptxas;
  try {
    ptxas = find_cuda_toolchain().root + "/bin/ptxas";
  } catch (const ToolchainError&) {
  }
  if (ptxas.empty() || !fs::exists(ptxas)) GTEST_SKIP() << "no ptxas in the CUDA toolkit";
  const cuda::NvrtcResult r = cuda::compile_cuda(source(), "compute_90");
  ASSERT_TRUE(r.ptx);
  EXPECT_NE(r.binary.find(".entry kjit_red_partial("), std::string::npos);
  TempDir tmp;
  write_file(tmp / "k.ptx", r.binary);
  const ProcessResult p =
      run_process({ptxas, "-arch=sm_90", (tmp / "k.ptx").string(), "-o", (tmp / "k.cubin").string()});
  EXPECT_EQ(p.exit_code, 0) << p.output;
}

INSTANTIATE_TEST_SUITE_P(ReductionCuda, ReductionCudaNvrtc, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

TEST(ReductionCudaNvrtcErrors, UserMacrosNamedLikeCommonWordsDoNotReachTheGeneratedCode) {
  if (!nvrtc_skip_reason().empty()) GTEST_SKIP() << nvrtc_skip_reason();
  std::string macros;
  for (const char* w : {"count",  "n",     "data",     "out",  "identity",  "value",  "map", "combine", "store",
                        "better", "Acc",   "Value",    "kArg", "kOperands", "kSizes", "i",   "v",       "p",
                        "part",   "parts", "partials", "acc",  "base",      "o",      "r",   "k"}) {
    macros += std::string("#define ") + w + " 1\n";
  }
  const RedKernelTypes sum{{T::kFloat32}, T::kFloat32, T::kFloat32};
  const RedKernelTypes arg{{T::kFloat32}, T::kFloat32, T::kInt64};
  const std::string add = macros + "template <typename Tz> Tz add(Tz lhs, Tz rhs) { return lhs + rhs; }";
  const std::string gt = macros + "template <typename Tz> bool gt(Tz lhs, Tz rhs) { return lhs > rhs; }";
  for (const auto& [code, entries, types] : {std::make_tuple(add, RedEntries{"add", "", "", false}, sum),
                                             std::make_tuple(gt, RedEntries{"gt", "", "", true}, arg)}) {
    const cuda::NvrtcResult r = cuda::compile_cuda(emit_reduction_cuda(code, entries, types), "sm_80");
    EXPECT_GT(r.binary.size(), 4u) << r.log;
  }
}

TEST(ReductionCudaNvrtcErrors, AUserErrorIsACompileErrorWithTheLog) {
  if (!nvrtc_skip_reason().empty()) GTEST_SKIP() << nvrtc_skip_reason();
  const RedKernelTypes t{{T::kFloat32}, T::kFloat32, T::kFloat32};
  try {
    cuda::compile_cuda(emit_reduction_cuda("template <typename T> T add(T a, T b) { return a + undefined_b; }",
                                           {"add", "", "", false}, t),
                       "sm_80");
    FAIL() << "compiled";
  } catch (const CompileError& e) {
    EXPECT_NE(e.log().find("undefined_b"), std::string::npos) << e.log();
  }
}

TEST(ReductionCudaSplit, FewOutputsSplitManyDoNot) {
  CudaSplit s = cuda_split(1, int64_t{1} << 24, false, true);
  EXPECT_EQ(s.parts, kCudaMaxParts);
  EXPECT_FALSE(s.outputs_fastest);
  s = cuda_split(1, 100, false, true);  // at least 32 elements a part
  EXPECT_EQ(s.parts, 4);
  s = cuda_split(1 << 20, 4096, true, true);  // enough outputs to fill the GPU
  EXPECT_EQ(s.parts, 1);
  EXPECT_TRUE(s.outputs_fastest);
  s = cuda_split(4096, 4096, false, true);  // 2^17 threads in all
  EXPECT_EQ(s.parts, 32);
  EXPECT_EQ(cuda_split(1, int64_t{1} << 24, false, false).parts, 1);  // no scratch memory
  EXPECT_EQ(cuda_split(0, 10, false, true).parts, 1);
}

TEST(ReductionCudaPack, TooManyDimsAreNotImplemented) {
  RedDims d;
  d.kept_shape.assign(9, 2);
  d.kept_strides.assign(18, 4);
  d.reduced_shape = {3};
  d.reduced_strides = {0, 4};
  CudaProblem p;
  p.dims = &d;
  p.data = {nullptr, nullptr};
  try {
    pack_cuda_problem(p);
    FAIL() << "packed";
  } catch (const NotImplementedError& e) {
    EXPECT_STREQ(e.what(),
                 "kjit.reduction: a CUDA reduction takes at most 8 kept and 8 reduced dims after coalescing; this "
                 "call has 9 and 1");
  }
}

// ---------------------------------------------------------------------------
// The kernels executed.

/// `kjit_emulate(finish, grid, problem)`: cuLaunchKernel's job, serially.
constexpr const char* kEmulation =
    "extern \"C\" void kjit_emulate(int finish, unsigned grid, void* problem) {\n"
    "  for (unsigned b = 0; b < grid; ++b) {\n"
    "    for (unsigned t = 0; t < KJIT_RED_CUDA_THREADS; ++t) {\n"
    "      blockIdx.x = b;\n      threadIdx.x = t;\n"
    "      if (finish) kjit_red_finish(*static_cast<kjit_red_cuda_problem*>(problem));\n"
    "      else kjit_red_partial(*static_cast<kjit_red_cuda_problem*>(problem));\n"
    "    }\n  }\n}\n";

class EmulatedReduction {
 public:
  using Entry = void (*)(int, unsigned, void*);
  explicit EmulatedReduction(const Case& c) {
    write_file(dir_ / "k.cc", emit_reduction_cuda(c.code, c.entries, c.types) + kEmulation);
    std::vector<std::string> argv = find_toolchain().compiler;
    argv.insert(argv.end(), {"-std=c++17", "-O1", "-fPIC", "-shared", "-Wall", "-Wno-unknown-pragmas", "-include",
                             KJIT_TEST_CUDA_HOST_SHIM, (dir_ / "k.cc").string(), "-o", (dir_ / "k.so").string()});
    const ProcessResult r = run_process(argv);
    log_ = r.output;
    if (r.exit_code == 0) lib_ = dlopen((dir_ / "k.so").string().c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib_ != nullptr) entry_ = reinterpret_cast<Entry>(dlsym(lib_, "kjit_emulate"));
  }
  ~EmulatedReduction() {
    if (lib_ != nullptr) dlclose(lib_);
  }
  bool ok() const { return entry_ != nullptr; }
  const std::string& log() const { return log_; }

  /// Reduces `shape` (strides in bytes per operand, the output first, 0 along
  /// reduced dims) with launch_reduction_cuda's steps, partials in host memory;
  /// `scalars` as launch_reduction_cuda's (none given: every operand a tensor).
  void run(const std::vector<int64_t>& shape, const std::vector<bool>& reduced,
           const std::vector<std::vector<int64_t>>& strides, const std::vector<char*>& data, int64_t acc_bytes,
           const void* identity, bool outer, bool partials_allowed = true,
           const std::vector<const unsigned char*>& scalars = {}) {
    const RedDims dims = plan_dims(shape, reduced, kjit_test::operands_slowest_first(strides));
    int64_t count = 1;
    for (size_t d = 0; d < shape.size(); ++d) count *= reduced[d] ? shape[d] : 1;
    CudaProblem p;
    p.dims = &dims;
    p.count = count;
    p.data = data;
    p.scalars = scalars.empty() ? std::vector<const unsigned char*>(data.size(), nullptr) : scalars;
    unsigned char id[16] = {};
    if (identity != nullptr) std::memcpy(id, identity, static_cast<size_t>(acc_bytes));
    p.identity = id;
    p.split = cuda_split(dims.outputs, count, outer, partials_allowed);
    std::vector<unsigned char> partials(static_cast<size_t>(dims.outputs * p.split.parts * acc_bytes) + 16);
    p.partials = reinterpret_cast<char*>(partials.data());
    std::vector<unsigned char> packed = pack_cuda_problem(p);
    auto grid = [](int64_t threads) { return static_cast<unsigned>((threads + kCudaThreads - 1) / kCudaThreads); };
    entry_(0, grid(dims.outputs * p.split.parts), packed.data());
    if (p.split.parts > 1) entry_(1, grid(dims.outputs), packed.data());
    last_parts_ = p.split.parts;
  }
  int64_t last_parts() const { return last_parts_; }

 private:
  TempDir dir_;
  std::string log_;
  void* lib_ = nullptr;
  Entry entry_ = nullptr;
  int64_t last_parts_ = 0;
};

class ReductionCudaEmulated : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      find_toolchain();
    } catch (const ToolchainError& e) {
      GTEST_SKIP() << e.what();
    }
  }
};

TEST_F(ReductionCudaEmulated, SumsWholeArraysAndAlongEitherAxis) {
  EmulatedReduction k(cases()[0]);
  ASSERT_TRUE(k.ok()) << k.log();
  EXPECT_EQ(k.log().find("warning"), std::string::npos) << k.log();
  const float zero = 0;
  // All of 100000 values: partials across 1024 parts, then the finish.
  std::vector<float> x(100000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7);
  float all = -1;
  k.run({100000}, {true}, {{0}, {4}}, {reinterpret_cast<char*>(&all), reinterpret_cast<char*>(x.data())}, 4, &zero,
        false);
  EXPECT_GT(k.last_parts(), 1);
  double want = 0;
  for (float v : x) want += v;
  EXPECT_FLOAT_EQ(all, static_cast<float>(want));
  // Without scratch memory: one thread per output.
  all = -1;
  k.run({100000}, {true}, {{0}, {4}}, {reinterpret_cast<char*>(&all), reinterpret_cast<char*>(x.data())}, 4, &zero,
        false, false);
  EXPECT_EQ(k.last_parts(), 1);
  EXPECT_FLOAT_EQ(all, static_cast<float>(want));
  // (300, 333) along axis 1 (inner) and axis 0 (outer, outputs fastest).
  const int64_t rows = 300, cols = 333;
  std::vector<float> m(rows * cols), by_row(rows, -1), by_col(cols, -1);
  for (int64_t i = 0; i < rows * cols; ++i) m[i] = static_cast<float>((i * 31) % 11);
  k.run({rows, cols}, {false, true}, {{4, 0}, {4 * cols, 4}},
        {reinterpret_cast<char*>(by_row.data()), reinterpret_cast<char*>(m.data())}, 4, &zero, false);
  k.run({rows, cols}, {true, false}, {{0, 4}, {4 * cols, 4}},
        {reinterpret_cast<char*>(by_col.data()), reinterpret_cast<char*>(m.data())}, 4, &zero, true);
  for (int64_t r = 0; r < rows; ++r) {
    float s = 0;
    for (int64_t c = 0; c < cols; ++c) s += m[r * cols + c];
    ASSERT_EQ(by_row[r], s) << "row " << r;
  }
  for (int64_t c = 0; c < cols; ++c) {
    float s = 0;
    for (int64_t r = 0; r < rows; ++r) s += m[r * cols + c];
    ASSERT_EQ(by_col[c], s) << "col " << c;
  }
}

TEST_F(ReductionCudaEmulated, AUserAccumulatorCarriesSeveralValuesThroughThePartials) {
  EmulatedReduction k(cases()[7]);
  ASSERT_TRUE(k.ok()) << k.log();
  std::vector<double> x(100000);
  double mean = 0;
  for (size_t i = 0; i < x.size(); ++i) mean += (x[i] = 100.0 + static_cast<double>(i % 13));
  mean /= static_cast<double>(x.size());
  double want = 0;
  for (double v : x) want += (v - mean) * (v - mean);
  want /= static_cast<double>(x.size());
  double got = -1;
  k.run({100000}, {true}, {{0}, {8}}, {reinterpret_cast<char*>(&got), reinterpret_cast<char*>(x.data())},
        kCudaUserAccumulatorBytes, nullptr, false);
  EXPECT_GT(k.last_parts(), 1);  // partial accumulators combined by the finish
  EXPECT_NEAR(got, want, 1e-9 * want);
}

TEST_F(ReductionCudaEmulated, TwoReducedDimsThatDoNotCoalesce) {
  EmulatedReduction k(cases()[1]);  // int8 summed in int64
  ASSERT_TRUE(k.ok()) << k.log();
  // (6, 5, 7) int8, reducing dims 0 and 2 into 5 int64 outputs: the reduced dims
  // are not adjacent, so the kernel unravels two of them.
  std::vector<int8_t> x(6 * 5 * 7);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<int8_t>(static_cast<int>(i % 250) - 125);
  std::vector<int64_t> out(5, -1);
  const int64_t zero = 0;
  k.run({6, 5, 7}, {true, false, true}, {{0, 8, 0}, {35, 7, 1}},
        {reinterpret_cast<char*>(out.data()), reinterpret_cast<char*>(x.data())}, 8, &zero, false);
  for (int j = 0; j < 5; ++j) {
    int64_t s = 0;
    for (int i = 0; i < 6; ++i)
      for (int l = 0; l < 7; ++l) s += x[i * 35 + j * 7 + l];
    EXPECT_EQ(out[j], s) << j;
  }
}

TEST_F(ReductionCudaEmulated, Float16InputsAccumulateInFloat32AndStoreFloat16) {
  EmulatedReduction k(cases()[2]);
  ASSERT_TRUE(k.ok()) << k.log();
  std::vector<uint16_t> x(5000, 0x3c00);  // 1.0 in float16
  uint16_t out = 0;
  const float zero = 0;
  k.run({5000}, {true}, {{0}, {2}}, {reinterpret_cast<char*>(&out), reinterpret_cast<char*>(x.data())}, 4, &zero,
        false);
  EXPECT_EQ(out, 0x6ce2);  // 5000, exact in float16
}

TEST_F(ReductionCudaEmulated, MapOverTwoInputsAndPost) {
  EmulatedReduction k(cases()[4]);  // mean of (x - y)^2, x float32, y float64 broadcast along dim 0
  ASSERT_TRUE(k.ok()) << k.log();
  const int64_t rows = 40, cols = 9;
  std::vector<float> x(rows * cols);
  std::vector<double> y(cols), out(cols, -1);
  for (int64_t i = 0; i < rows * cols; ++i) x[i] = static_cast<float>(i % 13) * 0.5f;
  for (int64_t c = 0; c < cols; ++c) y[c] = static_cast<double>(c);
  const double zero = 0;
  // Along axis 0: the output (cols,), x (rows, cols), y (cols,) broadcast over rows.
  k.run({rows, cols}, {true, false}, {{0, 8}, {4 * cols, 4}, {0, 8}},
        {reinterpret_cast<char*>(out.data()), reinterpret_cast<char*>(x.data()), reinterpret_cast<char*>(y.data())}, 8,
        &zero, true);
  for (int64_t c = 0; c < cols; ++c) {
    double s = 0;
    for (int64_t r = 0; r < rows; ++r) s += (x[r * cols + c] - y[c]) * (x[r * cols + c] - y[c]);
    EXPECT_DOUBLE_EQ(out[c], s / rows) << c;
  }
}

TEST_F(ReductionCudaEmulated, AScalarInputTravelsInTheParameter) {
  EmulatedReduction k(cases()[4]);  // mean of (x - y)^2, y a Python scalar (float64)
  ASSERT_TRUE(k.ok()) << k.log();
  const int64_t n = 5000;
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 17) * 0.25f;
  alignas(16) unsigned char y[16] = {};
  const double y_value = 1.75;
  std::memcpy(y, &y_value, sizeof(y_value));
  const double zero = 0;
  double out = -1;
  // The scalar's data entry is never read: an address that would fault.
  char* const unread = reinterpret_cast<char*>(uintptr_t{16});
  for (bool partials : {true, false}) {
    k.run({n}, {true}, {{0}, {4}, {0}}, {reinterpret_cast<char*>(&out), reinterpret_cast<char*>(x.data()), unread}, 8,
          &zero, false, partials, {nullptr, nullptr, y});
    double want = 0;
    for (int64_t p = 0; p < k.last_parts(); ++p) {
      double part = 0;  // each part's running sum, then the parts in order
      for (int64_t i = p; i < n; i += k.last_parts()) part += (x[i] - y_value) * (x[i] - y_value);
      want += part;
    }
    EXPECT_DOUBLE_EQ(out, want / n) << "partials " << partials;
  }
}

TEST_F(ReductionCudaEmulated, ArgmaxTakesTheFirstOfEqualsAndTheFirstNan) {
  EmulatedReduction k(cases()[5]);
  ASSERT_TRUE(k.ok()) << k.log();
  const int64_t n = 70000;
  std::vector<float> x(n, 1.0f);
  x[50000] = 9.0f;
  x[60000] = 9.0f;  // a tie later: the first wins
  int64_t best = -1;
  k.run({n}, {true}, {{0}, {4}}, {reinterpret_cast<char*>(&best), reinterpret_cast<char*>(x.data())}, 16, nullptr,
        false);
  EXPECT_GT(k.last_parts(), 1);
  EXPECT_EQ(best, 50000);
  x[65000] = std::nanf("");
  x[66000] = std::nanf("");
  k.run({n}, {true}, {{0}, {4}}, {reinterpret_cast<char*>(&best), reinterpret_cast<char*>(x.data())}, 16, nullptr,
        false);
  EXPECT_EQ(best, 65000);
}

TEST_F(ReductionCudaEmulated, AMaxWithoutAnIdentityStartsFromTheFirstElement) {
  EmulatedReduction k(cases()[6]);
  ASSERT_TRUE(k.ok()) << k.log();
  // All negative: starting from the (absent, zero-filled) identity would give 0.
  for (int64_t n : {int64_t{1}, int64_t{33}, int64_t{5000}}) {
    std::vector<double> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[i] = -1.0 - static_cast<double>((i * 7919) % 1000);
    x[static_cast<size_t>(n / 2)] = -0.5;
    double best = 1;
    k.run({n}, {true}, {{0}, {8}}, {reinterpret_cast<char*>(&best), reinterpret_cast<char*>(x.data())}, 8, nullptr,
          false);
    EXPECT_EQ(best, -0.5) << n;
  }
}

}  // namespace
}  // namespace red
}  // namespace kjit
