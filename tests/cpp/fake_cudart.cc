// A fake CUDA runtime for the simulation tests (test_cuda_simulation.cc): built as
// libcudart.so.13 with the real library's symbol version, so a kjit module linked
// against the toolkit's libcudart binds to this one when it is loaded first
// (RTLD_GLOBAL). Nothing runs on a GPU: every call is recorded in a log, one line
// per call, and the control API below sets up devices and injects errors.
//
// Log lines: "cudaGetDeviceCount", "cudaGetDevice", "cudaSetDevice(1)",
// "cudaGetLastError", "launch add_kernel grid=(4,1,1) block=(256,1,1) shmem=0
// stream=0x5eed device=1" (the calling thread's current device), ...; a call that
// fails ends in " -> <error name>". Module
// registration (__cudaRegisterFatBinary etc.) and the launch plumbing are not logged.
#include <cuda_runtime_api.h>
#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#define FAKE_API extern "C" __attribute__((visibility("default")))

namespace {

struct Failure {
  int error;
  int skip;   // calls that still succeed first
  int times;  // calls that fail then; < 0: until reset
};

struct LaunchConfig {
  dim3 grid, block;
  size_t shmem;
  void* stream;
};

/// Never destroyed: modules unregister their fat binaries from atexit handlers,
/// which may run after this library's static destructors.
struct State {
  std::mutex mu;
  std::string log;
  int device_count = 2;
  int initial_device = 0;
  int generation = 0;  // bumped by reset: threads forget their current device
  int device_count_calls = 0;
  int launch_error = 0;  // the next launch fails with it
  int last_error = 0;    // what cudaGetLastError returns (and clears)
  std::map<std::string, Failure> failures;
  std::map<const void*, std::string> kernels;  // host stub -> device name
};

State& state() {
  static State* s = new State;
  return *s;
}

// The current device is per host thread, as in CUDA.
thread_local int t_device = 0;
thread_local int t_generation = -1;
thread_local std::vector<LaunchConfig> t_configs;

int& current_device(State& s) {
  if (t_generation != s.generation) {
    t_generation = s.generation;
    t_device = s.initial_device;
  }
  return t_device;
}

/// The codes the tests use, with the real runtime's names and descriptions.
struct ErrorText {
  int code;
  const char* name;
  const char* text;
};
const ErrorText kErrors[] = {
    {0, "cudaSuccess", "no error"},
    {1, "cudaErrorInvalidValue", "invalid argument"},
    {2, "cudaErrorMemoryAllocation", "out of memory"},
    {3, "cudaErrorInitializationError", "initialization error"},
    {9, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
    {35, "cudaErrorInsufficientDriver", "CUDA driver version is insufficient for CUDA runtime version"},
    {46, "cudaErrorDevicesUnavailable", "CUDA-capable device(s) is/are busy or unavailable"},
    {98, "cudaErrorInvalidDeviceFunction", "invalid device function"},
    {100, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {101, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {209, "cudaErrorNoKernelImageForDevice", "no kernel image is available for execution on the device"},
    {700, "cudaErrorIllegalAddress", "an illegal memory access was encountered"},
    {719, "cudaErrorLaunchFailure", "unspecified launch failure"},
    {999, "cudaErrorUnknown", "unknown error"},
};
const ErrorText kUnknownError = {-1, "unrecognized error code", "unrecognized error code"};

const ErrorText& error_text(int e) {
  for (const ErrorText& t : kErrors) {
    if (t.code == e) return t;
  }
  return kUnknownError;
}
const char* error_name(int e) { return error_text(e).name; }

/// An injected error for this call of `fn`, or 0. Caller holds the lock.
int injected(State& s, const char* fn) {
  auto it = s.failures.find(fn);
  if (it == s.failures.end()) return 0;
  Failure& f = it->second;
  if (f.skip > 0) {
    --f.skip;
    return 0;
  }
  if (f.times == 0) return 0;
  if (f.times > 0) --f.times;
  return f.error;
}

/// Appends one log line; returns `e` as a cudaError_t. Caller holds the lock.
cudaError_t record(State& s, const std::string& call, int e) {
  s.log += call;
  if (e != 0) s.log += std::string(" -> ") + error_name(e);
  s.log += "\n";
  return static_cast<cudaError_t>(e);
}

/// "_Z10add_kernelPKfS0_Pfl" -> "add_kernel"; "_Z5scaleIfEvPT_S0_l" -> "scale<float>".
std::string short_name(const char* mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string name = status == 0 && d != nullptr ? d : mangled;
  std::free(d);
  if (name.rfind("void ", 0) == 0) name = name.substr(5);  // templates carry their return type
  return name.substr(0, name.find('('));
}

std::string dims(const dim3& d) {
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
}

cudaError_t launch(const void* kernel, dim3 grid, dim3 block, size_t shmem, void* stream) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.kernels.find(kernel);
  std::string name = it == s.kernels.end() ? "<unregistered kernel>" : it->second;
  char where[64];
  std::snprintf(where, sizeof(where), "%p", stream);
  int e = it == s.kernels.end() ? 98 : s.launch_error;
  s.launch_error = 0;
  if (e != 0) s.last_error = e;
  return record(s,
                "launch " + name + " grid=" + dims(grid) + " block=" + dims(block) + " shmem=" + std::to_string(shmem) +
                    " stream=" + (stream == nullptr ? "0" : where) + " device=" + std::to_string(current_device(s)),
                e);
}

}  // namespace

// ---- control API, for the tests ----

/// Forgets the log, the injected errors and the call counter; `device_count`
/// devices, `current_device` current in every thread.
FAKE_API void kjit_fake_cuda_reset(int device_count, int current_device) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.log.clear();
  s.failures.clear();
  s.device_count = device_count;
  s.initial_device = current_device;
  s.generation++;
  s.device_count_calls = 0;
  s.launch_error = 0;
  s.last_error = 0;
}

/// The calls of `function` after the next `skip` ones return `error`, `times`
/// times (< 0: until the next reset).
FAKE_API void kjit_fake_cuda_fail(const char* function, int error, int skip, int times) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.failures[function] = Failure{error, skip, times};
}

/// The next kernel launch fails with `error` (then cudaGetLastError returns it).
FAKE_API void kjit_fake_cuda_set_launch_error(int error) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.launch_error = error;
}

/// The log since the last reset; the pointer stays valid until this thread's next call.
FAKE_API const char* kjit_fake_cuda_log() {
  static thread_local std::string copy;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  copy = s.log;
  return copy.c_str();
}

FAKE_API int kjit_fake_cuda_device_count_calls() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.device_count_calls;
}

/// The calling thread's current device.
FAKE_API int kjit_fake_cuda_current_device() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return current_device(s);
}

// ---- the runtime API kjit stubs call ----

/// Zero devices is reported as success with *count = 0 (the real runtime says
/// cudaErrorNoDevice; inject that with kjit_fake_cuda_fail), so the stub's own
/// check of the count is exercised too.
FAKE_API cudaError_t cudaGetDeviceCount(int* count) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.device_count_calls++;
  int e = injected(s, "cudaGetDeviceCount");
  if (e == 0) *count = s.device_count;
  return record(s, "cudaGetDeviceCount", e);
}

FAKE_API cudaError_t cudaGetDevice(int* device) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  int e = injected(s, "cudaGetDevice");
  if (e == 0) *device = current_device(s);
  return record(s, "cudaGetDevice", e);
}

FAKE_API cudaError_t cudaSetDevice(int device) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  int e = injected(s, "cudaSetDevice");
  if (e == 0 && (device < 0 || device >= s.device_count)) e = 101;  // cudaErrorInvalidDevice
  if (e == 0) current_device(s) = device;
  return record(s, "cudaSetDevice(" + std::to_string(device) + ")", e);
}

FAKE_API cudaError_t cudaGetLastError(void) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  int e = injected(s, "cudaGetLastError");
  if (e == 0) e = s.last_error;
  s.last_error = 0;
  return record(s, "cudaGetLastError", e);
}

FAKE_API cudaError_t cudaPeekAtLastError(void) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return record(s, "cudaPeekAtLastError", s.last_error);
}

FAKE_API const char* cudaGetErrorName(cudaError_t error) { return error_name(error); }
FAKE_API const char* cudaGetErrorString(cudaError_t error) { return error_text(error).text; }

FAKE_API cudaError_t cudaDeviceSynchronize(void) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return record(s, "cudaDeviceSynchronize", injected(s, "cudaDeviceSynchronize"));
}

FAKE_API cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  char where[64];
  std::snprintf(where, sizeof(where), "%p", static_cast<void*>(stream));
  return record(s, std::string("cudaStreamSynchronize(") + (stream == nullptr ? "0" : where) + ")",
                injected(s, "cudaStreamSynchronize"));
}

FAKE_API cudaError_t cudaLaunchKernel(const void* func, dim3 grid, dim3 block, void** /*args*/, size_t shmem,
                                      cudaStream_t stream) {
  return launch(func, grid, block, shmem, stream);
}

// ---- what nvcc's host code calls (crt/host_runtime.h, crt/device_functions.h) ----

FAKE_API void** __cudaRegisterFatBinary(void* fat_cubin) { return new void*(fat_cubin); }
FAKE_API void __cudaRegisterFatBinaryEnd(void** /*handle*/) {}
FAKE_API void __cudaUnregisterFatBinary(void** handle) { delete handle; }
FAKE_API char __cudaInitModule(void** /*handle*/) { return 1; }

FAKE_API void __cudaRegisterFunction(void** /*handle*/, const char* host_fun, char* /*device_fun*/,
                                     const char* device_name, int /*thread_limit*/, uint3* /*tid*/, uint3* /*bid*/,
                                     dim3* /*block*/, dim3* /*grid*/, int* /*warp_size*/) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.kernels[host_fun] = short_name(device_name);
}

FAKE_API unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shmem, struct CUstream_st* stream) {
  t_configs.push_back(LaunchConfig{grid, block, shmem, stream});
  return 0;
}

FAKE_API cudaError_t __cudaPopCallConfiguration(dim3* grid, dim3* block, size_t* shmem, void* stream) {
  if (t_configs.empty()) return cudaErrorInvalidConfiguration;
  const LaunchConfig c = t_configs.back();
  t_configs.pop_back();
  *grid = c.grid;
  *block = c.block;
  *shmem = c.shmem;
  *static_cast<void**>(stream) = c.stream;
  return cudaSuccess;
}

/// The kernel handle is the host stub's address; __cudaLaunchKernel looks it up.
FAKE_API cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* fun) {
  *kernel = reinterpret_cast<cudaKernel_t>(const_cast<void*>(fun));
  return cudaSuccess;
}

FAKE_API cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void** /*args*/, size_t shmem,
                                        cudaStream_t stream) {
  return launch(kernel, grid, block, shmem, stream);
}
