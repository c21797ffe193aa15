// Host-side helpers of CUDA stubs: the CUDA runtime calls, lazy initialisation and
// CUDA error messages. kjit::emit_cuda_prelude() embeds this text after the stub
// prelude in modules with cuda_sources.
#ifndef KJIT_DETAIL_CUDA_HOST_PRELUDE_H_
#define KJIT_DETAIL_CUDA_HOST_PRELUDE_H_

// ---- kjit CUDA prelude: runtime calls, lazy initialisation, CUDA errors ----
#include <tvm/ffi/c_api.h>

#include <cstdio>

// Bound to the CUDA runtime's symbols by asm label: no CUDA header in the host TU,
// and no clash with a user's own <cuda_runtime.h> declarations.
extern "C" {
int kjit_cudaGetDeviceCount(int* count) __asm__("cudaGetDeviceCount");
int kjit_cudaGetDevice(int* device) __asm__("cudaGetDevice");
int kjit_cudaSetDevice(int device) __asm__("cudaSetDevice");
int kjit_cudaGetLastError(void) __asm__("cudaGetLastError");
const char* kjit_cudaGetErrorName(int error) __asm__("cudaGetErrorName");
const char* kjit_cudaGetErrorString(int error) __asm__("cudaGetErrorString");
}

namespace kjit_stub {
namespace {

/// 0 once CUDA answers; else the error of the first attempt, kept (a process that
/// found no driver does not get one later). Function-local static: thread-safe, once.
[[maybe_unused]] inline int cuda_init_status() {
  static const int status = [] {
    int count = 0;
    const int e = kjit_cudaGetDeviceCount(&count);
    return e != 0 ? e : (count == 0 ? 100 /* cudaErrorNoDevice */ : 0);
  }();
  return status;
}

__attribute__((noinline, cold, unused)) int fail_cuda_init(const char* fn, int error) {
  char buf[1024];
  std::snprintf(buf, sizeof(buf),
                "%s: CUDA is not available: cudaGetDeviceCount failed with %s (%s); running a CUDA kernel needs an "
                "NVIDIA driver and a visible GPU",
                fn, kjit_cudaGetErrorName(error), kjit_cudaGetErrorString(error));
  TVMFFIErrorSetRaisedFromCStr("RuntimeError", buf);
  return -1;
}

/// "f: cudaSetDevice(1) failed: cudaErrorInvalidDevice (invalid device ordinal)"
__attribute__((noinline, cold, unused)) int fail_cuda(const char* fn, const char* step, int arg, int error) {
  char call[160];
  if (arg >= 0) {
    std::snprintf(call, sizeof(call), "%s(%d)", step, arg);
  } else {
    std::snprintf(call, sizeof(call), "%s", step);
  }
  char buf[1024];
  std::snprintf(buf, sizeof(buf), "%s: %s failed: %s (%s)", fn, call, kjit_cudaGetErrorName(error),
                kjit_cudaGetErrorString(error));
  TVMFFIErrorSetRaisedFromCStr("RuntimeError", buf);
  return -1;
}

}  // namespace
}  // namespace kjit_stub
// ---- end of kjit CUDA prelude ----

#endif  // KJIT_DETAIL_CUDA_HOST_PRELUDE_H_
