// The arguments of the kjit.ew_* and kjit.red_* global functions as the elementwise
// and reduction engines take them: tensors, scalars, complex scalars as [re, im],
// and NumPy arrays DLPack cannot carry, described by address.
#ifndef KJIT_SRC_FFI_OPERANDS_H_
#define KJIT_SRC_FFI_OPERANDS_H_

#include <dlpack/dlpack.h>
#include <tvm/ffi/any.h>
#include <tvm/ffi/function.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "kjit/elementwise.h"

namespace kjit {

/// A tensor DLPack cannot carry from NumPy (read-only, or an ml_dtypes type such as
/// bfloat16), described by Python as [data address, shape, byte strides, dtype name].
struct RawTensor {
  DLTensor t{};
  std::vector<int64_t> shape, strides;
};

/// One argument: a tensor (Tensor object or DLTensor*), a bool/int/float, a
/// complex scalar as [re, im], or a raw tensor description (kept in `store`).
/// Messages name the argument by `index` and the API by `api`.
EwOperand operand_of(const tvm::ffi::AnyView& v, size_t index, std::vector<std::unique_ptr<RawTensor>>* store,
                     const char* api = "kjit.elementwise");

/// Decodes args[begin, end) into `out` (cleared first); messages number them from
/// `label_base`.
void decode_operands(tvm::ffi::PackedArgs args, int begin, int end, int label_base, std::vector<EwOperand>* out,
                     std::vector<std::unique_ptr<RawTensor>>* store, const char* api = "kjit.elementwise");

/// The promotion rules Python names by number: 1 PyTorch's, else NumPy's.
inline Promotion promotion_of(int64_t p) { return p == 1 ? Promotion::kTorch : Promotion::kNumPy; }

}  // namespace kjit

#endif  // KJIT_SRC_FFI_OPERANDS_H_
