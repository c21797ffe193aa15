// A call's loop: the broadcast, the layout steps every planner shares
// (kjit/detail/loop_layout.h) and the small-inner-dim variants.
#include "iterator/plan.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "kjit/detail/loop_layout.h"
#include "kjit/kernel.h"

namespace kjit {
namespace iterator {
std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

std::vector<int64_t> broadcast_shapes(const std::string& fn, const std::vector<std::vector<int64_t>>& shapes,
                                      const std::vector<size_t>& inputs) {
  auto name = [&](size_t k) { return "input #" + std::to_string(inputs[k]); };
  size_t ndim = 0;
  for (const auto& s : shapes) ndim = std::max(ndim, s.size());
  std::vector<int64_t> out(ndim, 1);
  std::vector<int> owner(ndim, -1);
  for (size_t k = 0; k < shapes.size(); ++k) {
    const auto& s = shapes[k];
    for (size_t i = 0; i < s.size(); ++i) {
      size_t d = ndim - s.size() + i;
      if (s[i] == out[d] || s[i] == 1) continue;
      if (out[d] == 1) {
        out[d] = s[i];
        owner[d] = static_cast<int>(k);
        continue;
      }
      throw ValueError(fn + ": the size of " + name(owner[d]) + " (" + std::to_string(out[d]) +
                       ") must match the size of " + name(k) + " (" + std::to_string(s[i]) +
                       ") at non-singleton dimension " + std::to_string(d) + " (shapes " +
                       shape_text(shapes[owner[d]]) + " and " + shape_text(s) + " do not broadcast)");
    }
  }
  return out;
}

DimVector loop_strides(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides, int64_t element_size,
                       size_t ndim) {
  DimVector out(ndim, 0);
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] != 1) out[shape.size() - 1 - i] = strides[i] * element_size;
  }
  return out;
}

detail::LoopLayout loop_nest(const std::vector<int64_t>& shape, detail::Operands operands, size_t n_outputs) {
  detail::LoopLayout l;
  for (size_t d = shape.size(); d-- > 0;) l.shape.push_back(shape[d]);
  l.operands = std::move(operands);
  l.n_outputs = static_cast<int>(n_outputs);
  return l;
}

detail::LoopLayout make_loop(const std::vector<int64_t>& shape, detail::Operands operands, size_t n_outputs) {
  detail::LoopLayout loop = loop_nest(shape, std::move(operands), n_outputs);
  if (loop.shape.empty()) {  // 0-d: one element
    loop.shape.push_back(1);
    for (OperandInfo& op : loop.operands) op.strides = DimVector(1, 0);
    return loop;
  }
  detail::lay_out(&loop);
  return loop;
}

void move_small_inner_dim_out(detail::LoopLayout* loop) {
  if (loop->shape.size() >= 2 && loop->shape[0] < 16 && loop->shape[1] > loop->shape[0]) {
    std::swap(loop->shape[0], loop->shape[1]);
    for (OperandInfo& op : loop->operands) std::swap(op.strides[0], op.strides[1]);
  }
}

bool tiles_small_inner_dim(const detail::LoopLayout& loop) {
  if (loop.shape.size() < 2 || loop.shape[0] < 2 || loop.shape[0] > 16 || loop.shape[1] < 2) return false;
  const int64_t k = loop.shape[0];
  bool repeats = false;
  for (const OperandInfo& op : loop.operands) {
    const int64_t s0 = op.strides[0], s1 = op.strides[1], size = op.element_size;
    const bool dense = s0 == size && s1 == k * size;
    const bool repeat = s1 == 0 && (s0 == size || s0 == 0);
    if (!dense && !(repeat && !op.is_output)) return false;
    repeats = repeats || !dense;
  }
  return repeats;
}

std::vector<int> output_order(const std::vector<int64_t>& shape, const detail::Operands& inputs) {
  const SmallVector<int, 6> fast = detail::fastest_first_order(loop_nest(shape, inputs, 0));
  // The layout's dim k is the loop's dim n-1-k; the order wanted is slowest first.
  const int n = static_cast<int>(shape.size());
  std::vector<int> order;
  for (size_t k = fast.size(); k-- > 0;) order.push_back(n - 1 - fast[k]);
  return order;
}

Extent extent_of(const char* data, const int64_t* shape, const int64_t* strides, size_t ndim, int64_t element_size) {
  intptr_t lo = 0, hi = 0;
  for (size_t i = 0; i < ndim; ++i) {
    if (shape[i] == 0) return Extent{};
    intptr_t span = static_cast<intptr_t>((shape[i] - 1) * strides[i]);
    if (span < 0)
      lo += span;
    else
      hi += span;
  }
  uintptr_t base = reinterpret_cast<uintptr_t>(data);
  return Extent{base + lo, base + hi + static_cast<uintptr_t>(element_size)};
}

}  // namespace iterator
}  // namespace kjit
