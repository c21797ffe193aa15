// Expands the calls of function-like macros #defined in a source, one level deep,
// so the functions they generate can be found by name (see macro_expansion.h).
#include "declare/macro_expansion.h"

#include <cctype>
#include <map>
#include <set>

namespace kjit {
namespace {

bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

/// Skips a string or char literal starting at `i` (the quote); returns the index after it.
size_t skip_literal(const std::string& s, size_t i) {
  char q = s[i];
  for (++i; i < s.size() && s[i] != q && s[i] != '\n'; ++i) {
    if (s[i] == '\\') ++i;
  }
  return i < s.size() ? i + 1 : i;
}

/// The text with every comment blanked (newlines kept, so line numbers stay).
std::string blank_comments(const std::string& text) {
  std::string out = text;
  size_t i = 0;
  while (i < out.size()) {
    if (out[i] == '"' || out[i] == '\'') {
      i = skip_literal(out, i);
    } else if (out.compare(i, 2, "//") == 0) {
      // A line comment ends at the newline; a backslash-newline continues it.
      for (; i < out.size() && out[i] != '\n'; ++i) {
        if (out[i] == '\\' && i + 1 < out.size() && out[i + 1] == '\n') ++i;
        out[i] = out[i] == '\n' ? '\n' : ' ';
      }
    } else if (out.compare(i, 2, "/*") == 0) {
      size_t end = out.find("*/", i + 2);
      end = end == std::string::npos ? out.size() : end + 2;
      for (; i < end; ++i) {
        if (out[i] != '\n') out[i] = ' ';
      }
    } else {
      ++i;
    }
  }
  return out;
}

struct Macro {
  std::vector<std::string> params;
  bool variadic = false;
  std::string body;
  int line = 0;
};

/// One physical line of the source and whether a preprocessor directive owns it.
struct Line {
  size_t begin = 0;
  bool directive = false;
};

struct Scanned {
  std::string text;  ///< comments blanked
  std::vector<Line> lines;
  std::map<std::string, Macro> macros;
};

size_t skip_space(const std::string& s, size_t i) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return i;
}

/// Reads "NAME(A, B, ...) body" of a #define's logical line into `macros`
/// (object-like macros generate no functions by call, so they are skipped).
void read_define(const std::string& logical, int line, std::map<std::string, Macro>* macros) {
  size_t i = skip_space(logical, 0);
  size_t b = i;
  while (i < logical.size() && ident_char(logical[i])) ++i;
  std::string name = logical.substr(b, i - b);
  if (name.empty() || i >= logical.size() || logical[i] != '(') return;
  size_t close = logical.find(')', i);
  if (close == std::string::npos) return;
  Macro m;
  m.line = line;
  std::string list = logical.substr(i + 1, close - i - 1);
  size_t p = 0;
  while (p <= list.size()) {
    size_t comma = list.find(',', p);
    std::string param = list.substr(p, comma == std::string::npos ? std::string::npos : comma - p);
    size_t s = param.find_first_not_of(" \t"), e = param.find_last_not_of(" \t");
    param = s == std::string::npos ? "" : param.substr(s, e - s + 1);
    if (param == "...") {
      m.variadic = true;
    } else if (!param.empty()) {
      m.params.push_back(param);
    }
    if (comma == std::string::npos) break;
    p = comma + 1;
  }
  m.body = logical.substr(close + 1);
  (*macros)[name] = std::move(m);
}

Scanned scan(const std::string& source) {
  Scanned s;
  s.text = blank_comments(source);
  size_t pos = 0;
  bool continued = false;  // the previous line ended in a backslash inside a directive
  std::string logical;
  int logical_line = 0;
  while (pos <= s.text.size()) {
    size_t end = s.text.find('\n', pos);
    if (end == std::string::npos) end = s.text.size();
    std::string line = s.text.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    size_t first = skip_space(line, 0);
    bool starts = !continued && first < line.size() && line[first] == '#';
    Line info{pos, continued || starts};
    s.lines.push_back(info);
    if (starts) {
      logical.clear();
      logical_line = static_cast<int>(s.lines.size());
    }
    if (info.directive) {
      bool more = !line.empty() && line.back() == '\\';
      logical += (more ? line.substr(0, line.size() - 1) : line) + " ";
      continued = more;
      if (!more) {
        size_t d = skip_space(logical, skip_space(logical, 0) + 1);
        if (logical.compare(d, 6, "define") == 0 && d + 6 < logical.size() &&
            (logical[d + 6] == ' ' || logical[d + 6] == '\t')) {
          read_define(logical.substr(d + 6), logical_line, &s.macros);
        }
      }
    }
    if (end == s.text.size()) break;
    pos = end + 1;
  }
  return s;
}

/// A call `NAME(args...)` of an in-source macro at the start of a code line.
struct Call {
  std::string macro;
  std::vector<std::string> args;
  int line = 0;
  bool closed = false;
};

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

/// The call starting at line `index` (0-based), if its first word is followed by '('.
bool read_call(const Scanned& s, size_t index, Call* out) {
  const std::string& t = s.text;
  size_t i = skip_space(t, s.lines[index].begin);
  if (i >= t.size() || !ident_start(t[i])) return false;
  size_t b = i;
  while (i < t.size() && ident_char(t[i])) ++i;
  out->macro = t.substr(b, i - b);
  i = skip_space(t, i);
  if (i >= t.size() || t[i] != '(') return false;
  out->line = static_cast<int>(index) + 1;
  int depth = 0;
  std::string arg;
  for (; i < t.size(); ++i) {
    char c = t[i];
    if (c == '"' || c == '\'') {
      size_t e = skip_literal(t, i);
      arg += t.substr(i, e - i);
      i = e - 1;
      continue;
    }
    if (c == '(' || c == '[' || c == '{') {
      if (depth++ == 0) continue;
    } else if (c == ')' || c == ']' || c == '}') {
      if (--depth == 0) {
        out->args.push_back(trim(arg));
        out->closed = true;
        return true;
      }
    } else if (c == ',' && depth == 1) {
      out->args.push_back(trim(arg));
      arg.clear();
      continue;
    }
    arg += c;
  }
  return true;
}

/// A call's arguments as the macro's parameters see them ("()" passes none to a
/// macro without parameters).
bool arity_fits(const Macro& m, const Call& c) {
  size_t n = c.args.size() == 1 && c.args[0].empty() && m.params.empty() ? 0 : c.args.size();
  return m.variadic ? n >= m.params.size() : n == m.params.size();
}

/// The macro body with the call's arguments substituted, `#p` stringised and `##`
/// pasted: one level of expansion, which is what a generated definition needs.
std::string expand(const Macro& m, const Call& c) {
  std::map<std::string, std::string> value;
  for (size_t i = 0; i < m.params.size() && i < c.args.size(); ++i) value[m.params[i]] = c.args[i];
  if (m.variadic) {
    std::string rest;
    for (size_t i = m.params.size(); i < c.args.size(); ++i) rest += (rest.empty() ? "" : ", ") + c.args[i];
    value["__VA_ARGS__"] = rest;
  }
  std::vector<std::string> pieces;  // identifiers, "##", "#", whitespace runs, other characters
  const std::string& b = m.body;
  for (size_t i = 0; i < b.size();) {
    size_t j = i + 1;
    if (ident_start(b[i])) {
      while (j < b.size() && ident_char(b[j])) ++j;
    } else if (b[i] == ' ' || b[i] == '\t') {
      while (j < b.size() && (b[j] == ' ' || b[j] == '\t')) ++j;
    } else if (b[i] == '"' || b[i] == '\'') {
      j = skip_literal(b, i);
    } else if (b.compare(i, 2, "##") == 0) {
      j = i + 2;
    }
    pieces.push_back(b.substr(i, j - i));
    i = j;
  }
  auto blank = [](const std::string& p) { return p[0] == ' ' || p[0] == '\t'; };
  std::string out;
  for (size_t k = 0; k < pieces.size(); ++k) {
    const std::string& p = pieces[k];
    if (p == "##") {
      while (!out.empty() && (out.back() == ' ' || out.back() == '\t')) out.pop_back();
      while (k + 1 < pieces.size() && blank(pieces[k + 1])) ++k;
      continue;
    }
    if (p == "#") {
      size_t n = k + 1;
      while (n < pieces.size() && blank(pieces[n])) ++n;
      if (n < pieces.size() && value.count(pieces[n])) {
        out += "\"" + value[pieces[n]] + "\"";
        k = n;
        continue;
      }
    }
    auto v = value.find(p);
    out += v == value.end() ? p : v->second;
  }
  return out;
}

std::vector<Call> calls_of_defined_macros(const Scanned& s) {
  std::vector<Call> calls;
  for (size_t i = 0; i < s.lines.size(); ++i) {
    if (s.lines[i].directive) continue;
    Call c;
    if (read_call(s, i, &c) && c.closed && s.macros.count(c.macro)) calls.push_back(std::move(c));
  }
  return calls;
}

std::string names_defined(const std::string& text) {
  std::string out;
  std::set<std::string> seen;
  for (const CppFunction& f : find_all_cpp_functions(text)) {
    if (seen.insert(f.name).second) out += (out.empty() ? "'" : ", '") + f.name + "'";
  }
  return out;
}

}  // namespace

std::vector<CppFunction> find_macro_generated_functions(const std::string& source, const std::string& name) {
  std::vector<CppFunction> out;
  if (source.find("define") == std::string::npos) return out;
  Scanned s = scan(source);
  for (const Call& c : calls_of_defined_macros(s)) {
    const Macro& m = s.macros.at(c.macro);
    if (!arity_fits(m, c)) continue;
    std::string expanded = expand(m, c);
    if (expanded.find(name) == std::string::npos) continue;
    for (CppFunction& f : find_cpp_functions(expanded, name)) {
      f.line = c.line;
      out.push_back(std::move(f));
    }
  }
  return out;
}

std::vector<CppFunction> find_written_or_generated(const std::string& source, const std::string& name) {
  std::vector<CppFunction> found = find_cpp_functions(source, name);
  for (const CppFunction& f : found) {
    if (f.is_definition) return found;
  }
  for (CppFunction& f : find_macro_generated_functions(source, name)) found.push_back(std::move(f));
  return found;
}

std::string explain_macro_annotation(const std::string& source, int annotation_line, const std::string& name) {
  Scanned s = scan(source);
  for (size_t i = static_cast<size_t>(annotation_line); i < s.lines.size(); ++i) {
    size_t end = i + 1 < s.lines.size() ? s.lines[i + 1].begin : s.text.size();
    if (trim(s.text.substr(s.lines[i].begin, end - s.lines[i].begin)).empty()) continue;
    Call c;
    if (s.lines[i].directive || !read_call(s, i, &c)) return "";
    std::string at = "the macro call '" + c.macro + "(...)' at line " + std::to_string(c.line);
    auto m = s.macros.find(c.macro);
    if (m == s.macros.end()) {
      return at +
             " after the annotation has no #define in this source (kjit expands macros defined in the same "
             "source, not in #include'd headers)";
    }
    std::string def = " (#define at line " + std::to_string(m->second.line) + ")";
    if (!c.closed) return at + " is not closed with ')'";
    if (!arity_fits(m->second, c)) {
      return at + " passes " + std::to_string(c.args.size()) + " argument(s), but '" + c.macro + "'" + def + " takes " +
             std::to_string(m->second.params.size()) + (m->second.variadic ? " or more" : "");
    }
    std::string names = names_defined(expand(m->second, c));
    return at + def + " expands to " + (names.empty() ? "no function definition" : "functions " + names) + ", not '" +
           name + "'";
  }
  return "";
}

}  // namespace kjit
