// Keyed by XXH3-128 of everything that decides the image; a damaged file (empty)
// is recompiled.
#include "elementwise/cuda_cache.h"

#include <unistd.h>
#define XXH_INLINE_ALL  // header-only use of xxHash, as in the build cache
#include <xxhash.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kjit/build.h"
#include "kjit/errors.h"

namespace kjit {
namespace ew {
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

bool read_file(const fs::path& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream s;
  s << in.rdbuf();
  *out = s.str();
  return !out->empty();
}

void publish(const fs::path& path, const std::string& bytes) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) return;  // a cache that cannot be written only costs a recompile next time
  fs::path tmp = path;
  tmp += ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    out << bytes;
    if (!out) {
      fs::remove(tmp, ec);
      return;
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) fs::remove(tmp, ec);
}

}  // namespace

NvrtcResult cached_elementwise_cuda(const std::string& code, const std::string& entry, const EwKernelTypes& types,
                                    EwCudaVariant variant, const std::string& arch,
                                    const std::vector<std::string>& options, const std::string& cache_dir, bool* hit) {
  const bool ptx = arch.rfind("compute_", 0) == 0;
  std::string source = emit_elementwise_cuda(code, entry, types, variant);
  fs::path root = cache_dir.empty() ? fs::path(default_cache_dir()) : fs::path(cache_dir);
  fs::path file =
      root / "cuda-kernels" / (entry + "-" + arch + "-" + image_key(source, arch, options) + (ptx ? ".ptx" : ".cubin"));
  NvrtcResult result;
  result.ptx = ptx;
  if (read_file(file, &result.binary)) {
    if (hit != nullptr) *hit = true;
    return result;
  }
  result = compile_elementwise_cuda(code, entry, types, variant, arch, options);
  publish(file, result.binary);
  if (hit != nullptr) *hit = false;
  return result;
}

}  // namespace ew
}  // namespace kjit
