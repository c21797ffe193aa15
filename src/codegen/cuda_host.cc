// Host-side declarations of the kernels defined in cuda_sources (the CUDA
// runtime calls the stubs make are kjit/detail/cuda_host_prelude.h). The host
// translation unit never includes CUDA headers (they would cost the host compile
// what they cost nvcc).
#include <sstream>

#include "declare/cpp_signature.h"
#include "declare/macro_expansion.h"
#include "kjit/codegen.h"
#include "kjit/errors.h"

namespace kjit {
namespace {

/// The definition of `name` in the device sources, if there is exactly one; else
/// its last declaration (a kernel defined in an object linked in), else nothing.
const CppFunction* find_definition(const std::vector<CppFunction>& found) {
  const CppFunction* def = nullptr;
  for (const CppFunction& f : found) {
    if (!f.is_definition) continue;
    if (def != nullptr) return nullptr;  // overloads: validated (and rejected) by the front doors
    def = &f;
  }
  return def != nullptr || found.empty() ? def : &found.back();
}

std::vector<std::string> split_qualified(const std::string& qualified) {
  std::vector<std::string> parts;
  size_t begin = 0;
  while (true) {
    size_t at = qualified.find("::", begin);
    parts.push_back(qualified.substr(begin, at == std::string::npos ? std::string::npos : at - begin));
    if (at == std::string::npos) return parts;
    begin = at + 2;
  }
}

std::string declaration_of(const CppFunction& f, const std::string& file) {
  if (f.is_template) {
    throw SpecError("'" + f.name + "' in " + file + ":" + std::to_string(f.line) +
                    " is a function template; a kjit entry point in cuda_sources must be a plain function (call "
                    "the template from one)");
  }
  std::vector<std::string> parts = split_qualified(f.qualified_name);
  std::ostringstream out;
  for (size_t i = 0; i + 1 < parts.size(); ++i) out << "namespace " << parts[i] << " { ";
  out << f.return_type << " " << parts.back() << "(";
  for (size_t i = 0; i < f.params.size(); ++i) out << (i ? ", " : "") << f.params[i].type;
  out << ");";
  for (size_t i = 0; i + 1 < parts.size(); ++i) out << " }";
  out << "  // defined in " << file << ":" << f.line << "\n";
  return out.str();
}

}  // namespace

std::string emit_cuda_declarations(const std::vector<FunctionSpec>& specs,
                                   const std::vector<SourceText>& cuda_sources) {
  std::string decls;
  for (const FunctionSpec& spec : specs) {
    for (const SourceText& src : cuda_sources) {
      // A macro-generated kernel (`FFI_X(_f32, float)`) is declared like a written one.
      const std::vector<CppFunction> found = find_written_or_generated(src.text, spec.name);
      const CppFunction* def = find_definition(found);
      if (def != nullptr) {
        decls += declaration_of(*def, src.file);
        break;
      }
    }
  }
  if (decls.empty()) return "";
  // CUDA's own spellings of the types such a kernel may take, declared the way
  // the CUDA headers declare them (so mangled names match the device objects).
  return "\n// ---- kernels defined in cuda_sources (compiled by nvcc) ----\n"
         "struct CUstream_st;\ntypedef struct CUstream_st* cudaStream_t;\n"
         "struct __half;\nstruct __nv_bfloat16;\n" +
         decls;
}

}  // namespace kjit
