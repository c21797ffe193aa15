// Finds the host C++ compiler and the include/library directories stubs need.
#include <dlfcn.h>
#include <sys/stat.h>
#include <tvm/ffi/c_api.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <sstream>

#include "kjit/build.h"
#include "kjit/errors.h"
#include "toolchain/paths.h"
#include "toolchain/version_probe.h"

namespace kjit {
namespace fs = std::filesystem;

namespace build_detail {

bool is_executable(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

std::string which(const std::string& program) {
  if (program.find('/') != std::string::npos) return is_executable(program) ? program : "";
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (is_executable(candidate)) return candidate;
  }
  return "";
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace build_detail

namespace {

std::vector<std::string> split_words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  std::string w;
  while (in >> w) words.push_back(w);
  return words;
}

using build_detail::first_line;
using build_detail::which;

Toolchain make_toolchain() {
  const char* path_env = std::getenv("PATH");
  std::string path_text = path_env ? path_env : "(unset)";
  const char* cxx = std::getenv("CXX");
  Toolchain tc;
  if (cxx != nullptr && *cxx != '\0') {
    tc.compiler = split_words(cxx);
    std::string found = tc.compiler.empty() ? "" : which(tc.compiler[0]);
    if (found.empty()) {
      throw ToolchainError("kjit: no C++ compiler: CXX='" + std::string(cxx) + "' names '" +
                           (tc.compiler.empty() ? "" : tc.compiler[0]) +
                           "', which is not an executable file (searched PATH=" + path_text + ")");
    }
    tc.compiler[0] = found;
  } else {
    for (const char* name : {"c++", "g++", "clang++"}) {
      std::string found = which(name);
      if (!found.empty()) {
        tc.compiler = {found};
        break;
      }
    }
    if (tc.compiler.empty()) {
      throw ToolchainError("kjit: no C++ compiler found: CXX is unset and none of c++, g++, clang++ is on PATH=" +
                           path_text + " (install g++ or set CXX)");
    }
  }
  std::vector<std::string> version_cmd = tc.compiler;
  version_cmd.push_back("--version");
  ProcessResult v = build_detail::probe_version(version_cmd);
  if (v.exit_code != 0) {
    throw ToolchainError("kjit: the C++ compiler '" + tc.compiler[0] + "' failed on --version (exit status " +
                         std::to_string(v.exit_code) + "): " + first_line(v.output));
  }
  std::error_code ec;
  fs::path real = fs::canonical(tc.compiler[0], ec);
  tc.identity = (ec ? tc.compiler[0] : real.string()) + " | " + first_line(v.output);
  for (size_t i = 1; i < tc.compiler.size(); ++i) tc.identity += " " + tc.compiler[i];
  tc.gcc =
      v.output.find("Free Software Foundation") != std::string::npos && v.output.find("clang") == std::string::npos;
  return tc;
}

std::string dir_of_symbol(const void* symbol) {
  Dl_info info{};
  if (dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return "";
  std::error_code ec;
  fs::path p = fs::canonical(info.dli_fname, ec);
  return ec ? "" : p.parent_path().string();
}

std::string first_existing(const std::vector<std::string>& dirs, const std::string& probe) {
  for (const std::string& d : dirs) {
    if (!d.empty() && fs::exists(fs::path(d) / probe)) return d;
  }
  return "";
}

SystemPaths make_system_paths() {
  SystemPaths p;
  std::string self = dir_of_symbol(reinterpret_cast<const void*>(&default_cache_dir));
  p.kjit_lib = self;
  const char* env = std::getenv("KJIT_INCLUDE_DIR");
  p.kjit_include = first_existing({env ? env : "", self + "/../include", self + "/include",
#ifdef KJIT_SOURCE_INCLUDE_DIR
                                   KJIT_SOURCE_INCLUDE_DIR
#endif
                                  },
                                  "kjit/kernel.h");
  if (p.kjit_include.empty()) {
    throw ToolchainError("kjit: cannot find kjit/kernel.h near " + self + " (set KJIT_INCLUDE_DIR)");
  }
  p.tvm_ffi_lib = dir_of_symbol(reinterpret_cast<const void*>(&TVMFFIErrorSetRaisedFromCStr));
  p.tvm_ffi_include = first_existing({p.tvm_ffi_lib + "/../include",
#ifdef KJIT_TVM_FFI_INCLUDE_DIR
                                      KJIT_TVM_FFI_INCLUDE_DIR
#endif
                                     },
                                     "tvm/ffi/c_api.h");
  if (p.tvm_ffi_include.empty()) {
    throw ToolchainError("kjit: cannot find tvm/ffi/c_api.h next to libtvm_ffi in " + p.tvm_ffi_lib);
  }
  return p;
}

}  // namespace

const Toolchain& find_toolchain() {
  // Once per (CXX, PATH); a failure is thrown again on every call, never cached.
  static std::mutex mu;
  static std::map<std::string, Toolchain> cached;
  const char* cxx = std::getenv("CXX");
  const char* path = std::getenv("PATH");
  std::string env_key = std::string(cxx ? cxx : "") + '\0' + (path ? path : "");
  std::lock_guard<std::mutex> lock(mu);
  auto it = cached.find(env_key);
  if (it == cached.end()) it = cached.emplace(env_key, make_toolchain()).first;
  return it->second;
}

const std::vector<std::string>& default_host_cflags() {
  static const std::vector<std::string> flags{"-std=c++17", "-O2", "-fPIC", "-fvisibility=hidden"};
  return flags;
}

const std::vector<std::string>& jit_machine_cflags() {
  static const std::vector<std::string> flags = [] {
    std::vector<std::string> f{"-O3"};
    f.insert(f.end(), host_isa_cflags().begin(), host_isa_cflags().end());
    return f;
  }();
  return flags;
}

const SystemPaths& system_paths() {
  static const SystemPaths paths = make_system_paths();
  return paths;
}

std::string absolute_cache_dir(const std::string& dir) {
  if (dir.empty() || dir[0] == '/') return dir;
  static std::mutex mu;
  static std::map<std::string, std::string> resolved;  // relative text -> its first absolute form
  std::lock_guard<std::mutex> lock(mu);
  auto it = resolved.find(dir);
  if (it != resolved.end()) return it->second;
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(dir, ec);
  if (ec) throw CacheError("kjit: cannot resolve the cache directory '" + dir + "': " + ec.message());
  return resolved.emplace(dir, abs.lexically_normal().string()).first->second;
}

std::string default_cache_dir() {
  const char* dir = std::getenv("KJIT_CACHE_DIR");
  if (dir != nullptr && *dir != '\0') return absolute_cache_dir(dir);
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && *xdg != '\0') return absolute_cache_dir(std::string(xdg) + "/kjit");
  const char* home = std::getenv("HOME");
  return absolute_cache_dir(std::string(home ? home : "/tmp") + "/.cache/kjit");
}

}  // namespace kjit
