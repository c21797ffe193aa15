// A reduction's axis tuple as kjit's Python call type (src/pyext/direct_call.cc)
// hands it to a call function through the C ABI, where tvm-ffi has no array that
// needs no allocation: a kTVMFFIOpaquePtr whose `zero_padding` is kAxisListTag,
// pointing to an AxisList that lives until the call returns. tvm-ffi's own
// conversion never sets the tag, so no other pointer is read as one.
#ifndef KJIT_SRC_FFI_AXIS_LIST_H_
#define KJIT_SRC_FFI_AXIS_LIST_H_

#include <cstdint>

namespace kjit {

/// The most axes a tuple crosses with (longer ones take the checked path).
constexpr int kAxisListMax = 8;
constexpr uint32_t kAxisListTag = 0x4b4a4158;

/// Trivial (no initialisation): the call type keeps one on the stack of every call.
struct AxisList {
  int64_t n;
  int64_t axes[kAxisListMax];
};

}  // namespace kjit

#endif  // KJIT_SRC_FFI_AXIS_LIST_H_
