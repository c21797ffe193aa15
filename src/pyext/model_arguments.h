// A bound call's caller arguments as the call model (src/call) reads them, and as
// the stub's C ABI takes them: tensors as DLTensor views through the framework
// table, scalars as tvm-ffi would pass them. What a view needs kept alive (a DLPack
// capsule) is held until destruction.
#ifndef KJIT_PYEXT_MODEL_ARGUMENTS_H_
#define KJIT_PYEXT_MODEL_ARGUMENTS_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <tvm/ffi/c_api.h>

#include <memory>

#include "call/call_model.h"
#include "frameworks.h"
#include "kjit/small_vector.h"

namespace kjit::pyext {

class ModelArguments {
 public:
  /// Room for `n` caller arguments and `n_outputs` returned tensors' views.
  ModelArguments(size_t n, size_t n_outputs = 0);
  ~ModelArguments();
  ModelArguments(const ModelArguments&) = delete;
  ModelArguments& operator=(const ModelArguments&) = delete;

  /// Packs `values` (one per caller parameter of `model`). `metadata` admits
  /// kjit.TensorMeta for tensors (fn.infer). A torch input that is a conjugate or
  /// negative view is materialised (DLPack cannot carry those bits, so the kernel
  /// would read the data without them; torch's dispatcher materialises them too).
  /// False with an error set: a JAX tracer (named with the callable that takes it), a
  /// TensorMeta in a real call, a torch tensor with either bit the kernel would write
  /// (refused(): the table's own refusals), an object whose tensor cannot be read.
  bool pack(const CallModel& model, PyObject* const* values, bool metadata);
  /// Whether pack() failed on one of the table's own refusals (not on an object only
  /// tvm-ffi's conversion can read).
  bool refused() const { return refused_; }
  /// Whether pack() refused a torch tensor without plain storage (a meta or sparse
  /// tensor, one under torch.func's transforms): the torch op's dispatcher takes those.
  bool storage_less() const { return storage_less_; }
  /// Whether a scalar argument is an object tvm-ffi does not convert (a call with
  /// it fails; the model's check names its Python type).
  bool unconvertible() const { return unconvertible_; }
  /// The arguments as the stub must get them: `values` with the materialised
  /// replacements of pack() (borrowed; valid while this object lives).
  PyObject* const* call_values(PyObject* const* values);

  const TVMFFIAny* data() const { return packed_.data(); }
  /// Whether every argument can cross to the stub's C ABI as packed: tensors as CPU
  /// views of NumPy arrays (a written one writeable), plain torch tensors or
  /// tvm_ffi.Tensor, scalars as plain values. Otherwise tvm-ffi's own Python call
  /// must convert them (devices' streams, DLPack objects, unusual values).
  bool direct() const { return direct_; }
  /// Returned tensor `k`, `tensor`, allocated in framework `f` as `meta` says, as the
  /// stub takes it, in `*out`; false (nothing set) when it has no direct view.
  bool view_output(size_t k, PyObject* tensor, Framework f, const OutputMeta& meta, TVMFFIAny* out);
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
  bool pack_value(size_t i, PyObject* x);
  /// A direct view of `x` in `v` (false: none; nothing set).
  bool view_direct(PyObject* x, Framework f, bool written, View* v);
  /// Argument `i` (`x`, of framework `f`) packed as its view, view(i).
  void pack_view(size_t i, PyObject* x, Framework f);
  View& view(size_t k) { return (large_ ? large_.get() : small_)[k]; }

  static constexpr size_t kInline = 4;  // views on the stack for the usual few tensors
  SmallVector<TVMFFIAny, 8> packed_;
  SmallVector<TVMFFIByteArray, 8> bytes_;
  View small_[kInline];  // uninitialised: each is written before it is read
  std::unique_ptr<View[]> large_;
  size_t n_ = 0;
  SmallVector<PyObject*, 8> held_;
  SmallVector<TVMFFIObjectHandle, 2> ffi_held_;  ///< String objects of NUL-holding str arguments
  SmallVector<PyObject*, 8> replaced_;           ///< per caller: an owned replacement, or nullptr
  SmallVector<PyObject*, 16> call_values_;       ///< call_values()'s array
  Framework framework_ = Framework::kNone;
  PyObject* first_tensor_ = Py_None;
  bool direct_ = true;
  bool refused_ = false;
  bool storage_less_ = false;
  bool unconvertible_ = false;
};

/// The framework table's refusals for caller `i` of `model` holding `x` of framework
/// `f`: a JAX tracer (which kjit's JAX callables take), a JAX array the kernel writes
/// (JAX arrays are immutable), a kjit.TensorMeta unless `metadata`. False with the
/// TypeError set.
bool accepted_tensor(const CallModel& model, size_t i, Framework f, bool metadata);

/// Bumps the version counter of every torch tensor among `values` that the kernel
/// wrote (`out` parameters), as torch's in-place ops do: autograd then refuses a
/// backward through a value the kernel overwrote. False with an error set.
bool bump_written_versions(const CallModel& model, PyObject* const* values);

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
/// What check_tensors saw, for the call's route.
struct TensorKinds {
  bool ffi_objects = false;  ///< a tvm_ffi.Tensor whose handle the table cannot read
  bool torch = false;        ///< a torch tensor: packing materialises lazy bits, versions get bumped
};
TensorCheck check_tensors(const CallModel& model, PyObject* const* values, bool defer_to_torch, TensorKinds* kinds);

/// `x` as tvm-ffi passes a scalar: bool, int (kTVMFFIBigInt beyond int64), float,
/// NumPy scalars as their Python values, str and bytes by pointer (`bytes` holds the
/// byte array), None; anything else by its kind only, for messages. A str holding
/// NUL characters, which a C string would cut, becomes a tvm-ffi String object of
/// its whole text, whose reference goes to `*owned` (released by the caller after
/// the call). False with an error set when that object cannot be made.
bool pack_scalar(PyObject* x, TVMFFIAny* out, TVMFFIByteArray* bytes, TVMFFIObjectHandle* owned);

}  // namespace kjit::pyext

#endif  // KJIT_PYEXT_MODEL_ARGUMENTS_H_
