// What NVRTC provides and host C++ lacks, so generated elementwise CUDA kernels
// (and kjit/detail/elementwise_cuda_prelude.h alone) build as host C++: the tests
// pass it with -include.
#ifndef KJIT_TESTS_CPP_CUDA_HOST_SHIM_H_
#define KJIT_TESTS_CPP_CUDA_HOST_SHIM_H_

#include <math.h>
#include <string.h>
#define __global__
#define __device__
#define __forceinline__ inline
// The prelude's fixed-width typedefs (long long) must not meet glibc's (long).
#define int8_t kjit_int8_t
#define int16_t kjit_int16_t
#define int32_t kjit_int32_t
#define int64_t kjit_int64_t
#define uint8_t kjit_uint8_t
#define uint16_t kjit_uint16_t
#define uint32_t kjit_uint32_t
#define uint64_t kjit_uint64_t
struct kjit_dim3 {
  unsigned x, y, z;
};
static kjit_dim3 threadIdx, blockIdx;
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
inline float __uint_as_float(unsigned u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  memcpy(&u, &f, 4);
  return u;
}
template <typename T>
T min(T a, T b) {
  return b < a ? b : a;
}
template <typename T>
T max(T a, T b) {
  return a < b ? b : a;
}
inline float rsqrt(float x) { return 1 / sqrtf(x); }
inline double rsqrt(double x) { return 1 / sqrt(x); }

#endif  // KJIT_TESTS_CPP_CUDA_HOST_SHIM_H_
