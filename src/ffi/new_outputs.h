// The new outputs of call functions: CPU results in kjit's host memory (inline in
// the tensor object when small), which NumPy and torch take through DLPack; other
// devices through the allocator tvm-ffi set for the call. Elementwise functions
// and reductions allocate here.
#ifndef KJIT_SRC_FFI_NEW_OUTPUTS_H_
#define KJIT_SRC_FFI_NEW_OUTPUTS_H_

#include <dlpack/dlpack.h>
#include <tvm/ffi/c_api.h>
#include <tvm/ffi/container/tensor.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "kjit/elementwise.h"
#include "support/compiler_hints.h"

namespace kjit {

/// Up to 64 bytes of data inside the tensor object itself (tvm-ffi keeps the
/// allocator as a member of the object, which never moves): one allocation
/// instead of two for the small results whose call cost is all overhead.
struct InlineHostAlloc {
  static constexpr size_t kBytes = 64;
  alignas(16) unsigned char bytes[kBytes];
  void AllocData(DLTensor* t) { t->data = bytes; }
  void FreeData(DLTensor*) {}
};

/// allocate_output for every layout but a small C-contiguous CPU one.
tvm::ffi::Tensor allocate_large_output(const EwOutput& layout, DLDevice device, const std::string& fn, const char* api);

/// A new output laid out as `layout` says: contiguous in layout.order, viewed in
/// the output's dim order. `fn` names the function in messages, `api` the API
/// ("kjit.elementwise") in a MemoryError. Inline: the small results' path.
KJIT_INLINE tvm::ffi::Tensor allocate_output(const EwOutput& layout, DLDevice device, const std::string& fn,
                                             const char* api) {
  const size_t nd = layout.shape.size();
  bool small = device.device_type == kDLCPU;
  int64_t numel = 1;
  for (size_t i = 0; i < nd && small; ++i) {
    small = layout.order[i] == static_cast<int>(i);
    numel *= layout.shape[i];
  }
  const DLDataType dtype = ew_dl_type(layout.type);
  if (!small || tvm::ffi::GetDataSize(static_cast<size_t>(numel), dtype) > InlineHostAlloc::kBytes) {
    return allocate_large_output(layout, device, fn, api);
  }
  return tvm::ffi::Tensor::FromNDAlloc(InlineHostAlloc(), tvm::ffi::ShapeView(layout.shape.data(), nd), dtype, device);
}

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
