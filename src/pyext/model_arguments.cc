#include "model_arguments.h"

#include "numpy_tensors.h"
#include "torch_tensors.h"

namespace kjit::pyext {

void pack_scalar(PyObject* x, TVMFFIAny* out, TVMFFIByteArray* bytes) {
  *out = TVMFFIAny{};
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
    return;
  } else if (PyUnicode_Check(x)) {
    Py_ssize_t size = 0;
    const char* text = PyUnicode_AsUTF8AndSize(x, &size);
    if (text == nullptr) {
      PyErr_Clear();
      out->type_index = kTVMFFIOpaquePyObject;
      return;
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
  } else {
    out->type_index = kTVMFFIOpaquePyObject;
    out->v_ptr = x;
  }
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

TensorCheck check_tensors(const CallModel& model, PyObject* const* values, bool defer_to_torch) {
  PyTypeObject* torch = torch_tensor_type();
  for (size_t i = 0; i < model.callers().size(); ++i) {
    const CallerParam& c = model.callers()[i];
    PyObject* x = values[i];
    if (!c.tensor || Py_TYPE(x) == ndarray_type()) continue;
    if (torch != nullptr && PyObject_TypeCheck(x, torch)) {
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
                   fn, i, c.name.c_str(), c.name.c_str(), fn, fn);
      return TensorCheck::kRefused;
    }
    if (!c.written) continue;
    Framework f = Framework::kNone;
    if (!framework_of(x, &f) || !accepted_tensor(model, i, f, false)) return TensorCheck::kRefused;
  }
  return TensorCheck::kAccepted;
}

ModelArguments::ModelArguments(size_t n) : packed_(n), views_(new View[n]), bytes_(new TVMFFIByteArray[n]) {}

ModelArguments::~ModelArguments() {
  for (PyObject* h : held_) Py_DECREF(h);
}

bool ModelArguments::pack_tensor(const CallModel& model, size_t i, PyObject* x, bool metadata) {
  Framework f = Framework::kNone;
  if (!framework_of(x, &f)) return false;
  if (f == Framework::kNone) {  // None, a scalar, a list: the model names its kind
    pack_scalar(x, &packed_[i], &bytes_[i]);
    return true;
  }
  if (!accepted_tensor(model, i, f, metadata)) return false;
  View& v = views_[i];
  PyObject* held = nullptr;
  if (!view_tensor(x, f, &v.tensor, v.scratch, &held)) return false;
  if (held != nullptr) held_.push_back(held);
  packed_[i].type_index = kTVMFFIDLTensorPtr;
  packed_[i].v_ptr = &v.tensor;
  if (framework_ == Framework::kNone) {
    framework_ = f;
    first_tensor_ = x;
  }
  return true;
}

bool ModelArguments::pack(const CallModel& model, PyObject* const* values, bool metadata) {
  for (size_t i = 0; i < model.callers().size(); ++i) {
    if (model.callers()[i].tensor) {
      if (!pack_tensor(model, i, values[i], metadata)) return false;
    } else {
      pack_scalar(values[i], &packed_[i], &bytes_[i]);
    }
  }
  return true;
}

}  // namespace kjit::pyext
