// The definitions of the helpers xla_prelude.h declares, compiled on their own:
// kjit builds this text (after the stub and XLA preludes) into one object per
// cache, toolchain, flags and XLA headers, which every module with XLA handlers
// links (src/codegen/xla_handler.cc, docs/cache.md).
#ifndef KJIT_DETAIL_XLA_HELPERS_H_
#define KJIT_DETAIL_XLA_HELPERS_H_

// The helpers' source embeds the XLA prelude first, so there the include is skipped.
#ifndef KJIT_DETAIL_XLA_PRELUDE_H_
#include <kjit/detail/xla_prelude.h>
#endif

// Error paths: out of the way of the handlers' common path.
#define KJIT_XLA_COLD __attribute__((cold))

namespace kjit_xla {
namespace {

[[maybe_unused]] inline DLDataType dl_dtype(XLA_FFI_DataType t) {
  switch (t) {
    case XLA_FFI_DataType_PRED:
      return {kDLBool, 8, 1};
    case XLA_FFI_DataType_S1:
      return {kDLInt, 1, 1};
    case XLA_FFI_DataType_S2:
      return {kDLInt, 2, 1};
    case XLA_FFI_DataType_S4:
      return {kDLInt, 4, 1};
    case XLA_FFI_DataType_S8:
      return {kDLInt, 8, 1};
    case XLA_FFI_DataType_S16:
      return {kDLInt, 16, 1};
    case XLA_FFI_DataType_S32:
      return {kDLInt, 32, 1};
    case XLA_FFI_DataType_S64:
      return {kDLInt, 64, 1};
    case XLA_FFI_DataType_U1:
      return {kDLUInt, 1, 1};
    case XLA_FFI_DataType_U2:
      return {kDLUInt, 2, 1};
    case XLA_FFI_DataType_U4:
      return {kDLUInt, 4, 1};
    case XLA_FFI_DataType_U8:
      return {kDLUInt, 8, 1};
    case XLA_FFI_DataType_U16:
      return {kDLUInt, 16, 1};
    case XLA_FFI_DataType_U32:
      return {kDLUInt, 32, 1};
    case XLA_FFI_DataType_U64:
      return {kDLUInt, 64, 1};
    case XLA_FFI_DataType_F16:
      return {kDLFloat, 16, 1};
    case XLA_FFI_DataType_F32:
      return {kDLFloat, 32, 1};
    case XLA_FFI_DataType_F64:
      return {kDLFloat, 64, 1};
    case XLA_FFI_DataType_BF16:
      return {kDLBfloat, 16, 1};
    case XLA_FFI_DataType_C64:
      return {kDLComplex, 64, 1};
    case XLA_FFI_DataType_C128:
      return {kDLComplex, 128, 1};
    case XLA_FFI_DataType_F8E5M2:
      return {kDLFloat8_e5m2, 8, 1};
    case XLA_FFI_DataType_F8E3M4:
      return {kDLFloat8_e3m4, 8, 1};
    case XLA_FFI_DataType_F8E4M3:
      return {kDLFloat8_e4m3, 8, 1};
    case XLA_FFI_DataType_F8E4M3FN:
      return {kDLFloat8_e4m3fn, 8, 1};
    case XLA_FFI_DataType_F8E4M3B11FNUZ:
      return {kDLFloat8_e4m3b11fnuz, 8, 1};
    case XLA_FFI_DataType_F8E5M2FNUZ:
      return {kDLFloat8_e5m2fnuz, 8, 1};
    case XLA_FFI_DataType_F8E4M3FNUZ:
      return {kDLFloat8_e4m3fnuz, 8, 1};
    case XLA_FFI_DataType_F4E2M1FN:
      return {kDLFloat4_e2m1fn, 4, 1};
    case XLA_FFI_DataType_F8E8M0FNU:
      return {kDLFloat8_e8m0fnu, 8, 1};
    default:
      return {kDLOpaqueHandle, 0, 1};
  }
}

[[maybe_unused]] inline bool name_is(const XLA_FFI_ByteSpan* s, const char* name) {
  return std::strlen(name) == s->len && std::memcmp(s->ptr, name, s->len) == 0;
}

KJIT_XLA_COLD XLA_FFI_Error* fail_attrs(const XLA_FFI_CallFrame* frame, const char* fn, const char* const* names, int n,
                                        const XLA_FFI_Scalar* const* found) {
  char list[512] = "none";
  size_t used = 0;
  for (int k = 0; k < n && used < sizeof(list); ++k) {
    int w = std::snprintf(list + used, sizeof(list) - used, "%s%s", k ? ", " : "", names[k]);
    if (w < 0) break;
    used += static_cast<size_t>(w);
  }
  const char* expected = list;
  for (int64_t i = 0; i < frame->attrs.size; ++i) {
    const XLA_FFI_ByteSpan* s = frame->attrs.names[i];
    bool known = false;
    for (int k = 0; k < n; ++k) known = known || name_is(s, names[k]);
    if (!known) {
      return make_error(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                        "%s: unexpected attribute '%.*s' (its attrs: %s)", fn, static_cast<int>(s->len), s->ptr,
                        expected);
    }
    if (frame->attrs.types[i] != XLA_FFI_AttrType_SCALAR) {
      return make_error(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                        "%s: attribute '%.*s' must be a scalar (e.g. np.float32(2.0)), got an XLA attr of type %d", fn,
                        static_cast<int>(s->len), s->ptr, static_cast<int>(frame->attrs.types[i]));
    }
  }
  for (int k = 0; k < n; ++k) {
    if (found[k] == nullptr) {
      return make_error(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                        "%s: missing attribute '%s' (pass it as a keyword argument of the callable "
                        "jax.ffi.ffi_call returns: ffi_call(...)(x, %s=...); its attrs: %s)",
                        fn, names[k], names[k], expected);
    }
  }
  return make_error(frame->api, XLA_FFI_Error_Code_INTERNAL, "%s: attributes did not match (kjit bug)", fn);
}

KJIT_XLA_COLD const char* xla_dtype_name(XLA_FFI_DataType t) {
  switch (t) {
    case XLA_FFI_DataType_PRED:
      return "bool";
    case XLA_FFI_DataType_S8:
      return "int8";
    case XLA_FFI_DataType_S16:
      return "int16";
    case XLA_FFI_DataType_S32:
      return "int32";
    case XLA_FFI_DataType_S64:
      return "int64";
    case XLA_FFI_DataType_U8:
      return "uint8";
    case XLA_FFI_DataType_U16:
      return "uint16";
    case XLA_FFI_DataType_U32:
      return "uint32";
    case XLA_FFI_DataType_U64:
      return "uint64";
    case XLA_FFI_DataType_F16:
      return "float16";
    case XLA_FFI_DataType_BF16:
      return "bfloat16";
    case XLA_FFI_DataType_F32:
      return "float32";
    case XLA_FFI_DataType_F64:
      return "float64";
    case XLA_FFI_DataType_C64:
      return "complex64";
    case XLA_FFI_DataType_C128:
      return "complex128";
    default:
      return "an unsupported XLA type";
  }
}

KJIT_XLA_COLD XLA_FFI_Error* fail_attr_type(const XLA_FFI_CallFrame* frame, const char* fn, const char* name,
                                            const char* expected, XLA_FFI_DataType got) {
  return make_error(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "%s: attribute '%s' must be %s, got %s", fn, name,
                    expected, xla_dtype_name(got));
}

}  // namespace

__attribute__((format(printf, 3, 4))) KJIT_XLA_COLD XLA_FFI_Error* make_error(const XLA_FFI_Api* api,
                                                                              XLA_FFI_Error_Code code, const char* fmt,
                                                                              ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  XLA_FFI_Error_Create_Args args;
  args.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE;
  args.extension_start = nullptr;
  args.message = buf;  // XLA copies it
  args.errc = code;
  return api->XLA_FFI_Error_Create(&args);
}

/// Answers XLA's metadata query: the API version the handler speaks, no traits.
KJIT_XLA_COLD XLA_FFI_Error* fill_metadata(const XLA_FFI_CallFrame* frame, const char* fn) {
  auto* ext = reinterpret_cast<XLA_FFI_Metadata_Extension*>(frame->extension_start);
  if (ext->extension_base.struct_size < XLA_FFI_Metadata_Extension_STRUCT_SIZE || ext->metadata == nullptr ||
      ext->metadata->struct_size < XLA_FFI_Metadata_STRUCT_SIZE) {
    return make_error(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                      "kjit XLA handler '%s': the metadata query has structs smaller than XLA FFI API %d.%d's", fn,
                      XLA_FFI_API_MAJOR, XLA_FFI_API_MINOR);
  }
  ext->metadata->api_version.struct_size = XLA_FFI_Api_Version_STRUCT_SIZE;
  ext->metadata->api_version.extension_start = nullptr;
  ext->metadata->api_version.major_version = XLA_FFI_API_MAJOR;
  ext->metadata->api_version.minor_version = XLA_FFI_API_MINOR;
  ext->metadata->traits = 0;
  return nullptr;
}

KJIT_XLA_COLD XLA_FFI_Error* fail_arity(const XLA_FFI_CallFrame* frame, const char* fn, const char* inputs,
                                        int64_t n_in, const char* results, int64_t n_out) {
  return make_error(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "%s: expected %lld input%s (%s) and %lld result%s (%s), got %lld input%s and %lld result%s", fn,
                    static_cast<long long>(n_in), n_in == 1 ? "" : "s", inputs, static_cast<long long>(n_out),
                    n_out == 1 ? "" : "s", results, static_cast<long long>(frame->args.size),
                    frame->args.size == 1 ? "" : "s", static_cast<long long>(frame->rets.size),
                    frame->rets.size == 1 ? "" : "s");
}

/// An XLA buffer as a DLTensor (dense row-major: NULL strides) behind a DLTensor* Any.
XLA_FFI_Error* buffer_to_tensor(const XLA_FFI_CallFrame* frame, const char* fn, const char* name, int type, void* raw,
                                DLDevice device, DLTensor* t, TVMFFIAny* a) {
  const auto* b = static_cast<const XLA_FFI_Buffer*>(raw);
  if (type != XLA_FFI_ArgType_BUFFER || b == nullptr || b->struct_size < XLA_FFI_Buffer_STRUCT_SIZE) {
    return make_error(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                      "%s: '%s' must be an XLA buffer (type %d, struct_size %zu)", fn, name, type,
                      b == nullptr ? static_cast<size_t>(0) : b->struct_size);
  }
  t->data = b->data;
  t->device = device;
  t->ndim = static_cast<int32_t>(b->rank);
  t->dtype = dl_dtype(b->dtype);
  t->shape = b->dims;
  t->strides = nullptr;
  t->byte_offset = 0;
  a->type_index = kTVMFFIDLTensorPtr;
  a->zero_padding = 0;
  a->v_ptr = t;
  return nullptr;
}

/// Finds each expected scalar attribute by name; anything else is an error.
XLA_FFI_Error* collect_attrs(const XLA_FFI_CallFrame* frame, const char* fn, const char* const* names, int n,
                             const XLA_FFI_Scalar** found) {
  int matched = 0;
  for (int64_t i = 0; i < frame->attrs.size; ++i) {
    for (int k = 0; k < n; ++k) {
      if (found[k] == nullptr && frame->attrs.types[i] == XLA_FFI_AttrType_SCALAR &&
          name_is(frame->attrs.names[i], names[k])) {
        found[k] = static_cast<const XLA_FFI_Scalar*>(frame->attrs.attrs[i]);
        ++matched;
        break;
      }
    }
  }
  if (matched == n && frame->attrs.size == n) return nullptr;
  return fail_attrs(frame, fn, names, n, found);
}

/// One scalar attr as the Any the checks take (they check ranges and kinds with
/// the same messages as a tvm-ffi call). float16/bfloat16 attrs also accept uint16
/// raw bits, brainevent's convention; complex values and uint64 values above
/// INT64_MAX travel by pointer (the checks accept that only from this handler).
XLA_FFI_Error* attr_to_any(const XLA_FFI_CallFrame* frame, const char* fn, const char* name, AttrKind kind,
                           const XLA_FFI_Scalar* s, TVMFFIAny* a, kjit_stub::WideValue* wide_slot) {
  a->zero_padding = 0;
  const void* v = s->value;
  auto set_int = [&](int64_t x) {
    a->type_index = kTVMFFIInt;
    a->v_int64 = x;
  };
  auto set_float = [&](double x) {
    a->type_index = kTVMFFIFloat;
    a->v_float64 = x;
  };
  switch (s->dtype) {
    case XLA_FFI_DataType_PRED:
      a->type_index = kTVMFFIBool;
      a->v_int64 = *static_cast<const bool*>(v) ? 1 : 0;
      break;
    case XLA_FFI_DataType_S8:
      set_int(*static_cast<const int8_t*>(v));
      break;
    case XLA_FFI_DataType_S16:
      set_int(*static_cast<const int16_t*>(v));
      break;
    case XLA_FFI_DataType_S32:
      set_int(*static_cast<const int32_t*>(v));
      break;
    case XLA_FFI_DataType_S64:
      set_int(*static_cast<const int64_t*>(v));
      break;
    case XLA_FFI_DataType_U8:
      set_int(*static_cast<const uint8_t*>(v));
      break;
    case XLA_FFI_DataType_U16: {
      uint16_t bits = *static_cast<const uint16_t*>(v);
      if (kind == kAttrFloat16)
        set_float(kjit_stub::float16_value(bits));
      else if (kind == kAttrBFloat16)
        set_float(kjit_stub::bfloat16_value(bits));
      else
        set_int(bits);
      break;
    }
    case XLA_FFI_DataType_U32:
      set_int(*static_cast<const uint32_t*>(v));
      break;
    case XLA_FFI_DataType_U64: {
      const uint64_t u = *static_cast<const uint64_t*>(v);
      if (u <= static_cast<uint64_t>(INT64_MAX)) {
        set_int(static_cast<int64_t>(u));
      } else if (kind == kAttrUInt64) {  // beyond an Any's int64: by pointer, like complex
        wide_slot->u64 = u;
        a->type_index = kTVMFFIOpaquePtr;
        a->v_ptr = wide_slot;
      } else {
        return make_error(frame->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                          "%s: attribute '%s': %llu is out of range for its type", fn, name,
                          static_cast<unsigned long long>(u));
      }
      break;
    }
    case XLA_FFI_DataType_F16:
      set_float(kjit_stub::float16_value(*static_cast<const uint16_t*>(v)));
      break;
    case XLA_FFI_DataType_BF16:
      set_float(kjit_stub::bfloat16_value(*static_cast<const uint16_t*>(v)));
      break;
    case XLA_FFI_DataType_F32:
      set_float(*static_cast<const float*>(v));
      break;
    case XLA_FFI_DataType_F64:
      set_float(*static_cast<const double*>(v));
      break;
    case XLA_FFI_DataType_C64:
    case XLA_FFI_DataType_C128: {
      if (kind != kAttrComplex) return fail_attr_type(frame, fn, name, "a real number", s->dtype);
      if (s->dtype == XLA_FFI_DataType_C64) {
        const float* parts = static_cast<const float*>(v);
        wide_slot->re = parts[0];
        wide_slot->im = parts[1];
      } else {
        const double* parts = static_cast<const double*>(v);
        wide_slot->re = parts[0];
        wide_slot->im = parts[1];
      }
      a->type_index = kTVMFFIOpaquePtr;
      a->v_ptr = wide_slot;
      break;
    }
    default:
      return fail_attr_type(frame, fn, name, "a bool, integer, float or complex scalar", s->dtype);
  }
  return nullptr;
}

/// The error the checks or the kernel raised, as an XLA error carrying its kind and text.
KJIT_XLA_COLD XLA_FFI_Error* error_from_ffi(const XLA_FFI_CallFrame* frame, const char* fn) {
  TVMFFIObjectHandle err = nullptr;
  TVMFFIErrorMoveFromRaised(&err);
  if (err == nullptr) {
    return make_error(frame->api, XLA_FFI_Error_Code_INTERNAL, "%s failed without an error message", fn);
  }
  const TVMFFIErrorCell* cell = TVMFFIErrorGetCellPtr(err);
  auto kind_is = [&](const char* k) {
    return std::strlen(k) == cell->kind.size && std::memcmp(cell->kind.data, k, cell->kind.size) == 0;
  };
  bool user = kind_is("ValueError") || kind_is("TypeError") || kind_is("IndexError");
  XLA_FFI_Error* out = make_error(frame->api, user ? XLA_FFI_Error_Code_INVALID_ARGUMENT : XLA_FFI_Error_Code_INTERNAL,
                                  "%.*s: %.*s", static_cast<int>(cell->kind.size), cell->kind.data,
                                  static_cast<int>(cell->message.size), cell->message.data);
  TVMFFIObjectDecRef(err);
  return out;
}

}  // namespace kjit_xla
#undef KJIT_XLA_COLD

#endif  // KJIT_DETAIL_XLA_HELPERS_H_
