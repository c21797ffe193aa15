// float16/bfloat16 <-> double and float conversions by bits, for generated code that
// must not depend on CUDA or compiler-specific half types. Embedded by
// kjit::emit_stub_prelude() (kjit_stub uses them) and by the elementwise CPU kernels
// (kjit_ew uses them). The float forms give the double forms' bits for every float and
// have no branches, so a loop of them vectorises.
#ifndef KJIT_DETAIL_FLOAT16_CONVERSIONS_H_
#define KJIT_DETAIL_FLOAT16_CONVERSIONS_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace kjit_float16 {
namespace {

/// Rounds the bits of a finite double's magnitude right by `shift` (1..63), to nearest
/// even: one rounding, straight from double (going through float first rounds twice).
[[maybe_unused]] inline uint64_t round_shift_even(uint64_t v, int shift) {
  const uint64_t kept = v >> shift;
  const uint64_t rest = v & ((uint64_t{1} << shift) - 1);
  const uint64_t half = uint64_t{1} << (shift - 1);
  return kept + ((rest > half || (rest == half && (kept & 1u))) ? 1u : 0u);
}

/// double -> IEEE binary16 bits, round to nearest even (as NumPy's np.float16(x));
/// subnormals, overflow to inf and NaN (quiet, sign kept) included.
[[maybe_unused]] inline uint16_t float16_bits(double value) {
  uint64_t x;
  std::memcpy(&x, &value, sizeof(x));
  const uint16_t sign = static_cast<uint16_t>((x >> 48) & 0x8000u);
  const uint64_t abs = x & 0x7fffffffffffffffull;
  const int exp = static_cast<int>(abs >> 52);  // biased, 1023
  if (exp == 0x7ff) return static_cast<uint16_t>(sign | 0x7c00u | (abs & 0xfffffffffffffull ? 0x200u : 0u));
  if (exp > 1023 + 15) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 2^16: inf
  const uint64_t mant = (abs & 0xfffffffffffffull) | (exp ? uint64_t{1} << 52 : 0);
  // The half's unit in the last place is 2^(e - 10) for normals (e >= -14), 2^-24 below;
  // the double's is 2^(exp - 1075). Shift the 53-bit significand by the difference.
  const int e = exp - 1023;
  const int shift = (e >= -14 ? 42 : 42 + (-14 - e)) + (exp == 0 ? 1 : 0);
  if (shift > 63) return sign;                              // below 2^-25: rounds to zero
  const uint64_t units = round_shift_even(mant, shift);     // the value in half ulps
  if (e < -14) return static_cast<uint16_t>(sign | units);  // subnormal (a carry makes the smallest normal)
  // Normal: units is in [2^10, 2^11]; 2^11 carries into the exponent.
  const uint32_t biased = static_cast<uint32_t>(e + 15) + static_cast<uint32_t>(units >> 11);
  if (biased >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  const uint32_t frac = static_cast<uint32_t>(units >> (units >> 11)) & 0x3ffu;
  return static_cast<uint16_t>(sign | (biased << 10) | frac);
}

/// double -> bfloat16 bits as ml_dtypes.bfloat16(x), torch and JAX compute them:
/// round to float, then to nearest even; NaN stays NaN (quiet, sign kept). The two
/// roundings are on purpose: a kernel sees the bfloat16 its caller's framework makes.
[[maybe_unused]] inline uint16_t bfloat16_bits(double value) {
  // Finite values beyond float's range round to inf either way; the cast of one
  // would be undefined behaviour.
  if (std::fabs(value) > 3.4028234663852886e38) return std::signbit(value) ? 0xff80u : 0x7f80u;
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

/// The bits of float `f`, and the float of bits `x`.
[[maybe_unused]] inline uint32_t float_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  return x;
}
[[maybe_unused]] inline float bits_float(uint32_t x) {
  float f;
  std::memcpy(&f, &x, sizeof(f));
  return f;
}

/// `a` where `pick`, else `b`, by masks: a loop of these has no control flow, which
/// GCC's if-conversion does not always remove from nested selects (baseline x86-64).
[[maybe_unused]] inline uint32_t select_bits(bool pick, uint32_t a, uint32_t b) {
  return b ^ ((a ^ b) & (0u - static_cast<uint32_t>(pick)));
}

/// float16_value's value as a float (every half is one), NaN as quiet NaN (sign kept).
[[maybe_unused]] inline float float16_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t o = static_cast<uint32_t>(h & 0x7fffu) << 13;  // exponent and significand in place
  const uint32_t exp = o & 0x0f800000u;
  const uint32_t normal = o + (112u << 23);  // rebias 15 -> 127
  // A subnormal or zero: 2^-14 (1 + m) less 2^-14 is m's value, exact in a float.
  const uint32_t tiny = float_bits(bits_float(o + (113u << 23)) - 6.103515625e-05f);
  const uint32_t special = select_bits((o & 0x007fe000u) != 0, 0x7fc00000u, 0x7f800000u);
  return bits_float(sign | select_bits(exp == 0x0f800000u, special, select_bits(exp == 0, tiny, normal)));
}

/// bfloat16_value's value as a float.
[[maybe_unused]] inline float bfloat16_float(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

/// float -> IEEE binary16 bits, as float16_bits(double(f)): round to nearest even,
/// subnormals by a float add whose rounding is the half's, inf past the largest half.
[[maybe_unused]] inline uint16_t float16_bits(float f) {
  const uint32_t x = float_bits(f), abs = x & 0x7fffffffu;
  const uint32_t sign = (x >> 16) & 0x8000u;
  // At or past 2^16 (inf too): inf; NaN: quiet NaN.
  const uint32_t big = select_bits(abs > 0x7f800000u, 0x7e00u, 0x7c00u);
  // Below 2^-14: 0.5 + |f| rounds |f| to a multiple of 2^-24, the half's subnormal step.
  const uint32_t tiny = float_bits(bits_float(abs) + 0.5f) - 0x3f000000u;
  // Normal: rebias the exponent and round the 13 dropped bits to even (a carry
  // into the exponent is right, up to inf).
  const uint32_t normal = (abs + (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu + ((abs >> 13) & 1u)) >> 13;
  return static_cast<uint16_t>(sign |
                               select_bits(abs >= 0x47800000u, big, select_bits(abs < 0x38800000u, tiny, normal)));
}

/// float -> bfloat16 bits, as bfloat16_bits(double(f)): round to nearest even, NaN
/// quiet (sign kept).
[[maybe_unused]] inline uint16_t bfloat16_bits(float f) {
  const uint32_t x = float_bits(f);
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  // One select: GCC if-converts it into a blend (faster here than select_bits' masks).
  return static_cast<uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? (x >> 16) | 0x40u : rounded);
}

/// Half bits of a value of any arithmetic type: a float takes the float form, which
/// vectorises; any other type is converted to double first (one rounding from double).
template <class V>
inline uint16_t to_float16_bits(V v) {
  if constexpr (std::is_same<V, float>::value)
    return float16_bits(v);
  else
    return float16_bits(static_cast<double>(v));
}
template <class V>
inline uint16_t to_bfloat16_bits(V v) {
  if constexpr (std::is_same<V, float>::value)
    return bfloat16_bits(v);
  else
    return bfloat16_bits(static_cast<double>(v));
}

}  // namespace
}  // namespace kjit_float16

#endif  // KJIT_DETAIL_FLOAT16_CONVERSIONS_H_
