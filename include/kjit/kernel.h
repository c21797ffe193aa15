// kjit/kernel.h — what a kernel written for kjit includes.
//
// Deliberately light: DLPack's C header, kjit/errors.h and the standard library
// only, never the tvm-ffi C++ headers, so that a JIT build of a kernel stays fast.
// A kernel throws kjit::ValueError, TypeError, IndexError, RuntimeError or
// NotImplementedError (kjit/errors.h) for a caller's mistake; Python gets the
// builtin of that name.
#ifndef KJIT_KERNEL_H_
#define KJIT_KERNEL_H_

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kjit/errors.h"

namespace kjit {

/// Element type of a tensor; same layout as DLDataType.
using DataType = DLDataType;
/// Device of a tensor; same layout as DLDevice.
using Device = DLDevice;
/// The device stream a kernel runs on (a cudaStream_t on CUDA, NULL on CPU).
using Stream = void*;

/// A non-owning view of a tensor argument, valid for the duration of the call.
///
/// Strides are in elements. A view of an `optional` argument that was passed as
/// None is undefined: `defined()` is false and every other accessor must not be used.
class TensorView {
 public:
  TensorView() = default;
  explicit TensorView(const DLTensor* tensor) : tensor_(tensor) {}

  bool defined() const { return tensor_ != nullptr; }
  const DLTensor* dltensor() const { return tensor_; }

  /// Address of the first element (byte_offset already applied).
  void* data_ptr() const { return static_cast<char*>(tensor_->data) + tensor_->byte_offset; }
  template <typename T>
  T* data() const {
    return static_cast<T*>(data_ptr());
  }

  int ndim() const { return tensor_->ndim; }
  int64_t size(int i) const { return tensor_->shape[normalize(i)]; }
  int64_t stride(int i) const {
    int d = normalize(i);
    return tensor_->strides != nullptr ? tensor_->strides[d] : compact_stride(d);
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < tensor_->ndim; ++i) n *= tensor_->shape[i];
    return n;
  }
  DataType dtype() const { return tensor_->dtype; }
  Device device() const { return tensor_->device; }
  /// Size of one element in bytes (rounded up for sub-byte types).
  int64_t element_size() const { return (static_cast<int64_t>(tensor_->dtype.bits) * tensor_->dtype.lanes + 7) / 8; }

  /// True when the elements are laid out in compact row-major order.
  /// Dimensions of extent 1 may have any stride, as in PyTorch.
  bool is_contiguous() const {
    if (tensor_->strides == nullptr) return true;
    int64_t expected = 1;
    for (int i = tensor_->ndim - 1; i >= 0; --i) {
      if (tensor_->shape[i] == 0) return true;
      if (tensor_->shape[i] != 1 && tensor_->strides[i] != expected) return false;
      expected *= tensor_->shape[i];
    }
    return true;
  }

 private:
  int normalize(int i) const { return i < 0 ? i + tensor_->ndim : i; }
  int64_t compact_stride(int d) const {
    int64_t s = 1;
    for (int i = tensor_->ndim - 1; i > d; --i) s *= tensor_->shape[i];
    return s;
  }

  const DLTensor* tensor_ = nullptr;
};

/// Throws ValueError(message) unless `condition` holds.
inline void check_value(bool condition, const std::string& message) {
  if (!condition) throw ValueError(message);
}
/// Throws TypeError(message) unless `condition` holds.
inline void check_type(bool condition, const std::string& message) {
  if (!condition) throw TypeError(message);
}

}  // namespace kjit

#endif  // KJIT_KERNEL_H_
