// What a C++ parameter type means to kjit: a tensor, a scalar, the stream, or
// something kjit cannot map (with the reason, so the user hears it from kjit and
// not later from the compiler).
#ifndef KJIT_SRC_DECLARE_CPP_TYPES_H_
#define KJIT_SRC_DECLARE_CPP_TYPES_H_

#include <optional>
#include <string>

#include "declare/cpp_signature.h"
#include "kjit/spec.h"

namespace kjit {

struct CppRole {
  enum class Kind { kTensor, kScalar, kStream, kUnmapped };
  Kind kind = Kind::kUnmapped;
  bool out = false;                  ///< kTensor: non-const, the kernel writes it
  const DTypeInfo* dtype = nullptr;  ///< kTensor: element type of a typed pointer
  ScalarType scalar = ScalarType::kInt64;
  std::string problem;  ///< kUnmapped: why, and what to write instead
};

CppRole classify_cpp_param(const CppParam& param);

/// The scalar type of a C++ type spelling ("unsigned long", "std::int32_t").
std::optional<ScalarType> scalar_type_of_cpp(const std::string& base);

/// "const float* x" as written back, for messages.
std::string describe_cpp_param(const CppParam& param);

}  // namespace kjit

#endif  // KJIT_SRC_DECLARE_CPP_TYPES_H_
