// NVRTC through dlopen so that libkjit loads on machines without CUDA; the
// library is resolved once, and a failure is remembered and reported each time.
#include "cuda/nvrtc.h"

#include <dlfcn.h>

#include <cstdlib>
#include <memory>

#include "kjit/errors.h"
#include "kjit/kernel.h"

namespace kjit {
namespace cuda {
namespace {

using Program = void*;  // nvrtcProgram
constexpr int kNvrtcSuccess = 0;

struct Nvrtc {
  int (*version)(int*, int*) = nullptr;
  const char* (*error_string)(int) = nullptr;
  int (*create)(Program*, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  int (*compile)(Program, int, const char* const*) = nullptr;
  int (*log_size)(Program, size_t*) = nullptr;
  int (*log)(Program, char*) = nullptr;
  int (*cubin_size)(Program, size_t*) = nullptr;
  int (*cubin)(Program, char*) = nullptr;
  int (*ptx_size)(Program, size_t*) = nullptr;
  int (*ptx)(Program, char*) = nullptr;
  int (*destroy)(Program*) = nullptr;
  int (*num_archs)(int*) = nullptr;  // optional (NVRTC >= 11.2)
  int (*archs)(int*) = nullptr;      // optional
  std::string error;                 // why loading failed; empty when loaded
};

/// Candidates in search order: the soname, the dev symlink, then the toolkit.
std::vector<std::string> library_candidates() {
  std::vector<std::string> c = {"libnvrtc.so.13", "libnvrtc.so"};
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    const char* root = std::getenv(var);
    if (root != nullptr && *root != '\0') c.push_back(std::string(root) + "/lib64/libnvrtc.so");
  }
  c.push_back("/usr/local/cuda/lib64/libnvrtc.so");
  return c;
}

void* open_library(std::string* tried) {
  for (const std::string& name : library_candidates()) {
    if (void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) return lib;
    const char* why = dlerror();
    *tried += (tried->empty() ? "" : "; ") + (why ? std::string(why) : name);
  }
  return nullptr;
}

template <typename Fn>
bool resolve(void* lib, const char* name, Fn* fn, std::string* missing) {
  *fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (*fn == nullptr) *missing += (missing->empty() ? "" : ", ") + std::string(name);
  return *fn != nullptr;
}

Nvrtc load_nvrtc() {
  Nvrtc n;
  std::string tried;
  void* lib = open_library(&tried);
  if (lib == nullptr) {
    n.error = "kjit: NVRTC (libnvrtc, the CUDA toolkit's runtime compiler) could not be loaded (" + tried +
              "); install the CUDA toolkit or set CUDA_HOME";
    return n;
  }
  std::string missing;
  resolve(lib, "nvrtcVersion", &n.version, &missing);
  resolve(lib, "nvrtcGetErrorString", &n.error_string, &missing);
  resolve(lib, "nvrtcCreateProgram", &n.create, &missing);
  resolve(lib, "nvrtcCompileProgram", &n.compile, &missing);
  resolve(lib, "nvrtcGetProgramLogSize", &n.log_size, &missing);
  resolve(lib, "nvrtcGetProgramLog", &n.log, &missing);
  resolve(lib, "nvrtcGetCUBINSize", &n.cubin_size, &missing);
  resolve(lib, "nvrtcGetCUBIN", &n.cubin, &missing);
  resolve(lib, "nvrtcGetPTXSize", &n.ptx_size, &missing);
  resolve(lib, "nvrtcGetPTX", &n.ptx, &missing);
  resolve(lib, "nvrtcDestroyProgram", &n.destroy, &missing);
  if (!missing.empty()) n.error = "kjit: the loaded NVRTC lacks " + missing + "; it is too old for kjit";
  std::string optional;
  resolve(lib, "nvrtcGetNumSupportedArchs", &n.num_archs, &optional);
  resolve(lib, "nvrtcGetSupportedArchs", &n.archs, &optional);
  return n;  // the handle stays open for the process: its functions are cached
}

/// The library, loaded on first use (a thread-safe static); throws ToolchainError.
const Nvrtc& nvrtc() {
  static const Nvrtc n = load_nvrtc();
  if (!n.error.empty()) throw ToolchainError(n.error);
  return n;
}

/// Destroys the program however compile_cuda leaves.
struct ProgramGuard {
  const Nvrtc& n;
  Program p = nullptr;
  ~ProgramGuard() {
    if (p != nullptr) n.destroy(&p);
  }
};

std::string program_log(const Nvrtc& n, Program p) {
  size_t size = 0;
  if (n.log_size(p, &size) != kNvrtcSuccess || size <= 1) return "";
  std::string log(size, '\0');
  if (n.log(p, &log[0]) != kNvrtcSuccess) return "";
  log.resize(size - 1);  // the trailing NUL
  return log;
}

std::string output(const Nvrtc& n, Program p, bool ptx) {
  size_t size = 0;
  int rc = ptx ? n.ptx_size(p, &size) : n.cubin_size(p, &size);
  std::string bytes(size, '\0');
  if (rc == kNvrtcSuccess && size > 0) rc = ptx ? n.ptx(p, &bytes[0]) : n.cubin(p, &bytes[0]);
  internal_check(rc == kNvrtcSuccess, "NVRTC compiled a program but did not return its output");
  if (ptx && !bytes.empty() && bytes.back() == '\0') bytes.pop_back();
  return bytes;
}

std::string command_text(const std::vector<std::string>& options) {
  std::string c = "nvrtc";
  for (const std::string& o : options) c += " " + o;
  return c;
}

void check(const Nvrtc& n, int rc, const char* what) {
  if (rc != kNvrtcSuccess) {
    throw ToolchainError(std::string("kjit: ") + what + " failed: " + n.error_string(rc));
  }
}

bool is_ptx_arch(const std::string& arch) {
  if (arch.rfind("compute_", 0) == 0) return true;
  if (arch.rfind("sm_", 0) == 0) return false;
  throw ValueError("kjit: '" + arch + "' is not an NVRTC architecture; write sm_XX (CUBIN) or compute_XX (PTX)");
}

}  // namespace

NvrtcVersion nvrtc_version() {
  NvrtcVersion v;
  check(nvrtc(), nvrtc().version(&v.major, &v.minor), "nvrtcVersion");
  return v;
}

std::vector<int> nvrtc_supported_archs() {
  const Nvrtc& n = nvrtc();
  int count = 0;
  if (n.num_archs == nullptr || n.archs == nullptr || n.num_archs(&count) != kNvrtcSuccess || count <= 0) return {};
  std::vector<int> archs(count);
  if (n.archs(archs.data()) != kNvrtcSuccess) return {};
  return archs;
}

NvrtcResult compile_cuda(const std::string& source, const std::string& arch, std::vector<std::string> options) {
  const bool ptx = is_ptx_arch(arch);
  const Nvrtc& n = nvrtc();
  options.insert(options.begin(), {"--std=c++17", "-default-device", "--gpu-architecture=" + arch});
  std::vector<const char*> argv;
  argv.reserve(options.size());
  for (const std::string& o : options) argv.push_back(o.c_str());
  ProgramGuard prog{n};
  check(n, n.create(&prog.p, source.c_str(), "kjit_elementwise.cu", 0, nullptr, nullptr), "nvrtcCreateProgram");
  const int rc = n.compile(prog.p, static_cast<int>(argv.size()), argv.data());
  NvrtcResult r;
  r.ptx = ptx;
  r.log = program_log(n, prog.p);
  if (rc != kNvrtcSuccess) {
    throw CompileError("kjit: NVRTC could not compile for " + arch + " (" + n.error_string(rc) + "):\n" + r.log,
                       command_text(options), r.log);
  }
  r.binary = output(n, prog.p, ptx);
  return r;
}

NvrtcResult compile_elementwise_cuda(const std::string& code, const std::string& entry, const EwKernelTypes& types,
                                     EwCudaVariant variant, const std::string& arch, std::vector<std::string> options) {
  std::string source = emit_elementwise_cuda(code, entry, types, variant);
  try {
    return compile_cuda(source, arch, std::move(options));
  } catch (const CompileError& e) {
    throw CompileError("kjit.elementwise '" + entry + "' " + types.text() + " (CUDA, " + ew_cuda_variant_name(variant) +
                           ", " + arch + "): the code does not compile:\n" + e.log() +
                           "(lines of 'code' are lines of the computation string)",
                       e.command(), e.log());
  }
}

}  // namespace cuda
}  // namespace kjit
