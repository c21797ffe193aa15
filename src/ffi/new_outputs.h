// The new outputs of call functions: CPU results in kjit's host memory (inline in
// the tensor object when small), which NumPy and torch take through DLPack; other
// devices through the allocator tvm-ffi set for the call. Elementwise functions
// and reductions allocate here.
#ifndef KJIT_SRC_FFI_NEW_OUTPUTS_H_
#define KJIT_SRC_FFI_NEW_OUTPUTS_H_

#include <dlpack/dlpack.h>
#include <tvm/ffi/c_api.h>
#include <tvm/ffi/container/tensor.h>

#include <string>

#include "kjit/elementwise.h"
#include "support/compiler_hints.h"

namespace kjit {

/// A new output laid out as `layout` says: contiguous in layout.order, viewed in
/// the output's dim order. `fn` names the function in messages, `api` the API
/// ("kjit.elementwise") in a MemoryError.
tvm::ffi::Tensor allocate_output(const EwOutput& layout, DLDevice device, const std::string& fn, const char* api);

/// A C-contiguous tensor in kjit's host memory (the shape's size already checked).
tvm::ffi::Tensor empty_host_tensor(tvm::ffi::ShapeView shape, DLDataType dtype, const char* api);

/// The tensor a call function takes, or null: a Tensor object or a DLTensor*.
KJIT_INLINE const DLTensor* tensor_arg(const TVMFFIAny* raw) {
  if (raw->type_index == kTVMFFITensor) {
    return reinterpret_cast<const DLTensor*>(reinterpret_cast<const char*>(raw->v_obj) + sizeof(TVMFFIObject));
  }
  return raw->type_index == kTVMFFIDLTensorPtr ? static_cast<const DLTensor*>(raw->v_ptr) : nullptr;
}

}  // namespace kjit

#endif  // KJIT_SRC_FFI_NEW_OUTPUTS_H_
