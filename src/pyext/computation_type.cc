// kjit._call.Computation: what kjit.elementwise and kjit.reduction return. It
// classifies a call by its first input's framework (NumPy arrays, with Python
// scalars among them; torch tensors, with any scalars), out= and its keyword
// arguments (an elementwise function's extra scalars, by count; a reduction's axis
// and keepdims, by which are given), then calls that class's call function
// (kjit.ew_function or kjit.red_function, made on first use) through its C ABI
// (direct_call.h): NumPy arrays and CPU torch tensors cross as DLTensor views of
// their own memory. Other torch calls (CUDA tensors, NumPy scalars among them) go
// through tvm-ffi's Python call, which sets up torch's stream and allocator. A call
// function declines (returns None) what it does not take; that, and every call of
// no class, goes to the checked path in Python (python/kjit/elementwise.py,
// reduction.py), which owns every message.
#include "computation_type.h"

#include <structmember.h>

#include <vector>

#include "direct_call.h"
#include "frameworks.h"
#include "numpy_tensors.h"
#include "support/compiler_hints.h"
#include "torch_tensors.h"

namespace kjit::pyext {
namespace {

// A call class: the bits and the extras count the call functions are made for.
constexpr int kTorch = 1, kScalarInputs = 2, kInto = 4, kPerExtra = 8;
// More extras than this take the checked path: the class index, and the table, stay small.
constexpr size_t kMaxExtras = 1024;

/// One class's call function: the tvm_ffi.Function and its handle.
struct Slot {
  PyObject* function = nullptr;
  TVMFFIObjectHandle handle = nullptr;
};

struct Computation {
  PyObject ob_base;
  vectorcallfunc vectorcall;
  /// make_function(torch, scalar_inputs, into, n_extra) -> tvm_ffi.Function; with
  /// `keywords`, n_extra is the bits of the keywords given (bit i: keywords[i])
  PyObject* make_function;
  PyObject* checked;        ///< checked(inputs: tuple, out, extras: dict): the Python path
  PyObject* raise_pending;  ///< tvm_ffi.Function that raises the error a call left on this thread
  PyObject* dtype_named;    ///< name -> numpy.dtype, for result dtypes NumPy has no number for
  PyObject* torch_results;  ///< tuple of a multi-output torch call's results -> torch tensors
  /// The keyword arguments a call function takes, in its order (a reduction's
  /// "axis", "keepdims"); any given as None is not given. nullptr: extra scalars,
  /// in the call's keyword order (an elementwise function's).
  PyObject* keywords;
  PyObject* api;       ///< "kjit.elementwise", "kjit.reduction": messages name it
  int scalar_results;  ///< a new 0-d NumPy result is returned as a NumPy scalar (np.sum's)
  /// dtype_name(dtype) -> str: a "dtype" keyword's value (np.float64, np.dtype,
  /// torch.float64, "float64") as the name the call function takes; nullptr: none
  PyObject* dtype_name;
  PyObject* dtype_names;  ///< dtype_name's answers, by value (a dict; entries stay)
  int dtype_keyword;      ///< the index of "dtype" in `keywords`, or -1
  PyObject* dict;
  PyObject* weakrefs;
  std::vector<Slot>* slots;  ///< by call class
  Py_ssize_t num_outputs;
  // How many calls took each path: tests check the common ones stay in C.
  Py_ssize_t direct_calls;
  Py_ssize_t ffi_calls;
  Py_ssize_t checked_calls;
};

PyObject* s_out = nullptr;  // "out", interned

void split_keywords(PyObject* const* values, PyObject* kwnames, CallArguments* a) {
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

/// The "dtype" keyword's value among `ordered`'s extras (given as bit `bits` says)
/// replaced by its name, dtype_name's answer, remembered per value. False with no
/// error set for a value dtype_name refuses or that cannot be a key: the checked
/// path names it.
bool name_the_dtype(Computation* f, int bits, CallArguments* ordered) {
  if (f->dtype_keyword < 0 || (bits & (1 << f->dtype_keyword)) == 0) return true;
  const int at = __builtin_popcount(static_cast<unsigned>(bits) & ((1u << f->dtype_keyword) - 1));
  PyObject*& value = ordered->extras[static_cast<size_t>(at)];
  if (PyUnicode_CheckExact(value)) return true;                     // a name already
  PyObject* name = PyDict_GetItemWithError(f->dtype_names, value);  // borrowed: entries stay
  if (name == nullptr && !PyErr_Occurred()) {
    PyObject* made = PyObject_CallOneArg(f->dtype_name, value);
    if (made != nullptr && PyUnicode_CheckExact(made) && PyDict_SetItem(f->dtype_names, value, made) == 0) {
      name = made;
    }
    Py_XDECREF(made);  // the dict holds it
  }
  if (name == nullptr) {
    PyErr_Clear();
    return false;
  }
  value = name;
  return true;
}

/// Whether keyword `name` is keywords[index] (interned names compare by address).
bool keyword_is(PyObject* keywords, Py_ssize_t index, PyObject* name) {
  PyObject* k = PyTuple_GET_ITEM(keywords, index);
  return k == name || PyUnicode_Compare(k, name) == 0;
}

/// With a call function's `keywords`: the call's extras in that order, and the bits
/// of those given; -1 for a keyword it does not take. A keyword given as None is
/// not given (the defaults of axis and dtype).
int order_keywords(PyObject* keywords, CallArguments* a) {
  const Py_ssize_t n = PyTuple_GET_SIZE(keywords);
  PyObject* by_index[8] = {};
  if (n > 8) return -1;
  for (size_t e = 0; e < a->extras.size(); ++e) {
    if (a->extras[e] == Py_None) continue;  // dtype=None as much as axis=None
    Py_ssize_t k = 0;
    while (k < n && !keyword_is(keywords, k, a->extra_names[e])) ++k;
    if (k == n) return -1;
    by_index[k] = a->extras[e];
  }
  int bits = 0;
  a->extras.clear();
  for (Py_ssize_t k = 0; k < n; ++k) {
    if (by_index[k] == nullptr) continue;
    a->extras.push_back(by_index[k]);
    bits |= 1 << k;
  }
  return bits;
}

bool is_python_scalar(PyObject* x) {
  PyTypeObject* t = Py_TYPE(x);
  return t == &PyFloat_Type || t == &PyLong_Type || t == &PyBool_Type;
}

/// The call's class without out= and extras, or -1 for the checked path: NumPy
/// arrays (Python scalars among them only when no input is a NumPy scalar, strong
/// under NumPy's rules and weak in a call function) or torch tensors (any scalars,
/// weak under PyTorch's rules).
int input_class(const CallArguments& a) {
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
bool split_outputs(CallArguments* a, Py_ssize_t num_outputs) {
  if (a->out == nullptr) return true;
  PyTypeObject* first = Py_TYPE(a->inputs[0]);
  auto take = [&](PyObject* o) {
    if (Py_TYPE(o) != first) return false;
    a->outputs.push_back(o);
    return true;
  };
  if (num_outputs == 1) return take(a->out);
  if (!PyTuple_CheckExact(a->out) || PyTuple_GET_SIZE(a->out) != num_outputs) return false;
  for (Py_ssize_t k = 0; k < num_outputs; ++k) {
    if (!take(PyTuple_GET_ITEM(a->out, k))) return false;
  }
  return true;
}

/// The call function of class `cls`, made on first use, copied out: another thread
/// may grow the table while this one runs without the GIL. False with an error set.
bool slot_of(Computation* f, int cls, Slot* slot) {
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
PyObject* call_checked(Computation* f, const CallArguments& a) {
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

/// A NumPy call, through the call function's C ABI; `*to_checked` when it did not run.
PyObject* call_numpy(Computation* f, const Slot& slot, const CallArguments& a, bool* to_checked) {
  const TensorBridge bridge = numpy_bridge(f->dtype_named);
  DirectOutcome outcome;
  PyObject* result = call_direct(slot.handle, bridge, a, f->raise_pending, &outcome);
  if (outcome != DirectOutcome::kRan) {
    *to_checked = true;
    return nullptr;
  }
  f->direct_calls += result != nullptr;
  return result;
}

/// A torch call through tvm-ffi's Python call; `*to_checked` when it did not run.
PyObject* call_torch_through_ffi(Computation* f, const Slot& slot, const CallArguments& a, bool* to_checked) {
  SmallVector<PyObject*, 8> argv;
  for (Py_ssize_t i = 0; i < a.n_inputs; ++i) argv.push_back(a.inputs[i]);
  for (PyObject* o : a.outputs) argv.push_back(o);
  for (PyObject* e : a.extras) argv.push_back(e);
  PyObject* result = PyObject_Vectorcall(slot.function, argv.data(), argv.size(), nullptr);
  if (result == nullptr || result == Py_None) {
    *to_checked = result != nullptr;
    Py_XDECREF(result);
    return nullptr;
  }
  ++f->ffi_calls;
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

/// Whether a torch argument of the call is a conjugate or negative view, which
/// the checked path materialises (inputs) or rejects (out=).
bool any_lazy_bits(const CallArguments& a, PyTypeObject* torch_tensor) {
  for (Py_ssize_t i = 0; i < a.n_inputs; ++i) {
    if (Py_TYPE(a.inputs[i]) == torch_tensor && has_lazy_bits(a.inputs[i])) return true;
  }
  for (PyObject* o : a.outputs) {
    if (has_lazy_bits(o)) return true;
  }
  return false;
}

/// A torch call: CPU tensors and Python scalars through the call function's C ABI,
/// the rest through tvm-ffi's Python call; `*to_checked` when it did not run.
/// Whether a torch tensor of the call requires grad with grad mode on: the result would
/// have no grad_fn, so the call is refused (TypeError set, true returned).
bool refuse_grad(Computation* f, const CallArguments& a, PyTypeObject* torch) {
  for (Py_ssize_t i = 0; i < a.n_inputs + static_cast<Py_ssize_t>(a.outputs.size()); ++i) {
    const bool input = i < a.n_inputs;
    PyObject* x = input ? a.inputs[i] : a.outputs[static_cast<size_t>(i - a.n_inputs)];
    if (!PyObject_TypeCheck(x, torch)) continue;
    const int needs = torch_needs_grad(torch, x);
    if (needs == 0) continue;
    if (needs > 0) {
      PyObject* name = PyObject_GetAttrString(reinterpret_cast<PyObject*>(f), "name");
      PyErr_Format(PyExc_TypeError,
                   "%S: %s #%zd requires grad, but %S functions compute no gradients (the result would have no "
                   "grad_fn); pass a detached tensor (.detach()) or call it under torch.no_grad()",
                   name != nullptr ? name : Py_None, input ? "input" : "out", input ? i : i - a.n_inputs, f->api);
      Py_XDECREF(name);
    }
    return true;
  }
  return false;
}

PyObject* call_torch(Computation* f, const Slot& slot, const CallArguments& a, bool* to_checked) {
  PyTypeObject* type = Py_TYPE(a.inputs[0]);
  if (refuse_grad(f, a, type)) return nullptr;
  if (const DLPackExchangeAPI* api = torch_exchange_api(type)) {
    const TensorBridge bridge = torch_bridge(type, api);
    DirectOutcome outcome;
    PyObject* result = call_direct(slot.handle, bridge, a, f->raise_pending, &outcome);
    if (outcome == DirectOutcome::kRan) {
      f->direct_calls += result != nullptr;
      return result;
    }
    if (outcome != DirectOutcome::kNotTaken) {
      *to_checked = true;
      return nullptr;
    }
  }
  if (any_lazy_bits(a, type)) {  // tvm-ffi's conversion would drop them too
    *to_checked = true;
    return nullptr;
  }
  return call_torch_through_ffi(f, slot, a, to_checked);
}

/// Runs a call of class `cls` with `run`'s arguments; the checked path, when it
/// must, takes the call as it was made (`as_called`).
KJIT_INLINE PyObject* call_class(Computation* f, int cls, const CallArguments& run, const CallArguments& as_called) {
  Slot slot;
  if (!slot_of(f, cls, &slot)) return nullptr;
  bool to_checked = false;
  PyObject* result = (cls & kTorch) ? call_torch(f, slot, run, &to_checked) : call_numpy(f, slot, run, &to_checked);
  // DLPack refuses some tensors (BufferError): the checked path passes them another way.
  if (result == nullptr && !to_checked && PyErr_ExceptionMatches(PyExc_BufferError)) {
    PyErr_Clear();
    to_checked = true;
  }
  if (to_checked) return call_checked(f, as_called);
  if (result != nullptr && f->scalar_results && !(cls & kTorch) && run.out == nullptr) {
    result = scalar_if_zero_dim(result);
  }
  // torch's in-place ops bump the version of what they write; so does out=.
  if (result != nullptr && (cls & kTorch) && (cls & kInto) &&
      !bump_torch_versions(run.outputs.data(), run.outputs.size())) {
    Py_CLEAR(result);
  }
  return result;
}

PyObject* computation_call(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  Computation* f = reinterpret_cast<Computation*>(self);
  CallArguments a;
  a.inputs = args;
  a.n_inputs = PyVectorcall_NARGS(nargsf);
  split_keywords(args + a.n_inputs, kwnames, &a);
  int cls = a.n_inputs > 0 ? input_class(a) : -1;
  if (cls < 0 || !split_outputs(&a, f->num_outputs) || a.extras.size() > kMaxExtras) {
    return call_checked(f, a);
  }
  cls += a.out != nullptr ? kInto : 0;
  if (f->keywords == nullptr) return call_class(f, cls + kPerExtra * static_cast<int>(a.extras.size()), a, a);
  CallArguments ordered = a;
  const int bits = order_keywords(f->keywords, &ordered);
  if (bits < 0 || !name_the_dtype(f, bits, &ordered)) return call_checked(f, a);
  return call_class(f, cls + kPerExtra * bits, ordered, a);
}

PyObject* computation_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* kNames[] = {"make_function",  "checked",     "raise_pending", "dtype_named",
                                 "torch_results",  "num_outputs", "api",           "keywords",
                                 "scalar_results", "dtype_name",  nullptr};
  PyObject *make_function, *checked, *raise, *dtype_named, *torch_results, *api, *keywords = Py_None;
  PyObject* dtype_name = Py_None;
  Py_ssize_t num_outputs = 1;
  int scalar_results = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOnU|OpO:Computation", const_cast<char**>(kNames), &make_function,
                                   &checked, &raise, &dtype_named, &torch_results, &num_outputs, &api, &keywords,
                                   &scalar_results, &dtype_name)) {
    return nullptr;
  }
  if (dtype_name != Py_None && !PyCallable_Check(dtype_name)) {
    PyErr_SetString(PyExc_TypeError, "kjit._call.Computation: dtype_name must be callable or None");
    return nullptr;
  }
  bool keywords_ok = keywords == Py_None || (PyTuple_CheckExact(keywords) && PyTuple_GET_SIZE(keywords) <= 8);
  for (Py_ssize_t k = 0; keywords_ok && keywords != Py_None && k < PyTuple_GET_SIZE(keywords); ++k) {
    keywords_ok = PyUnicode_CheckExact(PyTuple_GET_ITEM(keywords, k));
  }
  if (!PyCallable_Check(make_function) || !PyCallable_Check(checked) || !PyCallable_Check(raise) ||
      !PyCallable_Check(dtype_named) || !PyCallable_Check(torch_results) || num_outputs < 1 || !keywords_ok) {
    PyErr_SetString(PyExc_TypeError,
                    "kjit._call.Computation: callables, num_outputs >= 1 and keywords None or a tuple of up to 8 "
                    "str expected");
    return nullptr;
  }
  if (s_out == nullptr && (s_out = PyUnicode_InternFromString("out")) == nullptr) return nullptr;
  Computation* f = reinterpret_cast<Computation*>(type->tp_alloc(type, 0));
  if (f == nullptr) return nullptr;
  f->vectorcall = computation_call;
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
  Py_INCREF(api);
  f->api = api;
  f->dtype_keyword = -1;
  if (keywords != Py_None) {
    Py_INCREF(keywords);
    f->keywords = keywords;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(keywords); ++k) {
      if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(keywords, k), "dtype") == 0) {
        f->dtype_keyword = static_cast<int>(k);
      }
    }
  }
  if (dtype_name != Py_None) {
    if ((f->dtype_names = PyDict_New()) == nullptr) {
      Py_DECREF(reinterpret_cast<PyObject*>(f));
      return nullptr;
    }
    Py_INCREF(dtype_name);
    f->dtype_name = dtype_name;
  } else {
    f->dtype_keyword = -1;
  }
  f->scalar_results = scalar_results;
  return reinterpret_cast<PyObject*>(f);
}

int computation_traverse(PyObject* self, visitproc visit, void* arg) {
  Computation* f = reinterpret_cast<Computation*>(self);
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(f->make_function);
  Py_VISIT(f->checked);
  Py_VISIT(f->raise_pending);
  Py_VISIT(f->dtype_named);
  Py_VISIT(f->torch_results);
  Py_VISIT(f->keywords);
  Py_VISIT(f->dtype_name);
  Py_VISIT(f->dtype_names);
  Py_VISIT(f->api);
  Py_VISIT(f->dict);
  if (f->slots != nullptr) {
    for (const Slot& s : *f->slots) Py_VISIT(s.function);
  }
  return 0;
}

int computation_clear(PyObject* self) {
  Computation* f = reinterpret_cast<Computation*>(self);
  Py_CLEAR(f->make_function);
  Py_CLEAR(f->checked);
  Py_CLEAR(f->raise_pending);
  Py_CLEAR(f->dtype_named);
  Py_CLEAR(f->torch_results);
  Py_CLEAR(f->keywords);
  Py_CLEAR(f->dtype_name);
  Py_CLEAR(f->dtype_names);
  Py_CLEAR(f->api);
  Py_CLEAR(f->dict);
  if (f->slots != nullptr) {
    for (Slot& s : *f->slots) Py_CLEAR(s.function);
    delete f->slots;
    f->slots = nullptr;
  }
  return 0;
}

void computation_dealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  if (reinterpret_cast<Computation*>(self)->weakrefs != nullptr) PyObject_ClearWeakRefs(self);
  computation_clear(self);
  type->tp_free(self);
  Py_DECREF(type);
}

PyObject* computation_repr(PyObject* self) {
  PyObject* name = PyObject_GetAttrString(self, "__qualname__");
  if (name == nullptr) {
    PyErr_Clear();
    return PyUnicode_FromString("<kjit computation function>");
  }
  PyObject* repr = PyUnicode_FromFormat("<function %U>", name);
  Py_DECREF(name);
  return repr;
}

PyMemberDef kMembers[] = {
    {"_direct_calls", T_PYSSIZET, offsetof(Computation, direct_calls), READONLY,
     "calls that ran through the call function's C ABI: NumPy, CPU torch (a debug counter)"},
    {"_ffi_calls", T_PYSSIZET, offsetof(Computation, ffi_calls), READONLY,
     "torch calls that ran through tvm-ffi's Python call (a debug counter)"},
    {"_checked_calls", T_PYSSIZET, offsetof(Computation, checked_calls), READONLY,
     "calls handed to the checked path in Python (a debug counter)"},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Computation, vectorcall), READONLY, nullptr},
    {"__dictoffset__", T_PYSSIZET, offsetof(Computation, dict), READONLY, nullptr},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(Computation, weakrefs), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

PyGetSetDef kGetSet[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyType_Slot kSlots[] = {
    {Py_tp_new, reinterpret_cast<void*>(computation_new)},
    {Py_tp_dealloc, reinterpret_cast<void*>(computation_dealloc)},
    {Py_tp_traverse, reinterpret_cast<void*>(computation_traverse)},
    {Py_tp_clear, reinterpret_cast<void*>(computation_clear)},
    {Py_tp_repr, reinterpret_cast<void*>(computation_repr)},
    {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
    {Py_tp_members, kMembers},
    {Py_tp_getset, kGetSet},
    {Py_tp_doc, const_cast<char*>("A kjit.elementwise function, f(*inputs, out=None, **extras), or a kjit.reduction, "
                                  "f(*inputs, axis=None, keepdims=False, dtype=None, out=None).")},
    {0, nullptr},
};

PyType_Spec kSpec = {"kjit._call.Computation", sizeof(Computation), 0,
                     Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL, kSlots};

}  // namespace

int add_computation_type(PyObject* module) {
  if (import_numpy_api() < 0) return -1;
  PyObject* type = PyType_FromSpec(&kSpec);
  if (type == nullptr || PyModule_AddObject(module, "Computation", type) < 0) {
    Py_XDECREF(type);
    return -1;
  }
  return 0;
}

}  // namespace kjit::pyext
