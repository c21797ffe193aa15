// The disk cache of NVRTC images (CUBIN or PTX) of elementwise CUDA kernels, like
// PyTorch's JITerator cache: a file per (source, arch, options, NVRTC version).
#ifndef KJIT_SRC_CUDA_CUDA_CACHE_H_
#define KJIT_SRC_CUDA_CUDA_CACHE_H_

#include <string>
#include <vector>

#include "cuda/nvrtc.h"

namespace kjit {
namespace cuda {

/// compile_elementwise_cuda through the cache under `cache_dir` (empty:
/// default_cache_dir()): a hit reads the image and checks the checksum sealed
/// with it, a miss (or a damaged file) compiles and publishes it durably by atomic
/// rename (readers never see a partial file). A foreign or unreadable file is a
/// CacheError. `hit` reports which happened.
NvrtcResult cached_elementwise_cuda(const std::string& code, const std::string& entry, const EwKernelTypes& types,
                                    EwCudaVariant variant, const std::string& arch,
                                    const std::vector<std::string>& options, const std::string& cache_dir,
                                    bool* hit = nullptr);

}  // namespace cuda
}  // namespace kjit

#endif  // KJIT_SRC_CUDA_CUDA_CACHE_H_
