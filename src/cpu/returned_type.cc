// The dtype an entry function returns: declared in its definition, or deduced by
// the compiler through a probe library (decltype of the call).
#include "cpu/returned_type.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <sstream>

#include "cpu/codegen_cpu.h"
#include "cpu/kernel_library.h"
#include "declare/cpp_signature.h"
#include "declare/cpp_types.h"
#include "iterator/entry_call.h"
#include "iterator/promotion.h"
#include "kjit/errors.h"

namespace kjit {
namespace cpu {
namespace {

/// C++ spellings of each dtype the probe reports, besides the kernels' own
/// (iterator::storage_type): the distinct fundamental types an alias may name.
struct Spelling {
  const char* cpp;
  EwType type;
};
constexpr Spelling kOtherSpellings[] = {
    {"char", EwType::kInt8},  // signed on the hosts kjit builds for
    {"long long", EwType::kInt64},
    {"unsigned long long", EwType::kUInt64},
};

std::string strip_qualifiers(std::string t) {
  for (const char* drop : {"const ", "volatile ", "std::"}) {
    for (size_t at = t.find(drop); at != std::string::npos; at = t.find(drop)) t.erase(at, std::strlen(drop));
  }
  while (!t.empty() && (t.back() == '&' || t.back() == ' ')) t.pop_back();
  return t;
}

/// `template <> struct __code<T> { ... = dtype; };` for every spelling of every dtype.
std::string dtype_codes() {
  std::ostringstream o;
  auto one = [&](const std::string& cpp, EwType t) {
    o << "template <> struct __code<" << cpp << "> { static constexpr int __value = " << static_cast<int>(t)
      << "; };\n";
  };
  for (int i = 0; i <= static_cast<int>(EwType::kComplex128); ++i) {
    const EwType t = static_cast<EwType>(i);
    if (!iterator::is_half(t)) one(iterator::storage_type(t), t);  // halves compute in float
  }
  for (const Spelling& s : kOtherSpellings) one(s.cpp, s.type);
  return o.str();
}

std::string probe_source(const ReturnedTypeQuery& q) {
  const std::string callee = iterator::entry_callee(q.code, q.entry, "__C");
  std::string fixed;
  for (const std::string& a : q.args) fixed += (fixed.empty() ? "" : ", ") + a;
  std::ostringstream o;
  o << kernel_source_head("what '" + q.entry + "' returns, computing in " + ew_type_name(q.compute), q.code,
                          /*complex=*/true, "kjit_returned_type", "")
    << "namespace __kjit_probe {\n"
    << "using __C = " << iterator::storage_type(q.compute) << ";\n"
    << "// An extra scalar: converts to whatever its parameter's type is.\n"
    << "struct __extra { template <class __U> operator __U() const; };\n"
    << "template <class __T> __T&& __declval() noexcept;  // unevaluated only\n"
    << "template <class __T> struct __bare { using __type = __T; };\n"
    << "template <class __T> struct __bare<const __T> { using __type = typename __bare<__T>::__type; };\n"
    << "template <class __T> struct __bare<volatile __T> { using __type = typename __bare<__T>::__type; };\n"
    << "template <class __T> struct __bare<__T&> { using __type = typename __bare<__T>::__type; };\n"
    << "template <class __T> struct __bare<__T&&> { using __type = typename __bare<__T>::__type; };\n"
    << "template <class __T> struct __code { static constexpr int __value = -1; };  // not a dtype\n"
    << dtype_codes() << "template <class... __A> struct __list {};\n"
    << "// -2: no valid call with these arguments.\n"
    << "template <class __L, class = void> struct __returns { static constexpr int __value = -2; };\n"
    << "template <class... __A>\n"
    << "struct __returns<__list<__A...>, decltype(void(" << callee << "(__declval<__A&>()...)))> {\n"
    << "  static constexpr int __value =\n"
    << "      __code<typename __bare<decltype(" << callee << "(__declval<__A&>()...))>::__type>::__value;\n"
    << "};\n"
    << "}  // namespace __kjit_probe\n\n"
    << "extern \"C\" __attribute__((visibility(\"default\"))) int kjit_returned_type() {\n"
    << "  using namespace __kjit_probe;\n";
  std::string args = fixed;
  for (int e = 0; e <= q.max_extras; ++e) {
    if (e > 0) args += std::string(args.empty() ? "" : ", ") + "__extra";
    o << "  if (__returns<__list<" << args << ">>::__value != -2) return __returns<__list<" << args << ">>::__value;\n";
  }
  o << "  return -2;\n}\n";
  return o.str();
}

}  // namespace

std::optional<EwType> dtype_of_cpp_type(std::string t) {
  // One table of C++ spellings for the whole of kjit: the one C++ inference reads.
  return scalar_type_of_cpp(strip_qualifiers(std::move(t)));
}

EntryReturn entry_return(const std::string& code, const std::string& entry) {
  EntryReturn out;
  bool first = true;
  for (const CppFunction& f : find_cpp_functions(code, entry)) {
    if (!f.is_definition) continue;
    EntryReturn these;
    const std::string bare = strip_qualifiers(f.return_type);
    const bool template_param =
        std::find(f.template_type_params.begin(), f.template_type_params.end(), bare) != f.template_type_params.end();
    these.declared = dtype_of_cpp_type(f.return_type);
    these.deduced = !these.declared && bare != "void" && !template_param;
    if (!first && (these.declared != out.declared || these.deduced != out.deduced)) return {};
    out = these;
    first = false;
  }
  return out;
}

std::optional<EwType> returned_type(const ReturnedTypeQuery& q) {
  CpuKernelBuild build;
  build.name = "kjit_returned_" + q.entry;
  build.source = probe_source(q);
  build.cflags = {"-O0"};  // nothing runs but a constant
  build.cache_dir = q.cache_dir;
  build.verbose = q.verbose;
  build.exports = {"kjit_returned_type"};
  build.what = q.what + " (asking the compiler what it returns, computing in " + ew_type_name(q.compute) + ")";
  build.lines = q.lines;
  void* lib = open_cpu_kernel(build);
  auto fn = reinterpret_cast<int (*)()>(dlsym(lib, "kjit_returned_type"));
  internal_check(fn != nullptr, "a returned-type probe without kjit_returned_type");
  const int code = fn();
  dlclose(lib);
  if (code < 0 || code > static_cast<int>(EwType::kComplex128)) return std::nullopt;
  return static_cast<EwType>(code);
}

std::optional<EwType> own_type_of_returned(EwType compute, std::optional<EwType> returned) {
  if (!returned || *returned == compute) return std::nullopt;
  const iterator::Kind k = iterator::kind_of(compute);
  const bool narrow_integral =
      (k == iterator::Kind::kBool || k == iterator::Kind::kInt || k == iterator::Kind::kUInt) &&
      iterator::size_of(compute) < 4;
  if (narrow_integral && *returned == EwType::kInt32) return std::nullopt;
  return returned;
}

}  // namespace cpu
}  // namespace kjit
