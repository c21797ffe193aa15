// The C++ source of one elementwise CPU kernel: the user's computation string and
// a loop with casts on load and store, specialised for contiguous operands and
// for one broadcast input.
#ifndef KJIT_SRC_CPU_CODEGEN_CPU_H_
#define KJIT_SRC_CPU_CODEGEN_CPU_H_

#include <optional>
#include <string>
#include <vector>

#include "iterator/kernel_types.h"
#include "kjit/elementwise.h"

namespace kjit {

namespace cpu {

/// C++ expression loading one element of `t` from byte pointer `p` as the
/// generated code's compute type `__C`; an input of another type than a half
/// result `half` is first rounded to it (cast to the common dtype, then computed
/// in float).
std::string load_expr(EwType t, const std::string& p, const std::optional<EwType>& half);

/// Statement storing value `v` as `t` at byte pointer `p`; into another type than
/// a half result `half`, only after rounding to it.
std::string store_stmt(EwType t, const std::string& p, std::string v, const std::optional<EwType>& half);

/// A float16 input's element in its float block `v` (a half block of the contiguous
/// loop), as compute type C.
std::string block_load_expr(const std::string& v, EwType t, const std::optional<EwType>& half);

/// Stores result `v` into a float16 output's float block element `slot`.
std::string block_store_stmt(const std::string& slot, const std::string& v, const std::optional<EwType>& half);

/// The generated `__ld<T>(p)` and `__st<T>(p, v)`: unaligned loads and stores.
std::string memory_access_text();

/// What every generated CPU kernel source starts with: the `title` comment, the C
/// headers (and <complex> when `complex`), kjit's headers (the float16 conversions
/// and `loop_header`, the loop's own), the user's code, then `#line 1 "<loop>"`.
/// What follows the user's code may use only kjit's own (kjit_...) and reserved
/// (__...) names: user macros would rewrite any other.
std::string kernel_source_head(const std::string& title, const std::string& code, bool complex, const char* loop,
                               const std::string& loop_header);

/// What a kernel's own namespace starts with: `__C` (the type the code computes
/// in) and memory_access_text().
std::string kernel_namespace_head(EwType compute);

}  // namespace cpu

/// The exported loop: `void kjit_ew_kernel(char** data, const int64_t* strides,
/// int64_t size0, int64_t size1, const void* extra)` (loop_driver.h's KernelFn):
/// size1 rows of size0 elements, operands outputs first, each one's inner byte
/// stride then its outer, extra scalars in 16-byte slots.
std::string emit_elementwise_cpu(const std::string& code, const std::string& entry, const EwKernelTypes& types);

}  // namespace kjit

#endif  // KJIT_SRC_CPU_CODEGEN_CPU_H_
