// kjit/errors.h — kjit's one error type, its kinds, and the names Python knows
// them by.
//
// Every error kjit throws, in the host library or in a kernel, is a kjit::Error
// with a kind. User mistakes and kjit's own bugs (InternalError) are different
// kinds and different types, so callers can tell them apart. Each concrete error
// also derives from the standard exception it is (SpecError is a
// std::invalid_argument), so `catch (const std::exception&)` sees every one.
//
// Standard library only: kernels get it through kjit/kernel.h.
#ifndef KJIT_ERRORS_H_
#define KJIT_ERRORS_H_

#include <new>
#include <stdexcept>
#include <string>
#include <utility>

namespace kjit {

/// What went wrong. Each kind reaches Python as the exception registered under
/// its name (error_kind_name).
enum class ErrorKind {
  // A caller's mistake, found by an argument check, the engine or a kernel: a builtin.
  kValueError,
  kTypeError,
  kIndexError,
  kAxisError,
  kRuntimeError,
  kNotImplementedError,
  kMemoryError,
  kOverflowError,
  kZeroDivisionError,
  // A load-time mistake: kjit's own exceptions (python/kjit/errors.py).
  kSpecError,
  kCompileError,
  kToolchainError,
  kCacheError,
  // A bug in kjit itself.
  kInternalError,
};

/// The one table from kinds to FFI error kinds, which tvm-ffi turns into the Python
/// exception registered under that name. The kjit.* global functions and the
/// generated stubs both use it.
constexpr const char* error_kind_name(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::kValueError:
      return "ValueError";
    case ErrorKind::kTypeError:
      return "TypeError";
    case ErrorKind::kIndexError:
      return "IndexError";
    case ErrorKind::kAxisError:
      return "AxisError";
    case ErrorKind::kRuntimeError:
      return "RuntimeError";
    case ErrorKind::kNotImplementedError:
      return "NotImplementedError";
    case ErrorKind::kMemoryError:
      return "MemoryError";
    case ErrorKind::kOverflowError:
      return "OverflowError";
    case ErrorKind::kZeroDivisionError:
      return "ZeroDivisionError";
    case ErrorKind::kSpecError:
      return "SpecError";
    case ErrorKind::kCompileError:
      return "CompileError";
    case ErrorKind::kToolchainError:
      return "ToolchainError";
    case ErrorKind::kCacheError:
      return "CacheError";
    case ErrorKind::kInternalError:
      return "InternalError";
  }
  return "InternalError";  // not a kind: a bug
}

/// Every kind, in declaration order (for tests and for Python's registrations).
inline constexpr ErrorKind kAllErrorKinds[] = {
    ErrorKind::kValueError,  ErrorKind::kTypeError,     ErrorKind::kIndexError,
    ErrorKind::kAxisError,   ErrorKind::kRuntimeError,  ErrorKind::kNotImplementedError,
    ErrorKind::kMemoryError, ErrorKind::kOverflowError, ErrorKind::kZeroDivisionError,
    ErrorKind::kSpecError,   ErrorKind::kCompileError,  ErrorKind::kToolchainError,
    ErrorKind::kCacheError,  ErrorKind::kInternalError,
};

/// The base of every kjit error: a kind and a message (`what()`). Not itself a
/// std::exception, so that each concrete error can be the standard one it is.
class Error {
 public:
  virtual ~Error() = default;
  /// The kind's name: the FFI error kind, and the Python exception it becomes.
  const char* kind() const noexcept { return error_kind_name(kind_); }
  ErrorKind error_kind() const noexcept { return kind_; }
  virtual const char* what() const noexcept = 0;

 protected:
  explicit Error(ErrorKind kind) noexcept : kind_(kind) {}
  Error(const Error&) = default;
  Error& operator=(const Error&) = default;

 private:
  ErrorKind kind_;
};

namespace detail {

/// An Error that is also the standard exception `Std` (whose what() it reports).
template <typename Std>
class StdError : public Std, public Error {
 public:
  StdError(ErrorKind kind, const std::string& message) : Std(message), Error(kind) {}
  const char* what() const noexcept override { return Std::what(); }
};

}  // namespace detail

// The arguments are type names, which take no parentheses.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define KJIT_DEFINE_ERROR(Name, Std)                                                                  \
  class Name : public detail::StdError<Std> {                                                         \
   public:                                                                                            \
    explicit Name(const std::string& message) : detail::StdError<Std>(ErrorKind::k##Name, message) {} \
                                                                                                      \
   protected:                                                                                         \
    Name(ErrorKind kind, const std::string& message) : detail::StdError<Std>(kind, message) {}        \
  };
// NOLINTEND(bugprone-macro-parentheses)

// What kernels, argument checks and the elementwise engine throw for a caller's
// mistake; Python gets the builtin of the same name.
KJIT_DEFINE_ERROR(ValueError, std::runtime_error)
KJIT_DEFINE_ERROR(TypeError, std::runtime_error)
KJIT_DEFINE_ERROR(IndexError, std::runtime_error)
KJIT_DEFINE_ERROR(RuntimeError, std::runtime_error)
KJIT_DEFINE_ERROR(NotImplementedError, std::runtime_error)
/// A value outside its type's range (NumPy 2's Python int rule). Python: OverflowError.
KJIT_DEFINE_ERROR(OverflowError, std::overflow_error)
/// An integer division trap in a computation string's kernel. Python: ZeroDivisionError.
KJIT_DEFINE_ERROR(ZeroDivisionError, std::domain_error)

/// A mistake in a signature, spec or builder call. Python: kjit.SpecError (ValueError).
KJIT_DEFINE_ERROR(SpecError, std::invalid_argument)
/// The compiler could not be found or run. Python: kjit.ToolchainError (RuntimeError).
KJIT_DEFINE_ERROR(ToolchainError, std::runtime_error)
/// The cache or file system failed (permissions, disk full). Python: kjit.CacheError (RuntimeError).
KJIT_DEFINE_ERROR(CacheError, std::runtime_error)
/// A bug in kjit itself: an invariant did not hold. Python: kjit.InternalError. Please report it.
KJIT_DEFINE_ERROR(InternalError, std::logic_error)

#undef KJIT_DEFINE_ERROR

/// An axis outside an array's dims: a ValueError of its own kind, which Python
/// raises as numpy.exceptions.AxisError (a ValueError and an IndexError, so
/// NumPy's and torch's callers both catch it).
class AxisError : public ValueError {
 public:
  explicit AxisError(const std::string& message) : ValueError(ErrorKind::kAxisError, message) {}
};

/// The compiler rejected a module. Python: kjit.CompileError (RuntimeError), whose
/// `.command` and `.log` travel with the FFI error (see src/ffi/boundary.h).
class CompileError : public detail::StdError<std::runtime_error> {
 public:
  CompileError(const std::string& message, std::string command, std::string log)
      : StdError(ErrorKind::kCompileError, message), command_(std::move(command)), log_(std::move(log)) {}
  const std::string& command() const { return command_; }
  const std::string& log() const { return log_; }

 private:
  std::string command_;
  std::string log_;
};

/// The kind an exception escaping a kernel reaches Python as: a kjit::Error's own;
/// for a standard exception the nearest builtin (std::invalid_argument and
/// std::domain_error: ValueError, std::out_of_range: IndexError, std::bad_alloc:
/// MemoryError, any other: RuntimeError).
inline ErrorKind kernel_error_kind(const std::exception& e) noexcept {
  if (const auto* error = dynamic_cast<const Error*>(&e)) return error->error_kind();
  if (dynamic_cast<const std::invalid_argument*>(&e) != nullptr) return ErrorKind::kValueError;
  if (dynamic_cast<const std::domain_error*>(&e) != nullptr) return ErrorKind::kValueError;
  if (dynamic_cast<const std::out_of_range*>(&e) != nullptr) return ErrorKind::kIndexError;
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr) return ErrorKind::kMemoryError;
  return ErrorKind::kRuntimeError;
}

/// Throws InternalError naming the broken invariant unless `condition` holds.
inline void internal_check(bool condition, const char* what) {
  if (!condition) throw InternalError(std::string("kjit internal error: ") + what);
}

}  // namespace kjit

#endif  // KJIT_ERRORS_H_
