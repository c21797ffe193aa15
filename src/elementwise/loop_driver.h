// Drives a compiled elementwise CPU kernel over a planned loop nest, on the thread
// pool: rows of the inner dim, or the tiled layout for tiny inner dims.
#ifndef KJIT_SRC_ELEMENTWISE_LOOP_DRIVER_H_
#define KJIT_SRC_ELEMENTWISE_LOOP_DRIVER_H_

#include <cstdint>
#include <vector>

#include "elementwise/plan.h"

namespace kjit {

/// `void kjit_ew_kernel(char** data, const int64_t* strides, int64_t n, const void* extra)`.
using KernelFn = void (*)(char**, const int64_t*, int64_t, const void*);

namespace ew {

constexpr int64_t kGrainSize = 32768;  // PyTorch's: below it a loop runs serially

/// Runs the kernel over the loop nest with `data` (one pointer per operand).
void execute(KernelFn kernel, const Loop& loop, char* const* data, const void* extra);

/// The tiled layout of tiles_small_inner_dim(); `sizes` are element bytes per operand.
void execute_tiled(KernelFn kernel, const Loop& loop, const std::vector<int>& sizes, char* const* data,
                   const void* extra);

}  // namespace ew
}  // namespace kjit

#endif  // KJIT_SRC_ELEMENTWISE_LOOP_DRIVER_H_
