// Tokens of the signature grammar, with byte offsets for error carets.
#ifndef KJIT_SRC_SIGNATURE_LEXER_H_
#define KJIT_SRC_SIGNATURE_LEXER_H_

#include <cstdint>
#include <string>
#include <vector>

namespace kjit {
namespace spec_detail {

/// kValue: the text after a single '=' (a default: "1.0", "-3", "true").
enum class Tok { kName, kInt, kPunct, kValue, kEnd };

struct Token {
  Tok kind;
  std::string text;  ///< identifier, digits, or the punctuation ("<=", ":", ...)
  size_t begin;
  size_t end;
};

/// Splits `text` into tokens; throws SpecError (via `fail`) on a stray character.
std::vector<Token> tokenize(const std::string& text, const std::string& context);

/// Formats "<context>: <what>" plus the text with a caret under [begin, end). The echoed
/// text is printable(text), and the caret counts characters, not bytes.

std::string spec_error_message(const std::string& context, const std::string& text, size_t begin, size_t end,
                               const std::string& what);

/// `text` safe to quote in a message: UTF-8 characters as they are, control bytes
/// as escapes ("\\0", "\\n", "\\x07") and bytes that are not UTF-8 as "\\xC3", so a
/// message is valid UTF-8 and never cut short by a NUL.
std::string printable(const std::string& text);

/// What the character at text[i] is, for "unexpected ..." messages: "character '$'",
/// "non-ASCII character 'é' (U+00E9)", "NUL byte ('\\0')".
std::string describe_char(const std::string& text, size_t i);

}  // namespace spec_detail
}  // namespace kjit

#endif  // KJIT_SRC_SIGNATURE_LEXER_H_
