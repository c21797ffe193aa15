// kjit::Elementwise from C++: the mirror of kjit.elementwise, on CPU DLTensors.
#include <gtest/gtest.h>
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/string.h>

#include <memory>
#include <vector>

#include "ffi_error.h"
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

TEST(ElementwiseCpp, AutoEntriesTypeTheirOutputByWhatTheyReturn) {
  Buf<int32_t> i({1, -2}, {2});
  Buf<float> f({0.5f, -1.5f}, {2});
  // decltype of the call: a comparison is bool, a double parameter makes double
  Elementwise gt("template <typename T> auto gt(T a, T b) { return a > b; }");
  EXPECT_EQ(gt.outputs_for({EwOperand::of(&f.t), EwOperand::of(&f.t)})[0].type, kjit::EwType::kBool);
  Elementwise scale("template <typename T> auto scale(T a, double s) { return a * s; }");
  EXPECT_EQ(scale.outputs_for({EwOperand::of(&f.t)})[0].type, kjit::EwType::kFloat64);
  // the compute type itself, and C++'s int from narrower integers, keep the compute type
  Elementwise twice("template <typename T> auto twice(T a) { return a + a; }");
  EXPECT_EQ(twice.outputs_for({EwOperand::of(&i.t)})[0].type, kjit::EwType::kInt32);
  EXPECT_EQ(twice.outputs_for({EwOperand::of(&f.t)})[0].type, kjit::EwType::kFloat32);
  Buf<float> out(std::vector<float>(2), {2});
  twice.run({EwOperand::of(&f.t)}, {&out.t});
  EXPECT_EQ(out.data, (std::vector<float>{1.0f, -3.0f}));
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

/// An EwAllocate that records each request and hands out float32 buffers with the
/// strides the request's layout asks for (or C-contiguous ones when told to).
struct RecordingAllocator {
  std::vector<kjit::EwOutput> requests;
  std::vector<std::unique_ptr<Buf<float>>> made;
  bool ignore_order = false;

  kjit::EwAllocate fn() {
    return [this](size_t, const kjit::EwOutput& spec, DLDevice) -> const DLTensor* {
      requests.push_back(spec);
      const size_t nd = spec.shape.size();
      std::vector<int64_t> strides(nd);
      int64_t step = 1, numel = 1;
      for (size_t i = nd; i-- > 0;) {
        const size_t dim = ignore_order ? i : static_cast<size_t>(spec.order[i]);
        strides[dim] = step;
        step *= spec.shape[dim];
      }
      for (int64_t d : spec.shape) numel *= d;
      made.push_back(std::make_unique<Buf<float>>(std::vector<float>(numel), spec.shape, strides));
      return &made.back()->t;
    };
  }
};

TEST(ElementwiseCpp, RunAllocatingFollowsTheInputLayout) {
  Elementwise add(kAdd);
  Buf<float> a({1, 2, 3, 4, 5, 6}, {2, 3}, {1, 2});  // a transposed (column-major) view
  Buf<float> b({10, 20, 30, 40, 50, 60}, {2, 3}, {1, 2});
  RecordingAllocator alloc;
  add.run_allocating({EwOperand::of(&a.t), EwOperand::of(&b.t)}, alloc.fn());
  ASSERT_EQ(alloc.requests.size(), 1u);
  EXPECT_EQ(alloc.requests[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(alloc.requests[0].type, kjit::EwType::kFloat32);
  EXPECT_EQ(alloc.requests[0].order, (std::vector<int>{1, 0}));  // dim 1 varies slowest, as in the inputs
  // Column-major storage of [[11, 33, 55], [22, 44, 66]].
  EXPECT_EQ(alloc.made[0]->data, (std::vector<float>{11, 22, 33, 44, 55, 66}));
  EXPECT_EQ(alloc.made[0]->strides, (std::vector<int64_t>{1, 2}));
}

TEST(ElementwiseCpp, RunAllocatingTakesAnyStridesTheAllocatorChooses) {
  // The plan cached for the first call's outputs must not be reused for outputs
  // with other strides: the second call's allocator ignores the requested order.
  Elementwise add(kAdd);
  Buf<float> a({1, 2, 3, 4, 5, 6}, {2, 3}, {1, 2});
  RecordingAllocator first, second;
  second.ignore_order = true;
  add.run_allocating({EwOperand::of(&a.t), EwOperand::of_float(1.0)}, first.fn());
  add.run_allocating({EwOperand::of(&a.t), EwOperand::of_float(1.0)}, second.fn());
  EXPECT_EQ(first.made[0]->data, (std::vector<float>{2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(second.made[0]->data, (std::vector<float>{2, 4, 6, 3, 5, 7}));  // row-major [[2, 4, 6], [3, 5, 7]]
}

TEST(ElementwiseCpp, RunAllocatingMakesEveryOutputAndChecksTheAllocator) {
  Elementwise divmod("template <typename T> void dm(T a, T b, T& q, T& r) { q = a / b; r = a - b * q; }", "", 2);
  Buf<float> a({7, 9}, {2}), b({2, 4}, {2});
  RecordingAllocator alloc;
  divmod.run_allocating({EwOperand::of(&a.t), EwOperand::of(&b.t)}, alloc.fn());
  ASSERT_EQ(alloc.made.size(), 2u);
  EXPECT_EQ(alloc.made[0]->data, (std::vector<float>{3.5f, 2.25f}));
  EXPECT_EQ(alloc.made[1]->data, (std::vector<float>{0, 0}));
  const kjit::EwAllocate none = [](size_t, const kjit::EwOutput&, DLDevice) -> const DLTensor* { return nullptr; };
  try {
    divmod.run_allocating({EwOperand::of(&a.t), EwOperand::of(&b.t)}, none);
    FAIL() << "no error";
  } catch (const kjit::InternalError& e) {
    EXPECT_STREQ(e.what(), "kjit internal error: an elementwise output allocator returned no tensor");
  }
  try {
    divmod.run_allocating({EwOperand::of(&a.t), EwOperand::of(&b.t)}, alloc.fn(), {EwOperand::of(&a.t)});
    FAIL() << "no error";
  } catch (const kjit::TypeError& e) {
    EXPECT_STREQ(e.what(), "dm: extra argument #0 must be a scalar");
  }
}

TEST(ElementwiseCpp, AnAllocatorMayRunElementwiseCalls) {
  // While the outer call holds its plan, the allocator runs the same call on the
  // same thread (which finds that plan as the thread's last) and calls of 1100
  // other layouts (enough to clear the engine's plan map).
  Elementwise add(kAdd);
  Buf<float> a({1, 2, 3}, {3}), b({10, 20, 30}, {3});
  RecordingAllocator outer, inner;
  const kjit::EwAllocate allocate = [&](size_t k, const kjit::EwOutput& layout, DLDevice device) {
    add.run_allocating({EwOperand::of(&a.t), EwOperand::of(&b.t)}, inner.fn());
    for (int n = 1; n <= 1100; ++n) {
      Buf<float> v(std::vector<float>(n, 1.0f), {n}), o(std::vector<float>(n), {n});
      add.run({EwOperand::of(&v.t), EwOperand::of_float(1.0)}, {&o.t});
      EXPECT_EQ(o.data[n - 1], 2.0f);
    }
    return outer.fn()(k, layout, device);
  };
  for (int call = 0; call < 3; ++call) {  // the later calls find their plan as the thread's last
    add.run_allocating({EwOperand::of(&a.t), EwOperand::of(&b.t)}, allocate);
    EXPECT_EQ(outer.made.back()->data, (std::vector<float>{11, 22, 33})) << call;
    EXPECT_EQ(inner.made.back()->data, (std::vector<float>{11, 22, 33})) << call;
  }
}

/// kjit.ew_function, the Python binding's call functions, called from C++.
TEST(ElementwiseFfi, NewOutputsComeBackAsTensors) {
  namespace ffi = tvm::ffi;
  auto made = ffi::Function::GetGlobalRequired("kjit.ew_create")(ffi::String(kAdd), ffi::String(""), int64_t{1},
                                                                 ffi::String(""), false)
                  .cast<ffi::Array<ffi::Any>>();
  const int64_t id = made[0].cast<int64_t>();
  Buf<float> a({1, 2, 3, 4, 5, 6}, {2, 3}, {1, 2});
  Buf<int32_t> b({10, 20, 30}, {3});
  ffi::Function numpy_rules =
      ffi::Function::GetGlobalRequired("kjit.ew_function")(id, int64_t{0}, true, false, int64_t{0})
          .cast<ffi::Function>();
  ffi::Tensor result = numpy_rules(&a.t, &b.t).cast<ffi::Tensor>();
  const DLTensor* r = result.GetDLTensorPtr();
  ASSERT_EQ(r->ndim, 2);
  EXPECT_EQ(r->dtype.bits, 64);  // NumPy 2: float32 + int32 -> float64
  EXPECT_EQ(r->strides[0], 1);   // the inputs' column-major layout
  EXPECT_EQ(r->strides[1], 2);
  const double* v = static_cast<const double*>(r->data);
  EXPECT_EQ(std::vector<double>(v, v + 6), (std::vector<double>{11, 12, 23, 24, 35, 36}));
  ffi::Function into = ffi::Function::GetGlobalRequired("kjit.ew_function")(id, int64_t{0}, true, true, int64_t{0})
                           .cast<ffi::Function>();
  Buf<float> out(std::vector<float>(3), {3});
  Buf<float> c({1, 2, 3}, {3});
  into(&c.t, &b.t, &out.t);  // the last num_outputs arguments are the outputs
  EXPECT_EQ(out.data, (std::vector<float>{11, 22, 33}));
  EXPECT_EQ(kjit_test::error_of(into, &out.t),
            "TypeError: add: expected at least one input before 1 output tensor(s) and 0 extra scalar(s), got 1 "
            "argument(s) in all");
  ffi::Function axpy = ffi::Function::GetGlobalRequired("kjit.ew_function")(
                           ffi::Function::GetGlobalRequired("kjit.ew_create")(
                               ffi::String("template <typename T> T axpy(T x, T y, T alpha) { return alpha * x + y; }"),
                               ffi::String(""), int64_t{1}, ffi::String(""), false)
                               .cast<ffi::Array<ffi::Any>>()[0]
                               .cast<int64_t>(),
                           int64_t{1}, true, false, int64_t{1})
                           .cast<ffi::Function>();
  ffi::Tensor t = axpy(&a.t, &b.t, 2.0).cast<ffi::Tensor>();  // the last argument is the extra scalar
  const DLTensor* tt = t.GetDLTensorPtr();
  EXPECT_EQ(tt->dtype.bits, 32);  // PyTorch: the float type wins
  const float* tv = static_cast<const float*>(tt->data);
  EXPECT_EQ(std::vector<float>(tv, tv + 6), (std::vector<float>{12, 14, 26, 28, 40, 42}));  // column-major, as `a`

  // Without a framework allocator (tvm-ffi sets torch's for torch inputs), kjit
  // cannot allocate device memory.
  Buf<float> dev({1, 2}, {2});
  dev.t.device = DLDevice{kDLCUDA, 0};
  EXPECT_EQ(kjit_test::error_of(numpy_rules, &dev.t, &dev.t),
            "TypeError: add: cannot allocate the output on CUDA for these tensors (only torch provides an allocator "
            "through DLPack); pass out=");
  ffi::Function::GetGlobalRequired("kjit.ew_free")(id);
  EXPECT_EQ(numpy_rules(&a.t, &b.t).cast<ffi::Tensor>().GetDLTensorPtr()->ndim,
            2);  // a function keeps its engine alive
}

/// kjit.ew_function runs only on what it takes: Python calls it without checking.
TEST(ElementwiseFfi, TensorFunctionsRunOnlyOnWhatTheyTake) {
  namespace ffi = tvm::ffi;
  const int64_t id = ffi::Function::GetGlobalRequired("kjit.ew_create")(ffi::String(kAdd), ffi::String(""), int64_t{1},
                                                                        ffi::String(""), false)
                         .cast<ffi::Array<ffi::Any>>()[0]
                         .cast<int64_t>();
  auto call_function = [&](int64_t promotion, bool scalar_inputs, bool into, int64_t n_extra = 0) {
    return ffi::Function::GetGlobalRequired("kjit.ew_function")(id, promotion, scalar_inputs, into, n_extra)
        .cast<ffi::Function>();
  };
  Buf<int32_t> a({1, 2, 3}, {3});
  ffi::Function tensors_only = call_function(0, false, false);
  EXPECT_EQ(tensors_only(&a.t, &a.t).cast<ffi::Tensor>().GetDLTensorPtr()->dtype.bits, 32);
  // A scalar (maybe a NumPy scalar tvm-ffi made a float) or anything else: None, nothing run.
  EXPECT_EQ(tensors_only(&a.t, 2.5).type_index(), kTVMFFINone);
  EXPECT_EQ(tensors_only(&a.t, ffi::String("x")).type_index(), kTVMFFINone);
  ffi::Function weak_scalars = call_function(1, true, false);
  ffi::Tensor r = weak_scalars(&a.t, 2.5).cast<ffi::Tensor>();
  EXPECT_EQ(r.GetDLTensorPtr()->dtype.code, kDLFloat);  // PyTorch: int32 + a float -> float32
  EXPECT_EQ(r.GetDLTensorPtr()->dtype.bits, 32);
  EXPECT_EQ(weak_scalars(&a.t, ffi::Array<ffi::Any>{1.0, 2.0}).type_index(), kTVMFFINone);  // not a complex here
  ffi::Function into = call_function(0, false, true);
  Buf<int32_t> out(std::vector<int32_t>(3), {3});
  EXPECT_TRUE(into(&a.t, &a.t, &out.t).cast<bool>());
  EXPECT_EQ(out.data, (std::vector<int32_t>{2, 4, 6}));
  EXPECT_EQ(into(&a.t, 1, &out.t).type_index(), kTVMFFINone);
  EXPECT_EQ(out.data, (std::vector<int32_t>{2, 4, 6}));  // untouched
  EXPECT_EQ(kjit_test::error_of(into, &out.t),
            "TypeError: add: expected at least one input before 1 output tensor(s) and 0 extra scalar(s), got 1 "
            "argument(s) in all");
  // Extra scalars come last and may be any number (they are cast to the compute type).
  const int64_t axpy_id = ffi::Function::GetGlobalRequired("kjit.ew_create")(
                              ffi::String("template <typename T> T axpy(T x, T y, T alpha) { return alpha * x + y; }"),
                              ffi::String(""), int64_t{1}, ffi::String(""), false)
                              .cast<ffi::Array<ffi::Any>>()[0]
                              .cast<int64_t>();
  ffi::Function axpy_into =
      ffi::Function::GetGlobalRequired("kjit.ew_function")(axpy_id, int64_t{0}, false, true, int64_t{1})
          .cast<ffi::Function>();
  EXPECT_TRUE(axpy_into(&a.t, &a.t, &out.t, 3).cast<bool>());
  EXPECT_EQ(out.data, (std::vector<int32_t>{4, 8, 12}));
  EXPECT_EQ(axpy_into(&a.t, &a.t, &out.t, &a.t).type_index(), kTVMFFINone);  // a tensor as the extra
  EXPECT_EQ(axpy_into(&a.t, &a.t, 2, 3).type_index(), kTVMFFINone);          // a scalar as the output
  EXPECT_EQ(out.data, (std::vector<int32_t>{4, 8, 12}));
  ffi::Function::GetGlobalRequired("kjit.ew_free")(axpy_id);
  Buf<int32_t> partial({0, 0, 0, 0}, {4});
  Buf<int32_t> lo(std::vector<int32_t>(), {3}), hi(std::vector<int32_t>(), {3});
  lo.t.data = partial.data.data();
  hi.t.data = partial.data.data() + 1;
  EXPECT_EQ(
      kjit_test::error_of(into, &lo.t, &lo.t, &hi.t).rfind("ValueError: add: out[0] partially overlaps input #0", 0),
      0u);
  ffi::Function::GetGlobalRequired("kjit.ew_free")(id);
}

TEST(ElementwiseCpp, FreshContiguousAllocationsReuseThePlanAndStayCorrect) {
  Elementwise add(kAdd);
  Buf<float> a({1, 2, 3, 4, 5, 6}, {2, 3}, {1, 2});
  for (int call = 0; call < 3; ++call) {  // the later calls take the hot path
    RecordingAllocator alloc;
    add.run_allocating({EwOperand::of(&a.t), EwOperand::of_float(call)}, alloc.fn(), {}, kjit::Promotion::kNumPy,
                       kjit::EwAllocation::kFreshContiguous);
    const float c = static_cast<float>(call);
    EXPECT_EQ(alloc.made[0]->data, (std::vector<float>{1 + c, 2 + c, 3 + c, 4 + c, 5 + c, 6 + c})) << call;
  }
}

TEST(ElementwiseCpp, ThreadCountFollowsTheSetting) {
  kjit::set_num_threads(3);
  EXPECT_EQ(kjit::get_num_threads(), 3);
  kjit::set_num_threads(0);
  EXPECT_GE(kjit::get_num_threads(), 1);
}

}  // namespace
