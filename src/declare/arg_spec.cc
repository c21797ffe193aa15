// arg_spec tokens: normalisation of brainevent/kernix aliases and the checks
// brainevent makes (plus the ones it misses: attrs.<name>:<type>, duplicate attrs).
#include "declare/arg_spec.h"

#include "kjit/declare.h"
#include "kjit/errors.h"
#include "signature/lexer.h"
#include "signature/validate.h"

namespace kjit {
namespace {

const char kValidTokens[] =
    "arg, ret, stream, attr.<name>, attr.<name>:<type> (aliases: args, rets, ctx.stream, attrs.<name>, "
    "attrs.<name>:<type>)";

[[noreturn]] void fail_token(const std::string& where, size_t index, const std::string& token,
                             const std::string& what) {
  throw SpecError(where + ": token #" + std::to_string(index) + " '" + spec_detail::printable(token) + "': " + what);
}

ArgToken parse_attr(const std::string& where, size_t index, const std::string& token, const std::string& body) {
  ArgToken t;
  t.kind = ArgToken::Kind::kAttr;
  t.written = token;
  std::string name = body;
  size_t colon = body.find(':');
  if (colon != std::string::npos) {
    name = body.substr(0, colon);
    std::string type = body.substr(colon + 1);
    t.attr_type = find_scalar_type(type);
    if (!t.attr_type) {
      fail_token(where, index, token, "unknown attr type '" + type + "'; valid types: " + known_scalar_names());
    }
  }
  if (!is_c_identifier(name) || is_cpp_keyword(name)) {
    fail_token(where, index, token,
               "attr name '" + spec_detail::printable(name) +
                   "' is not a C identifier (letters, digits and '_', not starting with a digit)" +
                   first_bad_char(name));
  }
  t.attr_name = name;
  return t;
}

ArgToken parse_token(const std::string& where, size_t index, const std::string& token) {
  ArgToken t;
  t.written = token;
  if (token == "arg" || token == "args") {
    t.kind = ArgToken::Kind::kArg;
  } else if (token == "ret" || token == "rets") {
    t.kind = ArgToken::Kind::kRet;
  } else if (token == "stream" || token == "ctx.stream") {
    t.kind = ArgToken::Kind::kStream;
  } else if (token.rfind("attr.", 0) == 0) {
    return parse_attr(where, index, token, token.substr(5));
  } else if (token.rfind("attrs.", 0) == 0) {
    return parse_attr(where, index, token, token.substr(6));
  } else {
    fail_token(where, index, token, std::string("invalid arg_spec token. Valid tokens: ") + kValidTokens);
  }
  return t;
}

}  // namespace

std::vector<ArgToken> parse_arg_spec(const std::string& where, const std::vector<std::string>& tokens) {
  std::vector<ArgToken> out;
  int stream_at = -1;
  bool has_ret = false;
  for (size_t i = 0; i < tokens.size(); ++i) {
    ArgToken t = parse_token(where, i, tokens[i]);
    if (t.kind == ArgToken::Kind::kStream) {
      if (stream_at >= 0) {
        fail_token(where, i, tokens[i],
                   "duplicate 'stream' token (token #" + std::to_string(stream_at) + " is already the stream)");
      }
      stream_at = static_cast<int>(i);
    }
    if (t.kind == ArgToken::Kind::kAttr) {
      for (const ArgToken& prev : out) {
        if (prev.kind == ArgToken::Kind::kAttr && prev.attr_name == t.attr_name)
          fail_token(where, i, tokens[i], "attr '" + t.attr_name + "' is given twice");
      }
    }
    has_ret = has_ret || t.kind == ArgToken::Kind::kRet;
    out.push_back(std::move(t));
  }
  if (!has_ret) {
    throw SpecError(where + ": the arg_spec must contain at least one 'ret' token (an output tensor XLA allocates); " +
                    "got [" +
                    [&] {
                      std::string s;
                      for (const std::string& tok : tokens) s += (s.empty() ? "'" : ", '") + tok + "'";
                      return s;
                    }() +
                    "]. For a function without tensor outputs, give a signature string instead");
  }
  return out;
}

std::string canonical_token(const ArgToken& token) {
  switch (token.kind) {
    case ArgToken::Kind::kArg:
      return "arg";
    case ArgToken::Kind::kRet:
      return "ret";
    case ArgToken::Kind::kStream:
      return "stream";
    case ArgToken::Kind::kAttr:
      return "attr." + token.attr_name + (token.attr_type ? std::string(":") + scalar_type_name(*token.attr_type) : "");
  }
  throw InternalError("kjit internal error: unknown arg_spec token kind");
}

std::vector<std::string> normalize_arg_spec(const std::string& fn, const std::vector<std::string>& tokens) {
  std::vector<std::string> out;
  for (const ArgToken& t : parse_arg_spec("arg_spec of '" + fn + "'", tokens)) out.push_back(canonical_token(t));
  return out;
}

std::vector<std::string> to_arg_spec(const FunctionSpec& spec) {
  std::vector<std::string> out;
  for (const Param& p : spec.params) {
    switch (p.kind) {
      case ParamKind::kTensor:
        out.push_back(p.tensor.out ? "ret" : "arg");
        break;
      case ParamKind::kStream:
        out.push_back("stream");
        break;
      case ParamKind::kScalar:
        // No token says "kjit passes this symbol": XLA never sees it, so none is listed.
        if (!p.symbol) out.push_back("attr." + p.name + ":" + scalar_type_name(p.scalar));
        break;
    }
  }
  return out;
}

}  // namespace kjit
