// host_isa_cflags: what the machine kjit runs on can execute. Measured on float32
// add (bench_elementwise, one thread): AVX2 loops are 15-20% faster than the SSE2
// baseline from 2^14 to 2^18 elements, where NumPy's own loops use AVX2 or AVX-512;
// AVX-512 gained nothing more there.
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kjit/build.h"

namespace kjit {
namespace {

bool baseline_requested() {
  const char* v = std::getenv("KJIT_HOST_ISA");
  return v != nullptr && std::strcmp(v, "baseline") == 0;
}

#if defined(__x86_64__)
/// F16C, MOVBE and LZCNT from CPUID (clang's __builtin_cpu_supports does not
/// know their names): leaf 1 ECX bits 29 and 22, leaf 0x80000001 ECX bit 5.
bool has_f16c_movbe_lzcnt() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0) return false;
  const bool f16c = (c >> 29) & 1, movbe = (c >> 22) & 1;
  if (__get_cpuid(0x80000001, &a, &b, &c, &d) == 0) return false;
  return f16c && movbe && ((c >> 5) & 1);
}
#endif

bool has_x86_64_v3() {
#if defined(__x86_64__)
  // __builtin_cpu_supports("avx2") also checks that the OS saves the AVX state.
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi") &&
         __builtin_cpu_supports("bmi2") && has_f16c_movbe_lzcnt();
#else
  return false;
#endif
}

}  // namespace

const std::vector<std::string>& host_isa_cflags() {
  static const std::vector<std::string> flags = [] {
    if (baseline_requested() || !has_x86_64_v3()) return std::vector<std::string>{};
    // Named extensions rather than -march=x86-64-v3, which older compilers lack.
    return std::vector<std::string>{"-mavx2", "-mfma",   "-mf16c",  "-mbmi",
                                    "-mbmi2", "-mlzcnt", "-mmovbe", "-ffp-contract=off"};
  }();
  return flags;
}

}  // namespace kjit
