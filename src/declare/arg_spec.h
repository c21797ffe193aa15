// arg_spec tokens (brainevent's front door), parsed into roles.
#ifndef KJIT_SRC_DECLARE_ARG_SPEC_H_
#define KJIT_SRC_DECLARE_ARG_SPEC_H_

#include <optional>
#include <string>
#include <vector>

#include "kjit/spec.h"

namespace kjit {

struct ArgToken {
  enum class Kind { kArg, kRet, kStream, kAttr };
  Kind kind = Kind::kArg;
  std::string attr_name;                ///< kAttr
  std::optional<ScalarType> attr_type;  ///< kAttr with ":<type>"; empty for a bare attr
  std::string written;                  ///< the token as the user wrote it
};

/// Parses and checks a whole token list; `where` names it in messages
/// ("arg_spec of 'f' (functions['f'])"). Throws SpecError.
std::vector<ArgToken> parse_arg_spec(const std::string& where, const std::vector<std::string>& tokens);

/// The canonical text of one parsed token ("attr.scale:float32", "arg").
std::string canonical_token(const ArgToken& token);

}  // namespace kjit

#endif  // KJIT_SRC_DECLARE_ARG_SPEC_H_
