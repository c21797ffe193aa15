// What an entry function returns: the dtype its definition declares, or, where
// the code leaves the type to the compiler (`auto`, `decltype(...)`, an alias),
// the dtype the compiler deduces for a compute type, read from a small probe
// library. The elementwise engine and the reductions type their outputs by it.
#ifndef KJIT_SRC_CPU_RETURNED_TYPE_H_
#define KJIT_SRC_CPU_RETURNED_TYPE_H_

#include <optional>
#include <string>
#include <vector>

#include "kjit/elementwise.h"

namespace kjit {
namespace cpu {

/// The dtype a C++ type names when it is a concrete arithmetic type ("bool",
/// "const float", "std::complex<double>", "int64_t"); nullopt for anything else (a
/// template parameter, auto, a user type).
std::optional<EwType> dtype_of_cpp_type(std::string t);

/// How the entry's definitions type what they return: one concrete dtype
/// (`declared`), left to the compiler (`deduced`: auto, decltype, an alias, a
/// dependent type; not a template parameter itself, which is the compute type), or
/// neither (void, the template parameter, no definition found, or overloads that disagree).
struct EntryReturn {
  std::optional<EwType> declared;
  bool deduced = false;
};
EntryReturn entry_return(const std::string& code, const std::string& entry);

/// What to ask the compiler: the entry called with `args` (C++ spellings of lvalue
/// argument types; `__C` is the compute type) and then the fewest extra scalars, up
/// to `max_extras`, that make the call valid (each converts to its parameter's type).
struct ReturnedTypeQuery {
  std::string code;   ///< the computation string
  std::string entry;  ///< the function called
  EwType compute = EwType::kFloat32;
  std::vector<std::string> args;
  int max_extras = 0;
  std::string cache_dir;  ///< empty: default_cache_dir()
  bool verbose = false;
  std::string what;   ///< "kjit.elementwise 'mag'": names the probe in errors
  std::string lines;  ///< what a compiler's "code:N" line numbers count
};

/// The dtype the entry returns for the query's arguments; nullopt when that is not
/// one of the engine's types (a user type, void) or no call is valid (the kernel's
/// own compile then reports it). Compiles (or finds in the cache) a probe library;
/// throws CompileError when the code does not compile.
std::optional<EwType> returned_type(const ReturnedTypeQuery& query);

/// An output's own dtype from what the entry returns when computing in `compute`:
/// nullopt when that is the compute type, or the `int` that C++'s integral
/// promotion makes of narrower integer and bool arithmetic (`a + b` of int8 is an
/// int, NumPy's and torch's loops keep int8).
std::optional<EwType> own_type_of_returned(EwType compute, std::optional<EwType> returned);

}  // namespace cpu
}  // namespace kjit

#endif  // KJIT_SRC_CPU_RETURNED_TYPE_H_
