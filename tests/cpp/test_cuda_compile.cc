// The generated code of CUDA modules compiles for the GPU targets without a GPU:
// device translation units through nvcc (SASS for sm_80 and sm_90, read back out of
// the object's fatbinary) and the kernels alone through NVRTC (CUBIN, and PTX that
// ptxas accepts); host stub translation units through nvcc, g++ and clang++ with
// warnings as errors, linked against the device objects with no undefined symbol;
// load_inline's CUDA build (architectures in the cache key and on nvcc's command
// line); and the parsing and selection of CUDA architectures.
//
// Everything skips when the CUDA toolkit is missing; nothing needs a driver.
#include <dlfcn.h>
#include <elf.h>
#include <gtest/gtest.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "decl_builders.h"
#include "kjit/build.h"
#include "kjit/codegen.h"
#include "kjit/declare.h"
#include "kjit/errors.h"
#include "kjit/runtime.h"
#include "test_dirs.h"

namespace kjit {
namespace {

namespace fs = std::filesystem;
using kjit_test::TempDir;
using kjit_test::write_file;

// ---------------------------------------------------------------------------
// Sample kernels. `device` is what NVRTC can compile alone (the __global__
// functions and what they need: no host code, no <cstdint>); `host` holds the
// plain entry points kjit calls, which launch the kernels. A module's
// cuda_sources entry is device + host.

struct Sample {
  const char* name;
  const char* device;
  const char* host;
  std::vector<FunctionDecl> decls;
  std::vector<std::string> kernels;           ///< substrings of the kernels' mangled names
  std::vector<std::string> name_expressions;  ///< NVRTC instantiations of templated kernels
  int kernel_count;                           ///< __global__ functions in the object
  std::string cuda_source() const { return std::string(device) + "\n" + host; }
};
void PrintTo(const Sample& s, std::ostream* os) { *os << s.name; }

using kjit_test::infer_decl;
using kjit_test::signature_decl;
using kjit_test::tokens_decl;

const char* kVaddDevice = R"(
__global__ void vadd_kernel(const float* a, const float* b, float* c, long long n) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
)";
const char* kVaddHost = R"(
#include <cuda_runtime.h>
void vadd(const float* a, const float* b, float* c, int64_t n, cudaStream_t stream) {
  vadd_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(a, b, c, n);
}
)";

const char* kScaleDevice = R"(
#include <cuda_fp16.h>
template <typename T>
__global__ void scale_kernel(T* x, float a, long long n) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i < n) x[i] = T(static_cast<float>(x[i]) * a);
}
)";
const char* kScaleHost = R"(
#include <cuda_runtime.h>
template <typename T>
void launch_scale(T* x, float a, int64_t n, cudaStream_t stream) {
  scale_kernel<T><<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(x, a, n);
}
void scale_f32(float* x, float a, int64_t n, cudaStream_t stream) { launch_scale(x, a, n, stream); }
void scale_f16(__half* x, float a, int64_t n, cudaStream_t stream) { launch_scale(x, a, n, stream); }
)";

const char* kFillDevice = R"(
__global__ void fill_kernel(float* x, float value, long long n) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i < n) x[i] = value;
}
)";
const char* kFillHost = R"(
#include <cuda_runtime.h>
void fill(kjit::TensorView x, float value, kjit::Stream stream) {
  const int64_t n = x.numel();
  fill_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(
      x.data<float>(), value, n);
}
)";

const std::vector<Sample>& samples() {
  static const std::vector<Sample> all = {
      {"vadd",
       kVaddDevice,
       kVaddHost,
       {signature_decl("vadd", "a: float32[n], b: float32[n], c: float32[n] out, n: int64, stream: stream")},
       {"vadd_kernel"},
       {},
       1},
      {"scale",
       kScaleDevice,
       kScaleHost,
       {infer_decl("scale_f32"), infer_decl("scale_f16")},
       {"scale_kernelIf", "scale_kernelI6__half"},
       {"scale_kernel<float>", "scale_kernel<__half>"},
       2},
      {"fill", kFillDevice, kFillHost, {tokens_decl("fill", {"ret", "attr.value", "stream"})}, {"fill_kernel"}, {}, 1},
  };
  return all;
}

/// A CPU function for the mixed module: same module, host compiler, @cpu.
const char* kOnesCpp = R"(
#include <kjit/kernel.h>
void ones(kjit::TensorView x) {
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = 1.0f;
}
)";

// ---------------------------------------------------------------------------
// Helpers: files, processes, the toolkit.

std::string read_file(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string join(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) out += (out.empty() ? "" : " ") + a;
  return out;
}

/// The toolkit, or null (the test skips) when this machine has none.
const CudaToolchain* toolkit() {
  try {
    return &find_cuda_toolchain();
  } catch (const ToolchainError&) {
    return nullptr;
  }
}

std::string tool(const std::string& name) { return toolkit()->root + "/bin/" + name; }

std::vector<std::string> include_flags() {
  const SystemPaths& sys = system_paths();
  return {"-I" + sys.kjit_include, "-I" + sys.tvm_ffi_include};
}

/// Runs argv; on failure the assertion shows the command and its output.
::testing::AssertionResult runs(const std::vector<std::string>& argv, std::string* output = nullptr) {
  ProcessResult p = run_process(argv);
  if (output != nullptr) *output = p.output;
  if (p.exit_code == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "exit status " << p.exit_code << "\ncommand: " << join(argv) << "\n"
                                       << p.output;
}

// ---------------------------------------------------------------------------
// Reading what the compilers produced: ELF sections, the fatbinary nvcc embeds
// in an object (.nv_fatbin), and the target of a CUDA ELF (cubin).

struct ElfSection {
  std::string name;
  std::string bytes;
};

/// The sections of a little-endian ELF64 image; empty if it is not one.
std::vector<ElfSection> elf_sections(const std::string& image) {
  std::vector<ElfSection> out;
  if (image.size() < sizeof(Elf64_Ehdr) || image.compare(0, 4, ELFMAG) != 0 || image[EI_CLASS] != ELFCLASS64)
    return out;
  Elf64_Ehdr eh;
  std::memcpy(&eh, image.data(), sizeof(eh));
  if (eh.e_shoff == 0 || eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shstrndx >= eh.e_shnum ||
      eh.e_shoff + uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr) > image.size())
    return out;
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  std::memcpy(sh.data(), image.data() + eh.e_shoff, eh.e_shnum * sizeof(Elf64_Shdr));
  const Elf64_Shdr& names = sh[eh.e_shstrndx];
  for (const Elf64_Shdr& s : sh) {
    ElfSection sec;
    if (names.sh_offset + s.sh_name < image.size()) sec.name = image.c_str() + names.sh_offset + s.sh_name;
    if (s.sh_type != SHT_NOBITS && s.sh_offset + s.sh_size <= image.size())
      sec.bytes = image.substr(s.sh_offset, s.sh_size);
    out.push_back(std::move(sec));
  }
  return out;
}

/// The SASS target of a CUDA ELF (cubin): 80 for sm_80; -1 if it is not one.
int cubin_arch(const std::string& image) {
  if (image.size() < sizeof(Elf64_Ehdr) || image.compare(0, 4, ELFMAG) != 0) return -1;
  Elf64_Ehdr eh;
  std::memcpy(&eh, image.data(), sizeof(eh));
  if (eh.e_machine != EM_CUDA) return -1;
  // ELF ABI version 8 (CUDA 12.8 on) keeps the SM in bits 8-15 of e_flags; before, bits 0-7.
  return eh.e_ident[EI_ABIVERSION] >= 8 ? static_cast<int>((eh.e_flags >> 8) & 0xff)
                                        : static_cast<int>(eh.e_flags & 0xff);
}

/// Names of the kernels' code sections in a cubin (".text.<mangled name>").
std::vector<std::string> kernel_sections(const std::string& cubin) {
  std::vector<std::string> out;
  for (const ElfSection& s : elf_sections(cubin)) {
    if (s.name.rfind(".text.", 0) == 0) out.push_back(s.name);
  }
  return out;
}

struct FatbinEntry {
  int kind = 0;  ///< 1: PTX, 2: ELF (SASS)
  int arch = 0;  ///< 80 for sm_80 / compute_80
  uint64_t flags = 0;
  std::string payload;
  bool compressed() const { return (flags & 0xa000) != 0; }  // 0x2000 (LZ4), 0x8000 (zstd)
};

/// The entries of every fatbinary in a .nv_fatbin section. Layout: a 16-byte
/// header (magic 0xBA55ED50, version, header size, size of the entries), then
/// per entry a header (kind @0, header size @4, payload size @8, arch @28,
/// flags @40) and the payload.
std::vector<FatbinEntry> fatbin_entries(const std::string& section) {
  std::vector<FatbinEntry> out;
  auto u16 = [&](size_t at) {
    uint16_t v;
    std::memcpy(&v, section.data() + at, 2);
    return v;
  };
  auto u32 = [&](size_t at) {
    uint32_t v;
    std::memcpy(&v, section.data() + at, 4);
    return v;
  };
  auto u64 = [&](size_t at) {
    uint64_t v;
    std::memcpy(&v, section.data() + at, 8);
    return v;
  };
  size_t at = 0;
  while (at + 16 <= section.size()) {
    if (u32(at) != 0xBA55ED50u) {
      at += 8;  // padding between fatbinaries
      continue;
    }
    size_t begin = at + u16(at + 6), end = begin + u64(at + 8);
    if (end > section.size()) break;
    for (size_t e = begin; e + 48 <= end;) {
      FatbinEntry entry;
      entry.kind = u16(e);
      uint32_t header = u32(e + 4);
      uint64_t size = u64(e + 8);
      entry.arch = static_cast<int>(u32(e + 28));
      entry.flags = u64(e + 40);
      if (header == 0 || e + header + size > end) break;
      entry.payload = section.substr(e + header, size);
      out.push_back(std::move(entry));
      e += header + size;
    }
    at = end;
  }
  return out;
}

std::vector<FatbinEntry> fatbin_of(const fs::path& object) {
  for (const ElfSection& s : elf_sections(read_file(object))) {
    if (s.name == ".nv_fatbin") return fatbin_entries(s.bytes);
  }
  return {};
}

/// "sm_80 compute_90 ..." of a fatbinary, in a stable order.
std::string targets_of(const std::vector<FatbinEntry>& entries) {
  std::set<std::string> t;
  for (const FatbinEntry& e : entries)
    t.insert((e.kind == 2 ? "sm_" : e.kind == 1 ? "compute_" : "?_") + std::to_string(e.arch));
  std::string out;
  for (const std::string& s : t) out += (out.empty() ? "" : " ") + s;
  return out;
}

/// Checks that an uncompressed SASS entry is a cubin for its arch with the sample's kernels.
void expect_sass_has_kernels(const FatbinEntry& e, const Sample& s) {
  // nvcc compresses SASS on request only (-Xfatbin=-compress-all); a compressed
  // entry cannot be read here, so say so rather than pass without looking.
  ASSERT_FALSE(e.compressed()) << s.name << " sm_" << e.arch << ": compressed SASS (flags " << e.flags << ")";
  EXPECT_EQ(cubin_arch(e.payload), e.arch) << s.name;
  std::vector<std::string> texts = kernel_sections(e.payload);
  EXPECT_EQ(static_cast<int>(texts.size()), s.kernel_count) << s.name << " sm_" << e.arch;
  for (const std::string& k : s.kernels) {
    bool found = false;
    for (const std::string& t : texts) found = found || t.find(k) != std::string::npos;
    EXPECT_TRUE(found) << s.name << " sm_" << e.arch << ": no .text section for " << k;
  }
}

// ---------------------------------------------------------------------------
// Generated translation units.

/// What load_inline emits for these sources and declarations (without building).
ModuleSource emit(const std::string& name, const std::vector<std::string>& cpp, const std::vector<std::string>& cuda,
                  const std::vector<FunctionDecl>& decls) {
  std::vector<SourceText> cpp_src = label_sources(cpp, "cpp_sources", false);
  std::vector<SourceText> cuda_src = label_sources(cuda, "cuda_sources", true);
  std::vector<SourceText> all = cpp_src;
  all.insert(all.end(), cuda_src.begin(), cuda_src.end());
  ModuleSourceOptions options;
  options.cuda_sources = cuda_src;
  return emit_module_source(cpp_src, resolve_functions(decls, all), name + ".cc", options);
}

/// The entry point taking `__half*` (the host TU only declares `struct __half;`);
/// HalfPointerEntryHostTuCompiles is about it, the other host TU tests leave it out.
const char* const kHalfEntry = "scale_f16";

std::vector<FunctionDecl> declarations(const Sample& s, bool with_half) {
  std::vector<FunctionDecl> out;
  for (const FunctionDecl& d : s.decls) {
    if (with_half || d.name != kHalfEntry) out.push_back(d);
  }
  return out;
}

ModuleSource emit_sample(const Sample& s, bool with_half = false) {
  return emit(std::string("cc_") + s.name, {}, {s.cuda_source()}, declarations(s, with_half));
}

/// One module with a CPU function and every sample's device code.
ModuleSource emit_mixed(bool with_half = false) {
  std::vector<std::string> cuda;
  std::vector<FunctionDecl> decls{infer_decl("ones")};
  for (const Sample& s : samples()) {
    cuda.push_back(s.cuda_source());
    std::vector<FunctionDecl> d = declarations(s, with_half);
    decls.insert(decls.end(), d.begin(), d.end());
  }
  return emit("cc_mixed", {kOnesCpp}, cuda, decls);
}

std::vector<std::string> nvcc_device_command(const fs::path& cu, const fs::path& out,
                                             const std::vector<std::string>& extra = {}) {
  std::vector<std::string> argv = toolkit()->nvcc;
  for (const char* f : {"-std=c++17", "-O3", "-Xcompiler=-fPIC", "-c", "-gencode=arch=compute_80,code=sm_80",
                        "-gencode=arch=compute_90,code=sm_90", "-gencode=arch=compute_90,code=compute_90"})
    argv.push_back(f);
  for (const std::string& i : include_flags()) argv.push_back(i);
  argv.insert(argv.end(), extra.begin(), extra.end());
  for (const std::string& s : {std::string("-x"), std::string("cu"), cu.string(), std::string("-o"), out.string()})
    argv.push_back(s);
  return argv;
}

class CudaCompileBase : public ::testing::Test {
 protected:
  void SetUp() override {
    if (toolkit() == nullptr) GTEST_SKIP() << "no CUDA toolkit (nvcc) on this machine";
  }
};

// ---------------------------------------------------------------------------
// Device translation units through nvcc: SASS for sm_80 and sm_90, PTX for compute_90.

class CudaCompileNvcc : public CudaCompileBase, public ::testing::WithParamInterface<Sample> {};

TEST_P(CudaCompileNvcc, DeviceTuHasSassForSm80AndSm90) {
  const Sample& s = GetParam();
  ModuleSource src = emit_sample(s);
  ASSERT_FALSE(src.cuda_text.empty());
  EXPECT_EQ(src.cuda_text.find("tvm/ffi"), std::string::npos) << "the .cu must not include tvm-ffi headers";
  EXPECT_NE(src.cuda_text.find("#line 1 \"cuda_sources\""), std::string::npos);
  TempDir tmp;
  write_file(tmp / "device.cu", src.cuda_text);
  // Warnings as errors, nvcc's own (EDG, -Werror all-warnings) and the host compiler's.
  ASSERT_TRUE(runs(nvcc_device_command(tmp / "device.cu", tmp / "device.o",
                                       {"-Werror", "all-warnings", "-Xcompiler=-Wall,-Wextra,-Werror"})));
  std::vector<FatbinEntry> fat = fatbin_of(tmp / "device.o");
  EXPECT_EQ(targets_of(fat), "compute_90 sm_80 sm_90");
  int sass = 0;
  for (const FatbinEntry& e : fat) {
    if (e.kind != 2) continue;
    ++sass;
    expect_sass_has_kernels(e, s);
  }
  EXPECT_EQ(sass, 2);
}

TEST_P(CudaCompileNvcc, DeviceTuCompilesToACubinPerArch) {
  const Sample& s = GetParam();
  TempDir tmp;
  write_file(tmp / "device.cu", emit_sample(s).cuda_text);
  std::vector<std::vector<std::string>> commands;
  for (int arch : {80, 90}) {
    std::vector<std::string> argv = toolkit()->nvcc;
    argv.insert(argv.end(), {"-std=c++17", "-cubin", "-arch=sm_" + std::to_string(arch)});
    for (const std::string& i : include_flags()) argv.push_back(i);
    argv.insert(argv.end(), {(tmp / "device.cu").string(), "-o", (tmp / (std::to_string(arch) + ".cubin")).string()});
    commands.push_back(argv);
  }
  std::vector<ProcessResult> results = run_processes(commands);
  for (size_t i = 0; i < results.size(); ++i) {
    ASSERT_EQ(results[i].exit_code, 0) << join(commands[i]) << "\n" << results[i].output;
  }
  for (int arch : {80, 90}) {
    FatbinEntry as_entry;
    as_entry.kind = 2;
    as_entry.arch = arch;
    as_entry.payload = read_file(tmp / (std::to_string(arch) + ".cubin"));
    EXPECT_EQ(cubin_arch(as_entry.payload), arch);
    expect_sass_has_kernels(as_entry, s);
  }
}

INSTANTIATE_TEST_SUITE_P(CudaCompileSamples, CudaCompileNvcc, ::testing::ValuesIn(samples()),
                         [](const ::testing::TestParamInfo<Sample>& info) { return std::string(info.param.name); });

// ---------------------------------------------------------------------------
// The kernels alone through NVRTC (loaded at run time, as a JIT would).

struct Nvrtc {
  using Program = void*;
  int (*create)(Program*, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  int (*compile)(Program, int, const char* const*) = nullptr;
  int (*destroy)(Program*) = nullptr;
  int (*log_size)(Program, size_t*) = nullptr;
  int (*log)(Program, char*) = nullptr;
  int (*cubin_size)(Program, size_t*) = nullptr;
  int (*cubin)(Program, char*) = nullptr;
  int (*ptx_size)(Program, size_t*) = nullptr;
  int (*ptx)(Program, char*) = nullptr;
  int (*add_name)(Program, const char*) = nullptr;
  int (*lowered_name)(Program, const char*, const char**) = nullptr;
  const char* (*error_string)(int) = nullptr;
  std::string path;

  /// libnvrtc.so.<major> of the toolkit kjit found; null if it does not load.
  static const Nvrtc* get() {
    static const Nvrtc* loaded = []() -> const Nvrtc* {
      const CudaToolchain* tc = toolkit();
      if (tc == nullptr) return nullptr;
      std::string major = tc->version.substr(0, tc->version.find('.'));
      for (const std::string& name : {"libnvrtc.so." + major, std::string("libnvrtc.so")}) {
        std::string path = tc->lib_dir + "/" + name;
        void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (lib == nullptr) continue;
        auto* n = new Nvrtc;
        n->path = path;
        bool ok = true;
        auto bind = [&](auto& fn, const char* sym) {
          fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, sym));
          ok = ok && fn != nullptr;
        };
        bind(n->create, "nvrtcCreateProgram");
        bind(n->compile, "nvrtcCompileProgram");
        bind(n->destroy, "nvrtcDestroyProgram");
        bind(n->log_size, "nvrtcGetProgramLogSize");
        bind(n->log, "nvrtcGetProgramLog");
        bind(n->cubin_size, "nvrtcGetCUBINSize");
        bind(n->cubin, "nvrtcGetCUBIN");
        bind(n->ptx_size, "nvrtcGetPTXSize");
        bind(n->ptx, "nvrtcGetPTX");
        bind(n->add_name, "nvrtcAddNameExpression");
        bind(n->lowered_name, "nvrtcGetLoweredName");
        bind(n->error_string, "nvrtcGetErrorString");
        if (ok) return n;
        delete n;
      }
      return nullptr;
    }();
    return loaded;
  }
};

struct NvrtcOutput {
  bool ok = false;
  std::string log;                   ///< the compile log (and the failing step)
  std::string image;                 ///< CUBIN for sm_XY, PTX for compute_XY
  std::vector<std::string> lowered;  ///< mangled names of the name expressions
};

NvrtcOutput nvrtc_compile(const Sample& s, const std::string& arch) {
  const Nvrtc& n = *Nvrtc::get();
  NvrtcOutput out;
  Nvrtc::Program prog = nullptr;
  if (int e = n.create(&prog, s.device, (std::string(s.name) + ".cu").c_str(), 0, nullptr, nullptr)) {
    out.log = std::string("nvrtcCreateProgram: ") + n.error_string(e);
    return out;
  }
  for (const std::string& expr : s.name_expressions) n.add_name(prog, expr.c_str());
  std::string gpu = "--gpu-architecture=" + arch, inc = "-I" + toolkit()->include_dir;
  const char* options[] = {gpu.c_str(), "-std=c++17", inc.c_str()};
  int rc = n.compile(prog, 3, options);
  size_t size = 0;
  n.log_size(prog, &size);
  out.log.assign(size, '\0');
  if (size > 0) n.log(prog, out.log.data());
  if (rc != 0) {
    out.log = std::string("nvrtcCompileProgram: ") + n.error_string(rc) + "\n" + out.log;
  } else {
    bool ptx = arch.rfind("compute_", 0) == 0;
    size = 0;
    (ptx ? n.ptx_size : n.cubin_size)(prog, &size);
    out.image.assign(size, '\0');
    if (size > 0) (ptx ? n.ptx : n.cubin)(prog, out.image.data());
    if (ptx && !out.image.empty() && out.image.back() == '\0') out.image.pop_back();
    for (const std::string& expr : s.name_expressions) {
      const char* lowered = nullptr;
      if (n.lowered_name(prog, expr.c_str(), &lowered) == 0 && lowered != nullptr) out.lowered.push_back(lowered);
    }
    out.ok = size > 0;
  }
  n.destroy(&prog);
  return out;
}

class CudaCompileNvrtc : public CudaCompileBase, public ::testing::WithParamInterface<Sample> {
 protected:
  void SetUp() override {
    CudaCompileBase::SetUp();
    if (IsSkipped()) return;
    if (Nvrtc::get() == nullptr) GTEST_SKIP() << "libnvrtc does not load from " << toolkit()->lib_dir;
  }
};

TEST_P(CudaCompileNvrtc, KernelsCompileToCubinForSm80AndSm90) {
  const Sample& s = GetParam();
  for (int arch : {80, 90}) {
    NvrtcOutput out = nvrtc_compile(s, "sm_" + std::to_string(arch));
    ASSERT_TRUE(out.ok) << s.name << " sm_" << arch << ":\n" << out.log;
    EXPECT_GT(out.image.size(), 0u);
    FatbinEntry as_entry;
    as_entry.kind = 2;
    as_entry.arch = arch;
    as_entry.payload = out.image;
    expect_sass_has_kernels(as_entry, s);
    // Templated kernels are instantiated by name expression; their mangled names are the cubin's.
    ASSERT_EQ(out.lowered.size(), s.name_expressions.size());
    std::vector<std::string> texts = kernel_sections(out.image);
    for (const std::string& mangled : out.lowered) {
      EXPECT_NE(std::find(texts.begin(), texts.end(), ".text." + mangled), texts.end()) << mangled;
    }
  }
}

TEST_P(CudaCompileNvrtc, PtxForCompute90AssemblesWithPtxas) {
  const Sample& s = GetParam();
  NvrtcOutput out = nvrtc_compile(s, "compute_90");
  ASSERT_TRUE(out.ok) << s.name << " compute_90:\n" << out.log;
  EXPECT_NE(out.image.find(".target sm_90"), std::string::npos);
  EXPECT_NE(out.image.find(".entry"), std::string::npos);
  TempDir tmp;
  write_file(tmp / "k.ptx", out.image);
  ASSERT_TRUE(runs({tool("ptxas"), "-arch=sm_90", (tmp / "k.ptx").string(), "-o", (tmp / "k.cubin").string()}));
  FatbinEntry as_entry;
  as_entry.kind = 2;
  as_entry.arch = 90;
  as_entry.payload = read_file(tmp / "k.cubin");
  expect_sass_has_kernels(as_entry, s);
}

INSTANTIATE_TEST_SUITE_P(CudaCompileSamples, CudaCompileNvrtc, ::testing::ValuesIn(samples()),
                         [](const ::testing::TestParamInfo<Sample>& info) { return std::string(info.param.name); });

class CudaCompileNvrtcErrors : public CudaCompileBase {};

TEST_F(CudaCompileNvrtcErrors, ReportTheCompileLog) {
  if (Nvrtc::get() == nullptr) GTEST_SKIP() << "libnvrtc does not load";
  Sample broken{"broken", "__global__ void k(float* x) { x[0] = undefined_name; }\n", "", {}, {}, {}, 0};
  NvrtcOutput out = nvrtc_compile(broken, "sm_90");
  EXPECT_FALSE(out.ok);
  EXPECT_NE(out.log.find("NVRTC_ERROR_COMPILATION"), std::string::npos) << out.log;
  EXPECT_NE(out.log.find("broken.cu(1): error: identifier \"undefined_name\" is undefined"), std::string::npos)
      << out.log;
}

// ---------------------------------------------------------------------------
// Host stub translation units: nvcc, g++ and clang++, warnings as errors; the
// host's declarations of the entry points match the device objects' definitions.

class CudaCompileHostTu : public CudaCompileBase {};

/// Host compilers on PATH among g++ and clang++.
std::vector<std::string> host_compilers() {
  std::vector<std::string> out;
  for (const char* cxx : {"g++", "clang++"}) {
    if (run_process({"sh", "-c", std::string("command -v ") + cxx}).exit_code == 0) out.push_back(cxx);
  }
  return out;
}

/// The flags a host TU must pass: what kjit uses, plus the usual strict set.
std::vector<std::string> strict_host_command(const std::string& cxx, const fs::path& cc, const fs::path& out) {
  std::vector<std::string> argv{cxx,     "-std=c++17", "-O2",        "-fPIC",    "-fvisibility=hidden",
                                "-Wall", "-Wextra",    "-Wpedantic", "-Wshadow", "-Werror",
                                "-c"};
  for (const std::string& i : include_flags()) argv.push_back(i);  // no CUDA include directory: none needed
  argv.insert(argv.end(), {cc.string(), "-o", out.string()});
  return argv;
}

/// Links objects into a shared library the way kjit does, but with every symbol
/// required to resolve (-Wl,--no-undefined).
std::vector<std::string> link_no_undefined(const std::vector<fs::path>& objects, const fs::path& out) {
  const SystemPaths& sys = system_paths();
  std::vector<std::string> argv{host_compilers().at(0), "-shared", "-Wl,--no-undefined"};
  for (const fs::path& o : objects) argv.push_back(o.string());
  argv.insert(argv.end(),
              {"-o", out.string(), "-L" + sys.tvm_ffi_lib, "-ltvm_ffi", "-L" + toolkit()->lib_dir, "-lcudart"});
  return argv;
}

TEST_F(CudaCompileHostTu, HostTuNeedsNoCudaHeaders) {
  ModuleSource src = emit_mixed(/*with_half=*/true);
  EXPECT_EQ(src.text.find("#include <cuda"), std::string::npos);
  for (const char* decl : {"struct CUstream_st;", "typedef struct CUstream_st* cudaStream_t;", "struct __half;",
                           "void vadd(const float*, const float*, float*, int64_t, cudaStream_t);",
                           "void scale_f16(__half*, float, int64_t, cudaStream_t);",
                           "void fill(kjit::TensorView, float, kjit::Stream);"}) {
    EXPECT_NE(src.text.find(decl), std::string::npos) << decl;
  }
}

TEST_F(CudaCompileHostTu, EachSampleHostTuCompilesWithEveryCompilerAndWerror) {
  std::vector<std::string> cxxs = host_compilers();
  ASSERT_FALSE(cxxs.empty());
  TempDir tmp;
  std::vector<std::vector<std::string>> commands;
  for (const Sample& s : samples()) {
    fs::path cc = tmp / (std::string(s.name) + ".cc");
    write_file(cc, emit_sample(s).text);
    for (const std::string& cxx : cxxs) commands.push_back(strict_host_command(cxx, cc, tmp / (cxx + s.name + ".o")));
  }
  std::vector<ProcessResult> results = run_processes(commands);
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_EQ(results[i].exit_code, 0) << join(commands[i]) << "\n" << results[i].output;
  }
}

TEST_F(CudaCompileHostTu, MixedHostTuCompilesWithNvcc) {
  TempDir tmp;
  write_file(tmp / "host.cc", emit_mixed().text);
  std::vector<std::string> argv = toolkit()->nvcc;
  argv.insert(argv.end(), {"-x", "cu", "-std=c++17", "-c", "-Xcompiler=-fPIC,-Wall,-Wextra,-Werror"});
  for (const std::string& i : include_flags()) argv.push_back(i);
  argv.insert(argv.end(), {(tmp / "host.cc").string(), "-o", (tmp / "host.o").string()});
  std::string output;
  ASSERT_TRUE(runs(argv, &output));
}

TEST_F(CudaCompileHostTu, MixedHostAndDeviceObjectsLinkWithNoUndefinedSymbol) {
  ModuleSource src = emit_mixed();
  TempDir tmp;
  write_file(tmp / "host.cc", src.text);
  write_file(tmp / "device.cu", src.cuda_text);
  std::vector<std::vector<std::string>> commands{
      strict_host_command(host_compilers().at(0), tmp / "host.cc", tmp / "host.o"),
      nvcc_device_command(tmp / "device.cu", tmp / "device.o")};
  std::vector<ProcessResult> results = run_processes(commands);
  for (size_t i = 0; i < results.size(); ++i) {
    ASSERT_EQ(results[i].exit_code, 0) << join(commands[i]) << "\n" << results[i].output;
  }
  // --no-undefined: a host declaration whose mangled name differs from the device
  // definition (say, __half declared differently) fails here, not at the first call.
  ASSERT_TRUE(runs(link_no_undefined({tmp / "host.o", tmp / "device.o"}, tmp / "mixed.so")));
  std::vector<FatbinEntry> fat = fatbin_of(tmp / "mixed.so");
  EXPECT_EQ(targets_of(fat), "compute_90 sm_80 sm_90");
}

// The documented `__half*` entry point compiles on the host side, where __half is
// only declared: the typed-pointer check never takes sizeof of an incomplete type.
TEST_F(CudaCompileHostTu, HalfPointerEntryHostTuCompiles) {
  const Sample& scale = samples()[1];
  ModuleSource src = emit_sample(scale, /*with_half=*/true);
  TempDir tmp;
  write_file(tmp / "host.cc", src.text);
  write_file(tmp / "device.cu", src.cuda_text);
  std::vector<std::vector<std::string>> commands;
  for (const std::string& cxx : host_compilers())
    commands.push_back(strict_host_command(cxx, tmp / "host.cc", tmp / (cxx + ".o")));
  commands.push_back(nvcc_device_command(tmp / "device.cu", tmp / "device.o"));
  std::vector<ProcessResult> results = run_processes(commands);
  for (size_t i = 0; i < results.size(); ++i) {
    ASSERT_EQ(results[i].exit_code, 0) << join(commands[i]) << "\n" << results[i].output;
  }
  // The host's `struct __half;` mangles like cuda_fp16.h's: scale_f16 resolves.
  ASSERT_TRUE(runs(link_no_undefined({tmp / (host_compilers().at(0) + ".o"), tmp / "device.o"}, tmp / "scale.so")));
}

// ---------------------------------------------------------------------------
// load_inline of a CUDA module: one cache entry per architecture list, the
// -gencode flags on nvcc's command line, and the SASS in the library.

class CudaCompileLoadInline : public CudaCompileBase {};

struct VerboseLoad {
  Module module;
  std::string log;
};

VerboseLoad load_vadd(const std::string& build_dir, const std::string& arch) {
  InlineOptions options;
  options.cuda_sources = {samples()[0].cuda_source()};
  options.cuda_arch = arch;
  options.build_directory = build_dir;
  options.verbose = true;
  ::testing::internal::CaptureStderr();
  try {
    Module m = load_inline("cc_vadd_load", {}, samples()[0].decls, options);
    return {m, ::testing::internal::GetCapturedStderr()};
  } catch (...) {
    std::cerr << ::testing::internal::GetCapturedStderr();
    throw;
  }
}

TEST_F(CudaCompileLoadInline, EachArchIsItsOwnCacheEntryWithItsGencode) {
  TempDir cache;
  VerboseLoad sm80 = load_vadd(cache.path().string(), "sm_80");
  VerboseLoad sm90 = load_vadd(cache.path().string(), "sm_90");
  EXPECT_FALSE(sm80.module.cache_hit());
  EXPECT_FALSE(sm90.module.cache_hit());
  EXPECT_NE(sm80.module.key(), sm90.module.key());
  EXPECT_NE(sm80.module.path(), sm90.module.path());
  EXPECT_EQ(sm80.module.full_source(), sm90.module.full_source());  // same host TU: only the device build differs

  EXPECT_NE(sm80.log.find("CUDA architectures sm_80 (given by cuda_arch)"), std::string::npos) << sm80.log;
  EXPECT_NE(sm80.log.find(" -gencode=arch=compute_80,code=sm_80 "), std::string::npos) << sm80.log;
  EXPECT_EQ(sm80.log.find("sm_90"), std::string::npos) << sm80.log;
  EXPECT_NE(sm90.log.find(" -gencode=arch=compute_90,code=sm_90 "), std::string::npos) << sm90.log;
  EXPECT_EQ(sm90.log.find("sm_80"), std::string::npos) << sm90.log;
  for (const std::string* log : {&sm80.log, &sm90.log}) {
    EXPECT_NE(log->find("/nvcc "), std::string::npos) << *log;
    EXPECT_NE(log->find(" -lcudart"), std::string::npos) << *log;  // the link step
  }

  EXPECT_EQ(targets_of(fatbin_of(sm80.module.path())), "sm_80");
  EXPECT_EQ(targets_of(fatbin_of(sm90.module.path())), "sm_90");

  // The same architectures again: the entry already built (no nvcc run).
  VerboseLoad again = load_vadd(cache.path().string(), "80");
  EXPECT_TRUE(again.module.cache_hit());
  EXPECT_EQ(again.module.key(), sm80.module.key());
  EXPECT_EQ(again.log.find("/nvcc "), std::string::npos) << again.log;
}

TEST_F(CudaCompileLoadInline, DefaultArchsAreSm80Sm90AndPtx) {
  std::string how;
  select_cuda_archs("", &how);
  if (how != "the default (no CUDA device visible)") GTEST_SKIP() << "architectures " << how;
  const char* env = std::getenv("KJIT_CUDA_ARCH");
  if (env != nullptr && *env != '\0') GTEST_SKIP() << "KJIT_CUDA_ARCH is set";
  TempDir cache;
  VerboseLoad def = load_vadd(cache.path().string(), "");
  for (const char* flag : {" -gencode=arch=compute_80,code=sm_80 ", " -gencode=arch=compute_90,code=sm_90 ",
                           " -gencode=arch=compute_90,code=compute_90 "}) {
    EXPECT_NE(def.log.find(flag), std::string::npos) << flag << "\n" << def.log;
  }
  EXPECT_EQ(targets_of(fatbin_of(def.module.path())), "compute_90 sm_80 sm_90");
}

TEST_F(CudaCompileLoadInline, CpuTensorsGetTheDeviceErrorBeforeAnyCudaCall) {
  TempDir cache;
  InlineOptions options;
  options.cuda_sources = {samples()[0].cuda_source()};
  options.cuda_arch = "sm_90";
  options.build_directory = cache.path().string();
  Module m = load_inline("cc_vadd_load", {}, samples()[0].decls, options);
  std::vector<float> a(4), b(4), c(4);
  int64_t shape[1] = {4};
  auto tensor = [&](std::vector<float>& v) {
    DLTensor t{};
    t.data = v.data();
    t.ndim = 1;
    t.shape = shape;
    t.dtype = {kDLFloat, 32, 1};
    t.device = {kDLCPU, 0};
    return t;
  };
  DLTensor ta = tensor(a), tb = tensor(b), tc = tensor(c);
  try {
    m.function("vadd")(&ta, &tb, &tc, 4);
    FAIL() << "expected the device check to fail";
  } catch (const tvm::ffi::Error& e) {
    EXPECT_EQ(e.kind() + ": " + e.message(), "ValueError: vadd: argument #0 'a': device must be cuda, got cpu");
  }
}

// ---------------------------------------------------------------------------
// parse_cuda_archs and select_cuda_archs.

std::string texts(const std::vector<CudaArch>& archs) {
  std::string out;
  for (const CudaArch& a : archs) out += (out.empty() ? "" : ",") + a.text();
  return out;
}

std::string parse_error(const std::string& text, const std::string& origin = "cuda_arch") {
  try {
    std::string parsed = texts(parse_cuda_archs(text, origin));
    return "parsed: " + parsed;
  } catch (const SpecError& e) {
    return e.what();
  }
}

std::string not_an_arch(const std::string& origin, const std::string& entry) {
  return origin + ": '" + entry +
         "' is not a CUDA architecture; write sm_80, compute_90 (PTX), sm_90a, 8.0, 9.0+PTX or 80, separated by "
         "commas, semicolons or spaces";
}

TEST(CudaCompileArchs, ParsesEverySpelling) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"sm_80,sm_90", "sm_80,sm_90"},
      {"sm_80,sm_90,compute_90", "sm_80,sm_90,compute_90"},
      {"8.0;9.0+PTX", "sm_80,sm_90,compute_90"},
      {"80 90", "sm_80,sm_90"},
      {"compute_90", "compute_90"},
      {"sm_90a", "sm_90a"},
      {"9.0a", "sm_90a"},
      {"sm_90a+PTX", "sm_90a,compute_90a"},
      {"8.6+ptx", "sm_86,compute_86"},
      {"sm_90+PTX", "sm_90,compute_90"},
      {"compute_90+PTX", "compute_90"},
      {"10.0", "sm_100"},
      {"sm_100f", "sm_100f"},
      {"120", "sm_120"},
      {"sm_50", "sm_50"},
      {"  sm_80 ,, ;\tsm_90\n", "sm_80,sm_90"},  // any run of separators
      {"sm_80,80,8.0,sm_80", "sm_80"},           // duplicates collapse, first order kept
      {"9.0+PTX,compute_90,sm_90", "sm_90,compute_90"},
  };
  for (const auto& [text, expected] : cases) {
    EXPECT_EQ(parse_error(text), "parsed: " + expected) << "'" << text << "'";
  }
}

TEST(CudaCompileArchs, ArchFields) {
  std::vector<CudaArch> a = parse_cuda_archs("sm_90a,compute_80,8.6", "cuda_arch");
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0].number, 90);
  EXPECT_EQ(a[0].suffix, "a");
  EXPECT_FALSE(a[0].ptx);
  EXPECT_EQ(a[1].number, 80);
  EXPECT_TRUE(a[1].ptx);
  EXPECT_EQ(a[2].number, 86);
  EXPECT_EQ(a[2].suffix, "");
  EXPECT_EQ((CudaArch{75, "", true}).text(), "compute_75");
}

TEST(CudaCompileArchs, EveryBadEntryIsNamed) {
  for (const std::string entry : {"sm_8", "8", "sm_1000", "sm_45", "4.5", "sm_90b", "sm_", "compute_", "sm80", "gfx90a",
                                  "8.05", "8.6.1", "+PTX", "sm_90+PTX+PTX", "SM_80", "sm_x0", "-80"}) {
    EXPECT_EQ(parse_error("sm_80," + entry), not_an_arch("cuda_arch", entry)) << entry;
  }
  EXPECT_EQ(parse_error("sm_80 bogus", "KJIT_CUDA_ARCH"), not_an_arch("KJIT_CUDA_ARCH", "bogus"));
}

TEST(CudaCompileArchs, EmptyListIsAnError) {
  for (const std::string text : {"", " ", ",", " ;, \t"}) {
    EXPECT_EQ(parse_error(text), "cuda_arch: no CUDA architecture given (e.g. 'sm_80,sm_90')") << "'" << text << "'";
  }
  EXPECT_EQ(parse_error(";", "KJIT_CUDA_ARCH"), "KJIT_CUDA_ARCH: no CUDA architecture given (e.g. 'sm_80,sm_90')");
}

/// Sets (or with null, unsets) an environment variable for a scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

bool device_visible() {
  std::string how;
  ScopedEnv no_env("KJIT_CUDA_ARCH", nullptr);
  select_cuda_archs("", &how);
  return how == "of the visible devices";
}

TEST(CudaCompileArchs, ExplicitBeatsEnvironmentBeatsDefault) {
  std::string how;
  {
    ScopedEnv env("KJIT_CUDA_ARCH", "sm_75");
    EXPECT_EQ(texts(select_cuda_archs("8.6", &how)), "sm_86");
    EXPECT_EQ(how, "given by cuda_arch");
    EXPECT_EQ(texts(select_cuda_archs("", &how)), "sm_75");
    EXPECT_EQ(how, "from KJIT_CUDA_ARCH");
  }
  {
    ScopedEnv env("KJIT_CUDA_ARCH", "");  // empty: as if unset
    if (device_visible()) GTEST_SKIP() << "a CUDA device is visible: the default does not apply";
    EXPECT_EQ(texts(select_cuda_archs("", &how)), "sm_80,sm_90,compute_90");
    EXPECT_EQ(how, "the default (no CUDA device visible)");
  }
  {
    ScopedEnv env("KJIT_CUDA_ARCH", nullptr);
    EXPECT_EQ(texts(select_cuda_archs("", &how)), "sm_80,sm_90,compute_90");
    EXPECT_EQ(texts(select_cuda_archs("", nullptr)), "sm_80,sm_90,compute_90");  // `how` is optional
  }
}

TEST(CudaCompileArchs, ErrorsNameWhereTheArchsCameFrom) {
  ScopedEnv env("KJIT_CUDA_ARCH", "sm_80,volta");
  try {
    select_cuda_archs("", nullptr);
    FAIL() << "expected SpecError";
  } catch (const SpecError& e) {
    EXPECT_STREQ(e.what(), not_an_arch("KJIT_CUDA_ARCH", "volta").c_str());
  }
  // An explicit list wins, so a bad environment does not matter; a bad explicit list does.
  EXPECT_EQ(texts(select_cuda_archs("sm_90", nullptr)), "sm_90");
  try {
    select_cuda_archs("sm_90,turing", nullptr);
    FAIL() << "expected SpecError";
  } catch (const SpecError& e) {
    EXPECT_STREQ(e.what(), not_an_arch("cuda_arch", "turing").c_str());
  }
}

TEST_F(CudaCompileLoadInline, BadArchFailsBeforeAnyCompile) {
  InlineOptions options;
  options.cuda_sources = {samples()[0].cuda_source()};
  options.cuda_arch = "sm_80,sm_9";
  TempDir cache;
  options.build_directory = cache.path().string();
  try {
    load_inline("cc_bad_arch", {}, samples()[0].decls, options);
    FAIL() << "expected SpecError";
  } catch (const SpecError& e) {
    EXPECT_STREQ(e.what(), not_an_arch("cuda_arch", "sm_9").c_str());
  }
  EXPECT_TRUE(fs::is_empty(cache.path()));
}

}  // namespace
}  // namespace kjit
