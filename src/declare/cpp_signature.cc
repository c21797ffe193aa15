// A small C++ declaration scanner: a tokenizer, a namespace-scope walker and a parameter
// splitter. It never parses expressions: bodies and initializers are skipped as balanced
// bracket groups, and only the head of each namespace-scope declaration is looked at.
#include "declare/cpp_signature.h"

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <set>
#include <string>
#include <utility>

namespace kjit {
namespace {

// ---------------------------------------------------------------------------------------
// Tokens

enum class Kind { kIdent, kNumber, kLiteral, kPunct };

struct Token {
  Kind kind;
  std::string text;
  int line;
};

using Tokens = std::vector<Token>;

bool is_ident_char(char c) {
  unsigned char u = static_cast<unsigned char>(c);
  return std::isalnum(u) || c == '_' || c == '$' || u >= 0x80;  // >= 0x80: UTF-8 identifiers
}

bool one_of(const std::string& s, std::initializer_list<const char*> words) {
  for (const char* w : words) {
    if (s == w) return true;
  }
  return false;
}

// Turns source text into tokens. Comments, preprocessor lines and line continuations vanish;
// every literal (string, raw string, char, with prefix and user-defined suffix) is one token.
class Lexer {
 public:
  explicit Lexer(const std::string& s) : s_(s) {}

  Tokens run() {
    bool line_start = true;  // only whitespace (and comments) so far on this line: '#' opens a directive
    while (i_ < s_.size()) {
      char c = s_[i_];
      if (c == '\n') {
        step();
        line_start = true;
      } else if (c == '\\') {
        skip_escaped_newline();  // a line continuation outside a directive is just whitespace
      } else if (std::isspace(static_cast<unsigned char>(c))) {
        step();
      } else if (c == '/' && at(i_ + 1) == '/') {
        skip_to_line_end();
      } else if (c == '/' && at(i_ + 1) == '*') {
        skip_block_comment();
      } else if (c == '#' && line_start) {
        size_t begin = i_;
        skip_directive();
        track_if0(s_.substr(begin, i_ - begin));
      } else {
        line_start = false;
        size_t before = out_.size();
        lex_token();
        if (if0_depth_ > 0) out_.resize(before);  // inside "#if 0": not code
      }
    }
    return std::move(out_);
  }

 private:
  char at(size_t k) const { return k < s_.size() ? s_[k] : '\0'; }

  void step() {
    if (s_[i_] == '\n') ++line_;
    ++i_;
  }

  void skip_escaped_newline() {
    step();  // the backslash
    if (at(i_) == '\r') step();
    if (at(i_) == '\n') step();
  }

  // "//" comments and directives end at the first newline not escaped by a backslash.
  void skip_to_line_end() {
    while (i_ < s_.size() && s_[i_] != '\n') {
      if (s_[i_] == '\\') {
        skip_escaped_newline();
      } else {
        step();
      }
    }
  }

  void skip_block_comment() {
    i_ += 2;
    while (i_ < s_.size() && !(s_[i_] == '*' && at(i_ + 1) == '/')) step();
    i_ = std::min(s_.size(), i_ + 2);
  }

  // "#if 0" ... "#else"/"#elif"/"#endif" is dead code: a definition in it is not one.
  // Other conditionals are read on both sides (kjit cannot evaluate them).
  void track_if0(const std::string& directive) {
    size_t k = directive.find_first_not_of(" \t", 1);
    if (k == std::string::npos) return;
    size_t e = directive.find_first_not_of("abcdefghijklmnopqrstuvwxyz", k);
    std::string word = directive.substr(k, e == std::string::npos ? std::string::npos : e - k);
    std::string rest = e == std::string::npos ? "" : directive.substr(e);
    size_t r = rest.find_first_not_of(" \t");
    bool zero = r != std::string::npos && rest[r] == '0' &&
                (r + 1 == rest.size() || !std::isalnum(static_cast<unsigned char>(rest[r + 1])));
    if (if0_depth_ == 0) {
      if (word == "if" && zero) if0_depth_ = 1;
      return;
    }
    if (word == "if" || word == "ifdef" || word == "ifndef") {
      ++if0_depth_;
    } else if (word == "endif") {
      --if0_depth_;
    } else if ((word == "else" || word == "elif") && if0_depth_ == 1) {
      if0_depth_ = 0;
    }
  }

  // A directive may hold comments and quotes ("#include "a//b"", "#error don't") of its own.
  void skip_directive() {
    while (i_ < s_.size() && s_[i_] != '\n') {
      char c = s_[i_];
      if (c == '\\') {
        skip_escaped_newline();
      } else if (c == '/' && at(i_ + 1) == '*') {
        skip_block_comment();
      } else if (c == '/' && at(i_ + 1) == '/') {
        skip_to_line_end();
      } else if (c == '"' || c == '\'') {
        skip_quoted(c);
      } else {
        step();
      }
    }
  }

  // An unterminated literal stops at the end of its line, so one stray quote costs one line.
  void skip_quoted(char quote) {
    step();
    while (i_ < s_.size()) {
      char c = s_[i_];
      if (c == '\\') {
        step();
        if (i_ < s_.size()) step();
      } else if (c == quote) {
        step();
        return;
      } else if (c == '\n') {
        return;
      } else {
        step();
      }
    }
  }

  // R"delim( ... )delim": nothing inside is escaped, so search for the closing sequence.
  void skip_raw_string() {
    static const std::string kNotInDelimiter = " ()\\\t\v\f\r\n\"";
    size_t open = i_ + 1;
    while (open < s_.size() && open - i_ <= 17 && kNotInDelimiter.find(s_[open]) == std::string::npos) ++open;
    if (at(open) != '(' || open - i_ > 17) {  // not a valid delimiter (at most 16 chars): read it as "..."
      skip_quoted('"');
      return;
    }
    std::string close = ")" + s_.substr(i_ + 1, open - i_ - 1) + "\"";
    size_t end = s_.find(close, open + 1);
    end = end == std::string::npos ? s_.size() : end + close.size();
    while (i_ < end) step();
  }

  void skip_suffix() {
    while (is_ident_char(at(i_))) ++i_;
  }

  void lex_token() {
    size_t begin = i_;
    int line = line_;
    char c = s_[i_];
    Kind kind = Kind::kPunct;
    if (is_ident_char(c) && !std::isdigit(static_cast<unsigned char>(c))) {
      skip_suffix();
      std::string word = s_.substr(begin, i_ - begin);
      kind = Kind::kIdent;
      if (at(i_) == '"' && one_of(word, {"R", "LR", "uR", "UR", "u8R"})) {
        skip_raw_string();
        skip_suffix();
        kind = Kind::kLiteral;
      } else if ((at(i_) == '"' || at(i_) == '\'') && one_of(word, {"L", "u", "U", "u8"})) {
        skip_quoted(at(i_));
        skip_suffix();
        kind = Kind::kLiteral;
      }
    } else if (std::isdigit(static_cast<unsigned char>(c)) ||
               (c == '.' && std::isdigit(static_cast<unsigned char>(at(i_ + 1))))) {
      lex_number();
      kind = Kind::kNumber;
    } else if (c == '"' || c == '\'') {
      skip_quoted(c);
      skip_suffix();
      kind = Kind::kLiteral;
    } else {
      lex_punct();
    }
    out_.push_back({kind, s_.substr(begin, i_ - begin), line});
  }

  // A pp-number: digits, letters, '.', digit separators (1'000) and exponent signs (1e-3).
  void lex_number() {
    ++i_;
    while (i_ < s_.size()) {
      char c = s_[i_];
      char prev = static_cast<char>(std::tolower(static_cast<unsigned char>(s_[i_ - 1])));
      bool sign = (c == '+' || c == '-') && (prev == 'e' || prev == 'p');
      if (is_ident_char(c) || c == '.' || sign || (c == '\'' && is_ident_char(at(i_ + 1)))) {
        ++i_;
      } else {
        break;
      }
    }
  }

  // '>' stays single so that ">>" closes two template levels.
  void lex_punct() {
    for (const char* p : {"::", "->", "[[", "...", "==", "!=", "<=", "&&", "||", "<<"}) {
      size_t n = std::char_traits<char>::length(p);
      if (s_.compare(i_, n, p) == 0) {
        i_ += n;
        return;
      }
    }
    ++i_;
  }

  const std::string& s_;
  size_t i_ = 0;
  int line_ = 1;
  int if0_depth_ = 0;  // > 0 while inside "#if 0"
  Tokens out_;
};

// ---------------------------------------------------------------------------------------
// Bracket groups

bool is_punct(const Token& tk, const char* p) { return tk.kind == Kind::kPunct && tk.text == p; }
bool is_word(const Token& tk, const char* w) { return tk.kind == Kind::kIdent && tk.text == w; }
bool is_opener(const Token& tk) { return tk.kind == Kind::kPunct && one_of(tk.text, {"(", "[", "[[", "{"}); }
bool is_closer(const Token& tk) { return tk.kind == Kind::kPunct && one_of(tk.text, {")", "]", "}"}); }

// Index after the (), [], [[ ]] or {} group opening at t[i]. A closer matching nothing open
// ends the group early and is left to the caller, so unbalanced input cannot swallow a scope.
size_t skip_group(const Tokens& t, size_t i, size_t end) {
  std::string open;  // closers still expected, innermost last
  for (size_t j = i; j < end; ++j) {
    const std::string& s = t[j].text;
    if (t[j].kind != Kind::kPunct) continue;
    if (s == "(") {
      open += ')';
    } else if (s == "[") {
      open += ']';
    } else if (s == "[[") {
      open += "]]";
    } else if (s == "{") {
      open += '}';
    } else if (is_closer(t[j])) {
      size_t at = open.rfind(s[0]);
      if (at == std::string::npos) return j > i ? j : i + 1;
      open.resize(at);
      if (open.empty()) return j + 1;
    }
  }
  return end;
}

// Index after the <...> group opening at t[i]; stops before a ';' or stray closer if the
// '<' turns out to be unbalanced.
size_t skip_angles(const Tokens& t, size_t i, size_t end) {
  int depth = 0;
  size_t j = i;
  while (j < end) {
    if (is_opener(t[j])) {
      j = skip_group(t, j, end);
      continue;
    }
    if (is_punct(t[j], "<")) {
      ++depth;
    } else if (is_punct(t[j], ">")) {
      if (--depth == 0) return j + 1;
    } else if (is_punct(t[j], ";") || is_closer(t[j])) {
      return j > i ? j : i + 1;
    }
    ++j;
  }
  return end;
}

// In a type, every '<' opens template arguments.
size_t next_piece(const Tokens& t, size_t j, size_t end) {
  if (is_opener(t[j])) return skip_group(t, j, end);
  if (is_punct(t[j], "<")) return skip_angles(t, j, end);
  return j + 1;
}

// ---------------------------------------------------------------------------------------
// Types: a type is a list of top-level pieces, each one token or one whole bracket group.

struct Piece {
  size_t begin, end;
};
using Pieces = std::vector<Piece>;

Pieces top_level(const Tokens& t, size_t b, size_t e) {
  Pieces out;
  for (size_t j = b; j < e;) {
    size_t next = next_piece(t, j, e);
    out.push_back({j, next});
    j = next;
  }
  return out;
}

bool is_single(const Tokens& t, const Piece& p, const char* text) {
  return p.end == p.begin + 1 && t[p.begin].text == text && t[p.begin].kind != Kind::kLiteral;
}

bool is_group(const Tokens& t, const Piece& p, const char* opener) {
  return p.end > p.begin + 1 && t[p.begin].text == opener;
}

// Drops what does not change the type: attributes, restrict, register, volatile; and for a
// return type also storage specifiers, template<...> heads and the "C" of extern "C".
Pieces clean(const Tokens& t, const Pieces& in, bool return_type) {
  Pieces out;
  for (size_t k = 0; k < in.size(); ++k) {
    const Token& tk = t[in[k].begin];
    bool has_args = k + 1 < in.size() && is_group(t, in[k + 1], "(");
    bool has_angles = k + 1 < in.size() && is_group(t, in[k + 1], "<");
    bool has_literal = k + 1 < in.size() && t[in[k + 1].begin].kind == Kind::kLiteral;
    if (is_group(t, in[k], "[[")) continue;
    if (tk.kind == Kind::kIdent) {
      if (has_args && one_of(tk.text, {"__attribute__", "__attribute", "__declspec", "alignas", "__launch_bounds__"})) {
        ++k;
        continue;
      }
      if (one_of(tk.text, {"volatile", "register", "restrict", "__restrict", "__restrict__"})) continue;
      if (return_type) {
        if (tk.text == "template" || tk.text == "extern") {
          if (has_angles || has_literal) ++k;
          continue;
        }
        if (one_of(tk.text, {"static", "inline", "constexpr", "consteval", "constinit", "thread_local", "virtual",
                             "explicit", "friend", "__inline", "__inline__", "__forceinline", "__forceinline__",
                             "__noinline__", "__device__", "__host__", "__global__"})) {
          continue;
        }
      }
    }
    out.push_back(in[k]);
  }
  return out;
}

/// A return type holds no call: `GEN(_f16, __half)` left without ';' at namespace
/// scope (a macro call that defines something) belongs before the next declaration,
/// not to its return type. decltype(...) and typeof(...) stay.
Pieces drop_macro_calls(const Tokens& t, const Pieces& ret) {
  size_t keep_from = 0;
  for (size_t k = 1; k < ret.size(); ++k) {
    const Token& name = t[ret[k - 1].begin];
    if (is_group(t, ret[k], "(") && name.kind == Kind::kIdent &&
        !one_of(name.text, {"decltype", "typeof", "__typeof__", "__typeof"})) {
      keep_from = k + 1;
    }
  }
  return Pieces(ret.begin() + static_cast<std::ptrdiff_t>(keep_from), ret.end());
}

bool needs_space(const Token& a, const Token& b) {
  if (is_punct(a, ",")) return true;
  if (b.kind == Kind::kPunct) return false;
  return a.kind != Kind::kPunct || one_of(a.text, {"*", "&", "&&", ">", ")", "..."});
}

// Joins tokens with single spaces only between words and after ',', '*', '&', '>'.
std::string render(const Tokens& t, const std::vector<size_t>& idx) {
  std::string out;
  for (size_t n = 0; n < idx.size(); ++n) {
    if (n > 0 && needs_space(t[idx[n - 1]], t[idx[n]])) out += ' ';
    out += t[idx[n]].text;
  }
  return out;
}

void append(const Piece& p, std::vector<size_t>* idx) {
  for (size_t k = p.begin; k < p.end; ++k) idx->push_back(k);
}

std::string render(const Tokens& t, const Pieces& ps) {
  std::vector<size_t> idx;
  for (const Piece& p : ps) append(p, &idx);
  return render(t, idx);
}

bool is_type_keyword(const std::string& s) {
  return one_of(s, {"const",    "volatile", "unsigned", "signed", "short", "long",     "int",     "char",
                    "float",    "double",   "bool",     "void",   "auto",  "wchar_t",  "char8_t", "char16_t",
                    "char32_t", "struct",   "class",    "union",  "enum",  "typename", "decltype"});
}

// Words that qualify or introduce a type but are not one by themselves ("const T": T is the type).
bool is_type_prefix(const Tokens& t, const Piece& p) {
  return p.end == p.begin + 1 && (t[p.begin].text == "::" ||
                                  one_of(t[p.begin].text, {"const", "struct", "class", "union", "enum", "typename"}));
}

// "T x": the last piece names the parameter if it is a plain identifier that follows a type.
bool is_name_piece(const Tokens& t, const Pieces& ps, size_t k) {
  const Token& tk = t[ps[k].begin];
  if (ps[k].end != ps[k].begin + 1 || tk.kind != Kind::kIdent || is_type_keyword(tk.text)) return false;
  if (k == 0 || is_single(t, ps[k - 1], "::")) return false;
  for (size_t j = 0; j < k; ++j) {
    if (!is_type_prefix(t, ps[j])) return true;
  }
  return false;
}

// "(*cb)" in "void (*cb)(int)", "(&a)" in "float (&a)[4]".
bool is_declarator_group(const Tokens& t, const Piece& p) {
  return is_group(t, p, "(") && p.begin + 1 < p.end && one_of(t[p.begin + 1].text, {"*", "&", "&&"});
}

CppParam parse_param(const Tokens& t, size_t b, size_t e) {
  CppParam param;
  Pieces ps = clean(t, top_level(t, b, e), false);
  size_t last = ps.size();
  while (last > 0 && is_group(t, ps[last - 1], "[")) --last;  // array declarators follow the name
  size_t name = std::string::npos;                            // token index
  if (last > 0 && is_name_piece(t, ps, last - 1)) name = ps[last - 1].begin;

  std::vector<size_t> type, base;
  bool before_pointer = true, seen_array = false;
  for (const Piece& p : ps) {
    if (is_declarator_group(t, p)) {
      for (size_t k = p.begin; k < p.end; ++k) {
        const Token& tk = t[k];
        if (tk.kind == Kind::kIdent && !is_type_keyword(tk.text) && k + 2 == p.end) {
          param.name = tk.text;
          continue;
        }
        param.pointer_depth += is_punct(tk, "*") ? 1 : 0;
        param.is_reference = param.is_reference || is_punct(tk, "&") || is_punct(tk, "&&");
        type.push_back(k);
      }
      continue;
    }
    if (p.begin == name) {
      param.name = t[name].text;
      continue;
    }
    append(p, &type);
    if (is_group(t, p, "[")) {
      param.pointer_depth += seen_array ? 0 : 1;  // "int a[3][4]" decays to one pointer, to int[4]
      seen_array = true;
    } else if (is_single(t, p, "*")) {
      ++param.pointer_depth;
      before_pointer = false;
    } else if (is_single(t, p, "&") || is_single(t, p, "&&")) {
      param.is_reference = true;
    } else if (is_single(t, p, "const")) {
      param.is_const = param.is_const || before_pointer;
    } else {
      append(p, &base);
    }
  }
  if (!base.empty() && is_punct(t[base.front()], "::")) base.erase(base.begin());  // "::kjit::X" is "kjit::X"
  param.type = render(t, type);
  param.base = render(t, base);
  return param;
}

// True when [b, e) can be a type (with an optional name): words, '::', '*', '&', '...' and
// bracket groups. Numbers, literals and operators mean an expression: "int y(3);" is no function.
bool looks_like_type(const Tokens& t, size_t b, size_t e) {
  bool word = false;
  for (size_t j = b; j < e; j = next_piece(t, j, e)) {
    const Token& tk = t[j];
    bool after_extern = j > b && is_word(t[j - 1], "extern");
    if (tk.kind == Kind::kIdent || is_punct(tk, "...")) {
      word = true;
    } else if (is_punct(tk, "{") || (tk.kind == Kind::kLiteral && !after_extern) || tk.kind == Kind::kNumber ||
               (tk.kind == Kind::kPunct && !is_opener(tk) && !one_of(tk.text, {"::", "*", "&", "&&", "<"}))) {
      return false;
    }
  }
  return word;
}

// One parameter: [begin, end), with a default argument from `eq` on (eq == end without one).
struct Segment {
  size_t begin, eq, end;
};

// Splits a parameter list at top-level commas. Template arguments hide their commas; in a
// default argument '<' is only trusted as a template when `angles_in_defaults`. Sets
// *balanced to false when some '<' in a default looks like a less-than after all.
std::vector<Segment> split_params(const Tokens& t, size_t b, size_t e, bool angles_in_defaults, bool* balanced) {
  std::vector<Segment> out;
  std::string open;  // open brackets, innermost last
  Segment seg{b, e, e};
  *balanced = true;
  for (size_t j = b; j < e; ++j) {
    const Token& tk = t[j];
    if (tk.kind != Kind::kPunct) continue;
    const std::string& s = tk.text;
    bool in_default = seg.eq != e;
    if (open.empty() && s == ",") {
      seg.end = j;
      if (!in_default) seg.eq = j;
      out.push_back(seg);
      seg = {j + 1, e, e};
    } else if (open.empty() && s == "=" && !in_default) {
      seg.eq = j;
    } else if (s == "(" || s == "[" || s == "{") {
      open += s;
    } else if (s == "[[") {
      open += "[[";
    } else if (s == "<") {
      if (!in_default || (angles_in_defaults && j > b && t[j - 1].kind == Kind::kIdent)) open += '<';
    } else if (s == ">") {
      if (open.empty() || open.back() != '<') continue;
      open.pop_back();
      // In an expression a template-id is followed by '(', '{', '::'..., never by a word: "x > y".
      if (in_default && j + 1 < e && t[j + 1].kind != Kind::kPunct) *balanced = false;
    } else if (is_closer(tk)) {
      char opener = s == ")" ? '(' : s == "]" ? '[' : '{';
      size_t at = open.rfind(opener);
      if (at == std::string::npos) continue;  // stray closer
      if (open.find('<', at) != std::string::npos) *balanced = false;
      open.resize(at);
    }
  }
  if (open.find('<') != std::string::npos) *balanced = false;
  if (b < e) {
    seg.end = e;
    out.push_back(seg);
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// The scanner: walks namespace scope declaration by declaration.

class Scanner {
 public:
  Scanner(Tokens tokens, const std::string& name) : t_(std::move(tokens)), name_(name) {}

  std::vector<CppFunction> run() {
    size_t i = 0;
    while (i < t_.size()) {
      if (is_punct(t_[i], "}")) {
        if (!scopes_.empty()) scopes_.pop_back();
        ++i;
      } else if (is_punct(t_[i], ";") || is_closer(t_[i])) {
        ++i;  // empty declaration, or a stray closer
      } else {
        size_t next = open_scope(i);
        i = next != i ? next : declaration(i);
      }
    }
    return std::move(found_);
  }

 private:
  // Index after an attribute starting at t_[j] ("[[...]]", "__attribute__((...))"), or j.
  size_t skip_attribute(size_t j) const {
    if (j < t_.size() && is_punct(t_[j], "[[")) return skip_group(t_, j, t_.size());
    if (j + 1 < t_.size() && one_of(t_[j].text, {"__attribute__", "__attribute", "__declspec"}) &&
        is_punct(t_[j + 1], "(")) {
      return skip_group(t_, j + 1, t_.size());
    }
    return j;
  }

  // "namespace a::b {", "inline namespace v1 {", "namespace {", "extern "C" {": pushes the
  // scope's name ("" adds nothing to qualified names) and returns the index after '{'.
  // Returns i when t_[i] opens none of them.
  size_t open_scope(size_t i) {
    size_t n = t_.size();
    if (is_word(t_[i], "extern") && i + 2 < n && t_[i + 1].kind == Kind::kLiteral && is_punct(t_[i + 2], "{")) {
      scopes_.push_back("");
      return i + 3;
    }
    size_t j = i;
    if (is_word(t_[j], "inline")) ++j;
    if (j >= n || !is_word(t_[j], "namespace")) return i;
    std::string name;
    for (++j; j < n;) {
      size_t after = skip_attribute(j);
      if (after != j) {
        j = after;
      } else if (is_word(t_[j], "inline")) {
        ++j;
      } else if (t_[j].kind == Kind::kIdent || is_punct(t_[j], "::")) {
        name += t_[j++].text;
      } else {
        break;
      }
    }
    if (j >= n || !is_punct(t_[j], "{")) return i;  // an alias "namespace x = y;" or "using namespace"
    scopes_.push_back(name);
    return j + 1;
  }

  // Consumes one namespace-scope declaration starting at t_[start] and returns the index after
  // it. It ends at ';', after a '{...}' (a body, class or initializer), or before a stray '}'.
  size_t declaration(size_t start) {
    size_t j = start;
    while (j < t_.size()) {
      const Token& tk = t_[j];
      if (is_punct(tk, ";") || is_punct(tk, "}")) {
        analyze(start, j, false);
        return is_punct(tk, ";") ? j + 1 : j;
      }
      if (is_punct(tk, "{")) {
        analyze(start, j, true);
        return skip_group(t_, j, t_.size());
      }
      if (j > start && is_word(tk, "try")) {  // function-try-block
        analyze(start, j, true);
        return skip_try_block(j + 1);
      }
      if (j > start && is_word(tk, "namespace")) {  // a missing ';' before it
        analyze(start, j, false);
        return j;
      }
      if (is_word(tk, "template") && j + 1 < t_.size() && is_punct(t_[j + 1], "<")) {
        j = skip_angles(t_, j + 1, t_.size());  // its default arguments may hold braces
      } else if (is_opener(tk)) {
        j = skip_group(t_, j, t_.size());
      } else {
        ++j;
      }
    }
    return j;
  }

  size_t skip_try_block(size_t j) {
    if (j < t_.size() && is_punct(t_[j], "{")) j = skip_group(t_, j, t_.size());
    while (j < t_.size() && is_word(t_[j], "catch")) {
      ++j;
      if (j < t_.size() && is_punct(t_[j], "(")) j = skip_group(t_, j, t_.size());
      if (j < t_.size() && is_punct(t_[j], "{")) j = skip_group(t_, j, t_.size());
    }
    return j;
  }

  // Remembers "struct S" / "class S" so that "void S::f()" is known to be a member.
  void note_classes(size_t b, size_t e) {
    for (size_t j = b; j < e;) {
      if (t_[j].kind != Kind::kIdent || !one_of(t_[j].text, {"struct", "class", "union", "enum"})) {
        j = next_piece(t_, j, e);
        continue;
      }
      std::string last;
      for (++j; j < e;) {
        size_t after = skip_attribute(j);
        if (after == j && is_word(t_[j], "alignas") && j + 1 < e) after = skip_group(t_, j + 1, e);
        if (after != j) {
          j = after;
        } else if (t_[j].kind == Kind::kIdent || is_punct(t_[j], "::")) {
          if (t_[j].kind == Kind::kIdent && t_[j].text != "final") last = t_[j].text;
          ++j;
        } else {
          break;
        }
      }
      if (!last.empty()) classes_.insert(last);
    }
  }

  // The parameters of the template head whose '<' is t_[lt] and whose end (after
  // '>') is `gt`: type parameters' names into `fn`, and whether any is not a type.
  void template_params(size_t lt, size_t gt, CppFunction* fn) const {
    fn->template_type_params.clear();
    fn->template_has_value_params = false;
    const size_t close = gt > lt + 1 && is_punct(t_[gt - 1], ">") ? gt - 1 : gt;
    for (size_t s = lt + 1; s < close;) {
      size_t end = s;
      while (end < close && !is_punct(t_[end], ",")) {
        end = is_opener(t_[end])       ? skip_group(t_, end, close)
              : is_punct(t_[end], "<") ? skip_angles(t_, end, close)
                                       : end + 1;
      }
      const bool type = is_word(t_[s], "typename") || is_word(t_[s], "class");
      const bool pack = s + 1 < end && is_punct(t_[s + 1], "...");
      if (!type || pack) {
        fn->template_has_value_params = true;
      } else {
        fn->template_type_params.push_back(s + 1 < end && t_[s + 1].kind == Kind::kIdent ? t_[s + 1].text : "");
      }
      s = end + 1;
    }
  }

  // Looks for `name (` at the top level of the declaration [b, e), where e is its ';' or body.
  void analyze(size_t b, size_t e, bool body) {
    note_classes(b, e);
    bool is_template = false;
    head_lt_ = head_gt_ = 0;
    for (size_t j = b; j < e;) {
      const Token& tk = t_[j];
      if (is_punct(tk, "=") || is_punct(tk, ",") || is_word(tk, "operator") || is_word(tk, "typedef")) return;
      if (is_word(tk, "template") && j + 1 < e && is_punct(t_[j + 1], "<")) {
        is_template = true;
        head_lt_ = j + 1;
        j = head_gt_ = skip_angles(t_, j + 1, e);
        continue;
      }
      if (tk.kind == Kind::kIdent && (tk.text == name_ || (name_.empty() && !is_type_keyword(tk.text))) && j + 1 < e) {
        size_t lparen = is_punct(t_[j + 1], "<") ? skip_angles(t_, j + 1, e) : j + 1;  // f<int>(...)
        if (lparen < e && is_punct(t_[lparen], "(") && match(b, j, lparen, e, body, is_template)) return;
      }
      bool angles = is_punct(tk, "<") && j > b && t_[j - 1].kind == Kind::kIdent;
      j = is_opener(tk) || angles ? next_piece(t_, j, e) : j + 1;
    }
  }

  // Checks the candidate `name` at t_[at] with its '(' at t_[lparen] and records it.
  bool match(size_t b, size_t at, size_t lparen, size_t e, bool body, bool is_template) {
    size_t rparen = skip_group(t_, lparen, e) - 1;
    if (rparen >= e || !is_punct(t_[rparen], ")")) return false;
    if (at > b && (is_punct(t_[at - 1], ".") || is_punct(t_[at - 1], "->"))) return false;
    size_t trailing_b = 0, trailing_e = 0;
    if (!parse_trailer(rparen + 1, e, body, &trailing_b, &trailing_e)) return false;

    // Qualifier "a::b::" right before the name; "::" alone means the global namespace.
    std::vector<std::string> qualifier;
    bool global = false;
    size_t q = at;
    while (q > b && is_punct(t_[q - 1], "::")) {
      if (q >= b + 2 && is_punct(t_[q - 2], ">")) return false;  // S<T>::f: a member
      if (q < b + 2 || t_[q - 2].kind != Kind::kIdent || is_type_keyword(t_[q - 2].text)) {
        global = true;
        --q;
        break;
      }
      if (classes_.count(t_[q - 2].text)) return false;  // S::f: a member
      qualifier.push_back(t_[q - 2].text);
      q -= 2;
    }
    std::reverse(qualifier.begin(), qualifier.end());

    Pieces ret = drop_macro_calls(t_, clean(t_, top_level(t_, b, q), true));
    if (ret.empty() || !looks_like_type(t_, b, q)) return false;  // "f(3);" has no return type

    CppFunction fn;
    bool balanced = true;
    std::vector<Segment> segs = split_params(t_, lparen + 1, rparen, true, &balanced);
    if (!balanced) segs = split_params(t_, lparen + 1, rparen, false, &balanced);
    bool only_void = segs.size() == 1 && segs[0].eq == segs[0].begin + 1 && is_word(t_[segs[0].begin], "void");
    for (const Segment& s : segs) {
      if (only_void) break;
      if (!looks_like_type(t_, s.begin, s.eq)) return false;
      fn.params.push_back(parse_param(t_, s.begin, s.eq));
      fn.params.back().has_default = s.eq != s.end;
    }

    fn.name = t_[at].text;
    for (const std::string& scope : global ? std::vector<std::string>{} : scopes_) {
      if (!scope.empty()) fn.qualified_name += scope + "::";
    }
    for (const std::string& part : qualifier) fn.qualified_name += part + "::";
    fn.qualified_name += t_[at].text;
    fn.return_type = render(t_, ret);
    if (fn.return_type == "auto" && trailing_e > trailing_b) {
      fn.return_type = render(t_, clean(t_, top_level(t_, trailing_b, trailing_e), false));
    }
    fn.is_definition = body;
    fn.is_template = is_template;
    if (is_template) template_params(head_lt_, head_gt_, &fn);
    fn.line = t_[at].line;
    found_.push_back(std::move(fn));
    return true;
  }

  // What may follow a parameter list: noexcept(...), throw(...), attributes, "-> type",
  // "= delete" / "= default". Anything else means this was not a function declarator.
  bool parse_trailer(size_t j, size_t e, bool body, size_t* trailing_b, size_t* trailing_e) const {
    while (j < e) {
      const Token& tk = t_[j];
      size_t after = skip_attribute(j);
      if (after != j) {
        j = after;
      } else if (one_of(tk.text, {"noexcept", "throw", "const", "volatile", "override", "final"}) &&
                 tk.kind == Kind::kIdent) {
        ++j;
        if (j < e && is_punct(t_[j], "(")) j = skip_group(t_, j, e);
      } else if (is_punct(tk, "&") || is_punct(tk, "&&")) {
        ++j;
      } else if (is_punct(tk, "->")) {
        *trailing_b = ++j;
        while (j < e && !is_punct(t_[j], "=") && !is_word(t_[j], "requires")) j = next_piece(t_, j, e);
        *trailing_e = j;
      } else if (is_word(tk, "requires")) {
        return true;  // the constraint runs to the end
      } else if (is_punct(tk, "=")) {
        return !body && j + 2 == e && one_of(t_[j + 1].text, {"delete", "default", "0"});
      } else {
        return false;
      }
    }
    return true;
  }

  Tokens t_;
  std::string name_;
  std::vector<std::string> scopes_;  // enclosing namespaces; "" for anonymous ones and extern "C" blocks
  std::set<std::string> classes_;
  std::vector<CppFunction> found_;
  size_t head_lt_ = 0, head_gt_ = 0;  // the last template head of the declaration analyze() reads
};

}  // namespace

std::vector<CppFunction> find_cpp_functions(const std::string& source, const std::string& name) {
  if (name.empty()) return {};
  return Scanner(Lexer(source).run(), name).run();
}

std::vector<CppFunction> find_all_cpp_functions(const std::string& source) {
  return Scanner(Lexer(source).run(), "").run();
}

}  // namespace kjit
