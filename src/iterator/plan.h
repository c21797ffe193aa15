// TensorIterator's plan for one call: broadcast shape, overlap checks, then the
// loop layout (fastest dim first, coalesced, small inner dims moved out).
#ifndef KJIT_SRC_ITERATOR_PLAN_H_
#define KJIT_SRC_ITERATOR_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kjit/detail/loop_layout.h"

namespace kjit {
namespace ew {

/// One operand as the loop sees it: data, shape and byte strides right-aligned to
/// the broadcast shape (0 for broadcast dims).
struct LoopOperand {
  char* data = nullptr;
  std::vector<int64_t> strides;  ///< bytes, one per broadcast dim (slowest first)
};

/// A loop nest over `shape` (fastest dim first after planning).
struct Loop {
  std::vector<int64_t> shape;
  std::vector<std::vector<int64_t>> strides;  ///< [operand][dim], bytes
  std::vector<char*> data;                    ///< [operand]
  int64_t numel() const;
};

/// "(2, 3)", "(3,)": shapes in messages, as Python writes tuples.
std::string shape_text(const std::vector<int64_t>& shape);

/// Right-aligned broadcast of the shapes; throws kjit::ValueError naming the
/// inputs and the dim (PyTorch's wording). shapes[k] belongs to input #inputs[k].
std::vector<int64_t> broadcast_shapes(const std::string& fn, const std::vector<std::vector<int64_t>>& shapes,
                                      const std::vector<size_t>& inputs);

/// Byte strides of a tensor seen with the broadcast shape (0 where broadcast).
std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                                       int64_t element_size, size_t ndim);

/// Dims slowest first (`shape`, `strides[op][d]` in bytes) as the shared layout
/// steps take them (kjit/detail/loop_layout.h): fastest first; the first
/// `n_outputs` operands are outputs.
detail::LoopLayout layout_of(const std::vector<int64_t>& shape, const std::vector<std::vector<int64_t>>& strides,
                             size_t n_outputs);

/// Builds the loop: dims reordered fastest first (outputs decide first, PyTorch's
/// comparator) and coalesced.
Loop make_loop(const std::vector<int64_t>& shape, std::vector<LoopOperand> operands, size_t first_input);

/// PyTorch issue 57611: a tiny inner dim makes every row a few elements long. When
/// every operand is either dense over the two inner dims or repeats along the
/// second (`sizes`: element bytes per operand), the engine runs the dense span
/// through the contiguous kernel with the repeating operands tiled; true if so.
bool tiles_small_inner_dim(const Loop& loop, const std::vector<int>& sizes, size_t n_out);

/// Otherwise: put the next dim inside instead (its loop is strided but long).
void move_small_inner_dim_out(Loop* loop);

/// Dims from slowest to fastest for an output that follows the inputs' layout.
std::vector<int> output_order(const std::vector<int64_t>& shape, const std::vector<LoopOperand>& inputs);

/// The bytes an operand spans: [lo, hi).
struct Extent {
  uintptr_t lo = 0, hi = 0;
};
Extent extent_of(const char* data, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                 int64_t element_size);

}  // namespace ew
}  // namespace kjit

#endif  // KJIT_SRC_ITERATOR_PLAN_H_
