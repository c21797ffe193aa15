// The user's namespace around a computation string, and the generated call of its
// entry function.
#include "iterator/entry_call.h"

#include <sstream>
#include <vector>

#include "declare/cpp_signature.h"

namespace kjit {
namespace iterator {
namespace {

/// Whether a line is an `#include` directive (spaces allowed around '#').
bool is_include_line(const std::string& line) {
  size_t i = line.find_first_not_of(" \t");
  if (i == std::string::npos || line[i] != '#') return false;
  i = line.find_first_not_of(" \t", i + 1);
  return i != std::string::npos && line.compare(i, 7, "include") == 0;
}

/// "r[0], r[1], ..." or "__v0, __v1, ...": `n` names made by `name(k)`.
template <typename Name>
std::string name_list(size_t n, const Name& name) {
  std::string s;
  for (size_t k = 0; k < n; ++k) s += (k ? ", " : "") + name(k);
  return s;
}

}  // namespace

std::string wrap_user_code(const std::string& code) {
  const std::string open = std::string("namespace ") + kUserNamespace + " {\n";
  std::ostringstream o;
  o << open << "#line 1 \"code\"\n";
  std::istringstream in(code);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (!is_include_line(line)) {
      o << line << "\n";
      continue;
    }
    // A header's declarations belong at global scope, not in the user's namespace.
    o << "}  // namespace " << kUserNamespace << "\n#line " << number << " \"code\"\n"
      << line << "\n"
      << open << "#line " << number + 1 << " \"code\"\n";
  }
  o << "}  // namespace " << kUserNamespace << "\n";
  return o.str();
}

std::string entry_callee(const std::string& code, const std::string& entry, const std::string& compute) {
  std::string qualified = entry;
  bool is_template = true;  // not found by the scanner (e.g. made by a macro): JITerator's form
  std::vector<CppFunction> found = find_cpp_functions(code, entry);
  if (!found.empty()) {
    qualified = found.back().qualified_name;
    is_template = false;
    for (const CppFunction& f : found) is_template = is_template || f.is_template;
  }
  std::string callee = std::string("::") + kUserNamespace + "::" + qualified;
  return is_template ? callee + "<" + compute + ">" : callee;
}

std::string entry_apply(const std::string& callee, const std::vector<std::string>& results, const std::string& fn_attrs,
                        const std::string& decl_attrs) {
  const size_t n_out = results.size();
  const std::string d = decl_attrs.empty() ? "" : decl_attrs + " ";
  auto declval_ref = [&](size_t k) { return "__kjit_declval<" + results[k] + "&>()"; };
  const std::string by_return = callee + "(__kjit_declval<__A&>()...)";
  const std::string by_ref = callee + "(__kjit_declval<__A&>()..., " + name_list(n_out, declval_ref) + ")";
  auto r = [](size_t k) { return "__r" + std::to_string(k); };
  auto r_param = [&](size_t k) { return results[k] + "& " + r(k); };
  std::ostringstream o;
  o << "template <class... __A> struct __kjit_list {};\n"
    << "template <class __T> " << d << "__T&& __kjit_declval() noexcept;  // unevaluated only\n"
    << "template <class __T> struct __kjit_is_void { static constexpr bool __value = false; };\n"
    << "template <> struct __kjit_is_void<void> { static constexpr bool __value = true; };\n"
    << "// The entry's form for these arguments: it returns its result(s), or it\n"
    << "// returns void and takes one reference per output after them.\n"
    << "template <class __L, class = void> struct __kjit_returns { static constexpr bool __value = false; };\n"
    << "template <class... __A>\n"
    << "struct __kjit_returns<__kjit_list<__A...>, decltype(void(" << by_return << "))> {\n"
    << "  static constexpr bool __value = !__kjit_is_void<decltype(" << by_return << ")>::__value;\n"
    << "};\n"
    << "template <class __L, class = void> struct __kjit_writes { static constexpr bool __value = false; };\n"
    << "template <class... __A>\n"
    << "struct __kjit_writes<__kjit_list<__A...>, decltype(void(" << by_ref << "))> {\n"
    << "  static constexpr bool __value = __kjit_is_void<decltype(" << by_ref << ")>::__value;\n"
    << "};\n"
    << "template <class... __A> struct __kjit_false { static constexpr bool __value = false; };\n"
    << "template <class... __A>\n"
    << fn_attrs << " void __kjit_apply(" << name_list(n_out, r_param) << ", __A... __a) {\n"
    << "  if constexpr (__kjit_returns<__kjit_list<__A...>>::__value) {\n";
  if (n_out == 1) {
    o << "    __r0 = static_cast<" << results[0] << ">(" << callee << "(__a...));\n";
  } else {  // a tuple-like or an aggregate with one member per output
    auto v = [](size_t k) { return "__v" + std::to_string(k); };
    o << "    auto&& [" << name_list(n_out, v) << "] = " << callee << "(__a...);\n";
    for (size_t k = 0; k < n_out; ++k) o << "    " << r(k) << " = static_cast<" << results[k] << ">(" << v(k) << ");\n";
  }
  o << "  } else if constexpr (__kjit_writes<__kjit_list<__A...>>::__value) {\n"
    << "    " << callee << "(__a..., " << name_list(n_out, r) << ");\n"
    << "  } else {\n"
    << "    static_assert(__kjit_false<__A...>::__value, \"kjit.elementwise: the entry function must take the inputs "
       "and extra scalars and return the result ("
    << n_out << " output(s): a __value, or a tuple or struct of " << n_out << "), or take them followed by " << n_out
    << " reference(s) T& and return void; the call below shows the arguments\");\n"
    << "    " << callee << "(__a...);\n"
    << "  }\n"
    << "}\n";
  return o.str();
}

EntryArity entry_arity(const std::string& code, const std::string& entry) {
  EntryArity arity;
  bool first = true;
  for (const CppFunction& f : find_cpp_functions(code, entry)) {
    if (!f.is_definition) continue;
    EntryArity a;
    a.known = true;
    a.outputs_by_reference = f.return_type == "void";
    for (const CppParam& p : f.params) {
      if (p.type.find("...") != std::string::npos || p.name.find("...") != std::string::npos) return {};
      a.least += p.has_default ? 0 : 1;
      a.most += 1;
      a.params += (a.params.empty() ? "" : ", ") + (p.name.empty() ? p.type : p.name);
    }
    if (!first &&
        (a.least != arity.least || a.most != arity.most || a.outputs_by_reference != arity.outputs_by_reference)) {
      return {};  // overloads the compiler chooses between
    }
    arity = a;
    first = false;
  }
  return arity;
}

std::string last_definition(const std::string& code) {
  std::string last;
  for (const CppFunction& f : find_all_cpp_functions(code)) {
    if (f.is_definition) last = f.name;
  }
  return last;
}

}  // namespace iterator
}  // namespace kjit
