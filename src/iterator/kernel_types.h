// The types one kernel is instantiated for: what every backend's code generator
// and kernel cache are keyed by (CPU and CUDA, elementwise and reductions).
#ifndef KJIT_SRC_ITERATOR_KERNEL_TYPES_H_
#define KJIT_SRC_ITERATOR_KERNEL_TYPES_H_

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "kjit/elementwise.h"

namespace kjit {

/// The types one kernel is instantiated for.
struct EwKernelTypes {
  std::vector<EwType> outputs;
  std::vector<EwType> inputs;
  EwType compute = EwType::kFloat32;  ///< the entry's T
  /// Per output, the type the entry produces it in when it declares one of its own
  /// (`bool lt(T, T)`, a `float&` output). Empty: compute for every output.
  std::vector<EwType> results;
  /// The type output k comes out of the entry in.
  EwType result(size_t k) const { return k < results.size() ? results[k] : compute; }
  /// Per extra scalar, the type it travels in (iterator::extra_travel_type): the entry's
  /// declared parameter type converts from it, as JITerator passes extras.
  std::vector<EwType> extra;
  /// A float16/bfloat16 result type (compute is then float32): inputs of another
  /// type are rounded to it on load, and the result before a store into another
  /// type, as NumPy's and TensorIterator's loops do. Empty: compute is the result type.
  std::optional<EwType> half_result;
  /// by_value[i] when input i is a Python scalar: loaded once before the loops
  /// (CPU), passed to the kernel by value (CUDA, JITerator's CPU scalars). Empty: none.
  std::vector<bool> by_value;
  /// "(int32, float32) -> float32, computing in float32" (+ " rounded to float16")
  std::string text() const;
};

/// Whether some type of a kernel (compute, an output, an input or an extra) satisfies `pred`.
template <typename Pred>
bool any_kernel_type(const EwKernelTypes& t, Pred pred) {
  if (pred(t.compute)) return true;
  for (const std::vector<EwType>* list : {&t.outputs, &t.inputs, &t.extra}) {
    for (EwType x : *list) {
      if (pred(x)) return true;
    }
  }
  return false;
}

}  // namespace kjit

#endif  // KJIT_SRC_ITERATOR_KERNEL_TYPES_H_
