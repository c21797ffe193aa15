// Hints that keep the per-call hot paths small: rarely taken branches (errors,
// first calls, unusual layouts) live out of line, so a small call touches fewer
// instruction cache lines, which Python and the frameworks evict between calls.
#ifndef KJIT_SRC_SUPPORT_COMPILER_HINTS_H_
#define KJIT_SRC_SUPPORT_COMPILER_HINTS_H_

#if defined(__GNUC__) || defined(__clang__)
#define KJIT_COLD __attribute__((noinline, cold))
#define KJIT_NOINLINE __attribute__((noinline))
#define KJIT_INLINE inline __attribute__((always_inline))
#define KJIT_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define KJIT_UNLIKELY(x) (x)
#define KJIT_INLINE inline
#define KJIT_COLD
#define KJIT_NOINLINE
#endif

#endif  // KJIT_SRC_SUPPORT_COMPILER_HINTS_H_
