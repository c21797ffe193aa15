// Builds brainevent's own BE::Tensor (brainevent/include/brainevent/tensor.h, from
// the installed package) for a kernel parameter, the way brainevent's XLA wrappers
// do (BE::internal::buffer_to_tensor): the data pointer (after byte_offset), the
// shape, and the DLPack -> BE::DType mapping; strides are C-contiguous, as the stub
// has checked. Included by generated host code after kjit/detail/stub_prelude.h,
// only when brainevent's headers are on the include path.
#ifndef KJIT_DETAIL_BRAINEVENT_BRIDGE_H_
#define KJIT_DETAIL_BRAINEVENT_BRIDGE_H_

#include <stdexcept>
#include <string>

#include "brainevent/tensor.h"

namespace kjit_stub {
namespace {

/// DLPack's dtype as brainevent's tag; Invalid for types brainevent has none for.
inline BE::DType be_dtype(DLDataType d) {
  if (d.lanes != 1) return BE::DType::Invalid;
  switch (d.code) {
    case kDLFloat:
      return d.bits == 16   ? BE::DType::Float16
             : d.bits == 32 ? BE::DType::Float32
             : d.bits == 64 ? BE::DType::Float64
                            : BE::DType::Invalid;
    case kDLBfloat:
      return d.bits == 16 ? BE::DType::BFloat16 : BE::DType::Invalid;
    case kDLInt:
      return d.bits == 8    ? BE::DType::Int8
             : d.bits == 16 ? BE::DType::Int16
             : d.bits == 32 ? BE::DType::Int32
             : d.bits == 64 ? BE::DType::Int64
                            : BE::DType::Invalid;
    case kDLUInt:
      return d.bits == 8    ? BE::DType::UInt8
             : d.bits == 16 ? BE::DType::UInt16
             : d.bits == 32 ? BE::DType::UInt32
             : d.bits == 64 ? BE::DType::UInt64
                            : BE::DType::Invalid;
    case kDLBool:
      return d.bits == 8 ? BE::DType::Bool : BE::DType::Invalid;
    case kDLComplex:
      return d.bits == 64 ? BE::DType::Complex64 : d.bits == 128 ? BE::DType::Complex128 : BE::DType::Invalid;
    default:
      return BE::DType::Invalid;
  }
}

template <>
struct TensorFrom<BE::Tensor> {
  static BE::Tensor make(const DLTensor* t) {
    if (t == nullptr) return BE::Tensor();
    BE::DType dtype = be_dtype(t->dtype);
    if (dtype == BE::DType::Invalid) {
      // brainevent rejects such a buffer the same way (std::invalid_argument).
      throw std::invalid_argument("BE::Tensor has no dtype for DLPack code " + std::to_string(t->dtype.code) + ", " +
                                  std::to_string(t->dtype.bits) + " bits, " + std::to_string(t->dtype.lanes) +
                                  " lanes");
    }
    // The BE::Tensor constructor rejects a rank above BE::kMaxDim (std::out_of_range).
    return BE::Tensor(static_cast<char*>(t->data) + t->byte_offset, t->shape, t->ndim, dtype);
  }
};

}  // namespace
}  // namespace kjit_stub

#endif  // KJIT_DETAIL_BRAINEVENT_BRIDGE_H_
