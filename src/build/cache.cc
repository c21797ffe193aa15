// The content-addressed module cache: key, lock, private build, atomic publish.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#define XXH_INLINE_ALL
#include <tvm/ffi/c_api.h>
#include <xxhash.h>

#include "kjit/build.h"
#include "kjit/errors.h"
#include "kjit/version.h"

namespace kjit {
namespace fs = std::filesystem;
namespace {

std::string hex128(const XXH128_hash_t& h) {
  char buf[33];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return buf;
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  f.close();
  if (!f) throw CacheError("kjit: cannot write " + path.string() + ": " + std::strerror(errno));
}

void make_dirs(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw CacheError("kjit: cannot create the cache directory " + dir.string() + ": " + ec.message());
}

/// An exclusive flock held for the object's lifetime.
class FileLock {
 public:
  FileLock(const fs::path& path, bool verbose) {
    fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw CacheError("kjit: cannot open the lock file " + path.string() + ": " + std::strerror(errno));
    if (flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
    if (verbose) std::fprintf(stderr, "[kjit] waiting for another process building %s\n", path.c_str());
    while (flock(fd_, LOCK_EX) != 0) {
      if (errno != EINTR) throw CacheError("kjit: cannot lock " + path.string() + ": " + std::strerror(errno));
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

std::vector<std::string> compile_command(const BuildRequest& r, const fs::path& source, const fs::path& output) {
  const SystemPaths& sys = system_paths();
  std::vector<std::string> argv = find_toolchain().compiler;
  for (const char* f : {"-std=c++17", "-O2", "-fPIC", "-shared", "-fvisibility=hidden"}) argv.push_back(f);
  argv.push_back("-I" + sys.kjit_include);
  argv.push_back("-I" + sys.tvm_ffi_include);
  for (const std::string& inc : r.include_paths) argv.push_back("-I" + inc);
  argv.insert(argv.end(), r.extra_cflags.begin(), r.extra_cflags.end());
  argv.push_back(source.string());
  argv.push_back("-o");
  argv.push_back(output.string());
  argv.push_back("-L" + sys.tvm_ffi_lib);
  argv.push_back("-ltvm_ffi");
  argv.push_back("-Wl,-rpath," + sys.tvm_ffi_lib);
  argv.insert(argv.end(), r.extra_ldflags.begin(), r.extra_ldflags.end());
  return argv;
}

fs::path cache_root(const BuildRequest& r) { return r.cache_dir.empty() ? default_cache_dir() : r.cache_dir; }

BuildResult published(const fs::path& dir, const BuildRequest& r, const std::string& key, bool hit) {
  BuildResult out;
  out.library_path = (dir / (r.name + ".so")).string();
  out.source_path = (dir / (r.name + ".cc")).string();
  out.key = key;
  out.cache_hit = hit;
  return out;
}

/// Compiles into a fresh private directory and returns it; throws CompileError.
fs::path compile_private(const BuildRequest& r, const fs::path& root) {
  std::string pattern = (root / (".tmp-" + r.name + "-XXXXXX")).string();
  if (mkdtemp(pattern.data()) == nullptr) {
    throw CacheError("kjit: cannot create a build directory in " + root.string() + ": " + std::strerror(errno));
  }
  fs::path tmp = pattern;
  fs::path source = tmp / (r.name + ".cc");
  write_file(source, r.source);
  std::vector<std::string> argv = compile_command(r, source, tmp / (r.name + ".so"));
  std::string command = join_command(argv);
  if (r.verbose) std::fprintf(stderr, "[kjit] compiling module '%s':\n[kjit]   %s\n", r.name.c_str(), command.c_str());
  auto start = std::chrono::steady_clock::now();
  ProcessResult p = run_process(argv);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  write_file(tmp / "build.log", command + "\n" + p.output);
  if (r.verbose) {
    std::fprintf(stderr, "[kjit] compiler %s in %.2f s%s%s", p.exit_code == 0 ? "finished" : "failed", seconds,
                 p.output.empty() ? "" : ":\n", p.output.c_str());
    if (p.output.empty() || p.output.back() != '\n') std::fputc('\n', stderr);
  }
  if (p.exit_code != 0) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw CompileError("kjit: compiling module '" + r.name + "' failed (exit status " + std::to_string(p.exit_code) +
                           "):\n" + p.output + "command: " + command,
                       command, p.output);
  }
  return tmp;
}

}  // namespace

std::string build_key(const BuildRequest& r) {
  XXH3_state_t* st = XXH3_createState();
  internal_check(st != nullptr, "XXH3_createState failed");
  XXH3_128bits_reset(st);
  auto add = [&](const std::string& s) {
    XXH3_128bits_update(st, s.data(), s.size());
    XXH3_128bits_update(st, "\0", 1);  // field separator: "ab","c" != "a","bc"
  };
  add("kjit " KJIT_VERSION);
  add("tvm-ffi " + std::to_string(TVM_FFI_VERSION_MAJOR) + "." + std::to_string(TVM_FFI_VERSION_MINOR) + "." +
      std::to_string(TVM_FFI_VERSION_PATCH));
  add(find_toolchain().identity);
  for (const auto* list : {&r.extra_cflags, &r.extra_ldflags, &r.include_paths}) {
    add(std::to_string(list->size()));
    for (const std::string& s : *list) add(s);
  }
  add(r.name);
  add(r.source);
  std::string key = hex128(XXH3_128bits_digest(st));
  XXH3_freeState(st);
  return key;
}

BuildResult build_shared_library(const BuildRequest& r) { return build_shared_library(r, build_key(r)); }

BuildResult build_shared_library(const BuildRequest& r, const std::string& key) {
  fs::path root = cache_root(r);
  fs::path dir = root / (r.name + "-" + key);
  fs::path lib = dir / (r.name + ".so");
  if (!r.force_rebuild && fs::exists(lib)) {
    if (r.verbose) std::fprintf(stderr, "[kjit] module '%s': cache hit %s\n", r.name.c_str(), lib.c_str());
    return published(dir, r, key, true);
  }
  make_dirs(root / "locks");
  FileLock lock(root / "locks" / (r.name + "-" + key + ".lock"), r.verbose);
  if (!r.force_rebuild && fs::exists(lib)) return published(dir, r, key, true);  // built by another process
  fs::path tmp = compile_private(r, root);
  // A damaged entry (library gone), or the one a forced rebuild replaces: move it
  // aside first so the rename below publishes atomically; we hold the lock.
  std::error_code stale;
  if (fs::exists(dir)) {
    fs::path old = tmp;
    old += ".old";
    fs::rename(dir, old, stale);
    fs::remove_all(stale ? dir : old, stale);
  }
  std::error_code ec;
  fs::rename(tmp, dir, ec);
  if (ec) {
    fs::remove_all(tmp, ec);
    if (!fs::exists(lib)) throw CacheError("kjit: cannot publish the build of '" + r.name + "' to " + dir.string());
  }
  if (r.verbose) std::fprintf(stderr, "[kjit] module '%s': published %s\n", r.name.c_str(), lib.c_str());
  return published(dir, r, key, false);
}

void evict(const BuildResult& result) {
  std::error_code ec;
  fs::remove_all(fs::path(result.library_path).parent_path(), ec);
}

}  // namespace kjit
