// TensorIterator's layout steps (reorder, coalesce) on byte strides.
#include "elementwise/plan.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>

#include "kjit/kernel.h"

namespace kjit {
namespace ew {
std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

namespace {

/// PyTorch's reorder comparator for dims a (faster candidate) and b: -1 if a
/// should stay faster than b, 1 if they swap, 0 if no operand decides.
int compare_dims(const Loop& loop, size_t first_input, int a, int b) {
  for (size_t op = 0; op < loop.strides.size(); ++op) {
    // By magnitude: a reversed view (negative strides) keeps its memory order.
    int64_t sa = std::abs(loop.strides[op][a]), sb = std::abs(loop.strides[op][b]);
    if (sa == 0 || sb == 0) continue;  // broadcast dims say nothing about layout
    if (sa < sb) return -1;
    if (sa > sb) return 1;
    // Equal strides: the larger extent goes outside (only outputs' ties count).
    if (op < first_input && loop.shape[a] > loop.shape[b]) return 1;
  }
  return 0;
}

void reorder_fastest_first(Loop* loop, size_t first_input) {
  size_t n = loop->shape.size();
  // Start from C order reversed (fastest first), then PyTorch's insertion sort.
  std::vector<int> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  std::reverse(perm.begin(), perm.end());
  Loop original = *loop;
  for (size_t i = 1; i < n; ++i) {
    int dim1 = static_cast<int>(i);
    for (int dim0 = static_cast<int>(i) - 1; dim0 >= 0; --dim0) {
      int cmp = compare_dims(original, first_input, perm[dim0], perm[dim1]);
      if (cmp > 0) {
        std::swap(perm[dim0], perm[dim1]);
        dim1 = dim0;
      } else if (cmp < 0) {
        break;
      }
    }
  }
  for (size_t d = 0; d < n; ++d) {
    loop->shape[d] = original.shape[perm[d]];
    for (size_t op = 0; op < loop->strides.size(); ++op) loop->strides[op][d] = original.strides[op][perm[d]];
  }
}

void coalesce(Loop* loop) {
  size_t n = loop->shape.size();
  if (n <= 1) return;
  size_t prev = 0;
  for (size_t d = 1; d < n; ++d) {
    bool can = loop->shape[prev] == 1 || loop->shape[d] == 1;
    if (!can) {
      can = true;
      for (const auto& s : loop->strides) can = can && s[prev] * loop->shape[prev] == s[d];
    }
    if (can) {
      for (auto& s : loop->strides) {
        if (loop->shape[prev] == 1) s[prev] = s[d];
      }
      loop->shape[prev] *= loop->shape[d];
    } else {
      ++prev;
      loop->shape[prev] = loop->shape[d];
      for (auto& s : loop->strides) s[prev] = s[d];
    }
  }
  loop->shape.resize(prev + 1);
  for (auto& s : loop->strides) s.resize(prev + 1);
}

}  // namespace

int64_t Loop::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
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

std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                                       int64_t element_size, size_t ndim) {
  std::vector<int64_t> out(ndim, 0);
  for (size_t i = 0; i < shape.size(); ++i) {
    size_t d = ndim - shape.size() + i;
    out[d] = shape[i] == 1 ? 0 : strides[i] * element_size;
  }
  return out;
}

Loop make_loop(const std::vector<int64_t>& shape, std::vector<LoopOperand> operands, size_t first_input) {
  Loop loop;
  loop.shape = shape;
  for (LoopOperand& op : operands) {
    loop.data.push_back(op.data);
    loop.strides.push_back(std::move(op.strides));
  }
  if (loop.shape.empty()) {  // 0-d: one element
    loop.shape = {1};
    for (auto& s : loop.strides) s = {0};
    return loop;
  }
  reorder_fastest_first(&loop, first_input);
  coalesce(&loop);
  return loop;
}

void move_small_inner_dim_out(Loop* loop) {
  if (loop->shape.size() >= 2 && loop->shape[0] < 16 && loop->shape[1] > loop->shape[0]) {
    std::swap(loop->shape[0], loop->shape[1]);
    for (auto& s : loop->strides) std::swap(s[0], s[1]);
  }
}

bool tiles_small_inner_dim(const Loop& loop, const std::vector<int>& sizes, size_t n_out) {
  if (loop.shape.size() < 2 || loop.shape[0] < 2 || loop.shape[0] > 16 || loop.shape[1] < 2) return false;
  const int64_t k = loop.shape[0];
  bool repeats = false;
  for (size_t op = 0; op < loop.strides.size(); ++op) {
    int64_t s0 = loop.strides[op][0], s1 = loop.strides[op][1];
    bool dense = s0 == sizes[op] && s1 == k * sizes[op];
    bool repeat = s1 == 0 && (s0 == sizes[op] || s0 == 0);
    if (!dense && !(repeat && op >= n_out)) return false;
    repeats = repeats || !dense;
  }
  return repeats;
}

std::vector<int> output_order(const std::vector<int64_t>& shape, const std::vector<LoopOperand>& inputs) {
  size_t n = shape.size();
  Loop probe;
  probe.shape = shape;
  for (const LoopOperand& op : inputs) probe.strides.push_back(op.strides);
  std::vector<int> fast(n);
  std::iota(fast.begin(), fast.end(), 0);
  std::reverse(fast.begin(), fast.end());
  for (size_t i = 1; i < n; ++i) {
    int dim1 = static_cast<int>(i);
    for (int dim0 = static_cast<int>(i) - 1; dim0 >= 0; --dim0) {
      int cmp = compare_dims(probe, 0, fast[dim0], fast[dim1]);
      if (cmp > 0) {
        std::swap(fast[dim0], fast[dim1]);
        dim1 = dim0;
      } else if (cmp < 0) {
        break;
      }
    }
  }
  std::reverse(fast.begin(), fast.end());  // slowest first
  return fast;
}

Extent extent_of(const char* data, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                 int64_t element_size) {
  intptr_t lo = 0, hi = 0;
  for (size_t i = 0; i < shape.size(); ++i) {
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

}  // namespace ew
}  // namespace kjit
