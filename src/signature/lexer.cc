// Tokenizer of the signature grammar and the caret-style SpecError message.
#include "signature/lexer.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "kjit/errors.h"

namespace kjit {
namespace spec_detail {

namespace {

/// Length of the valid UTF-8 sequence of a non-ASCII character at text[i] (0 when it
/// is not one), and its code point.
size_t utf8_length(const std::string& text, size_t i, uint32_t* code) {
  unsigned char c = static_cast<unsigned char>(text[i]);
  size_t n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c <= 0xdf ? 2 : 0;
  if (c >= 0xf5 || n == 0 || i + n > text.size()) return 0;
  uint32_t cp = c & (0x7f >> n);
  for (size_t k = 1; k < n; ++k) {
    unsigned char cc = static_cast<unsigned char>(text[i + k]);
    if ((cc & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (cc & 0x3f);
  }
  static const uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;  // overlong, surrogate
  *code = cp;
  return n;
}

/// The escape of a control or non-UTF-8 byte.
std::string escape_byte(unsigned char c) {
  switch (c) {
    case '\0':
      return "\\0";
    case '\n':
      return "\\n";
    case '\t':
      return "\\t";
    case '\r':
      return "\\r";
    default: {
      static const char kHex[] = "0123456789ABCDEF";
      return std::string("\\x") + kHex[c >> 4] + kHex[c & 15];
    }
  }
}

/// One character of printable(): its text and the bytes of `text` it covers.
std::string printable_char(const std::string& text, size_t i, size_t* bytes) {
  unsigned char c = static_cast<unsigned char>(text[i]);
  *bytes = 1;
  if (c < 0x20 || c == 0x7f) return escape_byte(c);
  if (c < 0x80) return std::string(1, static_cast<char>(c));
  uint32_t code = 0;
  size_t n = utf8_length(text, i, &code);
  if (n == 0) return escape_byte(c);
  *bytes = n;
  return text.substr(i, n);
}

}  // namespace

std::string printable(const std::string& text) {
  std::string out;
  for (size_t i = 0, n = 0; i < text.size(); i += n) out += printable_char(text, i, &n);
  return out;
}

std::string describe_char(const std::string& text, size_t i) {
  unsigned char c = static_cast<unsigned char>(text[i]);
  if (c == 0) return "NUL byte ('\\0')";
  if (c < 0x20 || c == 0x7f) return "control character '" + escape_byte(c) + "'";
  if (c < 0x80) return std::string("character '") + static_cast<char>(c) + "'";
  uint32_t code = 0;
  size_t n = utf8_length(text, i, &code);
  if (n == 0) return "byte '" + escape_byte(c) + "', which is not UTF-8";
  char hex[16];
  std::snprintf(hex, sizeof(hex), "U+%04X", static_cast<unsigned>(code));
  return "non-ASCII character '" + text.substr(i, n) + "' (" + hex + ")";
}

std::string spec_error_message(const std::string& context, const std::string& text, size_t begin, size_t end,
                               const std::string& what) {
  // One entry per column of the printable echo, so the caret counts characters
  // (escapes and multi-byte characters) rather than bytes.
  std::vector<std::string> cells;
  size_t col_begin = std::string::npos, col_end = std::string::npos;
  for (size_t i = 0, n = 0; i < text.size(); i += n) {
    if (col_begin == std::string::npos && i >= begin) col_begin = cells.size();
    if (col_end == std::string::npos && i >= end) col_end = cells.size();
    std::string ch = printable_char(text, i, &n);
    if (static_cast<unsigned char>(ch[0]) >= 0x80) {
      cells.push_back(ch);
    } else {
      for (char c : ch) cells.emplace_back(1, c);
    }
  }
  if (col_begin == std::string::npos) col_begin = cells.size();
  if (col_end == std::string::npos) col_end = cells.size();
  if (col_end <= col_begin) col_end = col_begin + 1;
  // A long text is shown as a window around the caret.
  const size_t kBefore = 60, kWidth = 160;
  size_t first = col_begin > kBefore && cells.size() > kWidth ? col_begin - kBefore : 0;
  size_t last = std::min(cells.size(), first + kWidth);
  std::string echo = first > 0 ? "..." : "";
  for (size_t c = first; c < last; ++c) echo += cells[c];
  if (last < cells.size()) echo += "...";
  size_t pad = col_begin - first + (first > 0 ? 3 : 0);
  size_t width = std::min(col_end, std::max(last, col_begin + 1)) - col_begin;
  return printable(context) + ": " + what + "\n  " + echo + "\n  " + std::string(pad, ' ') + "^" +
         std::string(width - 1, '~');
}

namespace {

/// The value after '=' up to the next space, ',' or ';' (numbers such as 2.5e-3 are
/// not expressions, so they are not split); returns where lexing resumes.
size_t lex_default_value(const std::string& text, size_t i, std::vector<Token>* out) {
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  size_t start = i;
  while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) ||
                             std::string("_.+-").find(text[i]) != std::string::npos)) {
    ++i;
  }
  if (i > start) out->push_back({Tok::kValue, text.substr(start, i - start), start, i});
  return i;
}

}  // namespace

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
    if (c == '=') {  // a default ("alpha: float32 = 1.0"): its text is one token
      out.push_back({Tok::kPunct, "=", i, i + 1});
      i = lex_default_value(text, i + 1, &out);
      continue;
    }
    if (std::string(":,;[]()|@+-*/%<>").find(static_cast<char>(c)) != std::string::npos) {
      out.push_back({Tok::kPunct, std::string(1, static_cast<char>(c)), i, i + 1});
      ++i;
      continue;
    }
    if (c >= 0x80) {
      size_t n = 1;
      printable_char(text, i, &n);
      throw SpecError(spec_error_message(
          context, text, i, i + n,
          "unexpected " + describe_char(text, i) + ": a signature is ASCII (names are C identifiers)"));
    }
    throw SpecError(spec_error_message(context, text, i, i + 1, "unexpected " + describe_char(text, i)));
  }
  out.push_back({Tok::kEnd, "", text.size(), text.size()});
  return out;
}

}  // namespace spec_detail
}  // namespace kjit
