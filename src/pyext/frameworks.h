// The array frameworks a bound call allocates returned outputs in, recognised by exact
// type (subclasses and other DLPack objects go to the Python binder): NumPy through
// numpy.empty, torch through torch.empty, tvm_ffi.Tensor through kjit.ew_empty, each a
// Python callable cached once and called with vectorcall.
#ifndef KJIT_PYEXT_FRAMEWORKS_H_
#define KJIT_PYEXT_FRAMEWORKS_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstddef>
#include <cstdint>

namespace kjit::pyext {

struct ReturnedOutput;

enum class Framework { kNumpy, kTorch, kTvmFfi, kOther };

/// kjit._call.configure(ndarray, numpy_empty, numpy_dtypes, ffi_tensor, ffi_empty):
/// python/kjit/function.py calls it once at import.
PyObject* configure_frameworks(PyObject* module, PyObject* const* args, Py_ssize_t nargs);

/// The framework of a tensor argument by its exact type; None is NumPy's (the
/// binder's rule for calls without tensors). torch is looked up once it is imported.
Framework framework_of(PyObject* x);

/// torch.Tensor once torch is in sys.modules (borrowed); nullptr before, no error set.
PyTypeObject* torch_tensor_type();

/// x.shape of a NumPy, torch or tvm_ffi tensor (new reference); nullptr, error set.
PyObject* shape_of(PyObject* x);

/// A new tensor of `out` in `framework`, like `template_`'s device; nullptr without an
/// error set when the binder must do it (an unusual dtype source, a device kjit does
/// not allocate on, or an allocation that failed: the binder repeats it and reports).
PyObject* allocate_output(Framework framework, PyObject* template_, ReturnedOutput& out, PyObject* dtype_source,
                          const int64_t* shape, size_t rank);

/// Whether x is a read-only NumPy array (the error path only: an attribute lookup).
bool is_read_only_ndarray(PyObject* x);

}  // namespace kjit::pyext

#endif  // KJIT_PYEXT_FRAMEWORKS_H_
