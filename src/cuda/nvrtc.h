// NVRTC, loaded lazily with dlopen (kjit does not link against CUDA): compiles
// CUDA source to CUBIN or PTX in-process.
#ifndef KJIT_SRC_CUDA_NVRTC_H_
#define KJIT_SRC_CUDA_NVRTC_H_

#include <string>
#include <vector>

#include "cuda/codegen_cuda.h"

namespace kjit {
namespace cuda {

/// What NVRTC produced.
struct NvrtcResult {
  std::string binary;  ///< CUBIN bytes (arch sm_XX) or PTX text (compute_XX)
  bool ptx = false;
  std::string log;  ///< NVRTC's log (warnings), possibly empty
};

struct NvrtcVersion {
  int major = 0, minor = 0;
};

/// The loaded NVRTC's version. Throws ToolchainError when NVRTC cannot be loaded
/// (tried libnvrtc.so.13, libnvrtc.so, then $CUDA_HOME/lib64 and /usr/local/cuda/lib64).
NvrtcVersion nvrtc_version();

/// The sm_XX numbers this NVRTC can generate CUBIN for (e.g. 75, 80, ..., 121);
/// empty when the library does not say.
std::vector<int> nvrtc_supported_archs();

/// Compiles `source` with --std=c++17 -default-device --gpu-architecture=`arch`
/// ("sm_80" gives CUBIN, "compute_90" PTX) and `options`. Throws CompileError with
/// NVRTC's log, ToolchainError when NVRTC cannot be loaded, ValueError for an arch
/// that is neither sm_* nor compute_*. Thread-safe.
NvrtcResult compile_cuda(const std::string& source, const std::string& arch, std::vector<std::string> options = {});

/// emit_elementwise_cuda + compile_cuda; a CompileError names the entry, the
/// dtypes, the variant and the arch, and the log's `code(<line>)` are lines of the
/// computation string.
NvrtcResult compile_elementwise_cuda(const std::string& code, const std::string& entry, const EwKernelTypes& types,
                                     EwCudaVariant variant, const std::string& arch,
                                     std::vector<std::string> options = {});

}  // namespace cuda
}  // namespace kjit

#endif  // KJIT_SRC_CUDA_NVRTC_H_
