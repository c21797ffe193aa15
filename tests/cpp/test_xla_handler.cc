// The XLA FFI handlers `__kjit_xla_<fn>`, driven without JAX: a fake XLA_FFI_Api
// and call frames built by hand, as XLA's C API lays them out.
#include <gtest/gtest.h>

#ifndef KJIT_TEST_XLA_INCLUDE_DIR

TEST(XlaHandler, SkippedWithoutJax) {
  GTEST_SKIP() << "jax is not importable at configure time: no xla/ffi/api/c_api.h";
}

#else  // KJIT_TEST_XLA_INCLUDE_DIR

#include <dlfcn.h>
#include <xla/ffi/api/c_api.h>

#include <algorithm>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iterator>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "kjit/codegen.h"
#include "kjit/declare.h"
#include "kjit/errors.h"
#include "kjit/runtime.h"

// The fake runtime's error object (XLA_FFI_Error is opaque to handlers).
struct XLA_FFI_Error {
  std::string message;
  XLA_FFI_Error_Code code;
};

namespace kjit {
namespace {

// ---------------------------------------------------------------------------
// A fake XLA runtime: errors, stream, device ordinal
// ---------------------------------------------------------------------------

int g_live_errors = 0;     // created and not yet destroyed
void* g_stream = nullptr;  // what XLA_FFI_Stream_Get hands out
bool g_stream_fails = false;
int32_t g_device_ordinal = 0;
bool g_ordinal_fails = false;

XLA_FFI_Error* FakeErrorCreate(XLA_FFI_Error_Create_Args* args) {
  EXPECT_GE(args->struct_size, static_cast<size_t>(XLA_FFI_Error_Create_Args_STRUCT_SIZE));
  ++g_live_errors;
  return new XLA_FFI_Error{args->message != nullptr ? args->message : "", args->errc};
}

void FakeErrorGetMessage(XLA_FFI_Error_GetMessage_Args* args) { args->message = args->error->message.c_str(); }

void FakeErrorDestroy(XLA_FFI_Error_Destroy_Args* args) {
  EXPECT_GE(args->struct_size, static_cast<size_t>(XLA_FFI_Error_Destroy_Args_STRUCT_SIZE));
  --g_live_errors;
  delete args->error;
}

XLA_FFI_Error* FakeStreamGet(XLA_FFI_Stream_Get_Args* args) {
  EXPECT_GE(args->struct_size, static_cast<size_t>(XLA_FFI_Stream_Get_Args_STRUCT_SIZE));
  if (g_stream_fails) {
    ++g_live_errors;
    return new XLA_FFI_Error{"no stream here", XLA_FFI_Error_Code_UNAVAILABLE};
  }
  args->stream = g_stream;
  return nullptr;
}

XLA_FFI_Error* FakeDeviceOrdinalGet(XLA_FFI_DeviceOrdinal_Get_Args* args) {
  EXPECT_GE(args->struct_size, static_cast<size_t>(XLA_FFI_DeviceOrdinal_Get_Args_STRUCT_SIZE));
  if (g_ordinal_fails) {
    ++g_live_errors;
    return new XLA_FFI_Error{"no ordinal", XLA_FFI_Error_Code_INTERNAL};
  }
  args->device_ordinal = g_device_ordinal;
  return nullptr;
}

XLA_FFI_Api make_api() {
  XLA_FFI_Api api;
  std::memset(&api, 0, sizeof(api));
  api.struct_size = XLA_FFI_Api_STRUCT_SIZE;
  api.api_version.struct_size = XLA_FFI_Api_Version_STRUCT_SIZE;
  api.api_version.major_version = XLA_FFI_API_MAJOR;
  api.api_version.minor_version = XLA_FFI_API_MINOR;
  api.XLA_FFI_Error_Create = FakeErrorCreate;
  api.XLA_FFI_Error_GetMessage = FakeErrorGetMessage;
  api.XLA_FFI_Error_Destroy = FakeErrorDestroy;
  api.XLA_FFI_Stream_Get = FakeStreamGet;
  api.XLA_FFI_DeviceOrdinal_Get = FakeDeviceOrdinalGet;
  return api;
}

const char* code_name(XLA_FFI_Error_Code c) {
  switch (c) {
    case XLA_FFI_Error_Code_INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case XLA_FFI_Error_Code_INTERNAL:
      return "INTERNAL";
    case XLA_FFI_Error_Code_UNAVAILABLE:
      return "UNAVAILABLE";
    case XLA_FFI_Error_Code_OK:
      return "OK_CODE";
    default:
      return "OTHER_CODE";
  }
}

// ---------------------------------------------------------------------------
// Call frames built by hand
// ---------------------------------------------------------------------------

class Frame {
 public:
  explicit Frame(const XLA_FFI_Api* api) {
    std::memset(&frame_, 0, sizeof(frame_));
    frame_.struct_size = XLA_FFI_CallFrame_STRUCT_SIZE;
    frame_.api = api;
    frame_.stage = XLA_FFI_ExecutionStage_EXECUTE;
    frame_.args.struct_size = XLA_FFI_Args_STRUCT_SIZE;
    frame_.rets.struct_size = XLA_FFI_Rets_STRUCT_SIZE;
    frame_.attrs.struct_size = XLA_FFI_Attrs_STRUCT_SIZE;
  }
  Frame(const Frame&) = delete;
  Frame& operator=(const Frame&) = delete;

  Frame& arg(XLA_FFI_DataType dtype, void* data, std::vector<int64_t> dims) {
    arg_types_.push_back(XLA_FFI_ArgType_BUFFER);
    args_.push_back(buffer(dtype, data, std::move(dims)));
    return *this;
  }
  Frame& ret(XLA_FFI_DataType dtype, void* data, std::vector<int64_t> dims) {
    ret_types_.push_back(XLA_FFI_RetType_BUFFER);
    rets_.push_back(buffer(dtype, data, std::move(dims)));
    return *this;
  }
  /// An argument slot of any type tag and payload (not-a-buffer cases).
  Frame& raw_arg(int type, void* payload) {
    arg_types_.push_back(static_cast<ArgTypeBits>(type));
    args_.push_back(payload);
    return *this;
  }
  /// A scalar attribute holding `value` with XLA type `dtype`.
  template <typename T>
  Frame& attr(const std::string& name, XLA_FFI_DataType dtype, T value) {
    std::vector<unsigned char>& bytes = values_.emplace_back(sizeof(T));
    std::memcpy(bytes.data(), &value, sizeof(T));
    XLA_FFI_Scalar& s = scalars_.emplace_back();
    s.dtype = dtype;
    s.value = bytes.data();
    return raw_attr(name, XLA_FFI_AttrType_SCALAR, &s);
  }
  Frame& raw_attr(const std::string& name, XLA_FFI_AttrType type, void* attr) {
    const std::string& stored = names_.emplace_back(name);
    XLA_FFI_ByteSpan& span = spans_.emplace_back();
    span.ptr = stored.data();  // not NUL-terminated for XLA; len is the truth
    span.len = stored.size();
    attr_types_.push_back(type);
    attr_names_.push_back(&span);
    attrs_.push_back(attr);
    return *this;
  }

  XLA_FFI_CallFrame* get() {
    frame_.args.size = static_cast<int64_t>(args_.size());
    frame_.args.types = reinterpret_cast<XLA_FFI_ArgType*>(arg_types_.data());
    frame_.args.args = args_.data();
    frame_.rets.size = static_cast<int64_t>(rets_.size());
    frame_.rets.types = ret_types_.data();
    frame_.rets.rets = rets_.data();
    frame_.attrs.size = static_cast<int64_t>(attrs_.size());
    frame_.attrs.types = attr_types_.data();
    frame_.attrs.names = attr_names_.data();
    frame_.attrs.attrs = attrs_.data();
    return &frame_;
  }
  XLA_FFI_CallFrame& raw() { return frame_; }
  XLA_FFI_Buffer& buffer_at(size_t i) { return buffers_[i]; }

 private:
  XLA_FFI_Buffer* buffer(XLA_FFI_DataType dtype, void* data, std::vector<int64_t> dims) {
    std::vector<int64_t>& d = dims_.emplace_back(std::move(dims));
    XLA_FFI_Buffer& b = buffers_.emplace_back();
    std::memset(&b, 0, sizeof(b));
    b.struct_size = XLA_FFI_Buffer_STRUCT_SIZE;
    b.dtype = dtype;
    b.data = data;
    b.rank = static_cast<int64_t>(d.size());
    b.dims = d.data();
    return &b;
  }

  XLA_FFI_CallFrame frame_;
  // Raw storage: an argument tag outside the enum (raw_arg) is a valid int but not a
  // valid XLA_FFI_ArgType, and UBSan rejects such an enum value.
  using ArgTypeBits = std::underlying_type_t<XLA_FFI_ArgType>;
  std::vector<ArgTypeBits> arg_types_;
  std::vector<void*> args_;
  std::vector<XLA_FFI_RetType> ret_types_;
  std::vector<void*> rets_;
  std::vector<XLA_FFI_AttrType> attr_types_;
  std::vector<XLA_FFI_ByteSpan*> attr_names_;
  std::vector<void*> attrs_;
  std::deque<XLA_FFI_Buffer> buffers_;
  std::deque<std::vector<int64_t> > dims_;
  std::deque<std::string> names_;
  std::deque<XLA_FFI_ByteSpan> spans_;
  std::deque<XLA_FFI_Scalar> scalars_;
  std::deque<std::vector<unsigned char> > values_;
};

using Handler = XLA_FFI_Error* (*)(XLA_FFI_CallFrame*);

/// Runs a handler: "OK", or "<CODE>: <message>" read back through the fake API
/// (and the error destroyed through it).
std::string run(Handler h, Frame& f) {
  XLA_FFI_CallFrame* frame = f.get();
  XLA_FFI_Error* e = h(frame);
  if (e == nullptr) return "OK";
  XLA_FFI_Error_GetMessage_Args g;
  g.struct_size = XLA_FFI_Error_GetMessage_Args_STRUCT_SIZE;
  g.extension_start = nullptr;
  g.error = e;
  g.message = nullptr;
  frame->api->XLA_FFI_Error_GetMessage(&g);
  std::string out = std::string(code_name(e->code)) + ": " + (g.message ? g.message : "<null message>");
  XLA_FFI_Error_Destroy_Args d;
  d.struct_size = XLA_FFI_Error_Destroy_Args_STRUCT_SIZE;
  d.extension_start = nullptr;
  d.error = e;
  frame->api->XLA_FFI_Error_Destroy(&d);
  return out;
}

// ---------------------------------------------------------------------------
// The module under test
// ---------------------------------------------------------------------------

const char* kKernels = R"(
#include <kjit/kernel.h>
#include <complex>
#include <stdexcept>

void vadd(const kjit::TensorView x, const kjit::TensorView y, kjit::TensorView out, float scale) {
  const float* a = x.data<float>();
  const float* b = y.data<float>();
  float* o = out.data<float>();
  for (int64_t i = 0; i < out.numel(); ++i) o[i] = scale * (a[i] + b[i]);
}

namespace ops {
void rowsum(const kjit::TensorView a, kjit::TensorView out) {
  for (int64_t r = 0; r < a.size(0); ++r) {
    float s = 0;
    for (int64_t c = 0; c < a.size(1); ++c) s += a.data<float>()[r * a.size(1) + c];
    out.data<float>()[r] = s;
  }
}
}  // namespace ops

void negate(const float* x, kjit::TensorView out) {
  for (int64_t i = 0; i < out.numel(); ++i) out.data<float>()[i] = -x[i];
}

void probe(kjit::TensorView out, int32_t i, float f, uint16_t h, bool b, std::complex<double> c) {
  double* o = out.data<double>();
  o[0] = i;
  o[1] = f;
  o[2] = h;
  o[3] = b ? 1.0 : 0.0;
  o[4] = c.real();
  o[5] = c.imag();
}

void probe_u64(kjit::TensorView out, uint64_t u) { out.data<uint64_t>()[0] = u; }

void fail_kernel(kjit::TensorView out, int32_t how) {
  out.data<float>()[0] = 1.0f;
  if (how == 0) throw std::runtime_error("kernel exploded");
  if (how == 1) throw kjit::ValueError("bad value");
  if (how == 2) throw std::out_of_range("index 9 is past the end");
  if (how == 3) throw 42;
}
)";

std::vector<FunctionDecl> kernel_decls() {
  auto tokens = [](const std::string& name, std::vector<std::string> t) {
    FunctionDecl d;
    d.name = name;
    d.form = FunctionDecl::Form::kTokens;
    d.tokens = std::move(t);
    d.origin = "functions['" + name + "']";
    return d;
  };
  FunctionDecl rowsum;
  rowsum.name = "rowsum";
  rowsum.form = FunctionDecl::Form::kSignature;
  rowsum.signature = "a: float32[m, k], out: float32[m] out; k % 2 == 0";
  rowsum.origin = "functions['rowsum']";
  return {tokens("vadd", {"arg", "arg", "ret", "attr.scale:float32"}),
          rowsum,
          tokens("negate", {"arg", "ret"}),
          tokens("probe", {"ret", "attr.i", "attr.f", "attr.h:float16", "attr.b", "attr.c"}),
          tokens("probe_u64", {"ret", "attr.u"}),
          tokens("fail_kernel", {"ret", "attr.how"})};
}

InlineOptions xla_options() {
  InlineOptions o;
  o.xla_include_dir = KJIT_TEST_XLA_INCLUDE_DIR;
  return o;
}

/// dlsym of a handler from the module's (already loaded) library.
Handler handler_of(const Module& m, const std::string& fn) {
  void* lib = dlopen(m.path().c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) lib = dlopen(m.path().c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    ADD_FAILURE() << "dlopen " << m.path() << ": " << dlerror();
    return nullptr;
  }
  return reinterpret_cast<Handler>(dlsym(lib, xla_handler_symbol(fn).c_str()));
}

/// Restores CXX when it goes out of scope.
class ScopedCxx {
 public:
  explicit ScopedCxx(const char* cxx) {
    const char* old = std::getenv("CXX");
    if (old != nullptr) saved_ = old;
    if (cxx != nullptr) setenv("CXX", cxx, 1);
  }
  ~ScopedCxx() {
    if (saved_) {
      setenv("CXX", saved_->c_str(), 1);
    } else {
      unsetenv("CXX");
    }
  }

 private:
  std::optional<std::string> saved_;
};

class XlaHandler : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    module_.emplace(load_inline("xla_handlers", {kKernels}, kernel_decls(), xla_options()));
  }
  static void TearDownTestSuite() { module_.reset(); }

  void SetUp() override {
    ASSERT_TRUE(module_.has_value()) << "the test module did not load";
    api_ = make_api();
    g_live_errors = 0;
    g_stream = nullptr;
    g_stream_fails = false;
    g_device_ordinal = 0;
    g_ordinal_fails = false;
  }
  void TearDown() override { EXPECT_EQ(g_live_errors, 0) << "the handler leaked or double-freed XLA errors"; }

  Handler handler(const std::string& fn) {
    Handler h = handler_of(*module_, fn);
    EXPECT_NE(h, nullptr) << xla_handler_symbol(fn) << " is not exported";
    return h;
  }

  /// A vadd frame: x + y scaled into out, all float32[3].
  void vadd_frame(Frame& f, float scale = 2.0f) {
    f.arg(XLA_FFI_DataType_F32, x_, {3}).arg(XLA_FFI_DataType_F32, y_, {3}).ret(XLA_FFI_DataType_F32, out_, {3});
    f.attr("scale", XLA_FFI_DataType_F32, scale);
  }

  static std::optional<Module> module_;
  XLA_FFI_Api api_;
  float x_[3] = {1, 2, 3};
  float y_[3] = {10, 20, 30};
  float out_[3] = {-1, -1, -1};
};

std::optional<Module> XlaHandler::module_;

TEST_F(XlaHandler, ModuleExportsOneHandlerPerFunction) {
  EXPECT_TRUE(module_->has_xla_handlers());
  for (const char* fn : {"vadd", "rowsum", "negate", "probe", "probe_u64", "fail_kernel"}) {
    EXPECT_NE(handler_of(*module_, fn), nullptr) << fn;
  }
  EXPECT_EQ(xla_handler_symbol("vadd"), "__kjit_xla_vadd");
  EXPECT_EQ(module_->specs()[1].callee, "ops::rowsum");  // the signature form found the namespace
}

TEST_F(XlaHandler, ComputesIntoTheResultBuffer) {
  Frame f(&api_);
  vadd_frame(f, 2.0f);
  EXPECT_EQ(run(handler("vadd"), f), "OK");
  EXPECT_EQ(std::vector<float>(out_, out_ + 3), (std::vector<float>{22, 44, 66}));
}

TEST_F(XlaHandler, TypedPointerKernel) {
  float a[4] = {1, 2, 3, 4}, o[4] = {};
  Frame f(&api_);
  f.arg(XLA_FFI_DataType_F32, a, {4}).ret(XLA_FFI_DataType_F32, o, {4});
  EXPECT_EQ(run(handler("negate"), f), "OK");
  EXPECT_EQ(std::vector<float>(o, o + 4), (std::vector<float>{-1, -2, -3, -4}));
}

TEST_F(XlaHandler, SignatureFunctionWithANamespacedCallee) {
  float a[2][4] = {{1, 2, 3, 4}, {5, 6, 7, 8}}, o[2] = {};
  Frame f(&api_);
  f.arg(XLA_FFI_DataType_F32, a, {2, 4}).ret(XLA_FFI_DataType_F32, o, {2});
  EXPECT_EQ(run(handler("rowsum"), f), "OK");
  EXPECT_EQ(o[0], 10.0f);
  EXPECT_EQ(o[1], 26.0f);
}

TEST_F(XlaHandler, RankZeroBuffersWork) {
  float o[1] = {0};
  Frame f(&api_);
  f.ret(XLA_FFI_DataType_F32, o, {}).attr("how", XLA_FFI_DataType_S32, int32_t{7});
  EXPECT_EQ(run(handler("fail_kernel"), f), "OK");
  EXPECT_EQ(o[0], 1.0f);
}

// ---- the frame and the metadata query ----

TEST_F(XlaHandler, MetadataQueryFillsVersionAndTraits) {
  XLA_FFI_Metadata metadata;
  std::memset(&metadata, 0xab, sizeof(metadata));
  metadata.struct_size = XLA_FFI_Metadata_STRUCT_SIZE;
  XLA_FFI_Metadata_Extension ext;
  ext.extension_base.struct_size = XLA_FFI_Metadata_Extension_STRUCT_SIZE;
  ext.extension_base.type = XLA_FFI_Extension_Metadata;
  ext.extension_base.next = nullptr;
  ext.metadata = &metadata;
  Frame f(&api_);  // no args or attrs at all: the query must not look at them
  f.raw().extension_start = &ext.extension_base;
  EXPECT_EQ(run(handler("vadd"), f), "OK");
  EXPECT_EQ(metadata.api_version.struct_size, static_cast<size_t>(XLA_FFI_Api_Version_STRUCT_SIZE));
  EXPECT_EQ(metadata.api_version.extension_start, nullptr);
  EXPECT_EQ(metadata.api_version.major_version, XLA_FFI_API_MAJOR);
  EXPECT_EQ(metadata.api_version.minor_version, XLA_FFI_API_MINOR);
  EXPECT_EQ(metadata.traits, 0u);
}

TEST_F(XlaHandler, MetadataQueryWithTooSmallStructsIsAnError) {
  XLA_FFI_Metadata metadata{};
  metadata.struct_size = XLA_FFI_Metadata_STRUCT_SIZE - 4;
  XLA_FFI_Metadata_Extension ext{};
  ext.extension_base.struct_size = XLA_FFI_Metadata_Extension_STRUCT_SIZE;
  ext.extension_base.type = XLA_FFI_Extension_Metadata;
  ext.metadata = &metadata;
  Frame f(&api_);
  f.raw().extension_start = &ext.extension_base;
  std::string expected =
      "INVALID_ARGUMENT: kjit XLA handler 'vadd': the metadata query has structs smaller than "
      "XLA FFI API " +
      std::to_string(XLA_FFI_API_MAJOR) + "." + std::to_string(XLA_FFI_API_MINOR) + "'s";
  EXPECT_EQ(run(handler("vadd"), f), expected);
  metadata.struct_size = XLA_FFI_Metadata_STRUCT_SIZE;
  ext.metadata = nullptr;
  EXPECT_EQ(run(handler("vadd"), f), expected);
}

TEST_F(XlaHandler, TooSmallCallFrameIsInvalidArgument) {
  Frame f(&api_);
  vadd_frame(f);
  size_t small = offsetof(XLA_FFI_CallFrame, attrs);  // a frame from before attrs existed
  f.raw().struct_size = small;
  EXPECT_EQ(run(handler("vadd"), f),
            "INVALID_ARGUMENT: kjit XLA handler 'vadd': XLA_FFI_CallFrame is " + std::to_string(small) +
                " bytes, expected at least " + std::to_string(XLA_FFI_CallFrame_STRUCT_SIZE) +
                "; this jaxlib is older than the XLA FFI headers the handler was compiled with (API " +
                std::to_string(XLA_FFI_API_MAJOR) + "." + std::to_string(XLA_FFI_API_MINOR) + ")");
  EXPECT_EQ(out_[0], -1.0f);  // not run
}

TEST_F(XlaHandler, WrongApiMajorVersionNamesBothVersions) {
  api_.api_version.major_version = XLA_FFI_API_MAJOR + 1;
  api_.api_version.minor_version = 7;
  Frame f(&api_);
  vadd_frame(f);
  EXPECT_EQ(run(handler("vadd"), f), "INVALID_ARGUMENT: kjit XLA handler 'vadd': XLA FFI API version " +
                                         std::to_string(XLA_FFI_API_MAJOR + 1) +
                                         ".7, but the handler was compiled for " + std::to_string(XLA_FFI_API_MAJOR) +
                                         "." + std::to_string(XLA_FFI_API_MINOR));
  EXPECT_EQ(out_[0], -1.0f);
}

TEST_F(XlaHandler, NewerMinorVersionIsAccepted) {
  api_.api_version.minor_version = XLA_FFI_API_MINOR + 5;
  Frame f(&api_);
  vadd_frame(f);
  EXPECT_EQ(run(handler("vadd"), f), "OK");
}

TEST_F(XlaHandler, NonExecuteStagesReturnNullWithoutRunning) {
  for (XLA_FFI_ExecutionStage stage :
       {XLA_FFI_ExecutionStage_INSTANTIATE, XLA_FFI_ExecutionStage_PREPARE, XLA_FFI_ExecutionStage_INITIALIZE}) {
    Frame f(&api_);
    vadd_frame(f);
    f.raw().stage = stage;
    EXPECT_EQ(run(handler("vadd"), f), "OK") << stage;
    EXPECT_EQ(out_[0], -1.0f) << "ran in stage " << stage;
  }
  Frame empty(&api_);  // no buffers: nothing is looked at before EXECUTE
  empty.raw().stage = XLA_FFI_ExecutionStage_PREPARE;
  EXPECT_EQ(run(handler("vadd"), empty), "OK");
}

// ---- the handler's own checks ----

TEST_F(XlaHandler, WrongArgumentAndResultCounts) {
  Frame few(&api_);
  few.arg(XLA_FFI_DataType_F32, x_, {3}).ret(XLA_FFI_DataType_F32, out_, {3}).attr("scale", XLA_FFI_DataType_F32, 1.0f);
  EXPECT_EQ(run(handler("vadd"), few),
            "INVALID_ARGUMENT: vadd: expected 2 inputs (x, y) and 1 result (out), got 1 input and 1 result");
  Frame many(&api_);
  vadd_frame(many);
  many.ret(XLA_FFI_DataType_F32, out_, {3});
  EXPECT_EQ(run(handler("vadd"), many),
            "INVALID_ARGUMENT: vadd: expected 2 inputs (x, y) and 1 result (out), got 2 inputs and 2 results");
  Frame none(&api_);
  none.attr("how", XLA_FFI_DataType_S32, int32_t{0});
  EXPECT_EQ(run(handler("fail_kernel"), none),
            "INVALID_ARGUMENT: fail_kernel: expected 0 inputs (none) and 1 result (out), got 0 inputs and 0 results");
  EXPECT_EQ(out_[0], -1.0f);
}

TEST_F(XlaHandler, NonBufferArgument) {
  Frame f(&api_);
  XLA_FFI_Buffer fake{};
  fake.struct_size = 12;
  f.raw_arg(2, &fake).arg(XLA_FFI_DataType_F32, y_, {3}).ret(XLA_FFI_DataType_F32, out_, {3});
  f.attr("scale", XLA_FFI_DataType_F32, 1.0f);
  EXPECT_EQ(run(handler("vadd"), f), "INVALID_ARGUMENT: vadd: 'x' must be an XLA buffer (type 2, struct_size 12)");
}

TEST_F(XlaHandler, BufferStructTooSmallOrNull) {
  Frame f(&api_);
  vadd_frame(f);
  f.buffer_at(1).struct_size = 8;
  EXPECT_EQ(run(handler("vadd"), f), "INVALID_ARGUMENT: vadd: 'y' must be an XLA buffer (type 1, struct_size 8)");
  Frame g(&api_);
  g.arg(XLA_FFI_DataType_F32, x_, {3}).raw_arg(XLA_FFI_ArgType_BUFFER, nullptr).ret(XLA_FFI_DataType_F32, out_, {3});
  g.attr("scale", XLA_FFI_DataType_F32, 1.0f);
  EXPECT_EQ(run(handler("vadd"), g), "INVALID_ARGUMENT: vadd: 'y' must be an XLA buffer (type 1, struct_size 0)");
  EXPECT_EQ(out_[0], -1.0f);
}

TEST_F(XlaHandler, MissingAttr) {
  Frame f(&api_);
  f.arg(XLA_FFI_DataType_F32, x_, {3}).arg(XLA_FFI_DataType_F32, y_, {3}).ret(XLA_FFI_DataType_F32, out_, {3});
  EXPECT_EQ(run(handler("vadd"), f),
            "INVALID_ARGUMENT: vadd: missing attribute 'scale' (pass it as a keyword argument of the callable "
            "jax.ffi.ffi_call returns: ffi_call(...)(x, scale=...); its attrs: scale)");
}

TEST_F(XlaHandler, MissingOneOfSeveralAttrsListsThemAll) {
  double o[6] = {};
  Frame f(&api_);
  f.ret(XLA_FFI_DataType_F64, o, {6})
      .attr("i", XLA_FFI_DataType_S32, int32_t{1})
      .attr("f", XLA_FFI_DataType_F32, 1.0f)
      .attr("b", XLA_FFI_DataType_PRED, true)
      .attr("c", XLA_FFI_DataType_F64, 1.0);
  EXPECT_EQ(run(handler("probe"), f),
            "INVALID_ARGUMENT: probe: missing attribute 'h' (pass it as a keyword argument of the callable "
            "jax.ffi.ffi_call returns: ffi_call(...)(x, h=...); its attrs: i, f, h, b, c)");
}

TEST_F(XlaHandler, UnexpectedAttr) {
  Frame f(&api_);
  vadd_frame(f);
  f.attr("extra", XLA_FFI_DataType_S32, int32_t{1});
  EXPECT_EQ(run(handler("vadd"), f), "INVALID_ARGUMENT: vadd: unexpected attribute 'extra' (its attrs: scale)");
  Frame g(&api_);  // a function without attrs
  float a[2][2] = {}, o[2] = {};
  g.arg(XLA_FFI_DataType_F32, a, {2, 2}).ret(XLA_FFI_DataType_F32, o, {2}).attr("scale", XLA_FFI_DataType_F32, 1.0f);
  EXPECT_EQ(run(handler("rowsum"), g), "INVALID_ARGUMENT: rowsum: unexpected attribute 'scale' (its attrs: none)");
  EXPECT_EQ(out_[0], -1.0f);
}

TEST_F(XlaHandler, AttrNameMustMatchExactly) {
  // A prefix or extension of the name is another name (ByteSpans are not NUL-terminated).
  for (const char* name : {"scal", "scales", "Scale"}) {
    Frame f(&api_);
    f.arg(XLA_FFI_DataType_F32, x_, {3}).arg(XLA_FFI_DataType_F32, y_, {3}).ret(XLA_FFI_DataType_F32, out_, {3});
    f.attr(name, XLA_FFI_DataType_F32, 1.0f);
    EXPECT_EQ(run(handler("vadd"), f),
              std::string("INVALID_ARGUMENT: vadd: unexpected attribute '") + name + "' (its attrs: scale)");
  }
}

TEST_F(XlaHandler, NonScalarAttr) {
  float values[2] = {1, 2};
  XLA_FFI_Array array{XLA_FFI_DataType_F32, 2, values};
  Frame f(&api_);
  f.arg(XLA_FFI_DataType_F32, x_, {3}).arg(XLA_FFI_DataType_F32, y_, {3}).ret(XLA_FFI_DataType_F32, out_, {3});
  f.raw_attr("scale", XLA_FFI_AttrType_ARRAY, &array);
  EXPECT_EQ(run(handler("vadd"), f),
            "INVALID_ARGUMENT: vadd: attribute 'scale' must be a scalar (e.g. np.float32(2.0)), got an XLA attr of "
            "type 1");
  Frame g(&api_);
  XLA_FFI_ByteSpan text{"2.0", 3};
  g.arg(XLA_FFI_DataType_F32, x_, {3}).arg(XLA_FFI_DataType_F32, y_, {3}).ret(XLA_FFI_DataType_F32, out_, {3});
  g.raw_attr("scale", XLA_FFI_AttrType_STRING, &text);
  EXPECT_EQ(run(handler("vadd"), g),
            "INVALID_ARGUMENT: vadd: attribute 'scale' must be a scalar (e.g. np.float32(2.0)), got an XLA attr of "
            "type 4");
  EXPECT_EQ(out_[0], -1.0f);
}

// ---- attr dtype conversions reach the kernel ----

class XlaHandlerAttrs : public XlaHandler {
 protected:
  /// Runs probe with the given attrs; out holds i, f, h (raw bits), b, re(c), im(c).
  template <typename I, typename F, typename H, typename B, typename C>
  std::string probe(XLA_FFI_DataType ti, I i, XLA_FFI_DataType tf, F f, XLA_FFI_DataType th, H h, XLA_FFI_DataType tb,
                    B b, XLA_FFI_DataType tc, C c) {
    std::fill(std::begin(out), std::end(out), -99.0);
    Frame fr(&api_);
    fr.ret(XLA_FFI_DataType_F64, out, {6}).attr("i", ti, i).attr("f", tf, f).attr("h", th, h).attr("b", tb, b);
    fr.attr("c", tc, c);
    return run(handler("probe"), fr);
  }
  std::string probe_defaults_with_i(XLA_FFI_DataType ti, int64_t storage_i) {
    std::fill(std::begin(out), std::end(out), -99.0);
    Frame fr(&api_);
    fr.ret(XLA_FFI_DataType_F64, out, {6}).attr("i", ti, storage_i).attr("f", XLA_FFI_DataType_F32, 0.5f);
    fr.attr("h", XLA_FFI_DataType_U16, uint16_t{0}).attr("b", XLA_FFI_DataType_PRED, false);
    fr.attr("c", XLA_FFI_DataType_F64, 0.0);
    return run(handler("probe"), fr);
  }
  double out[6];
};

TEST_F(XlaHandlerAttrs, NativeTypes) {
  EXPECT_EQ(
      probe(XLA_FFI_DataType_S32, int32_t{-7}, XLA_FFI_DataType_F32, 1.25f, XLA_FFI_DataType_U16, uint16_t{0x3c00},
            XLA_FFI_DataType_PRED, true, XLA_FFI_DataType_C128, std::complex<double>(1.5, -2.5)),
      "OK");
  EXPECT_EQ(out[0], -7.0);
  EXPECT_EQ(out[1], 1.25);
  EXPECT_EQ(out[2], double{0x3c00});
  EXPECT_EQ(out[3], 1.0);
  EXPECT_EQ(out[4], 1.5);
  EXPECT_EQ(out[5], -2.5);
}

TEST_F(XlaHandlerAttrs, AttrsMatchByNameNotPosition) {
  std::fill(std::begin(out), std::end(out), -99.0);
  Frame fr(&api_);
  fr.ret(XLA_FFI_DataType_F64, out, {6})
      .attr("c", XLA_FFI_DataType_F64, 6.0)
      .attr("b", XLA_FFI_DataType_PRED, true)
      .attr("h", XLA_FFI_DataType_U16, uint16_t{4})
      .attr("f", XLA_FFI_DataType_F32, 2.0f)
      .attr("i", XLA_FFI_DataType_S32, int32_t{1});
  EXPECT_EQ(run(handler("probe"), fr), "OK");
  EXPECT_EQ(std::vector<double>(out, out + 6), (std::vector<double>{1, 2, 4, 1, 6, 0}));
}

TEST_F(XlaHandlerAttrs, IntAttrFromOtherIntegerTypes) {
  EXPECT_EQ(probe(XLA_FFI_DataType_S64, int64_t{123456}, XLA_FFI_DataType_F32, 0.f, XLA_FFI_DataType_U16, uint16_t{0},
                  XLA_FFI_DataType_PRED, false, XLA_FFI_DataType_F64, 0.0),
            "OK");
  EXPECT_EQ(out[0], 123456.0);
  EXPECT_EQ(probe(XLA_FFI_DataType_S8, int8_t{-5}, XLA_FFI_DataType_F32, 0.f, XLA_FFI_DataType_U16, uint16_t{0},
                  XLA_FFI_DataType_PRED, false, XLA_FFI_DataType_F64, 0.0),
            "OK");
  EXPECT_EQ(out[0], -5.0);
  EXPECT_EQ(probe(XLA_FFI_DataType_U32, uint32_t{4000000}, XLA_FFI_DataType_F32, 0.f, XLA_FFI_DataType_U16, uint16_t{0},
                  XLA_FFI_DataType_PRED, false, XLA_FFI_DataType_F64, 0.0),
            "OK");
  EXPECT_EQ(out[0], 4000000.0);
}

TEST_F(XlaHandlerAttrs, IntAttrOutOfRangeIsTheStubsRangeCheck) {
  EXPECT_EQ(probe_defaults_with_i(XLA_FFI_DataType_S64, int64_t{1} << 40),
            "INVALID_ARGUMENT: ValueError: probe: argument #1 'i': 1099511627776 is out of range for int32 "
            "[-2147483648, 2147483647]");
  EXPECT_EQ(out[0], -99.0);
}

TEST_F(XlaHandlerAttrs, FloatForAnIntAttrIsATypeError) {
  EXPECT_EQ(probe(XLA_FFI_DataType_F32, 3.0f, XLA_FFI_DataType_F32, 0.f, XLA_FFI_DataType_U16, uint16_t{0},
                  XLA_FFI_DataType_PRED, false, XLA_FFI_DataType_F64, 0.0),
            "INVALID_ARGUMENT: TypeError: probe: argument #1 'i': expected an int (int32), got float 3");
}

TEST_F(XlaHandlerAttrs, Float32AttrFromF64AndIntegers) {
  EXPECT_EQ(probe(XLA_FFI_DataType_S32, int32_t{0}, XLA_FFI_DataType_F64, 0.1, XLA_FFI_DataType_U16, uint16_t{0},
                  XLA_FFI_DataType_PRED, false, XLA_FFI_DataType_F64, 0.0),
            "OK");
  EXPECT_EQ(out[1], static_cast<double>(0.1f));  // narrowed to float on the way to the kernel
  EXPECT_EQ(probe(XLA_FFI_DataType_S32, int32_t{0}, XLA_FFI_DataType_S32, int32_t{-3}, XLA_FFI_DataType_U16,
                  uint16_t{0}, XLA_FFI_DataType_PRED, false, XLA_FFI_DataType_F64, 0.0),
            "OK");
  EXPECT_EQ(out[1], -3.0);
}

TEST_F(XlaHandlerAttrs, Float16AttrFromRawBitsF16F32AndBF16) {
  struct Case {
    XLA_FFI_DataType type;
    uint32_t storage;  // the bytes XLA hands over (little endian)
    uint16_t bits;     // what the kernel must see
  };
  float one_and_half = 1.5f, third = 0.333251953125f /* exactly 0x3555 */, big = 1e6f;
  uint32_t f32_15, f32_third, f32_big;
  std::memcpy(&f32_15, &one_and_half, 4);
  std::memcpy(&f32_third, &third, 4);
  std::memcpy(&f32_big, &big, 4);
  for (const Case& c :
       {Case{XLA_FFI_DataType_U16, 0x3555, 0x3555},  // brainevent: raw bits pass through
        Case{XLA_FFI_DataType_U16, 0xc000, 0xc000},  // -2
        Case{XLA_FFI_DataType_U16, 0x0001, 0x0001},  // smallest subnormal
        Case{XLA_FFI_DataType_U16, 0x7c00, 0x7c00},  // +inf
        Case{XLA_FFI_DataType_F16, 0x3e00, 0x3e00},  // an F16 scalar: its bits
        Case{XLA_FFI_DataType_F32, f32_15, 0x3e00},  // 1.5f rounds to half
        Case{XLA_FFI_DataType_F32, f32_third, 0x3555}, Case{XLA_FFI_DataType_F32, f32_big, 0x7c00},  // overflows to inf
        Case{XLA_FFI_DataType_BF16, 0x3fc0, 0x3e00}}) {                                              // bfloat16 1.5
    std::string r = probe(XLA_FFI_DataType_S32, int32_t{0}, XLA_FFI_DataType_F32, 0.f, c.type, c.storage,
                          XLA_FFI_DataType_PRED, false, XLA_FFI_DataType_F64, 0.0);
    EXPECT_EQ(r, "OK") << c.type << " " << c.storage;
    EXPECT_EQ(out[2], static_cast<double>(c.bits)) << "XLA type " << c.type << ", storage 0x" << std::hex << c.storage;
  }
}

TEST_F(XlaHandlerAttrs, BoolAttrFromPredAndIntegers) {
  EXPECT_EQ(probe(XLA_FFI_DataType_S32, int32_t{0}, XLA_FFI_DataType_F32, 0.f, XLA_FFI_DataType_U16, uint16_t{0},
                  XLA_FFI_DataType_PRED, true, XLA_FFI_DataType_F64, 0.0),
            "OK");
  EXPECT_EQ(out[3], 1.0);
  EXPECT_EQ(probe(XLA_FFI_DataType_S32, int32_t{0}, XLA_FFI_DataType_F32, 0.f, XLA_FFI_DataType_U16, uint16_t{0},
                  XLA_FFI_DataType_PRED, false, XLA_FFI_DataType_F64, 0.0),
            "OK");
  EXPECT_EQ(out[3], 0.0);
  EXPECT_EQ(probe(XLA_FFI_DataType_S32, int32_t{0}, XLA_FFI_DataType_F32, 0.f, XLA_FFI_DataType_U16, uint16_t{0},
                  XLA_FFI_DataType_S32, int32_t{1}, XLA_FFI_DataType_F64, 0.0),
            "OK");
  EXPECT_EQ(out[3], 1.0);
  EXPECT_EQ(probe(XLA_FFI_DataType_S32, int32_t{0}, XLA_FFI_DataType_F32, 0.f, XLA_FFI_DataType_U16, uint16_t{0},
                  XLA_FFI_DataType_S32, int32_t{2}, XLA_FFI_DataType_F64, 0.0),
            "INVALID_ARGUMENT: ValueError: probe: argument #4 'b': expected a bool (True/False or 0/1), got int 2");
}

TEST_F(XlaHandlerAttrs, ComplexAttrFromC64C128AndReals) {
  EXPECT_EQ(probe(XLA_FFI_DataType_S32, int32_t{0}, XLA_FFI_DataType_F32, 0.f, XLA_FFI_DataType_U16, uint16_t{0},
                  XLA_FFI_DataType_PRED, false, XLA_FFI_DataType_C64, std::complex<float>(0.5f, 4.0f)),
            "OK");
  EXPECT_EQ(out[4], 0.5);
  EXPECT_EQ(out[5], 4.0);
  EXPECT_EQ(probe(XLA_FFI_DataType_S32, int32_t{0}, XLA_FFI_DataType_F32, 0.f, XLA_FFI_DataType_U16, uint16_t{0},
                  XLA_FFI_DataType_PRED, false, XLA_FFI_DataType_S64, int64_t{-3}),
            "OK");
  EXPECT_EQ(out[4], -3.0);
  EXPECT_EQ(out[5], 0.0);
}

TEST_F(XlaHandlerAttrs, ComplexForARealAttrIsRejected) {
  EXPECT_EQ(probe(XLA_FFI_DataType_S32, int32_t{0}, XLA_FFI_DataType_C64, std::complex<float>(1, 1),
                  XLA_FFI_DataType_U16, uint16_t{0}, XLA_FFI_DataType_PRED, false, XLA_FFI_DataType_F64, 0.0),
            "INVALID_ARGUMENT: probe: attribute 'f' must be a real number, got complex64");
}

TEST_F(XlaHandlerAttrs, UnsupportedScalarTypeIsRejected) {
  EXPECT_EQ(probe(XLA_FFI_DataType_S32, int32_t{0}, XLA_FFI_DataType_F8E4M3FN, uint8_t{0x38}, XLA_FFI_DataType_U16,
                  uint16_t{0}, XLA_FFI_DataType_PRED, false, XLA_FFI_DataType_F64, 0.0),
            "INVALID_ARGUMENT: probe: attribute 'f' must be a bool, integer, float or complex scalar, got an "
            "unsupported XLA type");
}

TEST_F(XlaHandlerAttrs, Uint64AttrBelowTwoToThe63) {
  uint64_t o[1] = {0};
  Frame f(&api_);
  f.ret(XLA_FFI_DataType_U64, o, {1}).attr("u", XLA_FFI_DataType_U64, uint64_t{1} << 62);
  EXPECT_EQ(run(handler("probe_u64"), f), "OK");
  EXPECT_EQ(o[0], uint64_t{1} << 62);
}

// A U64 attr above INT64_MAX travels by pointer and reaches a uint64 parameter intact.
TEST_F(XlaHandlerAttrs, Uint64AttrAtOrAboveTwoToThe63ReachesTheKernel) {
  uint64_t o[1] = {0};
  const uint64_t big = (uint64_t{1} << 63) + 5;
  Frame f(&api_);
  f.ret(XLA_FFI_DataType_U64, o, {1}).attr("u", XLA_FFI_DataType_U64, big);
  EXPECT_EQ(run(handler("probe_u64"), f), "OK");
  EXPECT_EQ(o[0], big);
}

// ---- the stub's checks, through the handler ----

TEST_F(XlaHandler, DtypeMismatchWithATypedPointer) {
  double xd[3] = {1, 2, 3};
  float o[3] = {};
  Frame f(&api_);
  f.arg(XLA_FFI_DataType_F64, xd, {3}).ret(XLA_FFI_DataType_F32, o, {3});
  EXPECT_EQ(run(handler("negate"), f),
            "INVALID_ARGUMENT: TypeError: negate: argument #0 'x': dtype must be float32, got float64");
  Frame g(&api_);
  g.arg(XLA_FFI_DataType_BF16, xd, {3}).ret(XLA_FFI_DataType_F32, o, {3});
  EXPECT_EQ(run(handler("negate"), g),
            "INVALID_ARGUMENT: TypeError: negate: argument #0 'x': dtype must be float32, got bfloat16");
  EXPECT_EQ(o[0], 0.0f);
}

TEST_F(XlaHandler, RankCheck) {
  float a[4] = {}, o[2] = {};
  Frame f(&api_);
  f.arg(XLA_FFI_DataType_F32, a, {4}).ret(XLA_FFI_DataType_F32, o, {2});
  EXPECT_EQ(run(handler("rowsum"), f),
            "INVALID_ARGUMENT: TypeError: rowsum: argument #0 'a': ndim must be 2 (float32[m, k]), got 1");
}

TEST_F(XlaHandler, ShapeCheck) {
  float a[2][2] = {}, o[3] = {};
  Frame f(&api_);
  f.arg(XLA_FFI_DataType_F32, a, {2, 2}).ret(XLA_FFI_DataType_F32, o, {3});
  EXPECT_EQ(run(handler("rowsum"), f),
            "INVALID_ARGUMENT: ValueError: rowsum: argument #1 'out': shape[0] must equal m = 2 (bound by "
            "a.shape[0]), got 3");
}

TEST_F(XlaHandler, ConstraintCheck) {
  float a[2][3] = {}, o[2] = {-1, -1};
  Frame f(&api_);
  f.arg(XLA_FFI_DataType_F32, a, {2, 3}).ret(XLA_FFI_DataType_F32, o, {2});
  EXPECT_EQ(run(handler("rowsum"), f),
            "INVALID_ARGUMENT: ValueError: rowsum: constraint 'k % 2 == 0' failed with k = 3 (bound by a.shape[1])");
  EXPECT_EQ(o[0], -1.0f);
}

TEST_F(XlaHandler, NullDataOfANonEmptyBuffer) {
  float o[2] = {};
  Frame f(&api_);
  f.arg(XLA_FFI_DataType_F32, nullptr, {2, 2}).ret(XLA_FFI_DataType_F32, o, {2});
  EXPECT_EQ(run(handler("rowsum"), f),
            "INVALID_ARGUMENT: ValueError: rowsum: argument #0 'a': data pointer is NULL but the tensor is not empty");
}

// ---- kernel exceptions ----

TEST_F(XlaHandler, KernelExceptionsMapToErrorCodes) {
  auto call = [&](int32_t how) {
    float o[1] = {0};
    Frame f(&api_);
    f.ret(XLA_FFI_DataType_F32, o, {1}).attr("how", XLA_FFI_DataType_S32, how);
    return run(handler("fail_kernel"), f);
  };
  EXPECT_EQ(call(0), "INTERNAL: RuntimeError: fail_kernel: kernel exploded");
  EXPECT_EQ(call(1), "INVALID_ARGUMENT: ValueError: fail_kernel: bad value");
  EXPECT_EQ(call(2), "INVALID_ARGUMENT: IndexError: fail_kernel: index 9 is past the end");
  EXPECT_EQ(call(3), "INTERNAL: RuntimeError: fail_kernel: the kernel threw an exception that is not a std::exception");
  EXPECT_EQ(call(4), "OK");
}

// ---- modules, flags and compilers ----

TEST(XlaHandlerModule, WithoutTheIncludeDirThereAreNoHandlers) {
  const char* src = "#include <kjit/kernel.h>\nvoid copy1(const float* x, float* y) { y[0] = x[0]; }\n";
  FunctionDecl d;
  d.name = "copy1";
  d.form = FunctionDecl::Form::kInfer;
  d.origin = "functions['copy1']";
  Module plain = load_inline("xla_plain", {src}, std::vector<FunctionDecl>{d});
  Module with = load_inline("xla_plain", {src}, std::vector<FunctionDecl>{d}, xla_options());
  EXPECT_FALSE(plain.has_xla_handlers());
  EXPECT_TRUE(with.has_xla_handlers());
  EXPECT_NE(plain.key(), with.key());
  EXPECT_NE(plain.path(), with.path());
  EXPECT_EQ(handler_of(plain, "copy1"), nullptr);
  EXPECT_NE(handler_of(with, "copy1"), nullptr);
  EXPECT_EQ(plain.full_source().find("__kjit_xla_"), std::string::npos);
  EXPECT_NE(with.full_source().find("extern \"C\" __attribute__((visibility(\"default\"))) XLA_FFI_Error* "
                                    "__kjit_xla_copy1(XLA_FFI_CallFrame* frame)"),
            std::string::npos);
  EXPECT_NE(with.full_source().find("#include <xla/ffi/api/c_api.h>"), std::string::npos);
}

/// The handler test module under `cxx` with -Wall -Wextra -Werror, compiled now
/// (force_rebuild), not found in the cache.
void compile_handlers_with_werror(const std::string& name, const char* cxx) {
  ScopedCxx scoped(cxx);
  InlineOptions o = xla_options();
  o.extra_cflags = {"-Wall", "-Wextra", "-Werror"};
  o.force_rebuild = true;
  Module m = load_inline(name, {kKernels}, kernel_decls(), o);
  EXPECT_FALSE(m.cache_hit());
  EXPECT_TRUE(m.has_xla_handlers());
  XLA_FFI_Api api = make_api();
  float x[2] = {1, 2}, y[2] = {3, 4}, out[2] = {};
  Frame f(&api);
  f.arg(XLA_FFI_DataType_F32, x, {2}).arg(XLA_FFI_DataType_F32, y, {2}).ret(XLA_FFI_DataType_F32, out, {2});
  f.attr("scale", XLA_FFI_DataType_F32, 0.5f);
  Handler h = handler_of(m, "vadd");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(run(h, f), "OK");
  EXPECT_EQ(out[0], 2.0f);
  EXPECT_EQ(out[1], 3.0f);
}

TEST(XlaHandlerModule, CompilesWithWerrorUnderGcc) {
  if (std::system("g++ --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "g++ is not installed";
  compile_handlers_with_werror("xla_werror_gcc", "g++");
}

// XLA prelude helpers a module does not use must not warn under clang.
TEST(XlaHandlerModule, CompilesWithWerrorUnderClang) {
  if (std::system("clang++ --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "clang++ is not installed";
  compile_handlers_with_werror("xla_werror_clang", "clang++");
}

// ... nor under g++ when no function has an attr.
TEST(XlaHandlerModule, ModuleWithoutAttrsCompilesWithWerror) {
  const char* src = "#include <kjit/kernel.h>\nvoid copy2(const float* x, float* y) { y[0] = x[0]; }\n";
  FunctionDecl d;
  d.name = "copy2";
  d.form = FunctionDecl::Form::kInfer;
  d.origin = "functions['copy2']";
  ScopedCxx scoped("g++");
  InlineOptions o = xla_options();
  o.extra_cflags = {"-Wall", "-Wextra", "-Werror"};
  Module m = load_inline("xla_werror_noattr", {src}, std::vector<FunctionDecl>{d}, o);
  EXPECT_TRUE(m.has_xla_handlers());
}

// A @cuda module builds with handlers on a machine without CUDA (the host compiler
// sees only DLTensor descriptors). The fake buffers are host memory, so the kernel
// can report what it was given: the stream from XLA_FFI_Stream_Get and the device
// from XLA_FFI_DeviceOrdinal_Get.
const char* kCudaKernels = R"(
#include <kjit/kernel.h>
void on_cuda(const kjit::TensorView a, kjit::TensorView info, int32_t tag, kjit::Stream stream) {
  int64_t* o = info.data<int64_t>();
  o[0] = reinterpret_cast<int64_t>(stream);
  o[1] = info.device().device_id;
  o[2] = a.device().device_type;
  o[3] = tag;
}
)";

FunctionDecl cuda_decl() {
  FunctionDecl d;
  d.name = "on_cuda";
  d.form = FunctionDecl::Form::kSignature;
  d.signature = "a: float32[n] @cuda, info: int64[4] out @cuda, tag: int32, stream: stream";
  d.origin = "functions['on_cuda']";
  return d;
}

// With a @cuda tensor, a stream and an attr every XLA prelude helper is used, so
// this module also compiles with -Werror under clang++ (see the DISABLED tests above).
TEST(XlaHandlerModule, CudaModuleCompilesWithWerrorUnderClang) {
  if (std::system("clang++ --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "clang++ is not installed";
  ScopedCxx scoped("clang++");
  InlineOptions o = xla_options();
  o.extra_cflags = {"-Wall", "-Wextra", "-Werror"};
  o.force_rebuild = true;
  Module m = load_inline("xla_cuda_clang", {kCudaKernels}, std::vector<FunctionDecl>{cuda_decl()}, o);
  EXPECT_FALSE(m.cache_hit());
  EXPECT_NE(handler_of(m, "on_cuda"), nullptr);
}

class XlaHandlerCuda : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    InlineOptions o = xla_options();
    o.extra_cflags = {"-Wall", "-Wextra", "-Werror"};
    module_.emplace(load_inline("xla_cuda", {kCudaKernels}, std::vector<FunctionDecl>{cuda_decl()}, o));
  }
  static void TearDownTestSuite() { module_.reset(); }
  void SetUp() override {
    ASSERT_TRUE(module_.has_value()) << "the test module did not load";
    api_ = make_api();
    g_live_errors = 0;
    g_stream = reinterpret_cast<void*>(uintptr_t{0x5eed});
    g_stream_fails = false;
    g_device_ordinal = 1;
    g_ordinal_fails = false;
    std::fill(std::begin(info_), std::end(info_), int64_t{-1});
  }
  void TearDown() override { EXPECT_EQ(g_live_errors, 0) << "the handler leaked or double-freed XLA errors"; }
  std::string call() {
    Frame f(&api_);
    f.arg(XLA_FFI_DataType_F32, a_, {2}).ret(XLA_FFI_DataType_S64, info_, {4});
    f.attr("tag", XLA_FFI_DataType_S32, int32_t{77});
    Handler h = handler_of(*module_, "on_cuda");
    EXPECT_NE(h, nullptr);
    return h ? run(h, f) : "no handler";
  }

  static std::optional<Module> module_;
  XLA_FFI_Api api_;
  float a_[2] = {0, 0};
  int64_t info_[4];
};

std::optional<Module> XlaHandlerCuda::module_;

TEST_F(XlaHandlerCuda, PassesXlasStreamAndDeviceOrdinal) {
  EXPECT_TRUE(module_->has_xla_handlers());
  EXPECT_EQ(call(), "OK");
  EXPECT_EQ(info_[0], 0x5eed);
  EXPECT_EQ(info_[1], 1);
  EXPECT_EQ(info_[2], kDLCUDA);
  EXPECT_EQ(info_[3], 77);
}

TEST_F(XlaHandlerCuda, StreamErrorIsReturnedAsIs) {
  g_stream_fails = true;
  EXPECT_EQ(call(), "UNAVAILABLE: no stream here");
  EXPECT_EQ(info_[0], -1);
}

TEST_F(XlaHandlerCuda, FailedOrdinalQueryFallsBackToDeviceZero) {
  g_ordinal_fails = true;  // the handler must destroy that error (TearDown counts)
  EXPECT_EQ(call(), "OK");
  EXPECT_EQ(info_[1], 0);
}

TEST_F(XlaHandlerCuda, OlderApiWithoutOrdinalQueryUsesDeviceZero) {
  api_.struct_size = offsetof(XLA_FFI_Api, XLA_FFI_DeviceOrdinal_Get);
  EXPECT_EQ(call(), "OK");
  EXPECT_EQ(info_[1], 0);
  EXPECT_EQ(info_[0], 0x5eed);
}

}  // namespace
}  // namespace kjit

#endif  // KJIT_TEST_XLA_INCLUDE_DIR
