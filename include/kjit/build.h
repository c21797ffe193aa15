// kjit/build.h — toolchain discovery, the compiler driver and the module cache.
#ifndef KJIT_BUILD_H_
#define KJIT_BUILD_H_

#include <cstdint>
#include <string>
#include <vector>

namespace kjit {

/// The host C++ compiler: argv prefix (CXX may carry a launcher, "ccache g++")
/// and an identity string (resolved path + `--version`) for the cache key.
struct Toolchain {
  std::vector<std::string> compiler;
  std::string identity;
  bool gcc = false;  ///< GCC, not clang (which refuses some of GCC's -f flags)
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
/// Runs several at once and returns their results in order.
std::vector<ProcessResult> run_processes(const std::vector<std::vector<std::string>>& argvs);

/// The CUDA toolkit: nvcc (CUDA_HOME or CUDA_PATH, else PATH, else
/// /usr/local/cuda), its identity (path + version) for the cache key, and the
/// include and library directories.
struct CudaToolchain {
  std::vector<std::string> nvcc;
  std::string identity;
  std::string version;  ///< "13.0"
  std::string root;
  std::string include_dir;
  std::string lib_dir;
};
/// Throws ToolchainError naming what was searched. Cached per process.
const CudaToolchain& find_cuda_toolchain();

/// One target of a CUDA build: SASS for sm_XY, or PTX for compute_XY.
struct CudaArch {
  int number = 0;            ///< 80 for sm_80
  std::string suffix;        ///< "a" for sm_90a, else empty
  bool ptx = false;          ///< PTX (JIT-compiled by the driver) instead of SASS
  std::string text() const;  ///< "sm_80", "compute_90"
};
/// Parses "sm_80,sm_90,compute_90", "8.0;9.0+PTX", "80 90" (torch's and nvcc's
/// spellings); throws SpecError naming a bad entry.
std::vector<CudaArch> parse_cuda_archs(const std::string& text, const std::string& origin);
/// The architectures of a build: `explicit_archs` if not empty, else KJIT_CUDA_ARCH,
/// else the visible devices' (CUDA driver), else sm_80, sm_90 and compute_90 (PTX).
/// `how` says which rule applied.
std::vector<CudaArch> select_cuda_archs(const std::string& explicit_archs, std::string* how = nullptr);

/// Include directories a stub needs: kjit's own and tvm-ffi's (which has dlpack).
struct SystemPaths {
  std::string kjit_include;
  std::string kjit_lib;  ///< the directory of libkjit (or of the program kjit is linked into)
  std::string tvm_ffi_include;
  std::string tvm_ffi_lib;
};
/// Found next to the loaded libraries (KJIT_INCLUDE_DIR overrides kjit's).
const SystemPaths& system_paths();

/// KJIT_CACHE_DIR, else $XDG_CACHE_HOME/kjit, else ~/.cache/kjit; absolute (absolute_cache_dir).
std::string default_cache_dir();

/// `dir` as an absolute path. A relative one is resolved against the working
/// directory the first time this process sees it and remembered, so a later
/// chdir does not start a second tree; and an absolute path never starts with
/// '-', which a compiler would read as an option ("-Dfoo" as a cache root).
std::string absolute_cache_dir(const std::string& dir);

/// Instruction-set flags for code built for this machine only (the elementwise
/// loops), by x86-64 level: the x86-64-v3 extensions (AVX2, FMA, F16C, BMI1/2,
/// LZCNT, MOVBE) when this CPU has all of them, and the x86-64-v4 ones (AVX-512 F,
/// CD, VL, BW, DQ) too when it also has those, with floating-point contraction off
/// so results stay bit for bit those of separate operations; empty elsewhere.
/// KJIT_HOST_ISA=baseline|x86-64-v3|x86-64-v4 caps the level; another value throws
/// ToolchainError. The flags are part of the cache key, so a cache shared between
/// machines keeps one entry per instruction set.
const std::vector<std::string>& host_isa_cflags();

/// The flags of instruction-set level `isa`: native (host_isa_cflags()), baseline
/// (none), x86-64-v3 or x86-64-v4. Throws ToolchainError for another value.
std::vector<std::string> isa_cflags(const std::string& isa);
/// The level `isa` stands for, by name (native resolved: "x86-64-v3", ...).
std::string isa_level_name(const std::string& isa);
/// This CPU's level, by name, as KJIT_HOST_ISA caps it.
std::string cpu_isa_level_name();
/// Whether this CPU (as KJIT_HOST_ISA caps it) runs code built for level `name`;
/// false for an unknown name.
bool cpu_runs_isa(const std::string& name);

/// The flags of every host translation unit before the request's own: the
/// portable defaults (kjit.build's), which BuildRequest::machine_cflags adds to.
const std::vector<std::string>& default_host_cflags();

/// What load_inline compiles a module for, besides default_host_cflags(): -O3 and
/// this machine's instruction set (host_isa_cflags()). The stub precompiled header
/// is built with both lists, so JIT builds take it.
const std::vector<std::string>& jit_machine_cflags();

/// The first line of every generated module source. It stands for the headers of
/// the stub prelude (include/kjit/detail/stub_includes.h); a build with the default
/// flags gets them from a precompiled header when a valid one was built with kjit.
inline constexpr char kStubIncludesLine[] = "#include <kjit/detail/stub_includes.h>\n";

struct BuildRequest {
  std::string name;    ///< module name (a C identifier; long names get shortened file names)
  std::string source;  ///< the whole translation unit
  std::vector<std::string> extra_cflags;
  std::vector<std::string> extra_ldflags;
  /// Optimisation and instruction-set flags after default_host_cflags(), before
  /// extra_cflags: jit_machine_cflags() for a module built for this machine;
  /// empty for a portable one. Part of the cache key.
  std::vector<std::string> machine_cflags;
  std::vector<std::string> include_paths;
  std::string cache_dir;       ///< empty: default_cache_dir()
  bool verbose = false;        ///< print commands and timings to stderr
  bool force_rebuild = false;  ///< compile even on a cache hit and replace the cached module
  /// No RUNPATH into this machine's tvm-ffi: the library finds libtvm_ffi as
  /// tvm-ffi's own packaged libraries do, already loaded by `import tvm_ffi` (or
  /// by a program that links it), so it can be shipped (kjit.build).
  bool relocatable = false;
  /// Device code: a .cu translation unit compiled by nvcc and linked with the host
  /// one (and libcudart). Empty: a host-only build.
  std::string cuda_source;
  std::vector<std::string> cuda_flags;  ///< extra nvcc flags
  std::vector<CudaArch> cuda_archs;     ///< what nvcc generates code for
  /// Build an object file (`<name>.o`, compiled with -c) to link into other builds,
  /// instead of a shared library. Cached, checked and published the same way.
  bool object_only = false;
  /// Object builds (object_only) linked into this one: each is found in the cache
  /// or compiled when this build compiles, and its key is part of this one's.
  std::vector<BuildRequest> objects;
  /// Symbols the shared library must export: a build without them (flags that
  /// hid them or made something other than a library) fails before it is
  /// published. Not part of the cache key: they follow from the source.
  std::vector<std::string> exports;
};

struct BuildResult {
  std::string library_path;  ///< the published shared library (object file: object_only)
  std::string source_path;   ///< the translation unit as compiled
  std::string key;           ///< content hash: sources, flags, compiler, versions
  bool cache_hit = false;
};

/// Whether a build of `request` would use the stub precompiled header: its
/// directory (for `-I`) if so, else "" and `why_not` says why (empty when the
/// source does not start with kStubIncludesLine). KJIT_PCH=0 turns it off;
/// KJIT_PCH_DIR overrides where it is looked for (default: `pch/` next to libkjit).
std::string stub_pch_dir(const BuildRequest& request, std::string* why_not = nullptr);

/// The cache key of a request: what decides whether two builds are the same.
std::string build_key(const BuildRequest& request);

/// Compiles the request into a shared library unless the cache has it. A cached
/// entry is returned only if it is ours and not writable by others (else
/// CacheError), its library matches the checksum recorded at publish and no header
/// it was compiled from changed (else it is rebuilt). Builds in a private
/// temporary directory, fsyncs, and publishes by atomic rename under a file lock,
/// so concurrent processes compile a module once and readers never see a partial
/// file. Throws CompileError, ToolchainError or CacheError (docs/cache.md).
BuildResult build_shared_library(const BuildRequest& request);
/// Same, with the request's build_key() already computed.
BuildResult build_shared_library(const BuildRequest& request, const std::string& key);

/// Drops a published build (used when a cached library passes its checks but
/// fails to load).
void evict(const BuildResult& result);

/// One entry of a cache directory, as `kjit cache list` shows it.
struct CacheEntry {
  std::string path;       ///< its directory (a build) or file (an NVRTC image)
  std::string name;       ///< the module's or kernel's name as a file stem ("mymod", "kjit_ew_add")
  std::string kind;       ///< "module", "elementwise kernel", "object" or "CUDA image"
  uint64_t bytes = 0;     ///< every file of it
  int64_t last_used = 0;  ///< seconds since the epoch: its last load from the cache, else its build
  std::string made_by;    ///< "kjit 0.1.0, tvm-ffi 0.1.4, <compiler>" ("" when an older kjit built it)
};

/// The version of the tvm-ffi library this process runs, "0.1.16"
/// (TVMFFIGetVersion): what cache entries record as what made them (`origin`),
/// what `kjit --version` prints, and what kjit.load checks a library's recorded
/// tvm-ffi ABI against.
std::string tvm_ffi_version();

/// The directory builds with `dir` as their cache ("" for the default) use, after
/// the checks every build runs (ownership and permissions: cache_detail's
/// private_cache_root, creating it as a build would) and a probe that a build
/// directory can be made there. Throws the CacheError a build would meet.
std::string usable_cache_root(const std::string& dir);

/// The entries of the cache at `dir` ("" for the default), most recently used
/// first; nothing for a directory that does not exist. Only what kjit made is an
/// entry: a build directory holding kjit's build marker or a whole manifest, an
/// NVRTC image whose seal checks (docs/cache.md, What kjit touches). Throws
/// CacheError for a directory that is not ours.
std::vector<CacheEntry> list_cache(const std::string& dir);

/// The files and folders of the cache at `dir` that kjit did not make (no magic and
/// checksum of its own), in its root and in its `locks/`, `cuda-kernels/`, `failed/`
/// and `toolchains/` folders; folders end in '/'. Cache maintenance never touches them.
std::vector<std::string> foreign_cache_files(const std::string& dir);

struct PruneOptions {
  int64_t older_than_seconds = -1;  ///< remove entries not used for longer (-1: no age limit)
  int64_t max_bytes = -1;           ///< then the least recently used until the rest fits (-1: no size limit)
  bool all = false;                 ///< remove every entry
  bool dry_run = false;             ///< report what would go, remove nothing
  std::string keep;                 ///< an entry's path never removed (the build just published)
};

/// An entry removal could not remove, and why (the system's reason, naming the path).
struct PruneFailure {
  CacheEntry entry;
  std::string reason;
};

struct PruneResult {
  std::vector<CacheEntry> removed;
  std::vector<CacheEntry> busy;      ///< chosen, but a build of it held its lock
  std::vector<PruneFailure> failed;  ///< chosen, but removing it failed (a cache that cannot be written)
  std::vector<std::string> skipped;  ///< what kjit did not make and left (foreign_cache_files)
  uint64_t freed_bytes = 0;
  int lock_files_removed = 0;  ///< of entries no longer there
};

/// Removes cache entries as `options` say (an entry whose build lock another
/// process holds is left and reported busy, one that cannot be removed is reported
/// failed), then the lock files kjit made of entries that are gone. Never touches
/// what kjit did not make (reported skipped). Throws CacheError for a directory
/// that is not ours.
PruneResult prune_cache(const std::string& dir, const PruneOptions& options);

/// KJIT_CACHE_MAX_SIZE in bytes ("500M", "2G", "1073741824"; K, M, G, T are powers
/// of 1024), or -1 when unset; a value that is not a size is ignored with one
/// warning on stderr.
int64_t cache_max_size_from_env();

/// Parses a size as KJIT_CACHE_MAX_SIZE takes it; -1 when `text` is not one.
int64_t parse_byte_size(const std::string& text);

}  // namespace kjit

#endif  // KJIT_BUILD_H_
