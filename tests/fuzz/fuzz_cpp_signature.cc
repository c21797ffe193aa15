// Fuzzes the C++ declaration scanner on arbitrary source text: every free function
// it finds is looked up again by name and its spec inferred from its definition
// (the C++ type mapping of cpp_types).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "declare/cpp_signature.h"
#include "fuzz_common.h"
#include "kjit/declare.h"

namespace {

size_t count_lines(const std::string& text) {
  size_t lines = 1;
  for (char c : text) lines += c == '\n';
  return lines;
}

void infer(const std::string& source, const std::string& name) {
  kjit::FunctionDecl decl;
  decl.name = name;
  decl.form = kjit::FunctionDecl::Form::kInfer;
  decl.origin = "functions";
  kjit_fuzz::run_guarded("resolve_functions", [&] { kjit::resolve_functions({decl}, kjit::label_sources({source})); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string source(reinterpret_cast<const char*>(data), size);
  std::vector<kjit::CppFunction> all;
  if (!kjit_fuzz::run_guarded("find_all_cpp_functions", [&] { all = kjit::find_all_cpp_functions(source); })) return 0;
  const size_t lines = count_lines(source);
  for (const kjit::CppFunction& fn : all) {
    if (fn.line < 1 || static_cast<size_t>(fn.line) > lines) {
      kjit_fuzz::bug("function '" + fn.name + "' reported at line " + std::to_string(fn.line) + " of a " +
                     std::to_string(lines) + "-line source");
    }
    std::vector<kjit::CppFunction> found;
    kjit_fuzz::run_guarded("find_cpp_functions", [&] { found = kjit::find_cpp_functions(source, fn.name); });
    if (found.empty()) kjit_fuzz::bug("find_all_cpp_functions lists '" + fn.name + "', find_cpp_functions misses it");
    infer(source, fn.name);
  }
  if (all.empty()) infer(source, "f");
  return 0;
}
