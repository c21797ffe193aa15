// C++ text of the float16/bfloat16 <-> double conversions, emitted into generated
// code that must not depend on CUDA or compiler-specific half types.
#ifndef KJIT_SRC_SUPPORT_FLOAT16_TEXT_H_
#define KJIT_SRC_SUPPORT_FLOAT16_TEXT_H_

#include <string>

namespace kjit {

/// Defines float16_bits(double), bfloat16_bits(double) (round to nearest even;
/// NaN stays NaN), float16_value(uint16_t) and bfloat16_value(uint16_t). Needs
/// <cstdint>, <cstring> and <cmath>.
std::string float16_conversions_text();

}  // namespace kjit

#endif  // KJIT_SRC_SUPPORT_FLOAT16_TEXT_H_
