// Host side of the CUDA elementwise kernels: launch geometry, vector width,
// 32-bit index splitting, kernel argument packing (all pure, testable without a
// GPU), the lazily loaded CUDA driver API, and the launch itself.
#ifndef KJIT_SRC_CUDA_CUDA_LAUNCH_H_
#define KJIT_SRC_CUDA_CUDA_LAUNCH_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cuda/codegen_cuda.h"
#include "iterator/plan.h"
#include "kjit/errors.h"

namespace kjit {
namespace cuda {

/// Grid and block of one launch over n elements.
struct CudaGeometry {
  uint32_t grid = 0;                ///< blocks; 0 when n == 0 (nothing to launch)
  uint32_t block = kEwCudaThreads;  ///< threads per block
  int work = 8;                     ///< elements per thread
};

/// ceil(n / (block * work)) blocks; n must be in [0, INT32_MAX] (split first).
CudaGeometry cuda_geometry(int64_t n, int work_per_thread);

/// The widest of 4, 2, 1 elements with width * element_size <= 16 bytes that
/// every pointer is aligned to (PyTorch's can_vectorize_up_to).
int cuda_vector_width(const std::vector<char*>& data, int element_size);

/// Whether the loop's numel and every operand's largest byte offset fit in int32.
bool fits_32bit_indexing(const detail::LoopLayout& loop);

/// Sub-loops that each fit 32-bit indexing and together cover every element once:
/// the dim with the largest (size - 1) * |stride| is halved, recursively
/// (TensorIterator::with_32bit_indexing).
std::vector<detail::LoopLayout> split_for_32bit_indexing(const detail::LoopLayout& loop);

/// A 1-D (or 0-D) loop in which every operand advances by its element size
/// (by-value inputs, which do not advance, aside).
bool is_contiguous_loop(const detail::LoopLayout& loop, const EwKernelTypes& types);

/// JITerator's choice: casts or not, contiguous or not.
EwCudaVariant choose_cuda_variant(const detail::LoopLayout& loop, const EwKernelTypes& types);

/// Division by a fixed divisor with mul-hi, add and shift (PyTorch's IntDivider);
/// exact for n < 2^31. The device's kjit_div mirrors div().
struct CudaDivider {
  uint32_t divisor = 1, magic = 1, shift = 0;
  static CudaDivider of(uint32_t divisor);  ///< divisor >= 1
  uint32_t div(uint32_t n) const;
};

/// The words of the kernel's kjit_offsets for a loop that fits 32-bit indexing:
/// ndim, {divisor, magic, shift} per dim, strides [dim][operand] in bytes; dims
/// of size 1 are dropped. Throws NotImplementedError beyond kEwCudaMaxDims dims.
std::vector<uint32_t> pack_offsets(const detail::LoopLayout& loop);

/// The extra scalars laid out as the kernel's kjit_extra: each in its travel type
/// (types.extra) in a slot of kEwExtraSlotBytes. Throws TypeError for a tensor.
std::vector<unsigned char> pack_extra(const std::vector<EwOperand>& extra, const EwKernelTypes& types);

/// The by-value inputs' values laid out as the kernel's kjit_scalars:
/// values[i] points at input i's value in types.inputs[i] (null for tensor inputs).
std::vector<unsigned char> pack_scalars(const EwKernelTypes& types, const std::vector<const void*>& values);

/// One launch's arguments; pointers() is the `void* args[]` of cuLaunchKernel and
/// points into this object, so keep it alive and unmoved until the launch.
struct CudaKernelArgs {
  int32_t n = 0;
  std::vector<char*> data;             ///< kjit_ptrs: one per operand, outputs first
  std::vector<uint32_t> offsets;       ///< kjit_offsets (strided variants only)
  std::vector<unsigned char> scalars;  ///< kjit_scalars (only with by-value inputs)
  std::vector<unsigned char> extra;    ///< kjit_extra (only with extra scalars)
  std::vector<void*> pointers();
};
CudaKernelArgs pack_cuda_args(const detail::LoopLayout& loop, EwCudaVariant variant, std::vector<unsigned char> extra,
                              std::vector<unsigned char> scalars = {});

/// One kernel launch: which kernel, its grid, its arguments.
struct CudaLaunch {
  EwCudaVariant variant = EwCudaVariant::kVectorized;
  int vec = 1;  ///< vector width (kVectorized only)
  CudaGeometry geometry;
  CudaKernelArgs args;
};

/// The launches that run a kernel of `types` over `loop` (operands outputs first;
/// by-value inputs have stride 0 and no pointer): one per 32-bit sub-loop, each
/// with its variant and vector width; `extra` from pack_extra, `scalars` from
/// pack_scalars. Throws ValueError for misaligned operands.
std::vector<CudaLaunch> plan_cuda_launches(const detail::LoopLayout& loop, const EwKernelTypes& types,
                                           const std::vector<unsigned char>& extra,
                                           const std::vector<unsigned char>& scalars = {});

/// Throws ValueError unless every operand's pointer and strides are multiples of
/// its element size (the kernels access elements with aligned loads).
void check_cuda_alignment(const detail::LoopLayout& loop, const EwKernelTypes& types);

/// The NVRTC target for a device of compute capability `cc` (80 for 8.0): sm_<cc>
/// when NVRTC supports it, else PTX for the newest arch it has below cc (the
/// driver JIT-compiles it). Throws RuntimeError for a device older than NVRTC's
/// oldest arch. An empty `supported` means "trust sm_<cc>".
std::string nvrtc_arch_for(int cc, const std::vector<int>& supported);

/// The CUDA driver API entry points kjit uses (handles as void*; results as int).
struct CudaDriver {
  int (*init)(unsigned) = nullptr;
  int (*device_get)(int*, int) = nullptr;
  int (*device_attribute)(int*, int, int) = nullptr;
  int (*ctx_get_current)(void**) = nullptr;
  int (*ctx_set_current)(void*) = nullptr;
  int (*ctx_get_device)(int*) = nullptr;
  int (*primary_ctx_retain)(void**, int) = nullptr;
  int (*module_load_data)(void**, const void*) = nullptr;
  int (*module_get_function)(void**, void*, const char*) = nullptr;
  int (*launch_kernel)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**,
                       void**) = nullptr;
  int (*error_name)(int, const char**) = nullptr;
  int (*error_string)(int, const char**) = nullptr;
  std::string error;  ///< why the driver is unusable; empty when loaded and initialised
};

/// libcuda.so.1, loaded and cuInit-ed once (thread-safe). Throws RuntimeError
/// "kjit: CUDA driver not available: ..." without a driver.
const CudaDriver& cuda_driver();

/// Makes a context of `device` current (the caller's if it is that device's, else
/// the device's primary context, retained once per process) and restores the
/// caller's at the end of the scope. Throws RuntimeError without a driver.
class CudaContextGuard {
 public:
  explicit CudaContextGuard(int device);
  ~CudaContextGuard();
  CudaContextGuard(const CudaContextGuard&) = delete;
  CudaContextGuard& operator=(const CudaContextGuard&) = delete;

 private:
  const CudaDriver& d_;
  void* previous_ = nullptr;
  bool restore_ = false;
};

/// The compute capability of `device` (80 for 8.0).
int cuda_compute_capability(int device);

/// Throws RuntimeError "kjit: <what> failed: <the driver's error>" unless rc is 0.
void check_cuda(int rc, const char* what);

/// A computation's CUDA kernels for one set of types: each variant compiled once
/// per arch with NVRTC and loaded once per CUDA context, on first use.
/// Thread-safe. Modules stay loaded for the process (contexts may outlive it).
class CudaElementwiseKernel {
 public:
  CudaElementwiseKernel(std::string code, std::string entry, EwKernelTypes types,
                        std::vector<std::string> nvrtc_options = {});
  const EwKernelTypes& types() const { return types_; }

  /// The CUfunction of `variant` (vector width `vec`) in the current context,
  /// which belongs to the device of compute capability `cc`.
  void* function(EwCudaVariant variant, int vec, int cc);

 private:
  std::string code_, entry_;
  EwKernelTypes types_;
  std::vector<std::string> options_;
  std::mutex mu_;
  std::map<std::pair<int, std::string>, std::string> binaries_;  ///< (variant, arch) -> image
  std::map<std::pair<int, std::string>, CompileError> failed_;   ///< (variant, arch) -> why it did not compile
  std::map<std::pair<void*, int>, void*> modules_;               ///< (context, variant) -> CUmodule
  std::map<std::pair<void*, std::string>, void*> functions_;     ///< (context, kernel) -> CUfunction
};

/// Runs the kernel over `loop` (device pointers, outputs first) on `stream` of
/// `device`: splits for 32-bit indexing, picks the variant and vector width per
/// sub-loop, compiles and loads on first use, launches with cuLaunchKernel.
/// Throws RuntimeError without a driver (before compiling anything) or when a
/// driver call fails, ValueError for misaligned operands, CompileError.
void launch_elementwise_cuda(CudaElementwiseKernel& kernel, const detail::LoopLayout& loop,
                             const std::vector<EwOperand>& extra, const std::vector<unsigned char>& scalars, int device,
                             void* stream);

}  // namespace cuda
}  // namespace kjit

#endif  // KJIT_SRC_CUDA_CUDA_LAUNCH_H_
