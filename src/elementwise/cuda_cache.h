// The disk cache of NVRTC images (CUBIN or PTX) of elementwise CUDA kernels, like
// PyTorch's JITerator cache: a file per (source, arch, options, NVRTC version).
#ifndef KJIT_SRC_ELEMENTWISE_CUDA_CACHE_H_
#define KJIT_SRC_ELEMENTWISE_CUDA_CACHE_H_

#include <string>
#include <vector>

#include "elementwise/nvrtc.h"

namespace kjit {
namespace ew {

/// compile_elementwise_cuda through the cache under `cache_dir` (empty:
/// default_cache_dir()): a hit reads the image, a miss compiles and publishes it by
/// atomic rename (readers never see a partial file). `hit` reports which happened.
NvrtcResult cached_elementwise_cuda(const std::string& code, const std::string& entry, const EwKernelTypes& types,
                                    EwCudaVariant variant, const std::string& arch,
                                    const std::vector<std::string>& options, const std::string& cache_dir,
                                    bool* hit = nullptr);

}  // namespace ew
}  // namespace kjit

#endif  // KJIT_SRC_ELEMENTWISE_CUDA_CACHE_H_
