#include "reduction/reduction_plan.h"

#include <algorithm>
#include <cstdlib>

#include "iterator/plan.h"
#include "iterator/promotion.h"
#include "kjit/detail/loop_layout.h"
#include "kjit/detail/reduction_loop.h"
#include "kjit/errors.h"

namespace kjit {
namespace red {
namespace {

/// The accumulator of a promoted type `t` without dtype=: NumPy's and PyTorch's
/// sum (narrow integers and bool to 64 bits; NumPy keeps unsigned unsigned),
/// float16/bfloat16 in float32.
EwType accumulator_of(EwType t, bool upcast_integers, Promotion p) {
  if (iterator::is_half(t)) return EwType::kFloat32;
  if (!upcast_integers) return t;
  const iterator::Kind kind = iterator::kind_of(t);
  if (kind == iterator::Kind::kBool) return EwType::kInt64;
  if (kind == iterator::Kind::kUInt && p == Promotion::kNumPy) return EwType::kUInt64;
  if (kind == iterator::Kind::kUInt && t == EwType::kUInt64) return t;
  if (kind == iterator::Kind::kInt || kind == iterator::Kind::kUInt) return EwType::kInt64;
  return t;
}

std::vector<bool> reduced_dims(const std::string& fn, const ReduceAxes& axes, size_t ndim) {
  std::vector<bool> reduced(ndim, axes.all);
  if (axes.all) return reduced;
  const auto n = static_cast<int64_t>(ndim);
  // A 0-d input's axis 0 (or -1) reduces nothing, as NumPy's int axis and torch's
  // dim do (its one value is its reduction).
  const int64_t bound = std::max<int64_t>(n, 1);
  bool scalar_axis = false;
  for (int64_t axis : axes.axes) {
    if (axis < -bound || axis >= bound) {
      throw AxisError(fn + ": axis " + std::to_string(axis) + " is out of bounds for array of dimension " +
                      std::to_string(n));
    }
    if (n == 0) {
      if (scalar_axis) {
        throw ValueError(fn + ": duplicate value in 'axis': " + std::to_string(axis) +
                         " names the 0-d input's axis twice");
      }
      scalar_axis = true;
      continue;
    }
    const size_t d = static_cast<size_t>(axis < 0 ? axis + n : axis);
    if (reduced[d]) {
      throw ValueError(fn + ": duplicate value in 'axis': " + std::to_string(axis) + " names dimension " +
                       std::to_string(d) + " twice");
    }
    reduced[d] = true;
  }
  return reduced;
}

}  // namespace

RedCall plan_call(const std::string& fn, const std::vector<EwOperand>& inputs, const ReduceAxes& axes, bool keepdims,
                  std::optional<EwType> dtype, bool upcast_integers, Promotion p) {
  RedCall c;
  c.call = iterator::resolve_types(fn, inputs, p);
  if (c.call.device.device_type != kDLCPU && c.call.device.device_type != kDLCUDA) {
    throw TypeError(fn + ": kjit.reduction runs on CPU and CUDA tensors; these inputs are on device type " +
                    std::to_string(c.call.device.device_type));
  }
  if (dtype) {
    c.acc = iterator::compute_type(*dtype);
    c.result = *dtype;
  } else {
    c.acc = accumulator_of(c.call.result, upcast_integers, p);
    c.result = iterator::is_half(c.call.result) ? c.call.result : c.acc;
  }
  const std::vector<int64_t>& shape = c.call.shape;
  if (shape.size() > kRedMaxDims) {
    throw ValueError(fn + ": the inputs broadcast to " + std::to_string(shape.size()) +
                     " dimensions; kjit.reduction takes at most " + std::to_string(kRedMaxDims));
  }
  c.reduced = reduced_dims(fn, axes, shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (c.reduced[d]) {
      c.count *= shape[d];
      if (keepdims) c.output_shape.push_back(1);
    } else {
      c.output_shape.push_back(shape[d]);
    }
  }
  return c;
}

RedDims plan_dims(const std::vector<int64_t>& shape, const std::vector<bool>& reduced, detail::Operands operands) {
  const size_t n_ops = operands.size(), nd = shape.size();
  RedDims dims;
  for (size_t d = 0; d < nd; ++d) {
    if (!reduced[d]) dims.outputs *= shape[d];
  }
  // TensorIterator's layout of a reduction: the output's reduced dims (stride 0)
  // innermost, ordered by the inputs' strides, the kept ones by the output's; then
  // coalesced, which never merges a reduced dim with a kept one.
  detail::LoopLayout layout = iterator::loop_nest(shape, std::move(operands), 1);
  layout.reduction = true;
  detail::lay_out(&layout);
  // Slowest first into each group; size-1 dims add nothing to either loop.
  for (size_t k = layout.shape.size(); k-- > 0;) {
    if (layout.shape[k] == 1) continue;
    const bool is_reduced = layout.operands[0].strides[k] == 0;
    std::vector<int64_t>& group_shape = is_reduced ? dims.reduced_shape : dims.kept_shape;
    std::vector<int64_t>& group_strides = is_reduced ? dims.reduced_strides : dims.kept_strides;
    group_shape.push_back(layout.shape[k]);
    for (const OperandInfo& op : layout.operands) group_strides.push_back(op.strides[k]);
  }
  if (dims.reduced_shape.empty()) {  // every element is its own reduction
    dims.reduced_shape.push_back(1);
    dims.reduced_strides.assign(n_ops, 0);
  }
  return dims;
}

}  // namespace red
}  // namespace kjit
