// The library of the XLA FFI handler that kjit.elementwise functions share under JAX.
#include <mutex>

#include "kjit/build.h"
#include "kjit/codegen.h"
#include "kjit/runtime.h"
#include "runtime/xla_builds.h"

namespace kjit {

std::string elementwise_xla_library(const std::string& xla_include_dir, const std::string& cache_dir, bool verbose) {
  BuildRequest request;
  request.name = "kjit_xla_elementwise";
  request.source = emit_xla_elementwise_source();
  request.include_paths = {xla_include_dir};
  request.cache_dir = cache_dir;
  request.verbose = verbose;
  request.objects.push_back(xla_helpers_request(request, xla_include_dir));
  return build_shared_library(request).library_path;
}

}  // namespace kjit
