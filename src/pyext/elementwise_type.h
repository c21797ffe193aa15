// kjit._call.Elementwise: the call type of kjit.elementwise functions.
#ifndef KJIT_PYEXT_ELEMENTWISE_TYPE_H_
#define KJIT_PYEXT_ELEMENTWISE_TYPE_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>

namespace kjit::pyext {

/// Adds the type to kjit._call (importing NumPy's C API first); -1 with an error set.
int add_elementwise_type(PyObject* module);

}  // namespace kjit::pyext

#endif  // KJIT_PYEXT_ELEMENTWISE_TYPE_H_
