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
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

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

/// Assembler lines that give `own`'s SIMD clones the names the vectoriser calls
/// for `f` (_ZGVdN8v_log1pf is _ZGVdN8v_kjit_log1pf), hidden: nothing leaves the
/// kernel library that could stand in for another library's function.
std::string vector_aliases(const char* f, const char* own, bool is_float) {
  std::string out;
  for (const VectorIsa& isa : kVectorIsas) {
    const std::string name = vector_symbol(isa, {f, 1}, is_float);
    out += "\".hidden " + name + "\\n.set " + name + ", " + vector_symbol(isa, {own, 1}, is_float) + "\\n\"\n";
  }
  return out;
}

/// log1p's vector forms over the library's vector log, in the generated kernel
/// itself: log(u) less the rounding of u = 1 + x taken back to first order,
/// ((u - 1) - x) / u, which keeps it within 2 ULP where SLEEF's log is within 1.
/// GCC makes SIMD clones of kjit_log1p[f]; scalar calls stay glibc's.
std::string log1p_from_log() {
  std::string out = "// log1p over the vector log (SLEEF's own log1p is inf near the largest finite values)\n";
  for (bool is_float : {true, false}) {
    const std::string t = is_float ? "float" : "double", f = is_float ? "f" : "";
    out += "__attribute__((__simd__(\"notinbranch\"), __visibility__(\"hidden\"), __used__)) " + t + " kjit_log1p" + f +
           "(" + t + " x) noexcept {\n  const " + t + " u = " + t + "(1) + x, c = (u - " + t + "(1)) - x, l = log" + f +
           "(u);\n  return u == " + t + "(1) ? x : (c == " + t + "(0) || u == __builtin_inf" + f +
           "() ? l : l - c / u);\n}\n";
  }
  return out;
}

/// `c[0] + v * (c[1] + v * (...))` in fused multiply-adds, as float literals.
std::string horner(const std::vector<float>& c, const std::string& v) {
  auto literal = [](float x) {
    char text[32];
    std::snprintf(text, sizeof text, "%.9ef", static_cast<double>(x));
    return std::string(text);
  };
  std::string out = literal(c.back());
  for (size_t k = c.size() - 1; k-- > 0;) out = "__builtin_fmaf(" + out + ", " + v + ", " + literal(c[k]) + ")";
  return out;
}

/// float erf's vector forms, in the generated kernel itself and calling no library
/// (SLEEF's erff takes four times as long: erf-GELU was 5x torch's F.gelu). The
/// polynomials are fit by scripts/fit_erff.py:
/// - |x| < 0.9: x + x * A(x^2), A of erf(x)/x - 1 (1.2e-8 relative);
/// - above: 1 - erfc(c), c = min(|x|, 3.95) (erfc(3.95) < 2^-25: 1 - erfc rounds
///   to 1), with erfc(c) = 2^y, y = B(c - 2.425) - c^2 log2(e), B of log2(erfc(c))
///   + c^2 log2(e) (an erfc within 1.6e-9), and 2^y = 2^n * E(y - n) for the
///   nearest integer n (E of 2^f, |f| <= 1/2, 7.5e-8 relative); y >= -23, so the
///   result of the exponent add is a normal float.
/// 1.53 ULP at most over every 7th float32 (tests/python/test_vector_math.py
/// measures it); ±0, ±inf and NaN are exact. Scalar calls stay glibc's.
std::string erff_from_polynomials() {
  static const std::vector<float> a = {1.283791512e-01f,  -3.761253357e-01f, 1.128223091e-01f,
                                       -2.678199485e-02f, 5.016275216e-03f,  -6.111502880e-04f};
  static const std::vector<float> b = {-2.207390785e+00f, -5.212441683e-01f, 8.457884192e-02f, -1.644694060e-02f,
                                       3.781515639e-03f,  -2.692094713e-04f, 2.844761766e-04f};
  static const std::vector<float> e = {1.000000119e+00f, 6.931469440e-01f, 2.402212024e-01f,
                                       5.550713465e-02f, 9.675540961e-03f, 1.327646081e-03f};
  return "// float erf from polynomials and the exponent bits (SLEEF's vector erff is slow)\n"
         "__attribute__((__simd__(\"notinbranch\"), __visibility__(\"hidden\"), __used__)) float kjit_erff(float x) "
         "noexcept {\n"
         "  const float ax = __builtin_fabsf(x), u = x * x;\n"
         "  const float small = __builtin_fmaf(x, " +
         horner(a, "u") +
         ", x);\n"
         "  const float c = ax > 3.95f ? 3.95f : ax;  // NaN stays NaN\n"
         "  const float y = __builtin_fmaf(-c, c * 1.442695041f, " +
         horner(b, "(c - 2.425f)") +
         ");\n"
         "  const float n = (y + 12582912.0f) - 12582912.0f;  // y rounded to an integer (|y| < 2^22)\n"
         "  const float p = " +
         horner(e, "(y - n)") +
         ";\n"
         "  int32_t bits;\n"
         "  __builtin_memcpy(&bits, &p, 4);\n"
         "  bits += static_cast<int32_t>(n) * (1 << 23);  // p * 2^n\n"
         "  float erfc;\n"
         "  __builtin_memcpy(&erfc, &bits, 4);\n"
         "  return ax < 0.9f ? small : __builtin_copysignf(1.0f - erfc, x);\n"
         "}\n";
}

/// A vector form kjit writes into the kernel itself instead of the library's.
struct OwnForm {
  const char* name;  ///< the double form's name, as in kFunctions
  const char* own;   ///< kjit's function (the double form's name), defined in the kernel
  bool is_float;
};

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
  const MathFunction log{"log", 1};
  const bool log1p_own = sleef && has_every_form(lib, log, true) && has_every_form(lib, log, false);
  std::vector<OwnForm> own = {{"erf", "kjit_erf", true}};
  if (log1p_own) own.insert(own.end(), {{"log1p", "kjit_log1p", true}, {"log1p", "kjit_log1p", false}});
  const auto is_own = [&](const MathFunction& f, bool is_float) {
    return std::any_of(own.begin(), own.end(),
                       [&](const OwnForm& o) { return std::strcmp(o.name, f.name) == 0 && o.is_float == is_float; });
  };
  std::string out = "// " + what + ": vector forms of these functions (the x86-64 vector function ABI),\n" +
                    "// so the vectoriser calls them for whole vectors of lanes.\nextern \"C\" {\n";
  for (const MathFunction& f : kFunctions) {
    const auto wrong = [&](const char* name) { return std::strcmp(name, f.name) == 0; };
    const bool library_wrong = sleef && std::any_of(std::begin(kSleefWrong), std::end(kSleefWrong), wrong);
    for (bool is_float : {false, true}) {
      // kjit's own forms are declared as the library's are: the vectoriser calls their aliases
      if (!is_own(f, is_float) && (library_wrong || !has_every_form(lib, f, is_float))) continue;
      const std::string type = is_float ? "float" : "double";
      out += "__attribute__((__simd__(\"notinbranch\"))) " + type + " " + f.name + (is_float ? "f" : "") + "(" + type +
             (f.arity == 2 ? ", " + type : std::string()) + ") noexcept;\n";
    }
  }
  if (log1p_own) out += log1p_from_log();
  out += erff_from_polynomials() + "}\n__asm__(\n";
  for (const OwnForm& o : own) out += vector_aliases(o.name, o.own, o.is_float);
  return out + ");\n";
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
