// The content-addressed module cache: key, lock, private build, integrity
// record, durable atomic publish, and the checks of an entry before it is used.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <tvm/ffi/c_api.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <thread>

#include "kjit/build.h"
#include "kjit/errors.h"
#include "kjit/version.h"
#include "toolchain/cache_files.h"
#include "toolchain/cache_key.h"
#include "toolchain/library_exports.h"
#include "toolchain/pch.h"

namespace kjit {
namespace fs = std::filesystem;
namespace cd = cache_detail;
namespace {

void append_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out << text;
}

/// An exclusive flock on the lock file of `entry`, held for the object's lifetime.
/// A new lock file gets kjit's stamp (cache_detail::lock_file_text), so cache
/// maintenance removes only lock files kjit made.
class FileLock {
 public:
  FileLock(const fs::path& path, const std::string& entry, bool verbose) {
    fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd_ < 0) throw CacheError("kjit: cannot open the lock file " + path.string() + ": " + std::strerror(errno));
    if (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if (verbose) std::fprintf(stderr, "[kjit] waiting for another process building %s\n", path.c_str());
      while (flock(fd_, LOCK_EX) != 0) {
        if (errno != EINTR) throw CacheError("kjit: cannot lock " + path.string() + ": " + std::strerror(errno));
      }
    }
    struct stat st {};
    if (fstat(fd_, &st) == 0 && st.st_size == 0) {  // written under the lock: one writer
      const std::string text = cd::lock_file_text(entry);
      if (write(fd_, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
        (void)ftruncate(fd_, 0);  // a torn stamp is no stamp; the lock works without it
      }
    }
  }
  ~FileLock() {
    flock(fd_, LOCK_UN);
    close(fd_);
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

std::string join_command(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) {
    if (!out.empty()) out += ' ';
    bool plain = !a.empty() && a.find_first_of(" \t\"'\\$`") == std::string::npos;
    out += plain ? a : "'" + a + "'";
  }
  return out;
}

/// The headers a compile reads, written as a make rule: the entry records them
/// and a later lookup rebuilds when one changed. -MMD leaves out system headers.
void add_dependency_output(const std::string& file, std::vector<std::string>* argv) {
  argv->push_back("-MMD");
  argv->push_back("-MF");
  argv->push_back(file);
}

void add_include_paths(const BuildRequest& r, std::vector<std::string>* argv) {
  const SystemPaths& sys = system_paths();
  argv->push_back("-I" + sys.kjit_include);
  argv->push_back("-I" + sys.tvm_ffi_include);
  for (const std::string& inc : r.include_paths) argv->push_back("-I" + inc);
}

void add_link_flags(const BuildRequest& r, std::vector<std::string>* argv) {
  const SystemPaths& sys = system_paths();
  argv->push_back("-L" + sys.tvm_ffi_lib);
  argv->push_back("-ltvm_ffi");
  if (!r.relocatable) argv->push_back("-Wl,-rpath," + sys.tvm_ffi_lib);
  if (!r.cuda_source.empty()) {
    // libcudart by rpath: the module loads without a driver (it is needed only at
    // the first CUDA call), and tests can put a fake runtime in its place.
    const CudaToolchain& cuda = find_cuda_toolchain();
    argv->push_back("-L" + cuda.lib_dir);
    argv->push_back("-lcudart");
    argv->push_back("-Wl,-rpath," + cuda.lib_dir);
  }
  argv->insert(argv->end(), r.extra_ldflags.begin(), r.extra_ldflags.end());
}

/// Host translation unit: straight to the shared library (with `objects` linked
/// in), or to an object when device code is linked in too or the request is one.
/// `pch_dir` (if not empty) goes first on the include path: GCC takes
/// stub_includes.h.gch from there, or reads the header as usual when the .gch does
/// not fit (-Winvalid-pch says why in the log).
std::vector<std::string> host_command(const BuildRequest& r, const fs::path& source, const fs::path& output,
                                      bool object_only, const std::string& pch_dir,
                                      const std::vector<fs::path>& objects = {}) {
  std::vector<std::string> argv = find_toolchain().compiler;
  argv.insert(argv.end(), default_host_cflags().begin(), default_host_cflags().end());
  argv.insert(argv.end(), r.machine_cflags.begin(), r.machine_cflags.end());
  argv.push_back(object_only ? "-c" : "-shared");
  add_dependency_output(source.string() + ".d", &argv);
  if (!pch_dir.empty()) {
    argv.push_back("-I" + pch_dir);
    argv.push_back("-Winvalid-pch");
  }
  add_include_paths(r, &argv);
  argv.insert(argv.end(), r.extra_cflags.begin(), r.extra_cflags.end());
  argv.push_back(source.string());
  for (const fs::path& o : objects) argv.push_back(o.string());
  argv.push_back("-o");
  argv.push_back(output.string());
  if (!object_only) add_link_flags(r, &argv);
  return argv;
}

std::vector<std::string> device_command(const BuildRequest& r, const fs::path& source, const fs::path& output) {
  const CudaToolchain& cuda = find_cuda_toolchain();
  std::vector<std::string> argv = cuda.nvcc;
  for (const char* f : {"-std=c++17", "-O3", "-Xcompiler=-fPIC,-fvisibility=hidden", "-c"}) argv.push_back(f);
  for (const CudaArch& a : r.cuda_archs) {
    argv.push_back("-gencode=arch=compute_" + std::to_string(a.number) + a.suffix + ",code=" + a.text());
  }
  add_dependency_output(source.string() + ".d", &argv);
  add_include_paths(r, &argv);
  argv.insert(argv.end(), r.cuda_flags.begin(), r.cuda_flags.end());
  argv.push_back(source.string());
  argv.push_back("-o");
  argv.push_back(output.string());
  return argv;
}

std::vector<std::string> link_command(const BuildRequest& r, const std::vector<fs::path>& objects,
                                      const fs::path& output) {
  std::vector<std::string> argv = find_toolchain().compiler;
  argv.push_back("-shared");
  for (const fs::path& o : objects) argv.push_back(o.string());
  argv.push_back("-o");
  argv.push_back(output.string());
  add_link_flags(r, &argv);
  return argv;
}

/// What the last command of a step ran and printed.
struct StepLog {
  std::string command;
  std::string output;
};

/// Whether a failed compile ran out of disk: the compiler said so (ENOSPC's text,
/// as glibc writes it in the C locale compilers run in), or the filesystem of
/// `dir` has almost nothing left.
bool disk_full(const fs::path& dir, const std::string& output) {
  if (output.find("No space left on device") != std::string::npos) return true;
  struct statvfs st {};
  if (statvfs(dir.c_str(), &st) != 0) return false;
  return static_cast<uint64_t>(st.f_bavail) * st.f_frsize < (uint64_t{64} << 10);
}

/// Runs the commands (at once), logs them; throws CompileError naming the step
/// that failed.
/// With verbose: a line every few seconds while the compilers run, so a long build
/// is never silent (KJIT_PROGRESS_SECONDS sets the interval; default 3).
class ProgressLines {
 public:
  ProgressLines(bool on, const std::string& what) {
    if (!on) return;
    const char* env = std::getenv("KJIT_PROGRESS_SECONDS");
    const double interval = env != nullptr && std::atof(env) > 0 ? std::atof(env) : 3.0;
    thread_ = std::thread([this, what, interval] {
      const auto start = std::chrono::steady_clock::now();
      std::unique_lock<std::mutex> lock(mu_);
      while (!cv_.wait_for(lock, std::chrono::duration<double>(interval), [this] { return done_; })) {
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::fprintf(stderr, "[kjit]   still %s (%.0f s)\n", what.c_str(), s);
      }
    });
  }
  ~ProgressLines() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  ProgressLines(const ProgressLines&) = delete;
  ProgressLines& operator=(const ProgressLines&) = delete;

 private:
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
};

StepLog run_steps(const BuildRequest& r, const fs::path& tmp, const std::vector<std::string>& steps,
                  const std::vector<std::vector<std::string>>& commands) {
  std::string all;
  for (size_t i = 0; i < commands.size(); ++i) {
    all += join_command(commands[i]) + "\n";
    if (r.verbose) {
      std::fprintf(stderr, "[kjit] %s module '%s':\n[kjit]   %s\n", steps[i].c_str(), r.name.c_str(),
                   join_command(commands[i]).c_str());
    }
  }
  auto start = std::chrono::steady_clock::now();
  std::vector<ProcessResult> results;
  {
    ProgressLines progress(r.verbose, steps[0] + " module '" + r.name + "'");
    results = run_processes(commands);
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string log;
  for (const ProcessResult& p : results) log += p.output;
  append_file(tmp / "build.log", all + log);
  for (size_t i = 0; r.verbose && i < results.size(); ++i) {
    const ProcessResult& p = results[i];
    std::string program = fs::path(commands[i][0]).filename().string();
    std::fprintf(stderr, "[kjit]   %s %s%s%s", program.c_str(), p.exit_code == 0 ? "finished" : "failed",
                 p.output.empty() ? "" : ":\n", p.output.c_str());
    if (p.output.empty() || p.output.back() != '\n') std::fputc('\n', stderr);
  }
  if (r.verbose) {
    std::fprintf(stderr, "[kjit] %.2f s%s\n", seconds, results.size() > 1 ? " (the steps above ran side by side)" : "");
  }
  for (size_t i = 0; i < results.size(); ++i) {
    const ProcessResult& p = results[i];
    if (p.exit_code == 0) continue;
    std::string command = join_command(commands[i]);
    if (disk_full(tmp, p.output)) {
      throw CacheError("kjit: " + steps[i] + " module '" + r.name + "' failed: the disk of the cache directory '" +
                       tmp.parent_path().string() +
                       "' is full (No space left on device); free space there or set KJIT_CACHE_DIR to a "
                       "directory on another disk. The compiler said:\n" +
                       p.output);
    }
    throw CompileError("kjit: " + steps[i] + " module '" + r.name + "' failed (exit status " +
                           std::to_string(p.exit_code) + "):\n" + p.output + "command: " + command,
                       command, p.output);
  }
  return StepLog{join_command(commands.back()), results.back().output};
}

fs::path cache_root(const BuildRequest& r) {
  return r.cache_dir.empty() ? default_cache_dir() : absolute_cache_dir(r.cache_dir);
}

/// Where one entry lives: `<root>/<stem>-<key>/` with `<stem>.so` (`.o`), `<stem>.cc`,
/// `manifest` and `build.log`; its build lock is `<root>/locks/<stem>-<key>.lock`.
struct EntryPaths {
  fs::path root;
  std::string stem;   ///< the module name as a file name (cache_detail::file_stem)
  std::string entry;  ///< "<stem>-<key>"
  fs::path dir;
  fs::path library;
  fs::path manifest;
};

EntryPaths entry_paths(const fs::path& root, const BuildRequest& r, const std::string& key) {
  EntryPaths p;
  p.root = root;
  p.stem = cd::file_stem(r.name);
  p.entry = p.stem + "-" + key;
  p.dir = root / p.entry;
  p.library = p.dir / (p.stem + (r.object_only ? ".o" : ".so"));
  p.manifest = p.dir / "manifest";
  return p;
}

/// What made a build, for `kjit cache list`: one line in the entry's `origin` file
/// (informational: the key already holds these, hashed).
std::string origin_of(const BuildRequest& r) {
  std::string text = "kjit " KJIT_VERSION ", tvm-ffi " + tvm_ffi_version() + ", " + find_toolchain().identity;
  if (!r.cuda_source.empty()) text += ", nvcc " + find_cuda_toolchain().version;
  for (char& c : text) c = c == '\n' ? ' ' : c;
  return text + "\n";
}

/// A cache hit marks the entry used now (its directory's times), for `kjit cache
/// prune --older-than` and the size cap; a cache others share read-only stays as it is.
void mark_used(const EntryPaths& p) { utimensat(AT_FDCWD, p.dir.c_str(), nullptr, 0); }

/// With KJIT_CACHE_MAX_SIZE: the least recently used entries go until the cache
/// fits, never the one just published.
void apply_size_cap(const BuildRequest& r, const EntryPaths& p) {
  const int64_t cap = cache_max_size_from_env();
  if (cap < 0) return;
  PruneOptions o;
  o.max_bytes = cap;
  o.keep = p.dir.string();
  const PruneResult pruned = prune_cache(p.root.string(), o);
  if (r.verbose && !pruned.removed.empty()) {
    std::fprintf(stderr, "[kjit] KJIT_CACHE_MAX_SIZE: removed %zu least recently used entries (%llu bytes)\n",
                 pruned.removed.size(), static_cast<unsigned long long>(pruned.freed_bytes));
  }
}

BuildResult published(const EntryPaths& p, const std::string& key, bool hit) {
  BuildResult out;
  out.library_path = p.library.string();
  out.source_path = (p.dir / (p.stem + ".cc")).string();
  out.key = key;
  out.cache_hit = hit;
  return out;
}

/// What a lookup found. Damaged and stale entries are rebuilt; a foreign or
/// unreadable one is a CacheError (thrown by check_entry).
enum class EntryState { kMissing, kValid, kDamaged, kStale };
struct EntryCheck {
  EntryState state;
  std::string reason;
};

/// The whole check of a cache hit, before anything is loaded: the entry is ours
/// and private, its library matches the checksum recorded at publish, and no
/// header it was compiled from changed.
EntryCheck check_entry(const EntryPaths& p) {
  struct stat st {};
  if (lstat(p.dir.c_str(), &st) != 0) {
    if (errno == ENOENT) return {EntryState::kMissing, ""};
    throw CacheError("kjit: cannot read the cache entry " + p.dir.string() + ": " + std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) {
    throw CacheError("kjit: the cache entry " + p.dir.string() +
                     " is not a directory (a file or symbolic link is in its place); remove it");
  }
  cd::check_owned(p.dir, st, "cache entry");
  std::string text;
  cd::Manifest m;
  if (!cd::read_owned_file(p.manifest, &text)) return {EntryState::kDamaged, "it has no integrity record"};
  if (!cd::parse_manifest(text, &m)) return {EntryState::kDamaged, "its integrity record is damaged"};
  uint64_t size = 0;
  std::string hash;
  if (!cd::hash_owned_file(p.library, &size, &hash)) return {EntryState::kDamaged, "its library is missing"};
  if (size != m.library_size || hash != m.library_hash) {
    return {EntryState::kDamaged, "its library does not match the checksum recorded when it was built"};
  }
  std::string changed = cd::changed_dependency(m.dependencies);
  if (!changed.empty()) return {EntryState::kStale, changed};
  return {EntryState::kValid, ""};
}

/// A damaged entry is news (a disk or a person broke it): always one line on
/// stderr. A changed header is ordinary: said only when verbose.
void announce_rebuild(const BuildRequest& r, const EntryPaths& p, const EntryCheck& c) {
  if (c.state == EntryState::kDamaged) {
    std::fprintf(stderr, "[kjit] cached module '%s' at %s is damaged (%s); rebuilding it\n", r.name.c_str(),
                 p.dir.c_str(), c.reason.c_str());
  } else if (c.state == EntryState::kStale && r.verbose) {
    std::fprintf(stderr, "[kjit] module '%s': %s since it was built; rebuilding\n", r.name.c_str(), c.reason.c_str());
  }
}

/// The headers named by the compile's `-MMD` files, as they are now; the
/// translation units themselves (in the build directory) are covered by the key.
/// `extra` are headers read through the precompiled header, which -MMD leaves out.
std::vector<cd::Dependency> record_dependencies(const fs::path& tmp, const std::vector<fs::path>& dep_files,
                                                const std::vector<std::string>& extra) {
  std::vector<cd::Dependency> out;
  std::vector<std::string> seen;
  std::error_code ec;
  fs::path cwd = fs::current_path(ec);  // the compiler ran here: relative names resolve against it
  for (const fs::path& file : dep_files) {
    std::string text;
    std::ifstream in(file, std::ios::binary);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    std::vector<std::string> names = cd::parse_make_dependencies(text);
    if (file == dep_files.front()) names.insert(names.end(), extra.begin(), extra.end());
    for (const std::string& name : names) {
      fs::path abs = (fs::path(name).is_absolute() ? fs::path(name) : cwd / name).lexically_normal();
      std::string path = abs.string();
      if (path.rfind(tmp.string() + "/", 0) == 0) continue;
      if (std::find(seen.begin(), seen.end(), path) != seen.end()) continue;
      seen.push_back(path);
      cd::Dependency d;
      if (cd::describe_dependency(path, &d)) out.push_back(std::move(d));
    }
  }
  return out;
}

/// A compiler that exits 0 must have produced the library; otherwise its command
/// and output are what the user needs to see.
void require_library(const BuildRequest& r, const fs::path& library, const StepLog& last) {
  struct stat st {};
  if (stat(library.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) return;
  throw CompileError("kjit: compiling module '" + r.name + "' reported success but produced no library " +
                         library.filename().string() + " (the compiler printed: " +
                         (last.output.empty() ? std::string("nothing") : "\n" + last.output) +
                         ")\ncommand: " + last.command,
                     last.command, last.output);
}

/// A library that lacks a symbol the request needs is never published: every later
/// load of the entry would fail.
void require_exports(const BuildRequest& r, const fs::path& library, const StepLog& last) {
  if (r.object_only || r.exports.empty()) return;
  const std::vector<std::string> missing = build_detail::missing_exports(library.string(), r.exports);
  if (missing.empty()) return;
  std::string names;
  for (const std::string& m : missing) names += (names.empty() ? "" : ", ") + m;
  throw CompileError("kjit: the library built for module '" + r.name + "' does not export " + names +
                         " (flags in extra_cflags or extra_ldflags that hide symbols, such as a version script, or "
                         "that make something other than a shared library, such as -E or -c); nothing was cached" +
                         "\ncommand: " + last.command,
                     last.command, last.output);
}

/// Makes the finished build private and durable: files 0600 (the library 0700),
/// the integrity record written, everything flushed before the publishing rename.
void seal_build(const fs::path& tmp, const fs::path& library, const std::vector<fs::path>& dep_files,
                const std::vector<std::string>& pch_headers) {
  cd::Manifest m;
  internal_check(cd::hash_owned_file(library, &m.library_size, &m.library_hash), "the library vanished");
  m.dependencies = record_dependencies(tmp, dep_files, pch_headers);
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(tmp)) {
    if (!e.is_regular_file(ec)) continue;
    chmod(e.path().c_str(), e.path() == library ? 0700 : 0600);
  }
  cd::write_private_file(tmp / "manifest", cd::format_manifest(m));
  cd::sync_path(library);
  cd::sync_path(tmp);
}

/// With verbose: whether the compile takes the precompiled stub headers, or why not
/// (nothing for sources that do not start with them).
void announce_pch(const BuildRequest& r, const pch_detail::PchChoice& pch) {
  if (!r.verbose || (pch.dir.empty() && pch.why_not.empty())) return;
  if (!pch.dir.empty()) {
    std::fprintf(stderr, "[kjit] module '%s': stub headers precompiled in %s\n", r.name.c_str(), pch.dir.c_str());
  } else {
    std::fprintf(stderr, "[kjit] module '%s': no precompiled stub headers: %s\n", r.name.c_str(), pch.why_not.c_str());
  }
}

/// The request's object builds, each from the cache or compiled now (into the
/// request's cache unless it names its own); their published paths.
std::vector<fs::path> build_objects(const BuildRequest& r) {
  std::vector<fs::path> out;
  for (BuildRequest o : r.objects) {
    internal_check(o.object_only, "a BuildRequest in objects that is not object_only");
    if (o.cache_dir.empty()) o.cache_dir = r.cache_dir;
    out.emplace_back(build_shared_library(o).library_path);
  }
  return out;
}

/// The generated sources of a build that failed, kept as `<root>/failed/<entry>.cc`
/// (and `.cu`) so the user can open what the compiler saw; returns where the host
/// source went, or "" when it could not be kept. Only the newest kKeptFailures
/// stay.
constexpr size_t kKeptFailures = 16;

constexpr uint64_t kMaxKeptBytes = uint64_t{1} << 30;

std::string keep_failed_sources(const EntryPaths& p, const fs::path& tmp) {
  std::error_code ec;
  const fs::path folder = p.root / "failed";
  fs::create_directories(folder, ec);
  if (ec) return "";
  fs::path kept;
  for (const char* ext : {".cc", ".cu"}) {
    std::string text;
    if (!cd::read_own_small_file(tmp / (p.stem + ext), kMaxKeptBytes, &text)) continue;
    const fs::path to = folder / (p.entry + ext);
    try {
      cd::write_private_file(to, cd::stamp(text));  // stamped: only kept sources are ever pruned below
    } catch (const CacheError&) {
      continue;
    }
    if (kept.empty()) kept = to;
  }
  std::vector<std::pair<fs::file_time_type, fs::path>> files;
  for (const fs::directory_entry& e : fs::directory_iterator(folder, ec)) {
    if (cd::is_stamped_file(e.path())) files.emplace_back(e.last_write_time(ec), e.path());
  }
  if (files.size() > 2 * kKeptFailures) {  // .cc and .cu per failure at most
    std::sort(files.begin(), files.end());
    for (size_t i = 0; i + 2 * kKeptFailures < files.size(); ++i) fs::remove(files[i].second, ec);
  }
  return kept.string();
}

/// Compiles into a fresh private directory `.tmp-<stem>-<key>-XXXXXX` (the name
/// lets a later build find its lock and clean it up if this one is killed) and
/// returns it, sealed, with `key_text` (the key part by part) as its `key` file;
/// throws CompileError.
fs::path compile_private(const BuildRequest& r, const EntryPaths& p, const std::string& key_text) {
  std::string pattern = (p.root / (".tmp-" + p.entry + "-XXXXXX")).string();
  if (mkdtemp(pattern.data()) == nullptr) {
    throw CacheError("kjit: cannot create a build directory in the cache directory " + p.root.string() + ": " +
                     std::strerror(errno));
  }
  fs::path tmp = pattern;
  fs::path source = tmp / (p.stem + ".cc");
  fs::path library = tmp / p.library.filename();
  try {
    cd::write_private_file(tmp / cd::kBuildMarker, cd::build_marker_text(p.entry));  // first: kjit made this
    cd::write_private_file(source, r.source);
    std::vector<fs::path> dep_files{source.string() + ".d"};
    const std::vector<fs::path> objects = build_objects(r);
    pch_detail::PchChoice pch = pch_detail::choose_stub_pch(r);
    announce_pch(r, pch);
    StepLog last;
    if (r.cuda_source.empty()) {
      last = run_steps(r, tmp, {"compiling"}, {host_command(r, source, library, r.object_only, pch.dir, objects)});
    } else {
      // nvcc and the host compiler run side by side, then one link.
      fs::path cu = tmp / (p.stem + ".cu");
      cd::write_private_file(cu, r.cuda_source);
      dep_files.push_back(cu.string() + ".d");
      fs::path host_o = tmp / (p.stem + ".host.o"), device_o = tmp / (p.stem + ".cuda.o");
      run_steps(r, tmp, {"compiling the host code of", "compiling the CUDA code (nvcc) of"},
                {host_command(r, source, host_o, true, pch.dir), device_command(r, cu, device_o)});
      std::vector<fs::path> inputs{host_o, device_o};
      inputs.insert(inputs.end(), objects.begin(), objects.end());
      last = run_steps(r, tmp, {"linking"}, {link_command(r, inputs, library)});
    }
    require_library(r, library, last);
    require_exports(r, library, last);
    cd::write_private_file(tmp / "origin", origin_of(r));
    cd::write_private_file(tmp / "key", key_text);
    seal_build(tmp, library, dep_files, pch.headers);
  } catch (const CompileError& e) {
    const std::string kept = keep_failed_sources(p, tmp);
    std::error_code ec;
    fs::remove_all(tmp, ec);
    if (kept.empty()) throw;
    throw CompileError(std::string(e.what()) + "\nthe generated source is kept at " + kept, e.command(), e.log());
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
  return tmp;
}

/// Publishes the sealed build `tmp` as the entry. An entry already there (damaged,
/// stale, or the one a forced rebuild replaces) is moved aside first so the rename
/// is atomic; the caller holds the entry's lock.
void publish_entry(const BuildRequest& r, const fs::path& tmp, const EntryPaths& p) {
  std::error_code ec;
  struct stat st {};
  if (lstat(p.dir.c_str(), &st) == 0) {
    fs::path old = tmp;
    old += ".old";
    fs::rename(p.dir, old, ec);
    fs::remove_all(ec ? p.dir : old, ec);
  }
  fs::rename(tmp, p.dir, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove_all(tmp, ignored);
    throw CacheError("kjit: cannot publish the build of '" + r.name + "' to " + p.dir.string() + ": " + ec.message());
  }
  cd::sync_path(p.root);
}

}  // namespace

BuildResult build_shared_library(const BuildRequest& r) { return build_shared_library(r, build_key(r)); }

BuildResult build_shared_library(const BuildRequest& request, const std::string& key) {
  const char* env = std::getenv("KJIT_VERBOSE");
  if (!request.verbose && env != nullptr && std::string(env) == "1") {
    BuildRequest talking = request;  // KJIT_VERBOSE=1: every build talks, whoever asked for it
    talking.verbose = true;
    return build_shared_library(talking, key);
  }
  const BuildRequest& r = request;
  EntryPaths p = entry_paths(cd::private_cache_root(cache_root(r)), r, key);
  if (!r.force_rebuild && check_entry(p).state == EntryState::kValid) {
    if (r.verbose) std::fprintf(stderr, "[kjit] module '%s': cache hit %s\n", r.name.c_str(), p.library.c_str());
    mark_used(p);
    return published(p, key, true);
  }
  cd::remove_stale_builds(p.root);  // before our own lock, so our own killed build's leftovers go too
  cd::ensure_private_dir(p.root / "locks", "lock directory");
  FileLock lock(p.root / "locks" / (p.entry + ".lock"), p.entry, r.verbose);
  const std::string key_text = cd::format_key_parts(cd::key_parts(r));  // once per build: it hashes the source
  if (!r.force_rebuild) {
    EntryCheck again = check_entry(p);
    if (again.state == EntryState::kValid) return published(p, key, true);  // built by another process
    announce_rebuild(r, p, again);
    if (again.state == EntryState::kMissing && r.verbose) {
      const std::string why = cd::describe_cache_miss(p.root, p.stem, p.entry, key_text);
      std::fprintf(stderr, "[kjit] module '%s': %s\n", r.name.c_str(), why.c_str());
    }
  }
  fs::path tmp = compile_private(r, p, key_text);
  publish_entry(r, tmp, p);
  if (r.verbose) std::fprintf(stderr, "[kjit] module '%s': published %s\n", r.name.c_str(), p.library.c_str());
  apply_size_cap(r, p);
  return published(p, key, false);
}

std::string tvm_ffi_version() {
  TVMFFIVersion v{};
  TVMFFIGetVersion(&v);
  return std::to_string(v.major) + "." + std::to_string(v.minor) + "." + std::to_string(v.patch);
}

std::string usable_cache_root(const std::string& dir) {
  const fs::path root = cd::private_cache_root(dir.empty() ? default_cache_dir() : absolute_cache_dir(dir));
  std::string probe = (root / ".tmp-kjit-probe-XXXXXX").string();  // what compile_private makes first
  if (mkdtemp(probe.data()) == nullptr) {
    throw CacheError("kjit: cannot create a build directory in the cache directory " + root.string() + ": " +
                     std::strerror(errno));
  }
  rmdir(probe.c_str());
  return root.string();
}

void evict(const BuildResult& result) {
  std::error_code ec;
  fs::remove_all(fs::path(result.library_path).parent_path(), ec);
}

}  // namespace kjit
