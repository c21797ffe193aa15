// TensorIterator's plan for one call: broadcast shape, overlap checks, then the
// loop layout (fastest dim first, coalesced, small inner dims moved out).
#ifndef KJIT_SRC_ITERATOR_PLAN_H_
#define KJIT_SRC_ITERATOR_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kjit/detail/loop_layout.h"

namespace kjit {
namespace iterator {

/// "(2, 3)", "(3,)": shapes in messages, as Python writes tuples.
std::string shape_text(const std::vector<int64_t>& shape);

/// Right-aligned broadcast of the shapes; throws kjit::ValueError naming the
/// inputs and the dim (PyTorch's wording). shapes[k] belongs to input #inputs[k].
std::vector<int64_t> broadcast_shapes(const std::string& fn, const std::vector<std::vector<int64_t>>& shapes,
                                      const std::vector<size_t>& inputs);

/// Byte strides of a tensor seen with the broadcast shape of `ndim` dims, fastest
/// first (an OperandInfo's strides before the layout steps): 0 where broadcast.
DimVector loop_strides(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides, int64_t element_size,
                       size_t ndim);

/// The loop nest over the broadcast `shape` (slowest first) before the layout
/// steps: its dims fastest first; the first `n_outputs` operands are outputs.
detail::LoopLayout loop_nest(const std::vector<int64_t>& shape, detail::Operands operands, size_t n_outputs);

/// The loop nest laid out (kjit/detail/loop_layout.h: reordered fastest first,
/// outputs deciding first, and coalesced); a 0-d call is one element.
detail::LoopLayout make_loop(const std::vector<int64_t>& shape, detail::Operands operands, size_t n_outputs);

/// PyTorch issue 57611: a tiny inner dim makes every row a few elements long. When
/// every operand is either dense over the two inner dims or repeats along the
/// second, the engine runs the dense span through the contiguous kernel with the
/// repeating operands tiled; true if so.
bool tiles_small_inner_dim(const detail::LoopLayout& loop);

/// Otherwise: put the next dim inside instead (its loop is strided but long).
void move_small_inner_dim_out(detail::LoopLayout* loop);

/// Dims from slowest to fastest for an output that follows the inputs' layout
/// (`inputs`: their strides against the broadcast `shape`).
std::vector<int> output_order(const std::vector<int64_t>& shape, const detail::Operands& inputs);

/// The bytes an operand spans: [lo, hi).
struct Extent {
  uintptr_t lo = 0, hi = 0;
};
/// `shape` and byte `strides` of `ndim` dims, in any one order.
Extent extent_of(const char* data, const int64_t* shape, const int64_t* strides, size_t ndim, int64_t element_size);

}  // namespace iterator
}  // namespace kjit

#endif  // KJIT_SRC_ITERATOR_PLAN_H_
