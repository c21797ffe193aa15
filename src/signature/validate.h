// Spec validation with the original signature text, so errors can point into it.
#ifndef KJIT_SRC_SIGNATURE_VALIDATE_H_
#define KJIT_SRC_SIGNATURE_VALIDATE_H_

#include <string>

#include "kjit/spec.h"

namespace kjit {

/// validate(), with carets under `signature` when it is not empty.
void validate_with_text(const FunctionSpec& spec, const std::string& signature);

/// parse_signature() without validation (the builder validates the whole spec later).
FunctionSpec parse_signature_syntax(const std::string& name, const std::string& signature, DeviceKind default_device);

/// True for C++ keywords ("class", "int"), which cannot name a kernel.
bool is_cpp_keyword(const std::string& name);

/// "; it has a non-ASCII character 'é' (U+00E9)" (or a control byte) for a name with
/// one, else ""; for messages, which quote names through spec_detail::printable.
std::string first_bad_char(const std::string& name);

/// True for [A-Za-z_][A-Za-z0-9_]*.
bool is_c_identifier(const std::string& name);

}  // namespace kjit

#endif  // KJIT_SRC_SIGNATURE_VALIDATE_H_
