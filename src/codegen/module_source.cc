// Assembles a module's translation unit: prelude, user sources, stubs.
#include <algorithm>

#include "codegen/cpp_text.h"
#include "declare/cpp_signature.h"
#include "kjit/build.h"
#include "kjit/codegen.h"
#include "kjit/version.h"

namespace kjit {
namespace {

bool uses_complex_scalars(const std::vector<FunctionSpec>& specs) {
  for (const FunctionSpec& spec : specs) {
    for (const Param& p : spec.params) {
      if (p.kind == ParamKind::kScalar && is_complex(p.scalar)) return true;
    }
  }
  return false;
}

/// What BE::Tensor is before the sources: brainevent's own type (its installed
/// headers; `host` adds how a stub builds one), or else kjit's tensor view.
std::string brainevent_tensor(const ModuleSourceOptions& options, bool host) {
  if (!options.brainevent_alias) return "";
  if (options.brainevent_headers) {
    return host ? "#include <kjit/detail/brainevent_bridge.h>\n" : "#include \"brainevent/tensor.h\"\n";
  }
  return "// brainevent sources load unchanged: BE::Tensor is kjit's tensor view.\n"
         "namespace BE { using Tensor = ::kjit::TensorView; }\n";
}

/// Sources written for tvm_ffi.cpp.load_inline use tvm-ffi's C++ API without
/// including it (tvm-ffi's load_inline adds the includes). Only they pay for
/// parsing tvm-ffi's headers.
bool uses_tvm_ffi(const std::vector<SourceText>& sources) {
  for (const SourceText& s : sources) {
    if (s.text.find("tvm::ffi") != std::string::npos || s.text.find("TVM_FFI_") != std::string::npos ||
        s.text.find("tvm/ffi/") != std::string::npos)
      return true;
  }
  return false;
}

/// The headers tvm_ffi.cpp.load_inline puts before a kernel, and the switch that
/// compiles the stub prelude's tvm-ffi bridge.
std::string tvm_ffi_includes() {
  return "// The sources use tvm-ffi: its headers, as tvm_ffi.cpp.load_inline includes them.\n"
         "#include <tvm/ffi/container/tensor.h>\n"
         "#include <tvm/ffi/dtype.h>\n"
         "#include <tvm/ffi/error.h>\n"
         "#include <tvm/ffi/extra/c_env_api.h>\n"
         "#include <tvm/ffi/function.h>\n"
         "#include <tvm/ffi/string.h>\n"
         "#define KJIT_TVM_FFI_BRIDGE 1\n";
}

void append_sources(const std::vector<SourceText>& sources, std::string* text) {
  for (const SourceText& s : sources) {
    *text += "#line 1 " + c_string(s.file) + "\n";
    *text += s.text;
    if (text->empty() || text->back() != '\n') *text += "\n";
  }
}

size_t count_lines(const std::string& text) { return static_cast<size_t>(std::count(text.begin(), text.end(), '\n')); }

/// The exported function returning the module's manifest (kManifestFunction). It
/// records the kjit that generated it and the tvm-ffi ABI it was compiled against:
/// that one from tvm-ffi's own version macros, at compile time, so it is the
/// headers the compiler read (kjit.load refuses a library of another ABI).
std::string emit_manifest(const std::string& module, const std::vector<FunctionSpec>& specs,
                          const std::vector<SourceText>& sources, bool xla_handlers, bool tvm_ffi_bridge) {
  const std::string head = "{\"kjit_manifest\":" + std::to_string(kManifestVersion) +
                           ",\"kjit_version\":" + json_quote(KJIT_VERSION) + ",\"tvm_ffi_abi\":\"";
  std::string json = "\",\"name\":" + json_quote(module) + ",\"functions\":[";
  for (size_t i = 0; i < specs.size(); ++i) {
    const std::pair<std::string, std::string> where = definition_of(sources, specs[i].name);
    json += std::string(i ? "," : "") + "{\"name\":" + json_quote(specs[i].name) +
            ",\"signature\":" + json_quote(to_string(specs[i])) + ",\"device\":" + json_quote(device_of(specs[i])) +
            ",\"location\":" + json_quote(where.first) + ",\"return_type\":" + json_quote(where.second) +
            (specs[i].backward.empty() ? "" : ",\"backward\":" + json_quote(specs[i].backward)) + "}";
  }
  json += std::string("],\"xla_handlers\":") + (xla_handlers ? "true" : "false") +
          ",\"tvm_ffi_bridge\":" + (tvm_ffi_bridge ? "true" : "false") + "}";
  return std::string("\n// ---- the manifest kjit.load reads ----\n") +
         "#define KJIT_MANIFEST_TEXT_(x) #x\n#define KJIT_MANIFEST_TEXT(x) KJIT_MANIFEST_TEXT_(x)\n" +
         "extern \"C\" __attribute__((visibility(\"default\"))) int __tvm_ffi_" + kManifestFunction +
         "(void*, const TVMFFIAny*, int32_t, TVMFFIAny* result) {\n  return kjit_stub::store_text(result, " +
         c_string(head) +
         "\n      KJIT_MANIFEST_TEXT(TVM_FFI_VERSION_MAJOR) \".\" KJIT_MANIFEST_TEXT(TVM_FFI_VERSION_MINOR) \".\" "
         "KJIT_MANIFEST_TEXT(TVM_FFI_VERSION_PATCH)\n      " +
         c_string(json) + ");\n}\n";
}

}  // namespace

/// (codegen.h) Where `name` is defined ("cpp_sources:12", "cpp_sources[1]:3") and its C++
/// return type, for __doc__ and .pyi stubs; the first declaration when no source
/// defines it, {"", ""} when none declares it.
std::pair<std::string, std::string> definition_of(const std::vector<SourceText>& sources, const std::string& name) {
  std::pair<std::string, std::string> declared;
  for (const SourceText& src : sources) {
    for (const CppFunction& f : find_cpp_functions(src.text, name)) {
      std::pair<std::string, std::string> found{src.file + ":" + std::to_string(f.line), f.return_type};
      if (f.is_definition) return found;
      if (declared.first.empty()) declared = found;
    }
  }
  return declared;
}

std::string device_of(const FunctionSpec& s) {
  for (const Param& p : s.params) {
    if (p.kind == ParamKind::kTensor) return device_kind_name(p.tensor.device);
  }
  return "none";
}

ModuleSource emit_module_source(const std::vector<SourceText>& sources, const std::vector<FunctionSpec>& specs,
                                const std::string& generated_name, const ModuleSourceOptions& options) {
  ModuleSource out;
  std::string& text = out.text;
  // First, before any token: the one line a precompiled header can stand for.
  text += kStubIncludesLine;
  text += "// Generated by kjit. The user's sources keep their own line numbers (#line).\n";
  if (uses_complex_scalars(specs)) text += "#include <complex>\n";
  out.tvm_ffi_bridge = uses_tvm_ffi(sources);
  if (out.tvm_ffi_bridge) text += tvm_ffi_includes();
  text += emit_stub_prelude();
  const bool cuda = !options.cuda_sources.empty();
  if (cuda) text += emit_cuda_prelude();
  text += brainevent_tensor(options, true);
  append_sources(sources, &text);
  // Back to this file's own numbering, so stub errors point at the generated file.
  text += "#line " + std::to_string(count_lines(text) + 2) + " " + c_string(generated_name) + "\n";
  if (cuda) text += emit_cuda_declarations(specs, options.cuda_sources);
  text += "\n// ---- generated host stubs ----\n";
  StubOptions stub_options;
  stub_options.shared_with_xla = options.xla_handlers;
  stub_options.cuda_runtime = cuda;
  for (const FunctionSpec& spec : specs) {
    out.stubs.push_back(emit_stub(spec, stub_options));
    text += "\n" + out.stubs.back();
  }
  std::string module = generated_name.size() > 3 && generated_name.compare(generated_name.size() - 3, 3, ".cc") == 0
                           ? generated_name.substr(0, generated_name.size() - 3)
                           : generated_name;
  std::vector<SourceText> all_sources = sources;
  all_sources.insert(all_sources.end(), options.cuda_sources.begin(), options.cuda_sources.end());
  text += emit_manifest(module, specs, all_sources, options.xla_handlers, out.tvm_ffi_bridge);
  if (!options.isa_level.empty() && options.isa_level != "baseline") {
    // Data, read from the file by kjit.load before the library is loaded.
    text += std::string("// The instruction set this library is compiled for.\n") +
            "__attribute__((used)) static const char kjit_isa_level[] = " +
            c_string(std::string(kIsaMarker) + "=" + options.isa_level) + ";\n";
  }
  if (cuda) {
    out.cuda_text = "// Generated by kjit: the device code, compiled by nvcc (no tvm-ffi headers here).\n";
    out.cuda_text += "#include <kjit/kernel.h>\n";
    out.cuda_text += brainevent_tensor(options, false);
    append_sources(options.cuda_sources, &out.cuda_text);
    out.cuda_text += emit_cuda_instantiations(specs, options.cuda_sources);
  }
  if (options.xla_handlers) {
    text += "\n" + emit_xla_prelude();
    text += "\n// ---- generated XLA FFI handlers ----\n";
    for (const FunctionSpec& spec : specs) text += "\n" + emit_xla_handler(spec);
  }
  return out;
}

}  // namespace kjit
