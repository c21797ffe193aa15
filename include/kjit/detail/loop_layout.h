// kjit/detail/loop_layout.h — TensorIterator's layout steps, the one copy that
// kjit::TensorIterator, kjit.elementwise's planner and kjit.reduction's planner
// run: the dims of a loop nest reordered fastest first by the operands' strides,
// then adjacent dims coalesced. The standard library and kjit/small_vector.h only.
#ifndef KJIT_DETAIL_LOOP_LAYOUT_H_
#define KJIT_DETAIL_LOOP_LAYOUT_H_

#include <cstdint>
#include <utility>

#include "kjit/small_vector.h"

namespace kjit {

/// Per-dim values of a loop nest, inline up to 6 dims.
using DimVector = SmallVector<int64_t, 6>;

namespace detail {

/// A loop nest: its dims, fastest first, and each operand's byte strides along
/// them (0 where the operand is broadcast, and where a reduction's output reduces).
/// Outputs come first.
struct LoopLayout {
  DimVector shape;
  SmallVector<DimVector, 4> strides;  ///< [operand][dim]
  int n_outputs = 0;
  bool reduction = false;  ///< the dims an output reduces (stride 0) go innermost
};

/// PyTorch's comparison of dims d0 and d1 (d0 the faster now), asking each operand
/// in turn, outputs first: 1 when d0 should move outside d1, -1 when it stays
/// inside, 0 when no operand cares. Strides compare by magnitude: a reversed view
/// (a negative stride) keeps its memory order.
inline int compare_dims(const LoopLayout& l, int d0, int d1) {
  for (size_t op = 0; op < l.strides.size(); ++op) {
    const int64_t s0 = l.strides[op][d0] < 0 ? -l.strides[op][d0] : l.strides[op][d0];
    const int64_t s1 = l.strides[op][d1] < 0 ? -l.strides[op][d1] : l.strides[op][d1];
    if (l.reduction && static_cast<int>(op) < l.n_outputs && (s0 == 0) != (s1 == 0)) return s1 == 0 ? 1 : -1;
    if (s0 == 0 || s1 == 0) continue;  // a broadcast dim says nothing about layout
    if (s0 != s1) return s0 < s1 ? -1 : 1;
    if (l.shape[d0] > l.shape[d1]) return 1;  // equal strides: the smaller dim inside
  }
  return 0;
}

/// The order that puts the dims fastest first: order[k] is the dim that goes k-th
/// (PyTorch's insertion sort, stable where no operand cares).
inline SmallVector<int, 6> fastest_first_order(const LoopLayout& l) {
  const int nd = static_cast<int>(l.shape.size());
  SmallVector<int, 6> order(nd);
  for (int d = 0; d < nd; ++d) order[d] = d;
  for (int i = 1; i < nd; ++i) {
    int d1 = i;
    for (int d0 = i - 1; d0 >= 0; --d0) {
      const int c = compare_dims(l, order[d0], order[d1]);
      if (c > 0) {
        std::swap(order[d0], order[d1]);
        d1 = d0;
      } else if (c < 0) {
        break;
      }
    }
  }
  return order;
}

/// Reorders the dims of `l` fastest first.
inline void reorder_fastest_first(LoopLayout* l) {
  const SmallVector<int, 6> order = fastest_first_order(*l);
  auto permute = [&](DimVector& v) {
    const DimVector old = v;
    for (size_t d = 0; d < order.size(); ++d) v[d] = old[order[d]];
  };
  permute(l->shape);
  for (DimVector& s : l->strides) permute(s);
}

/// Merges each dim into the one inside it where every operand steps through both
/// as through one (a size-1 dim merges with anything and takes the other's strides).
inline void coalesce(LoopLayout* l) {
  const size_t nd = l->shape.size();
  if (nd <= 1) return;
  auto can_merge = [&](size_t inner, size_t outer) {
    if (l->shape[inner] == 1 || l->shape[outer] == 1) return true;
    for (const DimVector& s : l->strides) {
      if (s[inner] * l->shape[inner] != s[outer]) return false;
    }
    return true;
  };
  size_t prev = 0;
  for (size_t d = 1; d < nd; ++d) {
    if (can_merge(prev, d)) {
      if (l->shape[prev] == 1) {
        for (DimVector& s : l->strides) s[prev] = s[d];
      }
      l->shape[prev] *= l->shape[d];
    } else {
      ++prev;
      l->shape[prev] = l->shape[d];
      for (DimVector& s : l->strides) s[prev] = s[d];
    }
  }
  l->shape.resize(prev + 1);
  for (DimVector& s : l->strides) s.resize(prev + 1);
}

/// TensorIterator's layout: reorder, then coalesce.
inline void lay_out(LoopLayout* l) {
  reorder_fastest_first(l);
  coalesce(l);
}

}  // namespace detail
}  // namespace kjit

#endif  // KJIT_DETAIL_LOOP_LAYOUT_H_
