// What a reduction call decides before its loop: the types (the elementwise
// engine's promotion, then the accumulator and result types), the reduced axes
// (NumPy's rules and errors), the output's shape, and the problem's dims: kept and
// reduced, size-1 dims dropped, reduced dims innermost, each group coalesced.
#ifndef KJIT_SRC_REDUCTION_REDUCTION_PLAN_H_
#define KJIT_SRC_REDUCTION_REDUCTION_PLAN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "iterator/call_types.h"
#include "kjit/reduction.h"

namespace kjit {
namespace red {

/// A call's types and shapes.
struct RedCall {
  iterator::CallTypes call;           ///< broadcast shape, device, input load types, promoted type
  EwType acc = EwType::kFloat64;      ///< what map and combine compute in (the T of the code)
  EwType result = EwType::kFloat64;   ///< the output's dtype when out= is not given
  std::vector<bool> reduced;          ///< per broadcast dim
  std::vector<int64_t> output_shape;  ///< keepdims: reduced dims as 1
  int64_t count = 1;                  ///< elements reduced into each output
};

/// Resolves a call: promotion as kjit.elementwise's; accumulation as NumPy's or
/// PyTorch's sum (ReductionOptions::upcast_integers), or `dtype`; axes as NumPy's.
/// Throws TypeError (dtypes, devices), ValueError (shapes, axes).
RedCall plan_call(const std::string& fn, const std::vector<EwOperand>& inputs, const ReduceAxes& axes, bool keepdims,
                  std::optional<EwType> dtype, bool upcast_integers, Promotion p);

/// The loop dims of a call, each group slowest first: operands' byte strides
/// [dim][operand] (the output first, 0 along reduced dims), kept dims by the
/// output's strides, reduced dims by the inputs' (TensorIterator's layout of a
/// reduction, kjit/detail/loop_layout.h), size-1 dims dropped, each group
/// coalesced; at least one reduced dim.
struct RedDims {
  std::vector<int64_t> kept_shape, kept_strides;
  std::vector<int64_t> reduced_shape, reduced_strides;
  int64_t outputs = 1;  ///< elements of the output
};

/// `operands`: the output, then the inputs, with byte strides against the
/// broadcast `shape` (fastest first, as input_operands gives them).
RedDims plan_dims(const std::vector<int64_t>& shape, const std::vector<bool>& reduced, detail::Operands operands);

}  // namespace red
}  // namespace kjit

#endif  // KJIT_SRC_REDUCTION_REDUCTION_PLAN_H_
