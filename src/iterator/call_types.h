// What a call's operands decide before any loop (TensorIterator's compute_types
// and shape steps): device, broadcast shape and types, with the user-facing
// checks of inputs and out= tensors; and scalars written as the kernel loads them.
#ifndef KJIT_SRC_ITERATOR_CALL_TYPES_H_
#define KJIT_SRC_ITERATOR_CALL_TYPES_H_

#include <dlpack/dlpack.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "iterator/plan.h"
#include "kjit/elementwise.h"

namespace kjit {
namespace iterator {

/// A call's device, broadcast shape and types.
struct CallTypes {
  std::vector<int64_t> shape;
  DLDevice device{kDLCPU, 0};
  std::vector<EwType> inputs;  ///< per input; a scalar's is the type the kernel loads it in
  EwType result = EwType::kFloat32;
  std::vector<std::optional<EwType>> own;  ///< per output: its own dtype (EwCompute::own_outputs)
  /// Output k's dtype: its own, else the result type.
  EwType output(size_t k) const { return k < own.size() && own[k] ? *own[k] : result; }
};

/// Resolves a call's types (NumPy 2 or PyTorch rules, then the compute rule) and
/// broadcast shape. Throws TypeError (no inputs, unsupported dtype, no common
/// type, an input that does not cast to compute=), ValueError (devices, shapes),
/// OverflowError (a Python int outside an integer result type, NumPy's rules).
/// `fn` names the entry function in messages.
CallTypes resolve_types(const std::string& fn, const std::vector<EwOperand>& inputs, Promotion p,
                        const EwCompute& compute = {});

/// NumPy's rules: a given out= whose shape the inputs broadcast to sets the call's
/// shape (check_output then checks every output against it).
void broadcast_to_outputs(const DLTensor* const* outputs, size_t n_out, CallTypes* types, Promotion p);

/// The inputs as loop operands: their load types, byte strides against the
/// broadcast shape, fastest first (0 for broadcast dims and scalars); no data,
/// which each call binds.
detail::Operands input_operands(const std::vector<EwOperand>& inputs, const CallTypes& types);

/// Throws ValueError naming the shape when the broadcast shape's size in bits, at
/// `element_size` bytes an element (the call's widest), overflows int64: every
/// product, extent and byte size the planner and the allocation compute from it
/// then fits. (An out= tensor's own span is checked by check_tensor_span.)
void check_broadcast_size(const std::string& fn, const std::vector<int64_t>& shape, int element_size);

/// Throws ValueError naming `what` (e.g. "input #1") when a tensor's shape is
/// negative or its byte offsets (stride x element size x extent) overflow int64.
void check_tensor_span(const std::string& fn, const std::string& what, const DLTensor* t, int element_size);

/// Checks out[k] against the call: device, supported dtype, shape, safe cast.
void check_output(const std::string& fn, size_t k, const DLTensor* out, const CallTypes& types, Promotion p);

/// Rejects an output with stride 0 in a dim of size > 1 (it would write one
/// element many times).
void check_self_overlap(const std::string& fn, const DLTensor* const* outputs, size_t n_out);

/// A scalar in the type the kernel loads, in 16 aligned bytes (uninitialised
/// until written: it lives on the stack of every call).
struct ScalarSlot {
  alignas(16) unsigned char bytes[16];
};

/// Writes a scalar operand's value converted to `type` (C++ conversions, as NumPy's).
void write_scalar(const EwOperand& op, EwType type, ScalarSlot* slot);

/// Whether scalar `op` is a value of `type` as it is: an integer in range for an
/// integer type (a float only when whole), 0 or 1 for bool, a finite value that
/// stays finite in a floating type; a complex one with an imaginary part only for
/// complex types. write_scalar converts anything (wrapping, rounding).
bool scalar_fits(const EwOperand& op, EwType type);

/// The type extra scalar #e travels to the kernel in, as JITerator passes extras
/// (the entry's declared parameter type converts from it): a bool as bool, an int
/// as int64, a float as float64, a complex in the complex compute type. Throws
/// TypeError for a tensor, and for a complex value when the compute type is real
/// (its imaginary part would be lost).
EwType extra_travel_type(const std::string& fn, const EwOperand& extra, size_t e, EwType compute);

/// Writes scalar input `i` in the type the kernel loads it in; a Python int is
/// range-checked first (its value is the call's, not the plan's).
void bind_scalar_input(const std::string& fn, const EwOperand& input, const CallTypes& types, size_t i, Promotion p,
                       ScalarSlot* slot);

std::vector<int64_t> shape_of(const DLTensor* t);
/// Element strides; C-contiguous ones when the tensor has none.
/// C-contiguous strides (elements) of `shape`.
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape);
std::vector<int64_t> strides_of(const DLTensor* t);
/// "input #i", as messages name inputs.
std::string operand_name(size_t i);

}  // namespace iterator
}  // namespace kjit

#endif  // KJIT_SRC_ITERATOR_CALL_TYPES_H_
