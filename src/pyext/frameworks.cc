#include "frameworks.h"

#include <tvm/ffi/c_api.h>

#include <cstring>
#include <string>

#include "kjit/small_vector.h"
#include "kjit/spec.h"
#include "numpy_tensors.h"
#include "torch_tensors.h"

namespace kjit::pyext {
namespace {

/// Strong references held for the life of the process (one interpreter).
struct Table {
  PyObject* tvm_tensor = nullptr;  ///< tvm_ffi.Tensor
  /// Where a tvm_ffi.Tensor object keeps its handle (Cython's layout: after the
  /// object header), found at configure by comparing with __chandle__(); 0: unknown.
  Py_ssize_t chandle_offset = 0;
  PyObject* ffi_empty = nullptr;    ///< kjit.ew_empty(shape, dtype name) -> tvm_ffi.Tensor (CPU)
  PyObject* dtype_named = nullptr;  ///< name -> numpy.dtype, for dtypes NumPy has no number for
  PyObject* classify = nullptr;     ///< classify(x) -> Framework value, for what C does not know by type
  PyObject* readable = nullptr;     ///< readable(array) -> tvm_ffi.Tensor through versioned DLPack
  PyObject* jax_result = nullptr;   ///< jax_result(tensor) -> jax.Array over it
  PyObject* torch = nullptr;        ///< the torch module, once imported
  PyObject* torch_tensor = nullptr;
  PyObject* torch_empty = nullptr;
  PyObject* torch_kwnames = nullptr;  ///< ("dtype", "device")
  PyObject* torch_dtypes = nullptr;   ///< {dtype name: torch.dtype}
  PyObject* torch_cpu = nullptr;      ///< torch.device("cpu"), made once
  PyObject* s_torch = nullptr;
  PyObject* s_device = nullptr;
  PyObject* s_dlpack = nullptr;
  PyObject* s_chandle = nullptr;
  PyObject* s_permute = nullptr;
};

Table table;

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
  if (table.torch_tensor != nullptr) return true;
  if (table.s_torch == nullptr) return false;
  PyObject* torch = PyImport_GetModule(table.s_torch);
  if (torch == nullptr) {
    PyErr_Clear();
    return false;
  }
  PyObject* tensor = PyObject_GetAttrString(torch, "Tensor");
  PyObject* empty = tensor != nullptr ? PyObject_GetAttrString(torch, "empty") : nullptr;
  if (empty == nullptr) {  // torch still importing, or not the real one
    PyErr_Clear();
    Py_XDECREF(tensor);
    Py_DECREF(torch);
    return false;
  }
  table.torch = torch;
  table.torch_tensor = tensor;
  table.torch_empty = empty;
  return true;
}

PyObject* torch_dtype_by_name(DLDataType d);

PyObject* tuple_of(const int64_t* values, int n) {
  PyObject* t = PyTuple_New(n);
  for (int i = 0; t != nullptr && i < n; ++i) {
    PyObject* v = PyLong_FromLongLong(values[i]);
    if (v == nullptr) Py_CLEAR(t);
    if (t != nullptr) PyTuple_SET_ITEM(t, i, v);
  }
  return t;
}

/// torch.<name> of a dtype, cached by name (and the last few by their DLPack word,
/// which spares the name's lookup on every call).
PyObject* torch_dtype(DLDataType d) {
  uint32_t word = 0;
  std::memcpy(&word, &d, sizeof word);
  static struct {
    uint32_t word;
    PyObject* dtype;  // strong
  } recent[8] = {};
  for (const auto& r : recent) {
    if (r.dtype != nullptr && r.word == word) {
      Py_INCREF(r.dtype);
      return r.dtype;
    }
  }
  PyObject* dtype = torch_dtype_by_name(d);
  if (dtype == nullptr) return nullptr;
  static size_t next = 0;
  auto& slot = recent[next++ % 8];
  Py_XSETREF(slot.dtype, dtype);
  slot.word = word;
  Py_INCREF(dtype);
  return dtype;
}

PyObject* torch_dtype_by_name(DLDataType d) {
  PyObject* name = dtype_name(d);
  if (name == nullptr) return nullptr;
  PyObject* dtype = PyDict_GetItemWithError(table.torch_dtypes, name);  // borrowed
  if (dtype != nullptr) {
    Py_INCREF(dtype);
  } else if (!PyErr_Occurred()) {
    dtype = PyObject_GetAttr(table.torch, name);
    if (dtype != nullptr && PyDict_SetItem(table.torch_dtypes, name, dtype) < 0) Py_CLEAR(dtype);
  }
  Py_DECREF(name);
  return dtype;
}

/// torch.empty(*sizes, dtype=..., device=template.device), permuted to `order`.
/// The torch.device of a new output: `template_.device`, or the cached CPU device
/// (reading .device makes a new object each time). New reference.
PyObject* torch_device(PyObject* template_, DLDevice device) {
  if (device.device_type != kDLCPU) return PyObject_GetAttr(template_, table.s_device);
  if (table.torch_cpu == nullptr) {
    PyObject* make = PyObject_GetAttrString(table.torch, "device");
    table.torch_cpu = make != nullptr ? PyObject_CallFunction(make, "s", "cpu") : nullptr;
    Py_XDECREF(make);
    if (table.torch_cpu == nullptr) return nullptr;
  }
  Py_INCREF(table.torch_cpu);
  return table.torch_cpu;
}

PyObject* allocate_torch(PyObject* template_, const int64_t* shape, int rank, DLDataType d, DLDevice where,
                         const int64_t* order) {
  PyObject* dtype = torch_dtype(d);
  PyObject* device = dtype != nullptr ? torch_device(template_, where) : nullptr;
  if (device == nullptr) {
    Py_XDECREF(dtype);
    return nullptr;
  }
  SmallVector<PyObject*, 12> argv;
  bool ok = true;
  if (rank == 0) {  // sizes as separate ints parse faster than a tuple; a 0-d tensor needs ()
    argv.push_back(PyTuple_New(0));
    ok = argv[0] != nullptr;
  }
  for (int i = 0; ok && i < rank; ++i) {
    argv.push_back(PyLong_FromLongLong(shape[order != nullptr ? order[i] : i]));
    ok = argv[static_cast<size_t>(i)] != nullptr;
  }
  PyObject* tensor = nullptr;
  if (ok) {
    const size_t npos = argv.size();
    argv.push_back(dtype);
    argv.push_back(device);
    tensor = PyObject_Vectorcall(table.torch_empty, argv.data(), npos, table.torch_kwnames);
    argv.resize(npos);
  }
  for (PyObject* a : argv) Py_XDECREF(a);
  Py_DECREF(dtype);
  Py_DECREF(device);
  if (tensor == nullptr || order == nullptr) return tensor;
  SmallVector<int64_t, 8> inverse(static_cast<size_t>(rank));
  for (int i = 0; i < rank; ++i) inverse[static_cast<size_t>(order[i])] = i;
  PyObject* dims = tuple_of(inverse.data(), rank);
  PyObject* permuted = dims != nullptr ? PyObject_CallMethodOneArg(tensor, table.s_permute, dims) : nullptr;
  Py_XDECREF(dims);
  Py_DECREF(tensor);
  return permuted;
}

const char* device_text(DLDevice d) { return d.device_type == kDLCUDA ? "cuda" : "a non-CPU device"; }

/// kjit.ew_empty(shape, dtype name): a C-contiguous CPU tvm_ffi.Tensor.
PyObject* allocate_tvm_ffi(PyObject* template_, const int64_t* shape, int rank, DLDataType d, DLDevice device) {
  if (device.device_type != kDLCPU) {
    PyErr_Format(PyExc_TypeError,
                 "kjit: cannot allocate an output on %s for %s inputs (kjit allocates GPU memory through torch "
                 "only); pass torch tensors, or pass the output (out=)",
                 device_text(device), Py_TYPE(template_)->tp_name);
    return nullptr;
  }
  PyObject* dims = tuple_of(shape, rank);
  PyObject* name = dims != nullptr ? dtype_name(d) : nullptr;
  PyObject* tensor = nullptr;
  if (name != nullptr) {
    PyObject* argv[] = {dims, name};
    tensor = PyObject_Vectorcall(table.ffi_empty, argv, 2, nullptr);
  }
  Py_XDECREF(dims);
  Py_XDECREF(name);
  return tensor;
}

/// A DLPack capsule's tensor ("dltensor" or "dltensor_versioned"), described in `t`.
bool view_capsule(PyObject* capsule, DLTensor* t) {
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    *t = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"))->dl_tensor;
    return true;
  }
  if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
    *t = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(capsule, "dltensor_versioned"))->dl_tensor;
    return true;
  }
  PyErr_SetString(PyExc_TypeError, "kjit: __dlpack__() did not return a DLPack capsule");
  return false;
}

/// The dtype of a name kjit knows (spec.h's table, the grammar's names); false with
/// a ValueError naming `who` otherwise.
bool dtype_of_name(PyObject* name, DLDataType* out, const char* who) {
  const char* text = PyUnicode_AsUTF8(name);
  if (text == nullptr) return false;
  const kjit::DTypeInfo* d = kjit::find_dtype(std::string(text));
  if (d == nullptr) {
    PyErr_Format(PyExc_ValueError, "%s: unknown dtype '%s'%s (kjit's dtypes: %s)", who, text,
                 kjit::dtype_spelling_hint(text).c_str(), kjit::known_dtype_names().c_str());
    return false;
  }
  *out = d->dl;
  return true;
}

/// kjit.TensorMeta (shape, dtype name, device type, device id, strides or None).
bool view_meta(PyObject* x, DLTensor* t, int64_t* scratch) {
  PyObject* shape = PyTuple_GET_ITEM(x, 0);
  PyObject* strides = PyTuple_GET_ITEM(x, 4);
  const Py_ssize_t rank = PyTuple_GET_SIZE(shape);
  if (rank > 64 || (strides != Py_None && PyTuple_GET_SIZE(strides) != rank)) {
    PyErr_SetString(PyExc_ValueError, "kjit.TensorMeta: at most 64 dims, and one stride per dim");
    return false;
  }
  for (Py_ssize_t i = 0; i < rank; ++i) {
    scratch[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
    if (strides != Py_None) scratch[64 + i] = PyLong_AsLongLong(PyTuple_GET_ITEM(strides, i));
  }
  if (PyErr_Occurred()) return false;
  if (!dtype_of_name(PyTuple_GET_ITEM(x, 1), &t->dtype, "kjit.TensorMeta")) return false;
  t->data = nullptr;
  t->device = DLDevice{static_cast<DLDeviceType>(PyLong_AsLong(PyTuple_GET_ITEM(x, 2))),
                       static_cast<int32_t>(PyLong_AsLong(PyTuple_GET_ITEM(x, 3)))};
  t->ndim = static_cast<int32_t>(rank);
  t->shape = scratch;
  t->strides = strides != Py_None ? scratch + 64 : nullptr;
  t->byte_offset = 0;
  return !PyErr_Occurred();
}

/// The offset of a tvm_ffi object's handle, checked on `probe` against __chandle__().
Py_ssize_t chandle_offset_of(PyObject* probe) {
  PyObject* address = PyObject_CallMethod(probe, "__chandle__", nullptr);
  void* handle = address != nullptr ? PyLong_AsVoidPtr(address) : nullptr;
  Py_XDECREF(address);
  PyErr_Clear();
  const Py_ssize_t offset = static_cast<Py_ssize_t>(sizeof(PyObject));
  if (handle == nullptr || Py_TYPE(probe)->tp_basicsize < offset + static_cast<Py_ssize_t>(sizeof(void*))) return 0;
  void* stored = nullptr;
  std::memcpy(&stored, reinterpret_cast<const char*>(probe) + offset, sizeof stored);
  return stored == handle ? offset : 0;
}

}  // namespace

PyObject* configure_frameworks(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 8 || !PyType_Check(args[0]) || !PyType_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError,
                    "kjit._call.configure(ndarray, tvm_tensor, ffi_empty, dtype_named, classify, readable, "
                    "jax_result, probe_tensor)");
    return nullptr;
  }
  for (Py_ssize_t i = 2; i < nargs - 1; ++i) {
    if (!PyCallable_Check(args[i])) {
      PyErr_Format(PyExc_TypeError, "kjit._call.configure: argument %zd must be callable", i);
      return nullptr;
    }
  }
  if (!intern(&table.s_torch, "torch") || !intern(&table.s_device, "device") ||
      !intern(&table.s_dlpack, "__dlpack__") || !intern(&table.s_chandle, "__chandle__") ||
      !intern(&table.s_permute, "permute")) {
    return nullptr;
  }
  if (table.torch_kwnames == nullptr && (table.torch_kwnames = Py_BuildValue("(ss)", "dtype", "device")) == nullptr) {
    return nullptr;
  }
  if (table.torch_dtypes == nullptr && (table.torch_dtypes = PyDict_New()) == nullptr) return nullptr;
  if (import_numpy_api() < 0) return nullptr;
  hold(&table.tvm_tensor, args[1]);
  hold(&table.ffi_empty, args[2]);
  hold(&table.dtype_named, args[3]);
  hold(&table.classify, args[4]);
  hold(&table.readable, args[5]);
  hold(&table.jax_result, args[6]);
  table.chandle_offset = chandle_offset_of(args[7]);
  Py_RETURN_NONE;
}

bool framework_of(PyObject* x, Framework* out) {
  PyTypeObject* type = Py_TYPE(x);
  if (type == ndarray_type()) {
    *out = Framework::kNumpy;
  } else if (resolve_torch() && type == reinterpret_cast<PyTypeObject*>(table.torch_tensor)) {
    *out = Framework::kTorch;
  } else if (type == reinterpret_cast<PyTypeObject*>(table.tvm_tensor)) {
    *out = Framework::kTvmFfi;
  } else if (x == Py_None || type == &PyFloat_Type || type == &PyLong_Type || type == &PyBool_Type ||
             table.classify == nullptr) {
    *out = Framework::kNone;
  } else {
    PyObject* kind = PyObject_CallOneArg(table.classify, x);
    if (kind == nullptr) return false;
    const long k = PyLong_AsLong(kind);
    Py_DECREF(kind);
    if (k == -1 && PyErr_Occurred()) return false;
    *out = static_cast<Framework>(k);
  }
  return true;
}

PyTypeObject* torch_tensor_type() {
  return resolve_torch() ? reinterpret_cast<PyTypeObject*>(table.torch_tensor) : nullptr;
}

PyTypeObject* tvm_tensor_type() { return reinterpret_cast<PyTypeObject*>(table.tvm_tensor); }

void* tvm_tensor_handle(PyObject* x) {
  if (table.chandle_offset == 0 || Py_TYPE(x) != tvm_tensor_type()) return nullptr;
  void* handle = nullptr;
  std::memcpy(&handle, reinterpret_cast<const char*>(x) + table.chandle_offset, sizeof handle);
  return handle;
}

bool view_tensor(PyObject* x, Framework f, DLTensor* t, int64_t* scratch, PyObject** held) {
  *held = nullptr;
  switch (f) {
    case Framework::kNumpy:
      if (ndarray_metadata(x, t, scratch)) return true;
      break;  // a dtype DLPack does not know, a byte order it cannot carry: DLPack's error names it
    case Framework::kTorch:
      if (const DLPackExchangeAPI* api = torch_exchange_api(Py_TYPE(x))) {
        if (api->dltensor_from_py_object_no_sync(x, t) == 0) return true;
        PyErr_Clear();
      }
      break;
    case Framework::kTvmFfi: {
      void* handle = tvm_tensor_handle(x);
      if (handle == nullptr) {
        PyObject* address = PyObject_CallMethodNoArgs(x, table.s_chandle);
        handle = address != nullptr ? PyLong_AsVoidPtr(address) : nullptr;
        Py_XDECREF(address);
      }
      if (handle == nullptr) return false;
      *t = *TVMFFITensorGetDLTensorPtr(static_cast<TVMFFIObjectHandle>(handle));
      return true;
    }
    case Framework::kMeta:
      return view_meta(x, t, scratch);
    case Framework::kJaxTracer:
    case Framework::kNone:
      PyErr_SetString(PyExc_TypeError, "kjit: not a tensor");
      return false;
    case Framework::kJax:
    case Framework::kDlpack:
      break;
  }
  PyObject* capsule = PyObject_CallMethodNoArgs(x, table.s_dlpack);
  if (capsule == nullptr) return false;
  if (!view_capsule(capsule, t)) {
    Py_DECREF(capsule);
    return false;
  }
  *held = capsule;  // its destructor frees the tensor: it was never consumed
  return true;
}

PyObject* allocate(Framework f, PyObject* template_, const int64_t* shape, int rank, DLDataType dtype, DLDevice device,
                   const int64_t* order) {
  switch (f) {
    case Framework::kNumpy:
    case Framework::kNone:
      return empty_ndarray(shape, rank, dtype, order, table.dtype_named);
    case Framework::kTorch:
      if (resolve_torch()) return allocate_torch(template_, shape, rank, dtype, device, order);
      break;
    default:
      break;
  }
  return allocate_tvm_ffi(template_, shape, rank, dtype, device);
}

PyObject* as_result(Framework f, PyObject* tensor) {
  if (f != Framework::kJax || tensor == nullptr) return tensor;
  PyObject* array = PyObject_CallOneArg(table.jax_result, tensor);
  Py_DECREF(tensor);
  return array;
}

bool is_read_only_ndarray(PyObject* x) { return PyObject_TypeCheck(x, ndarray_type()) && !ndarray_writeable(x); }

PyObject* readable_view(PyObject* x) { return PyObject_CallOneArg(table.readable, x); }

PyObject* py_bump_versions(PyObject*, PyObject* tensors) {
  PyTypeObject* torch = torch_tensor_type();
  PyObject* fast = PySequence_Fast(tensors, "kjit._call.bump_versions takes a list of tensors");
  if (fast == nullptr) return nullptr;
  SmallVector<PyObject*, 4> written;
  for (Py_ssize_t i = 0; torch != nullptr && i < PySequence_Fast_GET_SIZE(fast); ++i) {
    PyObject* x = PySequence_Fast_GET_ITEM(fast, i);
    if (PyObject_TypeCheck(x, torch)) written.push_back(x);
  }
  const bool ok = written.empty() || bump_torch_versions(written.data(), written.size());
  Py_DECREF(fast);
  if (!ok) return nullptr;
  Py_RETURN_NONE;
}

PyObject* py_framework_of(PyObject*, PyObject* x) {
  Framework f = Framework::kNone;
  if (!framework_of(x, &f)) return nullptr;
  return PyLong_FromLong(static_cast<long>(f));
}

namespace {

bool int64s(PyObject* seq, SmallVector<int64_t, 8>* out, const char* what) {
  PyObject* fast = PySequence_Fast(seq, what);
  if (fast == nullptr) return false;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast); ++i) {
    out->push_back(PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, i)));
  }
  Py_DECREF(fast);
  return !PyErr_Occurred();
}

}  // namespace

PyObject* py_empty(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 3 || nargs > 4) {
    PyErr_SetString(PyExc_TypeError, "kjit._call.empty(like, shape, dtype, order=None)");
    return nullptr;
  }
  PyObject* like = args[0];
  Framework f = Framework::kNone;
  if (!framework_of(like, &f)) return nullptr;
  SmallVector<int64_t, 8> shape, order;
  if (!int64s(args[1], &shape, "kjit._call.empty: shape must be a sequence of ints")) return nullptr;
  const bool ordered = nargs == 4 && args[3] != Py_None;
  if (ordered && (!int64s(args[3], &order, "kjit._call.empty: order must be a sequence of ints") ||
                  order.size() != shape.size())) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "kjit._call.empty: order must have one entry per dim");
    return nullptr;
  }
  DLDataType dtype{};
  if (!dtype_of_name(args[2], &dtype, "kjit._call.empty")) return nullptr;
  DLDevice device{kDLCPU, 0};
  if (f != Framework::kNone && f != Framework::kNumpy) {
    DLTensor t;
    int64_t scratch[128];
    PyObject* held = nullptr;
    if (!view_tensor(like, f, &t, scratch, &held)) return nullptr;
    device = t.device;
    Py_XDECREF(held);
  }
  return allocate(f, like, shape.data(), static_cast<int>(shape.size()), dtype, device,
                  ordered ? order.data() : nullptr);
}

PyObject* dtype_name(DLDataType d) {
  const kjit::DTypeInfo* info = kjit::find_dtype(d);
  if (info == nullptr) {
    PyErr_Format(PyExc_ValueError, "kjit: a dtype without a name (DLPack code %d, %d bits, %d lanes)", d.code, d.bits,
                 d.lanes);
    return nullptr;
  }
  return PyUnicode_FromString(info->name);
}

}  // namespace kjit::pyext
