// kjit/build.h — toolchain discovery, the compiler driver and the module cache.
#ifndef KJIT_BUILD_H_
#define KJIT_BUILD_H_

#include <string>
#include <vector>

namespace kjit {

/// The host C++ compiler: argv prefix (CXX may carry a launcher, "ccache g++")
/// and an identity string (resolved path + `--version`) for the cache key.
struct Toolchain {
  std::vector<std::string> compiler;
  std::string identity;
};

/// CXX if set, else the first of c++, g++, clang++ on PATH. Throws ToolchainError
/// naming what was searched. Cached per process.
const Toolchain& find_toolchain();

/// Output and exit status of a child process run by argv (no shell).
struct ProcessResult {
  int exit_code = -1;
  std::string output;  ///< stdout and stderr, interleaved
};
/// Runs argv[0] (searched on PATH) with the arguments; throws ToolchainError if it
/// cannot be started.
ProcessResult run_process(const std::vector<std::string>& argv);

/// Include directories a stub needs: kjit's own and tvm-ffi's (which has dlpack).
struct SystemPaths {
  std::string kjit_include;
  std::string tvm_ffi_include;
  std::string tvm_ffi_lib;
};
/// Found next to the loaded libraries (KJIT_INCLUDE_DIR overrides kjit's).
const SystemPaths& system_paths();

/// KJIT_CACHE_DIR, else $XDG_CACHE_HOME/kjit, else ~/.cache/kjit.
std::string default_cache_dir();

struct BuildRequest {
  std::string name;    ///< module name (a C identifier)
  std::string source;  ///< the whole translation unit
  std::vector<std::string> extra_cflags;
  std::vector<std::string> extra_ldflags;
  std::vector<std::string> include_paths;
  std::string cache_dir;       ///< empty: default_cache_dir()
  bool verbose = false;        ///< print commands and timings to stderr
  bool force_rebuild = false;  ///< compile even on a cache hit and replace the entry
};

struct BuildResult {
  std::string library_path;  ///< the published shared library
  std::string source_path;   ///< the translation unit as compiled
  std::string key;           ///< content hash: sources, flags, compiler, versions
  bool cache_hit = false;
};

/// The cache key of a request: what decides whether two builds are the same.
std::string build_key(const BuildRequest& request);

/// Compiles the request into a shared library unless the cache has it. Builds in
/// a private temporary directory and publishes by atomic rename under a file
/// lock, so concurrent processes compile a module once and readers never see a
/// partial file. Throws CompileError, ToolchainError or CacheError.
BuildResult build_shared_library(const BuildRequest& request);
/// Same, with the request's build_key() already computed.
BuildResult build_shared_library(const BuildRequest& request, const std::string& key);

/// Drops a published build (used when a cached library fails to load).
void evict(const BuildResult& result);

}  // namespace kjit

#endif  // KJIT_BUILD_H_
