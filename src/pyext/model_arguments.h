// A bound call's caller arguments as the call model (src/call) reads them: tensors
// as DLTensor views through the framework table, scalars as tvm-ffi would pass
// them. What a view needs kept alive (a DLPack capsule) is held until destruction.
#ifndef KJIT_PYEXT_MODEL_ARGUMENTS_H_
#define KJIT_PYEXT_MODEL_ARGUMENTS_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <tvm/ffi/c_api.h>

#include <memory>

#include "call/call_model.h"
#include "frameworks.h"
#include "support/small_vector.h"

namespace kjit::pyext {

class ModelArguments {
 public:
  explicit ModelArguments(size_t n);
  ~ModelArguments();
  ModelArguments(const ModelArguments&) = delete;
  ModelArguments& operator=(const ModelArguments&) = delete;

  /// Packs `values` (one per caller parameter of `model`). `metadata` admits
  /// kjit.TensorMeta for tensors (fn.infer). False with an error set: a JAX tracer
  /// (named with the callable that takes it), a TensorMeta in a real call, an
  /// object whose tensor cannot be read.
  bool pack(const CallModel& model, PyObject* const* values, bool metadata);

  const TVMFFIAny* data() const { return packed_.data(); }
  /// The framework and the object of the first tensor argument: returned outputs
  /// are allocated like it (NumPy when there is none).
  Framework framework() const { return framework_; }
  PyObject* first_tensor() const { return first_tensor_; }

 private:
  struct View {
    DLTensor tensor;
    int64_t scratch[128];  ///< a TensorMeta's shape and strides, or a NumPy array's strides
  };
  bool pack_tensor(const CallModel& model, size_t i, PyObject* x, bool metadata);

  SmallVector<TVMFFIAny, 8> packed_;
  std::unique_ptr<View[]> views_;
  std::unique_ptr<TVMFFIByteArray[]> bytes_;
  SmallVector<PyObject*, 8> held_;
  Framework framework_ = Framework::kNone;
  PyObject* first_tensor_ = Py_None;
};

/// The framework table's refusals for caller `i` of `model` holding `x` of framework
/// `f`: a JAX tracer (which kjit's JAX callables take), a JAX array the kernel writes
/// (JAX arrays are immutable), a kjit.TensorMeta unless `metadata`. False with the
/// TypeError set.
bool accepted_tensor(const CallModel& model, size_t i, Framework f, bool metadata);

/// What the framework table makes of a real call's tensors before it runs.
enum class TensorCheck {
  kAccepted,
  kRefused,   ///< the TypeError is set
  kDispatch,  ///< a torch tensor needs torch's dispatcher (defer_to_torch only)
};

/// Refuses (TypeError set) a JAX array the kernel writes (JAX arrays are immutable),
/// a JAX tracer there, and torch tensors that require grad while grad mode is on
/// (the result would silently have no grad_fn). With `defer_to_torch` (a torch op's
/// eager call, kjit.torch) a torch tensor that requires grad, or of a subclass
/// (fake, functional), is kDispatch instead: the op handles it. A type compare per
/// NumPy array.
TensorCheck check_tensors(const CallModel& model, PyObject* const* values, bool defer_to_torch);

/// `x` as tvm-ffi passes a scalar: bool, int (kTVMFFIBigInt beyond int64), float,
/// NumPy scalars as their Python values, str and bytes by pointer (`bytes` holds the
/// byte array), None; anything else by its kind only, for messages.
void pack_scalar(PyObject* x, TVMFFIAny* out, TVMFFIByteArray* bytes);

}  // namespace kjit::pyext

#endif  // KJIT_PYEXT_MODEL_ARGUMENTS_H_
