#include "numpy_tensors.h"

#include "direct_call.h"

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

namespace kjit::pyext {
namespace {

static_assert(sizeof(npy_intp) == sizeof(int64_t), "DLTensor shapes point at NumPy's dims");
static_assert(NPY_MAXDIMS <= kMaxViewDims, "a view's stride buffer holds NPY_MAXDIMS");

const char kCapsuleName[] = "kjit.tvm_ffi_tensor";

/// The DLPack dtype of a builtin NumPy type number; false for the others.
bool dl_dtype_of(int type_num, DLDataType* out) {
  auto set = [out](DLDataTypeCode code, size_t bytes) {
    *out = DLDataType{static_cast<uint8_t>(code), static_cast<uint8_t>(bytes * 8), 1};
    return true;
  };
  switch (type_num) {
    case NPY_BOOL:
      return set(kDLBool, 1);
    case NPY_BYTE:
      return set(kDLInt, sizeof(npy_byte));
    case NPY_SHORT:
      return set(kDLInt, sizeof(npy_short));
    case NPY_INT:
      return set(kDLInt, sizeof(npy_int));
    case NPY_LONG:
      return set(kDLInt, sizeof(npy_long));
    case NPY_LONGLONG:
      return set(kDLInt, sizeof(npy_longlong));
    case NPY_UBYTE:
      return set(kDLUInt, sizeof(npy_ubyte));
    case NPY_USHORT:
      return set(kDLUInt, sizeof(npy_ushort));
    case NPY_UINT:
      return set(kDLUInt, sizeof(npy_uint));
    case NPY_ULONG:
      return set(kDLUInt, sizeof(npy_ulong));
    case NPY_ULONGLONG:
      return set(kDLUInt, sizeof(npy_ulonglong));
    case NPY_HALF:
      return set(kDLFloat, 2);
    case NPY_FLOAT:
      return set(kDLFloat, sizeof(npy_float));
    case NPY_DOUBLE:
      return set(kDLFloat, sizeof(npy_double));
    case NPY_CFLOAT:
      return set(kDLComplex, sizeof(npy_cfloat));
    case NPY_CDOUBLE:
      return set(kDLComplex, sizeof(npy_cdouble));
    default:
      return false;
  }
}

/// The NumPy type number of a DLPack dtype kjit's results take; -1 for the others.
int type_num_of(DLDataType d) {
  if (d.lanes != 1) return -1;
  switch (d.code) {
    case kDLBool:
      return d.bits == 8 ? NPY_BOOL : -1;
    case kDLInt:
      return d.bits == 8    ? NPY_INT8
             : d.bits == 16 ? NPY_INT16
             : d.bits == 32 ? NPY_INT32
             : d.bits == 64 ? NPY_INT64
                            : -1;
    case kDLUInt:
      return d.bits == 8    ? NPY_UINT8
             : d.bits == 16 ? NPY_UINT16
             : d.bits == 32 ? NPY_UINT32
             : d.bits == 64 ? NPY_UINT64
                            : -1;
    case kDLFloat:
      return d.bits == 16 ? NPY_FLOAT16 : d.bits == 32 ? NPY_FLOAT32 : d.bits == 64 ? NPY_FLOAT64 : -1;
    case kDLComplex:
      return d.bits == 64 ? NPY_COMPLEX64 : d.bits == 128 ? NPY_COMPLEX128 : -1;
    default:
      return -1;
  }
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
  auto* a = reinterpret_cast<PyArrayObject*>(obj);
  if (!PyArray_ISWRITEABLE(a) || !PyArray_ISNOTSWAPPED(a)) return false;
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

}  // namespace kjit::pyext
