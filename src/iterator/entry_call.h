// How a generated elementwise kernel reaches the user's entry function. The
// computation string is compiled inside its own namespace and the entry is called
// qualified, as JITerator calls it (`name<compute type>(...)`): no name of the
// generated loop can hide it and no <cmath>/<cstdlib> overload can win over it.
// One generated function (`__kjit_apply`) calls it in either form: results
// returned (one value, or a tuple-like or aggregate for several outputs) or
// written through trailing `T&` parameters.
#ifndef KJIT_SRC_ITERATOR_ENTRY_CALL_H_
#define KJIT_SRC_ITERATOR_ENTRY_CALL_H_

#include <cstddef>
#include <string>
#include <vector>

namespace kjit {
namespace iterator {

/// The namespace the computation string is compiled in.
inline constexpr const char* kUserNamespace = "kjit_user_code";

/// The computation string inside namespace kjit_user_code, lines numbered as in
/// the string (file "code"). Each `#include` line is left at global scope: the
/// namespace closes before it and reopens after.
std::string wrap_user_code(const std::string& code);

/// How many arguments an entry function takes, read from its definitions.
/// Unknown (no check; the compiler decides) for a parameter pack, for overloads
/// that disagree, or when no definition is found.
struct EntryArity {
  bool known = false;
  size_t least = 0, most = 0;         ///< parameters without a default argument; all parameters
  bool outputs_by_reference = false;  ///< it returns void: its last parameters are outputs
  std::string params;                 ///< "a, b": the parameters' names, for messages
};
EntryArity entry_arity(const std::string& code, const std::string& entry);

/// The name of the last function the code defines (kjit.elementwise's and
/// kjit.reduction's default entry); "" when it defines none.
std::string last_definition(const std::string& code);

/// How generated code calls the entry: "::kjit_user_code::ns::f<compute>" for a
/// function template (JITerator's call), "::kjit_user_code::ns::f" otherwise.
/// `compute` is the compute type's spelling in the generated source.
std::string entry_callee(const std::string& code, const std::string& entry, const std::string& compute);

/// Source of `template <class... A> void __kjit_apply(R0& r0, R1& r1, ..., A... a)`,
/// which calls `callee(a...)` and leaves its results in r0, r1, ...: by return when
/// the entry returns a value for those arguments, else through trailing reference
/// arguments. `results` spells each output's type (the compute type, or the type
/// the entry declares for it); `fn_attrs` prefixes the function ("inline" on the
/// CPU, "__device__ __forceinline__" on CUDA) and `decl_attrs` the unevaluated
/// helper ("", "__device__"). Needs no header.
std::string entry_apply(const std::string& callee, const std::vector<std::string>& results, const std::string& fn_attrs,
                        const std::string& decl_attrs);

}  // namespace iterator
}  // namespace kjit

#endif  // KJIT_SRC_ITERATOR_ENTRY_CALL_H_
