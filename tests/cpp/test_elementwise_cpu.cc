// kjit::Elementwise from C++: the mirror of kjit.elementwise, on CPU DLTensors.
#include <gtest/gtest.h>

#include <vector>

#include "kjit/elementwise.h"
#include "kjit/errors.h"
#include "kjit/kernel.h"

namespace {

using kjit::Elementwise;
using kjit::EwOperand;

/// A float32 or int32 CPU tensor over its own storage.
template <typename T>
struct Buf {
  std::vector<T> data;
  std::vector<int64_t> shape, strides;
  DLTensor t{};
  Buf(std::vector<T> values, std::vector<int64_t> shp, std::vector<int64_t> str = {})
      : data(std::move(values)), shape(std::move(shp)), strides(std::move(str)) {
    t.data = data.data();
    t.device = {kDLCPU, 0};
    t.ndim = static_cast<int32_t>(shape.size());
    t.dtype = std::is_same<T, float>::value ? DLDataType{kDLFloat, 32, 1} : DLDataType{kDLInt, 32, 1};
    t.shape = shape.data();
    t.strides = strides.empty() ? nullptr : strides.data();
  }
};

const char kAdd[] = "template <typename T> T add(T a, T b) { return a + b; }";

TEST(ElementwiseCpp, AddsWithBroadcastingAndPromotion) {
  Elementwise add(kAdd);
  EXPECT_EQ(add.name(), "add");
  Buf<int32_t> a({1, 2, 3, 4, 5, 6}, {2, 3});
  Buf<float> b({0.5f, 1.5f, 2.5f}, {3});
  std::vector<kjit::EwOutput> outs = add.outputs_for({EwOperand::of(&a.t), EwOperand::of(&b.t)});
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(outs[0].type, kjit::EwType::kFloat64);  // NumPy 2: int32 + float32 -> float64
  EXPECT_EQ(add.outputs_for({EwOperand::of(&a.t), EwOperand::of(&b.t)}, kjit::Promotion::kTorch)[0].type,
            kjit::EwType::kFloat32);  // PyTorch: the float type wins
  Buf<float> c(std::vector<float>(6), {2, 3});
  add.run({EwOperand::of(&a.t), EwOperand::of(&b.t)}, {&c.t}, {}, kjit::Promotion::kTorch);
  EXPECT_EQ(c.data, (std::vector<float>{1.5f, 3.5f, 5.5f, 4.5f, 6.5f, 8.5f}));
}

TEST(ElementwiseCpp, ScalarsStridesAndExtraArguments) {
  Elementwise axpy("template <typename T> T axpy(T x, T y, T alpha) { return alpha * x + y; }");
  Buf<float> x({1, 2, 3, 4}, {2, 2}, {1, 2});  // a transposed view
  Buf<float> out(std::vector<float>(4), {2, 2});
  axpy.run({EwOperand::of(&x.t), EwOperand::of_float(1.0)}, {&out.t}, {EwOperand::of_float(10.0)});
  EXPECT_EQ(out.data, (std::vector<float>{11, 31, 21, 41}));
}

TEST(ElementwiseCpp, ErrorsAreTypedAndSayWhat) {
  Elementwise add(kAdd);
  Buf<float> a({1, 2, 3}, {3}), b({1, 2, 3, 4}, {4});
  Buf<int32_t> i(std::vector<int32_t>(3), {3});
  try {
    add.outputs_for({EwOperand::of(&a.t), EwOperand::of(&b.t)});
    FAIL() << "no error";
  } catch (const kjit::ValueError& e) {
    EXPECT_STREQ(e.what(),
                 "add: the size of input #0 (3) must match the size of input #1 (4) at non-singleton dimension 0 "
                 "(shapes (3,) and (4,) do not broadcast)");
  }
  EXPECT_THROW(add.run({EwOperand::of(&a.t), EwOperand::of(&a.t)}, {&i.t}), kjit::TypeError);
  EXPECT_THROW(Elementwise("int x;"), kjit::SpecError);
  Elementwise broken("template <typename T> T f(T a) { return a +; }");
  Buf<float> o(std::vector<float>(3), {3});
  try {
    broken.run({EwOperand::of(&a.t)}, {&o.t});
    FAIL() << "no error";
  } catch (const kjit::CompileError& e) {
    EXPECT_NE(std::string(e.what()).find("(float32) -> float32, computing in float32"), std::string::npos);
    EXPECT_NE(e.log().find("code:1:"), std::string::npos) << e.log();
  }
}

TEST(ElementwiseCpp, ThreadCountFollowsTheSetting) {
  kjit::set_ew_num_threads(3);
  EXPECT_EQ(kjit::ew_num_threads(), 3);
  kjit::set_ew_num_threads(0);
  EXPECT_GE(kjit::ew_num_threads(), 1);
}

}  // namespace
