// Host-side declarations of the kernels defined in cuda_sources (the CUDA
// runtime calls the stubs make are kjit/detail/cuda_host_prelude.h). The host
// translation unit never includes CUDA headers (they would cost the host compile
// what they cost nvcc).
#include <cctype>
#include <utility>

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

/// The name of template parameter `i` of `f` as declarations write it (an unnamed
/// one gets a name of kjit's own).
std::string template_param_name(const CppFunction& f, size_t i) {
  return f.template_type_params[i].empty() ? "__kjit_t" + std::to_string(i) : f.template_type_params[i];
}

/// `text` with every identifier `name` replaced by `by` ("const T*" -> "const float*").
std::string replace_identifier(const std::string& text, const std::string& name, const std::string& by) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const bool starts = std::isalpha(static_cast<unsigned char>(text[i])) || text[i] == '_';
    if (!starts) {
      out += text[i++];
      continue;
    }
    size_t end = i;
    while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_')) ++end;
    const std::string word = text.substr(i, end - i);
    out += word == name ? by : word;
    i = end;
  }
  return out;
}

/// "namespace a { namespace b { " + `inner` + " } }" for the callee's namespaces.
std::string in_namespaces(const std::string& qualified, const std::string& inner) {
  std::vector<std::string> parts = split_qualified(qualified);
  std::string out;
  for (size_t i = 0; i + 1 < parts.size(); ++i) out += "namespace " + parts[i] + " { ";
  out += inner;
  for (size_t i = 0; i + 1 < parts.size(); ++i) out += " }";
  return out;
}

std::string declaration_of(const CppFunction& f, const std::string& file, bool instantiated) {
  if (f.is_template && !instantiated) {
    throw SpecError("'" + f.name + "' in " + file + ":" + std::to_string(f.line) +
                    " is a function template over no dtype variable of its signature; kjit instantiates a template "
                    "entry point in cuda_sources for the dtypes of its variables (<T: float32|float64> x: T[n] for "
                    "template <typename T>), or call the template from a plain function");
  }
  std::string head;
  if (f.is_template) {
    for (size_t i = 0; i < f.template_type_params.size(); ++i) {
      head += (i ? ", typename " : "template <typename ") + template_param_name(f, i);
    }
    head += "> ";
  }
  std::string decl = head + f.return_type + " " + split_qualified(f.qualified_name).back() + "(";
  for (size_t i = 0; i < f.params.size(); ++i) decl += (i ? ", " : "") + f.params[i].type;
  decl += ");";
  return in_namespaces(f.qualified_name, decl) + "  // defined in " + file + ":" + std::to_string(f.line) + "\n";
}

/// `template RET ns::f<float>(const float*, ...);` for one combination of its dtypes.
std::string instantiation_of(const CppFunction& f, const std::vector<const DTypeInfo*>& combo) {
  auto substituted = [&](std::string text) {
    for (size_t i = 0; i < combo.size(); ++i)
      text = replace_identifier(text, template_param_name(f, i), combo[i]->cpp_type);
    return text;
  };
  std::string out = "template " + substituted(f.return_type) + " " + template_callee(f.qualified_name, combo) + "(";
  for (size_t i = 0; i < f.params.size(); ++i) out += (i ? ", " : "") + substituted(f.params[i].type);
  return out + ");\n";
}

/// The definition `spec` calls in the device sources, and the file it is in.
std::pair<const CppFunction*, std::string> device_definition(const FunctionSpec& spec,
                                                             const std::vector<SourceText>& cuda_sources,
                                                             std::vector<CppFunction>* found) {
  for (const SourceText& src : cuda_sources) {
    // A macro-generated kernel (`FFI_X(_f32, float)`) is declared like a written one.
    *found = find_written_or_generated(src.text, spec.name);
    if (const CppFunction* def = find_definition(*found)) return {def, src.file};
  }
  return {nullptr, ""};
}

}  // namespace

std::string emit_cuda_declarations(const std::vector<FunctionSpec>& specs,
                                   const std::vector<SourceText>& cuda_sources) {
  std::string decls;
  for (const FunctionSpec& spec : specs) {
    std::vector<CppFunction> found;
    const auto [def, file] = device_definition(spec, cuda_sources, &found);
    if (def != nullptr) decls += declaration_of(*def, file, !spec.callee_template_vars.empty());
  }
  if (decls.empty()) return "";
  // CUDA's own spellings of the types such a kernel may take, declared the way
  // the CUDA headers declare them (so mangled names match the device objects).
  return "\n// ---- kernels defined in cuda_sources (compiled by nvcc) ----\n"
         "struct CUstream_st;\ntypedef struct CUstream_st* cudaStream_t;\n"
         "struct __half;\nstruct __nv_bfloat16;\n" +
         decls;
}

std::string emit_cuda_instantiations(const std::vector<FunctionSpec>& specs,
                                     const std::vector<SourceText>& cuda_sources) {
  std::string out;
  for (const FunctionSpec& spec : specs) {
    if (spec.callee_template_vars.empty()) continue;
    std::vector<CppFunction> found;
    const auto [def, file] = device_definition(spec, cuda_sources, &found);
    if (def == nullptr || !def->is_template) continue;
    out += "// " + spec.name + " (" + file + ":" + std::to_string(def->line) + "), for each dtype of its variables\n";
    for (const auto& combo : template_instantiations(spec)) out += instantiation_of(*def, combo);
  }
  return out.empty() ? "" : "\n// ---- instantiations the host stubs call ----\n" + out;
}

}  // namespace kjit
