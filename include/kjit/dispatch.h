// kjit/dispatch.h — dtype dispatch for kernels, as PyTorch's AT_DISPATCH_*:
//
//   KJIT_DISPATCH_FLOATING_TYPES(x.dtype(), "my_kernel", [&] {
//     run<scalar_t>(x, y);  // scalar_t is float or double here
//   });
//
// The lambda runs with `scalar_t` the C++ type of the dtype; another dtype is a
// TypeError naming the kernel, the dtype and the ones it takes. The macros
// return what the lambda returns.
#ifndef KJIT_DISPATCH_H_
#define KJIT_DISPATCH_H_

#include <complex>
#include <cstdint>
#include <string>

#include "kjit/dtype.h"
#include "kjit/errors.h"

namespace kjit {
namespace detail {
/// One number per one-lane dtype, for a switch.
constexpr uint32_t dtype_key(DLDataType d) {
  return (uint32_t{d.code} << 16) | (uint32_t{d.bits} << 1) | (d.lanes != 1);
}
template <typename T>
constexpr uint32_t dtype_key_of() {
  return dtype_key(dtype_of<T>());
}
[[noreturn]] inline void dispatch_failed(const char* name, DLDataType got, const char* takes) {
  throw TypeError(std::string(name) + ": dtype " + dtype_name(got) + " is not supported (it takes " + takes + ")");
}
}  // namespace detail
}  // namespace kjit

#define KJIT_DISPATCH_CASE(T, ...)          \
  case ::kjit::detail::dtype_key_of<T>(): { \
    using scalar_t [[maybe_unused]] = T;    \
    return __VA_ARGS__();                   \
  }

#define KJIT_DISPATCH_SWITCH(DTYPE, NAME, TAKES, CASES)                      \
  [&] {                                                                      \
    const ::DLDataType kjit_dispatch_dtype = (DTYPE);                        \
    switch (::kjit::detail::dtype_key(kjit_dispatch_dtype)) {                \
      CASES                                                                  \
      default:                                                               \
        ::kjit::detail::dispatch_failed((NAME), kjit_dispatch_dtype, TAKES); \
    }                                                                        \
  }()

#define KJIT_DISPATCH_FLOATING_CASES(...) \
  KJIT_DISPATCH_CASE(float, __VA_ARGS__)  \
  KJIT_DISPATCH_CASE(double, __VA_ARGS__)
#define KJIT_DISPATCH_INTEGRAL_CASES(...)  \
  KJIT_DISPATCH_CASE(uint8_t, __VA_ARGS__) \
  KJIT_DISPATCH_CASE(int8_t, __VA_ARGS__)  \
  KJIT_DISPATCH_CASE(int16_t, __VA_ARGS__) \
  KJIT_DISPATCH_CASE(int32_t, __VA_ARGS__) \
  KJIT_DISPATCH_CASE(int64_t, __VA_ARGS__)
#define KJIT_DISPATCH_COMPLEX_CASES(...)               \
  KJIT_DISPATCH_CASE(std::complex<float>, __VA_ARGS__) \
  KJIT_DISPATCH_CASE(std::complex<double>, __VA_ARGS__)

/// float32, float64.
#define KJIT_DISPATCH_FLOATING_TYPES(DTYPE, NAME, ...) \
  KJIT_DISPATCH_SWITCH(DTYPE, NAME, "float32, float64", KJIT_DISPATCH_FLOATING_CASES(__VA_ARGS__))
/// uint8, int8, int16, int32, int64.
#define KJIT_DISPATCH_INTEGRAL_TYPES(DTYPE, NAME, ...) \
  KJIT_DISPATCH_SWITCH(DTYPE, NAME, "uint8, int8, int16, int32, int64", KJIT_DISPATCH_INTEGRAL_CASES(__VA_ARGS__))
/// The integral and floating types.
#define KJIT_DISPATCH_ALL_TYPES(DTYPE, NAME, ...)                                         \
  KJIT_DISPATCH_SWITCH(DTYPE, NAME, "uint8, int8, int16, int32, int64, float32, float64", \
                       KJIT_DISPATCH_INTEGRAL_CASES(__VA_ARGS__) KJIT_DISPATCH_FLOATING_CASES(__VA_ARGS__))
/// The integral, floating and complex types.
#define KJIT_DISPATCH_ALL_TYPES_AND_COMPLEX(DTYPE, NAME, ...)                                                    \
  KJIT_DISPATCH_SWITCH(DTYPE, NAME, "uint8, int8, int16, int32, int64, float32, float64, complex64, complex128", \
                       KJIT_DISPATCH_INTEGRAL_CASES(__VA_ARGS__) KJIT_DISPATCH_FLOATING_CASES(__VA_ARGS__)       \
                           KJIT_DISPATCH_COMPLEX_CASES(__VA_ARGS__))

#endif  // KJIT_DISPATCH_H_
