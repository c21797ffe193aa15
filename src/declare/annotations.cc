// `// @kjit NAME ...` and `// @BE NAME ...` lines: the declarations that live in
// the sources themselves (functions=None).
#include <cctype>
#include <sstream>

#include "kjit/declare.h"
#include "kjit/errors.h"
#include "signature/lexer.h"
#include "signature/validate.h"

namespace kjit {
namespace {

struct AnnotationLine {
  std::string tag;   ///< "@kjit" or "@BE"
  std::string rest;  ///< text after the tag
};

/// The annotation on a line ("  // @kjit f arg ret"), if there is one.
bool match_annotation(const std::string& line, AnnotationLine* out) {
  size_t i = line.find_first_not_of(" \t");
  if (i == std::string::npos || line.compare(i, 2, "//") != 0) return false;
  i = line.find_first_not_of(" \t", i + 2);
  if (i == std::string::npos) return false;
  for (const char* tag : {"@kjit", "@BE"}) {
    size_t n = std::char_traits<char>::length(tag);
    // The tag must match before the byte after it is read: a shorter line ends before i + n.
    if (line.compare(i, n, tag) != 0) continue;
    if (i + n == line.size() || std::isspace(static_cast<unsigned char>(line[i + n]))) {
      out->tag = tag;
      out->rest = line.substr(i + n);
      return true;
    }
  }
  return false;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

/// An annotation is ASCII text: a non-ASCII character or a control byte (NUL) is named
/// here, before it could be cut into a name or a token.
void check_ascii(const std::string& rest, const std::string& origin) {
  for (size_t i = 0; i < rest.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(rest[i]);
    if (c >= 0x80 || (c < 0x20 && c != '\t' && c != '\r') || c == 0x7f) {
      throw SpecError(origin + ": unexpected " + spec_detail::describe_char(rest, i) + " in '" +
                      spec_detail::printable(trim(rest)) + "'; an annotation is ASCII (names are C identifiers)");
    }
  }
}

/// Takes a last word "backward=NAME" off `text` into d->backward (the pairing, after
/// the signature or the tokens).
void take_backward(std::string* text, FunctionDecl* d) {
  static const std::string kKey = "backward=";
  const size_t space = text->find_last_of(" \t)");
  const size_t word = space == std::string::npos ? 0 : space + 1;
  if (text->compare(word, kKey.size(), kKey) != 0) return;
  d->backward = text->substr(word + kKey.size());
  if (!is_c_identifier(d->backward) || is_cpp_keyword(d->backward)) {
    throw SpecError(d->origin + ": backward='" + d->backward + "' must name a function of the module (a C " +
                    "identifier): '// @kjit " + d->name + "(...) backward=" + d->name + "_backward'");
  }
  *text = trim(text->substr(0, word));
}

FunctionDecl parse_annotation(const AnnotationLine& a, const std::string& where) {
  std::string rest = trim(a.rest);
  check_ascii(a.rest, where + " (// " + a.tag + " annotation)");
  size_t name_end = 0;
  while (name_end < rest.size() && (std::isalnum(static_cast<unsigned char>(rest[name_end])) || rest[name_end] == '_'))
    ++name_end;
  FunctionDecl d;
  d.name = rest.substr(0, name_end);
  d.origin = where + " (// " + a.tag + " annotation)";
  if (d.name.empty()) {
    throw SpecError(d.origin + ": expected a function name after '" + a.tag + "', got '" + rest + "'; write '// " +
                    a.tag + " NAME [tokens...]'");
  }
  if (!is_c_identifier(d.name) || is_cpp_keyword(d.name)) {
    throw SpecError(d.origin + ": function name '" + d.name + "' is not a C identifier");
  }
  std::string after = trim(rest.substr(name_end));
  take_backward(&after, &d);
  if (!after.empty() && after[0] == '(') {
    size_t close = after.rfind(')');
    if (close == std::string::npos) {
      throw SpecError(d.origin + ": '" + d.name + "(' opens a signature that is not closed with ')' on the same line");
    }
    if (!trim(after.substr(close + 1)).empty()) {
      throw SpecError(d.origin + ": unexpected text after the signature of '" + d.name + "': '" +
                      trim(after.substr(close + 1)) + "'");
    }
    d.form = FunctionDecl::Form::kSignature;
    d.signature = after.substr(1, close - 1);
    return d;
  }
  if (!after.empty() && !std::isspace(static_cast<unsigned char>(rest[name_end]))) {
    throw SpecError(d.origin + ": function name '" + d.name + "' must be followed by a space, '(' or the end of the " +
                    "line, got '" + after + "'");
  }
  // "arg, ret", "arg,ret" and "[arg, ret]" are forgiven: the list is the point,
  // not the punctuation.
  std::string spaced = after;
  for (char& c : spaced) {
    if (c == ',' || c == '[' || c == ']' || c == '"' || c == '\'') c = ' ';
  }
  std::istringstream words(spaced);
  std::string tok;
  while (words >> tok) d.tokens.push_back(tok);
  d.form = d.tokens.empty() ? FunctionDecl::Form::kInfer : FunctionDecl::Form::kTokens;
  return d;
}

/// The text with /* ... */ comments blanked (newlines kept, so line numbers stay):
/// an annotation commented out that way is not one. A "/*" inside a // comment
/// does not open a block.
std::string without_block_comments(const std::string& text) {
  std::string out = text;
  bool in_block = false, in_line = false;
  for (size_t i = 0; i < out.size(); ++i) {
    char c = out[i];
    if (in_block) {
      if (c == '*' && i + 1 < out.size() && out[i + 1] == '/') {
        out[i] = out[i + 1] = ' ';
        ++i;
        in_block = false;
      } else if (c != '\n') {
        out[i] = ' ';
      }
    } else if (in_line) {
      in_line = c != '\n';
    } else if (c == '/' && i + 1 < out.size() && out[i + 1] == '/') {
      in_line = true;
      ++i;
    } else if (c == '/' && i + 1 < out.size() && out[i + 1] == '*') {
      out[i] = out[i + 1] = ' ';
      ++i;
      in_block = true;
    }
  }
  return out;
}

}  // namespace

std::vector<FunctionDecl> read_annotations(const std::vector<SourceText>& sources) {
  std::vector<FunctionDecl> out;
  for (const SourceText& src : sources) {
    std::istringstream lines(without_block_comments(src.text));
    std::string line;
    for (int number = 1; std::getline(lines, line); ++number) {
      AnnotationLine a;
      if (!match_annotation(line, &a)) continue;
      FunctionDecl d = parse_annotation(a, src.file + ":" + std::to_string(number));
      d.annotation_file = src.file;
      d.annotation_line = number;
      for (const FunctionDecl& prev : out) {
        if (prev.name == d.name) {
          throw SpecError("duplicate annotation for '" + d.name + "': " + prev.origin + " and " + d.origin);
        }
      }
      out.push_back(std::move(d));
    }
  }
  return out;
}

bool uses_brainevent_spelling(const std::vector<SourceText>& sources) {
  for (const SourceText& src : sources) {
    if (src.text.find("BE::Tensor") != std::string::npos || src.text.find("@BE") != std::string::npos) return true;
  }
  return false;
}

}  // namespace kjit
