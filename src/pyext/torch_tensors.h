// CPU torch tensors as DLTensor views and tvm-ffi tensors as torch tensors, through
// torch's DLPack exchange API (the C functions of torch.Tensor's
// __dlpack_c_exchange_api__ capsule, which tvm-ffi's own call uses for torch). CPU
// only: a CUDA call needs the stream and allocator tvm-ffi's Python call sets up.
#ifndef KJIT_PYEXT_TORCH_TENSORS_H_
#define KJIT_PYEXT_TORCH_TENSORS_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlpack/dlpack.h>
#include <tvm/ffi/c_api.h>

#include "direct_call.h"

namespace kjit::pyext {

/// torch's exchange API, looked up once for `torch_tensor`; nullptr when torch has
/// none, one of another DLPack major version, or none that fills a DLTensor in place.
const DLPackExchangeAPI* torch_exchange_api(PyTypeObject* torch_tensor);

/// Fills `t` with a view of the CPU torch tensor `x`. kNotDirect for other devices;
/// kChecked for conjugate and negative views (has_lazy_bits; the answer for the
/// last few plain tensors is remembered) and for tensors torch does not export or
/// that have no data (sparse and meta tensors, tensors under torch.func's
/// transforms), which the checked path names. No error set.
ViewResult view_torch_cpu(const DLPackExchangeAPI* api, PyObject* x, DLTensor* t);

/// Whether a view has data to read: a non-empty tensor with a null data pointer
/// (torch.func.functionalize's tensors) has none.
bool has_storage(const DLTensor& t);

/// The TypeError for argument `i` ('name') of function `fn`, torch tensor `x`, which
/// has no plain storage (a meta or sparse tensor, or one under torch.func's vmap,
/// grad or functionalize): what it is, and that the torch op takes it. Replaces the
/// error torch's export raised (its first line is kept). Returns false.
bool refuse_storage_less(const char* fn, size_t i, const char* name, PyObject* x);

/// Whether torch tensor `x` is a conjugate or negative view (is_conj(), is_neg()):
/// bits DLPack cannot carry and torch's exchange API drops, so the data it describes
/// would be read without them. True also when asking fails.
bool has_lazy_bits(PyObject* x);

/// Whether torch tensor `x` (of torch.Tensor or a subclass, `torch_tensor` the
/// base type) requires grad while grad mode is on: a call would drop its grad_fn.
/// -1 with an error set when asking failed. Reads the attribute through its getter.
int torch_needs_grad(PyTypeObject* torch_tensor, PyObject* x);

/// Which lazy bit torch tensor `x` carries: 0 none, 1 conjugate, 2 negative; -1 with
/// an error set. A plain tensor seen lately costs a view and a memo lookup.
int lazy_torch_bits(PyObject* x);

/// `x.resolve_conj().resolve_neg()`: the values x stands for, without lazy bits (new
/// reference; nullptr with an error set).
PyObject* resolve_lazy_bits(PyObject* x);

/// torch._C._increment_version over `n` torch tensors (one call, a list: its
/// single-tensor overload costs microseconds to resolve). False with an error set.
bool bump_torch_versions(PyObject* const* tensors, size_t n);

/// kjit._call.torch_access(mode): how calls read requires_grad and bump versions of
/// torch tensors: "native" (torch's C++ functions, when a probe tensor showed they
/// answer as torch's Python API does) or "python". `mode` None asks; "python"
/// forces the Python path, "native" lifts that (the tests reach both paths).
PyObject* py_torch_access(PyObject*, PyObject* mode);

/// A torch tensor over `tensor`, taking its reference; nullptr with an error set.
PyObject* torch_owning(const DLPackExchangeAPI* api, TVMFFIObjectHandle tensor);

/// How CPU torch tensors of type `torch_tensor` cross a direct call with `api`.
TensorBridge torch_bridge(PyTypeObject* torch_tensor, const DLPackExchangeAPI* api);

}  // namespace kjit::pyext

#endif  // KJIT_PYEXT_TORCH_TENSORS_H_
