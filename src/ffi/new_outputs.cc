// New outputs of call functions (new_outputs.h).
#include "ffi/new_outputs.h"

#include <tvm/ffi/extra/c_env_api.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu/output_memory.h"
#include "kjit/errors.h"

namespace kjit {
namespace {

[[noreturn]] KJIT_COLD void throw_out_of_memory(const char* api, const DLTensor& t, size_t bytes) {
  std::string shape;
  for (int d = 0; d < t.ndim; ++d) shape += (d ? ", " : "") + std::to_string(t.shape[d]);
  throw detail::StdError<std::runtime_error>(
      ErrorKind::kMemoryError, std::string(api) + ": cannot allocate " + std::to_string(bytes) +
                                   " bytes for an output of shape (" + shape + (t.ndim == 1 ? ",)" : ")"));
}

/// Host memory for outputs kjit allocates itself (elementwise/output_memory.h);
/// tvm-ffi keeps this allocator inside the tensor object, so it remembers the
/// block's capacity until FreeData.
struct HostAlloc {
  const char* api;  ///< names the API in a MemoryError
  cpu::OutputBlock block;
  void AllocData(DLTensor* t) {
    // The planner checked that the size fits (check_broadcast_size): no wrap here.
    const size_t bytes = std::max<size_t>(tvm::ffi::GetDataSize(*t), 1);
    block = cpu::acquire_output_memory(bytes);
    if (block.data == nullptr) throw_out_of_memory(api, *t, bytes);
    t->data = block.data;
  }
  void FreeData(DLTensor*) { cpu::release_output_memory(block); }
};

/// allocate_output for the layouts that are not a C-contiguous CPU tensor: other
/// devices, and outputs that follow a permuted input layout.
KJIT_COLD tvm::ffi::Tensor allocate_output_permuted(const EwOutput& layout, DLDevice device, const std::string& fn,
                                                    const char* api) {
  const size_t nd = layout.shape.size();
  std::vector<int64_t> permuted(nd);
  bool identity = true;
  for (size_t i = 0; i < nd; ++i) {
    permuted[i] = layout.shape[layout.order[i]];
    identity = identity && layout.order[i] == static_cast<int>(i);
  }
  tvm::ffi::ShapeView shape(permuted.data(), nd);
  tvm::ffi::Tensor t;
  if (device.device_type == kDLCPU) {
    t = tvm::ffi::Tensor::FromNDAlloc(HostAlloc{api, {}}, shape, ew_dl_type(layout.type), device);
  } else if (TVMFFIEnvGetDLPackManagedTensorAllocator() != nullptr) {
    t = tvm::ffi::Tensor::FromEnvAlloc(TVMFFIEnvTensorAlloc, shape, ew_dl_type(layout.type), device);
  } else {
    throw TypeError(fn + ": cannot allocate the output on " + (device.device_type == kDLCUDA ? "CUDA" : "this device") +
                    " for these tensors (only torch provides an allocator through DLPack); pass out=");
  }
  if (identity) return t;
  std::vector<int64_t> strides(nd);
  int64_t step = 1;
  for (size_t i = nd; i-- > 0;) {  // the permuted buffer's strides, seen in the output's dim order
    strides[layout.order[i]] = step;
    step *= permuted[i];
  }
  return t.as_strided(tvm::ffi::ShapeView(layout.shape.data(), nd), tvm::ffi::ShapeView(strides.data(), nd));
}

}  // namespace

tvm::ffi::Tensor allocate_large_output(const EwOutput& layout, DLDevice device, const std::string& fn,
                                       const char* api) {
  const size_t nd = layout.shape.size();
  bool identity = device.device_type == kDLCPU;
  for (size_t i = 0; i < nd && identity; ++i) identity = layout.order[i] == static_cast<int>(i);
  if (!identity) return allocate_output_permuted(layout, device, fn, api);
  return tvm::ffi::Tensor::FromNDAlloc(HostAlloc{api, {}}, tvm::ffi::ShapeView(layout.shape.data(), nd),
                                       ew_dl_type(layout.type), device);
}

tvm::ffi::Tensor empty_host_tensor(tvm::ffi::ShapeView shape, DLDataType dtype, const char* api) {
  return tvm::ffi::Tensor::FromNDAlloc(HostAlloc{api, {}}, shape, dtype, DLDevice{kDLCPU, 0});
}

}  // namespace kjit
