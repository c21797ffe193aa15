// Test helper: the FFI error a call raises, as "Kind: message".
#ifndef KJIT_TESTS_CPP_FFI_ERROR_H_
#define KJIT_TESTS_CPP_FFI_ERROR_H_

#include <tvm/ffi/function.h>

#include <string>
#include <utility>

namespace kjit_test {

/// Calls f and returns the FFI error's "kind: message", or "" on success.
template <typename... Args>
std::string error_of(const tvm::ffi::Function& f, Args&&... args) {
  try {
    f(std::forward<Args>(args)...);
  } catch (const tvm::ffi::Error& e) {
    return e.kind() + ": " + e.message();
  }
  return "";
}

}  // namespace kjit_test

#endif  // KJIT_TESTS_CPP_FFI_ERROR_H_
