// kjit._call.Function: what `mod.fn` is. Every call is one call of the generated
// stub's tvm_ffi.Function. A positional call with every argument and no returned
// tensors goes straight to it (one vectorcall more than calling it directly); any
// other call is bound by the function's call model (src/call: keywords, defaults,
// its TypeErrors), read-only NumPy arrays are passed through versioned DLPack (or
// refused by name where the kernel writes them), and returned tensors are checked
// and shaped by the model, then allocated in the caller's framework (frameworks.h).
// tvm-ffi's Function cannot take keywords, and Python code in the positional path
// would cost ~100 ns a call, hence this small C type.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include "call/call_model_object.h"
#include "computation_type.h"
#include "frameworks.h"
#include "kjit/small_vector.h"
#include "model_arguments.h"
#include "torch_tensors.h"

namespace {

using kjit::CallModel;
using kjit::OutputMeta;
using kjit::SmallVector;
using kjit::pyext::Framework;
using kjit::pyext::ModelArguments;

/// The metadata of the last returned-tensor call the model passed, and its outputs:
/// a call with the same metadata (dtypes, shapes, strides, devices, integer
/// arguments: all the model's metadata checks read) needs only the data checks,
/// as an elementwise call's plan is decided once per operand metadata.
struct ModelCache {
  SmallVector<int64_t, 32> key;
  std::vector<OutputMeta> outputs;
  bool valid = false;
};

/// What the model's metadata checks read of a call's packed arguments, as one key;
/// false when a tensor is too unusual to key (the model then runs).
bool metadata_key(const CallModel& model, const TVMFFIAny* args, SmallVector<int64_t, 32>* key) {
  key->clear();
  for (size_t i = 0; i < model.callers().size(); ++i) {
    const TVMFFIAny& a = args[i];
    key->push_back(a.type_index);
    if (a.type_index == kTVMFFIInt || a.type_index == kTVMFFIBool) {
      key->push_back(a.v_int64);
    } else if ((a.type_index == kTVMFFIDLTensorPtr && a.v_ptr != nullptr) || a.type_index == kTVMFFITensor) {
      const DLTensor* t =
          a.type_index == kTVMFFITensor ? TVMFFITensorGetDLTensorPtr(a.v_obj) : static_cast<const DLTensor*>(a.v_ptr);
      if (t->ndim < 0 || t->ndim > 64 || (t->ndim > 0 && t->shape == nullptr)) return false;
      uint32_t dtype;
      std::memcpy(&dtype, &t->dtype, sizeof dtype);
      key->push_back(t->ndim);
      key->push_back(dtype);
      key->push_back((static_cast<int64_t>(t->device.device_type) << 32) | static_cast<uint32_t>(t->device.device_id));
      key->push_back(static_cast<int64_t>(t->byte_offset));
      key->push_back(t->strides != nullptr);
      for (int d = 0; d < t->ndim; ++d) key->push_back(t->shape[d]);
      for (int d = 0; t->strides != nullptr && d < t->ndim; ++d) key->push_back(t->strides[d]);
    }
  }
  return true;
}

struct KjitFunction {
  PyObject ob_base;           ///< PyObject_HEAD, spelled out (the macro's ';' trips -Wpedantic)
  vectorcallfunc vectorcall;  ///< kjit_function_call, for every instance
  PyObject* fast;             ///< the tvm_ffi.Function of the generated stub
  PyObject* model_ref;        ///< the kjit.CallModel object that owns `model`
  const CallModel* model;
  PyObject* raise_pending;  ///< kjit.raise_pending: raises what the model left on this thread
  PyObject* repr;           ///< str returned by repr()
  PyObject* dict;           ///< __doc__, __signature__, __name__, ...
  PyObject* weakrefs;
  PyObject** defaults;  ///< per caller parameter: its default (owned), or nullptr
  Py_ssize_t n_callers;
  TVMFFIObjectHandle stub;  ///< the handle of `fast`, for calls through its C ABI
  ModelCache* cache;        ///< returned-tensor calls: the last metadata the model passed
  bool direct_abi;          ///< the module has no tvm-ffi bridge: its stubs take DLTensor* views (frameworks.h)
};

/// The error the call model or the stub raised, through tvm-ffi's conversion (kjit's
/// messages as the exceptions of their kinds).
PyObject* raise_pending_error(KjitFunction* f) {
  PyObject* r = PyObject_Vectorcall(f->raise_pending, nullptr, 0, nullptr);
  Py_XDECREF(r);
  if (r != nullptr) PyErr_SetString(PyExc_RuntimeError, "kjit._call: the call model failed without an error");
  return nullptr;
}

/// A failed stub call: a JAX tracer among the arguments gets the framework table's
/// message (tvm-ffi's conversion only says it has no __dlpack_device__).
PyObject* explain_failure(KjitFunction* f, PyObject* const* values, Py_ssize_t n) {
  if (!PyErr_ExceptionMatches(PyExc_AttributeError) && !PyErr_ExceptionMatches(PyExc_TypeError)) return nullptr;
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
  for (Py_ssize_t i = 0; i < n && i < f->n_callers; ++i) {
    Framework fw = Framework::kNone;
    if (!f->model->callers()[static_cast<size_t>(i)].tensor) continue;
    if (!kjit::pyext::framework_of(values[i], &fw)) {
      PyErr_Clear();
    } else if (!kjit::pyext::accepted_tensor(*f->model, static_cast<size_t>(i), fw, false)) {
      Py_XDECREF(type);
      Py_XDECREF(value);
      Py_XDECREF(traceback);
      return nullptr;
    }
  }
  PyErr_Restore(type, value, traceback);
  return nullptr;
}

/// Binds a call to one value per caller parameter (borrowed); false with the
/// model's TypeError raised.
bool bind(KjitFunction* f, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, PyObject** values) {
  const Py_ssize_t nkw = kwnames != nullptr ? PyTuple_GET_SIZE(kwnames) : 0;
  SmallVector<std::string_view, 8> names(static_cast<size_t>(nkw));
  for (Py_ssize_t k = 0; k < nkw; ++k) {
    Py_ssize_t size = 0;
    const char* text = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(kwnames, k), &size);
    if (text == nullptr) return false;
    names[static_cast<size_t>(k)] = std::string_view(text, static_cast<size_t>(size));
  }
  SmallVector<int32_t, 16> from(static_cast<size_t>(f->n_callers));
  if (f->model->bind(static_cast<size_t>(nargs), names.data(), static_cast<size_t>(nkw), from.data()) != 0) {
    raise_pending_error(f);
    return false;
  }
  for (Py_ssize_t i = 0; i < f->n_callers; ++i) {
    const int32_t k = from[static_cast<size_t>(i)];
    values[i] = k >= 0 ? args[k] : f->defaults[i];
  }
  return true;
}

/// Read-only NumPy arrays as tvm_ffi.Tensor through versioned DLPack, which says
/// "read-only" (the unversioned export refuses them); a ValueError for a tensor the
/// kernel writes. `owned` keeps the replacements.
bool pass_read_only(KjitFunction* f, PyObject** values, SmallVector<PyObject*, 4>* owned) {
  for (Py_ssize_t i = 0; i < f->n_callers; ++i) {
    const kjit::CallerParam& c = f->model->callers()[static_cast<size_t>(i)];
    if (!c.tensor || !kjit::pyext::is_read_only_ndarray(values[i])) continue;
    if (c.written) {
      PyErr_Format(PyExc_ValueError,
                   "%s: argument #%zd '%s' is a read-only NumPy array, but the kernel writes it (%s: %s); pass a "
                   "writeable array (np.array(x) copies it)",
                   f->model->spec().name.c_str(), i, c.name.c_str(), c.name.c_str(), c.type_text.c_str());
      return false;
    }
    PyObject* view = kjit::pyext::readable_view(values[i]);
    if (view == nullptr) return false;
    owned->push_back(view);
    values[i] = view;
  }
  return true;
}

/// The call's result: the returned tensors (one alone, several a tuple), after the
/// kernel's own result when it has one. Steals kernel_result.
PyObject* assemble(PyObject* kernel_result, PyObject* const* outputs, size_t n) {
  const bool with_result = kernel_result != Py_None;
  if (!with_result && n == 1) {
    Py_DECREF(kernel_result);
    Py_INCREF(outputs[0]);
    return outputs[0];
  }
  PyObject* tuple = PyTuple_New(static_cast<Py_ssize_t>(n + (with_result ? 1 : 0)));
  if (tuple == nullptr) {
    Py_DECREF(kernel_result);
    return nullptr;
  }
  Py_ssize_t at = 0;
  if (with_result) {
    PyTuple_SET_ITEM(tuple, at++, kernel_result);
  } else {
    Py_DECREF(kernel_result);
  }
  for (size_t r = 0; r < n; ++r) {
    Py_INCREF(outputs[r]);
    PyTuple_SET_ITEM(tuple, at++, outputs[r]);
  }
  return tuple;
}

/// The stub's result as a Python object (takes `result`): the values a kernel
/// returns without tvm-ffi's bridge (nothing, a bool, an integer, a double, a string).
PyObject* stub_result(TVMFFIAny* result) {
  switch (result->type_index) {
    case kTVMFFINone:
      Py_RETURN_NONE;
    case kTVMFFIBool:
      return PyBool_FromLong(result->v_int64 != 0);
    case kTVMFFIInt:
      return PyLong_FromLongLong(result->v_int64);
    case kTVMFFIFloat:
      return PyFloat_FromDouble(result->v_float64);
    case kTVMFFISmallStr:
      return PyUnicode_DecodeUTF8(result->v_bytes, static_cast<Py_ssize_t>(result->small_str_len), "surrogateescape");
    case kTVMFFIStr: {
      const TVMFFIByteArray* bytes = TVMFFIBytesGetByteArrayPtr(result->v_obj);
      PyObject* text = PyUnicode_DecodeUTF8(bytes->data, static_cast<Py_ssize_t>(bytes->size), "surrogateescape");
      TVMFFIObjectDecRef(result->v_obj);
      return text;
    }
    default:
      if (result->type_index >= kTVMFFIStaticObjectBegin) TVMFFIObjectDecRef(result->v_obj);
      PyErr_Format(PyExc_RuntimeError,
                   "kjit._call: a kernel result of FFI type index %d, which only tvm-ffi's bridge "
                   "returns",
                   result->type_index);
      return nullptr;
  }
}

/// The stub through its C ABI (the GIL released while it runs), as the elementwise
/// call functions are called: NumPy arrays and torch tensors cross as views of their
/// own memory, without tvm-ffi's per-argument conversion.
PyObject* call_stub(KjitFunction* f, const TVMFFIAny* args, size_t n) {
  TVMFFIAny result{};
  result.type_index = kTVMFFINone;
  int rc;
  Py_BEGIN_ALLOW_THREADS;
  rc = TVMFFIFunctionCall(f->stub, const_cast<TVMFFIAny*>(args), static_cast<int32_t>(n), &result);
  Py_END_ALLOW_THREADS;
  if (rc != 0) return raise_pending_error(f);
  return stub_result(&result);
}

/// The stub through tvm-ffi's Python call, which converts every argument (devices'
/// streams, DLPack objects, unusual values), read-only NumPy arrays passed through
/// versioned DLPack.
PyObject* call_through_ffi(KjitFunction* f, PyObject* const* values, size_t n) {
  SmallVector<PyObject*, 16> call_values(n);
  for (size_t i = 0; i < n; ++i) call_values[i] = values[i];
  SmallVector<PyObject*, 4> owned;
  PyObject* result = nullptr;
  if (pass_read_only(f, call_values.data(), &owned)) {
    result = PyObject_Vectorcall(f->fast, call_values.data(), n, nullptr);
    if (result == nullptr) explain_failure(f, values, static_cast<Py_ssize_t>(n));
  }
  for (PyObject* o : owned) Py_DECREF(o);
  return result;
}

/// The framework's allocation error (NumPy's "array is too big", a MemoryError)
/// raised again, same type, naming the function, the returned tensor and its
/// shape and dtype; the original is its __cause__.
void name_allocation_error(const kjit::FunctionSpec& spec, size_t param, const OutputMeta& o) {
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  if (type == nullptr) return;
  std::string shape = "(";
  for (size_t d = 0; d < o.shape.size(); ++d) shape += (d ? ", " : "") + std::to_string(o.shape[d]);
  shape += o.shape.size() == 1 ? ",)" : ")";
  const kjit::DTypeInfo* info = kjit::find_dtype(o.dtype);
  const char* dtype = info != nullptr ? info->name : "?";
  PyErr_Format(type, "%s: returned tensor '%s' of shape %s and dtype %s cannot be allocated: %S", spec.name.c_str(),
               spec.params[param].name.c_str(), shape.c_str(), dtype, value != nullptr ? value : Py_None);
  PyObject *new_type = nullptr, *new_value = nullptr, *new_traceback = nullptr;
  PyErr_Fetch(&new_type, &new_value, &new_traceback);
  PyErr_NormalizeException(&new_type, &new_value, &new_traceback);
  if (new_value != nullptr && value != nullptr)
    PyException_SetCause(new_value, value);  // steals value
  else
    Py_XDECREF(value);
  Py_XDECREF(type);
  Py_XDECREF(traceback);
  PyErr_Restore(new_type, new_value, new_traceback);
}

/// A call with returned tensors: the model checks the arguments and shapes the
/// outputs, which are allocated like the first tensor argument, then the stub runs.
PyObject* call_returning(KjitFunction* f, PyObject* const* values, ModelArguments& packed) {
  const CallModel& model = *f->model;
  const size_t nret = model.returned().size();
  ModelCache& cache = *f->cache;
  SmallVector<int64_t, 32> key;
  const bool keyed = metadata_key(model, packed.data(), &key);
  const bool hit = keyed && cache.valid && key.size() == cache.key.size() &&
                   std::memcmp(key.data(), cache.key.data(), key.size() * sizeof(int64_t)) == 0;
  if (hit) {
    if (model.check_data(packed.data()) != 0) return raise_pending_error(f);
  } else {
    cache.valid = false;
    cache.outputs.resize(nret);
    if (model.infer(packed.data(), /*data_checked=*/true, cache.outputs.data()) != 0) return raise_pending_error(f);
    cache.key = std::move(key);
    cache.valid = keyed;
  }
  // A copy: allocating may run Python code, and another thread's call then the cache.
  OutputMeta few[2];
  std::unique_ptr<OutputMeta[]> many(nret > 2 ? new OutputMeta[nret] : nullptr);
  OutputMeta* outputs = nret > 2 ? many.get() : few;
  for (size_t r = 0; r < nret; ++r) {
    const OutputMeta& from = cache.outputs[r];
    outputs[r].shape.resize(from.shape.size());
    std::memcpy(outputs[r].shape.data(), from.shape.data(), from.shape.size() * sizeof(int64_t));
    outputs[r].dtype = from.dtype;
    outputs[r].device = from.device;
  }
  SmallVector<PyObject*, 4> tensors(nret, nullptr);
  auto release = [&] {
    for (PyObject* t : tensors) Py_XDECREF(t);
  };
  for (size_t r = 0; r < nret; ++r) {
    const OutputMeta& o = outputs[r];
    tensors[r] = kjit::pyext::allocate(packed.framework(), packed.first_tensor(), o.shape.data(),
                                       static_cast<int>(o.shape.size()), o.dtype, o.device);
    if (tensors[r] == nullptr) {
      name_allocation_error(model.spec(), model.returned()[r], o);
      release();
      return nullptr;
    }
  }
  const std::vector<int32_t>& slots = model.stub_slots();
  bool direct = f->direct_abi && packed.direct();
  SmallVector<TVMFFIAny, 16> anys(slots.size());
  for (size_t s = 0; direct && s < slots.size(); ++s) {
    if (slots[s] >= 0) {
      anys[s] = packed.data()[slots[s]];
    } else {
      const size_t k = static_cast<size_t>(-1 - slots[s]);
      direct = packed.view_output(k, tensors[k], packed.framework(), outputs[k], &anys[s]);
    }
  }
  PyObject* result = nullptr;
  if (direct) {
    result = call_stub(f, anys.data(), slots.size());
  } else {
    SmallVector<PyObject*, 16> stub_args(slots.size());
    for (size_t s = 0; s < slots.size(); ++s) {
      stub_args[s] = slots[s] >= 0 ? values[slots[s]] : tensors[static_cast<size_t>(-1 - slots[s])];
    }
    result = call_through_ffi(f, stub_args.data(), slots.size());
  }
  for (size_t r = 0; result != nullptr && r < nret; ++r) {
    tensors[r] = kjit::pyext::as_result(packed.framework(), tensors[r]);
    if (tensors[r] == nullptr) Py_CLEAR(result);
  }
  if (result != nullptr) result = assemble(result, tensors.data(), nret);
  release();
  return result;
}

/// A call whose arguments pack() refused: the error, or NotImplemented for fn.eager
/// when a torch tensor has no plain storage (the op's dispatcher takes it).
PyObject* refused(const ModelArguments& packed, bool defer_to_torch) {
  if (!defer_to_torch || !packed.storage_less()) return nullptr;
  PyErr_Clear();
  Py_RETURN_NOTIMPLEMENTED;
}

/// A call of mod.fn. Keywords and defaults are bound by the model; the framework
/// table refuses what it must (and with `defer_to_torch`, fn.eager, answers
/// NotImplemented where torch's dispatcher must take the call); then the stub runs,
/// through its C ABI when every argument crosses as a view, else through tvm-ffi.
PyObject* call(KjitFunction* f, PyObject* const* args, size_t nargsf, PyObject* kwnames, bool defer_to_torch) {
  const Py_ssize_t n = PyVectorcall_NARGS(nargsf);
  const bool keywords = kwnames != nullptr && PyTuple_GET_SIZE(kwnames) > 0;
  const size_t n_callers = static_cast<size_t>(f->n_callers);
  SmallVector<PyObject*, 16> bound;
  PyObject* const* values = args;
  if (keywords || n != f->n_callers) {
    bound.resize(n_callers);
    if (!bind(f, args, n, keywords ? kwnames : nullptr, bound.data())) return nullptr;
    values = bound.data();
  }
  kjit::pyext::TensorKinds kinds;
  switch (kjit::pyext::check_tensors(*f->model, values, defer_to_torch, &kinds)) {
    case kjit::pyext::TensorCheck::kRefused:
      return nullptr;
    case kjit::pyext::TensorCheck::kDispatch:
      Py_RETURN_NOTIMPLEMENTED;
    case kjit::pyext::TensorCheck::kAccepted:
      break;
  }
  PyObject* result = nullptr;
  if (!f->model->returned().empty()) {
    ModelArguments packed(n_callers, f->model->returned().size());
    if (!packed.pack(*f->model, values, false)) return refused(packed, defer_to_torch);
    result = call_returning(f, packed.call_values(values), packed);
  } else if ((f->direct_abi && !kinds.ffi_objects) || kinds.torch) {
    ModelArguments packed(n_callers);
    const bool packed_all = packed.pack(*f->model, values, false);
    if (!packed_all && packed.refused()) return refused(packed, defer_to_torch);
    if (packed_all && packed.unconvertible() && f->model->infer(packed.data(), false, nullptr) != 0) {
      return raise_pending_error(f);  // the model's message names the Python type tvm-ffi would not
    }
    if (packed_all && f->direct_abi && !kinds.ffi_objects && packed.direct()) {
      result = call_stub(f, packed.data(), n_callers);
    } else {
      if (!packed_all) PyErr_Clear();  // tvm-ffi's conversion answers for what the table could not view
      result = call_through_ffi(f, packed_all ? packed.call_values(values) : values, n_callers);
    }
  } else {
    result = call_through_ffi(f, values, n_callers);
  }
  // torch's in-place ops bump the version of what they write, failed calls too; so
  // does every kjit call.
  if (kinds.torch) {
    PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
    if (result == nullptr) PyErr_Fetch(&type, &value, &traceback);
    if (!kjit::pyext::bump_written_versions(*f->model, values)) Py_CLEAR(result);
    if (type != nullptr || value != nullptr) {
      PyErr_Clear();
      PyErr_Restore(type, value, traceback);
    }
  }
  return result;
}

PyObject* kjit_function_call(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  return call(reinterpret_cast<KjitFunction*>(self), args, nargsf, kwnames, false);
}

/// fn.eager(*args, **kwargs): the call, or NotImplemented when a torch tensor argument
/// needs torch's dispatcher (a fake, functional or subclassed tensor, or one that
/// requires grad with grad mode on): a torch op's eager path (kjit.torch).
PyObject* kjit_function_eager(PyObject* self, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) {
  return call(reinterpret_cast<KjitFunction*>(self), args, static_cast<size_t>(nargsf), kwnames, true);
}

/// fn.bind(*args, **kwargs): the values a call binds, defaults filled, in parameter order.
PyObject* kjit_function_bind(PyObject* self, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) {
  KjitFunction* f = reinterpret_cast<KjitFunction*>(self);
  SmallVector<PyObject*, 16> values(static_cast<size_t>(f->n_callers));
  if (!bind(f, args, PyVectorcall_NARGS(nargsf), kwnames, values.data())) return nullptr;
  PyObject* tuple = PyTuple_New(f->n_callers);
  for (Py_ssize_t i = 0; tuple != nullptr && i < f->n_callers; ++i) {
    Py_INCREF(values[static_cast<size_t>(i)]);
    PyTuple_SET_ITEM(tuple, i, values[static_cast<size_t>(i)]);
  }
  return tuple;
}

/// fn.infer(*args, **kwargs): the checks of a call on its arguments' metadata (real
/// tensors or kjit.TensorMeta), and each returned tensor as (shape, dtype name,
/// (device type, device id)).
PyObject* kjit_function_infer(PyObject* self, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) {
  KjitFunction* f = reinterpret_cast<KjitFunction*>(self);
  const CallModel& model = *f->model;
  SmallVector<PyObject*, 16> values(static_cast<size_t>(f->n_callers));
  if (!bind(f, args, PyVectorcall_NARGS(nargsf), kwnames, values.data())) return nullptr;
  ModelArguments packed(static_cast<size_t>(f->n_callers));
  if (!packed.pack(model, values.data(), true)) return nullptr;
  const size_t nret = model.returned().size();
  std::unique_ptr<OutputMeta[]> outputs(new OutputMeta[nret]);
  if (model.infer(packed.data(), /*data_checked=*/false, outputs.get()) != 0) return raise_pending_error(f);
  PyObject* tuple = PyTuple_New(static_cast<Py_ssize_t>(nret));
  for (size_t r = 0; tuple != nullptr && r < nret; ++r) {
    const OutputMeta& o = outputs[r];
    PyObject* shape = PyTuple_New(static_cast<Py_ssize_t>(o.shape.size()));
    for (size_t d = 0; shape != nullptr && d < o.shape.size(); ++d) {
      PyTuple_SET_ITEM(shape, static_cast<Py_ssize_t>(d), PyLong_FromLongLong(o.shape[d]));
    }
    PyObject* name = shape != nullptr ? kjit::pyext::dtype_name(o.dtype) : nullptr;
    if (name == nullptr) {
      Py_XDECREF(shape);
      Py_CLEAR(tuple);
      break;
    }
    // "N" takes both references, on failure too.
    PyObject* entry = Py_BuildValue("(NN(ii))", shape, name, static_cast<int>(o.device.device_type),
                                    static_cast<int>(o.device.device_id));
    if (entry == nullptr) {
      Py_CLEAR(tuple);
      break;
    }
    PyTuple_SET_ITEM(tuple, static_cast<Py_ssize_t>(r), entry);
  }
  return tuple;
}

/// One dim of a returned tensor as a tree over the caller's arguments (see
/// kjit_function_returned_shapes). New reference; nullptr with an error set.
PyObject* dim_tree(const CallModel& model, const kjit::Expr& e) {
  switch (e->op) {
    case kjit::ExprOp::kConst:
      return PyLong_FromLongLong(e->value);
    case kjit::ExprOp::kSymbol: {
      const CallModel::SymbolSource source = model.symbol_source(e->name);
      if (source.scalar || source.caller < 0) return Py_BuildValue("(si)", "arg", source.caller);
      return Py_BuildValue("(sii)", "dim", source.caller, source.dim);
    }
    case kjit::ExprOp::kNeg: {
      PyObject* operand = dim_tree(model, e->lhs);
      return operand != nullptr ? Py_BuildValue("(sN)", "neg", operand) : nullptr;
    }
    default: {
      static const char* kOps[] = {"", "", "+", "-", "*", "//", "%"};
      PyObject* lhs = dim_tree(model, e->lhs);
      PyObject* rhs = lhs != nullptr ? dim_tree(model, e->rhs) : nullptr;
      if (rhs == nullptr) {
        Py_XDECREF(lhs);
        return nullptr;
      }
      return Py_BuildValue("(sNN)", kOps[static_cast<int>(e->op)], lhs, rhs);
    }
  }
}

/// ("batch", ((i, k), ...)): a returned tensor's batch group, the leading dims of
/// the first argument i present among those naming it (all but its k declared dims).
/// New reference; nullptr with an error set.
PyObject* batch_tree(const CallModel& model, const std::string& group) {
  const std::vector<std::pair<int, int>> sources = model.batch_sources(group);
  PyObject* carriers = PyTuple_New(static_cast<Py_ssize_t>(sources.size()));
  for (size_t i = 0; carriers != nullptr && i < sources.size(); ++i) {
    PyObject* pair = Py_BuildValue("(ii)", sources[i].first, sources[i].second);
    if (pair == nullptr) Py_CLEAR(carriers);
    if (carriers != nullptr) PyTuple_SET_ITEM(carriers, static_cast<Py_ssize_t>(i), pair);
  }
  return carriers != nullptr ? Py_BuildValue("(sN)", "batch", carriers) : nullptr;
}

/// fn.returned_shapes(): each returned tensor's dims as trees over the caller's
/// arguments: an int, ("dim", i, d) for argument i's shape[d] (d < 0 counts from the
/// end), ("arg", i) for integer argument i, (op, a, b) for + - * // %, ("neg", a);
/// a leading ("batch", ...) (batch_tree) stands for the dims of a batch group.
/// Front ends whose sizes are symbolic (torch.compile's dynamic shapes) fold them
/// with their own integers; the model itself computes concrete shapes (infer).
PyObject* kjit_function_returned_shapes(PyObject* self, PyObject*) {
  const CallModel& model = *reinterpret_cast<KjitFunction*>(self)->model;
  PyObject* out = PyTuple_New(static_cast<Py_ssize_t>(model.returned().size()));
  for (size_t r = 0; out != nullptr && r < model.returned().size(); ++r) {
    const kjit::TensorSpec& t = model.spec().params[model.returned()[r]].tensor;
    const std::vector<kjit::Expr>& dims = t.shape;
    const size_t lead = t.batch.empty() ? 0 : 1;
    PyObject* shape = PyTuple_New(static_cast<Py_ssize_t>(lead + dims.size()));
    if (shape != nullptr && lead) {
      PyObject* tree = batch_tree(model, t.batch);
      if (tree == nullptr) Py_CLEAR(shape);
      if (shape != nullptr) PyTuple_SET_ITEM(shape, 0, tree);
    }
    for (size_t d = 0; shape != nullptr && d < dims.size(); ++d) {
      PyObject* tree = dim_tree(model, dims[d]);
      if (tree == nullptr) Py_CLEAR(shape);
      if (shape != nullptr) PyTuple_SET_ITEM(shape, static_cast<Py_ssize_t>(lead + d), tree);
    }
    if (shape == nullptr) Py_CLEAR(out);
    if (out != nullptr) PyTuple_SET_ITEM(out, static_cast<Py_ssize_t>(r), shape);
  }
  return out;
}

/// A tvm-ffi object's handle (its __chandle__()); nullptr with an error set: the
/// call's own, or a TypeError saying `wrong` for a null handle.
void* chandle_of(PyObject* object, const char* wrong) {
  PyObject* address = PyObject_CallMethod(object, "__chandle__", nullptr);
  void* handle = address != nullptr ? PyLong_AsVoidPtr(address) : nullptr;
  Py_XDECREF(address);
  if (handle == nullptr && !PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, wrong);
  return handle;
}

/// The C++ model behind a kjit.CallModel object (its tvm-ffi handle); nullptr with
/// an error set for anything else.
const CallModel* model_of(PyObject* ref) {
  void* handle = chandle_of(ref, "kjit._call.Function: model must be a kjit.CallModel");
  if (handle == nullptr) return nullptr;
  auto* object = static_cast<TVMFFIObject*>(handle);
  if (object->type_index != kjit::CallModelObj::RuntimeTypeIndex()) {
    PyErr_SetString(PyExc_TypeError, "kjit._call.Function: model must be a kjit.CallModel");
    return nullptr;
  }
  return reinterpret_cast<kjit::CallModelObj*>(object)->model.get();
}

/// A caller parameter's default as a Python value (the canonical text, docs/spec.md).
PyObject* default_object(const CallModel& model, const kjit::CallerParam& c) {
  const kjit::Param& p = model.spec().params[c.param];
  if (c.default_value.type_index == kTVMFFIBool) return PyBool_FromLong(static_cast<long>(c.default_value.v_int64));
  if (c.default_value.type_index == kTVMFFIInt) return PyLong_FromString(p.default_value.c_str(), nullptr, 10);
  return PyFloat_FromDouble(c.default_value.v_float64);
}

PyObject* kjit_function_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* kNames[] = {"fast", "model", "repr", "raise_pending", "direct_abi", nullptr};
  PyObject *fast = nullptr, *model_ref = nullptr, *repr = nullptr, *raise_pending = nullptr;
  int direct_abi = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOUOp:Function", const_cast<char**>(kNames), &fast, &model_ref, &repr,
                                   &raise_pending, &direct_abi)) {
    return nullptr;
  }
  if (!PyCallable_Check(fast) || !PyCallable_Check(raise_pending)) {
    PyErr_SetString(PyExc_TypeError, "kjit._call.Function: fast and raise_pending must be callable");
    return nullptr;
  }
  const CallModel* model = model_of(model_ref);
  if (model == nullptr) return nullptr;
  void* stub = chandle_of(fast, "kjit._call.Function: fast must be a tvm_ffi.Function");
  if (stub == nullptr) return nullptr;
  const Py_ssize_t n = static_cast<Py_ssize_t>(model->callers().size());
  std::unique_ptr<PyObject*[]> defaults(new PyObject*[static_cast<size_t>(n)]());
  for (Py_ssize_t i = 0; i < n; ++i) {
    const kjit::CallerParam& c = model->callers()[static_cast<size_t>(i)];
    if (!c.has_default) continue;
    if ((defaults[static_cast<size_t>(i)] = default_object(*model, c)) == nullptr) {
      for (Py_ssize_t k = 0; k < i; ++k) Py_XDECREF(defaults[static_cast<size_t>(k)]);
      return nullptr;
    }
  }
  KjitFunction* f = reinterpret_cast<KjitFunction*>(type->tp_alloc(type, 0));
  if (f == nullptr) return nullptr;
  f->vectorcall = kjit_function_call;
  f->model = model;
  f->defaults = defaults.release();
  f->n_callers = n;
  f->stub = static_cast<TVMFFIObjectHandle>(stub);  // owned by `fast`, which f holds
  f->direct_abi = direct_abi != 0;
  f->cache = new ModelCache();
  Py_INCREF(fast);
  f->fast = fast;
  Py_INCREF(model_ref);
  f->model_ref = model_ref;
  Py_INCREF(repr);
  f->repr = repr;
  Py_INCREF(raise_pending);
  f->raise_pending = raise_pending;
  return reinterpret_cast<PyObject*>(f);
}

int kjit_function_traverse(PyObject* self, visitproc visit, void* arg) {
  KjitFunction* f = reinterpret_cast<KjitFunction*>(self);
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(f->fast);
  Py_VISIT(f->model_ref);
  Py_VISIT(f->raise_pending);
  Py_VISIT(f->dict);
  return 0;
}

int kjit_function_clear(PyObject* self) {
  KjitFunction* f = reinterpret_cast<KjitFunction*>(self);
  Py_CLEAR(f->fast);
  Py_CLEAR(f->raise_pending);
  Py_CLEAR(f->repr);
  Py_CLEAR(f->dict);
  if (f->defaults != nullptr) {
    for (Py_ssize_t i = 0; i < f->n_callers; ++i) Py_XDECREF(f->defaults[i]);
    delete[] f->defaults;
    f->defaults = nullptr;
  }
  delete f->cache;
  f->cache = nullptr;
  f->model = nullptr;
  Py_CLEAR(f->model_ref);  // after the model's last use: it owns the model
  return 0;
}

void kjit_function_dealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  if (reinterpret_cast<KjitFunction*>(self)->weakrefs != nullptr) PyObject_ClearWeakRefs(self);
  kjit_function_clear(self);
  type->tp_free(self);
  Py_DECREF(type);
}

PyObject* kjit_function_repr(PyObject* self) {
  PyObject* repr = reinterpret_cast<KjitFunction*>(self)->repr;
  Py_INCREF(repr);
  return repr;
}

PyMemberDef kMembers[] = {
    {"ffi_function", T_OBJECT, offsetof(KjitFunction, fast), READONLY,
     "the tvm_ffi.Function of the generated stub (positional arguments only)"},
    {"model", T_OBJECT, offsetof(KjitFunction, model_ref), READONLY,
     "the kjit.CallModel of the function (kjit.call_infer takes it)"},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(KjitFunction, vectorcall), READONLY, nullptr},
    {"__dictoffset__", T_PYSSIZET, offsetof(KjitFunction, dict), READONLY, nullptr},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(KjitFunction, weakrefs), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

PyMethodDef kFunctionMethods[] = {
    {"bind", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(kjit_function_bind)),
     METH_FASTCALL | METH_KEYWORDS,
     "bind(*args, **kwargs) -> tuple: the arguments of a call in parameter order, defaults filled (returned tensors "
     "left out); the call's TypeError for a missing, unknown or repeated argument"},
    {"infer", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(kjit_function_infer)),
     METH_FASTCALL | METH_KEYWORDS,
     "infer(*args, **kwargs) -> tuple: runs a call's checks on its arguments' metadata (tensors, or kjit.TensorMeta) "
     "and gives each returned tensor as (shape, dtype, (device type, device id))"},
    {"eager", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(kjit_function_eager)),
     METH_FASTCALL | METH_KEYWORDS,
     "eager(*args, **kwargs): the call, or NotImplemented when a torch tensor argument needs torch's dispatcher (a "
     "fake, functional or subclassed tensor, or one that requires grad with grad mode on); kjit.torch's eager path"},
    {"returned_shapes", kjit_function_returned_shapes, METH_NOARGS,
     "returned_shapes() -> tuple: each returned tensor's dims as trees over the caller's arguments (an int, "
     "('dim', i, d), ('arg', i), (op, a, b) for + - * // %, ('neg', a)), for symbolic sizes"},
    {nullptr, nullptr, 0, nullptr},
};

/// fn.defaults: {name: default} of the parameters that have one, the values calls bind.
PyObject* kjit_function_defaults(PyObject* self, void*) {
  KjitFunction* f = reinterpret_cast<KjitFunction*>(self);
  PyObject* out = PyDict_New();
  for (Py_ssize_t i = 0; out != nullptr && i < f->n_callers; ++i) {
    if (f->defaults[i] == nullptr) continue;
    if (PyDict_SetItemString(out, f->model->callers()[static_cast<size_t>(i)].name.c_str(), f->defaults[i]) < 0) {
      Py_CLEAR(out);
    }
  }
  return out;
}

PyGetSetDef kGetSet[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, nullptr, nullptr},
    {"defaults", kjit_function_defaults, nullptr, const_cast<char*>("{name: default} of the parameters with one"),
     nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyType_Slot kSlots[] = {
    {Py_tp_new, reinterpret_cast<void*>(kjit_function_new)},
    {Py_tp_dealloc, reinterpret_cast<void*>(kjit_function_dealloc)},
    {Py_tp_traverse, reinterpret_cast<void*>(kjit_function_traverse)},
    {Py_tp_clear, reinterpret_cast<void*>(kjit_function_clear)},
    {Py_tp_repr, reinterpret_cast<void*>(kjit_function_repr)},
    {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
    {Py_tp_members, kMembers},
    {Py_tp_methods, kFunctionMethods},
    {Py_tp_getset, kGetSet},
    {Py_tp_doc, const_cast<char*>("A kjit function: a checked C++ kernel, called like a Python function.")},
    {0, nullptr},
};

PyType_Spec kSpec = {"kjit._call.Function", sizeof(KjitFunction), 0,
                     Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL, kSlots};

PyMethodDef kMethods[] = {
    {"configure", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(kjit::pyext::configure_frameworks)),
     METH_FASTCALL,
     "configure(ndarray, tvm_tensor, ffi_empty, dtype_named, classify, readable, jax_result): the framework table's "
     "Python parts (python/kjit/_frameworks.py)"},
    {"framework_of", kjit::pyext::py_framework_of, METH_O, "framework_of(x) -> int: the framework table's class of x"},
    {"bump_versions", kjit::pyext::py_bump_versions, METH_O,
     "bump_versions(tensors): bumps the autograd version counter of each torch tensor in the list, as torch's "
     "in-place ops do for what they write"},
    {"torch_access", kjit::pyext::py_torch_access, METH_O,
     "torch_access(mode) -> str: 'native' or 'python', how calls read requires_grad and bump versions of torch "
     "tensors; mode None asks, 'python' forces the Python path, 'native' lifts that"},
    {"empty", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(kjit::pyext::py_empty)), METH_FASTCALL,
     "empty(like, shape, dtype, order=None): a new output in the framework and on the device of `like`"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT,
                       "kjit._call",
                       "The call types of kjit functions and kjit.elementwise functions.",
                       -1,
                       kMethods,
                       nullptr,
                       nullptr,
                       nullptr,
                       nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__call() {  // NOLINT(bugprone-reserved-identifier): CPython's name for the module's init
  PyObject* module = PyModule_Create(&kModule);
  if (module == nullptr) return nullptr;
  PyObject* type = PyType_FromSpec(&kSpec);
  if (type == nullptr || PyModule_AddObject(module, "Function", type) < 0) {
    Py_XDECREF(type);
    Py_DECREF(module);
    return nullptr;
  }
  if (kjit::pyext::add_computation_type(module) < 0) {
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
