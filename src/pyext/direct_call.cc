#include "direct_call.h"

#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/tensor.h>

#include <climits>
#include <cstring>
#include <memory>

#include "ffi/axis_list.h"

namespace kjit::pyext {
namespace {

/// A Python bool, int or float (or a subclass, such as numpy.float64) as a packed
/// scalar, a str (a reduction's dtype name) as a C string; false for anything
/// else, and for ints outside int64 and strs holding NUL.
bool pack_scalar(PyObject* x, TVMFFIAny* out) {
  if (PyUnicode_CheckExact(x)) {
    Py_ssize_t size = 0;
    const char* text = PyUnicode_AsUTF8AndSize(x, &size);
    if (text == nullptr || std::strlen(text) != static_cast<size_t>(size)) {
      PyErr_Clear();
      return false;
    }
    out->type_index = kTVMFFIRawStr;
    out->v_c_str = text;
    return true;
  }
  if (PyBool_Check(x)) {
    out->type_index = kTVMFFIBool;
    out->v_int64 = x == Py_True;
    return true;
  }
  if (PyLong_Check(x)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(x, &overflow);
    if (overflow != 0 || (v == -1 && PyErr_Occurred())) {
      PyErr_Clear();
      return false;
    }
    out->type_index = kTVMFFIInt;
    out->v_int64 = v;
    return true;
  }
  if (PyFloat_Check(x)) {
    out->type_index = kTVMFFIFloat;
    out->v_float64 = PyFloat_AS_DOUBLE(x);
    return true;
  }
  return false;
}

/// A tuple of at most kAxisListMax Python ints (a reduction's axes) as a tagged
/// pointer to `list` (ffi/axis_list.h); false for anything else.
bool pack_axis_list(PyObject* x, AxisList* list, TVMFFIAny* out) {
  if (!PyTuple_CheckExact(x) || PyTuple_GET_SIZE(x) > kAxisListMax) return false;
  list->n = PyTuple_GET_SIZE(x);
  for (int64_t i = 0; i < list->n; ++i) {
    PyObject* item = PyTuple_GET_ITEM(x, i);
    if (!PyLong_CheckExact(item)) return false;  // a bool, a NumPy integer: the checked path names or reads it
    int overflow = 0;
    list->axes[i] = PyLong_AsLongLongAndOverflow(item, &overflow);
    if (overflow != 0 || (list->axes[i] == -1 && PyErr_Occurred())) {
      PyErr_Clear();
      return false;
    }
  }
  out->type_index = kTVMFFIOpaquePtr;
  out->zero_padding = kAxisListTag;
  out->v_ptr = list;
  return true;
}

/// DLTensor views of a call's tensors, on the stack for the usual few.
class TensorViews {
 public:
  explicit TensorViews(size_t n) {
    if (n > kInline) large_.reset(new View[n]);
  }
  /// A view of `x` kept here, in *t when it crosses directly.
  ViewResult view(const TensorBridge& bridge, PyObject* x, bool written, const DLTensor** t) {
    View& v = (large_ ? large_.get() : small_)[used_++];
    *t = &v.tensor;
    return bridge.view(bridge.context, x, &v.tensor, v.strides, written);
  }

 private:
  struct View {
    DLTensor tensor;
    int64_t strides[kMaxViewDims];
  };
  static constexpr size_t kInline = 4;
  View small_[kInline];  // uninitialised: each is written before it is read
  std::unique_ptr<View[]> large_;
  size_t used_ = 0;
};

/// The arguments packed for the call function's C ABI: kRan when all cross
/// directly, else why not (kNotTaken, kChecked).
/// `list`: room for one axis tuple among the extras (a reduction's axis; a call with
/// more goes another way).
DirectOutcome pack_call(const TensorBridge& bridge, const CallArguments& a, TensorViews* views, AxisList* list,
                        TVMFFIAny* packed) {
  size_t k = 0;
  ViewResult viewed = ViewResult::kViewed;
  auto pack_tensor = [&](PyObject* x, bool written) {
    const DLTensor* t = nullptr;
    viewed = views->view(bridge, x, written, &t);
    packed[k].type_index = kTVMFFIDLTensorPtr;
    packed[k++].v_ptr = const_cast<DLTensor*>(t);
    return viewed == ViewResult::kViewed;
  };
  auto not_packed = [&viewed] {
    return viewed == ViewResult::kChecked ? DirectOutcome::kChecked : DirectOutcome::kNotTaken;
  };
  for (Py_ssize_t i = 0; i < a.n_inputs; ++i) {
    PyObject* x = a.inputs[i];
    if (Py_TYPE(x) == bridge.type ? !pack_tensor(x, false) : !pack_scalar(x, &packed[k++])) return not_packed();
  }
  for (PyObject* o : a.outputs) {
    if (!pack_tensor(o, true)) return not_packed();
  }
  for (PyObject* e : a.extras) {
    if (pack_scalar(e, &packed[k])) {
      ++k;
      continue;
    }
    if (list == nullptr || !pack_axis_list(e, list, &packed[k++])) return DirectOutcome::kNotTaken;
    list = nullptr;  // used
  }
  return DirectOutcome::kRan;
}

/// Raises the error a call function left on this thread, through tvm-ffi's Python
/// conversion (kjit's registered exception types, a CompileError's command and log).
PyObject* raise_error(PyObject* raise_pending) {
  if (PyErr_Occurred()) {  // the function reported a Python error itself (a signal)
    TVMFFIObjectHandle error = nullptr;
    TVMFFIErrorMoveFromRaised(&error);
    if (error != nullptr) TVMFFIObjectDecRef(error);
    return nullptr;
  }
  PyObject* result = PyObject_Vectorcall(raise_pending, nullptr, 0, nullptr);
  if (result != nullptr) {
    Py_DECREF(result);
    PyErr_SetString(PyExc_RuntimeError, "kjit._call: a call function failed without an error to raise");
  }
  return nullptr;
}

/// New outputs: one tensor, or a tuple of them. Takes `result`.
PyObject* wrap_results(const TensorBridge& bridge, TVMFFIAny* result) {
  if (result->type_index == kTVMFFITensor) return bridge.wrap(bridge.context, result->v_obj);
  try {
    tvm::ffi::Any any = tvm::ffi::detail::AnyUnsafe::MoveTVMFFIAnyToAny(result);
    auto tensors = any.cast<tvm::ffi::Array<tvm::ffi::Tensor>>();
    const auto n = static_cast<Py_ssize_t>(tensors.size());
    PyObject* tuple = PyTuple_New(n);
    for (Py_ssize_t k = 0; tuple != nullptr && k < n; ++k) {
      tvm::ffi::Tensor t = tensors[static_cast<int64_t>(k)];
      PyObject* wrapped =
          bridge.wrap(bridge.context, tvm::ffi::detail::ObjectUnsafe::MoveObjectRefToTVMFFIObjectPtr(std::move(t)));
      if (wrapped == nullptr) {
        Py_CLEAR(tuple);
      } else {
        PyTuple_SET_ITEM(tuple, k, wrapped);
      }
    }
    return tuple;
  } catch (const std::exception& e) {
    PyErr_Format(PyExc_RuntimeError, "kjit._call: unexpected results of a call function: %s", e.what());
    return nullptr;
  }
}

}  // namespace

PyObject* call_direct(TVMFFIObjectHandle function, const TensorBridge& bridge, const CallArguments& a,
                      PyObject* raise_pending, DirectOutcome* outcome) {
  const size_t n = a.n_inputs + a.outputs.size() + a.extras.size();
  SmallVector<TVMFFIAny, 8> packed(n, TVMFFIAny{});
  TensorViews views(a.n_inputs + a.outputs.size());
  AxisList list;  // uninitialised: written only when an extra is an axis tuple
  *outcome = n > INT32_MAX ? DirectOutcome::kNotTaken : pack_call(bridge, a, &views, &list, packed.data());
  if (*outcome != DirectOutcome::kRan) return nullptr;
  TVMFFIAny result{};
  result.type_index = kTVMFFINone;
  int rc;
  Py_BEGIN_ALLOW_THREADS;
  rc = TVMFFIFunctionCall(function, packed.data(), static_cast<int32_t>(n), &result);
  Py_END_ALLOW_THREADS;
  *outcome = DirectOutcome::kRan;
  if (rc != 0) return raise_error(raise_pending);
  if (result.type_index == kTVMFFINone) {
    *outcome = DirectOutcome::kDeclined;
    return nullptr;
  }
  if (a.out == nullptr) return wrap_results(bridge, &result);
  Py_INCREF(a.out);
  return a.out;
}

}  // namespace kjit::pyext
