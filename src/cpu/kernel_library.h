// Generated CPU kernels as libraries: built through the shared toolchain and
// cache, loaded, and kept by key with their failed compiles remembered. The
// elementwise engine and the reductions build theirs this way.
#ifndef KJIT_SRC_CPU_KERNEL_LIBRARY_H_
#define KJIT_SRC_CPU_KERNEL_LIBRARY_H_

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "kjit/errors.h"

namespace kjit {
namespace cpu {

/// One generated CPU kernel library to build.
struct CpuKernelBuild {
  std::string name;                 ///< the library's (and its cache entry's) name
  std::string source;               ///< the generated translation unit
  std::vector<std::string> cflags;  ///< besides the host ISA's: the loops run only here
  std::string cache_dir;            ///< empty: default_cache_dir()
  bool verbose = false;
  std::vector<std::string> exports;  ///< symbols the library must export
  std::string what;                  ///< "kjit.elementwise 'add' (float32) -> float32, ...": names it in errors
  std::string lines;                 ///< what a compiler's "code:N" line numbers count, for the message
};

/// Builds the library (or finds it in the cache) and loads it; its dlopen handle.
/// Throws CompileError naming `what` with the compiler's log, CacheError when the
/// built library cannot be loaded.
void* open_cpu_kernel(const CpuKernelBuild& build);

/// Kernels by key, each made once by the caller's `make`; a make that threw
/// CompileError is not tried again for that key: the same error is rethrown.
template <class Kernel>
class KernelTable {
 public:
  template <class Make>
  Kernel get(const std::string& key, const Make& make) {
    std::lock_guard<std::mutex> lock(mu_);  // one build per kernel at a time; the cache does the rest
    auto it = kernels_.find(key);
    if (it != kernels_.end()) return it->second;
    auto failed = failed_.find(key);
    if (failed != failed_.end()) throw failed->second;
    try {
      return kernels_.emplace(key, make()).first->second;
    } catch (const CompileError& e) {
      failed_.emplace(key, e);
      throw;
    }
  }

 private:
  std::mutex mu_;
  std::map<std::string, Kernel> kernels_;
  std::map<std::string, CompileError> failed_;
};

}  // namespace cpu
}  // namespace kjit

#endif  // KJIT_SRC_CPU_KERNEL_LIBRARY_H_
