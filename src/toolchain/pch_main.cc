// kjit_pch OUT_DIR: precompiles include/kjit/detail/stub_includes.h for the JIT at
// kjit build time (CMakeLists.txt runs it with CXX unset, so it finds the compiler
// the JIT finds by default, and KJIT_INCLUDE_DIR set to the source headers). It
// uses the library's own compiler search and default flags, so the PCH cannot
// drift from what the JIT runs. Writes what it did to OUT_DIR/kjit_pch.log.
#include <cstdio>
#include <exception>
#include <fstream>
#include <string>

#include "toolchain/pch.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: kjit_pch OUT_DIR (got %d arguments)\n", argc - 1);
    return 2;
  }
  try {
    std::string what = kjit::pch_detail::build_stub_pch(argv[1]);
    std::printf("kjit_pch: %s\n", what.c_str());
    std::ofstream(std::string(argv[1]) + "/kjit_pch.log") << what << "\n";
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kjit_pch: %s\n", e.what());
    return 1;
  }
  return 0;
}
