// What a built shared library exports, read from its ELF dynamic symbol table
// without loading it (loading runs the user's static constructors), and whether a
// file is a whole library at all before anything maps it.
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

/// What makes the file at `path` unfit to hand to dlopen, "" if nothing: it is not
/// an ELF64 shared library for this machine, or its headers name bytes past its end
/// (a truncated file: an interrupted download or copy). Reads only the headers.
/// dlopen maps such a file, and touching the missing pages raises SIGBUS.
std::string library_file_problem(const std::string& path);

}  // namespace build_detail
}  // namespace kjit

#endif  // KJIT_SRC_TOOLCHAIN_LIBRARY_EXPORTS_H_
