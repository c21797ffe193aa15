// Default values of scalar parameters ("alpha: float32 = 1.0"): which texts a type
// takes and their canonical form, shared by the grammar and the builder.
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <string>

#include "kjit/spec.h"

namespace kjit {
namespace {

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

/// "true"/"false" (Python's True/False and 1/0 too).
std::optional<std::string> bool_default(const std::string& text, std::string* why) {
  if (text == "true" || text == "True" || text == "1") return std::string("true");
  if (text == "false" || text == "False" || text == "0") return std::string("false");
  *why = "a bool default is true or false";
  return std::nullopt;
}

/// Decimal digits with an optional sign, inside the type's range; canonical
/// without '+' or leading zeros.
std::optional<std::string> integer_default(ScalarType t, const std::string& text, std::string* why) {
  bool negative = !text.empty() && text[0] == '-';
  std::string digits = text.substr(!text.empty() && (text[0] == '-' || text[0] == '+') ? 1 : 0);
  if (!all_digits(digits)) {
    *why = std::string("a default of ") + scalar_type_name(t) + " is an integer (digits with an optional sign)";
    return std::nullopt;
  }
  errno = 0;
  unsigned long long magnitude = std::strtoull(digits.c_str(), nullptr, 10);
  int bits = t == ScalarType::kInt8 || t == ScalarType::kUInt8     ? 8
             : t == ScalarType::kInt16 || t == ScalarType::kUInt16 ? 16
             : t == ScalarType::kInt32 || t == ScalarType::kUInt32 ? 32
                                                                   : 64;
  bool is_unsigned =
      t == ScalarType::kUInt8 || t == ScalarType::kUInt16 || t == ScalarType::kUInt32 || t == ScalarType::kUInt64;
  unsigned long long max_positive = is_unsigned ? (bits == 64 ? ~0ULL : (1ULL << bits) - 1) : (1ULL << (bits - 1)) - 1;
  unsigned long long max_negative = is_unsigned ? 0 : 1ULL << (bits - 1);
  if (errno == ERANGE || magnitude > (negative ? max_negative : max_positive)) {
    *why = "the default " + text + " is out of the range of " + scalar_type_name(t);
    return std::nullopt;
  }
  if (magnitude == 0) return std::string("0");
  return (negative ? "-" : "") + std::to_string(magnitude);
}

/// A decimal number ("1", "-0.5", "2.5e-3") or inf, -inf, nan; canonical without '+'.
std::optional<std::string> real_default(ScalarType t, const std::string& text, std::string* why) {
  std::string body = !text.empty() && text[0] == '+' ? text.substr(1) : text;
  std::string magnitude = !body.empty() && body[0] == '-' ? body.substr(1) : body;
  bool named = magnitude == "inf" || magnitude == "nan";
  bool chars_ok = !magnitude.empty() && magnitude.find_first_not_of("0123456789.eE+-") == std::string::npos &&
                  magnitude[0] != '+' && magnitude[0] != '-';
  char* end = nullptr;
  if (chars_ok) std::strtod(magnitude.c_str(), &end);
  if (named || (chars_ok && end && *end == '\0')) return body;
  *why = std::string("a default of ") + scalar_type_name(t) + " is a number such as 1, -0.5 or 2.5e-3 (or inf, nan)";
  return std::nullopt;
}

}  // namespace

std::optional<std::string> canonical_default(ScalarType t, const std::string& text, std::string* why) {
  if (t == ScalarType::kBool) return bool_default(text, why);
  if (is_integer(t)) return integer_default(t, text, why);
  return real_default(t, text, why);
}

}  // namespace kjit
