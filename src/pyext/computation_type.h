// kjit._call.Computation: the call type of the functions computation strings make,
// kjit.elementwise's and kjit.reduction's.
#ifndef KJIT_PYEXT_COMPUTATION_TYPE_H_
#define KJIT_PYEXT_COMPUTATION_TYPE_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>

namespace kjit::pyext {

/// Adds the type to kjit._call (importing NumPy's C API first); -1 with an error set.
int add_computation_type(PyObject* module);

}  // namespace kjit::pyext

#endif  // KJIT_PYEXT_COMPUTATION_TYPE_H_
