// Scans C++ source for free functions by name and splits their parameter lists.
#ifndef KJIT_SRC_DECLARE_CPP_SIGNATURE_H_
#define KJIT_SRC_DECLARE_CPP_SIGNATURE_H_

#include <string>
#include <vector>

namespace kjit {

/// One parameter as written in a declaration.
struct CppParam {
  std::string name;  ///< empty when the parameter is unnamed
  std::string
      type;  ///< the whole type, normalised spacing: "const kjit::TensorView&", "const float*", "std::complex<float>"
  std::string base;  ///< type without cv-qualifiers, '&', '&&', '*', restrict: "kjit::TensorView", "float", "unsigned
                     ///< long long", "std::complex<float>"
  bool is_const = false;  ///< const (or volatile const) applies to the base type: pointee for pointers ("const float*",
                          ///< "float const*"), the value otherwise. A top-level const on the pointer itself ("float*
                          ///< const p") does NOT set it.
  int pointer_depth = 0;  ///< number of '*' (an array declarator "float x[]" / "float x[4]" counts as one)
  bool is_reference = false;  ///< '&' or '&&'
  bool has_default = false;   ///< followed by '= default argument'
};

/// A declaration or definition of a free function.
struct CppFunction {
  std::string name;            ///< as searched
  std::string qualified_name;  ///< how code at global scope after the source must call it: "f", "ns::f", "a::b::f"
                               ///< (anonymous namespaces add nothing; inline namespaces are included; "void ns::f(...)
                               ///< {}" gives "ns::f")
  std::string return_type;     ///< normalised text before the name, without storage specifiers/attributes (static,
                               ///< inline, extern "C", constexpr, [[nodiscard]], __attribute__((...)), template<...>):
                               ///< "void", "int64_t", "std::pair<int, int>"; a trailing return type replaces "auto"
  std::vector<CppParam> params;
  bool is_definition = false;  ///< followed by a body '{' (or a function-try-block), not ';' or '= delete'
  bool is_template = false;    ///< preceded by template<...>
  /// The names of its type template parameters in order ("typename T" -> "T"; ""
  /// for an unnamed one); `template_has_value_params` when it also takes non-type
  /// ones ("int N") or a pack, which kjit cannot pick a value for.
  std::vector<std::string> template_type_params;
  bool template_has_value_params = false;
  int line = 0;  ///< 1-based line of the name in `source`
};

/// Every declaration and definition of a free function called `name` at namespace scope
/// (including inside extern "C" { } blocks and namespaces), in source order. Member
/// functions, calls, and uses inside function bodies, class bodies, comments, string
/// literals, raw strings, char literals and preprocessor lines are not matches.
std::vector<CppFunction> find_cpp_functions(const std::string& source, const std::string& name);

/// Every free function declared or defined at namespace scope, in source order.
std::vector<CppFunction> find_all_cpp_functions(const std::string& source);

}  // namespace kjit

#endif  // KJIT_SRC_DECLARE_CPP_SIGNATURE_H_
