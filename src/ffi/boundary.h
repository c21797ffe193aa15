// The one place kjit's C++ error types become FFI error kinds (Python exceptions).
#ifndef KJIT_SRC_FFI_BOUNDARY_H_
#define KJIT_SRC_FFI_BOUNDARY_H_

#include <tvm/ffi/error.h>

#include <string>
#include <utility>

#include "kjit/errors.h"
#include "kjit/kernel.h"

namespace kjit {

/// Command and log of the last CompileError on this thread, for the Python
/// CompileError's .command and .log (kjit.take_compile_error).
std::pair<std::string, std::string>& last_compile_error();

/// Runs f, turning kjit's exceptions into FFI errors of the matching kind.
template <typename F>
auto at_ffi_boundary(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const kjit::Error& e) {  // ValueError, TypeError, ... raised for a caller's mistake
    throw tvm::ffi::Error(e.kind(), e.what(), "");
  } catch (const SpecError& e) {
    throw tvm::ffi::Error("SpecError", e.what(), "");
  } catch (const CompileError& e) {
    last_compile_error() = {e.command(), e.log()};
    throw tvm::ffi::Error("CompileError", e.what(), "");
  } catch (const ToolchainError& e) {
    throw tvm::ffi::Error("ToolchainError", e.what(), "");
  } catch (const CacheError& e) {
    throw tvm::ffi::Error("CacheError", e.what(), "");
  } catch (const InternalError& e) {
    throw tvm::ffi::Error("InternalError", e.what(), "");
  }
}

}  // namespace kjit

#endif  // KJIT_SRC_FFI_BOUNDARY_H_
