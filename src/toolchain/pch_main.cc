// kjit_pch OUT_DIR: precompiles include/kjit/detail/stub_includes.h for the JIT at
// kjit build time (CMakeLists.txt runs it with CXX set to the build's compiler and
// KJIT_INCLUDE_DIR to the source headers). It uses the library's own compiler
// search and default flags, so the PCH cannot drift from what the JIT runs.
#include <cstdio>
#include <exception>

#include "toolchain/pch.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: kjit_pch OUT_DIR (got %d arguments)\n", argc - 1);
    return 2;
  }
  try {
    kjit::pch_detail::build_stub_pch(argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kjit_pch: %s\n", e.what());
    return 1;
  }
  return 0;
}
