// Tokens of the signature grammar, with byte offsets for error carets.
#ifndef KJIT_SRC_SIGNATURE_LEXER_H_
#define KJIT_SRC_SIGNATURE_LEXER_H_

#include <cstdint>
#include <string>
#include <vector>

namespace kjit {
namespace spec_detail {

enum class Tok { kName, kInt, kPunct, kEnd };

struct Token {
  Tok kind;
  std::string text;  ///< identifier, digits, or the punctuation ("<=", ":", ...)
  size_t begin;
  size_t end;
};

/// Splits `text` into tokens; throws SpecError (via `fail`) on a stray character.
std::vector<Token> tokenize(const std::string& text, const std::string& context);

/// Formats "<context>: <what>" plus the text with a caret under [begin, end).
std::string spec_error_message(const std::string& context, const std::string& text, size_t begin, size_t end,
                               const std::string& what);

}  // namespace spec_detail
}  // namespace kjit

#endif  // KJIT_SRC_SIGNATURE_LEXER_H_
