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

void append_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out << text;
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
  argv->push_back("-Wl,-rpath," + sys.tvm_ffi_lib);
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

/// Host translation unit: straight to the shared library, or to an object when
/// device code is linked in too.
std::vector<std::string> host_command(const BuildRequest& r, const fs::path& source, const fs::path& output,
                                      bool object_only) {
  std::vector<std::string> argv = find_toolchain().compiler;
  for (const char* f : {"-std=c++17", "-O2", "-fPIC", "-fvisibility=hidden"}) argv.push_back(f);
  argv.push_back(object_only ? "-c" : "-shared");
  add_include_paths(r, &argv);
  argv.insert(argv.end(), r.extra_cflags.begin(), r.extra_cflags.end());
  argv.push_back(source.string());
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

/// Runs the commands (at once), logs them; throws CompileError naming the step
/// that failed.
void run_steps(const BuildRequest& r, const fs::path& tmp, const std::vector<std::string>& steps,
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
  std::vector<ProcessResult> results = run_processes(commands);
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
    throw CompileError("kjit: " + steps[i] + " module '" + r.name + "' failed (exit status " +
                           std::to_string(p.exit_code) + "):\n" + p.output + "command: " + command,
                       command, p.output);
  }
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
  fs::path library = tmp / (r.name + ".so");
  write_file(source, r.source);
  try {
    if (r.cuda_source.empty()) {
      run_steps(r, tmp, {"compiling"}, {host_command(r, source, library, false)});
    } else {
      // nvcc and the host compiler run side by side, then one link.
      fs::path cu = tmp / (r.name + ".cu");
      write_file(cu, r.cuda_source);
      fs::path host_o = tmp / (r.name + ".host.o"), device_o = tmp / (r.name + ".cuda.o");
      run_steps(r, tmp, {"compiling the host code of", "compiling the CUDA code (nvcc) of"},
                {host_command(r, source, host_o, true), device_command(r, cu, device_o)});
      run_steps(r, tmp, {"linking"}, {link_command(r, {host_o, device_o}, library)});
    }
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
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
  if (!r.cuda_source.empty()) {  // host-only keys stay what they were
    add(find_cuda_toolchain().identity);
    add(r.cuda_source);
    add(std::to_string(r.cuda_flags.size()));
    for (const std::string& f : r.cuda_flags) add(f);
    for (const CudaArch& a : r.cuda_archs) add(a.text());
  }
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
