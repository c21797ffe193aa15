// float16/bfloat16 <-> double conversions by bits, for generated code that must not
// depend on CUDA or compiler-specific half types. Embedded by kjit::emit_stub_prelude()
// (kjit_stub uses them) and by the elementwise CPU kernels (kjit_ew uses them).
#ifndef KJIT_DETAIL_FLOAT16_CONVERSIONS_H_
#define KJIT_DETAIL_FLOAT16_CONVERSIONS_H_

#include <cmath>
#include <cstdint>
#include <cstring>

namespace kjit_float16 {
namespace {

/// double -> IEEE binary16 bits, round to nearest even.
[[maybe_unused]] inline uint16_t float16_bits(double value) {
  float f = static_cast<float>(value);
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504: inf
  if (abs < 0x38800000u) {  // a subnormal half (or zero): scale by 2^24 in float, then round
    float scaled = std::fabs(f) * 16777216.0f;
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(scaled)));
  }
  uint32_t mant = abs & 0x7fffffu;
  uint32_t half = ((abs >> 23) - 112u) << 10 | (mant >> 13);
  const uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(sign | half);
}

/// double -> bfloat16 bits, round to nearest even; NaN stays NaN.
[[maybe_unused]] inline uint16_t bfloat16_bits(double value) {
  float f = static_cast<float>(value);
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

[[maybe_unused]] inline double float16_value(uint16_t h) {
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  double v;
  if (exp == 0)
    v = std::ldexp(mant, -24);
  else if (exp == 31)
    v = mant ? NAN : INFINITY;
  else
    v = std::ldexp(mant + 1024, exp - 25);
  return (h & 0x8000) ? -v : v;
}

[[maybe_unused]] inline double bfloat16_value(uint16_t b) {
  uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, sizeof(f));
  return f;
}

}  // namespace
}  // namespace kjit_float16

#endif  // KJIT_DETAIL_FLOAT16_CONVERSIONS_H_
