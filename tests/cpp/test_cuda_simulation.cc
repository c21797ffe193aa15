// CUDA stubs simulated against a FAKE CUDA runtime: nothing here runs on a GPU.
//
// main() loads fake_cudart.cc's libcudart.so.13 (RTLD_GLOBAL) before any kjit
// module, so the modules' CUDA calls, their own and those of nvcc's launch code,
// bind to it. It records every call; the tests assert on the sequences a stub makes
// (initialisation, device switch and restore, stream, launch-error check) and on the
// messages of the error paths, with errors injected through the fake's control API.
// Real device code is compiled by nvcc; its kernels are "launched" into the log.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "ffi_error.h"
#include "kjit/runtime.h"

namespace {

// ---- the fake runtime's control API (fake_cudart.cc), looked up in main() ----
struct Fake {
  void (*reset)(int device_count, int current_device);
  void (*fail)(const char* function, int error, int skip, int times);
  void (*set_launch_error)(int error);
  const char* (*log)();
  int (*device_count_calls)();
  int (*current_device)();
};
Fake fake;

constexpr int kInsufficientDriver = 35, kDevicesUnavailable = 46, kInitializationError = 3, kNoKernelImage = 209;

const char* kCudaSource = R"(
#include <cuda_runtime.h>
#include <stdexcept>

__global__ void add_kernel(const float* a, const float* b, float* c, int64_t n) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
void vector_add(const kjit::TensorView a, const kjit::TensorView b, kjit::TensorView c, cudaStream_t stream) {
  const int64_t n = a.numel();
  add_kernel<<<(n + 255) / 256, 256, 0, stream>>>(a.data<float>(), b.data<float>(), c.data<float>(), n);
}

template <typename T>
__global__ void scale_kernel(T* x, T alpha, int64_t n) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) x[i] *= alpha;
}
void scale(kjit::TensorView x, float alpha) {  // no stream: the default one
  scale_kernel<float><<<dim3((x.numel() + 127) / 128, 2), dim3(128)>>>(x.data<float>(), alpha, x.numel());
}

__global__ void fill_kernel(float* x, float v, int64_t n) {
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) x[i] = v;
}
int64_t stream_echo(kjit::TensorView x, kjit::Stream stream) {
  fill_kernel<<<1, 32, 0, static_cast<cudaStream_t>(stream)>>>(x.data<float>(), 1.0f, x.numel());
  return reinterpret_cast<int64_t>(stream);
}
void launch_then_throw(kjit::TensorView x) {
  fill_kernel<<<1, 32>>>(x.data<float>(), 0.0f, x.numel());
  throw std::invalid_argument("launch_then_throw: bad x");
}

__global__ void row_sum_kernel(const float* x, float* y, int64_t k) {
  extern __shared__ float partial[];
  float s = 0;
  for (int64_t j = threadIdx.x; j < k; j += blockDim.x) s += x[blockIdx.x * k + j];
  partial[threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int t = 1; t < blockDim.x; ++t) s += partial[t];
    y[blockIdx.x] = s;
  }
}
void maybe_fill(kjit::TensorView x, cudaStream_t stream) {  // x: optional
  fill_kernel<<<1, 32, 0, stream>>>(x.defined() ? x.data<float>() : nullptr, 1.0f, x.defined() ? x.numel() : 0);
}
void row_sum(const kjit::TensorView x, kjit::TensorView y, cudaStream_t stream) {
  row_sum_kernel<<<x.size(0), 128, 128 * sizeof(float), stream>>>(x.data<float>(), y.data<float>(), x.size(1));
}
)";

const kjit::Module& sim_module() {
  static const kjit::Module m = [] {
    using Form = kjit::FunctionDecl::Form;
    std::vector<kjit::FunctionDecl> decls = {
        {"vector_add", Form::kInfer, "", {}, ""},
        {"scale", Form::kInfer, "", {}, ""},
        {"stream_echo", Form::kInfer, "", {}, ""},
        {"launch_then_throw", Form::kInfer, "", {}, ""},
        {"maybe_fill", Form::kSignature, "x: float32[n] out optional, stream: stream", {}, ""},
        {"row_sum", Form::kSignature, "x: float32[m, k], y: float32[m] out, stream: stream; k % 4 == 0", {}, ""},
    };
    kjit::InlineOptions opts;
    opts.cuda_sources = {kCudaSource};
    opts.cuda_arch = "sm_80";  // one target: the code never reaches a device anyway
    return kjit::load_inline("cuda_sim", {}, decls, opts);
  }();
  return m;
}

tvm::ffi::Function fn(const std::string& name) { return sim_module().function(name); }

/// A second instance of the module: a copy of its library loaded on its own, whose
/// CUDA initialisation (a function-local static in the library) has not run yet.
tvm::ffi::Module fresh_instance() {
  namespace fs = std::filesystem;
  static std::atomic<int> counter{0};
  fs::path copy = fs::temp_directory_path() /
                  ("kjit_cuda_sim_" + std::to_string(getpid()) + "_" + std::to_string(counter++) + ".so");
  fs::copy_file(sim_module().path(), copy, fs::copy_options::overwrite_existing);
  tvm::ffi::Module m = tvm::ffi::Module::LoadFromFile(copy.string());
  fs::remove(copy);  // the mapping stays
  return m;
}

tvm::ffi::Function fn(const tvm::ffi::Module& m, const std::string& name) { return m->GetFunction(name).value(); }

/// A tensor descriptor on a device that nothing dereferences: the kernels only
/// "launch" into the fake's log.
struct FakeTensor {
  std::vector<int64_t> shape;
  DLTensor t{};
  FakeTensor(std::vector<int64_t> s, int device_id, DLDeviceType type = kDLCUDA) : shape(std::move(s)) {
    t.data = reinterpret_cast<void*>(uintptr_t{0x7f0000000000});
    t.ndim = static_cast<int32_t>(shape.size());
    t.shape = shape.data();
    t.dtype = {kDLFloat, 32, 1};
    t.device = {type, device_id};
  }
  FakeTensor(const FakeTensor&) = delete;  // t.shape points into this object
};

using kjit_test::error_of;

void* stream(uintptr_t v) { return reinterpret_cast<void*>(v); }
void set_stream(int device, void* s) { TVMFFIEnvSetStream(kDLCUDA, device, s, nullptr); }

std::string not_available(const std::string& fn, const std::string& error) {
  return "RuntimeError: " + fn + ": CUDA is not available: cudaGetDeviceCount failed with " + error +
         "; running a CUDA kernel needs an NVIDIA driver and a visible GPU";
}

size_t count_of(const std::string& text, const std::string& line) {
  size_t n = 0;
  for (size_t at = text.find(line); at != std::string::npos; at = text.find(line, at + 1)) ++n;
  return n;
}

// Two devices, cuda:0 current, streams 0x5eed0 / 0x5eed1 for cuda:0 / cuda:1, and
// the shared module initialised (its first call is the business of CudaSimulationInit).
class CudaSimulationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake.reset(2, 0);
    FakeTensor a({4}, 0), b({4}, 0), c({4}, 0);
    ASSERT_EQ(error_of(fn("vector_add"), &a.t, &b.t, &c.t), "");
    fake.reset(2, 0);
    set_stream(0, stream(0x5eed0));
    set_stream(1, stream(0x5eed1));
  }
  void TearDown() override {
    set_stream(0, nullptr);
    set_stream(1, nullptr);
  }
  std::string log() const { return fake.log(); }
};

class CudaSimulationInit : public CudaSimulationTest {};
class CudaSimulationDeviceGuard : public CudaSimulationTest {};
class CudaSimulationErrors : public CudaSimulationTest {};
class CudaSimulationStream : public CudaSimulationTest {};
class CudaSimulationChecks : public CudaSimulationTest {};

// ---- initialisation ----

TEST_F(CudaSimulationInit, LoadingAModuleMakesNoRuntimeCall) {
  tvm::ffi::Module m = fresh_instance();
  EXPECT_EQ(log(), "");
  EXPECT_EQ(fake.device_count_calls(), 0);
}

TEST_F(CudaSimulationInit, FirstCallInitialisesSwitchesLaunchesChecksAndRestores) {
  tvm::ffi::Module m = fresh_instance();
  FakeTensor a({1000}, 1), b({1000}, 1), c({1000}, 1);
  ASSERT_EQ(error_of(fn(m, "vector_add"), &a.t, &b.t, &c.t), "");
  EXPECT_EQ(log(),
            "cudaGetDeviceCount\n"
            "cudaGetDevice\n"
            "cudaSetDevice(1)\n"
            "launch add_kernel grid=(4,1,1) block=(256,1,1) shmem=0 stream=0x5eed1 device=1\n"
            "cudaGetLastError\n"
            "cudaSetDevice(0)\n");
  EXPECT_EQ(fake.current_device(), 0);

  fake.reset(2, 0);  // second call: initialised already
  ASSERT_EQ(error_of(fn(m, "vector_add"), &a.t, &b.t, &c.t), "");
  EXPECT_EQ(fake.device_count_calls(), 0);
  EXPECT_EQ(count_of(log(), "launch add_kernel"), 1u);
}

// The initialisation is a function-local static per module library, so the first
// call of a process cannot be repeated in one binary; a fresh copy of the library
// gives the same situation: 8 threads racing on its first call.
TEST_F(CudaSimulationInit, ThreadsRacingOnTheFirstCallInitialiseOnce) {
  tvm::ffi::Module m = fresh_instance();
  tvm::ffi::Function f = fn(m, "vector_add");
  constexpr int kThreads = 8;
  std::atomic<int> ready{0};
  std::vector<std::string> errors(kThreads);
  std::vector<int> device_after(kThreads, -1);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      set_stream(1, stream(0x1000 + i));  // the stream is per thread in tvm-ffi
      FakeTensor a({256}, 1), b({256}, 1), c({256}, 1);
      ready++;
      while (ready.load() < kThreads) std::this_thread::yield();
      errors[i] = error_of(f, &a.t, &b.t, &c.t);
      device_after[i] = fake.current_device();
    });
  }
  for (std::thread& t : threads) t.join();
  const std::string text = log();
  EXPECT_EQ(fake.device_count_calls(), 1) << text;
  EXPECT_EQ(count_of(text, "cudaGetDeviceCount"), 1u);
  EXPECT_EQ(count_of(text, "cudaSetDevice(1)\n"), size_t{kThreads});
  EXPECT_EQ(count_of(text, "cudaSetDevice(0)\n"), size_t{kThreads});
  EXPECT_EQ(count_of(text, "cudaGetLastError\n"), size_t{kThreads});
  for (int i = 0; i < kThreads; ++i) {
    EXPECT_EQ(errors[i], "") << "thread " << i;
    EXPECT_EQ(device_after[i], 0) << "thread " << i;
    char line[128];
    std::snprintf(line, sizeof(line), "launch add_kernel grid=(1,1,1) block=(256,1,1) shmem=0 stream=%p device=1\n",
                  stream(0x1000 + i));
    EXPECT_EQ(count_of(text, line), 1u) << line << text;
  }
}

TEST_F(CudaSimulationInit, NoDriverFailsTheCallNotTheLoadAndIsKept) {
  fake.fail("cudaGetDeviceCount", kInsufficientDriver, 0, -1);
  tvm::ffi::Module m = fresh_instance();
  FakeTensor a({16}, 0), b({16}, 0), c({16}, 0);
  const std::string no_driver =
      "cudaErrorInsufficientDriver (CUDA driver version is insufficient for CUDA runtime version)";
  EXPECT_EQ(error_of(fn(m, "vector_add"), &a.t, &b.t, &c.t), not_available("vector_add", no_driver));
  EXPECT_EQ(log(), "cudaGetDeviceCount -> cudaErrorInsufficientDriver\n");  // never launched

  fake.reset(2, 0);  // a driver "appears": the library keeps its first answer, for every function
  EXPECT_EQ(error_of(fn(m, "vector_add"), &a.t, &b.t, &c.t), not_available("vector_add", no_driver));
  EXPECT_EQ(error_of(fn(m, "scale"), &a.t, 2.0), not_available("scale", no_driver));
  EXPECT_EQ(log(), "");
}

TEST_F(CudaSimulationInit, ZeroDevicesIsNoDevice) {
  fake.reset(0, 0);  // cudaGetDeviceCount succeeds with 0: the stub's own check
  tvm::ffi::Module m = fresh_instance();
  FakeTensor x({16}, 0);
  EXPECT_EQ(error_of(fn(m, "scale"), &x.t, 2.0),
            not_available("scale", "cudaErrorNoDevice (no CUDA-capable device is detected)"));
  EXPECT_EQ(log(), "cudaGetDeviceCount\n");
}

// ---- device guard ----

TEST_F(CudaSimulationDeviceGuard, TensorsOnTheCurrentDeviceNeedNoSwitch) {
  fake.reset(2, 1);
  FakeTensor a({1000}, 1), b({1000}, 1), c({1000}, 1);
  ASSERT_EQ(error_of(fn("vector_add"), &a.t, &b.t, &c.t), "");
  EXPECT_EQ(log(),
            "cudaGetDevice\n"
            "launch add_kernel grid=(4,1,1) block=(256,1,1) shmem=0 stream=0x5eed1 device=1\n"
            "cudaGetLastError\n");
  EXPECT_EQ(fake.current_device(), 1);
}

TEST_F(CudaSimulationDeviceGuard, RestoredAfterAKernelException) {
  FakeTensor x({64}, 1);
  EXPECT_EQ(error_of(fn("launch_then_throw"), &x.t), "ValueError: launch_then_throw: bad x");
  // The exception is the call's error; cudaGetLastError is still read (and cleared).
  EXPECT_EQ(log(),
            "cudaGetDevice\n"
            "cudaSetDevice(1)\n"
            "launch fill_kernel grid=(1,1,1) block=(32,1,1) shmem=0 stream=0 device=1\n"
            "cudaGetLastError\n"
            "cudaSetDevice(0)\n");
  EXPECT_EQ(fake.current_device(), 0);
}

TEST_F(CudaSimulationDeviceGuard, RestoredAfterALaunchError) {
  fake.set_launch_error(kNoKernelImage);
  FakeTensor a({1000}, 1), b({1000}, 1), c({1000}, 1);
  EXPECT_EQ(error_of(fn("vector_add"), &a.t, &b.t, &c.t),
            "RuntimeError: vector_add: the kernel launch (cudaGetLastError after the call) failed: "
            "cudaErrorNoKernelImageForDevice (no kernel image is available for execution on the device)");
  EXPECT_EQ(log(),
            "cudaGetDevice\n"
            "cudaSetDevice(1)\n"
            "launch add_kernel grid=(4,1,1) block=(256,1,1) shmem=0 stream=0x5eed1 device=1 -> "
            "cudaErrorNoKernelImageForDevice\n"
            "cudaGetLastError -> cudaErrorNoKernelImageForDevice\n"
            "cudaSetDevice(0)\n");
  EXPECT_EQ(fake.current_device(), 0);
  EXPECT_EQ(error_of(fn("vector_add"), &a.t, &b.t, &c.t), "");  // cudaGetLastError cleared it
}

TEST_F(CudaSimulationDeviceGuard, AFailedSwitchIsNotRestored) {
  fake.reset(1, 0);  // cuda:1 does not exist
  FakeTensor a({8}, 1), b({8}, 1), c({8}, 1);
  EXPECT_EQ(error_of(fn("vector_add"), &a.t, &b.t, &c.t),
            "RuntimeError: vector_add: cudaSetDevice(1) failed: cudaErrorInvalidDevice (invalid device ordinal)");
  EXPECT_EQ(log(), "cudaGetDevice\ncudaSetDevice(1) -> cudaErrorInvalidDevice\n");
}

TEST_F(CudaSimulationDeviceGuard, AFailedRestoreFailsASuccessfulCallOnly) {
  fake.fail("cudaSetDevice", kDevicesUnavailable, /*skip=*/1, /*times=*/1);
  FakeTensor a({8}, 1), b({8}, 1), c({8}, 1);
  EXPECT_EQ(error_of(fn("vector_add"), &a.t, &b.t, &c.t),
            "RuntimeError: vector_add: restoring the previous device: cudaSetDevice(0) failed: "
            "cudaErrorDevicesUnavailable (CUDA-capable device(s) is/are busy or unavailable)");
  EXPECT_EQ(count_of(log(), "launch add_kernel"), 1u);

  fake.reset(2, 0);
  fake.fail("cudaSetDevice", kDevicesUnavailable, 1, 1);
  FakeTensor x({64}, 1);  // the kernel's own error wins
  EXPECT_EQ(error_of(fn("launch_then_throw"), &x.t), "ValueError: launch_then_throw: bad x");
  EXPECT_EQ(log(),
            "cudaGetDevice\n"
            "cudaSetDevice(1)\n"
            "launch fill_kernel grid=(1,1,1) block=(32,1,1) shmem=0 stream=0 device=1\n"
            "cudaGetLastError\n"
            "cudaSetDevice(0) -> cudaErrorDevicesUnavailable\n");
}

// A launch error of a call whose kernel then threw is consumed with that call (its
// exception stays its error), so it cannot fail the next call.
TEST_F(CudaSimulationErrors, ALaunchErrorBeforeAnExceptionDoesNotLeakIntoTheNextCall) {
  fake.set_launch_error(9);  // cudaErrorInvalidConfiguration
  FakeTensor x({64}, 0), a({8}, 0), b({8}, 0), c({8}, 0);
  EXPECT_EQ(error_of(fn("launch_then_throw"), &x.t), "ValueError: launch_then_throw: bad x");
  EXPECT_EQ(error_of(fn("vector_add"), &a.t, &b.t, &c.t), "");
}

TEST_F(CudaSimulationErrors, CudaGetDeviceFailureStopsBeforeTheSwitch) {
  fake.fail("cudaGetDevice", kInitializationError, 0, 1);
  FakeTensor x({8}, 1);
  EXPECT_EQ(error_of(fn("scale"), &x.t, 1.5),
            "RuntimeError: scale: cudaGetDevice failed: cudaErrorInitializationError (initialization error)");
  EXPECT_EQ(log(), "cudaGetDevice -> cudaErrorInitializationError\n");
}

// ---- argument checks come first ----

TEST_F(CudaSimulationChecks, BadArgumentsFailBeforeAnyCudaCall) {
  tvm::ffi::Module m = fresh_instance();  // not even initialised by them
  tvm::ffi::Function add = fn(m, "vector_add");
  FakeTensor a({8}, 0), b({8}, 0), c({8}, 0), cpu({8}, 0, kDLCPU), rocm({8}, 0, kDLROCM), other({8}, 1);
  EXPECT_EQ(error_of(add, &cpu.t, &b.t, &c.t), "ValueError: vector_add: argument #0 'a': device must be cuda, got cpu");
  EXPECT_EQ(error_of(add, &a.t, &rocm.t, &c.t),
            "ValueError: vector_add: argument #1 'b': device must be cuda, got rocm:0");
  EXPECT_EQ(error_of(add, &a.t, &b.t, &other.t),
            "ValueError: vector_add: argument #2 'c': device must be cuda:0 (the device of 'a'), got cuda:1");
  FakeTensor x({3, 6}, 0), y({3}, 0), short_y({2}, 0);
  tvm::ffi::Function row_sum = fn(m, "row_sum");
  EXPECT_EQ(error_of(row_sum, &x.t, &y.t),
            "ValueError: row_sum: constraint 'k % 4 == 0' failed with k = 6 (bound by x.shape[1])");
  FakeTensor x8({3, 8}, 0);
  EXPECT_EQ(error_of(row_sum, &x8.t, &short_y.t),
            "ValueError: row_sum: argument #1 'y': shape[0] must equal m = 3 (bound by x.shape[0]), got 2");
  EXPECT_EQ(log(), "");
  EXPECT_EQ(fake.device_count_calls(), 0);
}

// ---- the stream and the kernels ----

TEST_F(CudaSimulationStream, ReachesKjitStreamUnchanged) {
  FakeTensor x({100}, 1);
  // The tensors' device's stream (cuda:1), not the current device's.
  EXPECT_EQ(fn("stream_echo")(&x.t).cast<int64_t>(), 0x5eed1);
  EXPECT_EQ(log(),
            "cudaGetDevice\n"
            "cudaSetDevice(1)\n"
            "launch fill_kernel grid=(1,1,1) block=(32,1,1) shmem=0 stream=0x5eed1 device=1\n"
            "cudaGetLastError\n"
            "cudaSetDevice(0)\n");
  set_stream(1, nullptr);  // no stream set: the default stream
  EXPECT_EQ(fn("stream_echo")(&x.t).cast<int64_t>(), 0);
}

TEST_F(CudaSimulationStream, SignatureStringFunctionWithSharedMemory) {
  FakeTensor x({3, 8}, 0), y({3}, 0);
  ASSERT_EQ(error_of(fn("row_sum"), &x.t, &y.t), "");
  EXPECT_EQ(log(),
            "cudaGetDevice\n"
            "launch row_sum_kernel grid=(3,1,1) block=(128,1,1) shmem=512 stream=0x5eed0 device=0\n"
            "cudaGetLastError\n");
}

// When every @cuda tensor is an optional passed as None, no tensor names a device:
// no switch, the current device and its stream.
TEST_F(CudaSimulationStream, AllCudaTensorsNoneKeepsTheCurrentDevice) {
  fake.reset(2, 1);
  ASSERT_EQ(error_of(fn("maybe_fill"), nullptr), "");
  EXPECT_EQ(log(),
            "cudaGetDevice\n"
            "launch fill_kernel grid=(1,1,1) block=(32,1,1) shmem=0 stream=0x5eed1 device=1\n"
            "cudaGetLastError\n");
}

TEST_F(CudaSimulationStream, TemplatedKernelOnTheDefaultStream) {
  FakeTensor x({300}, 0);
  ASSERT_EQ(error_of(fn("scale"), &x.t, 0.5), "");
  EXPECT_EQ(log(),
            "cudaGetDevice\n"
            "launch scale_kernel<float> grid=(3,2,1) block=(128,1,1) shmem=0 stream=0 device=0\n"
            "cudaGetLastError\n");
}

}  // namespace

int main(int argc, char** argv) {
  // Before any kjit module: the modules' libcudart.so.13 must resolve to the fake.
  void* lib = dlopen(KJIT_FAKE_CUDART, RTLD_NOW | RTLD_GLOBAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "cannot load the fake CUDA runtime %s: %s\n", KJIT_FAKE_CUDART, dlerror());
    return 1;
  }
  auto sym = [&](const char* name) {
    void* p = dlsym(lib, name);
    if (p == nullptr) {
      std::fprintf(stderr, "the fake CUDA runtime has no %s\n", name);
      std::exit(1);
    }
    return p;
  };
  fake.reset = reinterpret_cast<decltype(fake.reset)>(sym("kjit_fake_cuda_reset"));
  fake.fail = reinterpret_cast<decltype(fake.fail)>(sym("kjit_fake_cuda_fail"));
  fake.set_launch_error = reinterpret_cast<decltype(fake.set_launch_error)>(sym("kjit_fake_cuda_set_launch_error"));
  fake.log = reinterpret_cast<decltype(fake.log)>(sym("kjit_fake_cuda_log"));
  fake.device_count_calls =
      reinterpret_cast<decltype(fake.device_count_calls)>(sym("kjit_fake_cuda_device_count_calls"));
  fake.current_device = reinterpret_cast<decltype(fake.current_device)>(sym("kjit_fake_cuda_current_device"));
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
