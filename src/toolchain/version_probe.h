// A compiler's `--version`, run once per installed binary rather than once per
// process: a fresh process's cached load_inline otherwise spends about 1 ms of its
// 2 ms forking g++ (and nvcc costs more).
#ifndef KJIT_SRC_TOOLCHAIN_VERSION_PROBE_H_
#define KJIT_SRC_TOOLCHAIN_VERSION_PROBE_H_

#include <string>
#include <vector>

#include "kjit/build.h"

namespace kjit {
namespace build_detail {

/// The result of running `command` (a compiler's words, then `--version`). A
/// successful result is kept in `<default_cache_dir()>/toolchains/`, keyed by the
/// command and the binary as it is on disk (resolved path, device, inode, size,
/// mtime, ctime), so replacing or touching the compiler runs it again. Wrappers
/// (ccache, sccache, distcc, icecc, scripts) run every time: what they call can
/// change behind an unchanged binary. The record is optional: an unreadable,
/// damaged or unwritable one means the command runs, never an error.
ProcessResult probe_version(const std::vector<std::string>& command);

/// Whether the binary at `path` (resolved) forwards to another compiler.
bool is_compiler_wrapper(const std::string& path);

}  // namespace build_detail
}  // namespace kjit

#endif  // KJIT_SRC_TOOLCHAIN_VERSION_PROBE_H_
