// kjit/dtype.h — C++ types as DLPack dtypes, and dtype names, for kernels.
//
// DLPack's C header and the standard library only (kjit/kernel.h includes it):
// `dtype_of<float>()` is {kDLFloat, 32, 1}; `dtype_name(d)` is "float32", the
// name kjit's signatures and error messages use.
#ifndef KJIT_DTYPE_H_
#define KJIT_DTYPE_H_

#include <dlpack/dlpack.h>

#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <type_traits>

namespace kjit {

namespace detail {
template <typename T, typename = void>
struct DTypeOf {
  static constexpr bool kKnown = false;
};
template <uint8_t Code, uint8_t Bits>
struct DTypeIs {
  static constexpr bool kKnown = true;
  static constexpr DLDataType kValue{Code, Bits, 1};
};
template <>
struct DTypeOf<bool> : DTypeIs<kDLBool, 8> {};
// Integers by signedness and size, so `long` and `long long` both map to int64.
template <typename T>
struct DTypeOf<T, std::enable_if_t<std::is_integral<T>::value && !std::is_same<T, bool>::value>>
    : DTypeIs<std::is_signed<T>::value ? kDLInt : kDLUInt, sizeof(T) * 8> {};
template <>
struct DTypeOf<float> : DTypeIs<kDLFloat, 32> {};
template <>
struct DTypeOf<double> : DTypeIs<kDLFloat, 64> {};
template <>
struct DTypeOf<std::complex<float>> : DTypeIs<kDLComplex, 64> {};
template <>
struct DTypeOf<std::complex<double>> : DTypeIs<kDLComplex, 128> {};
}  // namespace detail

/// Whether `T` has a dtype: bool, the integer types, float, double and
/// std::complex<float|double>.
template <typename T>
constexpr bool has_dtype() {
  return detail::DTypeOf<std::remove_cv_t<T>>::kKnown;
}

/// The dtype of elements of C++ type `T`.
template <typename T>
constexpr DLDataType dtype_of() {
  static_assert(has_dtype<T>(), "kjit::dtype_of<T>: T has no dtype (bool, integers, float, double, std::complex)");
  return detail::DTypeOf<std::remove_cv_t<T>>::kValue;
}

/// Whether two dtypes are the same (code, bits and lanes).
constexpr bool same_dtype(DLDataType a, DLDataType b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

/// Writes the name of `d` ("float32", "bool", "float8_e4m3fn", "float32x4") into
/// `buf` and returns it: what every kjit message calls a dtype. Allocates nothing,
/// so generated argument checks use it too.
inline const char* format_dtype_name(DLDataType d, char* buf, size_t n) {
  // Families named by code and bits; the float8/6/4 codes name a format alone.
  static const char* const kFamilies[] = {"int", "uint", "float", "handle", "bfloat", "complex", "bool"};
  static const char* const kSmallFloats[] = {"float8_e3m4",     "float8_e4m3",   "float8_e4m3b11fnuz", "float8_e4m3fn",
                                             "float8_e4m3fnuz", "float8_e5m2",   "float8_e5m2fnuz",    "float8_e8m0fnu",
                                             "float6_e2m3fn",   "float6_e3m2fn", "float4_e2m1fn"};
  const int small = static_cast<int>(d.code) - static_cast<int>(kDLFloat8_e3m4);
  const char* base = nullptr;
  if (d.code < sizeof(kFamilies) / sizeof(kFamilies[0])) base = kFamilies[d.code];
  if (small >= 0 && small < static_cast<int>(sizeof(kSmallFloats) / sizeof(kSmallFloats[0]))) {
    base = kSmallFloats[small];
  }
  int used;
  if (base == nullptr) {
    used = std::snprintf(buf, n, "dtype(code=%d, bits=%d)", d.code, d.bits);
  } else if (small >= 0 || (d.code == kDLBool && d.bits == 8)) {
    used = std::snprintf(buf, n, "%s", base);
  } else {
    used = std::snprintf(buf, n, "%s%d", base, d.bits);
  }
  if (d.lanes != 1 && used > 0 && static_cast<size_t>(used) < n) {
    std::snprintf(buf + used, n - used, "x%d", d.lanes);
  }
  return buf;
}

/// The name of `d`, as format_dtype_name writes it.
inline std::string dtype_name(DLDataType d) {
  char buf[48];
  return format_dtype_name(d, buf, sizeof(buf));
}

}  // namespace kjit

#endif  // KJIT_DTYPE_H_
