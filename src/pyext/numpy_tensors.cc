#include "numpy_tensors.h"

#include "direct_call.h"

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

namespace kjit::pyext {
namespace {

static_assert(sizeof(npy_intp) == sizeof(int64_t), "DLTensor shapes point at NumPy's dims");
static_assert(NPY_MAXDIMS <= kMaxViewDims, "a view's stride buffer holds NPY_MAXDIMS");

const char kCapsuleName[] = "kjit.tvm_ffi_tensor";

/// The builtin NumPy types kjit passes, with their DLPack dtypes. One row per C
/// type; where two share a DLPack dtype (long and long long), the first is the one
/// results get.
struct DtypeRow {
  int type_num;
  DLDataTypeCode code;
  size_t bytes;
};
constexpr DtypeRow kDtypes[] = {
    {NPY_BOOL, kDLBool, 1},
    {NPY_BYTE, kDLInt, sizeof(npy_byte)},
    {NPY_SHORT, kDLInt, sizeof(npy_short)},
    {NPY_INT, kDLInt, sizeof(npy_int)},
    {NPY_LONG, kDLInt, sizeof(npy_long)},
    {NPY_LONGLONG, kDLInt, sizeof(npy_longlong)},
    {NPY_UBYTE, kDLUInt, sizeof(npy_ubyte)},
    {NPY_USHORT, kDLUInt, sizeof(npy_ushort)},
    {NPY_UINT, kDLUInt, sizeof(npy_uint)},
    {NPY_ULONG, kDLUInt, sizeof(npy_ulong)},
    {NPY_ULONGLONG, kDLUInt, sizeof(npy_ulonglong)},
    {NPY_HALF, kDLFloat, 2},
    {NPY_FLOAT, kDLFloat, sizeof(npy_float)},
    {NPY_DOUBLE, kDLFloat, sizeof(npy_double)},
    {NPY_CFLOAT, kDLComplex, sizeof(npy_cfloat)},
    {NPY_CDOUBLE, kDLComplex, sizeof(npy_cdouble)},
};

/// The DLPack dtype of a builtin NumPy type number; false for the others.
bool dl_dtype_of(int type_num, DLDataType* out) {
  for (const DtypeRow& row : kDtypes) {
    if (row.type_num == type_num) {
      *out = DLDataType{static_cast<uint8_t>(row.code), static_cast<uint8_t>(row.bytes * 8), 1};
      return true;
    }
  }
  return false;
}

/// The NumPy type number of a DLPack dtype kjit's results take; -1 for the others.
int type_num_of(DLDataType d) {
  for (const DtypeRow& row : kDtypes) {
    if (d.lanes == 1 && d.code == row.code && d.bits == row.bytes * 8) return row.type_num;
  }
  return -1;
}

/// The numpy.dtype of a result's DLPack dtype (new reference), or nullptr with an
/// error set: builtin types by number, bfloat16 through `dtype_named`.
PyArray_Descr* descr_of(DLDataType d, PyObject* dtype_named) {
  int type_num = type_num_of(d);
  if (type_num >= 0) return PyArray_DescrFromType(type_num);
  if (d.code != kDLBfloat || d.bits != 16 || d.lanes != 1) {
    PyErr_Format(PyExc_RuntimeError, "kjit._call: a NumPy result of DLPack dtype code %d, %d bits has no NumPy dtype",
                 static_cast<int>(d.code), static_cast<int>(d.bits));
    return nullptr;
  }
  PyObject* dtype = PyObject_CallFunction(dtype_named, "s", "bfloat16");
  if (dtype == nullptr) return nullptr;
  PyArray_Descr* descr = nullptr;
  int ok = PyArray_DescrConverter(dtype, &descr);
  Py_DECREF(dtype);
  return ok ? descr : nullptr;
}

void release_tensor(PyObject* capsule) {
  auto* tensor = static_cast<TVMFFIObjectHandle>(PyCapsule_GetPointer(capsule, kCapsuleName));
  if (tensor != nullptr) TVMFFIObjectDecRef(tensor);
}

}  // namespace

int import_numpy_api() { return _import_array(); }

PyTypeObject* ndarray_type() { return &PyArray_Type; }

bool view_ndarray(PyObject* obj, DLTensor* t, int64_t* strides) {
  return ndarray_writeable(obj) && ndarray_metadata(obj, t, strides);
}

void* ndarray_data(PyObject* a) { return PyArray_DATA(reinterpret_cast<PyArrayObject*>(a)); }

bool numpy_scalar(PyObject* x, TVMFFIAny* out) {
  if (!PyArray_IsScalar(x, Generic)) return false;
  if (PyArray_IsScalar(x, Bool)) {
    out->type_index = kTVMFFIBool;
    out->v_int64 = PyObject_IsTrue(x);
    return true;
  }
  if (PyArray_IsScalar(x, Integer)) {
    PyObject* value = PyNumber_Index(x);
    if (value == nullptr) {
      PyErr_Clear();
      return false;
    }
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    Py_DECREF(value);
    out->type_index = overflow != 0 ? kTVMFFIBigInt : kTVMFFIInt;
    out->v_int64 = overflow != 0 ? 0 : v;
    return true;
  }
  if (PyArray_IsScalar(x, Floating)) {
    out->type_index = kTVMFFIFloat;
    out->v_float64 = PyFloat_AsDouble(x);
    return true;
  }
  return false;
}

bool ndarray_writeable(PyObject* a) { return PyArray_ISWRITEABLE(reinterpret_cast<PyArrayObject*>(a)); }

bool ndarray_metadata(PyObject* obj, DLTensor* t, int64_t* strides) {
  auto* a = reinterpret_cast<PyArrayObject*>(obj);
  if (!PyArray_ISNOTSWAPPED(a)) return false;
  DLDataType dtype;
  if (!dl_dtype_of(PyArray_TYPE(a), &dtype)) return false;
  const int nd = PyArray_NDIM(a);
  const npy_intp itemsize = PyArray_ITEMSIZE(a);
  const npy_intp* byte_strides = PyArray_STRIDES(a);
  for (int i = 0; i < nd; ++i) {
    if (byte_strides[i] % itemsize != 0) return false;
    strides[i] = byte_strides[i] / itemsize;
  }
  t->data = PyArray_DATA(a);
  t->device = DLDevice{kDLCPU, 0};
  t->ndim = nd;
  t->dtype = dtype;
  t->shape = reinterpret_cast<int64_t*>(PyArray_DIMS(a));
  t->strides = strides;
  t->byte_offset = 0;
  return true;
}

PyObject* empty_ndarray(const int64_t* shape, int rank, DLDataType dtype, const int64_t* order, PyObject* dtype_named) {
  if (rank < 0 || rank > NPY_MAXDIMS) {
    PyErr_Format(PyExc_ValueError, "kjit: an output of rank %d, beyond NumPy's %d dims", rank, NPY_MAXDIMS);
    return nullptr;
  }
  PyArray_Descr* descr = descr_of(dtype, dtype_named);
  if (descr == nullptr) return nullptr;
  npy_intp dims[NPY_MAXDIMS];
  for (int i = 0; i < rank; ++i) dims[i] = shape[order != nullptr ? order[i] : i];
  PyObject* array = PyArray_Empty(rank, dims, descr, 0);  // steals descr
  if (array == nullptr || order == nullptr) return array;
  npy_intp inverse[NPY_MAXDIMS];
  for (int i = 0; i < rank; ++i) inverse[order[i]] = i;
  PyArray_Dims perm{inverse, rank};
  PyObject* transposed = PyArray_Transpose(reinterpret_cast<PyArrayObject*>(array), &perm);
  Py_DECREF(array);
  return transposed;
}

TensorBridge numpy_bridge(PyObject* dtype_named) {
  auto view = [](const void*, PyObject* x, DLTensor* t, int64_t* strides, bool written) {
    const bool viewed = written ? view_ndarray(x, t, strides) : ndarray_metadata(x, t, strides);
    return viewed ? ViewResult::kViewed : ViewResult::kChecked;
  };
  auto wrap = [](const void* named, TVMFFIObjectHandle tensor) {
    return ndarray_owning(tensor, static_cast<PyObject*>(const_cast<void*>(named)));
  };
  return TensorBridge{&PyArray_Type, view, wrap, dtype_named};
}

PyObject* ndarray_owning(TVMFFIObjectHandle tensor, PyObject* dtype_named) {
  PyObject* capsule = PyCapsule_New(tensor, kCapsuleName, release_tensor);
  if (capsule == nullptr) {
    TVMFFIObjectDecRef(tensor);
    return nullptr;
  }
  const DLTensor* t = TVMFFITensorGetDLTensorPtr(tensor);
  if (t->ndim < 0 || t->ndim > NPY_MAXDIMS) {
    PyErr_Format(PyExc_RuntimeError, "kjit._call: a result of rank %d, beyond NumPy's %d dims", t->ndim, NPY_MAXDIMS);
    Py_DECREF(capsule);
    return nullptr;
  }
  PyArray_Descr* descr = descr_of(t->dtype, dtype_named);
  if (descr == nullptr) {
    Py_DECREF(capsule);
    return nullptr;
  }
  const int64_t itemsize = (t->dtype.bits * t->dtype.lanes + 7) / 8;
  npy_intp byte_strides[NPY_MAXDIMS];
  int64_t step = itemsize;
  for (int i = t->ndim; i-- > 0;) {  // a null strides array means compact row-major
    byte_strides[i] = t->strides != nullptr ? t->strides[i] * itemsize : step;
    step *= t->shape[i];
  }
  static char empty_data;  // NumPy would allocate its own buffer for a null pointer
  void* data = t->data != nullptr ? static_cast<char*>(t->data) + t->byte_offset : &empty_data;
  PyObject* array = PyArray_NewFromDescr(&PyArray_Type, descr, t->ndim, reinterpret_cast<npy_intp*>(t->shape),
                                         byte_strides, data, NPY_ARRAY_WRITEABLE, nullptr);
  if (array == nullptr) {
    Py_DECREF(capsule);
    return nullptr;
  }
  if (PyArray_SetBaseObject(reinterpret_cast<PyArrayObject*>(array), capsule) < 0) {  // steals capsule
    Py_DECREF(array);
    return nullptr;
  }
  return array;
}

PyObject* scalar_if_zero_dim(PyObject* result) {
  if (Py_TYPE(result) != &PyArray_Type || PyArray_NDIM(reinterpret_cast<PyArrayObject*>(result)) != 0) return result;
  return PyArray_Return(reinterpret_cast<PyArrayObject*>(result));
}

}  // namespace kjit::pyext
