// Vector forms of <cmath>'s functions in generated CPU loops: SLEEF's or glibc's
// libmvec's (the x86-64 vector function ABI, _ZGVdN8v_expf and kin) declared as
// SIMD clones, so GCC's vectoriser calls 4, 8 or 16 lanes at a time where a loop
// holds std::exp, std::tanh, std::erf, ... instead of one scalar libm call per element.
#ifndef KJIT_SRC_CPU_VECTOR_MATH_H_
#define KJIT_SRC_CPU_VECTOR_MATH_H_

#include <string>
#include <vector>

namespace kjit {
namespace cpu {

/// What a generated kernel needs to reach the library: the declarations (before
/// the user's code) and what to link. Empty where none applies: clang (kjit gives
/// it no SIMD clones), another libc or architecture, or KJIT_VECTOR_MATH=off.
struct VectorMath {
  std::string library;  ///< "SLEEF", "libmvec" or ""
  std::string declarations;
  std::vector<std::string> ldflags;
};
/// The library KJIT_VECTOR_MATH names (sleef, libmvec, off), by default SLEEF's
/// libsleefgnuabi.so.3 when installed, else glibc's libmvec.so.1. Throws
/// ToolchainError for another value, or sleef when SLEEF is not installed.
const VectorMath& vector_math();

}  // namespace cpu
}  // namespace kjit

#endif  // KJIT_SRC_CPU_VECTOR_MATH_H_
