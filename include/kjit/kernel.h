// kjit/kernel.h — what a kernel written for kjit includes.
//
// Deliberately light: DLPack's C header, kjit/errors.h, kjit/dtype.h and the
// standard library only, never the tvm-ffi C++ headers, so that a JIT build of a kernel stays fast.
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

#include "kjit/dtype.h"
#include "kjit/errors.h"

namespace kjit {

/// Element type of a tensor; same layout as DLDataType.
using DataType = DLDataType;
/// Device of a tensor; same layout as DLDevice.
using Device = DLDevice;
/// The device stream a kernel runs on (a cudaStream_t on CUDA, NULL on CPU).
using Stream = void*;

/// Typed indexing into an N-dim tensor: `a[i]` is an (N-1)-dim accessor, and of
/// a 1-dim one the element. Strides are in elements; no bounds are checked. It
/// holds its strides (a compact DLTensor may have none) and borrows its sizes.
template <typename T, int N>
class TensorAccessor {
 public:
  TensorAccessor(T* data, const int64_t* sizes, const int64_t* strides) : data_(data), sizes_(sizes) {
    for (int d = 0; d < N; ++d) strides_[d] = strides[d];
  }
  decltype(auto) operator[](int64_t i) const {
    if constexpr (N == 1) {
      return data_[i * strides_[0]];
    } else {
      return TensorAccessor<T, N - 1>(data_ + i * strides_[0], sizes_ + 1, strides_ + 1);
    }
  }
  int64_t size(int d) const { return sizes_[d]; }
  int64_t stride(int d) const { return strides_[d]; }
  T* data() const { return data_; }

 private:
  T* data_;
  const int64_t* sizes_;
  int64_t strides_[N];
};

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

  /// Address of the first element (byte_offset already applied). A const view
  /// is an input: it hands out const pointers only.
  void* data_ptr() { return static_cast<char*>(tensor_->data) + tensor_->byte_offset; }
  const void* data_ptr() const { return static_cast<const char*>(tensor_->data) + tensor_->byte_offset; }
  template <typename T>
  T* data() {
    return static_cast<T*>(data_ptr());
  }
  template <typename T>
  const T* data() const {
    return static_cast<const T*>(data_ptr());
  }

  /// Indexes the elements as `a[i][j]` for an N-dim tensor of `T`, with its
  /// strides; throws TypeError unless the view has N dims and T's dtype.
  template <typename T, int N>
  TensorAccessor<T, N> accessor() {
    return make_accessor<T, N>(data<T>());
  }
  template <typename T, int N>
  TensorAccessor<const T, N> accessor() const {
    return make_accessor<const T, N>(data<T>());
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

  template <typename T, int N>
  TensorAccessor<T, N> make_accessor(T* data) const {
    static_assert(N >= 1, "kjit::TensorView::accessor<T, N>: N must be at least 1");
    check_accessor(dtype_of<T>(), N);
    int64_t strides[N];
    for (int d = 0; d < N; ++d) strides[d] = stride(d);
    return TensorAccessor<T, N>(data, tensor_->shape, strides);
  }
  void check_accessor(DataType want, int n) const {
    if (tensor_->ndim == n && same_dtype(tensor_->dtype, want)) return;
    throw TypeError("kjit::TensorView::accessor<" + dtype_name(want) + ", " + std::to_string(n) + ">: the tensor is " +
                    std::to_string(tensor_->ndim) + "-d " + dtype_name(tensor_->dtype));
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
