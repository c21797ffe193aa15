// Declarations -> specs: the signature string, arg_spec tokens, or the C++
// definition alone, each checked against what the C++ source actually says.
#include <algorithm>
#include <set>

#include "declare/arg_spec.h"
#include "declare/cpp_signature.h"
#include "declare/cpp_types.h"
#include "declare/macro_expansion.h"
#include "kjit/declare.h"
#include "kjit/errors.h"
#include "support/closest_name.h"

namespace kjit {
namespace {

/// The C++ function a declaration refers to, or why there is none to use.
struct Located {
  CppFunction fn;
  std::string file;
  bool cuda = false;  ///< defined in device code
  bool found = false;
  bool missing = false;  ///< no source declares it at all
  std::string problem;

  std::string where() const { return file + ":" + std::to_string(fn.line); }
};

std::string list_locations(const std::vector<std::pair<std::string, CppFunction>>& found) {
  std::string out;
  for (const auto& [file, fn] : found)
    out += (out.empty() ? "" : ", ") + fn.qualified_name + " at " + file + ":" + std::to_string(fn.line);
  return out;
}

/// What the annotation's own line says about a function kjit could not find: the
/// macro call after it and why that generates no `name`.
std::string annotation_hint(const std::vector<SourceText>& sources, const FunctionDecl& decl) {
  if (decl.annotation_line <= 0) return "";
  for (const SourceText& src : sources) {
    if (src.file != decl.annotation_file) continue;
    std::string why = explain_macro_annotation(src.text, decl.annotation_line, decl.name);
    if (!why.empty()) return "; " + why;
  }
  return "";
}

Located locate(const std::vector<SourceText>& sources, const FunctionDecl& decl) {
  const std::string& name = decl.name;
  std::vector<std::pair<std::string, CppFunction>> all, defs;
  std::set<std::string> cuda_files;
  std::set<std::string> qualified;
  std::string files;
  for (const SourceText& src : sources) {
    files += (files.empty() ? "" : ", ") + src.file;
    if (src.cuda) cuda_files.insert(src.file);
    for (CppFunction& fn : find_written_or_generated(src.text, name)) {
      qualified.insert(fn.qualified_name);
      if (fn.is_definition) defs.emplace_back(src.file, fn);
      all.emplace_back(src.file, std::move(fn));
    }
  }
  Located out;
  if (all.empty()) {
    out.missing = true;
    out.problem = "no definition of '" + name + "' was found in " + (files.empty() ? "the sources" : files) +
                  " (kjit looks for a free function 'RET " + name + "(...)' at namespace scope)" +
                  annotation_hint(sources, decl);
  } else if (qualified.size() > 1) {
    out.problem = "'" + name + "' names different functions (" + list_locations(all) + "); kjit cannot choose";
  } else if (defs.size() > 1) {
    out.problem = "'" + name + "' is defined " + std::to_string(defs.size()) + " times (" + list_locations(defs) +
                  "): overloads cannot share one exported name";
  } else {
    // The definition wins over forward declarations; else the last declaration.
    const auto& pick = defs.empty() ? all.back() : defs.front();
    out.file = pick.first;
    out.fn = pick.second;
    out.cuda = cuda_files.count(pick.first) > 0;
    out.found = true;
  }
  return out;
}

std::string cpp_param_names(const CppFunction& fn) {
  std::string out;
  for (const CppParam& p : fn.params) out += (out.empty() ? "" : ", ") + (p.name.empty() ? "<unnamed>" : p.name);
  return out.empty() ? "none" : out;
}

const char* role_text(CppRole::Kind k) {
  switch (k) {
    case CppRole::Kind::kTensor:
      return "a tensor";
    case CppRole::Kind::kScalar:
      return "a scalar";
    case CppRole::Kind::kStream:
      return "a stream";
    case CppRole::Kind::kUnmapped:
      break;
  }
  return "a type kjit cannot map";
}

Param tensor_param(const std::string& name, bool out, const DTypeInfo* dtype, DeviceKind device) {
  Param p;
  p.name = name;
  p.kind = ParamKind::kTensor;
  p.tensor.any_rank = true;
  p.tensor.out = out;
  p.tensor.device = device;
  if (dtype != nullptr) p.tensor.dtypes.push_back(*dtype);
  return p;
}

Param scalar_param(const std::string& name, ScalarType type) {
  Param p;
  p.name = name;
  p.kind = ParamKind::kScalar;
  p.scalar = type;
  return p;
}

Param stream_param(const std::string& name) {
  Param p;
  p.name = name;
  p.kind = ParamKind::kStream;
  return p;
}

/// The dtypes a template parameter inferred as a dtype variable takes: the kernel is
/// instantiated for each, so the default stays small; a signature lists others.
constexpr const char* kInferredVarDtypes[] = {"float32", "float64"};

/// The type template parameter of `fn` that C++ parameter `cp` is typed by, as an
/// element type (`const T* x`, `T* y`) or a scalar (`T alpha`, `const T& alpha`); "".
std::string template_param_of(const CppParam& cp, const CppFunction& fn) {
  if (!fn.is_template || cp.pointer_depth > 1 || (cp.pointer_depth == 0 && cp.is_reference && !cp.is_const)) return "";
  for (const std::string& t : fn.template_type_params) {
    if (!t.empty() && cp.base == t) return t;
  }
  return "";
}

/// Dtype variable `name` of the spec, declared with the inferred alternatives on first use.
const DTypeVar& inferred_dtype_var(FunctionSpec* spec, const std::string& name) {
  if (const DTypeVar* v = spec->find_dtype_var(name)) return *v;
  DTypeVar v;
  v.name = name;
  for (const char* d : kInferredVarDtypes) v.dtypes.push_back(*find_dtype(d));
  spec->dtype_vars.push_back(std::move(v));
  return spec->dtype_vars.back();
}

/// A parameter typed by template parameter `var`: a tensor of dtype variable `var`
/// (a pointer), or a scalar converted to the dtype `var` is bound to.
/// `out`: the tensor's direction (a non-const pointer when inferred; the token's).
Param typed_by_var(FunctionSpec* spec, const std::string& var, const std::string& name, const CppParam& cp, bool out,
                   DeviceKind device) {
  const DTypeVar& v = inferred_dtype_var(spec, var);
  if (cp.pointer_depth == 1) {
    Param p = tensor_param(name, out, nullptr, device);
    p.tensor.dtype_var = v.name;
    p.tensor.dtypes = v.dtypes;
    return p;
  }
  Param p = scalar_param(name, ScalarType::kFloat64);  // read as a float: every alternative is floating
  p.scalar_var = v.name;
  return p;
}

/// A template kernel without a signature whose type parameters type its tensors
/// (`const T* x`): each must type one, which binds it in a call, and none may be a
/// value or a pack. (A template typing none is left to C++'s deduction, as before.)
void check_template_inferable(const FunctionSpec& spec, const CppFunction& fn, const std::string& where) {
  if (!fn.is_template) return;
  const std::string fix = "; give a signature (<T: float32|float64> x: T[n], ...) to say which dtypes to instantiate";
  if (fn.template_has_value_params) {
    throw SpecError("cannot infer the spec of " + where +
                    ": it is a template over a value or a pack, which kjit cannot choose; declare a plain function "
                    "that calls the instantiations you need");
  }
  for (const std::string& t : fn.template_type_params) {
    bool bound = false;
    for (const Param& p : spec.params) bound = bound || (p.kind == ParamKind::kTensor && p.tensor.dtype_var == t);
    if (!bound) {
      throw SpecError("cannot infer the spec of " + where + ": template parameter " + (t.empty() ? "#?" : t) +
                      " types no tensor parameter (const " + t + "* x, " + t +
                      "* y), so no call could tell which instantiation to run" + fix);
    }
  }
}

std::vector<std::string> template_dispatch(const FunctionSpec& spec, const Located& cpp);

class TokenSpecBuilder {
 public:
  TokenSpecBuilder(const FunctionDecl& decl, const Located& cpp, DeviceKind device)
      : decl_(decl), cpp_(cpp), device_(device), where_("arg_spec of '" + decl.name + "' (" + decl.origin + ")") {}

  FunctionSpec build() {
    std::vector<ArgToken> tokens = parse_arg_spec(where_, decl_.tokens);
    check_arity(tokens);
    FunctionSpec spec;
    spec.name = decl_.name;
    if (cpp_.found) spec.callee = cpp_.fn.qualified_name;
    int n_args = 0, n_rets = 0;
    for (size_t i = 0; i < tokens.size(); ++i) {
      const ArgToken& t = tokens[i];
      const CppParam* cp = cpp_.found ? &cpp_.fn.params[i] : nullptr;
      std::optional<CppRole> role;
      if (cp != nullptr) role = classify_cpp_param(*cp);
      switch (t.kind) {
        case ArgToken::Kind::kArg:
        case ArgToken::Kind::kRet: {
          bool out = t.kind == ArgToken::Kind::kRet;
          const std::string var = cp != nullptr && cp->pointer_depth == 1 ? template_param_of(*cp, cpp_.fn) : "";
          if (role && var.empty()) expect_role(i, t, *cp, *role, CppRole::Kind::kTensor);
          if (out && cp != nullptr && cp->pointer_depth == 1 && cp->is_const) expect_writable(i, t, *cp);
          std::string fallback = out ? "ret" + std::to_string(n_rets) : "arg" + std::to_string(n_args);
          (out ? n_rets : n_args)++;
          const std::string name = cp && !cp->name.empty() ? cp->name : fallback;
          // `const T* x` of a template: a tensor of dtype variable T
          spec.params.push_back(var.empty() ? tensor_param(name, out, role ? role->dtype : nullptr, device_)
                                            : typed_by_var(&spec, var, name, *cp, out, device_));
          break;
        }
        case ArgToken::Kind::kStream:
          if (role && !(role->kind == CppRole::Kind::kScalar && is_integer(role->scalar)))
            expect_role(i, t, *cp, *role, CppRole::Kind::kStream);
          spec.params.push_back(stream_param(cp && !cp->name.empty() ? cp->name : "stream"));
          break;
        case ArgToken::Kind::kAttr:
          if (cp != nullptr && !t.attr_type && cp->pointer_depth == 0 && !template_param_of(*cp, cpp_.fn).empty()) {
            check_attr_name(i, t, *cp);  // `T alpha`: converted to the dtype T is bound to
            spec.params.push_back(
                typed_by_var(&spec, template_param_of(*cp, cpp_.fn), t.attr_name, *cp, false, device_));
            break;
          }
          if (role) expect_role(i, t, *cp, *role, CppRole::Kind::kScalar);
          if (cp != nullptr && t.attr_type) check_attr_name(i, t, *cp);  // a bare attr is looked up by name
          if (role && t.attr_type) check_attr_type(i, t, *cp, role->scalar);
          spec.params.push_back(scalar_param(t.attr_name, t.attr_type ? *t.attr_type : attr_type_from_cpp(t)));
          break;
      }
    }
    if (!spec.dtype_vars.empty()) {
      check_template_inferable(spec, cpp_.fn, where_);
      spec.callee_template_vars = template_dispatch(spec, cpp_);
    }
    validate(spec);
    return spec;
  }

 private:
  /// `ret` on `const T* x`: the kernel cannot write what the token says it returns.
  [[noreturn]] void expect_writable(size_t i, const ArgToken& t, const CppParam& cp) const {
    throw SpecError(where_ + ": token #" + std::to_string(i) + " '" + t.written +
                    "' declares an output, but C++ parameter #" + std::to_string(i) + " '" + describe_cpp_param(cp) +
                    "' at " + cpp_.where() +
                    " points to const data the kernel cannot write; drop the const or use 'arg'");
  }

  void check_arity(const std::vector<ArgToken>& tokens) const {
    bool bare_attr = false;
    for (const ArgToken& t : tokens) bare_attr = bare_attr || (t.kind == ArgToken::Kind::kAttr && !t.attr_type);
    if (!cpp_.found && bare_attr) {
      throw SpecError(where_ + ": a bare 'attr.<name>' takes its type from the C++ definition, but " + cpp_.problem +
                      "; write 'attr.<name>:<type>' instead");
    }
    // Without the C++ function kjit could neither check the tokens nor declare
    // the kernel for the stub to call: say so now, not as a compile error later.
    if (!cpp_.found) throw SpecError(where_ + ": " + cpp_.problem);
    if (cpp_.found && cpp_.fn.params.size() != tokens.size()) {
      throw SpecError(where_ + ": " + std::to_string(tokens.size()) + " tokens, but the C++ definition at " +
                      cpp_.where() + " has " + std::to_string(cpp_.fn.params.size()) + " parameters (" +
                      cpp_param_names(cpp_.fn) + "); there is one token per parameter, in order");
    }
  }

  void expect_role(size_t i, const ArgToken& t, const CppParam& cp, const CppRole& role, CppRole::Kind expected) const {
    if (role.kind == expected) return;
    std::string why = role.kind == CppRole::Kind::kUnmapped ? " (" + role.problem + ")" : "";
    throw SpecError(where_ + ": token #" + std::to_string(i) + " '" + t.written + "' declares " + role_text(expected) +
                    ", but C++ parameter #" + std::to_string(i) + " '" + describe_cpp_param(cp) + "' at " +
                    cpp_.where() + " is " + role_text(role.kind) + why);
  }

  /// An attr is passed by name: the token's name must be the parameter's, or the
  /// caller's `alpha=` would fill a parameter the kernel calls something else.
  void check_attr_name(size_t i, const ArgToken& t, const CppParam& cp) const {
    if (cp.name.empty() || cp.name == t.attr_name) return;
    bool elsewhere = false;
    for (const CppParam& other : cpp_.fn.params) elsewhere = elsewhere || other.name == t.attr_name;
    throw SpecError(where_ + ": token #" + std::to_string(i) + " '" + t.written + "' names attr '" + t.attr_name +
                    "', but C++ parameter #" + std::to_string(i) + " at " + cpp_.where() + " is '" +
                    describe_cpp_param(cp) + "'" +
                    (elsewhere ? "; '" + t.attr_name + "' is another parameter (tokens follow the parameters' order)"
                               : "; the definition has no parameter '" + t.attr_name + "'") +
                    " (its parameters are: " + cpp_param_names(cpp_.fn) + ")");
  }

  /// An explicit attr type must be what the parameter takes, or the value would be
  /// converted silently (int64 into int32_t, 1.5 into int); 16-bit floats arrive
  /// as raw bits, so their parameter is a 16-bit integer.
  void check_attr_type(size_t i, const ArgToken& t, const CppParam& cp, ScalarType param) const {
    ScalarType declared = *t.attr_type;
    bool raw_bits = declared == ScalarType::kFloat16 || declared == ScalarType::kBFloat16;
    if (declared == param || (raw_bits && (param == ScalarType::kUInt16 || param == ScalarType::kInt16))) return;
    std::string hint = raw_bits
                           ? std::string("; ") + scalar_type_name(declared) +
                                 " attrs reach the kernel as uint16_t raw bits, so declare 'uint16_t " + cp.name + "'"
                           : "; write 'attr." + t.attr_name + ":" + scalar_type_name(param) + "' (or a bare 'attr." +
                                 t.attr_name + "')";
    throw SpecError(where_ + ": token #" + std::to_string(i) + " '" + t.written + "' declares a " +
                    scalar_type_name(declared) + " attr, but C++ parameter #" + std::to_string(i) + " '" +
                    describe_cpp_param(cp) + "' at " + cpp_.where() + " takes " + scalar_type_name(param) + hint);
  }

  ScalarType attr_type_from_cpp(const ArgToken& t) const {
    for (const CppParam& cp : cpp_.fn.params) {
      if (cp.name != t.attr_name) continue;
      CppRole role = classify_cpp_param(cp);
      if (role.kind != CppRole::Kind::kScalar) {
        throw SpecError(where_ + ": cannot map C++ type '" + cp.type + "' of parameter '" + cp.name + "' in '" +
                        decl_.name + "' (" + cpp_.where() + ") to an attr type" +
                        (role.kind == CppRole::Kind::kUnmapped ? ": " + role.problem
                                                               : " (it is " + std::string(role_text(role.kind)) + ")") +
                        "; write 'attr." + t.attr_name + ":<type>' with one of: " + known_scalar_names());
      }
      return role.scalar;
    }
    throw SpecError(where_ + ": parameter '" + t.attr_name + "' (from '" + t.written + "') not found in the C++ " +
                    "signature of '" + decl_.name + "' at " + cpp_.where() +
                    "; its parameters are: " + cpp_param_names(cpp_.fn));
  }

  const FunctionDecl& decl_;
  const Located& cpp_;
  DeviceKind device_;
  std::string where_;
};

FunctionSpec spec_from_cpp(const FunctionDecl& decl, const Located& cpp, DeviceKind device) {
  if (!cpp.found) {
    throw SpecError("cannot infer the spec of '" + decl.name + "' (" + decl.origin + "): " + cpp.problem +
                    ". Give arg_spec tokens or a signature string instead");
  }
  std::string where = "'" + decl.name + "' (" + cpp.where() + ")";
  FunctionSpec spec;
  spec.name = decl.name;
  spec.callee = cpp.fn.qualified_name;
  bool any_tensor = false, any_out = false;
  for (size_t i = 0; i < cpp.fn.params.size(); ++i) {
    const CppParam& cp = cpp.fn.params[i];
    std::string name = cp.name.empty() ? "arg" + std::to_string(i) : cp.name;
    const std::string var = template_param_of(cp, cpp.fn);
    if (!var.empty()) {
      if (cp.pointer_depth == 0 && cp.name.empty()) {
        throw SpecError("parameter #" + std::to_string(i) + " '" + cp.type + "' of " + where +
                        " has no name; an attr is passed by name, so name it");
      }
      spec.params.push_back(typed_by_var(&spec, var, name, cp, !cp.is_const, device));
      any_tensor = any_tensor || cp.pointer_depth == 1;
      any_out = any_out || (cp.pointer_depth == 1 && !cp.is_const);
      continue;
    }
    CppRole role = classify_cpp_param(cp);
    switch (role.kind) {
      case CppRole::Kind::kUnmapped:
        throw SpecError("cannot map C++ type '" + cp.type + "' of parameter '" + name + "' (#" + std::to_string(i) +
                        ") in " + where + " to a kjit type: " + role.problem +
                        ". Or declare the function with arg_spec tokens or a signature string");
      case CppRole::Kind::kTensor:
        any_tensor = true;
        any_out = any_out || role.out;
        spec.params.push_back(tensor_param(name, role.out, role.dtype, device));
        break;
      case CppRole::Kind::kScalar:
        if (cp.name.empty()) {
          throw SpecError("parameter #" + std::to_string(i) + " '" + cp.type + "' of " + where +
                          " has no name; an attr is passed by name, so name it");
        }
        spec.params.push_back(scalar_param(name, role.scalar));
        break;
      case CppRole::Kind::kStream:
        spec.params.push_back(stream_param(name));
        break;
    }
  }
  // A function without tensors (int add(int, int)) or one that returns its result
  // (tvm::ffi::Tensor f(const ...)) needs no output tensor; a void one whose
  // tensors are all const would write nothing.
  bool returns = !cpp.fn.return_type.empty() && cpp.fn.return_type != "void";
  if (any_tensor && !any_out && !returns) {
    throw SpecError("No non-const tensor output found in " + where +
                    ". Mark input tensors 'const' to tell them from outputs, or use the explicit form: "
                    "functions={'" +
                    decl.name + "': ['arg', 'ret', ...]}");
  }
  if (!spec.dtype_vars.empty()) {
    check_template_inferable(spec, cpp.fn, where);
    spec.callee_template_vars = template_dispatch(spec, cpp);
  }
  validate(spec);
  return spec;
}

/// A symbol scalar ("n: int64 symbol") goes to the C++ parameter of its name: the
/// definition's parameter in its place must be called that.
void check_symbol_names(const FunctionSpec& spec, const Located& cpp) {
  if (!cpp.found || cpp.fn.params.size() != spec.params.size()) return;  // the compiler names a count mismatch
  for (size_t i = 0; i < spec.params.size(); ++i) {
    const Param& p = spec.params[i];
    const CppParam& cp = cpp.fn.params[i];
    if (!p.symbol || cp.name.empty() || cp.name == p.name) continue;
    throw SpecError("signature of '" + spec.name + "': parameter #" + std::to_string(i) + " '" + to_string(p) +
                    "' passes symbol '" + p.name + "' to C++ parameter #" + std::to_string(i) + " '" + cp.type + " " +
                    cp.name + "' of " + cpp.fn.qualified_name + " at " + cpp.where() +
                    "; a symbol goes to the parameter of its name: rename the C++ parameter to '" + p.name +
                    "', or name the symbol '" + cp.name + "' in the spec's shapes");
  }
}

/// What a scalar type is for the signature check: types of one family convert
/// into each other as the kernel means; across families the value changes meaning.
enum class ScalarFamily { kBool, kInteger, kFloat, kComplex, kText };

ScalarFamily family_of(ScalarType t) {
  if (t == ScalarType::kBool) return ScalarFamily::kBool;
  if (is_integer(t)) return ScalarFamily::kInteger;
  if (is_float(t)) return ScalarFamily::kFloat;
  if (is_complex(t)) return ScalarFamily::kComplex;
  return ScalarFamily::kText;
}

/// A signature against the C++ definition kjit found for it: one C++ parameter per
/// spec parameter, in order (trailing C++ defaults may be left out), each of the
/// spec's kind (tensor, scalar, stream), a scalar of the same family (integer,
/// floating, complex, text: float16/bfloat16 also as uint16_t raw bits), an
/// output not a pointer to const or a const kjit::TensorView. The compiler would
/// otherwise reject the generated call, or convert a value the kernel reads as
/// something else; this names both sides. Types kjit cannot map are left to it.
/// The most instantiations one template kernel may ask for (the product of its
/// dtype variables' alternatives): each is compiled, so compile time grows with it.
constexpr size_t kMaxInstantiations = 16;

/// A definition `template <typename T, ...>` whose type parameters are dtype variables
/// of the signature: the stub dispatches over them (FunctionSpec::callee_template_vars).
/// A template over none of them is left to C++'s deduction, as before.
std::vector<std::string> template_dispatch(const FunctionSpec& spec, const Located& cpp) {
  const CppFunction& fn = cpp.fn;
  if (!fn.is_template) return {};
  std::vector<std::string> vars;
  for (const std::string& t : fn.template_type_params) {
    if (spec.find_dtype_var(t) != nullptr) vars.push_back(t);
  }
  if (vars.empty()) return {};
  const std::string where = "signature of '" + spec.name + "': " + fn.qualified_name + " at " + cpp.where();
  if (fn.template_has_value_params || vars.size() != fn.template_type_params.size()) {
    throw SpecError(where + " is a template over dtype variable " + vars[0] +
                    ", so kjit instantiates it for the bound dtypes; every template parameter must then be a dtype "
                    "variable of the signature (typename T for <T: ...>), not a value, a pack or another type");
  }
  size_t count = 1;
  for (const std::string& v : vars) {
    for (const DTypeInfo& d : spec.find_dtype_var(v)->dtypes) {
      if (d.cpp_type == nullptr) {
        throw SpecError(where + " is instantiated for each dtype of " + v + ", but " + d.name +
                        " has no C++ type in kernels (bool, the integer types, float32 and float64 have); dispatch "
                        "on x.dtype() in a plain function for it");
      }
    }
    const std::vector<DTypeInfo>& ds = spec.find_dtype_var(v)->dtypes;
    const bool has_bool = std::any_of(ds.begin(), ds.end(), [](const DTypeInfo& d) { return d.dl.code == kDLBool; });
    const bool has_byte = std::any_of(ds.begin(), ds.end(), [](const DTypeInfo& d) {
      return (d.dl.code == kDLInt || d.dl.code == kDLUInt) && d.dl.bits == 8;
    });
    if (has_bool && has_byte) {
      throw SpecError(where + " is instantiated for each dtype of " + v + ", but " + v +
                      " lists bool with an 8-bit integer type, and a bool tensor may arrive as int8/uint8 bytes: "
                      "which instantiation to call would be ambiguous; give them separate functions");
    }
    count *= ds.size();
  }
  if (count > kMaxInstantiations) {
    throw SpecError(where + " would be instantiated " + std::to_string(count) + " times (the product of " +
                    std::to_string(vars.size()) + " dtype variables' alternatives), more than kjit's limit of " +
                    std::to_string(kMaxInstantiations) + "; list fewer dtypes");
  }
  return vars;
}

void check_signature_against_cpp(const FunctionSpec& spec, const Located& cpp) {
  const std::string where = "signature of '" + spec.name + "'";
  const std::vector<CppParam>& cps = cpp.fn.params;
  size_t required = cps.size();
  while (required > 0 && cps[required - 1].has_default) --required;
  if (spec.params.size() < required || spec.params.size() > cps.size()) {
    const std::string takes = required == cps.size() ? std::to_string(cps.size())
                                                     : std::to_string(required) + " to " + std::to_string(cps.size());
    throw SpecError(where + ": " + std::to_string(spec.params.size()) + " parameters, but " + cpp.fn.qualified_name +
                    " at " + cpp.where() + " takes " + takes + " (" + cpp_param_names(cpp.fn) +
                    "); the signature lists the C++ parameters in order");
  }
  for (size_t i = 0; i < spec.params.size(); ++i) {
    const Param& p = spec.params[i];
    const CppParam& cp = cps[i];
    const CppRole role = classify_cpp_param(cp);
    if (role.kind == CppRole::Kind::kUnmapped) continue;
    const std::string ours = "parameter #" + std::to_string(i) + " '" + to_string(p) + "'";
    const std::string theirs = "C++ parameter #" + std::to_string(i) + " '" + describe_cpp_param(cp) + "' of " +
                               cpp.fn.qualified_name + " at " + cpp.where();
    const CppRole::Kind expected = p.kind == ParamKind::kTensor   ? CppRole::Kind::kTensor
                                   : p.kind == ParamKind::kStream ? CppRole::Kind::kStream
                                                                  : CppRole::Kind::kScalar;
    // A stream may reach the kernel as a pointer or an integer handle too.
    const bool stream_as_handle =
        expected == CppRole::Kind::kStream && ((role.kind == CppRole::Kind::kScalar && is_integer(role.scalar)) ||
                                               (role.kind == CppRole::Kind::kTensor && cp.pointer_depth >= 1));
    if (role.kind != expected && !stream_as_handle) {
      throw SpecError(where + ": " + ours + " is " + role_text(expected) + ", but " + theirs + " is " +
                      role_text(role.kind) + "; the signature lists the C++ parameters in order");
    }
    if (expected == CppRole::Kind::kTensor && p.tensor.out &&
        ((cp.pointer_depth == 1 && cp.is_const) || (cp.pointer_depth == 0 && cp.is_const && !role.out &&
                                                    (cp.base == "kjit::TensorView" || cp.base == "TensorView")))) {
      throw SpecError(where + ": " + ours + " is an output, but " + theirs +
                      " is read-only to the kernel; drop the const, or drop 'out' if the kernel only reads it");
    }
    // A symbol's C++ type gets its own check, at compile time (a static_assert).
    if (expected == CppRole::Kind::kScalar && !p.symbol && family_of(p.scalar) != family_of(role.scalar)) {
      const bool raw_bits = (p.scalar == ScalarType::kFloat16 || p.scalar == ScalarType::kBFloat16) &&
                            (role.scalar == ScalarType::kUInt16 || role.scalar == ScalarType::kInt16);
      if (!raw_bits) {
        throw SpecError(where + ": " + ours + " is " + scalar_type_name(p.scalar) + ", but " + theirs + " takes " +
                        scalar_type_name(role.scalar) + "; declare '" + p.name + ": " + scalar_type_name(role.scalar) +
                        "' or change the C++ type");
      }
    }
  }
}

}  // namespace

std::vector<SourceText> label_sources(const std::vector<std::string>& texts, const std::string& what, bool cuda,
                                      const std::vector<std::string>& files) {
  std::vector<SourceText> out;
  for (size_t i = 0; i < texts.size(); ++i) {
    std::string label = texts.size() == 1 ? what : what + "[" + std::to_string(i) + "]";
    if (i < files.size() && !files[i].empty()) label = files[i];
    out.push_back({label, texts[i], cuda});
  }
  return out;
}

std::vector<FunctionSpec> resolve_module_functions(const std::vector<std::string>& cpp_sources,
                                                   const std::vector<std::string>& cuda_sources,
                                                   const std::vector<FunctionDecl>& decls, const SourceFiles& files) {
  std::vector<SourceText> sources = label_sources(cpp_sources, "cpp_sources", false, files.cpp);
  std::vector<SourceText> cuda = label_sources(cuda_sources, "cuda_sources", true, files.cuda);
  sources.insert(sources.end(), cuda.begin(), cuda.end());
  DeviceKind fallback = cpp_sources.empty() && !cuda_sources.empty() ? DeviceKind::kCUDA : DeviceKind::kCPU;
  return resolve_functions(decls.empty() ? read_annotations(sources) : decls, sources, fallback);
}

/// A signature's function that no source declares, where a source defines one of a
/// name close to it (rms_norm and rmsnorm): one of the two is misspelt, and the
/// build would fail with a compile error in the generated code. A function the
/// sources do not mention at all may come from a header: the compiler decides.
void check_not_misspelt(const FunctionDecl& decl, const std::vector<SourceText>& sources) {
  std::vector<std::string> names, where;
  std::string files;
  for (const SourceText& src : sources) {
    files += (files.empty() ? "" : ", ") + src.file;
    for (const CppFunction& fn : find_all_cpp_functions(src.text)) {
      if (!fn.is_definition) continue;
      names.push_back(fn.name);
      where.push_back(src.file + ":" + std::to_string(fn.line));
    }
  }
  const std::string best = closest_name(decl.name, names);
  if (best.empty()) return;
  const size_t k = static_cast<size_t>(std::find(names.begin(), names.end(), best) - names.begin());
  throw SpecError("functions: '" + decl.name + "' is not defined in " + files + " (did you mean '" + best +
                  "', defined at " + where[k] + "?); the exported name is the C++ function's: declare '" + best +
                  "', or rename the function");
}

/// "backward=g" names another declared function of the module.
void check_backward_names(const std::vector<FunctionDecl>& decls) {
  for (const FunctionDecl& d : decls) {
    if (d.backward.empty()) continue;
    const bool declared =
        std::any_of(decls.begin(), decls.end(), [&](const FunctionDecl& g) { return g.name == d.backward; });
    if (d.backward == d.name) {
      throw SpecError(d.origin + ": backward=" + d.backward + " names '" + d.name +
                      "' itself; its backward is another function of the module, declared with its own // @kjit line");
    }
    if (!declared) {
      throw SpecError(d.origin + ": backward=" + d.backward + " names no declared function of the module; declare " +
                      d.backward + " (the function computing the gradients of '" + d.name +
                      "') with its own // @kjit line");
    }
  }
}

std::vector<FunctionSpec> resolve_functions(const std::vector<FunctionDecl>& decls,
                                            const std::vector<SourceText>& sources, DeviceKind default_device) {
  std::vector<FunctionSpec> specs;
  for (const FunctionDecl& decl : decls) {
    Located cpp = locate(sources, decl);
    DeviceKind device = cpp.found && cpp.cuda ? DeviceKind::kCUDA : default_device;
    switch (decl.form) {
      case FunctionDecl::Form::kSignature: {
        if (cpp.missing) check_not_misspelt(decl, sources);
        FunctionSpec spec = parse_signature(decl.name, decl.signature, device);
        if (cpp.found) {
          spec.callee = cpp.fn.qualified_name;
          spec.callee_template_vars = template_dispatch(spec, cpp);
          check_signature_against_cpp(spec, cpp);
        }
        check_symbol_names(spec, cpp);
        specs.push_back(std::move(spec));
        break;
      }
      case FunctionDecl::Form::kTokens:
        specs.push_back(TokenSpecBuilder(decl, cpp, device).build());
        break;
      case FunctionDecl::Form::kInfer:
        specs.push_back(spec_from_cpp(decl, cpp, device));
        break;
    }
    // Device code's tensors are @cuda unless written otherwise; say so in the
    // canonical text, which must not depend on where the function was found.
    if (cpp.found && cpp.cuda) {
      for (Param& p : specs.back().params) {
        if (p.kind == ParamKind::kTensor) p.tensor.device_given = true;
      }
    }
    specs.back().backward = decl.backward;
  }
  check_backward_names(decls);
  return specs;
}

}  // namespace kjit
