// The binding plan: which field binds, solves or checks each symbol, in order.
#include <gtest/gtest.h>

#include "kjit/errors.h"
#include "kjit/spec.h"
#include "signature/binding_plan.h"

namespace kjit {
namespace {

using Action = BindingStep::Action;

BindingPlan plan_of(const std::string& sig) { return make_binding_plan(parse_signature("f", sig)); }

TEST(BindingPlan, BindsAtFirstSightThenChecks) {
  BindingPlan p = plan_of("a: float32[n], b: float32[n]");
  ASSERT_EQ(p.steps.size(), 2u);
  EXPECT_EQ(p.steps[0].action, Action::kBind);
  EXPECT_EQ(p.steps[0].unknown, "n");
  EXPECT_EQ(p.steps[1].action, Action::kCheck);
  EXPECT_EQ(p.symbols, std::vector<std::string>{"n"});
}

TEST(BindingPlan, SolvesOneUnknownLinearDims) {
  BindingPlan p = plan_of("a: float32[m], b: float32[m + n], c: float32[n*k], d: float32[2*k + 1]");
  ASSERT_EQ(p.steps.size(), 4u);
  EXPECT_EQ(p.steps[1].action, Action::kSolve);
  EXPECT_EQ(p.steps[1].unknown, "n");
  EXPECT_EQ(p.steps[2].action, Action::kSolve);
  EXPECT_EQ(p.steps[2].unknown, "k");
  // k came from n*k, which fixes nothing when n = 0: d may still have to solve it.
  EXPECT_EQ(p.steps[3].action, Action::kCheckOrSolve);
  BindingPlan q = plan_of("a: float32[k], b: float32[2*k + 1]");
  EXPECT_EQ(q.steps[1].action, Action::kCheck);
}

TEST(BindingPlan, DefersDimsWithTwoUnknownsUntilLaterParamsBindThem) {
  BindingPlan p = plan_of("a: float32[m + n], b: float32[m]");
  ASSERT_EQ(p.steps.size(), 2u);
  EXPECT_EQ(p.steps[0].action, Action::kBind);   // b binds m first
  EXPECT_EQ(p.steps[1].action, Action::kSolve);  // then a solves n
  EXPECT_TRUE(p.steps[1].deferred);
}

TEST(BindingPlan, OptionalCarriersDecideAtRunTime) {
  BindingPlan p = plan_of("a: float32[m] optional, b: float32[m] optional; m > 0");
  ASSERT_EQ(p.steps.size(), 2u);
  EXPECT_EQ(p.steps[0].action, Action::kBind);
  EXPECT_TRUE(p.steps[0].in_optional);
  EXPECT_EQ(p.steps[1].action, Action::kCheckOrBind);
  EXPECT_EQ(p.constraint_guards, std::vector<std::string>{"m"});
  EXPECT_EQ(p.carriers[0], (std::vector<std::string>{"a", "b"}));
}

TEST(BindingPlan, ScalarNamedLikeASymbolTakesPart) {
  BindingPlan p = plan_of("a: float32[n], n: int32");
  ASSERT_EQ(p.steps.size(), 2u);
  EXPECT_EQ(p.steps[1].field, BindingStep::Field::kScalar);
  EXPECT_EQ(p.steps[1].action, Action::kCheck);
}

TEST(BindingPlan, ExplicitStridesBind) {
  BindingPlan p = plan_of("a: float32[n, m] strides[ld, 1]; ld >= m");
  ASSERT_EQ(p.steps.size(), 4u);
  EXPECT_EQ(p.steps[2].field, BindingStep::Field::kStride);
  EXPECT_EQ(p.steps[2].action, Action::kBind);
  EXPECT_EQ(p.steps[2].unknown, "ld");
}

TEST(BindingPlan, RejectsWhatCanNeverBeSolved) {
  EXPECT_THROW(plan_of("a: float32[k*k]"), SpecError);
  EXPECT_THROW(plan_of("a: float32[m + n]"), SpecError);
  EXPECT_THROW(plan_of("a: float32[n / 2]"), SpecError);
  // ... but a non-linear dim is fine once its symbol is bound elsewhere.
  EXPECT_NO_THROW(plan_of("a: float32[k*k], b: float32[k]"));
  EXPECT_NO_THROW(plan_of("a: float32[n / 2], b: float32[n]"));
}

}  // namespace
}  // namespace kjit
