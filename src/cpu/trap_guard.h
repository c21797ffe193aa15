// Integer traps in computation strings: `a / b` and `a % b` of integers with b == 0,
// or of the most negative integer by -1, raise SIGFPE on x86, which would end the
// process. Kernels whose types hold integers run under a guard that turns the trap
// into a kjit::ZeroDivisionError for the caller.
#ifndef KJIT_SRC_CPU_TRAP_GUARD_H_
#define KJIT_SRC_CPU_TRAP_GUARD_H_

#include <cstdint>
#include <string>

namespace kjit {

struct EwKernelTypes;

namespace cpu {

/// Runs `body(context)`; a SIGFPE raised inside it on this thread leaves the kernel
/// at once (the outputs hold what it wrote so far) and throws a ZeroDivisionError;
/// a SIGILL (a trap instruction the compiler put where it saw undefined behaviour)
/// a RuntimeError. kjit's handlers are installed on first use and hand a signal
/// raised outside a guarded kernel to the handler that was there before (Python's
/// faulthandler, the default action). A handler installed after kjit's replaces
/// it, and then a trap ends the process as it would without kjit.
void call_trap_guarded_erased(void (*body)(const void*), const void* context);

/// call_trap_guarded_erased for a callable: `run()` under the guard.
template <typename F>
void call_trap_guarded(const F& run) {
  call_trap_guarded_erased([](const void* f) { (*static_cast<const F*>(f))(); }, &run);
}

/// Rethrows the exception being handled, which a computation string's code threw
/// (on this thread, or on a pool worker that handed it back), as the kjit::Error of
/// its kind (kernel_error_kind: std::invalid_argument -> ValueError, std::bad_alloc
/// -> MemoryError, ...) with `fn: ` before its message; an exception that is not a
/// std::exception (`throw 42;`) becomes a RuntimeError. Only inside a catch block.
[[noreturn]] void rethrow_user_error(const std::string& fn);

/// Whether a kernel of these types needs the guard: some type holds integers
/// (or bools, which the entry's arithmetic may promote to int).
bool needs_trap_guard(const EwKernelTypes& types);

}  // namespace cpu
}  // namespace kjit

#endif  // KJIT_SRC_CPU_TRAP_GUARD_H_
