// The XLA FFI handlers of kjit.elementwise and kjit.reduction functions called from
// JAX (kjit.jax.function(f)): one handler serves every elementwise function, another
// every reduction. The call's attrs say which function (`engine`, its id in this
// process) and which promotion rules (`promotion`, 0 NumPy's, 1 PyTorch's), and for
// a reduction its axes (`axes`, bit i for axis i) and `keepdims`; XLA buffers become
// DLTensors, and the engine's run (the tvm-ffi global kjit.ew_run or kjit.red_run)
// checks and runs the call as it does for any caller. kjit builds them once per
// cache and XLA headers, with the XLA helpers' object (docs/jax.md).
#ifndef KJIT_DETAIL_XLA_ELEMENTWISE_H_
#define KJIT_DETAIL_XLA_ELEMENTWISE_H_

#include <tvm/ffi/c_api.h>
#include <xla/ffi/api/c_api.h>

#include <cstdint>
#include <cstring>

// Generated code embeds the XLA prelude first, so there the include is skipped.
#ifndef KJIT_DETAIL_XLA_PRELUDE_H_
#include <kjit/detail/xla_prelude.h>
#endif

namespace kjit_xla {
namespace {

/// The most inputs and outputs of one call (the engine takes any number; a call of
/// more is refused by name rather than by overflowing the arrays below).
constexpr int64_t kMaxElementwiseTensors = 64;

/// A tvm-ffi global of libkjit (registered before any handler runs), or nullptr.
inline TVMFFIObjectHandle kjit_global(const char* name_text, size_t size) {
  TVMFFIObjectHandle handle = nullptr;
  TVMFFIByteArray name{name_text, size};
  if (TVMFFIFunctionGetGlobal(&name, &handle) != 0) handle = nullptr;
  return handle;
}

/// Checks the frame and its buffer counts; sets *done when there is nothing to run
/// (a metadata query or another stage) or an error to return.
inline XLA_FFI_Error* start_call(XLA_FFI_CallFrame* frame, const char* fn, bool* done) {
  *done = true;
  if (XLA_FFI_Error* e = check_frame(frame, fn)) return e;
  if (frame->extension_start != nullptr && frame->extension_start->type == XLA_FFI_Extension_Metadata)
    return fill_metadata(frame, fn);
  if (frame->stage != XLA_FFI_ExecutionStage_EXECUTE) return nullptr;
  const int64_t n_in = frame->args.size, n_out = frame->rets.size;
  if (n_in < 1 || n_out < 1 || n_in + n_out > kMaxElementwiseTensors) {
    return make_error(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                      "%s: a call takes 1 to %lld inputs and results in all, got %lld inputs and %lld results", fn,
                      static_cast<long long>(kMaxElementwiseTensors), static_cast<long long>(n_in),
                      static_cast<long long>(n_out));
  }
  *done = false;
  return nullptr;
}

/// Input k (or result k) as a DLTensor on the CPU, passed in *arg.
inline XLA_FFI_Error* frame_tensor(XLA_FFI_CallFrame* frame, const char* fn, bool input, int64_t k, DLTensor* tensor,
                                   TVMFFIAny* arg) {
  const int type = input ? static_cast<int>(frame->args.types[k]) : static_cast<int>(frame->rets.types[k]);
  return buffer_to_tensor(frame, fn, input ? "input" : "result", type,
                          input ? frame->args.args[k] : frame->rets.rets[k], DLDevice{kDLCPU, 0}, tensor, arg);
}

/// Calls `run` (name `run_name` for the error) with `n` arguments.
inline XLA_FFI_Error* call_global(XLA_FFI_CallFrame* frame, const char* fn, TVMFFIObjectHandle run,
                                  const char* run_name, TVMFFIAny* args, int32_t n) {
  if (run == nullptr) {
    return make_error(frame->api, XLA_FFI_Error_Code_INTERNAL, "%s: %s is not registered (libkjit not loaded)", fn,
                      run_name);
  }
  TVMFFIAny result{};
  result.type_index = kTVMFFINone;
  if (TVMFFIFunctionCall(run, args, n, &result) != 0) return error_from_ffi(frame, fn);
  if (result.type_index >= kTVMFFIStaticObjectBegin) TVMFFIObjectDecRef(result.v_obj);
  return nullptr;
}

/// The most extra scalars of one elementwise call ("extra_00" .. "extra_15").
constexpr int kMaxElementwiseExtras = 16;

/// Whether attr name `s` is "extra_NN", an elementwise call's extra scalar NN (two
/// digits, below kMaxElementwiseExtras); its index in *k.
inline bool extra_index(const XLA_FFI_ByteSpan* s, int* k) {
  if (s->len != 8 || std::memcmp(s->ptr, "extra_", 6) != 0) return false;
  const char hi = s->ptr[6], lo = s->ptr[7];
  if (hi < '0' || hi > '9' || lo < '0' || lo > '9') return false;
  *k = (hi - '0') * 10 + (lo - '0');
  return *k < kMaxElementwiseExtras;
}

/// Splits an elementwise call's attrs: its extra scalars into extras[0..*count) (by
/// their index; a gap is an error), the others into `own`, a copy of the frame
/// holding only those, over the arrays types/names/attrs (room for the frame's).
inline XLA_FFI_Error* split_extras(const XLA_FFI_CallFrame* frame, const char* fn, XLA_FFI_CallFrame* own,
                                   XLA_FFI_AttrType* types, XLA_FFI_ByteSpan** names, void** attrs,
                                   const XLA_FFI_Scalar** extras, int* count) {
  *own = *frame;
  own->attrs.size = 0;
  own->attrs.types = types;
  own->attrs.names = names;
  own->attrs.attrs = attrs;
  *count = 0;
  for (int64_t i = 0; i < frame->attrs.size; ++i) {
    int k = 0;
    if (!extra_index(frame->attrs.names[i], &k)) {
      types[own->attrs.size] = frame->attrs.types[i];
      names[own->attrs.size] = frame->attrs.names[i];
      attrs[own->attrs.size++] = frame->attrs.attrs[i];
      continue;
    }
    if (frame->attrs.types[i] != XLA_FFI_AttrType_SCALAR) {
      return make_error(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "%s: extra scalar %d must be a scalar attr",
                        fn, k);
    }
    extras[k] = static_cast<const XLA_FFI_Scalar*>(frame->attrs.attrs[i]);
    if (k + 1 > *count) *count = k + 1;
  }
  for (int k = 0; k < *count; ++k) {
    if (extras[k] == nullptr) {
      return make_error(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                        "%s: extra scalar %d is missing (extras are attrs extra_00, extra_01, ... in order)", fn, k);
    }
  }
  return nullptr;
}

inline void set_int(TVMFFIAny* a, int type_index, int64_t v) {
  a->type_index = type_index;
  a->zero_padding = 0;
  a->v_int64 = v;
}

}  // namespace
}  // namespace kjit_xla

extern "C" __attribute__((visibility("default"))) XLA_FFI_Error* __kjit_xla_elementwise(XLA_FFI_CallFrame* frame) {
  using namespace kjit_xla;
  static const char kFn[] = "kjit.elementwise";
  bool done = false;
  if (XLA_FFI_Error* e = start_call(frame, kFn, &done); done) return e;
  static const char* const kAttrNames[] = {"engine", "promotion"};
  constexpr int kMaxAttrs = 2 + kMaxElementwiseExtras;
  if (frame->attrs.size > kMaxAttrs) {
    return make_error(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "%s: at most %d extra scalars, got %lld attrs",
                      kFn, kMaxElementwiseExtras, static_cast<long long>(frame->attrs.size));
  }
  XLA_FFI_CallFrame own;
  XLA_FFI_AttrType own_types[kMaxAttrs];
  XLA_FFI_ByteSpan* own_names[kMaxAttrs];
  void* own_attrs[kMaxAttrs];
  const XLA_FFI_Scalar* extra[kMaxElementwiseExtras] = {};
  int n_extra = 0;
  if (XLA_FFI_Error* e = split_extras(frame, kFn, &own, own_types, own_names, own_attrs, extra, &n_extra)) return e;
  const XLA_FFI_Scalar* attr[2] = {};
  if (XLA_FFI_Error* e = collect_attrs(&own, kFn, kAttrNames, 2, attr)) return e;
  const int64_t n_in = frame->args.size, n_out = frame->rets.size;
  // kjit.ew_run(engine, promotion, n_in, n_out, inputs..., results..., extras...)
  TVMFFIAny args[4 + kMaxElementwiseTensors + kMaxElementwiseExtras];
  DLTensor tensors[kMaxElementwiseTensors];
  kjit_stub::WideValue wide[2 + kMaxElementwiseExtras];
  for (int k = 0; k < 2; ++k) {
    if (XLA_FFI_Error* e = attr_to_any(frame, kFn, kAttrNames[k], kAttrInt, attr[k], &args[k], &wide[k])) return e;
  }
  set_int(&args[2], kTVMFFIInt, n_in);
  set_int(&args[3], kTVMFFIInt, n_out);
  for (int64_t i = 0; i < n_in + n_out; ++i) {
    const bool in = i < n_in;
    if (XLA_FFI_Error* e = frame_tensor(frame, kFn, in, in ? i : i - n_in, &tensors[i], &args[4 + i])) return e;
  }
  TVMFFIAny* extras = &args[4 + n_in + n_out];
  for (int k = 0; k < n_extra; ++k) {  // as Python numbers: the engine types them as a call's extras
    if (XLA_FFI_Error* e = attr_to_any(frame, kFn, "extra", kAttrFloat, extra[k], &extras[k], &wide[2 + k])) return e;
  }
  static const char kRun[] = "kjit.ew_run";
  static TVMFFIObjectHandle run = kjit_global(kRun, sizeof(kRun) - 1);
  return call_global(frame, kFn, run, kRun, args, static_cast<int32_t>(4 + n_in + n_out + n_extra));
}

extern "C" __attribute__((visibility("default"))) XLA_FFI_Error* __kjit_xla_reduction(XLA_FFI_CallFrame* frame) {
  using namespace kjit_xla;
  static const char kFn[] = "kjit.reduction";
  bool done = false;
  if (XLA_FFI_Error* e = start_call(frame, kFn, &done); done) return e;
  if (frame->rets.size != 1) {
    return make_error(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "%s: a reduction has one result, got %lld", kFn,
                      static_cast<long long>(frame->rets.size));
  }
  static const char* const kAttrNames[] = {"engine", "promotion", "axes", "keepdims"};
  const XLA_FFI_Scalar* attr[4] = {};
  if (XLA_FFI_Error* e = collect_attrs(frame, kFn, kAttrNames, 4, attr)) return e;
  const int64_t n_in = frame->args.size;
  // kjit.red_run(engine, promotion, axes, keepdims, dtype, out, inputs...): the axes
  // as a mask, no dtype= (the result buffer's dtype is the one JAX chose).
  TVMFFIAny args[6 + kMaxElementwiseTensors];
  DLTensor tensors[kMaxElementwiseTensors];
  kjit_stub::WideValue wide[4];
  for (int k = 0; k < 4; ++k) {
    if (XLA_FFI_Error* e = attr_to_any(frame, kFn, kAttrNames[k], kAttrInt, attr[k], &args[k], &wide[k])) return e;
  }
  set_int(&args[3], kTVMFFIBool, args[3].v_int64 != 0);
  args[4].type_index = kTVMFFIRawStr;
  args[4].zero_padding = 0;
  args[4].v_c_str = "";
  if (XLA_FFI_Error* e = frame_tensor(frame, kFn, false, 0, &tensors[0], &args[5])) return e;
  for (int64_t i = 0; i < n_in; ++i) {
    if (XLA_FFI_Error* e = frame_tensor(frame, kFn, true, i, &tensors[1 + i], &args[6 + i])) return e;
  }
  static const char kRun[] = "kjit.red_run";
  static TVMFFIObjectHandle run = kjit_global(kRun, sizeof(kRun) - 1);
  return call_global(frame, kFn, run, kRun, args, static_cast<int32_t>(6 + n_in));
}

#endif  // KJIT_DETAIL_XLA_ELEMENTWISE_H_
