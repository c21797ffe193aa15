// NumPy arrays as DLTensor views and tvm-ffi tensors as NumPy arrays, through NumPy's
// C API: what the elementwise call type uses instead of DLPack capsules, which cost
// ~0.13 us per array (a Python method call, a capsule and a tvm-ffi Tensor each).
#ifndef KJIT_PYEXT_NUMPY_TENSORS_H_
#define KJIT_PYEXT_NUMPY_TENSORS_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlpack/dlpack.h>
#include <tvm/ffi/c_api.h>

#include <cstdint>

#include "direct_call.h"

namespace kjit::pyext {

/// Imports NumPy's C API (numpy.core.multiarray); -1 with an ImportError set.
int import_numpy_api();

/// numpy.ndarray (borrowed; valid after import_numpy_api).
PyTypeObject* ndarray_type();

/// Fills `t` (and `strides`, room for NPY_MAXDIMS, which `t` points to) with a view of
/// the exact ndarray `a`, as NumPy's __dlpack__ would describe it. False, nothing
/// set, when DLPack would refuse it (read-only, non-native byte order, strides that
/// are not whole elements) or its dtype is not one of bool, int8..uint64,
/// float16/32/64, complex64/128: the caller's checked path takes those.
bool view_ndarray(PyObject* a, DLTensor* t, int64_t* strides);

/// A new NumPy array over `tensor`'s CPU memory that owns the reference `tensor`
/// (released when the array is collected, or here on failure). `dtype_named` maps a
/// dtype name NumPy has no builtin type for ("bfloat16") to a numpy.dtype.
/// nullptr with an error set on failure.
PyObject* ndarray_owning(TVMFFIObjectHandle tensor, PyObject* dtype_named);

/// Fills `t` with the metadata and data of ndarray `a` (a subclass too), writeable
/// or not (`scratch` has room for 64 strides). False, nothing set, for a byte order
/// or dtype DLPack cannot carry, or strides that are not whole elements.
bool ndarray_metadata(PyObject* a, DLTensor* t, int64_t* scratch);

/// The data of ndarray `a` (a C-contiguous array kjit just allocated knows the rest).
void* ndarray_data(PyObject* a);

/// A NumPy scalar as tvm-ffi passes it (np.bool_ a bool, integers an int, floating
/// types a float); false for anything else, complex scalars included.
bool numpy_scalar(PyObject* x, TVMFFIAny* out);

/// `result` itself, or for a 0-d ndarray its NumPy scalar, as np.sum returns one.
/// Takes `result`; nullptr with an error set on failure.
PyObject* scalar_if_zero_dim(PyObject* result);

/// Whether ndarray `a` is writeable.
bool ndarray_writeable(PyObject* a);

/// A new C-contiguous ndarray of `shape` and `dtype` (bfloat16 through
/// `dtype_named`), its axes in `order` when given (outermost first). nullptr with
/// an error set.
PyObject* empty_ndarray(const int64_t* shape, int rank, DLDataType dtype, const int64_t* order, PyObject* dtype_named);

/// How NumPy arrays cross a direct call: outputs by view_ndarray, inputs by
/// ndarray_metadata (read-only arrays too: the kernel only reads them; the others
/// take the checked path), results by ndarray_owning with `dtype_named`.
TensorBridge numpy_bridge(PyObject* dtype_named);

}  // namespace kjit::pyext

#endif  // KJIT_PYEXT_NUMPY_TENSORS_H_
