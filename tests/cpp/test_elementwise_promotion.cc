// Elementwise dtype rules: N-input promotion (NumPy 2 and PyTorch), the compute
// rule, and the casts the CPU loop emits for 16-bit float results.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cpu/codegen_cpu.h"
#include "iterator/promotion.h"
#include "kjit/errors.h"

namespace kjit {
namespace {

using T = EwType;
using iterator::TypeInput;

std::vector<TypeInput> strong(const std::vector<T>& types) {
  std::vector<TypeInput> out;
  for (size_t i = 0; i < types.size(); ++i) out.push_back({types[i], TypeInput::Weight::kStrong, i});
  return out;
}

T numpy_result(const std::vector<T>& types) { return iterator::result_type("f", strong(types), Promotion::kNumPy); }

TEST(ElementwisePromotion, NumPyThreeInputsDoNotDependOnOrder) {
  // The examples: np.result_type of all inputs, not a pairwise fold.
  std::vector<T> a = {T::kUInt8, T::kInt8, T::kFloat16};
  std::sort(a.begin(), a.end());
  do {
    EXPECT_EQ(numpy_result(a), T::kFloat16);
  } while (std::next_permutation(a.begin(), a.end()));
  std::vector<T> b = {T::kInt16, T::kUInt16, T::kFloat16};
  std::sort(b.begin(), b.end());
  do {
    EXPECT_EQ(numpy_result(b), T::kFloat32);
  } while (std::next_permutation(b.begin(), b.end()));
  EXPECT_EQ(numpy_result({T::kInt8, T::kUInt8}), T::kInt16);  // integers stay integers
}

TEST(ElementwisePromotion, NumPyAnyOrderOfEveryTripleAgrees) {
  const std::vector<T> all = {T::kBool,    T::kInt8,    T::kInt16,     T::kInt32,     T::kInt64,
                              T::kUInt8,   T::kUInt16,  T::kUInt32,    T::kUInt64,    T::kFloat16,
                              T::kFloat32, T::kFloat64, T::kComplex64, T::kComplex128};
  for (T x : all) {
    for (T y : all) {
      for (T z : all) {
        const T r = numpy_result({x, y, z});
        EXPECT_EQ(numpy_result({z, x, y}), r);
        EXPECT_EQ(numpy_result({y, z, x}), r);
      }
    }
  }
}

TEST(ElementwisePromotion, TorchRefusalsAreTypeErrorsNamingTheInput) {
  try {
    iterator::result_type("f", strong({T::kUInt16, T::kInt8}), Promotion::kTorch);
    FAIL() << "no error";
  } catch (const TypeError& e) {
    EXPECT_NE(std::string(e.what()).find("f: PyTorch's rules do not promote input #1 (int8) with uint16"),
              std::string::npos)
        << e.what();
  }
  std::vector<TypeInput> half_complex = strong({T::kFloat16});
  half_complex.push_back({T::kComplex128, TypeInput::Weight::kWeak, 1});
  EXPECT_THROW(iterator::result_type("f", half_complex, Promotion::kTorch), TypeError);  // complex32
  half_complex.push_back({T::kComplex64, TypeInput::Weight::kStrong, 2});                // a complex64 tensor decides
  EXPECT_EQ(iterator::result_type("f", half_complex, Promotion::kTorch), T::kComplex64);
}

TEST(ElementwisePromotion, FloatComputationsPromoteLikeNumPyAndTorch) {
  EXPECT_EQ(iterator::float_result_type(strong({T::kInt8}), T::kInt8, Promotion::kNumPy), T::kFloat16);
  EXPECT_EQ(iterator::float_result_type(strong({T::kInt8, T::kUInt8}), T::kInt16, Promotion::kNumPy), T::kFloat16);
  EXPECT_EQ(iterator::float_result_type(strong({T::kInt32}), T::kInt32, Promotion::kNumPy), T::kFloat64);
  EXPECT_EQ(iterator::float_result_type(strong({T::kInt32}), T::kInt32, Promotion::kTorch), T::kFloat32);
  EXPECT_EQ(iterator::float_result_type(strong({T::kFloat32}), T::kFloat32, Promotion::kNumPy), T::kFloat32);
}

TEST(ElementwisePromotion, HalfResultsRoundInputsAndWiderStores) {
  EwKernelTypes t;
  t.outputs = {T::kFloat32};
  t.inputs = {T::kInt32, T::kFloat16};
  t.compute = T::kFloat32;
  t.half_result = T::kFloat16;
  const std::string src = emit_elementwise_cpu("template <typename T> T f(T a, T b) { return a + b; }", "f", t);
  // The int32 input rounds to float16; the float16 input loads as is; the result
  // rounds to float16 before the float32 store.
  // (an int32 rounds from double; the float result takes the float form, which vectorises)
  EXPECT_NE(src.find("kjit_float16::float16_float(kjit_float16::to_float16_bits(__ld<int32_t>("), std::string::npos)
      << src;
  EXPECT_NE(src.find("__st<float>(__d0 + __k * 4, static_cast<float>(kjit_float16::float16_float(kjit_float16::to_"
                     "float16_bits(__r0))))"),
            std::string::npos)
      << src;
  EXPECT_EQ(t.text(), "(int32, float16) -> float32, computing in float32 rounded to float16");
}

}  // namespace
}  // namespace kjit
