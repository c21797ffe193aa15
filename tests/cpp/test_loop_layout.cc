// The layout steps every planner shares (kjit/detail/loop_layout.h): the reorder
// and coalesce rules, and kjit::TensorIterator, kjit.elementwise's planner and
// kjit.reduction's planner laying one problem out alike.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "iterator/plan.h"
#include "kjit/detail/loop_layout.h"
#include "kjit/iterator.h"
#include "loop_operands.h"
#include "reduction/reduction_plan.h"

namespace {

using kjit::DimVector;
using kjit::detail::LoopLayout;

LoopLayout layout(const std::vector<int64_t>& shape, const std::vector<std::vector<int64_t>>& strides,
                  int n_outputs = 1, bool reduction = false) {
  LoopLayout l;
  l.shape = kjit_test::dims(shape);
  l.operands = kjit_test::operands_fastest_first(strides);
  l.n_outputs = n_outputs;
  l.reduction = reduction;
  return l;
}

std::vector<int64_t> vec(const DimVector& v) { return std::vector<int64_t>(v.begin(), v.end()); }

TEST(LoopLayout, OutputsDecideTheOrderThenInputs) {
  // Dims fastest first: a (3, 4) C-contiguous float output and a transposed input.
  LoopLayout l = layout({4, 3}, {{4, 16}, {12, 4}});
  kjit::detail::reorder_fastest_first(&l);
  EXPECT_EQ(vec(l.shape), (std::vector<int64_t>{4, 3}));  // the output keeps its order
  // A broadcast output dim leaves it to the input.
  l = layout({4, 3}, {{0, 4}, {12, 4}});
  kjit::detail::reorder_fastest_first(&l);
  EXPECT_EQ(vec(l.shape), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(vec(l.operands[1].strides), (std::vector<int64_t>{4, 12}));
}

TEST(LoopLayout, StridesCompareByMagnitude) {
  // A reversed view (negative strides) keeps its memory order.
  LoopLayout l = layout({3, 4}, {{-16, -4}}, 0);
  kjit::detail::reorder_fastest_first(&l);
  EXPECT_EQ(vec(l.shape), (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(vec(l.operands[0].strides), (std::vector<int64_t>{-4, -16}));
}

TEST(LoopLayout, AReductionsReducedDimsGoInnermost) {
  // Output (4,) over input (4, 8) C-contiguous, reducing dim 0 of the input (axis 0).
  LoopLayout l = layout({8, 4}, {{4, 0}, {4, 32}}, 1, true);
  kjit::detail::lay_out(&l);
  EXPECT_EQ(vec(l.shape), (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(vec(l.operands[0].strides), (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(vec(l.operands[1].strides), (std::vector<int64_t>{32, 4}));
}

TEST(LoopLayout, CoalesceMergesContiguousDimsAndSizeOneDims) {
  LoopLayout l = layout({4, 1, 3}, {{4, 0, 16}, {4, 0, 16}});
  kjit::detail::coalesce(&l);
  EXPECT_EQ(vec(l.shape), (std::vector<int64_t>{12}));
  EXPECT_EQ(vec(l.operands[1].strides), (std::vector<int64_t>{4}));
  l = layout({1, 5}, {{0, 8}});  // a size-1 dim takes the other's strides
  kjit::detail::coalesce(&l);
  EXPECT_EQ(vec(l.shape), (std::vector<int64_t>{5}));
  EXPECT_EQ(vec(l.operands[0].strides), (std::vector<int64_t>{8}));
  l = layout({4, 3}, {{4, 32}});  // a gap: two dims
  kjit::detail::coalesce(&l);
  EXPECT_EQ(vec(l.shape), (std::vector<int64_t>{4, 3}));
}

TEST(LoopLayout, TheIteratorAndTheElementwisePlannerLayOneProblemOutAlike) {
  // out (2, 3, 4) C-contiguous = a (2, 3, 4) with strides (1, 8, 2) + b (3, 1) broadcast.
  std::vector<float> out_data(24), a_data(24), b_data(3);
  std::vector<int64_t> shape{2, 3, 4}, out_strides{12, 4, 1}, a_strides{1, 8, 2}, b_shape{3, 1}, b_strides{1, 1};
  auto dl = [](void* data, std::vector<int64_t>& sh, std::vector<int64_t>& st) {
    DLTensor t{};
    t.data = data;
    t.device = {kDLCPU, 0};
    t.ndim = static_cast<int>(sh.size());
    t.dtype = {kDLFloat, 32, 1};
    t.shape = sh.data();
    t.strides = st.data();
    return t;
  };
  DLTensor o = dl(out_data.data(), shape, out_strides), a = dl(a_data.data(), shape, a_strides),
           b = dl(b_data.data(), b_shape, b_strides);
  const kjit::TensorIterator it = kjit::TensorIteratorConfig()
                                      .add_output(kjit::TensorView(&o))
                                      .add_input(kjit::TensorView(&a))
                                      .add_input(kjit::TensorView(&b))
                                      .build();
  kjit::detail::Operands ops(3);
  ops[0].strides = kjit::iterator::loop_strides(shape, out_strides, 4, 3);
  ops[1].strides = kjit::iterator::loop_strides(shape, a_strides, 4, 3);
  ops[2].strides = kjit::iterator::loop_strides(b_shape, b_strides, 4, 3);
  const LoopLayout loop = kjit::iterator::make_loop(shape, ops, 1);
  EXPECT_EQ(vec(loop.shape), vec(it.shape()));
  for (int op = 0; op < 3; ++op) {
    EXPECT_EQ(vec(loop.operands[op].strides), std::vector<int64_t>(it.strides(op), it.strides(op) + it.ndim()))
        << "operand " << op;
  }
}

TEST(LoopLayout, TheReductionPlannerSplitsTheSharedLayoutIntoKeptAndReduced) {
  // (5, 6, 7) float input, C-contiguous, reduced over axes 0 and 2 into a (6,) output.
  const std::vector<int64_t> shape{5, 6, 7};
  const kjit::red::RedDims d =
      kjit::red::plan_dims(shape, {true, false, true}, kjit_test::operands_slowest_first({{0, 4, 0}, {168, 28, 4}}));
  EXPECT_EQ(d.kept_shape, (std::vector<int64_t>{6}));
  EXPECT_EQ(d.kept_strides, (std::vector<int64_t>{4, 28}));
  EXPECT_EQ(d.reduced_shape, (std::vector<int64_t>{5, 7}));
  EXPECT_EQ(d.reduced_strides, (std::vector<int64_t>{0, 168, 0, 4}));
  EXPECT_EQ(d.outputs, 6);
  // The same problem through the layout steps: reduced dims innermost, then kept.
  LoopLayout l = layout({7, 6, 5}, {{0, 4, 0}, {4, 28, 168}}, 1, true);
  kjit::detail::lay_out(&l);
  EXPECT_EQ(vec(l.shape), (std::vector<int64_t>{7, 5, 6}));
}

}  // namespace
