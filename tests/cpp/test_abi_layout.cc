// Compile-time checks of the layouts kjit relies on across the ABI.
#include <gtest/gtest.h>
#include <tvm/ffi/c_api.h>

#include <type_traits>

#include "kjit/kernel.h"

namespace {

static_assert(sizeof(TVMFFIAny) == 16, "TVMFFIAny is 16 bytes");
static_assert(sizeof(TVMFFIObject) == 24, "a Tensor's DLTensor follows a 24-byte object header");
static_assert(kTVMFFITensor == 70 && kTVMFFIDLTensorPtr == 7, "the two tensor kinds a stub accepts");
static_assert(sizeof(kjit::TensorView) == sizeof(void*), "TensorView is one pointer, passed in a register");
static_assert(std::is_trivially_copyable<kjit::TensorView>::value, "TensorView is passed by value");
static_assert(std::is_same<kjit::DataType, DLDataType>::value, "dtype() is DLPack's");
static_assert(std::is_same<kjit::Device, DLDevice>::value, "device() is DLPack's");

TEST(TensorView, ReadsShapesStridesAndData) {
  float data[6] = {0, 1, 2, 3, 4, 5};
  int64_t shape[2] = {2, 3};
  DLTensor t{};
  t.data = data;
  t.ndim = 2;
  t.shape = shape;
  t.dtype = {kDLFloat, 32, 1};
  t.device = {kDLCPU, 0};
  kjit::TensorView v(&t);
  EXPECT_TRUE(v.defined());
  EXPECT_EQ(v.numel(), 6);
  EXPECT_EQ(v.size(-1), 3);
  EXPECT_EQ(v.stride(0), 3);  // NULL strides mean compact
  EXPECT_TRUE(v.is_contiguous());
  EXPECT_EQ(v.data<float>()[4], 4.0f);
  EXPECT_EQ(v.element_size(), 4);
  t.byte_offset = 8;
  EXPECT_EQ(v.data<float>()[0], 2.0f);  // byte_offset applied
  int64_t strides[2] = {1, 2};
  t.strides = strides;
  EXPECT_FALSE(v.is_contiguous());
  EXPECT_FALSE(kjit::TensorView().defined());
}

TEST(KernelErrors, CarryTheirKind) {
  try {
    kjit::check_value(false, "bad n");
  } catch (const kjit::Error& e) {
    EXPECT_STREQ(e.kind(), "ValueError");
    EXPECT_STREQ(e.what(), "bad n");
  }
  EXPECT_THROW(kjit::check_type(false, "x"), kjit::TypeError);
}

}  // namespace
