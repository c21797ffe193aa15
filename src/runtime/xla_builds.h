// The object build every library with XLA FFI handlers links: checked modules
// (module.cc) and the elementwise handler's library (elementwise_xla.cc).
#ifndef KJIT_SRC_RUNTIME_XLA_BUILDS_H_
#define KJIT_SRC_RUNTIME_XLA_BUILDS_H_

#include <string>

#include "kjit/build.h"

namespace kjit {

/// The XLA handlers' helpers (kjit/detail/xla_helpers.h) as an object build with
/// `library`'s flags, cache and XLA headers.
BuildRequest xla_helpers_request(const BuildRequest& library, const std::string& xla_include_dir);

}  // namespace kjit

#endif  // KJIT_SRC_RUNTIME_XLA_BUILDS_H_
