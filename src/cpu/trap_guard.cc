// The SIGFPE and SIGILL guard of trap_guard.h. A guarded kernel call arms a per-thread jump
// buffer; kjit's handler jumps back to it when the signal arrives on an armed
// thread. SA_NODEFER keeps SIGFPE unblocked after the jump, so the buffer needs
// no saved signal mask (sigsetjmp(_, 0): no system call per kernel call).
#include "cpu/trap_guard.h"

#include <csetjmp>
#include <csignal>
#include <mutex>

#include "cpu/codegen_cpu.h"
#include "kjit/errors.h"

namespace kjit {
namespace cpu {
namespace {

thread_local sigjmp_buf* t_armed = nullptr;
// What was installed before kjit's handler: [0] SIGFPE's, [1] SIGILL's.
struct sigaction g_previous[2]{};

void on_trap(int sig, siginfo_t* info, void* context) {
  if (sigjmp_buf* armed = t_armed) {
    t_armed = nullptr;
    siglongjmp(*armed, sig);
  }
  // Not a guarded kernel's: what was there before kjit's handler.
  const struct sigaction& previous = g_previous[sig == SIGILL ? 1 : 0];
  if ((previous.sa_flags & SA_SIGINFO) != 0 && previous.sa_sigaction != nullptr) {
    previous.sa_sigaction(sig, info, context);
    return;
  }
  if ((previous.sa_flags & SA_SIGINFO) == 0 && previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
    previous.sa_handler(sig);
    return;
  }
  std::signal(sig, SIG_DFL);
  // A fault returns to its instruction, which faults again under the default
  // action; a signal someone sent (kill, raise) is sent again.
  if (info == nullptr || info->si_code <= 0) raise(sig);
}

void install_handlers() {
  struct sigaction action {};
  action.sa_sigaction = on_trap;
  action.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  sigaction(SIGFPE, &action, &g_previous[0]);
  sigaction(SIGILL, &action, &g_previous[1]);
}

bool holds_integers(EwType t) { return is_integer(t) || t == EwType::kBool; }

}  // namespace

void call_trap_guarded_erased(void (*body)(const void*), const void* context) {
  static std::once_flag installed;
  std::call_once(installed, install_handlers);
  sigjmp_buf here;
  sigjmp_buf* const outer = t_armed;
  const int sig = sigsetjmp(here, 0);
  if (sig == SIGILL) {
    t_armed = outer;
    throw RuntimeError(
        "the kernel executed a trap instruction (SIGILL): the compiler found undefined behaviour on this path of "
        "the code (such as a division by a literal zero) and made it a trap; the outputs hold what the loop wrote "
        "before it");
  }
  if (sig != 0) {
    t_armed = outer;
    throw ZeroDivisionError(
        "integer division by zero, or of the most negative integer by -1, in the computation (SIGFPE); the "
        "outputs hold what the loop wrote before it");
  }
  t_armed = &here;
  try {
    body(context);
  } catch (...) {  // the code's own exception: this frame's buffer must not stay armed
    t_armed = outer;
    throw;
  }
  t_armed = outer;
}

void rethrow_user_error(const std::string& fn) {
  try {
    throw;
  } catch (const InternalError&) {
    throw;  // kjit's own bug, not the code's
  } catch (const std::exception& e) {
    const std::string what = e.what();
    const std::string message = what.rfind(fn + ": ", 0) == 0 ? what : fn + ": " + what;  // named once
    switch (kernel_error_kind(e)) {
      case ErrorKind::kValueError:
        throw ValueError(message);
      case ErrorKind::kTypeError:
        throw TypeError(message);
      case ErrorKind::kIndexError:
        throw IndexError(message);
      case ErrorKind::kOverflowError:
        throw OverflowError(message);
      case ErrorKind::kZeroDivisionError:
        throw ZeroDivisionError(message);
      case ErrorKind::kAxisError:
        throw AxisError(message);
      case ErrorKind::kNotImplementedError:
        throw NotImplementedError(message);
      case ErrorKind::kRuntimeError:
        throw RuntimeError(message);
      default:
        throw detail::StdError<std::runtime_error>(kernel_error_kind(e), message);
    }
  } catch (...) {
    throw RuntimeError(fn + ": the code threw an exception that is not a std::exception");
  }
}

bool needs_trap_guard(const EwKernelTypes& types) { return any_kernel_type(types, holds_integers); }

}  // namespace cpu
}  // namespace kjit
