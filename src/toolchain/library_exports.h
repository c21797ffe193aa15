// What a built shared library exports, read from its ELF dynamic symbol table
// without loading it (loading runs the user's static constructors).
#ifndef KJIT_SRC_TOOLCHAIN_LIBRARY_EXPORTS_H_
#define KJIT_SRC_TOOLCHAIN_LIBRARY_EXPORTS_H_

#include <string>
#include <vector>

namespace kjit {
namespace build_detail {

/// The names in `wanted` that the ELF64 shared library at `path` does not define as
/// visible global or weak symbols of its dynamic symbol table. A file that cannot
/// be read, or that is not a well-formed ELF64 library, defines none of them.
std::vector<std::string> missing_exports(const std::string& path, const std::vector<std::string>& wanted);

}  // namespace build_detail
}  // namespace kjit

#endif  // KJIT_SRC_TOOLCHAIN_LIBRARY_EXPORTS_H_
