// The CUDA backend of kjit.reduction: the kernels' source (the loops of
// kjit/detail/reduction_cuda.h over an Ops of device functions), how a problem's
// threads split (pure, testable without a GPU), the launch problem's bytes (the
// layout of kjit_red_cuda_problem), the kernels compiled with NVRTC and loaded per
// context, and the launch.
#ifndef KJIT_SRC_REDUCTION_REDUCTION_CUDA_H_
#define KJIT_SRC_REDUCTION_REDUCTION_CUDA_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "kjit/errors.h"
#include "reduction/reduction_plan.h"
#include "reduction/reduction_types.h"

namespace kjit {

/// The NVRTC source of kjit_red_partial and kjit_red_finish for one set of types.
/// float16/bfloat16 inputs and outputs are converted on load and store; the
/// accumulator is never a half type. `code` holds every part's definitions.
std::string emit_reduction_cuda(const std::string& code, const RedEntries& entries, const RedKernelTypes& types);

namespace red {

constexpr int kCudaMaxDims = 8;    ///< KJIT_RED_CUDA_MAX_DIMS: kept and reduced dims each
constexpr int kCudaThreads = 256;  ///< KJIT_RED_CUDA_THREADS: threads per block
constexpr int64_t kCudaMaxParts = 1024;

/// Bytes of a kernel's accumulator (the partials' element).
int64_t cuda_acc_bytes(const RedEntries& entries, const RedKernelTypes& types);

/// The bytes the host gives each accumulator of a user type (ReductionCode::accumulator)
/// in a CUDA reduction's partials: the kernel asserts its type fits.
inline constexpr int64_t kCudaUserAccumulatorBytes = 64;

/// How a problem's threads split: `parts` threads per output (1: each thread
/// reduces a whole output, no partials); adjacent threads take adjacent outputs
/// (an outer reduction) or adjacent parts of one.
struct CudaSplit {
  int64_t parts = 1;
  bool outputs_fastest = false;
};

/// Enough threads to fill a large GPU: many outputs take one thread each; few
/// outputs split each reduction into up to kCudaMaxParts parts of at least 32
/// elements. Without scratch memory for partials (`partials_allowed` false), one
/// part per output.
CudaSplit cuda_split(int64_t outputs, int64_t count, bool outer, bool partials_allowed);

/// kjit_red_cuda_problem's size for `n_operands` operands (the output and inputs).
size_t cuda_problem_bytes(int n_operands);

/// What one reduction launch reduces.
struct CudaProblem {
  const RedDims* dims = nullptr;
  int64_t count = 0;  ///< elements reduced into each output
  CudaSplit split;
  std::vector<char*> data;                    ///< device pointers, the output first
  std::vector<const unsigned char*> scalars;  ///< per operand: a scalar's 16 host bytes, else nullptr
  char* partials = nullptr;                   ///< [output][part] accumulators (parts > 1)
  const unsigned char* identity = nullptr;    ///< 16 bytes: the identity in the accumulator type
};

/// The kernel parameter, laid out as kjit_red_cuda_problem. Throws
/// NotImplementedError for more than kCudaMaxDims kept or reduced dims.
std::vector<unsigned char> pack_cuda_problem(const CudaProblem& p);

/// A reduction's CUDA kernels for one set of types: compiled once per arch with
/// NVRTC and loaded once per CUDA context, on first use; a failed compile is
/// remembered. Thread-safe.
class CudaReductionKernel {
 public:
  CudaReductionKernel(std::string code, RedEntries entries, RedKernelTypes types);
  /// kjit_red_partial or kjit_red_finish (`name`) in the current context, which
  /// belongs to a device of compute capability `cc`.
  void* function(const std::string& name, int cc);
  int64_t acc_bytes() const { return cuda_acc_bytes(entries_, types_); }

 private:
  std::string code_;
  RedEntries entries_;
  RedKernelTypes types_;
  std::mutex mu_;
  std::map<std::string, std::string> images_;                 ///< arch -> image
  std::map<std::string, CompileError> failed_;                ///< arch -> why it did not compile
  std::map<std::pair<void*, std::string>, void*> functions_;  ///< (context, kernel) -> CUfunction
  std::map<void*, void*> modules_;                            ///< context -> CUmodule
};

/// Reduces on `device`'s `stream`: kjit_red_partial, then with partials
/// kjit_red_finish. `scalars[op]` holds a scalar operand's 16 bytes (its `data`
/// entry is unused), nullptr for a tensor. `scratch(bytes)` gives device memory for the partials that
/// stays valid for work on `stream` (nullptr when there is no allocator: then one
/// part per output). Throws RuntimeError without a driver or when a driver call
/// fails, CompileError.
void launch_reduction_cuda(CudaReductionKernel& kernel, const RedDims& dims, int64_t count, bool outer,
                           const std::vector<char*>& data, const std::vector<const unsigned char*>& scalars,
                           const unsigned char* identity, int device, void* stream,
                           const std::function<char*(size_t)>& scratch);

}  // namespace red
}  // namespace kjit

#endif  // KJIT_SRC_REDUCTION_REDUCTION_CUDA_H_
