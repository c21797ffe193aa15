// The helpers every generated stub calls: argument decoding and the out-of-line,
// cold error paths that format messages. kjit::emit_stub_prelude() embeds this text,
// after float16_conversions.h, once in each module's translation unit.
#ifndef KJIT_DETAIL_STUB_PRELUDE_H_
#define KJIT_DETAIL_STUB_PRELUDE_H_

// ---- kjit stub prelude: decoding helpers and cold error paths ----
// Generated code includes stub_includes.h as its first line (a precompiled header
// when one is valid), so here it is skipped.
#ifndef KJIT_DETAIL_STUB_INCLUDES_H_
#include <kjit/detail/stub_includes.h>
#endif

// Generated code embeds float16_conversions.h just before this text, so there the
// include is skipped and no kjit/detail header is read at JIT time.
#ifndef KJIT_DETAIL_FLOAT16_CONVERSIONS_H_
#include <kjit/detail/float16_conversions.h>
#endif

// Error paths are out of line and cold so the checks stay a few branches. Helpers
// a given stub does not use must not warn (clang warns on unused inline ones too).
#define KJIT_COLD __attribute__((noinline, cold, unused))

namespace kjit_stub {
namespace {

// Shape arithmetic is exact or fails: each helper sets `ovf` instead of wrapping
// (signed overflow) or trapping (INT64_MIN / -1), and the stub reports the
// expression. A set `ovf` makes the returned value meaningless.
[[maybe_unused]] inline int64_t kjit_add(int64_t a, int64_t b, bool& ovf) {
  int64_t r = 0;
  ovf |= __builtin_add_overflow(a, b, &r);
  return r;
}
[[maybe_unused]] inline int64_t kjit_sub(int64_t a, int64_t b, bool& ovf) {
  int64_t r = 0;
  ovf |= __builtin_sub_overflow(a, b, &r);
  return r;
}
[[maybe_unused]] inline int64_t kjit_mul(int64_t a, int64_t b, bool& ovf) {
  int64_t r = 0;
  ovf |= __builtin_mul_overflow(a, b, &r);
  return r;
}
[[maybe_unused]] inline int64_t kjit_neg(int64_t a, bool& ovf) { return kjit_sub(0, a, ovf); }

/// Floor division and modulo, as in Python. Callers rule out b == 0 first (with
/// their own message); here it only sets ovf, so nothing can trap.
[[maybe_unused]] inline int64_t kjit_floordiv(int64_t a, int64_t b, bool& ovf) {
  if (b == 0 || (b == -1 && a == INT64_MIN)) {
    ovf = true;
    return 0;
  }
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
[[maybe_unused]] inline int64_t kjit_floormod(int64_t a, int64_t b, bool& ovf) {
  if (b == 0) {
    ovf = true;
    return 0;
  }
  if (b == -1) return 0;  // INT64_MIN % -1 traps in C++; the value is 0
  int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

/// A tensor argument: a DLTensor behind a Tensor object or a raw DLTensor*.
[[maybe_unused]] inline const DLTensor* as_tensor(const TVMFFIAny* a) {
  if (a->type_index == kTVMFFITensor) {
    return reinterpret_cast<const DLTensor*>(reinterpret_cast<const char*>(a->v_obj) + sizeof(TVMFFIObject));
  }
  if (a->type_index == kTVMFFIDLTensorPtr) return static_cast<const DLTensor*>(a->v_ptr);
  return nullptr;
}

[[maybe_unused]] inline bool is_none(const TVMFFIAny* a) {
  return a->type_index == kTVMFFINone || (a->type_index == kTVMFFIDLTensorPtr && a->v_ptr == nullptr);
}

/// The stride of dim d in elements (compact when strides is NULL). Runs after
/// malformed_tensor(), so the product of the extents fits in int64.
[[maybe_unused]] inline int64_t stride_of(const DLTensor* t, int d) {
  if (t->strides != nullptr) return t->strides[d];
  int64_t s = 1;
  bool ovf = false;
  for (int i = t->ndim - 1; i > d; --i) s = kjit_mul(s, t->shape[i], ovf);
  return ovf ? INT64_MAX : s;
}

[[maybe_unused]] inline bool has_zero_extent(const DLTensor* t) {
  for (int i = 0; i < t->ndim; ++i) {
    if (t->shape[i] == 0) return true;
  }
  return false;
}

/// Compact row-major, ignoring dims of extent 1; an empty tensor always passes.
[[maybe_unused]] inline int first_noncompact_dim(const DLTensor* t) {
  if (t->strides == nullptr || has_zero_extent(t)) return -1;
  int64_t expected = 1;
  int bad = -1;
  for (int i = t->ndim - 1; i >= 0; --i) {
    if (t->shape[i] == 0) return -1;
    if (bad < 0 && t->shape[i] != 1 && t->strides[i] != expected) bad = i;
    expected *= t->shape[i];
  }
  return bad;
}

[[maybe_unused]] inline int64_t element_bytes(DLDataType d) { return (static_cast<int64_t>(d.bits) * d.lanes + 7) / 8; }

/// Whether a packed tensor (declared `bits`-wide values) arrived as bytes holding
/// them (uint8/int8, or float4_e2m1fn x2) rather than as its sub-byte dtype itself.
[[maybe_unused]] inline bool is_byte_carrier(DLDataType d, int bits) { return !(d.bits == bits && d.lanes == 1); }

/// The last dim of a packed tensor counted in values: a byte carrier's extent times
/// 8 / bits, exactly; -1 when that exceeds int64 (fail_packed_count rejects such a
/// tensor before any symbol is bound from it).
[[maybe_unused]] inline int64_t packed_extent(const DLTensor* t, int bits) {
  const int64_t n = t->shape[t->ndim - 1];
  if (!is_byte_carrier(t->dtype, bits)) return n;
  // n * 8 / bits without n * 8: n = q * bits + r.
  const int64_t q = n / bits, rest = (n % bits) * 8 / bits;
  if (q > (INT64_MAX - rest) / 8) return -1;
  return q * 8 + rest;
}

/// Whether a packed tensor's last dim holds a whole number of values (6-bit types
/// fill whole bytes every 3 bytes).
[[maybe_unused]] inline bool packed_whole(const DLTensor* t, int bits) {
  if (!is_byte_carrier(t->dtype, bits)) return true;
  return (t->shape[t->ndim - 1] % bits) * 8 % bits == 0;
}

/// Why a DLTensor cannot describe memory (nullptr when it can): every later check
/// and the kernel rely on ndim >= 0, extents >= 0, a real element type, and a size
/// in bytes that fits in int64. A producer bug, not a caller's shape mistake.
[[maybe_unused]] inline const char* malformed_tensor(const DLTensor* t) {
  if (t->ndim < 0) return "ndim is negative";
  if (t->ndim > 0 && t->shape == nullptr) return "shape is NULL but ndim is not 0";
  if (t->dtype.bits == 0) return "dtype has 0 bits";
  if (t->dtype.lanes == 0) return "dtype has 0 lanes";
  int64_t bytes = element_bytes(t->dtype);
  bool ovf = false;
  for (int i = 0; i < t->ndim; ++i) {
    if (t->shape[i] < 0) return "an extent (shape[i]) is negative";
    if (t->shape[i] > 0) bytes = kjit_mul(bytes, t->shape[i], ovf);  // zeros aside, so no dim order hides it
  }
  if (ovf) return "the size in bytes (product of the extents and the element size) overflows int64";
  return nullptr;
}

/// malformed_tensor for a tensor whose ndim was checked to be R: the usual case is
/// one test without a loop, since extents that are all below 2^(40/R) (their OR
/// tells, a negative one being huge as unsigned) multiply with any element size
/// (at most 2^21 bytes) to below 2^61. Anything else takes the exact check.
KJIT_COLD inline const char* malformed_exact(const DLTensor* t) { return malformed_tensor(t); }

template <int R>
[[maybe_unused]] inline const char* malformed_ranked(const DLTensor* t) {
  uint64_t all = 0;
  for (int i = 0; i < R; ++i) all |= static_cast<uint64_t>(t->shape[i]);
  const bool usual = (R == 0 || t->shape != nullptr) && t->dtype.bits != 0 && t->dtype.lanes != 0 &&
                     (R == 0 || all < (uint64_t{1} << (40 / (R == 0 ? 1 : R))));
  return __builtin_expect(usual, 1) ? nullptr : malformed_exact(t);
}

/// A DLDataType's code, bits and lanes as one word: one compare tests all three.
[[maybe_unused]] inline uint32_t dtype_word(DLDataType d) {
  static_assert(sizeof(DLDataType) == sizeof(uint32_t), "DLDataType is code, bits and lanes");
  uint32_t w;
  std::memcpy(&w, &d, sizeof w);
  return w;
}

/// The format family of a DLPack code: float8 formats that share bits under several
/// names across frameworks (e4m3, e4m3fn, e4m3fnuz; e5m2, e5m2fnuz) are one.
[[maybe_unused]] inline int dtype_family(int code) {
  if (code == kDLFloat8_e4m3fn || code == kDLFloat8_e4m3fnuz) return kDLFloat8_e4m3;
  if (code == kDLFloat8_e5m2fnuz) return kDLFloat8_e5m2;
  return code;
}

/// Whether a tensor of dtype `got` passes the check for the spec's dtype {code, bits}:
/// one lane of the same family and bits; bool with TileLang's tolerance (kDLBool of 8
/// or 1 bits, int8/uint8, or any 1-bit type). Stubs and the call model both ask this.
[[maybe_unused]] inline bool dtype_accepted(DLDataType got, int code, int bits) {
  if (got.lanes != 1) return false;
  if (code == kDLBool) {
    return (got.code == kDLBool && (got.bits == 8 || got.bits == 1)) ||
           ((got.code == kDLInt || got.code == kDLUInt) && got.bits == 8) || got.bits == 1;
  }
  return got.bits == bits && dtype_family(got.code) == dtype_family(code);
}

/// Whether `got` is bytes that carry packed values of {code, bits}: int8/uint8, or
/// the values' own code with lanes filling a byte (torch's float4_e2m1fn_x2).
[[maybe_unused]] inline bool packs_values(DLDataType got, int code, int bits) {
  if ((got.code == kDLInt || got.code == kDLUInt) && got.bits == 8 && got.lanes == 1) return true;
  return 8 % bits == 0 && got.code == code && got.bits == bits && got.lanes == 8 / bits;
}

/// malformed_ranked<R> for a tensor whose dtype must be `expected` (a dtype_word
/// of nonzero bits and lanes): when it is, bits and lanes need no test of their
/// own, and the dtype check after this one compares the same word. Any other
/// dtype takes the exact check, then fails the dtype check if it is well formed.
template <int R>
[[maybe_unused]] inline const char* malformed_ranked(const DLTensor* t, uint32_t expected) {
  uint64_t all = 0;
  for (int i = 0; i < R; ++i) all |= static_cast<uint64_t>(t->shape[i]);
  const bool usual = (R == 0 || t->shape != nullptr) && dtype_word(t->dtype) == expected &&
                     (R == 0 || all < (uint64_t{1} << (40 / (R == 0 ? 1 : R))));
  return __builtin_expect(usual, 1) ? nullptr : malformed_exact(t);
}

/// One bound symbol, for messages: "n = 1024 (bound by a.shape[0])".
struct SymVal {
  const char* name;
  int64_t value;
  const char* bound_by;
};

/// What a caller other than tvm-ffi (the XLA handler) hands the checks: its stream.
struct CallContext {
  void* stream;
};

}  // namespace

/// An attr from the XLA handler that a TVMFFIAny cannot hold: a complex value
/// (tvm-ffi has no complex scalar) or a uint64 above INT64_MAX. Outside the unnamed
/// namespace: the XLA helpers' object, built apart from the module, fills it.
struct WideValue {
  double re;
  double im;
  uint64_t u64;
};

namespace {

/// The float16/bfloat16 conversions (float16_conversions.h), under kjit_stub's names.
using kjit_float16::bfloat16_bits;
using kjit_float16::bfloat16_value;
using kjit_float16::float16_bits;
using kjit_float16::float16_value;

/// The device stream, convertible to whatever the kernel declares (void*,
/// cudaStream_t, kjit::Stream, or int64_t as brainevent kernels take it).
struct StreamArg {
  void* ptr;
  template <typename T>
  operator T*() const {
    return static_cast<T*>(ptr);
  }
  operator int64_t() const { return reinterpret_cast<int64_t>(ptr); }
};

/// Whether a typed pointer U* may view elements of type E (void: the spec fixes no
/// type). Integers match by width and signedness: char is int8, long long is
/// int64. No sizeof unless both are integers (U may be incomplete, e.g. __half).
template <typename U, typename E>
constexpr bool pointer_fits() {
  if constexpr (std::is_void<E>::value || std::is_void<U>::value || std::is_same<U, E>::value) {
    return true;
  } else if constexpr (std::is_integral<U>::value && std::is_integral<E>::value) {
    return sizeof(U) == sizeof(E) && std::is_signed<U>::value == std::is_signed<E>::value;
  } else {
    return false;
  }
}

/// What a kernel parameter of tvm-ffi type T (tvm::ffi::TensorView, Tensor,
/// String, Bytes) is made from. Specialised in the tvm-ffi bridge below, which is
/// compiled only when the user's sources use tvm-ffi (KJIT_TVM_FFI_BRIDGE).
template <typename T>
struct FfiArg {
  static constexpr bool value = false;
};

/// How a kernel's own tensor type is built from a checked DLTensor: specialised
/// with `static U make(const DLTensor*)` by the generated code for such a type
/// (brainevent's BE::Tensor, when its headers are used); no other type has one.
template <typename U>
struct TensorFrom;

/// A tensor argument, convertible to kjit::TensorView, to a typed data pointer
/// (`const float*`; E is the element type the spec fixes, or void when it does
/// not), to a type with a TensorFrom, or with the bridge to tvm::ffi::TensorView /
/// tvm::ffi::Tensor. `any` is the argument as passed; fn, index and name are for
/// messages.
template <typename E>
struct TensorArg {
  const DLTensor* t;
  const TVMFFIAny* any;
  const char* fn;
  int index;
  const char* name;
  operator kjit::TensorView() const { return kjit::TensorView(t); }
  template <typename U, typename = decltype(TensorFrom<U>::make(nullptr))>
  operator U() const {
    return TensorFrom<U>::make(t);
  }
  template <typename T>
  operator T*() const {
    static_assert(pointer_fits<typename std::remove_cv<T>::type, E>(),
                  "kjit: a typed pointer parameter must match the element type of the spec");
    return t == nullptr ? nullptr : static_cast<T*>(kjit::TensorView(t).data_ptr());
  }
  template <typename T, typename std::enable_if<FfiArg<T>::value, int>::type = 0>
  operator T() const {
    return FfiArg<T>::from_tensor(t, any, fn, index, name);
  }
};

/// Whether every value of integer type T fits in integer type U.
template <typename U, typename T>
constexpr bool holds_every_value() {
  if (std::is_signed<U>::value == std::is_signed<T>::value) return sizeof(U) >= sizeof(T);
  return std::is_signed<U>::value && sizeof(U) > sizeof(T);  // unsigned U cannot hold a negative T
}

/// A shape symbol the spec passes to the kernel ("n: int64 symbol", T its type):
/// convertible to an integer parameter that holds every value of T.
template <typename T>
struct SymbolArg {
  int64_t value;
  template <typename U>
  operator U() const {
    static_assert(std::is_integral<U>::value && !std::is_same<U, bool>::value,
                  "kjit: a kernel parameter that receives a shape symbol ('n: int64 symbol' in the spec) must be an "
                  "integer type: declare it int64_t (or the integer type the spec names)");
    static_assert(!std::is_integral<U>::value || holds_every_value<U, T>(),
                  "kjit: a kernel parameter that receives a shape symbol is narrower than the symbol's type in the "
                  "spec: declare the parameter with that type, or name its type in the spec ('n: int32 symbol' for "
                  "an int parameter)");
    return static_cast<U>(value);
  }
};

/// A str or bytes argument (checked by the stub), convertible to std::string,
/// std::string_view, or with the bridge to tvm::ffi::String / tvm::ffi::Bytes.
struct TextArg {
  TVMFFIByteArray bytes;
  const TVMFFIAny* any;
  operator std::string() const { return std::string(bytes.data, bytes.size); }
  operator std::string_view() const { return std::string_view(bytes.data, bytes.size); }
  template <typename T, typename std::enable_if<FfiArg<T>::value, int>::type = 0>
  operator T() const {
    return FfiArg<T>::from_text(any);
  }
};

/// The content of a str or bytes argument; false when `a` is neither of `kind`.
[[maybe_unused]] inline bool text_bytes(const TVMFFIAny* a, bool bytes_kind, TVMFFIByteArray* out) {
  const int32_t object = bytes_kind ? kTVMFFIBytes : kTVMFFIStr;
  const int32_t small = bytes_kind ? kTVMFFISmallBytes : kTVMFFISmallStr;
  if (a->type_index == object) {
    *out = *TVMFFIBytesGetByteArrayPtr(a->v_obj);
  } else if (a->type_index == small) {
    *out = TVMFFISmallBytesGetContentByteArray(a);
  } else if (!bytes_kind && a->type_index == kTVMFFIRawStr) {
    *out = TVMFFIByteArray{a->v_c_str, std::strlen(a->v_c_str)};
  } else if (bytes_kind && a->type_index == kTVMFFIByteArrayPtr) {
    *out = *static_cast<const TVMFFIByteArray*>(a->v_ptr);
  } else {
    return false;
  }
  return true;
}

__attribute__((format(printf, 2, 3))) KJIT_COLD int raise(const char* kind, const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  TVMFFIErrorSetRaisedFromCStr(kind, buf);
  return -1;
}

/// A kTVMFFIOpaquePyObject argument whose `zero_padding` is this holds the name of
/// its Python type in `v_c_str` (kjit's Python call packs unknown objects so, for
/// messages; tvm-ffi's own conversion leaves zero_padding 0).
constexpr uint32_t kPythonTypeNamed = 0x4b4a4954;

KJIT_COLD const char* kind_name(const TVMFFIAny* a, char* buf, size_t n) {
  switch (a->type_index) {
    case kTVMFFINone:
      return "None";
    case kTVMFFIInt:
      std::snprintf(buf, n, "int %" PRId64, a->v_int64);
      return buf;
    case kTVMFFIBool:
      return a->v_int64 ? "bool True" : "bool False";
    case kTVMFFIFloat:
      std::snprintf(buf, n, "float %g", a->v_float64);
      return buf;
    case kTVMFFIOpaquePtr:
      return "an opaque pointer";
    case kTVMFFIDataType:
      return "a dtype";
    case kTVMFFIDevice:
      return "a device";
    case kTVMFFIDLTensorPtr:
      return "a tensor";
    case kTVMFFIRawStr:
    case kTVMFFISmallStr:
    case kTVMFFIStr:
      return "a string";
    case kTVMFFIByteArrayPtr:
    case kTVMFFISmallBytes:
    case kTVMFFIBytes:
      return "bytes";
    case kTVMFFIFunction:
      return "a function";
    case kTVMFFIShape:
      return "a shape";
    case kTVMFFITensor:
      return "a tensor";
    case kTVMFFIArray:
    case kTVMFFIList:
      return "a list";
    case kTVMFFIMap:
    case kTVMFFIDict:
      return "a dict";
    case kTVMFFIModule:
      return "a module";
    case kTVMFFIOpaquePyObject:
      if (a->zero_padding == kPythonTypeNamed) {  // kjit's own packing names the Python type
        std::snprintf(buf, n, "a %s", a->v_c_str);
        return buf;
      }
      return "an opaque Python object (a type tvm-ffi does not convert, such as complex or numpy.bool_)";
    default:
      std::snprintf(buf, n, "an object of FFI type index %d", a->type_index);
      return buf;
  }
}

// dtype names: kjit/dtype.h, which kjit/kernel.h includes.
using ::kjit::format_dtype_name;

KJIT_COLD const char* device_name(DLDevice d, char* buf, size_t n) {
  const char* name = "device";
  switch (d.device_type) {
    case kDLCPU:
      name = "cpu";
      break;
    case kDLCUDA:
      name = "cuda";
      break;
    case kDLCUDAHost:
      name = "cuda_host";
      break;
    case kDLOpenCL:
      name = "opencl";
      break;
    case kDLVulkan:
      name = "vulkan";
      break;
    case kDLMetal:
      name = "metal";
      break;
    case kDLROCM:
      name = "rocm";
      break;
    case kDLCUDAManaged:
      name = "cuda_managed";
      break;
    case kDLOneAPI:
      name = "oneapi";
      break;
    case kDLWebGPU:
      name = "webgpu";
      break;
    default:
      std::snprintf(buf, n, "device_type %d:%d", d.device_type, d.device_id);
      return buf;
  }
  if (d.device_type == kDLCPU) return name;
  std::snprintf(buf, n, "%s:%d", name, d.device_id);
  return buf;
}

/// "n = 4 (bound by a.shape[0]), k = 8 (bound by b.shape[1])"
KJIT_COLD const char* describe_syms(const SymVal* syms, int count, char* buf, size_t n) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < count && used < n; ++i) {
    int w = std::snprintf(buf + used, n - used, "%s%s = %" PRId64 " (bound by %s)", i ? ", " : "", syms[i].name,
                          syms[i].value, syms[i].bound_by);
    if (w < 0) break;
    used += static_cast<size_t>(w);
  }
  return buf;
}

KJIT_COLD int fail_count(const char* fn, const char* sig, int expected, int got) {
  return raise("TypeError", "%s: expected %d argument%s (%s), got %d", fn, expected, expected == 1 ? "" : "s", sig,
               got);
}

KJIT_COLD int fail_tensor_kind(const char* fn, int i, const char* name, const char* type, const TVMFFIAny* a,
                               bool optional) {
  char buf[96];
  return raise("TypeError", "%s: argument #%d '%s': expected a tensor%s (%s), got %s%s", fn, i, name,
               optional ? " or None" : "", type, kind_name(a, buf, sizeof(buf)),
               (a->type_index == kTVMFFINone && !optional) ? " (declare it 'optional' to accept None)" : "");
}

KJIT_COLD int fail_scalar_kind(const char* fn, int i, const char* name, const char* type, const char* accepted,
                               const TVMFFIAny* a, const char* note = "") {
  char buf[160];
  if (a->type_index == kTVMFFIBigInt) {
    return raise("ValueError",
                 "%s: argument #%d '%s': the integer is out of range for %s (tvm-ffi carries Python ints as int64, "
                 "so values outside [-2**63, 2**63 - 1] cannot reach a scalar)",
                 fn, i, name, type);
  }
  return raise("TypeError", "%s: argument #%d '%s': expected %s (%s), got %s%s", fn, i, name, accepted, type,
               kind_name(a, buf, sizeof(buf)), note);
}

KJIT_COLD int fail_int_range(const char* fn, int i, const char* name, const char* type, int64_t value,
                             const char* range) {
  return raise("ValueError", "%s: argument #%d '%s': %" PRId64 " is out of range for %s %s", fn, i, name, value, type,
               range);
}

KJIT_COLD int fail_symbol_range(const char* fn, const char* name, const char* type, int64_t value, const char* bound_by,
                                const char* range) {
  return raise("ValueError",
               "%s: symbol '%s' = %" PRId64
               " (bound by %s) is out of range for %s %s, the type the kernel's parameter '%s: %s symbol' has",
               fn, name, value, bound_by, type, range, name, type);
}

KJIT_COLD int fail_bool_value(const char* fn, int i, const char* name, int64_t value) {
  return raise("ValueError", "%s: argument #%d '%s': expected a bool (True/False or 0/1), got int %" PRId64, fn, i,
               name, value);
}

KJIT_COLD int fail_malformed(const char* fn, int i, const char* name, const DLTensor* t, const char* why) {
  char extents[256];
  size_t used = 0;
  extents[0] = '\0';
  for (int k = 0; t->shape != nullptr && k < t->ndim && k < 8 && used < sizeof(extents); ++k) {
    int w = std::snprintf(extents + used, sizeof(extents) - used, "%s%" PRId64, k ? ", " : "", t->shape[k]);
    if (w < 0) break;
    used += static_cast<size_t>(w);
  }
  return raise("ValueError",
               "%s: argument #%d '%s': malformed DLTensor: %s (ndim %d, shape [%s%s], dtype code %d bits %d lanes %d)",
               fn, i, name, why, t->ndim, extents, t->ndim > 8 ? ", ..." : "", t->dtype.code, t->dtype.bits,
               t->dtype.lanes);
}

/// Shape arithmetic whose exact value does not fit in int64 ("4*n" with n = 2**62).
KJIT_COLD int fail_overflow(const char* fn, const char* what, const SymVal* syms, int nsyms) {
  char bound[512];
  describe_syms(syms, nsyms, bound, sizeof(bound));
  return raise("ValueError", "%s: %s, which overflows int64%s%s", fn, what, nsyms ? " with " : "", bound);
}

KJIT_COLD int fail_ndim(const char* fn, int i, const char* name, const char* type, int expected, int got) {
  return raise("TypeError", "%s: argument #%d '%s': ndim must be %d (%s), got %d", fn, i, name, expected, type, got);
}

KJIT_COLD int fail_dtype(const char* fn, int i, const char* name, const char* expected, DLDataType got) {
  char buf[64];
  return raise("TypeError", "%s: argument #%d '%s': dtype must be %s, got %s", fn, i, name, expected,
               format_dtype_name(got, buf, sizeof(buf)));
}

/// A tensor typed by a dtype variable (or dtype(x)) whose dtype is not the one the
/// variable was bound to: "dtype must be float32 (T, bound by x), got float64".
KJIT_COLD int fail_dtype_bound(const char* fn, int i, const char* name, const char* var, DLDataType bound,
                               const char* by, DLDataType got) {
  char want[64], have[64];
  return raise("TypeError", "%s: argument #%d '%s': dtype must be %s (%s, bound by %s), got %s", fn, i, name,
               format_dtype_name(bound, want, sizeof(want)), var, by, format_dtype_name(got, have, sizeof(have)));
}

/// A scalar typed by a dtype variable no tensor bound (its carriers were all None).
KJIT_COLD int fail_dtype_unbound(const char* fn, int i, const char* name, const char* var, const char* carriers) {
  return raise("ValueError",
               "%s: argument #%d '%s' is typed by dtype variable %s, but no tensor bound it (%s: all None); pass one",
               fn, i, name, var, carriers);
}

/// A returned tensor typed by a dtype variable no tensor bound (its carriers were all None).
KJIT_COLD int fail_dtype_unbound_returned(const char* fn, const char* name, const char* var, const char* carriers) {
  return raise("ValueError",
               "%s: returned tensor '%s' is typed by dtype variable %s, but no tensor bound it (%s: all None); pass "
               "one",
               fn, name, var, carriers);
}

/// A template kernel whose dtype variable no tensor bound: no instantiation to call.
KJIT_COLD int fail_template_unbound(const char* fn, const char* callee, const char* var, const char* carriers) {
  return raise("ValueError",
               "%s: %s is instantiated per dtype of %s, but no tensor bound %s in this call (%s: all None); pass one",
               fn, callee, var, var, carriers);
}

/// A tensor with a batch group whose rank is below its declared dims.
KJIT_COLD int fail_ndim_at_least(const char* fn, int i, const char* name, const char* type, int expected, int got) {
  return raise("TypeError", "%s: argument #%d '%s': ndim must be at least %d (%s), got %d", fn, i, name, expected, type,
               got);
}

/// "(4, 16)", "(4,)", "()": dims as Python prints a shape tuple.
KJIT_COLD const char* format_dims(const int64_t* dims, int n, char* buf, size_t size) {
  size_t used = static_cast<size_t>(std::snprintf(buf, size, "("));
  for (int i = 0; i < n && used < size; ++i) {
    used += static_cast<size_t>(std::snprintf(buf + used, size - used, "%s%" PRId64, i ? ", " : "", dims[i]));
  }
  if (used < size) std::snprintf(buf + used, size - used, n == 1 ? ",)" : ")");
  return buf;
}

/// A tensor whose leading dims differ from its batch group's, bound by another.
KJIT_COLD int fail_batch(const char* fn, int i, const char* name, const char* group, const int64_t* bound, int nbound,
                         const char* by, const int64_t* got, int ngot) {
  char want[256], have[256];
  return raise("ValueError", "%s: argument #%d '%s': leading dims must equal %s = %s (bound by %s), got %s", fn, i,
               name, group, format_dims(bound, nbound, want, sizeof(want)), by,
               format_dims(got, ngot, have, sizeof(have)));
}

/// A returned tensor with a batch group no tensor bound (its carriers were all None).
KJIT_COLD int fail_batch_unbound_returned(const char* fn, const char* name, const char* group, const char* carriers) {
  return raise("ValueError",
               "%s: returned tensor '%s' has batch group *%s, but no tensor bound it (%s: all None); pass one", fn,
               name, group, carriers);
}

/// Whether dims `a` (na of them) equal dims `b` (nb).
[[maybe_unused]] inline bool same_dims(const int64_t* a, int na, const int64_t* b, int nb) {
  return na == nb && (na == 0 || std::memcmp(a, b, sizeof(int64_t) * static_cast<size_t>(na)) == 0);
}

/// The last `k` dims of `t` (ndim >= k) as a tensor of rank k, same data: what the
/// checks of a tensor's declared dims read after its batch group.
[[maybe_unused]] inline DLTensor trailing_dims(const DLTensor* t, int k) {
  DLTensor v = *t;
  const int lead = t->ndim - k;
  v.ndim = k;
  v.shape = t->shape + lead;
  v.strides = t->strides != nullptr ? t->strides + lead : nullptr;
  return v;
}

/// An integer scalar typed by a dtype variable whose value the bound dtype cannot hold.
KJIT_COLD int fail_dtype_range(const char* fn, int i, const char* name, const char* var, DLDataType bound, int64_t v) {
  char dtype[64];
  return raise("ValueError", "%s: argument #%d '%s': %" PRId64 " is out of range for %s (%s's dtype in this call)", fn,
               i, name, v, format_dtype_name(bound, dtype, sizeof(dtype)), var);
}

/// A floating scalar as the float dtype `d` holds it (rounded to float16, bfloat16
/// or float32; float64 as it is): a scalar typed by a dtype variable.
[[maybe_unused]] inline double round_to_dtype(double v, DLDataType d) {
  if (d.code == kDLFloat && d.bits == 16) return float16_value(float16_bits(v));
  if (d.code == kDLBfloat && d.bits == 16) return bfloat16_value(bfloat16_bits(v));
  if (d.code == kDLFloat && d.bits == 32) return static_cast<double>(static_cast<float>(v));
  return v;
}

/// Whether integer dtype `d` (or bool) holds `v`.
[[maybe_unused]] inline bool int_fits_dtype(int64_t v, DLDataType d) {
  if (d.code == kDLBool) return v == 0 || v == 1;
  if (d.bits >= 64) return d.code == kDLInt || v >= 0;
  const int64_t span = int64_t{1} << d.bits;
  return d.code == kDLUInt ? v >= 0 && v < span : v >= -span / 2 && v < span / 2;
}

/// What a field had to equal: "128 (fixed by the signature)", "n = 4 (bound by
/// a.shape[0])" or "m + n = 12 with m = 4 (bound by ...), n = 8 (bound by ...)".
KJIT_COLD const char* describe_expected(const char* expr, int64_t expected, const SymVal* syms, int nsyms, char* buf,
                                        size_t n) {
  char bound[512];
  if (nsyms == 0) {
    std::snprintf(buf, n, "%" PRId64 " (fixed by the signature)", expected);
    return buf;
  }
  describe_syms(syms, nsyms, bound, sizeof(bound));
  if (nsyms == 1 && std::strcmp(syms[0].name, expr) == 0) {
    std::snprintf(buf, n, "%s", bound);
  } else {
    std::snprintf(buf, n, "%s = %" PRId64 " with %s", expr, expected, bound);
  }
  return buf;
}

/// A field that had to equal an expression of bound symbols (or a literal).
KJIT_COLD int fail_field(const char* fn, int i, const char* name, const char* field, const char* expr, int64_t expected,
                         const SymVal* syms, int nsyms, int64_t got) {
  char want[768];
  return raise("ValueError", "%s: argument #%d '%s': %s must equal %s, got %" PRId64, fn, i, name, field,
               describe_expected(expr, expected, syms, nsyms, want, sizeof(want)), got);
}

/// The last dim of a packed tensor (`bits`-wide values of `values`): as fail_field
/// when the tensor has the sub-byte dtype itself; for bytes holding the values, the
/// count is in values and the message says how many bits arrived.
KJIT_COLD int fail_packed_field(const char* fn, int i, const char* name, const char* field, const char* expr,
                                int64_t expected, const SymVal* syms, int nsyms, int64_t got, const DLTensor* t,
                                int bits, const char* values) {
  if (!is_byte_carrier(t->dtype, bits)) return fail_field(fn, i, name, field, expr, expected, syms, nsyms, got);
  char want[768];
  char carrier[64];
  const int64_t bytes = t->shape[t->ndim - 1];
  int64_t got_bits = 0, expected_bits = 0;  // INT64_MAX past int64, never a wrapped value
  if (__builtin_mul_overflow(got, int64_t{bits}, &got_bits)) got_bits = INT64_MAX;
  if (__builtin_mul_overflow(expected, int64_t{bits}, &expected_bits)) expected_bits = INT64_MAX;
  return raise("ValueError",
               "%s: argument #%d '%s': %s counts %s values and must equal %s, got %" PRId64 ": %" PRId64
               " bytes of %s hold %" PRId64 " bits, not the %" PRId64 " bits of %" PRId64 " %s values",
               fn, i, name, field, values, describe_expected(expr, expected, syms, nsyms, want, sizeof(want)), got,
               bytes, format_dtype_name(t->dtype, carrier, sizeof(carrier)), got_bits, expected_bits, expected, values);
}

/// A byte carrier whose last dim is not a whole number of values (6-bit types).
KJIT_COLD int fail_packed_bits(const char* fn, int i, const char* name, const DLTensor* t, int bits, const char* values,
                               int bytes_per_group) {
  char carrier[64];
  const int64_t bytes = t->shape[t->ndim - 1];
  int64_t total_bits = 0;
  if (__builtin_mul_overflow(bytes, int64_t{8}, &total_bits)) total_bits = INT64_MAX;
  return raise("ValueError",
               "%s: argument #%d '%s': its last dim of %" PRId64 " bytes of %s holds %" PRId64
               " bits, not a whole number of %d-bit %s values (pass a multiple of %d bytes)",
               fn, i, name, bytes, format_dtype_name(t->dtype, carrier, sizeof(carrier)), total_bits, bits, values,
               bytes_per_group);
}

/// A byte carrier holding more packed values than int64 counts.
KJIT_COLD int fail_packed_count(const char* fn, int i, const char* name, const DLTensor* t, int bits,
                                const char* values) {
  char carrier[64];
  return raise("ValueError",
               "%s: argument #%d '%s': its last dim of %" PRId64
               " bytes of %s holds more %d-bit %s values than int64 counts (2^63 or more)",
               fn, i, name, t->shape[t->ndim - 1], format_dtype_name(t->dtype, carrier, sizeof(carrier)), bits, values);
}

/// A packed tensor's values must be contiguous along the last dim.
KJIT_COLD int fail_packed_stride(const char* fn, int i, const char* name, const DLTensor* t, const char* values) {
  return raise("ValueError",
               "%s: argument #%d '%s': strides[%d] must be 1: the last dim packs %s values and must be contiguous, "
               "got %" PRId64 " (pass a contiguous copy)",
               fn, i, name, t->ndim - 1, values, t->strides[t->ndim - 1]);
}

/// A dim that should have determined one unknown symbol but fits no valid value.
KJIT_COLD int fail_solve(const char* fn, int i, const char* name, const char* field, const char* expr,
                         const char* unknown, const SymVal* syms, int nsyms, int64_t got) {
  char bound[512];
  describe_syms(syms, nsyms, bound, sizeof(bound));
  return raise("ValueError", "%s: argument #%d '%s': %s = %" PRId64 " does not match %s for any integer %s >= 0%s%s%s",
               fn, i, name, field, got, expr, unknown, nsyms ? " (with " : "", bound, nsyms ? ")" : "");
}

KJIT_COLD int fail_unbound(const char* fn, const char* sym, const char* carriers) {
  return raise("ValueError",
               "%s: symbol '%s' is needed but no argument determined it (it is carried by %s; a None tensor "
               "or a zero factor such as n = 0 in n*k leaves it open)",
               fn, sym, carriers);
}

KJIT_COLD int fail_div_zero(const char* fn, const char* where, const char* divisor, const SymVal* syms, int nsyms) {
  char bound[512];
  describe_syms(syms, nsyms, bound, sizeof(bound));
  if (nsyms == 1 && std::strcmp(syms[0].name, divisor) == 0) {
    return raise("ValueError", "%s: %s divides by zero: %s", fn, where, bound);
  }
  return raise("ValueError", "%s: %s divides by zero: %s = 0 with %s", fn, where, divisor, bound);
}

KJIT_COLD int fail_compact(const char* fn, int i, const char* name, const DLTensor* t, int d) {
  int64_t expected = 1;
  for (int k = t->ndim - 1; k > d; --k) expected *= t->shape[k];
  return raise("ValueError",
               "%s: argument #%d '%s': strides[%d] must be %" PRId64 " for a compact row-major tensor, got %" PRId64
               " (pass a contiguous copy, or declare '%s' strided to accept any layout)",
               fn, i, name, d, expected, t->strides[d], name);
}

KJIT_COLD int fail_byte_offset(const char* fn, int i, const char* name, const DLTensor* t) {
  return raise("ValueError",
               "%s: argument #%d '%s': byte_offset must be a multiple of the element size %" PRId64 ", got %" PRIu64,
               fn, i, name, element_bytes(t->dtype), t->byte_offset);
}

KJIT_COLD int fail_align(const char* fn, int i, const char* name, const void* p, int64_t align) {
  uintptr_t v = reinterpret_cast<uintptr_t>(p);
  uintptr_t actual = v & (~v + 1);
  return raise("ValueError",
               "%s: argument #%d '%s': data pointer %p must be aligned to %" PRId64
               " bytes, but is aligned to %" PRIuPTR,
               fn, i, name, p, align, actual);
}

KJIT_COLD int fail_device_type(const char* fn, int i, const char* name, const char* expected, DLDevice got) {
  char buf[64];
  return raise("ValueError", "%s: argument #%d '%s': device must be %s, got %s", fn, i, name, expected,
               device_name(got, buf, sizeof(buf)));
}

/// Device ids differ. device_name() leaves out cpu's id, so here it is spelled out
/// ("cpu:0 ... got cpu:1") for every device type.
KJIT_COLD int fail_device_id(const char* fn, int i, const char* name, DLDevice expected, const char* bound_by,
                             DLDevice got) {
  char a[64], b[64];
  if (expected.device_type == kDLCPU) std::snprintf(a, sizeof(a), "cpu:%d", expected.device_id);
  if (got.device_type == kDLCPU) std::snprintf(b, sizeof(b), "cpu:%d", got.device_id);
  return raise("ValueError", "%s: argument #%d '%s': device must be %s (the device of '%s'), got %s", fn, i, name,
               expected.device_type == kDLCPU ? a : device_name(expected, a, sizeof(a)), bound_by,
               got.device_type == kDLCPU ? b : device_name(got, b, sizeof(b)));
}

KJIT_COLD int fail_null_data(const char* fn, int i, const char* name) {
  return raise("ValueError", "%s: argument #%d '%s': data pointer is NULL but the tensor is not empty", fn, i, name);
}

KJIT_COLD int fail_constraint(const char* fn, const char* text, const SymVal* syms, int nsyms) {
  char bound[512];
  describe_syms(syms, nsyms, bound, sizeof(bound));
  return raise("ValueError", "%s: constraint '%s' failed with %s", fn, text, bound);
}

/// A returned tensor's extent that came out negative (the call model's check: kjit
/// allocates returned tensors from the shapes the arguments bind).
KJIT_COLD int fail_negative_extent(const char* fn, const char* what, int64_t value, const SymVal* syms, int nsyms) {
  char bound[512];
  describe_syms(syms, nsyms, bound, sizeof(bound));
  return raise("ValueError", "%s: %s is %" PRId64 "%s%s; an extent must not be negative", fn, what, value,
               nsyms ? " with " : "", bound);
}

/// A returned tensor whose dtype is dtype(x), called with x None (the call model's check).
KJIT_COLD int fail_dtype_source_none(const char* fn, const char* name, const char* source) {
  return raise("ValueError", "%s: returned tensor '%s' takes the dtype of '%s' (dtype(%s)), which is None", fn, name,
               source, source);
}

/// A returned tensor whose dtype is dtype(x), called with x of a dtype kjit cannot
/// allocate (the call model's check: complex32, lanes, ...).
KJIT_COLD int fail_dtype_source_unknown(const char* fn, const char* name, const char* source, DLDataType got) {
  char buf[64];
  return raise("TypeError",
               "%s: returned tensor '%s' takes the dtype of '%s' (dtype(%s)), which is %s: kjit cannot allocate "
               "that dtype; pass '%s' in a dtype kjit knows (docs/spec.md)",
               fn, name, source, source, format_dtype_name(got, buf, sizeof(buf)), source);
}

/// A kernel exception's message as kjit's own errors read: "fn: what" (left as it
/// is when the kernel named the function itself).
inline std::string named_message(const char* fn, const char* what) {
  const size_t n = std::strlen(fn);
  if (std::strncmp(what, fn, n) == 0 && what[n] == ':' && what[n + 1] == ' ') return what;
  return std::string(fn) + ": " + what;
}

/// Maps the exception in flight to an FFI error; the one place C++ exceptions
/// cross into the C ABI.
KJIT_COLD int raise_current_exception(const char* fn) {
  try {
    throw;
#ifdef KJIT_TVM_FFI_BRIDGE
  } catch (const ::tvm::ffi::Error& e) {
    // TVM_FFI_THROW(ValueError) and friends keep their kind and traceback; a failed
    // TVM_FFI_ICHECK (kind InternalError) is the kernel's error, not kjit's bug.
    if (e.kind() != "InternalError") {
      ::tvm::ffi::detail::SetSafeCallRaised(
          ::tvm::ffi::Error(e.kind(), named_message(fn, e.message().c_str()), e.backtrace()));
      return -1;
    }
    return raise("RuntimeError", "%s: %s", fn, e.message().c_str());
#endif
  } catch (const kjit::Error& e) {  // the kind names: kjit/errors.h, shared with the runtime
    TVMFFIErrorSetRaisedFromCStr(e.kind(), named_message(fn, e.what()).c_str());
  } catch (const std::exception& e) {
    TVMFFIErrorSetRaisedFromCStr(kjit::error_kind_name(kjit::kernel_error_kind(e)),
                                 named_message(fn, e.what()).c_str());
  } catch (...) {
    return raise("RuntimeError", "%s: the kernel threw an exception that is not a std::exception", fn);
  }
  return -1;
}

/// Calls the kernel and stores what it returns (nothing, a bool, an integer, a
/// floating-point number, std::string as str; with the tvm-ffi bridge, any value
/// tvm-ffi can hold, tvm::ffi::Tensor and String among them) as the FFI result.
template <typename F>
[[maybe_unused]] inline void call_and_store(TVMFFIAny* result, F&& f) {
  using R = decltype(f());
  result->zero_padding = 0;
  if constexpr (std::is_void<R>::value) {
    f();
    result->type_index = kTVMFFINone;
    result->v_int64 = 0;
  } else if constexpr (std::is_same<R, bool>::value) {
    result->v_int64 = f() ? 1 : 0;
    result->type_index = kTVMFFIBool;
  } else if constexpr (std::is_integral<R>::value) {
    result->v_int64 = static_cast<int64_t>(f());
    result->type_index = kTVMFFIInt;
  } else if constexpr (std::is_floating_point<R>::value) {
    result->v_float64 = static_cast<double>(f());
    result->type_index = kTVMFFIFloat;
  } else if constexpr (std::is_same<typename std::decay<R>::type, std::string>::value) {
    const std::string text = f();
    const TVMFFIByteArray bytes{text.data(), text.size()};
    if (TVMFFIStringFromByteArray(&bytes, result) != 0) throw std::bad_alloc();
#ifdef KJIT_TVM_FFI_BRIDGE
  } else if constexpr (std::is_constructible<::tvm::ffi::Any, R>::value) {
    result->type_index = kTVMFFINone;
    result->v_int64 = 0;
    *reinterpret_cast<::tvm::ffi::Any*>(result) = ::tvm::ffi::Any(f());
#endif
  } else {
    static_assert(std::is_void<R>::value,
                  "kjit: a kernel returns void, bool, an integer, a floating-point number or std::string (tvm-ffi "
                  "values such as tvm::ffi::Tensor when the sources use tvm-ffi)");
  }
}

template <typename R>
[[maybe_unused]] inline const char* result_schema();

/// The schema of a kernel's return: its one type's, or for a template kernel whose
/// instantiations return different types (T), Any.
template <typename R0, typename... Rs>
[[maybe_unused]] inline const char* results_schema() {
  if constexpr ((std::is_same<R0, Rs>::value && ...)) {
    return result_schema<R0>();
  } else {
    return R"({\"type\":\"Any\"})";
  }
}

/// The tvm-ffi type schema of a kernel's return type R (as TVM_FFI_DLL_EXPORT_TYPED_FUNC
/// writes it), already escaped for a JSON string: the metadata nests it in one.
template <typename R>
[[maybe_unused]] inline const char* result_schema() {
  if constexpr (std::is_void<R>::value) {
    return R"({\"type\":\"None\"})";
  } else if constexpr (std::is_same<R, bool>::value) {
    return R"({\"type\":\"bool\"})";
  } else if constexpr (std::is_integral<R>::value) {
    return R"({\"type\":\"int\"})";
  } else if constexpr (std::is_floating_point<R>::value) {
    return R"({\"type\":\"float\"})";
  } else if constexpr (std::is_same<typename std::decay<R>::type, std::string>::value) {
    return R"({\"type\":\"ffi.String\"})";
#ifdef KJIT_TVM_FFI_BRIDGE
  } else if constexpr (std::is_constructible<::tvm::ffi::Any, R>::value) {
    static const std::string escaped = [] {
      std::string out;
      for (char c : ::tvm::ffi::TypeTraits<typename std::decay<R>::type>::TypeSchema()) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
      }
      return out;
    }();
    return escaped.c_str();
#endif
  } else {
    return R"({\"type\":\"Any\"})";
  }
}

/// `head + middle + tail` as a string result, allocated by libtvm_ffi so it
/// outlives this library (tvm-ffi's metadata and doc exports do the same).
KJIT_COLD int store_text(TVMFFIAny* result, const char* head, const char* middle = "", const char* tail = "") {
  const size_t a = std::strlen(head), b = std::strlen(middle), c = std::strlen(tail);
  char* buf = static_cast<char*>(std::malloc(a + b + c + 1));
  if (buf == nullptr) return raise("MemoryError", "kjit: out of memory building function metadata");
  // A byte array of known size: no terminating NUL is needed.
  std::memcpy(buf, head, a);          // NOLINT(bugprone-not-null-terminated-result)
  std::memcpy(buf + a, middle, b);    // NOLINT(bugprone-not-null-terminated-result)
  std::memcpy(buf + a + b, tail, c);  // NOLINT(bugprone-not-null-terminated-result)
  const TVMFFIByteArray bytes{buf, a + b + c};
  const int rc = TVMFFIStringFromByteArray(&bytes, result);
  std::free(buf);
  return rc;
}

}  // namespace
}  // namespace kjit_stub
#ifdef KJIT_TVM_FFI_BRIDGE
// ---- the tvm-ffi bridge: kernels written for tvm_ffi.cpp.load_inline take and
// return tvm-ffi types. Compiled only when the user's sources use tvm-ffi, so
// other modules never parse tvm-ffi's C++ headers. ----
namespace kjit_stub {
namespace {

template <>
struct FfiArg<::tvm::ffi::TensorView> {
  static constexpr bool value = true;
  static ::tvm::ffi::TensorView from_tensor(const DLTensor* t, const TVMFFIAny*, const char* fn, int index,
                                            const char* name) {
    if (t == nullptr) {
      throw kjit::TypeError(std::string(fn) + ": argument #" + std::to_string(index) + " '" + name +
                            "': None cannot become a tvm::ffi::TensorView; take tvm::ffi::Optional<tvm::ffi::Tensor> "
                            "or kjit::TensorView (defined() is false for None)");
    }
    return ::tvm::ffi::TensorView(t);
  }
};

template <>
struct FfiArg<::tvm::ffi::Tensor> {
  static constexpr bool value = true;
  static ::tvm::ffi::Tensor from_tensor(const DLTensor* t, const TVMFFIAny* any, const char* fn, int index,
                                        const char* name) {
    if (t == nullptr) return ::tvm::ffi::Tensor();
    if (any->type_index != kTVMFFITensor) {
      throw kjit::TypeError(std::string(fn) + ": argument #" + std::to_string(index) + " '" + name +
                            "': the kernel takes tvm::ffi::Tensor, which owns its tensor, but the caller passed a "
                            "borrowed DLTensor*; take tvm::ffi::TensorView to accept it");
    }
    return reinterpret_cast<const ::tvm::ffi::AnyView*>(any)->cast<::tvm::ffi::Tensor>();
  }
};

template <>
struct FfiArg<::tvm::ffi::String> {
  static constexpr bool value = true;
  static ::tvm::ffi::String from_text(const TVMFFIAny* any) {
    return reinterpret_cast<const ::tvm::ffi::AnyView*>(any)->cast<::tvm::ffi::String>();
  }
};

template <>
struct FfiArg<::tvm::ffi::Bytes> {
  static constexpr bool value = true;
  static ::tvm::ffi::Bytes from_text(const TVMFFIAny* any) {
    return reinterpret_cast<const ::tvm::ffi::AnyView*>(any)->cast<::tvm::ffi::Bytes>();
  }
};

}  // namespace
}  // namespace kjit_stub
#endif  // KJIT_TVM_FFI_BRIDGE
#undef KJIT_COLD
// ---- end of kjit stub prelude ----

#endif  // KJIT_DETAIL_STUB_PRELUDE_H_
