// The tvm-ffi functions behind `kjit cache` and `kjit doctor`: the cache's entries,
// their pruning, and what the toolchain finds on this machine.
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/reflection/registry.h>
#include <tvm/ffi/string.h>

#include <string>

#include "cpu/vector_math.h"
#include "cuda/cuda_launch.h"
#include "cuda/nvrtc.h"
#include "ffi/boundary.h"
#include "ffi/fields.h"
#include "kjit/build.h"
#include "kjit/errors.h"

namespace kjit {
namespace {

using tvm::ffi::Array;
using tvm::ffi::String;

FieldMap entry_fields(const CacheEntry& e) {
  return FieldMap{{"path", String(e.path)},   {"name", String(e.name)},
                  {"kind", String(e.kind)},   {"bytes", static_cast<int64_t>(e.bytes)},
                  {"last_used", e.last_used}, {"made_by", String(e.made_by)}};
}

Array<FieldMap> entry_list(const std::vector<CacheEntry>& entries) {
  Array<FieldMap> out;
  for (const CacheEntry& e : entries) out.push_back(entry_fields(e));
  return out;
}

Array<String> string_list(const std::vector<std::string>& items) {
  Array<String> out;
  for (const std::string& s : items) out.push_back(String(s));
  return out;
}

Array<FieldMap> failure_list(const std::vector<PruneFailure>& failures) {
  Array<FieldMap> out;
  for (const PruneFailure& f : failures) {
    FieldMap m = entry_fields(f.entry);
    m.Set("reason", String(f.reason));
    out.push_back(m);
  }
  return out;
}

/// What one tool of the toolchain is: found (and where, which version) or why not.
template <typename F>
FieldMap probe(F&& find) {
  try {
    return FieldMap{{"found", true}, {"detail", String(find())}};
  } catch (const std::exception& e) {
    return FieldMap{{"found", false}, {"detail", String(e.what())}};
  }
}

FieldMap toolchain_report() {
  return FieldMap{
      {"cxx", probe([] { return find_toolchain().identity; })},
      {"nvcc",
       probe([] { return find_cuda_toolchain().nvcc.at(0) + " (CUDA " + find_cuda_toolchain().version + ")"; })},
      {"nvrtc", probe([] {
         const cuda::NvrtcVersion v = cuda::nvrtc_version();
         return "NVRTC " + std::to_string(v.major) + "." + std::to_string(v.minor);
       })},
      {"cuda_driver", probe([] {
         cuda::cuda_driver();
         return std::string("libcuda loaded and initialised");
       })},
      {"cache_dir", probe([] { return usable_cache_root(""); })},  // the checks every build runs
      {"vector_math", probe([] {
         const cpu::VectorMath& vm = cpu::vector_math();
         if (vm.library.empty()) {
           throw std::runtime_error(
               "none (KJIT_VECTOR_MATH=off, a compiler other than GCC, or neither SLEEF nor libmvec found)");
         }
         return vm.library + " (" + vm.ldflags.at(0) + ")";
       })},
  };
}

}  // namespace

TVM_FFI_STATIC_INIT_BLOCK() {
  namespace refl = tvm::ffi::reflection;
  refl::GlobalDef()
      .def("kjit.cache_list",
           [](const String& dir) {
             return at_ffi_boundary([&] {
               return FieldMap{{"entries", entry_list(list_cache(std::string(dir)))},
                               {"skipped", string_list(foreign_cache_files(std::string(dir)))}};
             });
           })
      .def("kjit.cache_prune",
           [](const String& dir, int64_t older_than_seconds, int64_t max_bytes, bool all, bool dry_run) {
             return at_ffi_boundary([&] {
               PruneOptions o;
               o.older_than_seconds = older_than_seconds;
               o.max_bytes = max_bytes;
               o.all = all;
               o.dry_run = dry_run;
               const PruneResult r = prune_cache(std::string(dir), o);
               return FieldMap{{"removed", entry_list(r.removed)},
                               {"busy", entry_list(r.busy)},
                               {"failed", failure_list(r.failed)},
                               {"skipped", string_list(r.skipped)},
                               {"freed_bytes", static_cast<int64_t>(r.freed_bytes)},
                               {"lock_files_removed", static_cast<int64_t>(r.lock_files_removed)}};
             });
           })
      .def("kjit.parse_byte_size", [](const String& text) { return parse_byte_size(std::string(text)); })
      .def("kjit.toolchain_report", toolchain_report);
}

}  // namespace kjit
