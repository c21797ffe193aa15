#include "cpu/kernel_library.h"

#include <dlfcn.h>

#include "cpu/vector_math.h"
#include "kjit/build.h"

namespace kjit {
namespace cpu {

void* open_cpu_kernel(const CpuKernelBuild& build) {
  BuildRequest req;
  req.name = build.name;
  req.source = build.source;
  req.extra_cflags = build.cflags;
  const std::vector<std::string>& isa = host_isa_cflags();
  req.extra_cflags.insert(req.extra_cflags.end(), isa.begin(), isa.end());
  // GCC turns undefined behaviour it can see (an integer division by a literal
  // zero, a dereference of a literal null) into a trap instruction (SIGILL); without
  // it the division runs and raises SIGFPE, which the trap guard turns into a
  // ZeroDivisionError naming the function.
  if (find_toolchain().gcc) req.extra_cflags.push_back("-fno-isolate-erroneous-paths-dereference");
  req.extra_ldflags = vector_math().ldflags;
  req.cache_dir = build.cache_dir;
  req.verbose = build.verbose;
  req.exports = build.exports;
  BuildResult built;
  try {
    built = build_shared_library(req);
  } catch (const CompileError& e) {
    throw CompileError(build.what + ": the code does not compile:\n" + e.log() + build.lines, e.command(), e.log());
  }
  void* lib = dlopen(built.library_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) throw CacheError(build.what + ": cannot load " + built.library_path + ": " + dlerror());
  return lib;
}

}  // namespace cpu
}  // namespace kjit
