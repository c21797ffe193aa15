// The stub precompiled header: include/kjit/detail/stub_includes.h compiled at kjit
// build time with the JIT's default flags, and the stamp that says what it was
// built from. GCC checks a PCH's compiler and flags but not the headers baked into
// it, nor its own integrity, so kjit checks the stamp before every use.
#ifndef KJIT_SRC_TOOLCHAIN_PCH_H_
#define KJIT_SRC_TOOLCHAIN_PCH_H_

#include <string>
#include <vector>

#include "kjit/build.h"
#include "toolchain/cache_files.h"

namespace kjit {
namespace pch_detail {

/// Inside a PCH directory: the .gch where GCC looks for it when the directory is
/// the first -I, and the stamp.
constexpr const char* kGchName = "kjit/detail/stub_includes.h.gch";
constexpr const char* kStampName = "stamp";

/// A header baked into the PCH. `root` says where `dep.path` is relative to:
/// "kjit" (kjit's include directory), "tvm-ffi" (tvm-ffi's), or "/" (absolute: a
/// system header), so a copied installation still matches.
struct Header {
  std::string root;
  cache_detail::Dependency dep;
};

/// What the PCH was built from and with.
struct Stamp {
  std::string identity;            ///< Toolchain::identity of the compiler
  std::vector<std::string> flags;  ///< jit_host_cflags() at build time
  cache_detail::Dependency gch;    ///< the .gch itself (path relative to the PCH directory)
  std::vector<Header> headers;
  std::vector<std::string> system_dirs;  ///< the compiler's <...> search list, for the shadowing check
};

std::string format_stamp(const Stamp& s);
/// false if `text` is not a whole, self-consistent stamp.
bool parse_stamp(const std::string& text, Stamp* out);

/// Compiles the PCH into `dir` with the compiler the JIT finds (find_toolchain())
/// and jit_host_cflags(), then writes its stamp (last, so a failed build leaves
/// none). Run at kjit build time (src/toolchain/pch_main.cc). Removes the old PCH
/// and makes none when that compiler is not GCC. Returns what it did; throws
/// CompileError or ToolchainError.
std::string build_stub_pch(const std::string& dir);

/// Why the PCH in `dir` described by `s` does not fit a build now ("" if it fits):
/// another compiler or flags, a changed header, a damaged .gch, or an extra include
/// path holding a system header it would replace.
/// The flags a JIT module's host code is compiled with, first to last: the
/// portable defaults, then jit_machine_cflags(). The PCH is built with them.
std::vector<std::string> jit_host_cflags();

/// Why the PCH does not fit a build with `machine_cflags` ("" when it does).
std::string stamp_mismatch(const Stamp& s, const std::string& dir, const std::vector<std::string>& include_paths,
                           const std::vector<std::string>& machine_cflags);

/// The decision for one build: `dir` to put first on the include path (empty:
/// compile as without a PCH, `why_not` says why), and the kjit and tvm-ffi headers
/// baked in, which the cache entry records as its own.
struct PchChoice {
  std::string dir;
  std::string why_not;
  std::vector<std::string> headers;
};
PchChoice choose_stub_pch(const BuildRequest& r);

/// Whether an extra compiler flag keeps the precompiled header usable (GCC takes a
/// .gch only under the macros and target it was built for).
bool leaves_pch_valid(const std::string& flag);

}  // namespace pch_detail
}  // namespace kjit

#endif  // KJIT_SRC_TOOLCHAIN_PCH_H_
