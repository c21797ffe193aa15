// A CUDA module against the real CUDA runtime on a machine without a driver (as
// kjit's): it loads, and its calls fail with the runtime's own error, kept. On a
// machine with a driver these tests skip (test_cuda_simulation.cc covers the rest).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>

#include <optional>
#include <string>

#include "ffi_error.h"
#include "kjit/errors.h"
#include "kjit/runtime.h"

namespace kjit {
namespace {

const char* kTouch = R"(
__global__ void touch_kernel(float* x, int64_t n) {
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) x[i] = 0;
}
void touch(kjit::TensorView x, cudaStream_t stream) {
  touch_kernel<<<1, 32, 0, stream>>>(x.data<float>(), x.numel());
}
)";

/// The module, or nullopt with the reason to skip.
std::optional<Module> touch_module(std::string* skip) {
  if (void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL)) {
    dlclose(driver);
    *skip = "a CUDA driver (libcuda.so.1) is installed: this machine is not driverless";
    return std::nullopt;
  }
  InlineOptions opts;
  opts.cuda_sources = {kTouch};
  opts.cuda_arch = "sm_80";
  try {
    return load_inline("cuda_no_driver", {},
                       std::vector<FunctionDecl>{{"touch", FunctionDecl::Form::kInfer, "", {}, ""}}, opts);
  } catch (const ToolchainError& e) {
    *skip = e.what();  // no CUDA toolkit
    return std::nullopt;
  }
}

using kjit_test::error_of;

TEST(CudaNoDriver, ModuleLoads) {
  std::string skip;
  std::optional<Module> m = touch_module(&skip);
  if (!m) GTEST_SKIP() << skip;
  EXPECT_EQ(m->specs().size(), 1u);
  EXPECT_TRUE(m->function("touch").defined());
}

TEST(CudaNoDriver, CallFailsWithTheRuntimesErrorAndKeepsIt) {
  std::string skip;
  std::optional<Module> m = touch_module(&skip);
  if (!m) GTEST_SKIP() << skip;
  int64_t shape[1] = {8};
  DLTensor x{};
  x.data = reinterpret_cast<void*>(uintptr_t{0x7f0000000000});  // never dereferenced
  x.ndim = 1;
  x.shape = shape;
  x.dtype = {kDLFloat, 32, 1};
  x.device = {kDLCUDA, 0};
  const std::string prefix = "RuntimeError: touch: CUDA is not available: cudaGetDeviceCount failed with ";
  // What libcudart.so.13 says when libcuda.so.1 cannot be loaded.
  const std::string expected = prefix +
                               "cudaErrorInsufficientDriver (CUDA driver version is insufficient for CUDA runtime "
                               "version); running a CUDA kernel needs an NVIDIA driver and a visible GPU";
  const std::string first = error_of(m->function("touch"), &x);
  EXPECT_EQ(first.rfind(prefix, 0), 0u) << first;
  EXPECT_EQ(first, expected);
  EXPECT_EQ(error_of(m->function("touch"), &x), first);  // the status is kept
}

}  // namespace
}  // namespace kjit
