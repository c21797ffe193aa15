// The XLA FFI handler of kjit.elementwise functions called from JAX
// (kjit.jax.function(f)): one handler serves every elementwise function. The call's
// attrs say which function (`engine`, its id in this process) and which promotion
// rules (`promotion`, 0 NumPy's, 1 PyTorch's); XLA buffers become DLTensors, and the
// engine's run (the tvm-ffi global kjit.ew_run) checks and runs the call as it does
// for any caller. kjit builds it once per cache and XLA headers, with the XLA
// helpers' object (docs/jax.md).
#ifndef KJIT_DETAIL_XLA_ELEMENTWISE_H_
#define KJIT_DETAIL_XLA_ELEMENTWISE_H_

#include <tvm/ffi/c_api.h>
#include <xla/ffi/api/c_api.h>

#include <cstdint>

// Generated code embeds the XLA prelude first, so there the include is skipped.
#ifndef KJIT_DETAIL_XLA_PRELUDE_H_
#include <kjit/detail/xla_prelude.h>
#endif

namespace kjit_xla {
namespace {

/// The most inputs and outputs of one call (the engine takes any number; a call of
/// more is refused by name rather than by overflowing the arrays below).
constexpr int64_t kMaxElementwiseTensors = 64;

/// kjit.ew_run, looked up once (libkjit registered it before any handler runs).
inline TVMFFIObjectHandle elementwise_run() {
  static TVMFFIObjectHandle run = [] {
    TVMFFIObjectHandle handle = nullptr;
    static const char kName[] = "kjit.ew_run";
    TVMFFIByteArray name{kName, sizeof(kName) - 1};
    if (TVMFFIFunctionGetGlobal(&name, &handle) != 0) handle = nullptr;
    return handle;
  }();
  return run;
}

}  // namespace
}  // namespace kjit_xla

extern "C" __attribute__((visibility("default"))) XLA_FFI_Error* __kjit_xla_elementwise(XLA_FFI_CallFrame* frame) {
  using namespace kjit_xla;
  static const char kFn[] = "kjit.elementwise";
  if (XLA_FFI_Error* e = check_frame(frame, kFn)) return e;
  if (frame->extension_start != nullptr && frame->extension_start->type == XLA_FFI_Extension_Metadata)
    return fill_metadata(frame, kFn);
  if (frame->stage != XLA_FFI_ExecutionStage_EXECUTE) return nullptr;
  static const char* const kAttrNames[] = {"engine", "promotion"};
  const XLA_FFI_Scalar* attr[2] = {};
  if (XLA_FFI_Error* e = collect_attrs(frame, kFn, kAttrNames, 2, attr)) return e;
  const int64_t n_in = frame->args.size, n_out = frame->rets.size;
  if (n_in < 1 || n_out < 1 || n_in + n_out > kMaxElementwiseTensors) {
    return make_error(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                      "%s: a call takes 1 to %lld inputs and results in all, got %lld inputs and %lld results", kFn,
                      static_cast<long long>(kMaxElementwiseTensors), static_cast<long long>(n_in),
                      static_cast<long long>(n_out));
  }
  TVMFFIAny args[4 + kMaxElementwiseTensors];
  DLTensor tensors[kMaxElementwiseTensors];
  kjit_stub::WideValue wide[2];
  for (int k = 0; k < 2; ++k) {
    if (XLA_FFI_Error* e = attr_to_any(frame, kFn, kAttrNames[k], kAttrInt, attr[k], &args[k], &wide[k])) return e;
  }
  args[2].type_index = args[3].type_index = kTVMFFIInt;
  args[2].zero_padding = args[3].zero_padding = 0;
  args[2].v_int64 = n_in;
  args[3].v_int64 = n_out;
  const DLDevice cpu{kDLCPU, 0};
  for (int64_t i = 0; i < n_in + n_out; ++i) {
    const bool in = i < n_in;
    const int64_t k = in ? i : i - n_in;
    const int type = in ? static_cast<int>(frame->args.types[k]) : static_cast<int>(frame->rets.types[k]);
    if (XLA_FFI_Error* e =
            buffer_to_tensor(frame, kFn, in ? "input" : "result", type, in ? frame->args.args[k] : frame->rets.rets[k],
                             cpu, &tensors[i], &args[4 + i])) {
      return e;
    }
  }
  TVMFFIObjectHandle run = elementwise_run();
  if (run == nullptr) {
    return make_error(frame->api, XLA_FFI_Error_Code_INTERNAL, "%s: kjit.ew_run is not registered (libkjit not loaded)",
                      kFn);
  }
  TVMFFIAny result{};
  result.type_index = kTVMFFINone;
  if (TVMFFIFunctionCall(run, args, static_cast<int32_t>(4 + n_in + n_out), &result) != 0) {
    return error_from_ffi(frame, kFn);
  }
  if (result.type_index >= kTVMFFIStaticObjectBegin) TVMFFIObjectDecRef(result.v_obj);
  return nullptr;
}

#endif  // KJIT_DETAIL_XLA_ELEMENTWISE_H_
