// An elementwise call function called through its C ABI (TVMFFIFunctionCall), not
// through tvm-ffi's Python call: tensors cross as DLTensor views their framework fills
// in (a TensorBridge), Python scalars as packed scalars, and new results come back as
// that framework's tensors. Nothing is allocated per argument.
#ifndef KJIT_PYEXT_DIRECT_CALL_H_
#define KJIT_PYEXT_DIRECT_CALL_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlpack/dlpack.h>
#include <tvm/ffi/c_api.h>

#include <cstdint>

#include "kjit/small_vector.h"

namespace kjit::pyext {

/// The most dims a view may have (NumPy's NPY_MAXDIMS; torch fills in its own).
constexpr int kMaxViewDims = 64;

/// A call's arguments split by kind: inputs, out= (nullptr for none) and the
/// tensors in it, and extras in keyword order (their names in `extra_names`).
struct CallArguments {
  PyObject* const* inputs = nullptr;
  Py_ssize_t n_inputs = 0;
  PyObject* out = nullptr;
  SmallVector<PyObject*, 4> outputs;
  SmallVector<PyObject*, 4> extras;
  SmallVector<PyObject*, 4> extra_names;
};

/// What a bridge made of a tensor argument.
enum class ViewResult {
  kViewed,     ///< a view that crosses directly
  kNotDirect,  ///< none: the call may still go another way (tvm-ffi's Python call)
  kChecked,    ///< none: the call must take the checked path (which converts or rejects it)
};

/// How one framework's tensors cross a direct call.
struct TensorBridge {
  PyTypeObject* type;  ///< the framework's tensor type (exact)
  /// Fills `t` with a view of `x` (`strides`: room for kMaxViewDims, for bridges
  /// that need it), an output when `written` (a read-only array is viewed only as
  /// an input); no error set on any result.
  ViewResult (*view)(const void* context, PyObject* x, DLTensor* t, int64_t* strides, bool written);
  /// The framework's tensor over `tensor`, taking its reference; nullptr with an
  /// error set.
  PyObject* (*wrap)(const void* context, TVMFFIObjectHandle tensor);
  const void* context;
};

enum class DirectOutcome {
  kRan,       ///< the call function ran, or raised (the result is then nullptr, error set)
  kNotTaken,  ///< an argument cannot cross directly (kNotDirect, or not a tensor or scalar); nothing ran
  kChecked,   ///< a tensor must take the checked path (kChecked); nothing ran
  kDeclined,  ///< the call function returned None; nothing ran
};

/// Calls `function` with `a`'s inputs, out= tensors and extras, the GIL released
/// while it runs. Returns out= itself, or the new output (a tuple of them for a
/// multi-output function). An error the call function raises goes through
/// `raise_pending` (kjit.raise_pending), so tvm-ffi converts it as for any call.
PyObject* call_direct(TVMFFIObjectHandle function, const TensorBridge& bridge, const CallArguments& a,
                      PyObject* raise_pending, DirectOutcome* outcome);

}  // namespace kjit::pyext

#endif  // KJIT_PYEXT_DIRECT_CALL_H_
