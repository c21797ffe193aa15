// The C++ source of one reduction CPU kernel: the user's code, an Ops type that
// loads, maps, combines and stores in the kernel's types, and the loops of
// kjit/detail/reduction_loop.h.
#ifndef KJIT_SRC_CPU_CODEGEN_REDUCTION_H_
#define KJIT_SRC_CPU_CODEGEN_REDUCTION_H_

#include <string>

#include "reduction/reduction_types.h"

namespace kjit {

/// The exported `void kjit_red_kernel(char**, const int64_t* range, int64_t mode,
/// const void* problem)` (kjit/detail/reduction_loop.h says what each mode does)
/// and `int64_t kjit_red_acc_bytes()`, the size of its accumulator (partials' element).
/// `code` holds every part's definitions.
std::string emit_reduction_cpu(const std::string& code, const RedEntries& entries, const RedKernelTypes& types);

}  // namespace kjit

#endif  // KJIT_SRC_CPU_CODEGEN_REDUCTION_H_
