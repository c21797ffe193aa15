// kjit_fuzz_stubgen IN OUT: the stub fuzzer's module, generated at build time.
//
// Reads the `// @kjit` annotations of IN (stub_kernels.cc), resolves them through
// kjit's front door, emits the module translation unit with kjit's codegen and
// appends the table of stubs (stub_table.h) that the fuzzer calls.
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "kjit/codegen.h"
#include "kjit/declare.h"
#include "kjit/spec.h"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

/// `text` as a C string literal.
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string stub_table(const std::vector<kjit::FunctionSpec>& specs) {
  std::string text = "\n// ---- the fuzzer's table (tests/fuzz/stub_table.h) ----\n#include \"stub_table.h\"\n";
  for (const kjit::FunctionSpec& spec : specs) {
    text += "extern \"C\" int __tvm_ffi_" + spec.name + "(void*, const TVMFFIAny*, int32_t, TVMFFIAny*);\n";
  }
  text += "extern \"C\" const KjitFuzzStub kjit_fuzz_stubs[] = {\n";
  for (const kjit::FunctionSpec& spec : specs) {
    text += "    {\"" + spec.name + "\", &__tvm_ffi_" + spec.name + ", " + std::to_string(spec.call_args().size()) +
            ", " + quoted(kjit::to_string(spec)) + "},\n";
  }
  text += "};\nextern \"C\" const int kjit_fuzz_stub_count = " + std::to_string(specs.size()) + ";\n";
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: kjit_fuzz_stubgen stub_kernels.cc OUT.cc\n";
    return 2;
  }
  try {
    const std::string kernels = read_file(argv[1]);
    const std::vector<kjit::FunctionSpec> specs = kjit::resolve_module_functions({kernels}, {}, {});
    kjit::ModuleSource module = kjit::emit_module_source(kjit::label_sources({kernels}), specs, argv[2]);
    std::ofstream out(argv[2], std::ios::binary);
    out << module.text << stub_table(specs);
    if (!out) throw std::runtime_error(std::string("cannot write ") + argv[2]);
  } catch (const std::exception& e) {
    std::cerr << "kjit_fuzz_stubgen: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
