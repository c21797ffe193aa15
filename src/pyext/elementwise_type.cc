// kjit._call.Elementwise: what kjit.elementwise returns. It classifies a call by its
// first input's framework (NumPy arrays, with Python scalars among them; torch
// tensors, with any scalars), out= and its count of extra scalars, then calls that
// class's call function (kjit.ew_function, made on first use): NumPy arrays cross as
// DLTensor views of their own memory straight into the call function's C ABI, torch
// tensors through tvm-ffi's Python call, which converts them with torch's DLPack
// exchange API. A call function declines (returns None) what it does not take; that,
// and every call of no class, goes to the checked path in Python
// (python/kjit/elementwise.py), which owns every message.
#include "elementwise_type.h"

#include <structmember.h>
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/tensor.h>

#include <climits>
#include <memory>
#include <vector>

#include "frameworks.h"
#include "numpy_tensors.h"
#include "small_vector.h"

namespace kjit::pyext {
namespace {

// A call class: the bits and the extras count the call functions are made for.
constexpr int kTorch = 1, kScalarInputs = 2, kInto = 4, kPerExtra = 8;

/// One class's call function: the tvm_ffi.Function and its handle.
struct Slot {
  PyObject* function = nullptr;
  TVMFFIObjectHandle handle = nullptr;
};

struct EwFunction {
  PyObject ob_base;
  vectorcallfunc vectorcall;
  PyObject* make_function;  ///< make_function(torch, scalar_inputs, into, n_extra) -> tvm_ffi.Function
  PyObject* checked;        ///< checked(inputs: tuple, out, extras: dict): the Python path
  PyObject* raise_pending;  ///< tvm_ffi.Function that raises the error a call left on this thread
  PyObject* dtype_named;    ///< name -> numpy.dtype, for result dtypes NumPy has no number for
  PyObject* torch_results;  ///< tuple of a multi-output torch call's results -> torch tensors
  PyObject* dict;
  PyObject* weakrefs;
  std::vector<Slot>* slots;  ///< by call class
  Py_ssize_t num_outputs;
  // How many calls took each path: tests check the common ones stay in C.
  Py_ssize_t numpy_calls;
  Py_ssize_t torch_calls;
  Py_ssize_t checked_calls;
};

/// A call's arguments split by kind: inputs, out (nullptr for none), extras in
/// keyword order (their names in `extra_names`).
struct Arguments {
  PyObject* const* inputs;
  Py_ssize_t n_inputs;
  PyObject* out = nullptr;
  SmallVector<PyObject*, 4> outputs;
  SmallVector<PyObject*, 4> extras;
  SmallVector<PyObject*, 4> extra_names;
};

PyObject* s_out = nullptr;  // "out", interned

void split_keywords(PyObject* const* values, PyObject* kwnames, Arguments* a) {
  const Py_ssize_t n = kwnames != nullptr ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* name = PyTuple_GET_ITEM(kwnames, i);
    if (name == s_out || PyUnicode_Compare(name, s_out) == 0) {
      a->out = values[i] == Py_None ? nullptr : values[i];
    } else {
      a->extras.push_back(values[i]);
      a->extra_names.push_back(name);
    }
  }
}

bool is_python_scalar(PyObject* x) {
  PyTypeObject* t = Py_TYPE(x);
  return t == &PyFloat_Type || t == &PyLong_Type || t == &PyBool_Type;
}

/// The call's class without out= and extras, or -1 for the checked path: NumPy
/// arrays (Python scalars among them only when no input is a NumPy scalar, strong
/// under NumPy's rules and weak in a call function) or torch tensors (any scalars,
/// weak under PyTorch's rules).
int input_class(const Arguments& a) {
  PyTypeObject* first = Py_TYPE(a.inputs[0]);
  if (first == ndarray_type()) {
    if (Py_TYPE(a.inputs[a.n_inputs - 1]) == first) return 0;  // a scalar in the middle: the function declines it
    for (Py_ssize_t i = 0; i < a.n_inputs; ++i) {
      if (Py_TYPE(a.inputs[i]) != first && !is_python_scalar(a.inputs[i])) return -1;
    }
    return kScalarInputs;
  }
  PyTypeObject* torch_tensor = torch_tensor_type();
  return torch_tensor != nullptr && first == torch_tensor ? kTorch | kScalarInputs : -1;
}

/// out= as the call function takes it: one tensor of the first input's type, or a
/// tuple of num_outputs of them. False for the checked path.
bool split_outputs(Arguments* a, Py_ssize_t num_outputs) {
  if (a->out == nullptr) return true;
  PyTypeObject* first = Py_TYPE(a->inputs[0]);
  if (num_outputs == 1) {
    if (Py_TYPE(a->out) != first) return false;
    a->outputs.push_back(a->out);
    return true;
  }
  if (!PyTuple_CheckExact(a->out) || PyTuple_GET_SIZE(a->out) != num_outputs) return false;
  for (Py_ssize_t k = 0; k < num_outputs; ++k) {
    PyObject* o = PyTuple_GET_ITEM(a->out, k);
    if (Py_TYPE(o) != first) return false;
    a->outputs.push_back(o);
  }
  return true;
}

/// The call function of class `cls`, made on first use, copied out: another thread
/// may grow the table while this one runs without the GIL. False with an error set.
bool slot_of(EwFunction* f, int cls, Slot* slot) {
  std::vector<Slot>& slots = *f->slots;
  if (static_cast<size_t>(cls) < slots.size() && slots[cls].function != nullptr) {
    *slot = slots[cls];
    return true;
  }
  PyObject* fn = PyObject_CallFunction(f->make_function, "OOOi", (cls & kTorch) ? Py_True : Py_False,
                                       (cls & kScalarInputs) ? Py_True : Py_False, (cls & kInto) ? Py_True : Py_False,
                                       cls / kPerExtra);
  if (fn == nullptr) return false;
  PyObject* address = PyObject_CallMethod(fn, "__chandle__", nullptr);
  void* handle = address != nullptr ? PyLong_AsVoidPtr(address) : nullptr;
  Py_XDECREF(address);
  if (handle == nullptr) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "kjit._call: a call function without a handle");
    Py_DECREF(fn);
    return false;
  }
  if (slots.size() <= static_cast<size_t>(cls)) slots.resize(cls + 1);
  if (slots[cls].function == nullptr) {  // else another thread filled it while Python ran
    slots[cls] = Slot{fn, static_cast<TVMFFIObjectHandle>(handle)};
  } else {
    Py_DECREF(fn);
  }
  *slot = slots[cls];
  return true;
}

/// The checked path: checked(inputs, out, extras), extras in keyword order.
PyObject* call_checked(EwFunction* f, const Arguments& a) {
  ++f->checked_calls;
  PyObject* inputs = PyTuple_New(a.n_inputs);
  PyObject* extras = inputs != nullptr ? PyDict_New() : nullptr;
  if (extras == nullptr) {
    Py_XDECREF(inputs);
    return nullptr;
  }
  for (Py_ssize_t i = 0; i < a.n_inputs; ++i) {
    Py_INCREF(a.inputs[i]);
    PyTuple_SET_ITEM(inputs, i, a.inputs[i]);
  }
  for (size_t e = 0; e < a.extras.size(); ++e) {
    if (PyDict_SetItem(extras, a.extra_names[e], a.extras[e]) < 0) {
      Py_DECREF(inputs);
      Py_DECREF(extras);
      return nullptr;
    }
  }
  PyObject* argv[] = {inputs, a.out != nullptr ? a.out : Py_None, extras};
  PyObject* result = PyObject_Vectorcall(f->checked, argv, 3, nullptr);
  Py_DECREF(inputs);
  Py_DECREF(extras);
  return result;
}

/// A Python bool, int or float as a packed scalar; false for anything else (and for
/// ints outside int64, which the checked path converts as NumPy does).
bool pack_scalar(PyObject* x, TVMFFIAny* out) {
  if (PyBool_Check(x)) {
    out->type_index = kTVMFFIBool;
    out->v_int64 = x == Py_True;
    return true;
  }
  if (PyLong_Check(x)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(x, &overflow);
    if (overflow != 0 || (v == -1 && PyErr_Occurred())) {
      PyErr_Clear();
      return false;
    }
    out->type_index = kTVMFFIInt;
    out->v_int64 = v;
    return true;
  }
  if (PyFloat_Check(x)) {
    out->type_index = kTVMFFIFloat;
    out->v_float64 = PyFloat_AS_DOUBLE(x);
    return true;
  }
  return false;
}

/// DLTensor views of a NumPy call's arrays, on the stack for the usual few.
class ArrayViews {
 public:
  explicit ArrayViews(size_t n) {
    if (n > kInline) large_.reset(new View[n]);
  }
  /// A view of `a` kept here, or nullptr when the call function must not take it.
  const DLTensor* view(PyObject* a) {
    View& v = (large_ ? large_.get() : small_)[used_++];
    return view_ndarray(a, &v.tensor, v.strides) ? &v.tensor : nullptr;
  }

 private:
  struct View {
    DLTensor tensor;
    int64_t strides[kMaxNumpyDims];
  };
  static constexpr size_t kInline = 4;
  View small_[kInline];  // uninitialised: each is written before it is read
  std::unique_ptr<View[]> large_;
  size_t used_ = 0;
};

/// The arguments of a NumPy call packed for the call function's C ABI; false when
/// one is not of its kind (the checked path takes the call).
bool pack_numpy_call(const Arguments& a, ArrayViews* views, TVMFFIAny* packed) {
  PyTypeObject* ndarray = ndarray_type();
  size_t k = 0;
  auto pack_array = [&](PyObject* x) {
    const DLTensor* t = views->view(x);
    packed[k].type_index = kTVMFFIDLTensorPtr;
    packed[k++].v_ptr = const_cast<DLTensor*>(t);
    return t != nullptr;
  };
  for (Py_ssize_t i = 0; i < a.n_inputs; ++i) {
    PyObject* x = a.inputs[i];
    if (Py_TYPE(x) == ndarray ? !pack_array(x) : !pack_scalar(x, &packed[k++])) return false;
  }
  for (PyObject* o : a.outputs) {
    if (!pack_array(o)) return false;
  }
  for (PyObject* e : a.extras) {
    if (!pack_scalar(e, &packed[k++])) return false;
  }
  return true;
}

/// Raises the error a call function left on this thread, through tvm-ffi's Python
/// conversion (kjit's registered exception types, a CompileError's command and log).
PyObject* raise_pending(EwFunction* f) {
  if (PyErr_Occurred()) {  // the function reported a Python error itself (a signal)
    TVMFFIObjectHandle error = nullptr;
    TVMFFIErrorMoveFromRaised(&error);
    if (error != nullptr) TVMFFIObjectDecRef(error);
    return nullptr;
  }
  PyObject* result = PyObject_Vectorcall(f->raise_pending, nullptr, 0, nullptr);
  if (result != nullptr) {
    Py_DECREF(result);
    PyErr_SetString(PyExc_RuntimeError, "kjit._call: a call function failed without an error to raise");
  }
  return nullptr;
}

/// A NumPy call's new outputs: one array, or a tuple of them. Takes `result`.
PyObject* numpy_results(EwFunction* f, TVMFFIAny* result) {
  if (result->type_index == kTVMFFITensor) return ndarray_owning(result->v_obj, f->dtype_named);
  try {
    tvm::ffi::Any any = tvm::ffi::detail::AnyUnsafe::MoveTVMFFIAnyToAny(result);
    auto tensors = any.cast<tvm::ffi::Array<tvm::ffi::Tensor>>();
    const auto n = static_cast<Py_ssize_t>(tensors.size());
    PyObject* tuple = PyTuple_New(n);
    for (Py_ssize_t k = 0; tuple != nullptr && k < n; ++k) {
      tvm::ffi::Tensor t = tensors[static_cast<int64_t>(k)];
      PyObject* array =
          ndarray_owning(tvm::ffi::detail::ObjectUnsafe::MoveObjectRefToTVMFFIObjectPtr(std::move(t)), f->dtype_named);
      if (array == nullptr) {
        Py_CLEAR(tuple);
      } else {
        PyTuple_SET_ITEM(tuple, k, array);
      }
    }
    return tuple;
  } catch (const std::exception& e) {
    PyErr_Format(PyExc_RuntimeError, "kjit._call: unexpected results of a NumPy call: %s", e.what());
    return nullptr;
  }
}

/// A NumPy call through the call function's C ABI; `*declined` when it did not run.
PyObject* call_numpy(EwFunction* f, const Slot& slot, const Arguments& a, bool* declined) {
  const size_t n = a.n_inputs + a.outputs.size() + a.extras.size();
  SmallVector<TVMFFIAny, 8> packed(n, TVMFFIAny{});
  ArrayViews views(a.n_inputs + a.outputs.size());
  if (n > INT32_MAX || !pack_numpy_call(a, &views, packed.data())) {
    *declined = true;
    return nullptr;
  }
  TVMFFIAny result{};
  result.type_index = kTVMFFINone;
  int rc;
  Py_BEGIN_ALLOW_THREADS;
  rc = TVMFFIFunctionCall(slot.handle, packed.data(), static_cast<int32_t>(n), &result);
  Py_END_ALLOW_THREADS;
  if (rc != 0) return raise_pending(f);
  if (result.type_index == kTVMFFINone) {
    *declined = true;
    return nullptr;
  }
  ++f->numpy_calls;
  if (a.out == nullptr) return numpy_results(f, &result);
  Py_INCREF(a.out);
  return a.out;
}

/// A torch call through tvm-ffi's Python call; `*declined` when it did not run.
PyObject* call_torch(EwFunction* f, const Slot& slot, const Arguments& a, bool* declined) {
  SmallVector<PyObject*, 8> argv;
  for (Py_ssize_t i = 0; i < a.n_inputs; ++i) argv.push_back(a.inputs[i]);
  for (PyObject* o : a.outputs) argv.push_back(o);
  for (PyObject* e : a.extras) argv.push_back(e);
  PyObject* result = PyObject_Vectorcall(slot.function, argv.data(), argv.size(), nullptr);
  if (result == nullptr || result == Py_None) {
    *declined = result != nullptr;
    Py_XDECREF(result);
    return nullptr;
  }
  ++f->torch_calls;
  if (a.out != nullptr) {
    Py_DECREF(result);
    Py_INCREF(a.out);
    return a.out;
  }
  if (f->num_outputs == 1) return result;
  PyObject* tensors = PyObject_CallOneArg(f->torch_results, result);
  Py_DECREF(result);
  return tensors;
}

PyObject* ew_function_call(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  EwFunction* f = reinterpret_cast<EwFunction*>(self);
  Arguments a;
  a.inputs = args;
  a.n_inputs = PyVectorcall_NARGS(nargsf);
  split_keywords(args + a.n_inputs, kwnames, &a);
  int cls = a.n_inputs > 0 ? input_class(a) : -1;
  if (cls < 0 || !split_outputs(&a, f->num_outputs) || a.extras.size() > 1024) return call_checked(f, a);
  cls += kPerExtra * static_cast<int>(a.extras.size()) + (a.out != nullptr ? kInto : 0);
  Slot slot;
  if (!slot_of(f, cls, &slot)) return nullptr;
  bool declined = false;
  PyObject* result = (cls & kTorch) ? call_torch(f, slot, a, &declined) : call_numpy(f, slot, a, &declined);
  // DLPack refuses a read-only array (BufferError): the checked path passes it another way.
  if (result == nullptr && !declined && PyErr_ExceptionMatches(PyExc_BufferError)) {
    PyErr_Clear();
    declined = true;
  }
  return declined ? call_checked(f, a) : result;
}

PyObject* ew_function_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* kNames[] = {"make_function", "checked",     "raise_pending", "dtype_named",
                                 "torch_results", "num_outputs", nullptr};
  PyObject *make_function, *checked, *raise, *dtype_named, *torch_results;
  Py_ssize_t num_outputs = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOn:Elementwise", const_cast<char**>(kNames), &make_function,
                                   &checked, &raise, &dtype_named, &torch_results, &num_outputs)) {
    return nullptr;
  }
  if (!PyCallable_Check(make_function) || !PyCallable_Check(checked) || !PyCallable_Check(raise) ||
      !PyCallable_Check(dtype_named) || !PyCallable_Check(torch_results) || num_outputs < 1) {
    PyErr_SetString(PyExc_TypeError, "kjit._call.Elementwise: callables and num_outputs >= 1 expected");
    return nullptr;
  }
  if (s_out == nullptr && (s_out = PyUnicode_InternFromString("out")) == nullptr) return nullptr;
  EwFunction* f = reinterpret_cast<EwFunction*>(type->tp_alloc(type, 0));
  if (f == nullptr) return nullptr;
  f->vectorcall = ew_function_call;
  f->slots = new std::vector<Slot>();
  Py_INCREF(make_function);
  f->make_function = make_function;
  Py_INCREF(checked);
  f->checked = checked;
  Py_INCREF(raise);
  f->raise_pending = raise;
  Py_INCREF(dtype_named);
  f->dtype_named = dtype_named;
  Py_INCREF(torch_results);
  f->torch_results = torch_results;
  f->num_outputs = num_outputs;
  return reinterpret_cast<PyObject*>(f);
}

int ew_function_traverse(PyObject* self, visitproc visit, void* arg) {
  EwFunction* f = reinterpret_cast<EwFunction*>(self);
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(f->make_function);
  Py_VISIT(f->checked);
  Py_VISIT(f->raise_pending);
  Py_VISIT(f->dtype_named);
  Py_VISIT(f->torch_results);
  Py_VISIT(f->dict);
  if (f->slots != nullptr) {
    for (const Slot& s : *f->slots) Py_VISIT(s.function);
  }
  return 0;
}

int ew_function_clear(PyObject* self) {
  EwFunction* f = reinterpret_cast<EwFunction*>(self);
  Py_CLEAR(f->make_function);
  Py_CLEAR(f->checked);
  Py_CLEAR(f->raise_pending);
  Py_CLEAR(f->dtype_named);
  Py_CLEAR(f->torch_results);
  Py_CLEAR(f->dict);
  if (f->slots != nullptr) {
    for (Slot& s : *f->slots) Py_CLEAR(s.function);
    delete f->slots;
    f->slots = nullptr;
  }
  return 0;
}

void ew_function_dealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  if (reinterpret_cast<EwFunction*>(self)->weakrefs != nullptr) PyObject_ClearWeakRefs(self);
  ew_function_clear(self);
  type->tp_free(self);
  Py_DECREF(type);
}

PyObject* ew_function_repr(PyObject* self) {
  PyObject* name = PyObject_GetAttrString(self, "__qualname__");
  if (name == nullptr) {
    PyErr_Clear();
    return PyUnicode_FromString("<kjit.elementwise function>");
  }
  PyObject* repr = PyUnicode_FromFormat("<function %U>", name);
  Py_DECREF(name);
  return repr;
}

PyMemberDef kMembers[] = {
    {"_numpy_calls", T_PYSSIZET, offsetof(EwFunction, numpy_calls), READONLY,
     "NumPy calls that ran through the call function's C ABI (a debug counter)"},
    {"_torch_calls", T_PYSSIZET, offsetof(EwFunction, torch_calls), READONLY,
     "torch calls that ran through tvm-ffi's Python call (a debug counter)"},
    {"_checked_calls", T_PYSSIZET, offsetof(EwFunction, checked_calls), READONLY,
     "calls handed to the checked path in Python (a debug counter)"},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(EwFunction, vectorcall), READONLY, nullptr},
    {"__dictoffset__", T_PYSSIZET, offsetof(EwFunction, dict), READONLY, nullptr},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(EwFunction, weakrefs), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

PyGetSetDef kGetSet[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyType_Slot kSlots[] = {
    {Py_tp_new, reinterpret_cast<void*>(ew_function_new)},
    {Py_tp_dealloc, reinterpret_cast<void*>(ew_function_dealloc)},
    {Py_tp_traverse, reinterpret_cast<void*>(ew_function_traverse)},
    {Py_tp_clear, reinterpret_cast<void*>(ew_function_clear)},
    {Py_tp_repr, reinterpret_cast<void*>(ew_function_repr)},
    {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
    {Py_tp_members, kMembers},
    {Py_tp_getset, kGetSet},
    {Py_tp_doc, const_cast<char*>("A kjit.elementwise function: f(*inputs, out=None, **extras).")},
    {0, nullptr},
};

PyType_Spec kSpec = {"kjit._call.Elementwise", sizeof(EwFunction), 0,
                     Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL, kSlots};

}  // namespace

int add_elementwise_type(PyObject* module) {
  if (import_numpy_api() < 0) return -1;
  PyObject* type = PyType_FromSpec(&kSpec);
  if (type == nullptr || PyModule_AddObject(module, "Elementwise", type) < 0) {
    Py_XDECREF(type);
    return -1;
  }
  return 0;
}

}  // namespace kjit::pyext
