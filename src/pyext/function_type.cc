// kjit._call.Function: what `mod.fn` is. A positional call with the full argument
// count goes straight to the tvm-ffi function (one vectorcall more than calling it
// directly). Keywords, left-out defaults and returned outputs are bound in C from the
// function's call plan (call_plan.h), still one call of the stub. What the plan does not
// cover (read-only NumPy arrays, which DLPack refuses with a BufferError; every wrong
// call; unusual arguments) goes to the Python binder (python/kjit/function.py), which
// owns every message. tvm-ffi's Function cannot take keywords and Python code in the
// positional path would cost ~100 ns a call, hence this small C type.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <cstddef>

#include "call_plan.h"
#include "elementwise_type.h"
#include "frameworks.h"

namespace {

using kjit::pyext::CallPlan;
using kjit::pyext::Outcome;

struct KjitFunction {
  PyObject ob_base;           ///< PyObject_HEAD, spelled out (the macro's ';' trips -Wpedantic)
  vectorcallfunc vectorcall;  ///< kjit_function_call, for every instance
  PyObject* fast;             ///< the tvm_ffi.Function of the generated stub
  PyObject* binder;           ///< binder(*args, **kwargs): the Python path
  PyObject* repr;             ///< str returned by repr()
  PyObject* dict;             ///< __doc__, __signature__, __name__, ...
  PyObject* weakrefs;
  Py_ssize_t fast_arity;  ///< positional count that may take the fast path; -1: any
  CallPlan* plan;         ///< keywords, defaults and returned outputs in C; nullptr: the binder's
  // How many calls took each path: tests check the common ones stay in C.
  Py_ssize_t direct_calls;
  Py_ssize_t bound_calls;
  Py_ssize_t binder_calls;
};

/// The fast path unless keywords, another count, or a read-only array need binding;
/// then the plan; then the binder.
PyObject* kjit_function_call(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  KjitFunction* f = reinterpret_cast<KjitFunction*>(self);
  Py_ssize_t n = PyVectorcall_NARGS(nargsf);
  bool keywords = kwnames != nullptr && PyTuple_GET_SIZE(kwnames) > 0;
  if (!keywords && (f->fast_arity < 0 || n == f->fast_arity)) {
    PyObject* result = PyObject_Vectorcall(f->fast, args, nargsf, nullptr);
    // DLPack cannot export a read-only NumPy array; the binder passes it another way.
    if (result != nullptr || !PyErr_ExceptionMatches(PyExc_BufferError)) {
      ++f->direct_calls;
      return result;
    }
    PyErr_Clear();
  } else if (f->plan != nullptr) {
    PyObject* result = nullptr;
    if (f->plan->call(f->fast, args, n, keywords ? kwnames : nullptr, &result) == Outcome::kDone) {
      ++f->bound_calls;
      return result;
    }
  }
  ++f->binder_calls;
  return PyObject_Vectorcall(f->binder, args, nargsf, kwnames);
}

PyObject* kjit_function_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* kNames[] = {"fast", "binder", "repr", "fast_arity", "plan", nullptr};
  PyObject *fast = nullptr, *binder = nullptr, *repr = nullptr, *plan = Py_None;
  Py_ssize_t fast_arity = -1;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOU|nO:Function", const_cast<char**>(kNames), &fast, &binder, &repr,
                                   &fast_arity, &plan)) {
    return nullptr;
  }
  if (!PyCallable_Check(fast) || !PyCallable_Check(binder)) {
    PyErr_SetString(PyExc_TypeError, "kjit._call.Function: fast and binder must be callable");
    return nullptr;
  }
  CallPlan* call_plan = nullptr;
  if (plan != Py_None && (call_plan = CallPlan::from_tuple(plan)) == nullptr) return nullptr;
  KjitFunction* f = reinterpret_cast<KjitFunction*>(type->tp_alloc(type, 0));
  if (f == nullptr) {
    delete call_plan;
    return nullptr;
  }
  f->plan = call_plan;
  f->vectorcall = kjit_function_call;
  Py_INCREF(fast);
  f->fast = fast;
  Py_INCREF(binder);
  f->binder = binder;
  Py_INCREF(repr);
  f->repr = repr;
  f->fast_arity = fast_arity;
  return reinterpret_cast<PyObject*>(f);
}

int kjit_function_traverse(PyObject* self, visitproc visit, void* arg) {
  KjitFunction* f = reinterpret_cast<KjitFunction*>(self);
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(f->fast);
  Py_VISIT(f->binder);
  Py_VISIT(f->dict);
  if (f->plan != nullptr) Py_VISIT(f->plan->table());
  return 0;
}

int kjit_function_clear(PyObject* self) {
  KjitFunction* f = reinterpret_cast<KjitFunction*>(self);
  Py_CLEAR(f->fast);
  Py_CLEAR(f->binder);
  Py_CLEAR(f->repr);
  Py_CLEAR(f->dict);
  delete f->plan;  // its table holds only names, defaults and dtypes: no cycle through it
  f->plan = nullptr;
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
    {"_binder", T_OBJECT, offsetof(KjitFunction, binder), READONLY,
     "the Python binder every call the C paths do not cover goes to (tests compare the two)"},
    {"_direct_calls", T_PYSSIZET, offsetof(KjitFunction, direct_calls), READONLY,
     "calls that went straight to ffi_function (a debug counter)"},
    {"_bound_calls", T_PYSSIZET, offsetof(KjitFunction, bound_calls), READONLY,
     "calls bound in C from the call plan: keywords, defaults, returned outputs (a debug counter)"},
    {"_binder_calls", T_PYSSIZET, offsetof(KjitFunction, binder_calls), READONLY,
     "calls handed to the Python binder (a debug counter)"},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(KjitFunction, vectorcall), READONLY, nullptr},
    {"__dictoffset__", T_PYSSIZET, offsetof(KjitFunction, dict), READONLY, nullptr},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(KjitFunction, weakrefs), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

PyGetSetDef kGetSet[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, nullptr, nullptr},
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
    {Py_tp_getset, kGetSet},
    {Py_tp_doc, const_cast<char*>("A kjit function: a checked C++ kernel, called like a Python function.")},
    {0, nullptr},
};

PyType_Spec kSpec = {"kjit._call.Function", sizeof(KjitFunction), 0,
                     Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL, kSlots};

PyMethodDef kMethods[] = {
    {"configure", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(kjit::pyext::configure_frameworks)),
     METH_FASTCALL,
     "configure(ndarray, numpy_empty, numpy_dtypes, ffi_tensor, ffi_empty): what returned outputs are allocated with"},
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

PyMODINIT_FUNC PyInit__call() {
  PyObject* module = PyModule_Create(&kModule);
  if (module == nullptr) return nullptr;
  PyObject* type = PyType_FromSpec(&kSpec);
  if (type == nullptr || PyModule_AddObject(module, "Function", type) < 0) {
    Py_XDECREF(type);
    Py_DECREF(module);
    return nullptr;
  }
  if (kjit::pyext::add_elementwise_type(module) < 0) {
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
