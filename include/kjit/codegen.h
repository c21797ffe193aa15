// kjit/codegen.h — host stubs from specs.
//
// Every function gets one `extern "C" int __tvm_ffi_<name>(void*, const TVMFFIAny*,
// int32_t, TVMFFIAny*)` safe call that checks each argument, calls the user's
// function and turns any C++ exception into the FFI error of its kind (the name
// table of kjit/errors.h, which the runtime uses too). Stubs include only the
// tvm-ffi C ABI headers, never its C++ headers, so a JIT build stays fast.
#ifndef KJIT_CODEGEN_H_
#define KJIT_CODEGEN_H_

#include <string>
#include <utility>
#include <vector>

#include "kjit/declare.h"
#include "kjit/spec.h"

namespace kjit {

/// Helpers shared by all stubs of a translation unit (error formatting, decoding):
/// the text of kjit/detail/float16_conversions.h and kjit/detail/stub_prelude.h.
std::string emit_stub_prelude();

/// How a stub is emitted beyond its spec.
struct StubOptions {
  /// The checks become one out-of-line function the XLA handler calls too (one
  /// copy to compile instead of two, for one extra direct call on the tvm-ffi
  /// path); otherwise they are inlined into the safe call.
  bool shared_with_xla = false;
  /// The module links the CUDA runtime: functions with @cuda tensors initialise
  /// CUDA lazily and switch to (and restore) the tensors' device around the call.
  bool cuda_runtime = false;
};

/// The checked safe call of one function.
std::string emit_stub(const FunctionSpec& spec, const StubOptions& options = {});

/// Host-side helpers of CUDA stubs: the CUDA runtime calls (bound by asm label, so
/// a user's <cuda_runtime.h> cannot clash), lazy initialisation, error messages:
/// the text of kjit/detail/cuda_host_prelude.h.
std::string emit_cuda_prelude();

/// Declarations the host translation unit needs for functions defined in device
/// code (`cuda_sources`), read off their C++ definitions; "" when none.
std::string emit_cuda_declarations(const std::vector<FunctionSpec>& specs, const std::vector<SourceText>& cuda_sources);

/// Instantiated by kjit: the `template <typename T>` definition of a function in
/// cuda_sources whose type parameters are dtype variables of its signature
/// (FunctionSpec::callee_template_vars), for every combination (nvcc compiles the
/// instantiations the host stub calls); "" when none.
std::string emit_cuda_instantiations(const std::vector<FunctionSpec>& specs,
                                     const std::vector<SourceText>& cuda_sources);

/// Every combination of a template kernel's dtype variables' alternatives
/// (FunctionSpec::callee_template_vars), in order; one empty one for a plain function.
std::vector<std::vector<const DTypeInfo*>> template_instantiations(const FunctionSpec& spec);

/// "ns::f" or, for one instantiation (a dtype per template variable), "ns::f<float, int32_t>".
std::string template_callee(const std::string& callee, const std::vector<const DTypeInfo*>& combo);

/// The inlined function behind a stub that holds every check; the XLA handler
/// calls it too.
std::string checked_function_name(const std::string& fn);

/// A generated translation unit and the parts of it a user may want to read.
struct ModuleSource {
  std::string text;                ///< what the host compiler gets
  std::string cuda_text;           ///< what nvcc gets; empty without cuda_sources
  std::vector<std::string> stubs;  ///< emit_stub() of each spec, in order
  /// The sources use tvm-ffi, so its bridge is compiled: a kernel may take
  /// tvm::ffi::Tensor, which only a Tensor object (not a DLTensor*) can become.
  bool tvm_ffi_bridge = false;
};

/// What the XLA FFI handlers of a translation unit call: the text of
/// kjit/detail/xla_prelude.h (checks inline, helpers declared).
std::string emit_xla_prelude();

/// The translation unit that defines the helpers xla_prelude.h declares
/// (kjit/detail/xla_helpers.h after the stub and XLA preludes): the same for every
/// module, so it is compiled once into an object (xla_helpers_request()).
std::string emit_xla_helpers_source();

/// The translation unit of the XLA FFI handler every kjit.elementwise function
/// shares under JAX (kjit/detail/xla_elementwise.h after the stub and XLA
/// preludes), linked with the XLA helpers' object.
std::string emit_xla_elementwise_source();

/// The exported symbol of a function's XLA FFI handler ("__kjit_xla_<fn>").
std::string xla_handler_symbol(const std::string& fn);

/// `XLA_FFI_Error* __kjit_xla_<fn>(XLA_FFI_CallFrame*)`: turns XLA buffers (dense
/// row-major) and scalar attrs into the stub's arguments, runs the same checks,
/// and returns failures as XLA errors. Needs xla/ffi/api/c_api.h on the include path.
std::string emit_xla_handler(const FunctionSpec& spec);

/// What goes into a module's translation units besides the stubs.
struct ModuleSourceOptions {
  bool xla_handlers = false;      ///< also emit an XLA FFI handler per function
  bool brainevent_alias = false;  ///< the sources use brainevent's spelling (BE::Tensor, // @BE)
  /// With brainevent_alias: brainevent's own headers are on the include path, so
  /// BE::Tensor is brainevent's type (built by kjit/detail/brainevent_bridge.h);
  /// without them it is an alias of kjit::TensorView (kjit/compat).
  bool brainevent_headers = false;
  std::vector<SourceText> cuda_sources;  ///< device code: a separate .cu translation unit
  /// The instruction-set level the library is compiled for ("x86-64-v3"): recorded in
  /// it as `KJIT_ISA=<level>`, which kjit.load reads before loading it. Empty: baseline.
  std::string isa_level;
};

/// Where `name` is defined ("cpp_sources:12", "cpp_sources[1]:3") and its C++
/// return type; the first declaration when no source defines it, {"", ""} when
/// none declares it.
std::pair<std::string, std::string> definition_of(const std::vector<SourceText>& sources, const std::string& name);

/// The device kind of a function's tensors ("cpu", "cuda"), "none" without any.
std::string device_of(const FunctionSpec& s);

/// The name of the exported tvm-ffi function every module has (since kjit 0.1):
/// it returns the module's manifest, JSON with "kjit_manifest" (kManifestVersion),
/// "kjit_version" (the kjit that generated it), "tvm_ffi_abi" (the tvm-ffi headers
/// it was compiled against, "0.1.16"), "name", "functions" ([{"name", "signature",
/// "device", "location", "return_type"}], in order), "xla_handlers" and
/// "tvm_ffi_bridge": what kjit::load_module needs to give back a full Module with
/// no source and no compiler (it checks the manifest against each stub's own
/// metadata first, docs/shipping.md).
inline constexpr char kManifestFunction[] = "__kjit_manifest";
/// A module library holds the text "KJIT_ISA=<level>" (ModuleSourceOptions::isa_level).
inline constexpr char kIsaMarker[] = "KJIT_ISA";
/// The manifest's format: 2 added the versions.
inline constexpr int kManifestVersion = 2;

/// kStubIncludesLine (first), the prelude, the user's sources (each under #line 1 "<file>"),
/// every stub and the manifest (kManifestFunction) of module `generated_name`
/// without its ".cc", the file the stubs' line numbers refer to.
ModuleSource emit_module_source(const std::vector<SourceText>& sources, const std::vector<FunctionSpec>& specs,
                                const std::string& generated_name, const ModuleSourceOptions& options = {});

}  // namespace kjit

#endif  // KJIT_CODEGEN_H_
