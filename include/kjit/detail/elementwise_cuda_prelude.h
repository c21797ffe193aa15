// The prelude of every elementwise CUDA kernel: fixed-width integers, float16/bfloat16
// bit conversions, a small complex type and std:: names for the CUDA math functions,
// what a CPU computation string expects, without system headers (NVRTC has none by
// default). kjit::emit_elementwise_cuda() embeds this text before the user's code;
// the tests also build it as host C++ with the CUDA builtins shimmed
// (tests/cpp/cuda_host_shim.h).
#ifndef KJIT_DETAIL_ELEMENTWISE_CUDA_PRELUDE_H_
#define KJIT_DETAIL_ELEMENTWISE_CUDA_PRELUDE_H_

typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;

// threadIdx.x and blockIdx.x for the kernels after the user's code, whose macros
// (`#define x ...`) would rewrite the member name there.
__device__ __forceinline__ int kjit_thread_index() { return static_cast<int>(threadIdx.x); }
__device__ __forceinline__ int kjit_block_index() { return static_cast<int>(blockIdx.x); }

// float16/bfloat16 by bits, as the CPU backend converts (float16_conversions.h): the
// same results on both, and no asm, so the kernels also build as host C++.
__device__ __forceinline__ float kjit_half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in float
    const float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  if (exp == 31) return __uint_as_float(sign | 0x7f800000u | (mant << 13));
  return __uint_as_float(sign | ((exp + 112u) << 23) | (mant << 13));
}
__device__ __forceinline__ uint16_t kjit_float_to_half(float f) {  // round to nearest even
  const uint32_t x = __float_as_uint(f);
  const uint32_t sign = (x >> 16) & 0x8000u, abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504: inf
  if (abs < 0x38800000u) {  // a subnormal half: scale by 2^24 (exact), round in float
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(rintf(__uint_as_float(abs) * 16777216.0f)));
  }
  const uint32_t mant = abs & 0x7fffffu, rest = mant & 0x1fffu;
  uint32_t half = ((abs >> 23) - 112u) << 10 | (mant >> 13);
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(sign | half);
}
__device__ __forceinline__ float kjit_bfloat16_to_float(uint16_t b) {
  return __uint_as_float(static_cast<uint32_t>(b) << 16);
}
__device__ __forceinline__ uint16_t kjit_float_to_bfloat16(float f) {  // round to nearest even
  uint32_t x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN stays NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

// std::complex's layout and the operators computation strings use.
template <typename T>
struct alignas(2 * sizeof(T)) kjit_complex {
  T re, im;
  __device__ constexpr kjit_complex(T r = T(), T i = T()) : re(r), im(i) {}
  template <typename U>
  __device__ explicit constexpr kjit_complex(const kjit_complex<U>& o) : re(T(o.re)), im(T(o.im)) {}
  __device__ constexpr T real() const { return re; }
  __device__ constexpr T imag() const { return im; }
  __device__ kjit_complex& operator+=(kjit_complex o) {
    re += o.re;
    im += o.im;
    return *this;
  }
  __device__ kjit_complex& operator-=(kjit_complex o) {
    re -= o.re;
    im -= o.im;
    return *this;
  }
  __device__ kjit_complex& operator*=(kjit_complex o) { return *this = *this * o; }
  __device__ kjit_complex& operator/=(kjit_complex o) { return *this = *this / o; }
  __device__ friend kjit_complex operator+(kjit_complex a) { return a; }
  __device__ friend kjit_complex operator-(kjit_complex a) { return kjit_complex(-a.re, -a.im); }
  __device__ friend kjit_complex operator+(kjit_complex a, kjit_complex b) { return a += b; }
  __device__ friend kjit_complex operator-(kjit_complex a, kjit_complex b) { return a -= b; }
  __device__ friend kjit_complex operator*(kjit_complex a, kjit_complex b) {
    return kjit_complex(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re);
  }
  // Smith's algorithm: no overflow of |b|^2 for large b.
  __device__ friend kjit_complex operator/(kjit_complex a, kjit_complex b) {
    if (fabs(b.re) >= fabs(b.im)) {
      T r = b.im / b.re, d = b.re + r * b.im;
      return kjit_complex((a.re + a.im * r) / d, (a.im - a.re * r) / d);
    }
    T r = b.re / b.im, d = b.im + r * b.re;
    return kjit_complex((a.re * r + a.im) / d, (a.im * r - a.re) / d);
  }
  __device__ friend bool operator==(kjit_complex a, kjit_complex b) { return a.re == b.re && a.im == b.im; }
  __device__ friend bool operator!=(kjit_complex a, kjit_complex b) { return !(a == b); }
};
template <typename T>
__device__ T real(kjit_complex<T> z) {
  return z.re;
}
template <typename T>
__device__ T imag(kjit_complex<T> z) {
  return z.im;
}
template <typename T>
__device__ kjit_complex<T> conj(kjit_complex<T> z) {
  return kjit_complex<T>(z.re, -z.im);
}
template <typename T>
__device__ T norm(kjit_complex<T> z) {
  return z.re * z.re + z.im * z.im;
}
template <typename T>
__device__ T abs(kjit_complex<T> z) {
  return hypot(z.re, z.im);
}
template <typename T>
__device__ T arg(kjit_complex<T> z) {
  return atan2(z.im, z.re);
}
template <typename T>
__device__ kjit_complex<T> exp(kjit_complex<T> z) {
  T m = exp(z.re);
  return kjit_complex<T>(m * cos(z.im), m * sin(z.im));
}
template <typename T>
__device__ kjit_complex<T> log(kjit_complex<T> z) {
  return kjit_complex<T>(log(abs(z)), arg(z));
}
template <typename T>
__device__ kjit_complex<T> sqrt(kjit_complex<T> z) {
  T r = sqrt(abs(z)), t = arg(z) / T(2);
  return kjit_complex<T>(r * cos(t), r * sin(t));
}
template <typename T>
__device__ bool kjit_nonzero(kjit_complex<T> z) {
  return z.re != T(0) || z.im != T(0);
}

namespace std {
template <typename T>
using complex = kjit_complex<T>;
using ::abs;
using ::acos;
using ::acosh;
using ::arg;
using ::asin;
using ::asinh;
using ::atan;
using ::atan2;
using ::atanh;
using ::cbrt;
using ::ceil;
using ::conj;
using ::copysign;
using ::cos;
using ::cosh;
using ::erf;
using ::erfc;
using ::exp;
using ::exp2;
using ::expm1;
using ::fabs;
using ::floor;
using ::fma;
using ::fmax;
using ::fmin;
using ::fmod;
using ::hypot;
using ::imag;
using ::isfinite;
using ::isinf;
using ::isnan;
using ::lgamma;
using ::log;
using ::log10;
using ::log1p;
using ::log2;
using ::max;
using ::min;
using ::nearbyint;
using ::norm;
using ::pow;
using ::real;
using ::remainder;
using ::round;
using ::rsqrt;
using ::signbit;
using ::sin;
using ::sinh;
using ::sqrt;
using ::tan;
using ::tanh;
using ::tgamma;
using ::trunc;
}  // namespace std

#endif  // KJIT_DETAIL_ELEMENTWISE_CUDA_PRELUDE_H_
