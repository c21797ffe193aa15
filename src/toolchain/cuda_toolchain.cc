// The CUDA toolkit (nvcc, headers, libcudart) and the architectures a build targets.
#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <set>

#include "kjit/build.h"
#include "kjit/errors.h"
#include "toolchain/paths.h"
#include "toolchain/version_probe.h"

namespace kjit {
namespace fs = std::filesystem;
namespace {

/// nvcc: CUDA_HOME/CUDA_PATH first (what the user pinned), then PATH, then the
/// conventional install location.
std::string locate_nvcc(std::string* searched) {
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    const char* root = std::getenv(var);
    if (root == nullptr || *root == '\0') continue;
    std::string candidate = std::string(root) + "/bin/nvcc";
    *searched += std::string(var) + "=" + root + ", ";
    if (build_detail::is_executable(candidate)) return candidate;
  }
  const char* path = std::getenv("PATH");
  *searched += "PATH=" + std::string(path ? path : "(unset)") + ", /usr/local/cuda/bin";
  std::string found = build_detail::which("nvcc");
  if (!found.empty()) return found;
  return build_detail::is_executable("/usr/local/cuda/bin/nvcc") ? "/usr/local/cuda/bin/nvcc" : "";
}

std::string release_of(const std::string& version_text) {
  size_t at = version_text.find("release ");
  if (at == std::string::npos) return "unknown";
  size_t begin = at + 8;
  size_t end = version_text.find_first_of(", \n", begin);
  return version_text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

CudaToolchain make_cuda_toolchain() {
  std::string searched;
  std::string nvcc = locate_nvcc(&searched);
  if (nvcc.empty()) {
    throw ToolchainError("kjit: cuda_sources need nvcc (the CUDA toolkit), and none was found (searched " + searched +
                         "); install the CUDA toolkit or set CUDA_HOME");
  }
  ProcessResult v = build_detail::probe_version({nvcc, "--version"});
  if (v.exit_code != 0) {
    throw ToolchainError("kjit: '" + nvcc + " --version' failed (exit status " + std::to_string(v.exit_code) +
                         "): " + build_detail::first_line(v.output));
  }
  std::error_code ec;
  fs::path real = fs::canonical(nvcc, ec);
  CudaToolchain tc;
  tc.nvcc = {real.empty() ? nvcc : real.string()};
  tc.version = release_of(v.output);
  tc.identity = tc.nvcc[0] + " | " + v.output;
  tc.root = fs::path(tc.nvcc[0]).parent_path().parent_path().string();
  tc.include_dir = tc.root + "/include";
  for (const char* lib : {"lib64", "lib", "targets/x86_64-linux/lib"}) {
    if (fs::exists(fs::path(tc.root) / lib / "libcudart.so")) {
      tc.lib_dir = tc.root + "/" + lib;
      break;
    }
  }
  if (tc.lib_dir.empty()) {
    throw ToolchainError("kjit: the CUDA toolkit at " + tc.root + " has no libcudart.so (looked in lib64, lib, " +
                         "targets/x86_64-linux/lib)");
  }
  return tc;
}

/// Compute capabilities of the visible devices through the driver API, loaded
/// lazily; empty when there is no driver or no device (as on kjit's CI machines).
std::vector<int> visible_device_archs() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return {};
  using InitFn = int (*)(unsigned);
  using CountFn = int (*)(int*);
  using AttrFn = int (*)(int*, int, int);
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "cuInit"));
  auto count = reinterpret_cast<CountFn>(dlsym(lib, "cuDeviceGetCount"));
  auto attr = reinterpret_cast<AttrFn>(dlsym(lib, "cuDeviceGetAttribute"));
  int n = 0;
  if (init == nullptr || count == nullptr || attr == nullptr || init(0) != 0 || count(&n) != 0) return {};
  constexpr int kMajor = 75, kMinor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR/MINOR
  std::set<int> archs;
  for (int d = 0; d < n; ++d) {
    int major = 0, minor = 0;
    if (attr(&major, kMajor, d) == 0 && attr(&minor, kMinor, d) == 0) archs.insert(major * 10 + minor);
  }
  return {archs.begin(), archs.end()};
}

[[noreturn]] void bad_arch(const std::string& entry, const std::string& origin) {
  throw SpecError(origin + ": '" + entry +
                  "' is not a CUDA architecture; write sm_80, compute_90 (PTX), sm_90a, 8.0, 9.0+PTX or 80, separated "
                  "by commas, semicolons or spaces");
}

/// "80" / "8.0" / "sm_80" / "compute_90" / "sm_90a" / "9.0+PTX" -> one or two archs.
std::vector<CudaArch> parse_entry(std::string e, const std::string& origin) {
  std::string original = e;
  bool plus_ptx = false;
  for (const char* suffix : {"+PTX", "+ptx"}) {
    size_t n = std::char_traits<char>::length(suffix);
    if (e.size() > n && e.compare(e.size() - n, n, suffix) == 0) {
      plus_ptx = true;
      e.resize(e.size() - n);
    }
  }
  CudaArch a;
  if (e.rfind("sm_", 0) == 0) {
    e = e.substr(3);
  } else if (e.rfind("compute_", 0) == 0) {
    e = e.substr(8);
    a.ptx = true;
  }
  size_t dot = e.find('.');
  if (dot != std::string::npos) e.erase(dot, 1);
  size_t digits = 0;
  while (digits < e.size() && std::isdigit(static_cast<unsigned char>(e[digits]))) ++digits;
  if (digits < 2 || digits > 3 || (dot != std::string::npos && dot != digits - 1)) bad_arch(original, origin);
  a.number = std::stoi(e.substr(0, digits));
  a.suffix = e.substr(digits);
  // nvcc knows sm_50 .. sm_121 (CUDA 13); "80.0" or "800" is a typo, not sm_800.
  if (!(a.suffix.empty() || a.suffix == "a" || a.suffix == "f") || a.number < 50 || a.number > 199) {
    bad_arch(original, origin);
  }
  std::vector<CudaArch> out{a};
  if (plus_ptx && !a.ptx) {
    CudaArch ptx = a;
    ptx.ptx = true;
    out.push_back(ptx);
  }
  return out;
}

}  // namespace

std::string CudaArch::text() const { return (ptx ? "compute_" : "sm_") + std::to_string(number) + suffix; }

const CudaToolchain& find_cuda_toolchain() {
  static std::mutex mu;
  static std::unique_ptr<CudaToolchain> found;
  std::lock_guard<std::mutex> lock(mu);
  if (!found) found = std::make_unique<CudaToolchain>(make_cuda_toolchain());  // a failure is retried next time
  return *found;
}

std::vector<CudaArch> parse_cuda_archs(const std::string& text, const std::string& origin) {
  std::vector<CudaArch> out;
  std::string entry;
  auto flush = [&] {
    if (entry.empty()) return;
    for (const CudaArch& a : parse_entry(entry, origin)) {
      bool dup = std::any_of(out.begin(), out.end(), [&](const CudaArch& b) { return b.text() == a.text(); });
      if (!dup) out.push_back(a);
    }
    entry.clear();
  };
  for (char c : text) {
    if (c == ',' || c == ';' || std::isspace(static_cast<unsigned char>(c))) {
      flush();
    } else {
      entry += c;
    }
  }
  flush();
  if (out.empty()) throw SpecError(origin + ": no CUDA architecture given (e.g. 'sm_80,sm_90')");
  return out;
}

std::vector<CudaArch> select_cuda_archs(const std::string& explicit_archs, std::string* how) {
  auto say = [&](const std::string& s) {
    if (how != nullptr) *how = s;
  };
  if (!explicit_archs.empty()) {
    say("given by cuda_arch");
    return parse_cuda_archs(explicit_archs, "cuda_arch");
  }
  const char* env = std::getenv("KJIT_CUDA_ARCH");
  if (env != nullptr && *env != '\0') {
    say("from KJIT_CUDA_ARCH");
    return parse_cuda_archs(env, "KJIT_CUDA_ARCH");
  }
  static const std::vector<int> visible = visible_device_archs();
  if (!visible.empty()) {
    say("of the visible devices");
    std::vector<CudaArch> out;
    out.reserve(visible.size());
    for (int n : visible) out.push_back(CudaArch{n, "", false});
    return out;
  }
  say("the default (no CUDA device visible)");
  return {CudaArch{80, "", false}, CudaArch{90, "", false}, CudaArch{90, "", true}};
}

}  // namespace kjit
