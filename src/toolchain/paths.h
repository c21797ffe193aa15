// Small file-system helpers shared by the toolchain finders.
#ifndef KJIT_SRC_TOOLCHAIN_PATHS_H_
#define KJIT_SRC_TOOLCHAIN_PATHS_H_

#include <string>

namespace kjit {
namespace build_detail {

bool is_executable(const std::string& path);
/// Absolute path of `program` (as given if it has a '/', else searched on PATH); "" if none.
std::string which(const std::string& program);
std::string first_line(const std::string& text);

}  // namespace build_detail
}  // namespace kjit

#endif  // KJIT_SRC_TOOLCHAIN_PATHS_H_
