// bench_stub_call: per-call cost of a kjit-generated host stub (full checks on three
// 2-D float32 tensors) against the same no-op exported with tvm-ffi's
// TVM_FFI_DLL_EXPORT_TYPED_FUNC over three tvm::ffi::TensorView (kind checks only),
// and a hand-written C stub that only checks the argument count (the floor).
//
// All three are built at runtime into their own shared library and called the same
// way: through the raw safe-call pointer `__tvm_ffi_noop` found with dlsym, with three
// prebuilt TVMFFIAny. Two argument kinds are measured: kTVMFFIDLTensorPtr pointing to
// static DLTensors (64x64 float32, CPU) and kTVMFFITensor objects (what the Python
// binding passes). The same calls through tvm::ffi::Function are measured too.
//
// Every case is registered in several interleaved rounds (A B C A B C ...) so that a
// concurrent load on the machine hits all of them alike; the summary reports the
// minimum and the median over rounds.
//
// Usage: bench_stub_call [--rounds=N] [--min_time=SECONDS] [google-benchmark flags]
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <tvm/ffi/c_api.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/module.h>
#include <tvm/ffi/function.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "kjit/runtime.h"

#ifndef KJIT_BENCH_TVM_FFI_INCLUDEDIR
#error "KJIT_BENCH_TVM_FFI_INCLUDEDIR must be defined (python -m tvm_ffi.config --includedir)"
#endif
#ifndef KJIT_BENCH_TVM_FFI_LIBDIR
#error "KJIT_BENCH_TVM_FFI_LIBDIR must be defined (python -m tvm_ffi.config --libdir)"
#endif

namespace fs = std::filesystem;

namespace {

using SafeCall = int (*)(void*, const TVMFFIAny*, int32_t, TVMFFIAny*);

constexpr const char* kSignature = "a: float32[m, n], b: float32[m, n], c: float32[m, n] out";

constexpr const char* kKjitSource =
    "void noop(const kjit::TensorView a, const kjit::TensorView b, kjit::TensorView c) {}\n";

constexpr const char* kTypedSource = R"(#include <tvm/ffi/function.h>
#include <tvm/ffi/container/tensor.h>
void noop(tvm::ffi::TensorView a, tvm::ffi::TensorView b, tvm::ffi::TensorView c) {}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(noop, noop);
)";

// The floor: what any safe call must at least do (count check, set a None result).
constexpr const char* kFloorSource = R"(#include <tvm/ffi/c_api.h>
extern "C" __attribute__((visibility("default")))
int __tvm_ffi_noop(void* self, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  (void)self; (void)args;
  if (num_args != 3) {
    TVMFFIErrorSetRaisedFromCStr("TypeError", "noop: expected 3 arguments");
    return -1;
  }
  result->type_index = kTVMFFINone;
  result->zero_padding = 0;
  result->v_int64 = 0;
  return 0;
}
)";

// ---- the arguments -------------------------------------------------------------

float g_data[3][64 * 64];
int64_t g_shape[2] = {64, 64};
DLTensor g_dl[3];
TVMFFIAny g_args_dlptr[3];
TVMFFIAny g_args_tensor[3];
std::vector<tvm::ffi::Tensor> g_tensors;  // keep the Tensor objects alive

struct CPUAlloc {
  void AllocData(DLTensor* t) { t->data = std::calloc(static_cast<size_t>(tvm::ffi::GetDataSize(*t)), 1); }
  void FreeData(DLTensor* t) { std::free(t->data); }
};

void make_args() {
  for (int i = 0; i < 3; ++i) {
    DLTensor& t = g_dl[i];
    t.data = g_data[i];
    t.device = DLDevice{kDLCPU, 0};
    t.ndim = 2;
    t.dtype = DLDataType{kDLFloat, 32, 1};
    t.shape = g_shape;
    t.strides = nullptr;
    t.byte_offset = 0;
    g_args_dlptr[i].type_index = kTVMFFIDLTensorPtr;
    g_args_dlptr[i].zero_padding = 0;
    g_args_dlptr[i].v_ptr = &t;

    tvm::ffi::Tensor obj = tvm::ffi::Tensor::FromNDAlloc(CPUAlloc(), tvm::ffi::ShapeView(g_shape, 2),
                                                         DLDataType{kDLFloat, 32, 1}, DLDevice{kDLCPU, 0});
    g_args_tensor[i].type_index = kTVMFFITensor;
    g_args_tensor[i].zero_padding = 0;
    g_args_tensor[i].v_obj = tvm::ffi::detail::ObjectUnsafe::TVMFFIObjectPtrFromObjectRef(obj);
    g_tensors.push_back(std::move(obj));
  }
}

// ---- building the three libraries ------------------------------------------------

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream f(p);
  f << text;
  if (!f) throw std::runtime_error("cannot write " + p.string());
}

// Compiles one .cc into a shared library with the system C++ compiler, the way a
// tvm-ffi user (or tvm_ffi.cpp.load_inline) would: -std=c++17 -O2 -fPIC -shared.
std::string compile_shared(const fs::path& dir, const std::string& stem, const std::string& source) {
  fs::path src = dir / (stem + ".cc");
  fs::path lib = dir / (stem + ".so");
  write_file(src, source);
  const char* cxx_env = std::getenv("CXX");
  std::string cxx = (cxx_env && *cxx_env) ? cxx_env : "c++";
  std::string cmd = cxx + " -std=c++17 -O2 -fPIC -shared -I" + shell_quote(KJIT_BENCH_TVM_FFI_INCLUDEDIR) + " " +
                    shell_quote(src.string()) + " -o " + shell_quote(lib.string()) + " -L" +
                    shell_quote(KJIT_BENCH_TVM_FFI_LIBDIR) + " -ltvm_ffi -Wl,-rpath," +
                    shell_quote(KJIT_BENCH_TVM_FFI_LIBDIR);
  auto t0 = std::chrono::steady_clock::now();
  int rc = std::system(cmd.c_str());
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (rc != 0) throw std::runtime_error("compile failed (" + std::to_string(rc) + "): " + cmd);
  std::fprintf(stderr, "[bench] built %s in %.2f s\n", lib.c_str(), s);
  return lib.string();
}

// The raw safe call of an already loaded library (loaded by Module::LoadFromFile).
SafeCall raw_symbol(const std::string& lib_path) {
  void* h = dlopen(lib_path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) throw std::runtime_error("dlopen(RTLD_NOLOAD) " + lib_path + ": " + dlerror());
  void* sym = dlsym(h, "__tvm_ffi_noop");
  if (sym == nullptr) throw std::runtime_error("no __tvm_ffi_noop in " + lib_path);
  dlclose(h);  // drops only the reference taken here; the module keeps the library loaded
  return reinterpret_cast<SafeCall>(sym);
}

struct Target {
  std::string label;
  tvm::ffi::Module module;  // keeps the library loaded
  tvm::ffi::Function function;
  SafeCall raw = nullptr;
};
std::vector<Target> g_targets;  // floor, typed, kjit

// ---- the benchmarks --------------------------------------------------------------

void BM_raw(benchmark::State& state, SafeCall fn, const TVMFFIAny* args) {
  TVMFFIAny result;
  for (auto _ : state) {
    result.type_index = kTVMFFINone;
    result.zero_padding = 0;
    result.v_int64 = 0;
    int rc = fn(nullptr, args, 3, &result);
    benchmark::DoNotOptimize(rc);
    benchmark::DoNotOptimize(result);
    if (rc != 0) {
      state.SkipWithError("safe call failed");
      break;
    }
  }
}

void BM_function_dlptr(benchmark::State& state, const tvm::ffi::Function* fn) {
  DLTensor* a = &g_dl[0];
  DLTensor* b = &g_dl[1];
  DLTensor* c = &g_dl[2];
  for (auto _ : state) {
    tvm::ffi::Any r = (*fn)(a, b, c);
    benchmark::DoNotOptimize(r);
  }
}

void BM_function_tensor(benchmark::State& state, const tvm::ffi::Function* fn) {
  const tvm::ffi::Tensor& a = g_tensors[0];
  const tvm::ffi::Tensor& b = g_tensors[1];
  const tvm::ffi::Tensor& c = g_tensors[2];
  for (auto _ : state) {
    tvm::ffi::Any r = (*fn)(a, b, c);
    benchmark::DoNotOptimize(r);
  }
}

// Collects per-iteration times by case (the name without "/round:k").
class CollectingReporter : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, std::vector<double>> ns;
  std::vector<std::string> order;
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.run_type != Run::RT_Iteration || r.error_occurred) continue;
      std::string name = r.benchmark_name();
      auto pos = name.find("/round:");
      if (pos != std::string::npos) name = name.substr(0, pos);
      if (!ns.count(name)) order.push_back(name);
      ns[name].push_back(r.GetAdjustedRealTime());  // in ns (Unit(kNanosecond))
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 5;
  double min_time = 0.15;
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--rounds=", 9) == 0) {
      rounds = std::max(1, std::atoi(argv[i] + 9));
    } else if (std::strncmp(argv[i], "--min_time=", 11) == 0) {
      min_time = std::atof(argv[i] + 11);
    } else {
      rest.push_back(argv[i]);
    }
  }
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());

  // A private, cold work dir: kjit's cache and the two hand-compiled libraries.
  std::string tmpl = (fs::temp_directory_path() / "kjit-bench-stub-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  fs::path work(tmpl);

  try {
    make_args();

    // 1. the floor: a C stub that checks only the count
    {
      std::string lib = compile_shared(work, "floor_noop", kFloorSource);
      Target t{"floor (count only)", tvm::ffi::Module::LoadFromFile(lib), {}, nullptr};
      t.function = *t.module->GetFunction("noop");
      t.raw = raw_symbol(lib);
      g_targets.push_back(std::move(t));
    }
    // 2. tvm-ffi typed export over 3 tvm::ffi::TensorView
    {
      std::string lib = compile_shared(work, "typed_noop", kTypedSource);
      Target t{"tvm-ffi typed", tvm::ffi::Module::LoadFromFile(lib), {}, nullptr};
      t.function = *t.module->GetFunction("noop");
      t.raw = raw_symbol(lib);
      g_targets.push_back(std::move(t));
    }
    // 3. kjit: generated stub with all checks, through the C++ API
    {
      kjit::InlineOptions opt;
      opt.build_directory = (work / "kjit-cache").string();
      auto t0 = std::chrono::steady_clock::now();
      kjit::Module m = kjit::load_inline("bench_noop", {kKjitSource}, {{"noop", kSignature}}, opt);
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::fprintf(stderr, "[bench] kjit::load_inline built %s in %.2f s (cache_hit=%d)\n", m.path().c_str(), s,
                   int(m.cache_hit()));
      Target t{"kjit (full checks)", m.ffi_module(), m.function("noop"), nullptr};
      t.raw = raw_symbol(m.path());
      g_targets.push_back(std::move(t));
    }

    // Sanity: each target accepts the arguments, and kjit rejects a wrong call.
    for (const Target& t : g_targets) {
      TVMFFIAny r{};
      if (t.raw(nullptr, g_args_dlptr, 3, &r) != 0 || t.raw(nullptr, g_args_tensor, 3, &r) != 0) {
        std::fprintf(stderr, "%s: the call failed\n", t.label.c_str());
        return 1;
      }
    }
    {
      DLTensor bad = g_dl[2];
      int64_t bad_shape[2] = {64, 65};
      bad.shape = bad_shape;
      TVMFFIAny args[3] = {g_args_dlptr[0], g_args_dlptr[1], g_args_dlptr[2]};
      args[2].v_ptr = &bad;
      TVMFFIAny r{};
      if (g_targets[2].raw(nullptr, args, 3, &r) == 0) {
        std::fprintf(stderr, "kjit stub accepted a mismatched shape\n");
        return 1;
      }
      TVMFFIObjectHandle err = nullptr;
      TVMFFIErrorMoveFromRaised(&err);
      if (err) TVMFFIObjectDecRef(err);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "setup failed: %s\n", e.what());
    return 1;
  }

  const char* short_names[3] = {"floor", "typed", "kjit"};
  for (int round = 0; round < rounds; ++round) {
    for (int k = 0; k < 3; ++k) {
      std::string suffix = std::string("/") + short_names[k] + "/round:" + std::to_string(round);
      benchmark::RegisterBenchmark(("raw_dlptr" + suffix).c_str(), BM_raw, g_targets[k].raw, g_args_dlptr)
          ->Unit(benchmark::kNanosecond)
          ->MinTime(min_time);
    }
    for (int k = 0; k < 3; ++k) {
      std::string suffix = std::string("/") + short_names[k] + "/round:" + std::to_string(round);
      benchmark::RegisterBenchmark(("raw_tensor" + suffix).c_str(), BM_raw, g_targets[k].raw, g_args_tensor)
          ->Unit(benchmark::kNanosecond)
          ->MinTime(min_time);
    }
    for (int k = 0; k < 3; ++k) {
      std::string suffix = std::string("/") + short_names[k] + "/round:" + std::to_string(round);
      benchmark::RegisterBenchmark(("function_dlptr" + suffix).c_str(), BM_function_dlptr, &g_targets[k].function)
          ->Unit(benchmark::kNanosecond)
          ->MinTime(min_time);
    }
    for (int k = 0; k < 3; ++k) {
      std::string suffix = std::string("/") + short_names[k] + "/round:" + std::to_string(round);
      benchmark::RegisterBenchmark(("function_tensor" + suffix).c_str(), BM_function_tensor, &g_targets[k].function)
          ->Unit(benchmark::kNanosecond)
          ->MinTime(min_time);
    }
  }

  CollectingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  // Summary: min and median over rounds, and the ratios the target is about.
  std::printf("\n== per-call cost, ns (min / median over %d interleaved rounds) ==\n", rounds);
  std::printf("%-16s %22s %22s %22s %14s %14s\n", "mechanism", "floor (count only)", "tvm-ffi typed",
              "kjit (full checks)", "kjit/typed min", "kjit/typed med");
  bool all_met = true;
  bool any = false;
  const char* mechs[4] = {"raw_dlptr", "raw_tensor", "function_dlptr", "function_tensor"};
  for (const char* mech : mechs) {
    std::vector<double> mins(3, 0), meds(3, 0);
    bool ok = true;
    for (int k = 0; k < 3; ++k) {
      auto it = reporter.ns.find(std::string(mech) + "/" + short_names[k]);
      if (it == reporter.ns.end() || it->second.empty()) {
        ok = false;
        break;
      }
      mins[k] = *std::min_element(it->second.begin(), it->second.end());
      meds[k] = median(it->second);
    }
    if (!ok) continue;
    any = true;
    char cell[3][64];
    for (int k = 0; k < 3; ++k) std::snprintf(cell[k], sizeof cell[k], "%.2f / %.2f", mins[k], meds[k]);
    double rmin = mins[2] / mins[1], rmed = meds[2] / meds[1];
    std::printf("%-16s %22s %22s %22s %14.3f %14.3f\n", mech, cell[0], cell[1], cell[2], rmin, rmed);
    if (std::string(mech).rfind("raw_", 0) == 0 && rmin > 1.0) all_met = false;
  }
  if (any) {
    std::printf("\ntarget (raw safe call, kjit/typed <= 1.0 on the min): %s\n", all_met ? "MET" : "NOT MET");
  }

  std::error_code ec;
  g_targets.clear();  // the libraries stay mapped; removing the files is fine on Linux
  fs::remove_all(work, ec);
  return 0;
}
