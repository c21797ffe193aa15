#include "model_arguments.h"

#include <cstring>

#include "numpy_tensors.h"
#include "torch_tensors.h"

namespace kjit::pyext {

bool pack_scalar(PyObject* x, TVMFFIAny* out, TVMFFIByteArray* bytes, TVMFFIObjectHandle* owned) {
  *out = TVMFFIAny{};
  *owned = nullptr;
  if (x == Py_None) {
    out->type_index = kTVMFFINone;
  } else if (PyBool_Check(x)) {
    out->type_index = kTVMFFIBool;
    out->v_int64 = x == Py_True;
  } else if (PyLong_Check(x)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(x, &overflow);
    out->type_index = overflow != 0 ? kTVMFFIBigInt : kTVMFFIInt;
    out->v_int64 = overflow != 0 ? 0 : v;
  } else if (PyFloat_Check(x)) {
    out->type_index = kTVMFFIFloat;
    out->v_float64 = PyFloat_AS_DOUBLE(x);
  } else if (numpy_scalar(x, out)) {
    return true;
  } else if (PyUnicode_Check(x)) {
    Py_ssize_t size = 0;
    const char* text = PyUnicode_AsUTF8AndSize(x, &size);
    if (text == nullptr) {
      PyErr_Clear();
      out->type_index = kTVMFFIOpaquePyObject;
      return true;
    }
    if (std::strlen(text) != static_cast<size_t>(size)) {  // a NUL inside: the whole text, with its length
      const TVMFFIByteArray whole{text, static_cast<size_t>(size)};
      if (TVMFFIStringFromByteArray(&whole, out) != 0) {
        TVMFFIObjectHandle error = nullptr;
        TVMFFIErrorMoveFromRaised(&error);
        if (error != nullptr) TVMFFIObjectDecRef(error);
        PyErr_NoMemory();
        return false;
      }
      if (out->type_index >= kTVMFFIStaticObjectBegin) *owned = out->v_obj;
      return true;
    }
    out->type_index = kTVMFFIRawStr;
    out->v_c_str = text;
  } else if (PyBytes_Check(x)) {
    *bytes = TVMFFIByteArray{PyBytes_AS_STRING(x), static_cast<size_t>(PyBytes_GET_SIZE(x))};
    out->type_index = kTVMFFIByteArrayPtr;
    out->v_ptr = bytes;
  } else if (PyList_Check(x) || PyTuple_Check(x)) {
    out->type_index = kTVMFFIArray;  // kind only: the model reads nothing else of it
  } else if (PyDict_Check(x)) {
    out->type_index = kTVMFFIMap;
  } else if (PyCallable_Check(x)) {
    out->type_index = kTVMFFIFunction;
  } else {  // the model's messages name its type
    out->type_index = kTVMFFIOpaquePyObject;
    out->zero_padding = kPythonTypeNamed;
    out->v_c_str = Py_TYPE(x)->tp_name;
  }
  return true;
}

bool accepted_tensor(const CallModel& model, size_t i, Framework f, bool metadata) {
  const char* name = model.callers()[i].name.c_str();
  const char* fn = model.spec().name.c_str();
  if (f == Framework::kJaxTracer) {
    PyErr_Format(PyExc_TypeError,
                 "%s: argument #%zu '%s' is a JAX tracer (inside jax.jit, vmap or grad), which kjit functions "
                 "cannot read; call mod.jax.%s, its JAX-traceable form",
                 fn, i, name, fn);
    return false;
  }
  if (f == Framework::kMeta && !metadata) {
    PyErr_Format(PyExc_TypeError, "%s: argument #%zu '%s' is a kjit.TensorMeta, which only fn.infer() takes", fn, i,
                 name);
    return false;
  }
  if (f == Framework::kJax && model.callers()[i].written) {
    PyErr_Format(PyExc_TypeError,
                 "%s: argument #%zu '%s' is a JAX array, which is immutable, but the kernel writes it; call "
                 "mod.jax.%s, which returns the written tensor",
                 fn, i, name, fn);
    return false;
  }
  return true;
}

TensorCheck check_tensors(const CallModel& model, PyObject* const* values, bool defer_to_torch, TensorKinds* kinds) {
  PyTypeObject* torch = nullptr;
  *kinds = TensorKinds();
  for (const TensorCaller& t : model.tensor_callers()) {
    const size_t i = static_cast<size_t>(t.index);
    PyObject* x = values[i];
    PyTypeObject* type = Py_TYPE(x);
    if (type == ndarray_type()) continue;  // nothing to refuse of these
    if (type == tvm_tensor_type()) {
      kinds->ffi_objects = kinds->ffi_objects || tvm_tensor_handle(x) == nullptr;
      continue;
    }
    if (torch == nullptr) torch = torch_tensor_type();
    if (torch != nullptr && PyObject_TypeCheck(x, torch)) {
      kinds->torch = true;
      if (defer_to_torch && Py_TYPE(x) != torch) return TensorCheck::kDispatch;  // fake, functional, a subclass
      const int needs = torch_needs_grad(torch, x);
      if (needs < 0) return TensorCheck::kRefused;
      if (needs == 0) continue;
      if (defer_to_torch) return TensorCheck::kDispatch;
      const char* fn = model.spec().name.c_str();
      PyErr_Format(PyExc_TypeError,
                   "%s: argument #%zu '%s' requires grad, but kjit functions compute no gradients (the result would "
                   "have no grad_fn); pass %s.detach(), call it under torch.no_grad(), or pair it with a backward "
                   "function (kjit.torch.register(mod, backward={'%s': ...}), docs/torch.md) and call mod.torch.%s",
                   fn, i, model.callers()[i].name.c_str(), model.callers()[i].name.c_str(), fn, fn);
      return TensorCheck::kRefused;
    }
    if (!t.written) continue;
    Framework f = Framework::kNone;
    if (!framework_of(x, &f) || !accepted_tensor(model, i, f, false)) return TensorCheck::kRefused;
  }
  return TensorCheck::kAccepted;
}

ModelArguments::ModelArguments(size_t n, size_t n_outputs) : packed_(n), bytes_(n), n_(n) {
  if (n + n_outputs > kInline) large_.reset(new View[n + n_outputs]);
}

ModelArguments::~ModelArguments() {
  for (PyObject* h : held_) Py_DECREF(h);
  for (TVMFFIObjectHandle h : ffi_held_) TVMFFIObjectDecRef(h);
  for (PyObject* r : replaced_) Py_XDECREF(r);
}

PyObject* const* ModelArguments::call_values(PyObject* const* values) {
  if (replaced_.empty()) return values;
  call_values_.resize(n_);
  for (size_t i = 0; i < n_; ++i) call_values_[i] = replaced_[i] != nullptr ? replaced_[i] : values[i];
  return call_values_.data();
}

bool bump_written_versions(const CallModel& model, PyObject* const* values) {
  PyTypeObject* torch = torch_tensor_type();
  if (torch == nullptr) return true;
  SmallVector<PyObject*, 4> written;
  for (const TensorCaller& t : model.tensor_callers()) {
    if (t.written && PyObject_TypeCheck(values[t.index], torch)) written.push_back(values[t.index]);
  }
  return written.empty() || bump_torch_versions(written.data(), written.size());
}

namespace {

/// A plain value the stub's C ABI takes as packed; the kinds pack_scalar records only
/// by kind (a list, an object) go through tvm-ffi's conversion instead.
bool plain_scalar(const TVMFFIAny& a) {
  switch (a.type_index) {
    case kTVMFFINone:
    case kTVMFFIBool:
    case kTVMFFIInt:
    case kTVMFFIFloat:
    case kTVMFFIRawStr:
    case kTVMFFISmallStr:
    case kTVMFFIStr:
    case kTVMFFIByteArrayPtr:
      return true;
    default:
      return false;
  }
}

}  // namespace

bool ModelArguments::view_direct(PyObject* x, Framework f, bool written, View* v) {
  switch (f) {
    case Framework::kNumpy:
      return (!written || ndarray_writeable(x)) && ndarray_metadata(x, &v->tensor, v->scratch);
    case Framework::kTorch:
      if (Py_TYPE(x) != torch_tensor_type()) return false;
      if (const DLPackExchangeAPI* api = torch_exchange_api(Py_TYPE(x))) {
        return view_torch_cpu(api, x, &v->tensor) == ViewResult::kViewed;
      }
      return false;
    default:  // tvm_ffi.Tensor: tvm-ffi's own call passes its objects fastest
      return false;
  }
}

bool ModelArguments::pack_tensor(const CallModel& model, size_t i, PyObject* x, bool metadata) {
  if (void* handle = tvm_tensor_handle(x)) {  // the object itself: as tvm-ffi's own call passes it
    if (framework_ == Framework::kNone) {
      framework_ = Framework::kTvmFfi;
      first_tensor_ = x;
    }
    packed_[i].type_index = kTVMFFITensor;
    packed_[i].zero_padding = 0;
    packed_[i].v_obj = static_cast<TVMFFIObject*>(handle);
    direct_ = direct_ && TVMFFITensorGetDLTensorPtr(handle)->device.device_type == kDLCPU;
    return true;
  }
  Framework f = Framework::kNone;
  if (!framework_of(x, &f)) return false;
  if (f == Framework::kNone) return pack_value(i, x);  // None, a scalar, a list: the model names its kind
  if (!accepted_tensor(model, i, f, metadata)) {
    refused_ = true;
    return false;
  }
  if (f == Framework::kTorch && !metadata && direct_ && Py_TYPE(x) == torch_tensor_type()) {
    // A plain CPU tensor: one view, which also answers whether it carries lazy bits.
    const DLPackExchangeAPI* api = torch_exchange_api(Py_TYPE(x));
    if (api != nullptr && view_torch_cpu(api, x, &view(i).tensor) == ViewResult::kViewed) {
      pack_view(i, x, f);
      return true;
    }
  }
  if (f == Framework::kTorch && !metadata) {
    const int lazy = lazy_torch_bits(x);
    if (lazy < 0) return false;
    if (lazy > 0) {
      if (model.callers()[i].written) {
        refused_ = true;
        const char* name = model.callers()[i].name.c_str();
        PyErr_Format(PyExc_ValueError,
                     "%s: argument #%zu '%s' is a %s view of a torch tensor, whose bit DLPack cannot carry: the kernel "
                     "would write it without the bit; pass a tensor without it (%s.%s() makes one) and copy back",
                     model.spec().name.c_str(), i, name, lazy == 1 ? "conjugate (is_conj())" : "negative (is_neg())",
                     name, lazy == 1 ? "resolve_conj" : "resolve_neg");
        return false;
      }
      PyObject* plain = resolve_lazy_bits(x);  // what torch's dispatcher hands a kernel that has no such bits
      if (plain == nullptr) return false;
      if (replaced_.empty()) replaced_.resize(n_, nullptr);
      replaced_[i] = plain;
      x = plain;
    }
  }
  View& v = view(i);
  if (!direct_ || !view_direct(x, f, model.callers()[i].written, &v)) {
    direct_ = false;
    PyObject* held = nullptr;
    const bool viewed = view_tensor(x, f, &v.tensor, v.scratch, &held);
    if (held != nullptr) held_.push_back(held);
    if (f == Framework::kTorch && !metadata && (!viewed || !has_storage(v.tensor))) {
      refused_ = storage_less_ = true;
      return refuse_storage_less(model.spec().name.c_str(), i, model.callers()[i].name.c_str(), x);
    }
    if (!viewed) return false;
  }
  pack_view(i, x, f);
  return true;
}

bool ModelArguments::pack_value(size_t i, PyObject* x) {
  TVMFFIObjectHandle owned = nullptr;
  if (!pack_scalar(x, &packed_[i], &bytes_[i], &owned)) return false;
  if (owned != nullptr) ffi_held_.push_back(owned);
  direct_ = direct_ && plain_scalar(packed_[i]);
  unconvertible_ = unconvertible_ || packed_[i].type_index == kTVMFFIOpaquePyObject;
  return true;
}

void ModelArguments::pack_view(size_t i, PyObject* x, Framework f) {
  packed_[i].type_index = kTVMFFIDLTensorPtr;
  packed_[i].v_ptr = &view(i).tensor;
  if (framework_ == Framework::kNone) {
    framework_ = f;
    first_tensor_ = x;
  }
}

bool ModelArguments::pack(const CallModel& model, PyObject* const* values, bool metadata) {
  for (size_t i = 0; i < model.callers().size(); ++i) {
    if (model.callers()[i].tensor) {
      if (!pack_tensor(model, i, values[i], metadata)) return false;
    } else if (!pack_value(i, values[i])) {
      return false;
    }
  }
  return true;
}

bool ModelArguments::view_output(size_t k, PyObject* tensor, Framework f, const OutputMeta& meta, TVMFFIAny* out) {
  View& v = view(n_ + k);
  if ((f == Framework::kNumpy || f == Framework::kNone) && Py_TYPE(tensor) == ndarray_type()) {
    // kjit allocated it compact as `meta` says: no strides to read, any dtype (bfloat16 too).
    v.tensor = DLTensor{ndarray_data(tensor),
                        meta.device,
                        static_cast<int32_t>(meta.shape.size()),
                        meta.dtype,
                        const_cast<int64_t*>(meta.shape.data()),
                        nullptr,
                        0};
  } else if (!view_direct(tensor, f, true, &v)) {
    return false;
  }
  out->type_index = kTVMFFIDLTensorPtr;
  out->zero_padding = 0;
  out->v_ptr = &v.tensor;
  return true;
}

}  // namespace kjit::pyext
