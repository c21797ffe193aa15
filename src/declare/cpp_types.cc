// C++ parameter types -> kjit roles: brainevent's type table, plus size_t, long, unsigned
// and friends that brainevent silently dropped.
#include "declare/cpp_types.h"

#include <map>

namespace kjit {
namespace {

std::string strip_std(const std::string& base) {
  if (base.rfind("::", 0) == 0) return strip_std(base.substr(2));
  if (base.rfind("std::", 0) == 0) return base.substr(5);
  return base;
}

/// `base` without a leading "::".
std::string unrooted(const std::string& base) { return base.rfind("::", 0) == 0 ? base.substr(2) : base; }

bool is_tensor_type(const std::string& base) {
  // tvm-ffi's tensors as kernels for tvm_ffi.cpp.load_inline spell them (also
  // through `namespace ffi = tvm::ffi;`).
  static const char* const kNames[] = {"kjit::TensorView", "TensorView",       "BE::Tensor", "tvm::ffi::TensorView",
                                       "ffi::TensorView",  "tvm::ffi::Tensor", "ffi::Tensor"};
  std::string b = unrooted(base);
  for (const char* n : kNames) {
    if (b == n) return true;
  }
  return false;
}

/// str and bytes parameters: tvm-ffi's String and Bytes, std::string, std::string_view.
std::optional<ScalarType> text_type(const std::string& base) {
  std::string b = unrooted(base);
  if (b == "tvm::ffi::String" || b == "ffi::String" || b == "std::string" || b == "std::string_view")
    return ScalarType::kStr;
  if (b == "tvm::ffi::Bytes" || b == "ffi::Bytes") return ScalarType::kBytes;
  return std::nullopt;
}

bool is_stream_type(const std::string& base) {
  return base == "cudaStream_t" || base == "CUstream" || base == "kjit::Stream" || base == "::kjit::Stream";
}

const DTypeInfo* element_dtype(const std::string& base) {
  static const std::map<std::string, std::string> kExtra = {
      {"__half", "float16"}, {"half", "float16"}, {"__nv_bfloat16", "bfloat16"}, {"nv_bfloat16", "bfloat16"}};
  auto it = kExtra.find(base);
  if (it != kExtra.end()) return find_dtype(it->second);
  auto scalar = scalar_type_of_cpp(base);
  if (!scalar || *scalar == ScalarType::kFloat16 || *scalar == ScalarType::kBFloat16) return nullptr;
  return find_dtype(scalar_type_name(*scalar));
}

CppRole unmapped(std::string problem) {
  CppRole r;
  r.problem = std::move(problem);
  return r;
}

CppRole pointer_role(const CppParam& p) {
  CppRole r;
  if (p.base == "void") {
    if (p.name == "stream") {
      r.kind = CppRole::Kind::kStream;
      return r;
    }
  } else {
    r.dtype = element_dtype(p.base);
    if (r.dtype == nullptr) {
      return unmapped("a pointer to '" + p.base +
                      "' is not a known element type (typed pointers: float*, double*, int32_t*, ..., __half*, "
                      "void*; or take kjit::TensorView)");
    }
  }
  r.kind = CppRole::Kind::kTensor;
  r.out = !p.is_const;
  return r;
}

}  // namespace

std::optional<ScalarType> scalar_type_of_cpp(const std::string& written) {
  static const std::map<std::string, ScalarType> kTable = {
      {"bool", ScalarType::kBool},
      {"int8_t", ScalarType::kInt8},
      {"char", ScalarType::kInt8},
      {"signed char", ScalarType::kInt8},
      {"uint8_t", ScalarType::kUInt8},
      {"unsigned char", ScalarType::kUInt8},
      {"int16_t", ScalarType::kInt16},
      {"short", ScalarType::kInt16},
      {"short int", ScalarType::kInt16},
      {"signed short", ScalarType::kInt16},
      {"uint16_t", ScalarType::kUInt16},
      {"unsigned short", ScalarType::kUInt16},
      {"unsigned short int", ScalarType::kUInt16},
      {"int32_t", ScalarType::kInt32},
      {"int", ScalarType::kInt32},
      {"signed", ScalarType::kInt32},
      {"signed int", ScalarType::kInt32},
      {"uint32_t", ScalarType::kUInt32},
      {"unsigned", ScalarType::kUInt32},
      {"unsigned int", ScalarType::kUInt32},
      {"int64_t", ScalarType::kInt64},
      {"long", ScalarType::kInt64},
      {"long int", ScalarType::kInt64},
      {"long long", ScalarType::kInt64},
      {"long long int", ScalarType::kInt64},
      {"signed long", ScalarType::kInt64},
      {"signed long long", ScalarType::kInt64},
      {"ptrdiff_t", ScalarType::kInt64},
      {"intptr_t", ScalarType::kInt64},
      {"ssize_t", ScalarType::kInt64},
      {"uint64_t", ScalarType::kUInt64},
      {"unsigned long", ScalarType::kUInt64},
      {"unsigned long int", ScalarType::kUInt64},
      {"unsigned long long", ScalarType::kUInt64},
      {"unsigned long long int", ScalarType::kUInt64},
      {"size_t", ScalarType::kUInt64},
      {"uintptr_t", ScalarType::kUInt64},
      {"float", ScalarType::kFloat32},
      {"double", ScalarType::kFloat64},
      {"complex<float>", ScalarType::kComplex64},
      {"complex<double>", ScalarType::kComplex128},
  };
  auto it = kTable.find(strip_std(written));
  if (it == kTable.end()) return std::nullopt;
  return it->second;
}

CppRole classify_cpp_param(const CppParam& p) {
  if (p.pointer_depth > 1) return unmapped("a pointer to a pointer has no kjit meaning");
  if (p.pointer_depth == 1) return pointer_role(p);
  CppRole r;
  if (is_tensor_type(p.base)) {
    if (p.is_reference && !p.is_const) {
      return unmapped("a non-const reference to a tensor view cannot bind to kjit's argument; take '" + p.base +
                      "' by value (non-const = output) or by const reference (input)");
    }
    r.kind = CppRole::Kind::kTensor;
    r.out = !p.is_const;
    return r;
  }
  if (is_stream_type(p.base)) {
    r.kind = CppRole::Kind::kStream;
    return r;
  }
  if (auto text = text_type(p.base)) {
    if (p.is_reference && !p.is_const) return unmapped("a str or bytes attr cannot be a non-const reference");
    r.kind = CppRole::Kind::kScalar;
    r.scalar = *text;
    return r;
  }
  auto scalar = scalar_type_of_cpp(p.base);
  if (scalar && p.name == "stream" && is_integer(*scalar)) {
    r.kind = CppRole::Kind::kStream;  // brainevent's `int64_t stream`
    return r;
  }
  if (scalar) {
    if (p.is_reference && !p.is_const) return unmapped("a scalar attr cannot be a non-const reference");
    r.kind = CppRole::Kind::kScalar;
    r.scalar = *scalar;
    return r;
  }
  if (p.base == "__half" || p.base == "half" || p.base == "__nv_bfloat16" || p.base == "nv_bfloat16") {
    return unmapped("16-bit float attrs reach the kernel as uint16_t raw bits: declare it 'uint16_t " + p.name +
                    "' with the token 'attr." + p.name + ":float16' (or bfloat16)");
  }
  return unmapped(
      "kjit maps tensors (kjit::TensorView, BE::Tensor, tvm::ffi::TensorView, tvm::ffi::Tensor, typed pointers), "
      "scalars (bool, int8_t..uint64_t, int, long, size_t, float, double, std::complex<float|double>, ...), str and "
      "bytes (tvm::ffi::String, tvm::ffi::Bytes, std::string, std::string_view) and streams (cudaStream_t, "
      "kjit::Stream, int64_t stream)");
}

std::string describe_cpp_param(const CppParam& p) { return p.name.empty() ? p.type : p.type + " " + p.name; }

}  // namespace kjit
