// kjit/detail/loop_layout.h — a loop nest over its operands, the one record of an
// operand (TensorIterator's OperandInfo), and TensorIterator's layout steps: the
// one copy that kjit::TensorIterator, kjit.elementwise's planner and
// kjit.reduction's planner run: the dims reordered fastest first by the
// operands' strides, then adjacent dims coalesced. DLPack, kjit/kernel.h,
// kjit/small_vector.h and the standard library only.
#ifndef KJIT_DETAIL_LOOP_LAYOUT_H_
#define KJIT_DETAIL_LOOP_LAYOUT_H_

#include <cstdint>
#include <utility>

#include "kjit/kernel.h"
#include "kjit/small_vector.h"

namespace kjit {

/// Per-dim values of a loop nest, inline up to 6 dims.
using DimVector = SmallVector<int64_t, 6>;

/// One operand of a loop nest (TensorIterator's OperandInfo): where it starts,
/// what it holds and its byte strides along the nest's dims. The engines' plans
/// hold it without data, which each call binds.
struct OperandInfo {
  TensorView view;           ///< the tensor (kjit::TensorIterator; empty in the engines' plans)
  char* data = nullptr;      ///< first element
  DataType dtype{};          ///< one lane, whole bytes
  int64_t element_size = 0;  ///< bytes
  DimVector strides;         ///< bytes per step of each dim, fastest first (0: broadcast)
  bool is_output = false;
  /// A Python scalar input of an engine: the call writes its value, and a CUDA
  /// kernel takes it by value (TensorIterator's CPU scalar).
  bool is_scalar = false;
};

namespace detail {

/// A loop nest's operands, outputs first, inline up to 4.
using Operands = SmallVector<OperandInfo, 4>;

/// A loop nest: its dims, fastest first, and its operands, outputs first; an
/// operand's stride is 0 where it is broadcast and where a reduction's output
/// reduces.
struct LoopLayout {
  DimVector shape;
  Operands operands;
  int n_outputs = 0;
  bool reduction = false;  ///< the dims an output reduces (stride 0) go innermost

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
  }
};

/// PyTorch's comparison of dims d0 and d1 (d0 the faster now), asking each operand
/// in turn, outputs first: 1 when d0 should move outside d1, -1 when it stays
/// inside, 0 when no operand cares. Strides compare by magnitude: a reversed view
/// (a negative stride) keeps its memory order.
inline int compare_dims(const LoopLayout& l, int d0, int d1) {
  for (size_t op = 0; op < l.operands.size(); ++op) {
    const DimVector& s = l.operands[op].strides;
    const int64_t s0 = s[d0] < 0 ? -s[d0] : s[d0];
    const int64_t s1 = s[d1] < 0 ? -s[d1] : s[d1];
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
  for (OperandInfo& op : l->operands) permute(op.strides);
}

/// Merges each dim into the one inside it where every operand steps through both
/// as through one (a size-1 dim merges with anything and takes the other's strides).
inline void coalesce(LoopLayout* l) {
  const size_t nd = l->shape.size();
  if (nd <= 1) return;
  auto can_merge = [&](size_t inner, size_t outer) {
    if (l->shape[inner] == 1 || l->shape[outer] == 1) return true;
    for (const OperandInfo& op : l->operands) {
      if (op.strides[inner] * l->shape[inner] != op.strides[outer]) return false;
    }
    return true;
  };
  size_t prev = 0;
  for (size_t d = 1; d < nd; ++d) {
    if (can_merge(prev, d)) {
      if (l->shape[prev] == 1) {
        for (OperandInfo& op : l->operands) op.strides[prev] = op.strides[d];
      }
      l->shape[prev] *= l->shape[d];
    } else {
      ++prev;
      l->shape[prev] = l->shape[d];
      for (OperandInfo& op : l->operands) op.strides[prev] = op.strides[d];
    }
  }
  l->shape.resize(prev + 1);
  for (OperandInfo& op : l->operands) op.strides.resize(prev + 1);
}

/// TensorIterator's layout: reorder, then coalesce.
inline void lay_out(LoopLayout* l) {
  reorder_fastest_first(l);
  coalesce(l);
}

}  // namespace detail
}  // namespace kjit

#endif  // KJIT_DETAIL_LOOP_LAYOUT_H_
