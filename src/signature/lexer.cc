// Tokenizer of the signature grammar and the caret-style SpecError message.
#include "signature/lexer.h"

#include <cctype>

#include "kjit/errors.h"

namespace kjit {
namespace spec_detail {

std::string spec_error_message(const std::string& context, const std::string& text, size_t begin, size_t end,
                               const std::string& what) {
  std::string msg = context + ": " + what + "\n  " + text + "\n  ";
  if (begin > text.size()) begin = text.size();
  if (end <= begin) end = begin + 1;
  msg += std::string(begin, ' ') + "^" + std::string(end - begin - 1, '~');
  return msg;
}

std::vector<Token> tokenize(const std::string& text, const std::string& context) {
  static const char* const kTwoChar[] = {"==", "!=", "<=", ">="};
  std::vector<Token> out;
  size_t i = 0;
  while (i < text.size()) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (std::isspace(c)) {
      ++i;
      continue;
    }
    size_t start = i;
    if (std::isalpha(c) || c == '_') {
      while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_')) ++i;
      out.push_back({Tok::kName, text.substr(start, i - start), start, i});
      continue;
    }
    if (std::isdigit(c)) {
      while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
      if (i < text.size() && (std::isalpha(static_cast<unsigned char>(text[i])) || text[i] == '_')) {
        throw SpecError(
            spec_error_message(context, text, start, i + 1, "a number cannot run into a name; write 2*k, not 2k"));
      }
      out.push_back({Tok::kInt, text.substr(start, i - start), start, i});
      continue;
    }
    if (text.compare(i, 3, "...") == 0) {  // "[...]": a tensor of any rank
      out.push_back({Tok::kPunct, "...", i, i + 3});
      i += 3;
      continue;
    }
    bool matched = false;
    for (const char* two : kTwoChar) {
      if (text.compare(i, 2, two) == 0) {
        out.push_back({Tok::kPunct, two, i, i + 2});
        i += 2;
        matched = true;
        break;
      }
    }
    if (matched) continue;
    if (std::string(":,;[]()|@+-*/%<>").find(static_cast<char>(c)) != std::string::npos) {
      out.push_back({Tok::kPunct, std::string(1, static_cast<char>(c)), i, i + 1});
      ++i;
      continue;
    }
    throw SpecError(spec_error_message(context, text, i, i + 1, std::string("unexpected character '") + text[i] + "'"));
  }
  out.push_back({Tok::kEnd, "", text.size(), text.size()});
  return out;
}

}  // namespace spec_detail
}  // namespace kjit
