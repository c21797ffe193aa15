// SIMD clones of <cmath>'s functions declared for the vectoriser (glibc's own
// <math.h> declares libmvec's only under -ffast-math, which would also drop NaN
// and infinity semantics), taken from SLEEF's GNU-ABI library when it is installed
// (its 1-ULP forms, as torch's Vectorized<float> uses) and from glibc's libmvec
// otherwise. A function is declared only when the library has every vector form
// the vectoriser may call (SSE, AVX, AVX2 and AVX-512 lane counts).
#include "cpu/vector_math.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "kjit/build.h"
#include "kjit/errors.h"

namespace kjit {
namespace cpu {
namespace {

struct MathFunction {
  const char* name;  ///< the double form; the float one adds 'f'
  int arity;
};

constexpr MathFunction kFunctions[] = {
    {"sin", 1},  {"cos", 1},   {"tan", 1},   {"asin", 1},  {"acos", 1},  {"atan", 1},  {"atan2", 2},
    {"sinh", 1}, {"cosh", 1},  {"tanh", 1},  {"asinh", 1}, {"acosh", 1}, {"atanh", 1}, {"exp", 1},
    {"exp2", 1}, {"exp10", 1}, {"expm1", 1}, {"log", 1},   {"log2", 1},  {"log10", 1}, {"log1p", 1},
    {"pow", 2},  {"cbrt", 1},  {"erf", 1},   {"erfc", 1},  {"hypot", 2},
};

/// The x86-64 vector function ABI's ISA letters and their double lanes (float has
/// twice as many): SSE, AVX, AVX2, AVX-512.
struct VectorIsa {
  char letter;
  int double_lanes;
};
constexpr VectorIsa kVectorIsas[] = {{'b', 2}, {'c', 4}, {'d', 4}, {'e', 8}};

/// The ABI's name of `f`'s unmasked vector form for `isa`: _ZGVdN8v_expf.
std::string vector_symbol(const VectorIsa& isa, const MathFunction& f, bool is_float) {
  return std::string("_ZGV") + isa.letter + "N" + std::to_string(is_float ? 2 * isa.double_lanes : isa.double_lanes) +
         (f.arity == 2 ? "vv_" : "v_") + f.name + (is_float ? "f" : "");
}

/// SLEEF 3.5's vector forms that are wrong somewhere in the domain (measured by
/// tests/python/test_vector_math.py): log1p is inf for x near the largest finite
/// values, float sinh and cosh overflow to inf about |x| = 89 where the result is
/// finite. Under SLEEF, log1p is composed from SLEEF's log (log1p_from_log) and the
/// other two stay scalar (glibc) calls.
constexpr const char* kSleefWrong[] = {"log1p", "sinh", "cosh"};

/// log1p's vector forms over the library's vector log, in the generated kernel
/// itself: log(u) less the rounding of u = 1 + x taken back to first order,
/// ((u - 1) - x) / u, which keeps it within 2 ULP where SLEEF's log is within 1.
/// GCC makes SIMD clones of kjit_log1p[f] (hidden: nothing leaves the kernel
/// library), and the assembler names each after the clone the vectoriser calls for
/// std::log1p (_ZGVdN8v_log1pf is _ZGVdN8v_kjit_log1pf). Scalar calls stay glibc's.
std::string log1p_from_log() {
  std::string out =
      "// log1p over the vector log (SLEEF's own log1p is inf near the largest finite values)\n"
      "__attribute__((__simd__(\"notinbranch\"))) float log1pf(float) noexcept;\n"
      "__attribute__((__simd__(\"notinbranch\"))) double log1p(double) noexcept;\n";
  for (bool is_float : {true, false}) {
    const std::string t = is_float ? "float" : "double", f = is_float ? "f" : "";
    out += "__attribute__((__simd__(\"notinbranch\"), __visibility__(\"hidden\"), __used__)) " + t + " kjit_log1p" + f +
           "(" + t + " x) noexcept {\n  const " + t + " u = " + t + "(1) + x, c = (u - " + t + "(1)) - x, l = log" + f +
           "(u);\n  return u == " + t + "(1) ? x : (c == " + t + "(0) || u == __builtin_inf" + f +
           "() ? l : l - c / u);\n}\n";
  }
  out += "}\n__asm__(";
  for (bool is_float : {true, false}) {
    for (const VectorIsa& isa : kVectorIsas) {
      const std::string name = vector_symbol(isa, {"log1p", 1}, is_float);
      out +=
          "\".hidden " + name + "\\n.set " + name + ", " + vector_symbol(isa, {"kjit_log1p", 1}, is_float) + "\\n\"\n";
    }
  }
  return out + ");\nextern \"C\" {\n";
}

/// A library of the x86-64 vector function ABI, loaded, with the path to link.
struct Library {
  void* handle = nullptr;
  std::string path;
};

Library open_library(const char* soname) {
  Library lib;
#if defined(__x86_64__) && defined(__GLIBC__)
  lib.handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  link_map* map = nullptr;
  if (lib.handle != nullptr && dlinfo(lib.handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr) lib.path = map->l_name;
  if (lib.path.empty()) lib.handle = nullptr;
#endif
  return lib;
}

/// Whether `lib` has every vector form of `f` in `type`.
bool has_every_form(const Library& lib, const MathFunction& f, bool is_float) {
  for (const VectorIsa& isa : kVectorIsas) {
    if (dlsym(lib.handle, vector_symbol(isa, f, is_float).c_str()) == nullptr) return false;
  }
  return true;
}

std::string declarations(const Library& lib, const std::string& what, bool sleef) {
  std::string out = "// " + what + ": vector forms of these functions (the x86-64 vector function ABI),\n" +
                    "// so the vectoriser calls them for whole vectors of lanes.\nextern \"C\" {\n";
  for (const MathFunction& f : kFunctions) {
    const auto wrong = [&](const char* name) { return std::strcmp(name, f.name) == 0; };
    if (sleef && std::any_of(std::begin(kSleefWrong), std::end(kSleefWrong), wrong)) continue;
    for (bool is_float : {false, true}) {
      if (!has_every_form(lib, f, is_float)) continue;
      const std::string type = is_float ? "float" : "double";
      out += "__attribute__((__simd__(\"notinbranch\"))) " + type + " " + f.name + (is_float ? "f" : "") + "(" + type +
             (f.arity == 2 ? ", " + type : std::string()) + ") noexcept;\n";
    }
  }
  const MathFunction log{"log", 1};
  if (sleef && has_every_form(lib, log, true) && has_every_form(lib, log, false)) out += log1p_from_log();
  return out + "}\n";
}

VectorMath make() {
  VectorMath vm;
  const char* want = std::getenv("KJIT_VECTOR_MATH");
  const std::string choice = want == nullptr || *want == '\0' ? "auto" : want;
  if (choice != "auto" && choice != "sleef" && choice != "libmvec" && choice != "off") {
    throw ToolchainError("KJIT_VECTOR_MATH='" + choice +
                         "': expected sleef, libmvec or off (or unset: SLEEF when installed, else libmvec)");
  }
  if (choice == "off" || !find_toolchain().gcc) return vm;
  if (choice != "libmvec") {
    const Library sleef = open_library("libsleefgnuabi.so.3");
    if (sleef.handle != nullptr) {
      vm = {"SLEEF", declarations(sleef, "SLEEF (" + sleef.path + ")", true), {sleef.path}};
      return vm;
    }
    if (choice == "sleef") {
      throw ToolchainError(
          "KJIT_VECTOR_MATH=sleef, but SLEEF's libsleefgnuabi.so.3 is not installed (Debian/Ubuntu: apt-get install "
          "libsleef3)");
    }
  }
  const Library mvec = open_library("libmvec.so.1");
  if (mvec.handle != nullptr)
    vm = {"libmvec", declarations(mvec, "glibc's libmvec (" + mvec.path + ")", false), {mvec.path}};
  return vm;
}

}  // namespace

const VectorMath& vector_math() {
  static const VectorMath vm = make();
  return vm;
}

}  // namespace cpu
}  // namespace kjit
