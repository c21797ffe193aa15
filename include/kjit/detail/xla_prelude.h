// What every generated XLA FFI handler calls, written against XLA's C API
// (xla/ffi/api/c_api.h) only: the template-heavy ffi.h would triple the JIT compile.
// kjit::emit_xla_prelude() embeds this text after the stub prelude, whose kjit_stub
// names it uses. The helpers declared here are defined in xla_helpers.h, which kjit
// compiles once per cache, toolchain and XLA headers into an object that each module
// with handlers links (docs/cache.md): compiling them took most of a module's XLA time.
#ifndef KJIT_DETAIL_XLA_PRELUDE_H_
#define KJIT_DETAIL_XLA_PRELUDE_H_

// ---- kjit XLA FFI prelude: call-frame checks, buffers, attrs, errors ----
#include <tvm/ffi/c_api.h>
#include <xla/ffi/api/c_api.h>

#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>

// Generated code embeds the stub prelude first, so there the include is skipped.
#ifndef KJIT_DETAIL_STUB_PRELUDE_H_
#include <kjit/detail/stub_prelude.h>
#endif

// Defined in the helpers' object and linked into each module: hidden, so every
// module keeps its own copy and none binds another's.
#define KJIT_XLA_HELPER __attribute__((visibility("hidden")))

namespace kjit_xla {

/// What the generated code expects of an attribute.
enum AttrKind { kAttrBool, kAttrInt, kAttrUInt64, kAttrFloat, kAttrFloat16, kAttrBFloat16, kAttrComplex };

__attribute__((format(printf, 3, 4))) KJIT_XLA_HELPER XLA_FFI_Error* make_error(const XLA_FFI_Api* api,
                                                                                XLA_FFI_Error_Code code,
                                                                                const char* fmt, ...);

/// Answers XLA's metadata query: the API version the handler speaks, no traits.
KJIT_XLA_HELPER XLA_FFI_Error* fill_metadata(const XLA_FFI_CallFrame* frame, const char* fn);

/// The error for a call with other counts of inputs and results.
KJIT_XLA_HELPER XLA_FFI_Error* fail_arity(const XLA_FFI_CallFrame* frame, const char* fn, const char* inputs,
                                          int64_t n_in, const char* results, int64_t n_out);

/// An XLA buffer as a DLTensor (dense row-major: NULL strides) behind a DLTensor* Any.
KJIT_XLA_HELPER XLA_FFI_Error* buffer_to_tensor(const XLA_FFI_CallFrame* frame, const char* fn, const char* name,
                                                int type, void* raw, DLDevice device, DLTensor* t, TVMFFIAny* a);

/// Finds each expected scalar attribute by name; anything else is an error.
KJIT_XLA_HELPER XLA_FFI_Error* collect_attrs(const XLA_FFI_CallFrame* frame, const char* fn, const char* const* names,
                                             int n, const XLA_FFI_Scalar** found);

/// One scalar attr as the Any the checks take (they check ranges and kinds with
/// the same messages as a tvm-ffi call). float16/bfloat16 attrs also accept uint16
/// raw bits, brainevent's convention; complex values and uint64 values above
/// INT64_MAX travel by pointer (the checks accept that only from this handler).
KJIT_XLA_HELPER XLA_FFI_Error* attr_to_any(const XLA_FFI_CallFrame* frame, const char* fn, const char* name,
                                           AttrKind kind, const XLA_FFI_Scalar* s, TVMFFIAny* a,
                                           kjit_stub::WideValue* wide_slot);

/// The error the checks or the kernel raised, as an XLA error carrying its kind and text.
KJIT_XLA_HELPER XLA_FFI_Error* error_from_ffi(const XLA_FFI_CallFrame* frame, const char* fn);

namespace {

/// Whether the runtime's XLA_FFI_Api has the function at `offset` (older jaxlibs have fewer).
[[maybe_unused]] inline bool api_has(const XLA_FFI_Api* api, size_t offset) {
  return api != nullptr && api->struct_size >= offset + sizeof(void*);
}

/// Struct sizes and the API major version: a jaxlib too old or too new for the
/// headers kjit compiled against is an error, not memory corruption.
[[maybe_unused]] inline XLA_FFI_Error* check_frame(const XLA_FFI_CallFrame* frame, const char* fn) {
  if (frame->struct_size < XLA_FFI_CallFrame_STRUCT_SIZE) {
    return make_error(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                      "kjit XLA handler '%s': XLA_FFI_CallFrame is %zu bytes, expected at least %zu; this jaxlib is "
                      "older than the XLA FFI headers the handler was compiled with (API %d.%d)",
                      fn, frame->struct_size, static_cast<size_t>(XLA_FFI_CallFrame_STRUCT_SIZE), XLA_FFI_API_MAJOR,
                      XLA_FFI_API_MINOR);
  }
  if (frame->api->api_version.major_version != XLA_FFI_API_MAJOR) {
    return make_error(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                      "kjit XLA handler '%s': XLA FFI API version %d.%d, but the handler was compiled for %d.%d", fn,
                      frame->api->api_version.major_version, frame->api->api_version.minor_version, XLA_FFI_API_MAJOR,
                      XLA_FFI_API_MINOR);
  }
  return nullptr;
}

/// The execution stream (CUstream on CUDA).
[[maybe_unused]] inline XLA_FFI_Error* get_stream(const XLA_FFI_CallFrame* frame, void** stream) {
  XLA_FFI_Stream_Get_Args args;
  args.struct_size = XLA_FFI_Stream_Get_Args_STRUCT_SIZE;
  args.extension_start = nullptr;
  args.ctx = frame->ctx;
  args.stream = nullptr;
  XLA_FFI_Error* err = frame->api->XLA_FFI_Stream_Get(&args);
  *stream = args.stream;
  return err;
}

/// The device ordinal of this execution (0 when the runtime predates the query).
[[maybe_unused]] inline int32_t device_ordinal(const XLA_FFI_CallFrame* frame) {
  if (!api_has(frame->api, offsetof(XLA_FFI_Api, XLA_FFI_DeviceOrdinal_Get)) ||
      frame->api->XLA_FFI_DeviceOrdinal_Get == nullptr) {
    return 0;
  }
  XLA_FFI_DeviceOrdinal_Get_Args args;
  args.struct_size = XLA_FFI_DeviceOrdinal_Get_Args_STRUCT_SIZE;
  args.extension_start = nullptr;
  args.ctx = frame->ctx;
  args.device_ordinal = 0;
  XLA_FFI_Error* err = frame->api->XLA_FFI_DeviceOrdinal_Get(&args);
  if (err != nullptr) {
    XLA_FFI_Error_Destroy_Args d;
    d.struct_size = XLA_FFI_Error_Destroy_Args_STRUCT_SIZE;
    d.extension_start = nullptr;
    d.error = err;
    frame->api->XLA_FFI_Error_Destroy(&d);
    return 0;
  }
  return args.device_ordinal;
}

}  // namespace
}  // namespace kjit_xla
#undef KJIT_XLA_HELPER
// ---- end of kjit XLA FFI prelude ----

#endif  // KJIT_DETAIL_XLA_PRELUDE_H_
