// The call model (src/call): binding by position, keyword and default; the checks
// of a call's metadata with the stub's messages; the returned tensors' shapes.
#include <gtest/gtest.h>
#include <tvm/ffi/error.h>

#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "call/call_model.h"

namespace kjit {
namespace {

/// The "Kind: message" a failed model call raised, or "" when it passed.
std::string raised(int rc) {
  if (rc == 0) return "";
  try {
    raise_if_failed(rc);
  } catch (const tvm::ffi::Error& e) {
    return e.kind() + ": " + e.message();
  }
  return "no error raised";
}

/// A tensor's metadata: compact, on the CPU, no data.
struct Meta {
  std::vector<int64_t> shape;
  DLTensor t{};
  Meta(std::vector<int64_t> s, DLDataType dtype) : shape(std::move(s)) {
    t.device = DLDevice{kDLCPU, 0};
    t.ndim = static_cast<int32_t>(shape.size());
    t.dtype = dtype;
    t.shape = shape.data();
  }
  TVMFFIAny any() {
    TVMFFIAny a{};
    a.type_index = kTVMFFIDLTensorPtr;
    a.v_ptr = &t;
    return a;
  }
};

TVMFFIAny int_any(int64_t v) {
  TVMFFIAny a{};
  a.type_index = kTVMFFIInt;
  a.v_int64 = v;
  return a;
}

constexpr DLDataType kF32{kDLFloat, 32, 1};

std::string bind_error(const CallModel& m, size_t nargs, std::vector<std::string_view> kw) {
  std::vector<int32_t> from(m.callers().size());
  return raised(m.bind(nargs, kw.data(), kw.size(), from.data()));
}

TEST(CallModel, CallerParametersLeaveOutReturnedTensors) {
  CallModel m(parse_signature("split", "x: float32[n], lo: float32[k] return, hi: float32[n - k] return, k: int64"));
  ASSERT_EQ(m.callers().size(), 2u);
  EXPECT_EQ(m.callers()[0].name, "x");
  EXPECT_EQ(m.callers()[1].name, "k");
  EXPECT_EQ(m.callers()[1].slot, 3);
  EXPECT_EQ(m.stub_slots(), (std::vector<int32_t>{0, -1, -2, 1}));
}

TEST(CallModel, BindsPositionsKeywordsAndDefaults) {
  CallModel m(parse_signature("axpy", "x: float32[n], y: float32[n] out, alpha: float32 = 1.5, shift: int32 = -2"));
  std::vector<int32_t> from(4);
  std::vector<std::string_view> kw{"shift", "y"};
  ASSERT_EQ(m.bind(1, kw.data(), kw.size(), from.data()), 0);
  EXPECT_EQ(from, (std::vector<int32_t>{0, 2, kFromDefault, 1}));
  EXPECT_EQ(m.callers()[2].default_value.v_float64, 1.5);
  EXPECT_EQ(m.callers()[3].default_value.v_int64, -2);
}

TEST(CallModel, BindingMistakesAreTypeErrors) {
  CallModel m(parse_signature("axpy", "x: float32[n], y: float32[n] out, alpha: float32 = 1.0"));
  EXPECT_EQ(bind_error(m, 1, {}), "TypeError: axpy() missing required argument: 'y'");
  EXPECT_EQ(bind_error(m, 0, {"alpha"}), "TypeError: axpy() missing required arguments: 'x', 'y'");
  EXPECT_EQ(bind_error(m, 4, {}), "TypeError: axpy() takes 3 arguments (x, y, alpha) but 4 were given");
  EXPECT_EQ(bind_error(m, 2, {"beta"}),
            "TypeError: axpy() got an unexpected keyword argument 'beta' (its parameters: x, y, alpha)");
  EXPECT_EQ(bind_error(m, 2, {"x"}),
            "TypeError: axpy() got multiple values for argument 'x' (#0, also passed by "
            "position)");
}

TEST(CallModel, InfersReturnedShapesDtypesAndDevice) {
  CallModel m(parse_signature("f", "x: float32|float64[m, n], k: int64, y: dtype(x)[2*m + 1, n / k] return"));
  Meta x({3, 8}, DLDataType{kDLFloat, 64, 1});
  x.t.device = DLDevice{kDLCUDAHost, 0};
  std::vector<TVMFFIAny> args{x.any(), int_any(3)};
  OutputMeta out[1];
  ASSERT_EQ(raised(m.infer(args.data(), false, out)), "");
  EXPECT_EQ(std::vector<int64_t>(out[0].shape.begin(), out[0].shape.end()), (std::vector<int64_t>{7, 2}));
  EXPECT_EQ(out[0].dtype.bits, 64);
  EXPECT_EQ(out[0].device.device_type, kDLCUDAHost);
  args[1] = int_any(0);
  EXPECT_EQ(raised(m.infer(args.data(), false, out)),
            "ValueError: f: returned tensor 'y': shape[1] divides by zero: k = 0 (bound by argument 'k')");
}

TEST(CallModel, ChecksReadAsTheStubs) {
  CallModel m(parse_signature("f", "a: float32[n], b: float32[2*n] out; n % 4 == 0"));
  Meta a({4}, kF32), b({7}, kF32), c({6}, kF32), d({6}, kF32);
  std::vector<TVMFFIAny> args{a.any(), b.any()};
  EXPECT_EQ(raised(m.infer(args.data(), false, nullptr)),
            "ValueError: f: argument #1 'b': shape[0] must equal 2*n = 8 with n = 4 (bound by a.shape[0]), got 7");
  std::vector<TVMFFIAny> bad{int_any(1), b.any()};
  EXPECT_EQ(raised(m.infer(bad.data(), false, nullptr)),
            "TypeError: f: argument #0 'a': expected a tensor (float32[n]), got int 1");
  Meta e({3}, kF32), g({6}, kF32);
  std::vector<TVMFFIAny> constraint{e.any(), g.any()};
  EXPECT_EQ(raised(m.infer(constraint.data(), false, nullptr)),
            "ValueError: f: constraint 'n % 4 == 0' failed with n = 3 (bound by a.shape[0])");
}

TEST(CallModel, SymbolSourcesAreWholeDimsAndScalars) {
  CallModel m(parse_signature("f", "x: float32[m, 2*n], k: int64, y: float32[m, k] return"));
  auto source = [&](const CallModel& model, const char* symbol) {
    const CallModel::SymbolSource s = model.symbol_source(symbol);
    return std::make_tuple(s.caller, s.dim, s.scalar);
  };
  EXPECT_EQ(source(m, "m"), std::make_tuple(0, 0, false));
  EXPECT_EQ(source(m, "k"), std::make_tuple(1, 0, true));
  EXPECT_EQ(source(m, "n"), std::make_tuple(-1, 0, false));  // solved, not given
  // After a batch group a dim counts from the end; the group's carriers are listed.
  CallModel b(
      parse_signature("f", "x: float32[*batch, n, 4], r: float32[*batch] optional, y: float32[*batch, n] return"));
  EXPECT_EQ(source(b, "n"), std::make_tuple(0, -2, false));
  EXPECT_EQ(b.batch_sources("batch"), (std::vector<std::pair<int, int>>{{0, 2}, {1, 0}}));
}

TEST(CallModel, BatchGroupsBindLeadingDimsAndShapeReturnedTensors) {
  CallModel m(parse_signature("f", "x: float32[*batch, n], r: float32[*batch] optional, y: float32[*batch, n] return"));
  Meta x({2, 3, 4}, kF32), r({2, 3}, kF32), bad({2, 5}, kF32);
  std::vector<TVMFFIAny> args{x.any(), r.any()};
  OutputMeta out;
  ASSERT_EQ(m.infer(args.data(), false, &out), 0);
  EXPECT_EQ(std::vector<int64_t>(out.shape.data(), out.shape.data() + out.shape.size()),
            (std::vector<int64_t>{2, 3, 4}));
  std::vector<TVMFFIAny> wrong{x.any(), bad.any()};
  EXPECT_EQ(raised(m.infer(wrong.data(), false, &out)),
            "ValueError: f: argument #1 'r': leading dims must equal batch = (2, 3) (bound by x), got (2, 5)");
}

}  // namespace
}  // namespace kjit
