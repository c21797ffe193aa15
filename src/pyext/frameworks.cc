#include "frameworks.h"

#include "call_plan.h"
#include "small_vector.h"

namespace kjit::pyext {
namespace {

/// Strong references held for the life of the process (one interpreter).
struct Cache {
  PyObject* ndarray = nullptr;        ///< numpy.ndarray
  PyObject* numpy_empty = nullptr;    ///< numpy.empty
  PyObject* numpy_dtypes = nullptr;   ///< {input dtype: the dtype the binder allocates for it}
  PyObject* ffi_tensor = nullptr;     ///< tvm_ffi.Tensor
  PyObject* ffi_empty = nullptr;      ///< kjit.ew_empty
  PyObject* torch = nullptr;          ///< the torch module, once imported
  PyObject* torch_tensor = nullptr;   ///< torch.Tensor
  PyObject* torch_empty = nullptr;    ///< torch.empty
  PyObject* torch_kwnames = nullptr;  ///< ("dtype", "device")
  PyObject* s_shape = nullptr;
  PyObject* s_dtype = nullptr;
  PyObject* s_device = nullptr;
  PyObject* s_dlpack_device = nullptr;
  PyObject* s_torch = nullptr;
};

Cache cache;

bool intern(PyObject** slot, const char* text) {
  if (*slot == nullptr) *slot = PyUnicode_InternFromString(text);
  return *slot != nullptr;
}

void hold(PyObject** slot, PyObject* value) {
  Py_INCREF(value);
  Py_XSETREF(*slot, value);
}

/// torch.Tensor and torch.empty once torch is in sys.modules (kjit never imports it).
bool resolve_torch() {
  if (cache.torch_tensor != nullptr) return true;
  PyObject* torch = PyImport_GetModule(cache.s_torch);
  if (torch == nullptr) {
    PyErr_Clear();
    return false;
  }
  PyObject* tensor = PyObject_GetAttrString(torch, "Tensor");
  PyObject* empty = tensor != nullptr ? PyObject_GetAttrString(torch, "empty") : nullptr;
  if (empty == nullptr) {  // torch still importing, or not the real one: the binder decides
    PyErr_Clear();
    Py_XDECREF(tensor);
    Py_DECREF(torch);
    return false;
  }
  cache.torch = torch;
  cache.torch_tensor = tensor;
  cache.torch_empty = empty;
  return true;
}

PyObject* tuple_of(const int64_t* shape, size_t rank) {
  PyObject* t = PyTuple_New(static_cast<Py_ssize_t>(rank));
  if (t == nullptr) return nullptr;
  for (size_t i = 0; i < rank; ++i) {
    PyObject* v = PyLong_FromLongLong(shape[i]);
    if (v == nullptr) {
      Py_DECREF(t);
      return nullptr;
    }
    PyTuple_SET_ITEM(t, static_cast<Py_ssize_t>(i), v);
  }
  return t;
}

/// The NumPy dtype the binder would allocate (np.dtype(source.dtype.name)), for the
/// native dtypes of the configured table; nullptr otherwise (borrowed).
PyObject* numpy_dtype(ReturnedOutput& out, PyObject* source) {
  if (out.dtype_of < 0) return out.numpy_dtype == Py_None ? nullptr : out.numpy_dtype;
  if (Py_TYPE(source) != reinterpret_cast<PyTypeObject*>(cache.ndarray)) return nullptr;
  PyObject* dtype = PyObject_GetAttr(source, cache.s_dtype);
  if (dtype == nullptr) return nullptr;
  PyObject* mapped = PyDict_GetItemWithError(cache.numpy_dtypes, dtype);
  Py_DECREF(dtype);
  return mapped;
}

PyObject* allocate_numpy(ReturnedOutput& out, PyObject* source, const int64_t* shape, size_t rank) {
  PyObject* dtype = numpy_dtype(out, source);
  if (dtype == nullptr) return nullptr;
  PyObject* dims = tuple_of(shape, rank);
  if (dims == nullptr) return nullptr;
  PyObject* argv[] = {dims, dtype};
  PyObject* array = PyObject_Vectorcall(cache.numpy_empty, argv, 2, nullptr);
  Py_DECREF(dims);
  return array;
}

/// torch.<name> for a fixed dtype (cached), source.dtype for dtype(x); new reference.
PyObject* torch_dtype(ReturnedOutput& out, PyObject* source) {
  if (out.dtype_of >= 0) {
    if (Py_TYPE(source) != reinterpret_cast<PyTypeObject*>(cache.torch_tensor)) return nullptr;
    return PyObject_GetAttr(source, cache.s_dtype);
  }
  if (out.torch_dtype == nullptr) out.torch_dtype = PyObject_GetAttr(cache.torch, out.dtype_name);
  Py_XINCREF(out.torch_dtype);
  return out.torch_dtype;
}

/// torch.empty(*shape, dtype=..., device=template.device): sizes as separate ints
/// parse ~0.5 us faster than a tuple; a 0-d tensor needs the empty tuple.
PyObject* allocate_torch(PyObject* template_, ReturnedOutput& out, PyObject* source, const int64_t* shape,
                         size_t rank) {
  PyObject* dtype = torch_dtype(out, source);
  if (dtype == nullptr) return nullptr;
  PyObject* device = PyObject_GetAttr(template_, cache.s_device);
  if (device == nullptr) {
    Py_DECREF(dtype);
    return nullptr;
  }
  SmallVector<PyObject*, 12> argv;
  bool ok = true;
  if (rank == 0) {
    argv.push_back(PyTuple_New(0));
    ok = argv[0] != nullptr;
  }
  for (size_t i = 0; ok && i < rank; ++i) {
    argv.push_back(PyLong_FromLongLong(shape[i]));
    ok = argv[i] != nullptr;
  }
  PyObject* tensor = nullptr;
  if (ok) {
    size_t npos = argv.size();
    argv.push_back(dtype);
    argv.push_back(device);
    tensor = PyObject_Vectorcall(cache.torch_empty, argv.data(), npos, cache.torch_kwnames);
    argv.resize(npos);
  }
  for (PyObject* a : argv) Py_XDECREF(a);
  Py_DECREF(dtype);
  Py_DECREF(device);
  return tensor;
}

/// Whether a tvm_ffi.Tensor is on the CPU (kDLCPU), where kjit.ew_empty allocates.
bool on_cpu(PyObject* tensor) {
  PyObject* device = PyObject_CallMethodNoArgs(tensor, cache.s_dlpack_device);
  if (device == nullptr) return false;
  bool cpu = false;
  if (PyTuple_Check(device) && PyTuple_GET_SIZE(device) >= 1) {
    cpu = PyLong_AsLong(PyTuple_GET_ITEM(device, 0)) == 1;
  }
  Py_DECREF(device);
  return cpu;
}

PyObject* allocate_tvm_ffi(PyObject* template_, ReturnedOutput& out, PyObject* source, const int64_t* shape,
                           size_t rank) {
  if (!on_cpu(template_)) return nullptr;  // the binder's TypeError names it
  PyObject* dtype = nullptr;
  if (out.dtype_of < 0) {
    dtype = out.dtype_name;
    Py_INCREF(dtype);
  } else if (Py_TYPE(source) == reinterpret_cast<PyTypeObject*>(cache.ffi_tensor)) {
    PyObject* d = PyObject_GetAttr(source, cache.s_dtype);
    dtype = d != nullptr ? PyObject_Str(d) : nullptr;
    Py_XDECREF(d);
  }
  if (dtype == nullptr) return nullptr;
  PyObject* dims = tuple_of(shape, rank);  // tvm-ffi converts a tuple as the binder's list, a little faster
  PyObject* tensor = nullptr;
  if (dims != nullptr) {
    PyObject* argv[] = {dims, dtype};
    tensor = PyObject_Vectorcall(cache.ffi_empty, argv, 2, nullptr);
    Py_DECREF(dims);
  }
  Py_DECREF(dtype);
  return tensor;
}

}  // namespace

PyObject* configure_frameworks(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 5 || !PyType_Check(args[0]) || !PyCallable_Check(args[1]) || !PyDict_Check(args[2]) ||
      !PyType_Check(args[3]) || !PyCallable_Check(args[4])) {
    PyErr_SetString(PyExc_TypeError,
                    "kjit._call.configure(ndarray, numpy_empty, numpy_dtypes: dict, ffi_tensor, ffi_empty)");
    return nullptr;
  }
  if (!intern(&cache.s_shape, "shape") || !intern(&cache.s_dtype, "dtype") || !intern(&cache.s_device, "device") ||
      !intern(&cache.s_dlpack_device, "__dlpack_device__") || !intern(&cache.s_torch, "torch")) {
    return nullptr;
  }
  if (cache.torch_kwnames == nullptr) {
    cache.torch_kwnames = Py_BuildValue("(OO)", cache.s_dtype, cache.s_device);
    if (cache.torch_kwnames == nullptr) return nullptr;
  }
  hold(&cache.ndarray, args[0]);
  hold(&cache.numpy_empty, args[1]);
  hold(&cache.numpy_dtypes, args[2]);
  hold(&cache.ffi_tensor, args[3]);
  hold(&cache.ffi_empty, args[4]);
  Py_RETURN_NONE;
}

Framework framework_of(PyObject* x) {
  if (cache.ndarray == nullptr) return Framework::kOther;  // not configured: the binder does it all
  PyObject* type = reinterpret_cast<PyObject*>(Py_TYPE(x));
  if (x == Py_None || type == cache.ndarray) return Framework::kNumpy;
  if (type == cache.ffi_tensor) return Framework::kTvmFfi;
  if (resolve_torch() && type == cache.torch_tensor) return Framework::kTorch;
  return Framework::kOther;
}

PyTypeObject* torch_tensor_type() {
  if (!intern(&cache.s_torch, "torch")) {
    PyErr_Clear();
    return nullptr;
  }
  return resolve_torch() ? reinterpret_cast<PyTypeObject*>(cache.torch_tensor) : nullptr;
}

PyObject* shape_of(PyObject* x) { return PyObject_GetAttr(x, cache.s_shape); }

PyObject* allocate_output(Framework framework, PyObject* template_, ReturnedOutput& out, PyObject* dtype_source,
                          const int64_t* shape, size_t rank) {
  PyObject* tensor = nullptr;
  switch (framework) {
    case Framework::kNumpy:
      tensor = allocate_numpy(out, dtype_source, shape, rank);
      break;
    case Framework::kTorch:
      tensor = allocate_torch(template_, out, dtype_source, shape, rank);
      break;
    case Framework::kTvmFfi:
      tensor = allocate_tvm_ffi(template_, out, dtype_source, shape, rank);
      break;
    case Framework::kOther:
      break;
  }
  if (tensor == nullptr) PyErr_Clear();
  return tensor;
}

bool is_read_only_ndarray(PyObject* x) {
  if (cache.ndarray == nullptr || Py_TYPE(x) != reinterpret_cast<PyTypeObject*>(cache.ndarray)) return false;
  PyObject* flags = PyObject_GetAttrString(x, "flags");
  PyObject* writeable = flags != nullptr ? PyObject_GetAttrString(flags, "writeable") : nullptr;
  int truth = writeable != nullptr ? PyObject_IsTrue(writeable) : -1;
  Py_XDECREF(writeable);
  Py_XDECREF(flags);
  if (truth < 0) PyErr_Clear();
  return truth == 0;
}

}  // namespace kjit::pyext
