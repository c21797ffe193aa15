// Keyed by XXH3-128 of everything that decides the image. Each file is sealed
// (its size and checksum in front, cache_detail::seal), private and ours; a
// damaged one is recompiled, a foreign one refused.
#include "cuda/cuda_cache.h"

#define XXH_INLINE_ALL  // header-only use of xxHash, as in the build cache
#include <xxhash.h>

#include <cstdio>
#include <filesystem>

#include "kjit/build.h"
#include "kjit/errors.h"
#include "toolchain/cache_files.h"

namespace kjit {
namespace cuda {
namespace fs = std::filesystem;
namespace {

std::string image_key(const std::string& source, const std::string& arch, const std::vector<std::string>& options) {
  NvrtcVersion v = nvrtc_version();
  std::string all = source + '\0' + arch + '\0' + std::to_string(v.major) + "." + std::to_string(v.minor);
  for (const std::string& o : options) all += '\0' + o;
  XXH128_hash_t h = XXH3_128bits(all.data(), all.size());
  char hex[33];
  std::snprintf(hex, sizeof(hex), "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return hex;
}

/// Publishing is best effort: a cache that cannot be written costs a recompile
/// next time, never the call.
void publish(const fs::path& path, const std::string& binary) {
  try {
    cache_detail::publish_file(path, cache_detail::seal(binary));
  } catch (const CacheError& e) {
    std::fprintf(stderr, "[kjit] not caching the NVRTC image: %s\n", e.what());
  }
}

}  // namespace

NvrtcResult cached_elementwise_cuda(const std::string& code, const std::string& entry, const EwKernelTypes& types,
                                    EwCudaVariant variant, const std::string& arch,
                                    const std::vector<std::string>& options, const std::string& cache_dir, bool* hit) {
  const bool ptx = arch.rfind("compute_", 0) == 0;
  std::string source = emit_elementwise_cuda(code, entry, types, variant);
  fs::path root = cache_detail::private_cache_root(cache_dir.empty() ? default_cache_dir() : cache_dir);
  fs::path dir = root / "cuda-kernels";
  cache_detail::ensure_private_dir(dir, "NVRTC image directory");
  fs::path file = dir / (cache_detail::file_stem(entry) + "-" + arch + "-" + image_key(source, arch, options) +
                         (ptx ? ".ptx" : ".cubin"));
  NvrtcResult result;
  result.ptx = ptx;
  std::string sealed;
  if (cache_detail::read_owned_file(file, &sealed)) {
    if (cache_detail::unseal(sealed, &result.binary)) {
      if (hit != nullptr) *hit = true;
      return result;
    }
    std::fprintf(stderr, "[kjit] cached NVRTC image %s is damaged (checksum mismatch); recompiling it\n", file.c_str());
  }
  result = compile_elementwise_cuda(code, entry, types, variant, arch, options);
  publish(file, result.binary);
  if (hit != nullptr) *hit = false;
  return result;
}

}  // namespace cuda
}  // namespace kjit
