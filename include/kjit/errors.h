// kjit/errors.h — the errors kjit's host library raises.
//
// User mistakes (a bad spec, a failed compile, a missing compiler) and kjit's own
// bugs (InternalError) are separate types, so callers can tell them apart.
#ifndef KJIT_ERRORS_H_
#define KJIT_ERRORS_H_

#include <stdexcept>
#include <string>

namespace kjit {

/// A mistake in a signature, spec or builder call. Python: kjit.SpecError (ValueError).
class SpecError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// The compiler could not be found or run. Python: kjit.ToolchainError (RuntimeError).
class ToolchainError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The compiler rejected a module. Python: kjit.CompileError (RuntimeError),
/// with `.command` and `.log`.
class CompileError : public std::runtime_error {
 public:
  CompileError(const std::string& message, std::string command, std::string log)
      : std::runtime_error(message), command_(std::move(command)), log_(std::move(log)) {}
  const std::string& command() const { return command_; }
  const std::string& log() const { return log_; }

 private:
  std::string command_;
  std::string log_;
};

/// The cache or file system failed (permissions, disk full). Python: RuntimeError.
class CacheError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A bug in kjit itself: an invariant did not hold. Please report it.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

/// Throws InternalError naming the broken invariant unless `condition` holds.
inline void internal_check(bool condition, const char* what) {
  if (!condition) throw InternalError(std::string("kjit internal error: ") + what);
}

}  // namespace kjit

#endif  // KJIT_ERRORS_H_
