// The framework table: which array framework a call's tensor argument belongs to,
// how kjit reads its metadata, how new outputs are allocated in the caller's
// framework and device, and what happens to read-only arrays. Checked kernels
// (function_type.cc) and elementwise functions (computation_type.cc, and
// python/kjit/elementwise.py through kjit._call.empty) all use it.
//
// NumPy arrays, torch tensors and tvm_ffi.Tensor are recognised by exact type in C;
// anything else is classified once per call by python/kjit/_frameworks.py (JAX
// arrays and tracers, other DLPack objects, kjit.TensorMeta, subclasses).
#ifndef KJIT_PYEXT_FRAMEWORKS_H_
#define KJIT_PYEXT_FRAMEWORKS_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>

namespace kjit::pyext {

enum class Framework {
  kNumpy,      ///< numpy.ndarray (and None: calls without tensors return NumPy)
  kTorch,      ///< torch.Tensor, once torch is imported
  kJax,        ///< a concrete jax.Array: read through DLPack, results made JAX arrays
  kJaxTracer,  ///< a JAX tracer: kjit's JAX callables take those, mod.fn cannot
  kTvmFfi,     ///< tvm_ffi.Tensor
  kDlpack,     ///< any other object with __dlpack__
  kMeta,       ///< kjit.TensorMeta: metadata only (fn.infer)
  kNone,       ///< not a tensor
};

/// kjit._call.configure(ndarray, tvm_tensor, ffi_empty, dtype_named, classify,
/// readable, jax_array): python/kjit/_frameworks.py calls it once at import.
PyObject* configure_frameworks(PyObject* module, PyObject* const* args, Py_ssize_t nargs);

/// The framework of `x` (kNone for None, scalars and unknown objects). nullopt-like
/// failure: -1 cast, with an error set, only when the classifier itself failed.
bool framework_of(PyObject* x, Framework* out);

/// torch.Tensor once torch is in sys.modules (borrowed); nullptr before, no error set.
PyTypeObject* torch_tensor_type();

/// tvm_ffi.Tensor (borrowed; nullptr before configure_frameworks).
PyTypeObject* tvm_tensor_type();

/// The tvm-ffi object handle of an exact tvm_ffi.Tensor, read where Cython keeps it
/// (checked at configure); nullptr when that layout was not confirmed.
void* tvm_tensor_handle(PyObject* x);

/// A tensor argument's metadata (and data, for real tensors) as a DLTensor:
/// `strides` has room for 64 dims; what must stay alive while `t` is read (a DLPack
/// capsule) is stored in `*held` (a new reference, or nullptr). False with an error
/// set when `x` cannot be read.
bool view_tensor(PyObject* x, Framework f, DLTensor* t, int64_t* strides, PyObject** held);

/// A new tensor of `shape` and `dtype` in framework `f` on `device` (the caller's
/// first tensor's); its axes in `order` (outermost first, a permutation) when given,
/// as TensorIterator lays out outputs. A tvm_ffi.Tensor stands in for JAX and other
/// DLPack frameworks (as_result turns it into a JAX array). nullptr with an error set.
PyObject* allocate(Framework f, PyObject* template_, const int64_t* shape, int rank, DLDataType dtype, DLDevice device,
                   const int64_t* order = nullptr);

/// A new output as the caller's framework returns it: a JAX array over a kjit tensor
/// for JAX callers, the tensor itself otherwise. Steals `tensor`.
PyObject* as_result(Framework f, PyObject* tensor);

/// Whether x is a read-only NumPy array (the slow path only: reads its flags).
bool is_read_only_ndarray(PyObject* x);

/// A read-only NumPy array as a tvm_ffi.Tensor through versioned DLPack, which can
/// say "read-only" (new reference; nullptr with an error set).
PyObject* readable_view(PyObject* x);

/// kjit._call.framework_of(x) -> int: the Framework of x (the enum's value).
PyObject* py_framework_of(PyObject* module, PyObject* x);

/// kjit._call.empty(like, shape, dtype, order=None): a new output in the framework
/// and on the device of `like` (a tensor, or None for NumPy), as allocate() makes it
/// (a tvm_ffi.Tensor for JAX: the caller makes it a JAX array once written).
PyObject* py_empty(PyObject* module, PyObject* const* args, Py_ssize_t nargs);

/// kjit._call.bump_versions(list): bump_torch_versions over the torch tensors of a list.
PyObject* py_bump_versions(PyObject* module, PyObject* tensors);

/// The name of a dtype ("float32", "bfloat16"), kjit's (the grammar's) name for it
/// (new reference; nullptr with a ValueError for a dtype kjit does not name).
PyObject* dtype_name(DLDataType d);

}  // namespace kjit::pyext

#endif  // KJIT_PYEXT_FRAMEWORKS_H_
