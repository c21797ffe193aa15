// The SIGFPE guard of trap_guard.h. A guarded kernel call arms a per-thread jump
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
struct sigaction g_previous {};

void on_sigfpe(int sig, siginfo_t* info, void* context) {
  if (sigjmp_buf* armed = t_armed) {
    t_armed = nullptr;
    siglongjmp(*armed, 1);
  }
  // Not a guarded kernel's: what was there before kjit's handler.
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(sig, info, context);
    return;
  }
  if ((g_previous.sa_flags & SA_SIGINFO) == 0 && g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
    return;
  }
  std::signal(sig, SIG_DFL);
  // A fault returns to its instruction, which faults again under the default
  // action; a signal someone sent (kill, raise) is sent again.
  if (info == nullptr || info->si_code <= 0) raise(sig);
}

void install_handler() {
  struct sigaction action {};
  action.sa_sigaction = on_sigfpe;
  action.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  sigaction(SIGFPE, &action, &g_previous);
}

bool holds_integers(EwType t) { return is_integer(t) || t == EwType::kBool; }

}  // namespace

void call_trap_guarded(void (*kernel)(char**, const int64_t*, int64_t, const void*), char** data,
                       const int64_t* strides, int64_t n, const void* extra) {
  static std::once_flag installed;
  std::call_once(installed, install_handler);
  sigjmp_buf here;
  sigjmp_buf* const outer = t_armed;
  if (sigsetjmp(here, 0) != 0) {
    t_armed = outer;
    throw ZeroDivisionError(
        "integer division by zero, or of the most negative integer by -1, in the computation (SIGFPE); the "
        "outputs hold what the loop wrote before it");
  }
  t_armed = &here;
  kernel(data, strides, n, extra);
  t_armed = outer;
}

bool needs_trap_guard(const EwKernelTypes& types) { return any_kernel_type(types, holds_integers); }

}  // namespace cpu
}  // namespace kjit
