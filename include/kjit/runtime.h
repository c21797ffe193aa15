// kjit/runtime.h — load_inline: specs + C++ source -> a loaded module of checked
// functions on the tvm-ffi ABI. This header uses the tvm-ffi C++ API; kernels never
// include it (they include kjit/kernel.h).
#ifndef KJIT_RUNTIME_H_
#define KJIT_RUNTIME_H_

#include <tvm/ffi/container/tensor.h>  // DLTensor* and tvm-ffi tensors as call arguments
#include <tvm/ffi/extra/module.h>
#include <tvm/ffi/function.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kjit/declare.h"
#include "kjit/spec.h"

namespace kjit {

struct InlineOptions {
  std::vector<std::string> extra_cflags;
  std::vector<std::string> extra_ldflags;
  std::vector<std::string> extra_include_paths;
  std::string build_directory;  ///< cache root for this module; empty: default_cache_dir()
  bool verbose = false;
  bool force_rebuild = false;  ///< compile even when the cache has the module
  /// Directory holding xla/ffi/api/c_api.h (jax.ffi.include_dir()); when set, every
  /// function also gets an XLA FFI handler `__kjit_xla_<fn>`.
  std::string xla_include_dir;
  /// Device code, compiled by nvcc into the same module; functions defined here
  /// default to @cuda tensors and get CUDA initialisation and a device guard.
  std::vector<std::string> cuda_sources;
  std::vector<std::string> extra_cuda_cflags;
  /// Target architectures ("sm_80,sm_90,compute_90", "8.0;9.0+PTX"); empty:
  /// KJIT_CUDA_ARCH, else the visible devices', else sm_80 + sm_90 + PTX.
  std::string cuda_arch;
  /// brainevent's installed include folder (`brainevent/include`): sources that use
  /// brainevent's spelling then compile against its real headers (BE::Tensor, BE_CHECK,
  /// ...); empty: kjit's small compatibility header (BE::Tensor = kjit::TensorView).
  std::string brainevent_include_dir;
  /// Build the library to be shipped (BuildRequest::relocatable): what kjit.build does.
  bool relocatable = false;
  /// The instruction set to compile for (isa_cflags()): native, baseline, x86-64-v3
  /// or x86-64-v4; empty: native (at -O3) for this machine, baseline for a
  /// relocatable build. kjit.load refuses a library built for a level its CPU lacks.
  std::string isa;
  /// The files the sources were read from (load_inline's `sources=[paths]`):
  /// messages and #line name them.
  SourceFiles source_files;
};

/// A loaded module: its checked functions and what produced them.
class Module {
 public:
  struct State;
  /// `cache_hit`: whether this load found the library built already (on disk or
  /// loaded earlier in this process).
  Module(std::shared_ptr<const State> state, bool cache_hit) : state_(std::move(state)), cache_hit_(cache_hit) {}

  const std::string& name() const;
  /// The shared library in the cache.
  const std::string& path() const;
  const std::vector<FunctionSpec>& specs() const;
  /// The checked function; throws SpecError naming the known ones if absent.
  tvm::ffi::Function function(const std::string& name) const;
  /// The generated stub of one function.
  const std::string& host_source(const std::string& name) const;
  /// The whole translation unit that was compiled.
  const std::string& full_source() const;
  bool cache_hit() const;
  /// The content hash the build was cached under.
  const std::string& key() const;
  /// Whether the library has XLA FFI handlers (InlineOptions::xla_include_dir).
  bool has_xla_handlers() const;
  /// Whether the sources use tvm-ffi (ModuleSource::tvm_ffi_bridge): its stubs then
  /// take tensors as Tensor objects, as tvm-ffi's own calls pass them.
  bool has_tvm_ffi_bridge() const;
  tvm::ffi::Module ffi_module() const;

 private:
  size_t index_of(const std::string& name) const;
  std::shared_ptr<const State> state_;
  bool cache_hit_ = false;
};

/// One user source; a list of them is compiled as one translation unit.
using Sources = std::vector<std::string>;
/// Function name and signature string, in order.
using SignatureList = std::vector<std::pair<std::string, std::string>>;

/// Parses the signatures, emits the stubs, builds (or finds in the cache) and loads.
/// Throws SpecError, CompileError, ToolchainError, CacheError.
Module load_inline(const std::string& name, const Sources& cpp_sources, const SignatureList& functions,
                   const InlineOptions& options = {});
/// Same, with declarations in any front-door form (signature, arg_spec tokens, or
/// inferred from the C++ definition); an empty list reads `// @kjit` / `// @BE`
/// annotations from the sources.
Module load_inline(const std::string& name, const Sources& cpp_sources, const std::vector<FunctionDecl>& functions,
                   const InlineOptions& options = {});
/// Same, with specs built in code (SpecBuilder).
Module load_inline(const std::string& name, const Sources& cpp_sources, const std::vector<FunctionSpec>& specs,
                   const InlineOptions& options = {});

/// A module built earlier (kjit.build, or any kjit library), from its path alone:
/// its specs come from the manifest it exports (kManifestFunction, kjit/codegen.h),
/// so nothing is compiled and no source is needed; calls check their arguments as
/// the built module's did. host_source() and full_source() are empty. Before
/// dlopen the ELF headers must lie inside the file (a truncated file is refused,
/// not mapped); then the manifest must be whole, record a compatible kjit and
/// tvm-ffi ABI, and agree with each stub's own metadata (docs/shipping.md, What
/// kjit.load checks). Throws ValueError naming the file and what is wrong for a
/// file that fails any of these, does not load or is not a kjit module.
Module load_module(const std::string& path);

/// The shared library holding `__kjit_xla_elementwise`, the XLA FFI handler through
/// which JAX calls kjit.elementwise functions (kjit/detail/xla_elementwise.h),
/// built once per cache and XLA headers (`xla_include_dir`: jax.ffi.include_dir()).
/// Returns its path. Throws CompileError, ToolchainError, CacheError.
std::string elementwise_xla_library(const std::string& xla_include_dir, const std::string& cache_dir = "",
                                    bool verbose = false);

}  // namespace kjit

#endif  // KJIT_RUNTIME_H_
