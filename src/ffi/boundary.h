// Where kjit's errors become FFI errors (Python exceptions) in the kjit.* global functions:
// the kind's name from kjit/errors.h's table, the same one the generated stubs use.
#ifndef KJIT_SRC_FFI_BOUNDARY_H_
#define KJIT_SRC_FFI_BOUNDARY_H_

#include <tvm/ffi/any.h>
#include <tvm/ffi/container/map.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/string.h>

#include <optional>

#include "kjit/errors.h"

namespace kjit {

/// The FFI error of a CompileError: its command and log ride along as the error's
/// extra context, a Map {"command", "log"} that kjit.CompileError reads.
inline tvm::ffi::Error to_ffi_error(const CompileError& e) {
  tvm::ffi::Map<tvm::ffi::String, tvm::ffi::Any> context{{"command", tvm::ffi::String(e.command())},
                                                         {"log", tvm::ffi::String(e.log())}};
  return tvm::ffi::Error(e.kind(), e.what(), "", std::nullopt, context);
}

/// Runs f, turning a kjit::Error into the FFI error of its kind, and a failed
/// allocation into MemoryError. Anything else is left to tvm-ffi, which reports it
/// as an InternalError.
template <typename F>
auto at_ffi_boundary(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const CompileError& e) {
    throw to_ffi_error(e);
  } catch (const Error& e) {
    throw tvm::ffi::Error(e.kind(), e.what(), "");
  } catch (const std::bad_alloc& e) {
    throw tvm::ffi::Error(error_kind_name(ErrorKind::kMemoryError), std::string("out of memory (") + e.what() + ")",
                          "");
  }
}

}  // namespace kjit

#endif  // KJIT_SRC_FFI_BOUNDARY_H_
