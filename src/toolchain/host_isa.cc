// host_isa_cflags: what the machine kjit runs on can execute, as x86-64 levels
// (the psABI's x86-64-v3 and -v4). Measured on float32 add (bench_elementwise,
// one thread): AVX2 loops are 15-20% faster than the SSE2 baseline from 2^14 to
// 2^18 elements; on an AMD Zen 5 (full-width AVX-512), AVX-512 loops take
// 0.80-0.94x the AVX2 loops' time from 2^14 to 2^16 and tie them from memory, as
// torch's own AVX512 kernels do there.
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kjit/build.h"
#include "kjit/errors.h"

namespace kjit {
namespace {

enum class IsaLevel { kBaseline, kV3, kV4 };

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

/// The highest level this CPU and OS run. __builtin_cpu_supports also checks
/// that the OS saves the AVX (and AVX-512) register state.
IsaLevel cpu_level() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi") &&
                  __builtin_cpu_supports("bmi2") && has_f16c_movbe_lzcnt();
  if (!v3) return IsaLevel::kBaseline;
  const bool v4 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                  __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512dq");
  return v4 ? IsaLevel::kV4 : IsaLevel::kV3;
#else
  return IsaLevel::kBaseline;
#endif
}

/// KJIT_HOST_ISA caps the level: baseline, x86-64-v3 or x86-64-v4 (the default
/// is the CPU's own). A cap above the CPU's level leaves the CPU's.
IsaLevel requested_level(IsaLevel cpu) {
  const char* v = std::getenv("KJIT_HOST_ISA");
  if (v == nullptr || *v == '\0') return cpu;
  IsaLevel cap;
  if (std::strcmp(v, "baseline") == 0) {
    cap = IsaLevel::kBaseline;
  } else if (std::strcmp(v, "x86-64-v3") == 0) {
    cap = IsaLevel::kV3;
  } else if (std::strcmp(v, "x86-64-v4") == 0) {
    cap = IsaLevel::kV4;
  } else {
    throw ToolchainError("KJIT_HOST_ISA='" + std::string(v) +
                         "': expected baseline, x86-64-v3 or x86-64-v4 (the highest level kjit compiles "
                         "elementwise loops for), or unset for this CPU's own level");
  }
  return cap < cpu ? cap : cpu;
}

std::vector<std::string> level_cflags(IsaLevel level) {
  if (level == IsaLevel::kBaseline) return {};
  // Named extensions rather than -march=x86-64-v3/v4, which older compilers lack.
  std::vector<std::string> flags{"-mavx2", "-mfma", "-mf16c", "-mbmi", "-mbmi2", "-mlzcnt", "-mmovbe"};
  if (level == IsaLevel::kV4) {
    flags.insert(flags.end(), {"-mavx512f", "-mavx512cd", "-mavx512vl", "-mavx512bw", "-mavx512dq"});
  }
  flags.push_back("-ffp-contract=off");  // no fused multiply-add: results of separate operations
  return flags;
}

const char* level_name(IsaLevel level) {
  return level == IsaLevel::kV4 ? "x86-64-v4" : level == IsaLevel::kV3 ? "x86-64-v3" : "baseline";
}

/// The level `isa` names: native (this CPU's, capped by KJIT_HOST_ISA), baseline,
/// x86-64-v3 or x86-64-v4; throws ToolchainError for another value.
IsaLevel named_level(const std::string& isa) {
  if (isa == "native") return requested_level(cpu_level());
  for (IsaLevel l : {IsaLevel::kBaseline, IsaLevel::kV3, IsaLevel::kV4}) {
    if (isa == level_name(l)) return l;
  }
  throw ToolchainError("isa='" + isa +
                       "': expected native (this CPU's instruction set), baseline (any x86-64), x86-64-v3 (AVX2, "
                       "FMA) or x86-64-v4 (AVX-512)");
}

}  // namespace

std::vector<std::string> isa_cflags(const std::string& isa) { return level_cflags(named_level(isa)); }

std::string isa_level_name(const std::string& isa) { return level_name(named_level(isa)); }

std::string cpu_isa_level_name() { return level_name(requested_level(cpu_level())); }

bool cpu_runs_isa(const std::string& name) {
  for (IsaLevel l : {IsaLevel::kBaseline, IsaLevel::kV3, IsaLevel::kV4}) {
    if (name == level_name(l)) return l <= requested_level(cpu_level());
  }
  return false;
}

const std::vector<std::string>& host_isa_cflags() {
  static const std::vector<std::string> flags = level_cflags(requested_level(cpu_level()));
  return flags;
}

}  // namespace kjit
