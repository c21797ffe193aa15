// How a spec's parameters read in messages: the stub emitter writes these texts
// into generated code and the call model (src/call) passes them to the same
// message functions, so both say the same thing.
#ifndef KJIT_SRC_SIGNATURE_DESCRIBE_H_
#define KJIT_SRC_SIGNATURE_DESCRIBE_H_

#include <string>

#include "kjit/spec.h"

namespace kjit {

/// A parameter's type as the grammar writes it, without its name: "float32[n] out".
std::string param_type_text(const Param& p);
/// What a dtype check expects: "float32", "one of float16, bfloat16", and for packed
/// tensors what bytes may carry them.
std::string expected_dtype_text(const TensorSpec& t);
/// The values a packed tensor holds: "int4", "int4|uint4".
std::string packed_values(const TensorSpec& t);
/// The width in bits of a packed tensor's values.
int packed_bits(const TensorSpec& t);

}  // namespace kjit

#endif  // KJIT_SRC_SIGNATURE_DESCRIBE_H_
