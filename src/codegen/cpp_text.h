// Small helpers for writing C++ source text.
#ifndef KJIT_SRC_CODEGEN_CPP_TEXT_H_
#define KJIT_SRC_CODEGEN_CPP_TEXT_H_

#include <string>

namespace kjit {

/// `text` as a C string literal, quotes included.
inline std::string c_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
  return out + "\"";
}

/// `text` as a JSON string literal (quotes included).
inline std::string json_quote(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      static const char kHex[] = "0123456789abcdef";
      out += "\\u00";
      out += kHex[(c >> 4) & 0xf];
      out += kHex[c & 0xf];
    } else {
      out += c;
    }
  }
  return out + "\"";
}
}  // namespace kjit

#endif  // KJIT_SRC_CODEGEN_CPP_TEXT_H_
