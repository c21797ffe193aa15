// bench_elementwise_call: the C++ cost of one small kjit::Elementwise call (a
// 1-element float32 add), the part of kjit.elementwise's per-call overhead that is
// not Python or tvm-ffi: planning lookup, output allocation, overlap checks and the
// loop driver. The floor is the same add written inline. Also the thread pool's
// cost: an empty parallel region, and a float32 add of 2^12..2^20 elements on one
// and on two threads (where the grain size comes from).
//
// Usage: bench_elementwise_call [google-benchmark flags]
#include <benchmark/benchmark.h>
#include <dlpack/dlpack.h>
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/function.h>

#include <cstdlib>
#include <vector>

#include "cpu/thread_pool.h"
#include "kjit/elementwise.h"

namespace {

struct Scalar1 {
  float value = 1.0f;
  int64_t shape[1] = {1};
  DLTensor t{};
  Scalar1() {
    t.data = &value;
    t.device = DLDevice{kDLCPU, 0};
    t.ndim = 1;
    t.dtype = DLDataType{kDLFloat, 32, 1};
    t.shape = shape;
  }
};

kjit::Elementwise& add_kernel() {
  static kjit::Elementwise add("template <typename T> T add(T a, T b) { return a + b; }");
  return add;
}

void BM_InlineAdd(benchmark::State& state) {
  Scalar1 a, b, c;
  for (auto _ : state) {
    benchmark::DoNotOptimize(a.value);
    c.value = a.value + b.value;
    benchmark::DoNotOptimize(c.value);
  }
}

void BM_RunIntoOutput(benchmark::State& state) {
  Scalar1 a, b, c;
  kjit::Elementwise& add = add_kernel();
  const std::vector<kjit::EwOperand> inputs{kjit::EwOperand::of(&a.t), kjit::EwOperand::of(&b.t)};
  const std::vector<const DLTensor*> outputs{&c.t};
  add.run(inputs, outputs);  // compiles, or loads from the disk cache
  for (auto _ : state) add.run(inputs, outputs);
}

void BM_RunAllocating(benchmark::State& state) {
  Scalar1 a, b, c;
  kjit::Elementwise& add = add_kernel();
  const std::vector<kjit::EwOperand> inputs{kjit::EwOperand::of(&a.t), kjit::EwOperand::of(&b.t)};
  const kjit::EwAllocate reuse = [&](size_t, const kjit::EwOutput&, DLDevice) -> const DLTensor* { return &c.t; };
  add.run_allocating(inputs, reuse);
  for (auto _ : state) add.run_allocating(inputs, reuse);
}

struct HostAlloc {
  void AllocData(DLTensor* t) { t->data = std::malloc(64); }
  void FreeData(DLTensor* t) { std::free(t->data); }
};

/// A call function of the Python binding (kjit.ew_function) without Python: tvm-ffi packed
/// call, operand decoding, allocation of the result, the run.
void BM_FfiEwCall(benchmark::State& state) {
  namespace ffi = tvm::ffi;
  ffi::Function create = ffi::Function::GetGlobalRequired("kjit.ew_create");
  auto made = create(ffi::String("template <typename T> T add(T a, T b) { return a + b; }"), ffi::String(""),
                     int64_t{1}, ffi::String(""), false)
                  .cast<ffi::Array<ffi::Any>>();
  const int64_t id = made[0].cast<int64_t>();
  ffi::Function call = ffi::Function::GetGlobalRequired("kjit.ew_function")(id, int64_t{0}, false, false, int64_t{0})
                           .cast<ffi::Function>();
  int64_t shape[1] = {1};
  ffi::Tensor a =
      ffi::Tensor::FromNDAlloc(HostAlloc(), ffi::ShapeView(shape, 1), DLDataType{kDLFloat, 32, 1}, DLDevice{kDLCPU, 0});
  ffi::Tensor b = a;
  call(a, b);
  for (auto _ : state) benchmark::DoNotOptimize(call(a, b));
}

/// The floor under BM_FfiEwCall: a tvm-ffi function that takes two 1-element float32
/// tensors and returns their sum in a new tensor, with no checks and no planning.
void BM_FfiFloor(benchmark::State& state) {
  namespace ffi = tvm::ffi;
  struct Inline {
    alignas(16) unsigned char bytes[64];
    void AllocData(DLTensor* t) { t->data = bytes; }
    void FreeData(DLTensor*) {}
  };
  ffi::Function call = ffi::Function::FromTyped([](ffi::TensorView a, ffi::TensorView b) {
    int64_t n = a.size(0);
    ffi::Tensor c = ffi::Tensor::FromNDAlloc(Inline(), ffi::ShapeView(&n, 1), a.dtype(), a.device());
    *static_cast<float*>(c.data_ptr()) = *static_cast<float*>(a.data_ptr()) + *static_cast<float*>(b.data_ptr());
    return c;
  });
  int64_t shape[1] = {1};
  ffi::Tensor a =
      ffi::Tensor::FromNDAlloc(HostAlloc(), ffi::ShapeView(shape, 1), DLDataType{kDLFloat, 32, 1}, DLDevice{kDLCPU, 0});
  ffi::Tensor b = a;
  for (auto _ : state) benchmark::DoNotOptimize(call(a, b));
}

}  // namespace

/// One parallel region of two empty chunks on two threads: the hand-off to a
/// worker and back (workers spinning, as between back-to-back calls).
void BM_ParallelRegion(benchmark::State& state) {
  int sink = 0;
  for (auto _ : state) {
    kjit::cpu::parallel_for(2, 2, [&](int chunk) { benchmark::DoNotOptimize(sink += chunk); });
  }
}

/// A float32 add of state.range(0) elements into a given output on state.range(1) threads.
void BM_AddThreads(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<float> a(n, 1.0f), b(n, 2.0f), c(n);
  int64_t shape[1] = {n};
  auto tensor = [&](float* data) {
    DLTensor t{};
    t.data = data;
    t.device = DLDevice{kDLCPU, 0};
    t.ndim = 1;
    t.dtype = DLDataType{kDLFloat, 32, 1};
    t.shape = shape;
    return t;
  };
  DLTensor ta = tensor(a.data()), tb = tensor(b.data()), tc = tensor(c.data());
  kjit::Elementwise& add = add_kernel();
  const std::vector<kjit::EwOperand> inputs{kjit::EwOperand::of(&ta), kjit::EwOperand::of(&tb)};
  const std::vector<const DLTensor*> outputs{&tc};
  kjit::set_num_threads(static_cast<int>(state.range(1)));
  add.run(inputs, outputs);
  for (auto _ : state) add.run(inputs, outputs);
  kjit::set_num_threads(0);
  state.SetBytesProcessed(state.iterations() * n * 12);
}

BENCHMARK(BM_InlineAdd);
BENCHMARK(BM_FfiFloor);
BENCHMARK(BM_FfiEwCall);
BENCHMARK(BM_RunIntoOutput);
BENCHMARK(BM_RunAllocating);
BENCHMARK(BM_ParallelRegion);
BENCHMARK(BM_AddThreads)->ArgsProduct({{1 << 12, 1 << 13, 1 << 14, 1 << 15, 1 << 16, 1 << 18, 1 << 20}, {1, 2}});
BENCHMARK_MAIN();
