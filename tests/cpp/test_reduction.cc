// kjit::Reduction from C++, its planner's dims, and the loops of
// kjit/detail/reduction_loop.h instantiated here without the JIT.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "kjit/detail/reduction_loop.h"
#include "kjit/errors.h"
#include "kjit/reduction.h"
#include "loop_operands.h"
#include "reduction/reduction_plan.h"

namespace {

using kjit::EwOperand;
using kjit::ReduceAxes;
using kjit::Reduction;

/// The Ops a generated kernel defines, for float inputs summed in double (its
/// members have the reserved names generated code gives them: reduction_loop.h).
struct SumOps {
  using __Acc = double;
  static constexpr bool __kArg = false;
  static constexpr int __kOperands = 2;
  static constexpr int64_t __kSizes[__kOperands] = {8, 4};
  static double __map(const char* const* in, int64_t) {
    float v;
    std::memcpy(&v, in[1], sizeof(v));
    return v;
  }
  static double __combine(double a, double b) { return a + b; }
  static double __identity(const void* p) { return *static_cast<const double*>(p); }
  static void __store(char* p, double acc, int64_t) { std::memcpy(p, &acc, sizeof(acc)); }
};

/// A (rows, cols) float matrix reduced over one axis with Reducer<SumOps>.
std::vector<double> reduce_matrix(const std::vector<float>& m, int64_t rows, int64_t cols, int axis, bool split) {
  const int64_t outputs = axis == 0 ? cols : rows;
  std::vector<double> out(outputs, -1.0);
  const int64_t kept_shape[1] = {outputs};
  const int64_t reduced_shape[1] = {axis == 0 ? rows : cols};
  // [dim][operand]: the output, then the input, in bytes.
  const int64_t kept_strides[2] = {8, axis == 0 ? 4 : 4 * cols};
  const int64_t reduced_strides[2] = {0, axis == 0 ? 4 * cols : 4};
  char* data[2] = {reinterpret_cast<char*>(out.data()),
                   const_cast<char*>(reinterpret_cast<const char*>(m.data()))};  // NOLINT: read only
  const double zero = 0;
  std::vector<double> partials(4 * outputs);
  kjit_red_problem p{};
  p.n_operands = 2;
  p.n_kept = 1;
  p.n_reduced = 1;
  p.kept_shape = kept_shape;
  p.kept_strides = kept_strides;
  p.reduced_shape = reduced_shape;
  p.reduced_strides = reduced_strides;
  p.data = data;
  p.count = reduced_shape[0];
  p.identity = &zero;
  p.partials = partials.data();
  const kjit_red::Reducer<SumOps> r(p);
  if (!split) {
    r.store(0, outputs);
    return out;
  }
  for (int part = 0; part < 4; ++part) r.partial(reduced_shape[0] * part / 4, reduced_shape[0] * (part + 1) / 4, part);
  r.finish(0, outputs, 4);
  return out;
}

TEST(ReductionLoop, InnerOuterAndSplitReductionsAgree) {
  for (int64_t rows : {1, 3, 17, 300}) {
    for (int64_t cols : {1, 5, 33, 1500}) {
      std::vector<float> m(rows * cols);
      std::iota(m.begin(), m.end(), 0.0f);
      for (int axis : {0, 1}) {
        std::vector<double> want(axis == 0 ? cols : rows, 0.0);
        for (int64_t i = 0; i < rows; ++i) {
          for (int64_t j = 0; j < cols; ++j) want[axis == 0 ? j : i] += m[i * cols + j];
        }
        EXPECT_EQ(reduce_matrix(m, rows, cols, axis, false), want) << rows << "x" << cols << " axis " << axis;
        if (rows * cols >= 4 && (axis == 0 ? rows : cols) >= 4) {
          EXPECT_EQ(reduce_matrix(m, rows, cols, axis, true), want) << rows << "x" << cols << " axis " << axis;
        }
      }
    }
  }
}

TEST(ReductionPlan, DimsDropOnesSortAndCoalesce) {
  // (2, 3, 4) float32, C-contiguous: reducing axis 2 keeps (2, 3) as one dim of 6.
  const std::vector<int64_t> shape{2, 3, 4};
  std::vector<std::vector<int64_t>> strides{{12, 4, 0}, {48, 16, 4}};
  kjit::red::RedDims d = kjit::red::plan_dims(shape, {false, false, true}, kjit_test::operands_slowest_first(strides));
  EXPECT_EQ(d.kept_shape, (std::vector<int64_t>{6}));
  EXPECT_EQ(d.kept_strides, (std::vector<int64_t>{4, 16}));
  EXPECT_EQ(d.reduced_shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(d.outputs, 6);
  // Every axis of the transposed (4, 3, 2) view: reduced innermost-smallest-stride, then one run of 24.
  strides = {{0, 0, 0}, {4, 16, 48}};
  d = kjit::red::plan_dims({4, 3, 2}, {true, true, true}, kjit_test::operands_slowest_first(strides));
  EXPECT_EQ(d.reduced_shape, (std::vector<int64_t>{24}));
  EXPECT_EQ(d.reduced_strides, (std::vector<int64_t>{0, 4}));
  EXPECT_TRUE(d.kept_shape.empty());
  // Nothing reduced (size-1 axis): one reduced dim of 1 remains for the loops.
  d = kjit::red::plan_dims({5, 1}, {false, true}, kjit_test::operands_slowest_first({{8, 0}, {4, 4}}));
  EXPECT_EQ(d.reduced_shape, (std::vector<int64_t>{1}));
  EXPECT_EQ(d.kept_shape, (std::vector<int64_t>{5}));
}

/// A float CPU tensor over its own storage.
struct Buf {
  std::vector<float> data;
  std::vector<int64_t> shape;
  DLTensor t{};
  Buf(std::vector<float> values, std::vector<int64_t> shp) : data(std::move(values)), shape(std::move(shp)) {
    t.data = data.data();
    t.device = {kDLCPU, 0};
    t.ndim = static_cast<int32_t>(shape.size());
    t.dtype = DLDataType{kDLFloat, 32, 1};
    t.shape = shape.data();
  }
};

TEST(ReductionCpp, SumsAlongAnAxisIntoOut) {
  Reduction sum(kjit::ReductionCode{"template <typename T> T add(T a, T b) { return a + b; }", "", ""},
                EwOperand::of_int(0));
  EXPECT_EQ(sum.name(), "add");
  Buf x({1, 2, 3, 4, 5, 6}, {2, 3});
  const kjit::EwOutput o = sum.output_for({EwOperand::of(&x.t)}, ReduceAxes::of({1}), false, std::nullopt);
  EXPECT_EQ(o.shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(o.type, kjit::EwType::kFloat32);
  Buf out({0, 0}, {2});
  sum.run({EwOperand::of(&x.t)}, ReduceAxes::of({1}), false, std::nullopt, &out.t);
  EXPECT_EQ(out.data, (std::vector<float>{6, 15}));
  Buf all({0}, {});
  sum.run({EwOperand::of(&x.t)}, ReduceAxes::everything(), false, std::nullopt, &all.t);
  EXPECT_EQ(all.data[0], 21.0f);
}

TEST(ReductionCpp, PostCodeTypesTheResult) {
  const char add[] = "template <typename T> T add(T a, T b) { return a + b; }";
  Buf x({1, 2, 3, 4}, {4});
  auto type_with = [&](const char* post) {
    Reduction r(kjit::ReductionCode{add, "", post}, EwOperand::of_int(0));
    return r.output_for({EwOperand::of(&x.t)}, ReduceAxes::everything(), false, std::nullopt).type;
  };
  EXPECT_EQ(type_with("template <typename T> T mean(T acc, int64_t n) { return acc / T(n); }"), kjit::EwType::kFloat32);
  EXPECT_EQ(type_with("double mean(double acc, int64_t n) { return acc / n; }"), kjit::EwType::kFloat64);
  EXPECT_EQ(type_with("template <typename T> auto mean(T acc, int64_t n) { return acc / n; }"), kjit::EwType::kFloat32);
  EXPECT_EQ(type_with("template <typename T> auto pos(T acc, int64_t) { return acc > 0; }"), kjit::EwType::kBool);
  Reduction positive(kjit::ReductionCode{add, "", "template <typename T> auto pos(T acc, int64_t) { return acc > 0; }"},
                     EwOperand::of_int(0));
  // dtype= is the result type, whatever post_code returns
  EXPECT_EQ(positive.output_for({EwOperand::of(&x.t)}, ReduceAxes::everything(), false, kjit::EwType::kFloat64).type,
            kjit::EwType::kFloat64);
}

TEST(ReductionCpp, RunAllocatingAsksForTheOutputsLayoutAndFillsIt) {
  Reduction sum(kjit::ReductionCode{"template <typename T> T add(T a, T b) { return a + b; }", "", ""},
                EwOperand::of_int(0));
  Buf x({1, 2, 3, 4, 5, 6}, {2, 3});
  for (bool keepdims : {false, true}) {
    for (int round = 0; round < 2; ++round) {  // the second call reuses the plan
      Buf out({-1, -1, -1}, keepdims ? std::vector<int64_t>{1, 3} : std::vector<int64_t>{3});
      int asked = 0;
      sum.run_allocating({EwOperand::of(&x.t)}, ReduceAxes::of({0}), keepdims, std::nullopt,
                         [&](size_t k, const kjit::EwOutput& layout, DLDevice device) -> const DLTensor* {
                           ++asked;
                           EXPECT_EQ(k, 0u);
                           EXPECT_EQ(layout.shape, out.shape);
                           EXPECT_EQ(layout.type, kjit::EwType::kFloat32);
                           EXPECT_EQ(layout.order, (keepdims ? std::vector<int>{0, 1} : std::vector<int>{0}));
                           EXPECT_EQ(device.device_type, kDLCPU);
                           return &out.t;
                         });
      EXPECT_EQ(asked, 1);
      EXPECT_EQ(out.data, (std::vector<float>{5, 7, 9}));
    }
  }
  Buf never({0}, {});
  EXPECT_THROW(sum.run_allocating({EwOperand::of(&x.t)}, ReduceAxes::of({2}), false, std::nullopt,
                                  [&](size_t, const kjit::EwOutput&, DLDevice) -> const DLTensor* {
                                    ADD_FAILURE() << "allocated for a call that fails to plan";
                                    return &never.t;
                                  }),
               kjit::ValueError);
}

TEST(ReductionCpp, RejectionsAreUserErrors) {
  Reduction max(kjit::ReductionCode{"template <typename T> T mx(T a, T b) { return a > b ? a : b; }", "", ""},
                std::nullopt);
  Buf x({1, 2, 3}, {3});
  EXPECT_THROW(max.output_for({EwOperand::of(&x.t)}, ReduceAxes::of({1}), false, std::nullopt), kjit::ValueError);
  Buf empty({}, {0});
  Buf out({0}, {});
  EXPECT_THROW(max.run({EwOperand::of(&empty.t)}, ReduceAxes::everything(), false, std::nullopt, &out.t),
               kjit::ValueError);
  EXPECT_THROW(Reduction(kjit::ReductionCode{"a + b", "", ""}, std::nullopt), kjit::SpecError);
  Buf deep({1}, std::vector<int64_t>(65, 1));  // more dims than the loops' index arrays hold
  EXPECT_THROW(max.output_for({EwOperand::of(&deep.t)}, ReduceAxes::everything(), false, std::nullopt),
               kjit::ValueError);
}

}  // namespace
