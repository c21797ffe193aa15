#include "torch_tensors.h"

#include <dlfcn.h>

#include <string>

#include "frameworks.h"

namespace kjit::pyext {
namespace {

PyTypeObject* g_type = nullptr;            // the torch.Tensor type g_api was looked up on
const DLPackExchangeAPI* g_api = nullptr;  // its usable exchange API, or nullptr

const DLPackExchangeAPI* look_up(PyTypeObject* torch_tensor) {
  PyObject* capsule = PyObject_GetAttrString(reinterpret_cast<PyObject*>(torch_tensor), "__dlpack_c_exchange_api__");
  if (capsule == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  auto* api = static_cast<const DLPackExchangeAPI*>(PyCapsule_GetPointer(capsule, "dlpack_exchange_api"));
  Py_DECREF(capsule);
  if (api == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  const bool usable = api->header.version.major == DLPACK_MAJOR_VERSION &&
                      api->dltensor_from_py_object_no_sync != nullptr &&
                      api->managed_tensor_to_py_object_no_sync != nullptr;
  return usable ? api : nullptr;
}

enum Predicate { kIsConj, kIsNeg };

/// x.is_conj() or x.is_neg(); true also when asking fails (the checked path decides).
bool call_predicate(PyObject* x, Predicate which) {
  static PyObject* names[2] = {PyUnicode_InternFromString("is_conj"), PyUnicode_InternFromString("is_neg")};
  PyObject* name = names[which];
  PyObject* set =
      name != nullptr ? PyObject_VectorcallMethod(name, &x, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr) : nullptr;
  if (set == nullptr) PyErr_Clear();
  Py_XDECREF(set);
  return set != Py_False;
}

/// CPU torch tensors recently found without a conjugate or negative bit. Asking
/// torch costs more than the rest of a 1-element call with three tensors (is_neg()
/// is a Python method call through torch's argument parser), and loops pass the
/// same tensors again and again. An entry holds the tensor's `__dict__`, never the
/// tensor or a weak reference to it (torch.utils.swap_tensors refuses tensors with
/// weak references, and a strong one would keep a dead tensor's memory): while the
/// memo holds the dict no other object can have it, so a live tensor at the same
/// address with the same dict is the same tensor. The data pointer the tensor was
/// viewed with is kept too, so a tensor whose `.data` was replaced (or that was
/// swapped, which swaps the dicts) is asked again. A live tensor object's bits
/// change only through torch's private _set_neg/_set_conj or a `.data` replaced by
/// a view of the same data (docs/elementwise.md). Used with the GIL held.
class PlainTensorMemo {
 public:
  bool contains(PyObject* x, const void* data) {
    bool found = false;
    for (Entry& e : entries_) {
      if (e.dict != nullptr && Py_REFCNT(e.dict) == 1) e.clear();  // its tensor died: let its attributes go
      if (!found && e.tensor == x && e.data == data) found = dict_of(x) == e.dict;
    }
    return found;
  }

  /// Replaces the oldest entry; a tensor without a `__dict__` is not kept.
  void remember(PyObject* x, const void* data) {
    PyObject* dict = PyObject_GenericGetDict(x, nullptr);  // created when the tensor has none yet
    if (dict == nullptr) {
      PyErr_Clear();
      return;
    }
    Entry& e = entries_[next_];
    next_ = (next_ + 1) % kEntries;
    e.clear();
    e.tensor = x;
    e.dict = dict;
    e.data = data;
  }

 private:
  /// x's __dict__ as it is now (borrowed; nullptr when it has none): read from its
  /// slot where the type has one (torch.Tensor does), which costs no call.
  static PyObject* dict_of(PyObject* x) {
    const Py_ssize_t offset = Py_TYPE(x)->tp_dictoffset;
    if (offset > 0) return *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(x) + offset);
    PyObject* dict = PyObject_GenericGetDict(x, nullptr);
    if (dict == nullptr) PyErr_Clear();
    Py_XDECREF(dict);  // the object keeps it
    return dict;
  }

  static constexpr int kEntries = 8;  // the tensors of a few calls in a loop
  struct Entry {
    const PyObject* tensor = nullptr;  ///< compared, never dereferenced
    PyObject* dict = nullptr;          ///< the tensor's __dict__ (owned), or null
    const void* data = nullptr;
    void clear() {
      Py_CLEAR(dict);
      tensor = nullptr;
    }
  };
  Entry entries_[kEntries];
  int next_ = 0;
};

PlainTensorMemo g_plain;  // never destroyed while Python runs: entries are released as replaced

}  // namespace

const DLPackExchangeAPI* torch_exchange_api(PyTypeObject* torch_tensor) {
  if (torch_tensor != g_type) {
    g_api = look_up(torch_tensor);
    g_type = torch_tensor;
  }
  return g_api;
}

ViewResult view_torch_cpu(const DLPackExchangeAPI* api, PyObject* x, DLTensor* t) {
  if (api->dltensor_from_py_object_no_sync(x, t) != 0) {  // sparse, meta, under torch.func: the checked path names it
    PyErr_Clear();
    return ViewResult::kChecked;
  }
  if (!has_storage(*t)) return ViewResult::kChecked;
  if (t->device.device_type != kDLCPU) return ViewResult::kNotDirect;
  if (g_plain.contains(x, t->data)) return ViewResult::kViewed;
  // Only complex tensors carry the conjugate bit; the negative one may be on any.
  if (call_predicate(x, kIsNeg) || (t->dtype.code == kDLComplex && call_predicate(x, kIsConj))) {
    return ViewResult::kChecked;
  }
  g_plain.remember(x, t->data);
  return ViewResult::kViewed;
}

namespace {

/// torch.Tensor.requires_grad's getter (a C function of a getset descriptor), and
/// torch.is_grad_enabled, looked up once for the torch.Tensor type.
struct GradProbe {
  PyTypeObject* type = nullptr;
  getter get = nullptr;
  void* closure = nullptr;
  PyObject* is_grad_enabled = nullptr;
};
GradProbe g_grad;

bool look_up_grad(PyTypeObject* torch_tensor) {
  if (g_grad.type == torch_tensor) return g_grad.get != nullptr;
  g_grad.type = torch_tensor;
  g_grad.get = nullptr;
  PyObject* descr = PyObject_GetAttrString(reinterpret_cast<PyObject*>(torch_tensor), "requires_grad");
  PyObject* torch = PyImport_ImportModule("torch");
  Py_XSETREF(g_grad.is_grad_enabled, torch != nullptr ? PyObject_GetAttrString(torch, "is_grad_enabled") : nullptr);
  Py_XDECREF(torch);
  if (descr != nullptr && Py_TYPE(descr) == &PyGetSetDescr_Type && g_grad.is_grad_enabled != nullptr) {
    PyGetSetDef* def = reinterpret_cast<PyGetSetDescrObject*>(descr)->d_getset;
    g_grad.get = def->get;
    g_grad.closure = def->closure;
  }
  Py_XDECREF(descr);
  PyErr_Clear();
  return g_grad.get != nullptr;
}

}  // namespace

namespace {

/// Two of torch's own C++ functions, called on the at::Tensor a torch.Tensor object
/// holds right after its PyObject header (THPVariable::cdata): the answers a call
/// needs for every plain tensor, without a call through Python (torch's getter and
/// _increment_version parse arguments and set up error handlers, which made a
/// 3-tensor call cost 1.3x tvm-ffi's own). Used only after a probe tensor showed
/// that layout (the slot holds what x._cdata says) and both functions answered as
/// torch's Python API does; otherwise, and for another torch, the Python path.
struct NativeTorch {
  PyTypeObject* type = nullptr;  ///< the torch.Tensor type this was probed on
  bool usable = false;
  bool (*requires_grad)(const void* impl) = nullptr;   ///< c10::TensorImpl::requires_grad() const
  void (*bump_version)(const void* tensor) = nullptr;  ///< torch::autograd::impl::bump_version(const at::Tensor&)
};
NativeTorch g_native;

const void* tensor_slot(PyObject* x) { return reinterpret_cast<const char*>(x) + sizeof(PyObject); }
const void* impl_of(PyObject* x) { return *static_cast<const void* const*>(tensor_slot(x)); }

/// A symbol of one of torch's already loaded libraries, by soname; nullptr when absent.
void* torch_symbol(const char* library, const char* name) {
  void* handle = dlopen(library, RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) return nullptr;
  void* symbol = dlsym(handle, name);
  dlclose(handle);  // RTLD_NOLOAD took a reference to a library torch keeps loaded
  return symbol;
}

int64_t python_int(PyObject* x, const char* attribute) {
  PyObject* v = PyObject_GetAttrString(x, attribute);
  const int64_t n = v != nullptr ? PyLong_AsLongLong(v) : -1;
  Py_XDECREF(v);
  return n;
}

/// Whether the native functions give torch's answers on a fresh tensor `x`.
bool native_agrees(PyObject* x) {
  if (reinterpret_cast<uintptr_t>(impl_of(x)) != static_cast<uint64_t>(python_int(x, "_cdata"))) return false;
  if (g_native.requires_grad(impl_of(x))) return false;
  const int64_t before = python_int(x, "_version");
  g_native.bump_version(tensor_slot(x));
  if (python_int(x, "_version") != before + 1) return false;
  PyObject* r = PyObject_CallMethod(x, "requires_grad_", "O", Py_True);
  Py_XDECREF(r);
  return r != nullptr && g_native.requires_grad(impl_of(x));
}

bool probe_native(PyTypeObject* torch_tensor) {
  g_native = NativeTorch{};
  g_native.type = torch_tensor;
  g_native.requires_grad =
      reinterpret_cast<bool (*)(const void*)>(torch_symbol("libc10.so", "_ZNK3c1010TensorImpl13requires_gradEv"));
  g_native.bump_version = reinterpret_cast<void (*)(const void*)>(
      torch_symbol("libtorch_cpu.so", "_ZN5torch8autograd4impl12bump_versionERKN2at6TensorE"));
  if (g_native.requires_grad == nullptr || g_native.bump_version == nullptr) return false;
  if (torch_tensor->tp_basicsize < static_cast<Py_ssize_t>(sizeof(PyObject) + sizeof(void*))) return false;
  PyObject* torch = PyImport_ImportModule("torch");
  PyObject* x = torch != nullptr ? PyObject_CallMethod(torch, "zeros", "i", 1) : nullptr;
  bool agrees = false;
  try {
    agrees = x != nullptr && Py_TYPE(x) == torch_tensor && native_agrees(x);
  } catch (...) {  // a C++ exception of torch's: this torch is not the one probed for
    agrees = false;
  }
  Py_XDECREF(x);
  Py_XDECREF(torch);
  PyErr_Clear();
  return agrees;
}

bool g_python_only = false;  // kjit._call.torch_access("python"): the tests' way to reach the Python path

bool native_torch(PyTypeObject* torch_tensor) {
  if (g_native.type != torch_tensor) g_native.usable = probe_native(torch_tensor);
  return g_native.usable && !g_python_only;
}

/// Bumps the versions of torch tensors without Python, in order, until one refuses
/// (an inference tensor outside inference mode) or is not a torch tensor; returns
/// how many were bumped, for torch's Python call to go on from there (and name it).
size_t bump_natively(PyObject* const* tensors, size_t n) {
  size_t done = 0;
  try {
    for (; done < n && PyObject_TypeCheck(tensors[done], g_native.type); ++done) {
      g_native.bump_version(tensor_slot(tensors[done]));
    }
  } catch (...) {  // torch's c10::Error: the Python call raises it as torch does
  }
  return done;
}

}  // namespace

int torch_needs_grad(PyTypeObject* torch_tensor, PyObject* x) {
  if (Py_TYPE(x) == torch_tensor && native_torch(torch_tensor) && !g_native.requires_grad(impl_of(x))) return 0;
  PyObject* requires = nullptr;
  if (look_up_grad(torch_tensor)) {
    requires = g_grad.get(x, g_grad.closure);
  } else {
    requires = PyObject_GetAttrString(x, "requires_grad");
  }
  if (requires == nullptr) return -1;
  const bool needs = requires == Py_True;
  Py_DECREF(requires);
  if (!needs || g_grad.is_grad_enabled == nullptr) return needs ? 1 : 0;
  PyObject* enabled = PyObject_CallNoArgs(g_grad.is_grad_enabled);
  if (enabled == nullptr) return -1;
  const int on = enabled == Py_True;
  Py_DECREF(enabled);
  return on;
}

bool has_storage(const DLTensor& t) {
  if (t.data != nullptr) return true;
  for (int32_t d = 0; d < t.ndim; ++d) {
    if (t.shape[d] == 0) return true;
  }
  return false;
}

namespace {

/// What torch tensor `x` is, as refuse_storage_less says it (asked only on that
/// path): its layout when not strided ("sparse_coo"), else whether it is a meta
/// tensor; empty for one without storage (under torch.func's transforms).
std::string layout_or_meta(PyObject* x) {
  std::string kind;
  PyObject* layout = PyObject_GetAttrString(x, "layout");
  PyObject* layout_text = layout != nullptr ? PyObject_Str(layout) : nullptr;
  const char* text = layout_text != nullptr ? PyUnicode_AsUTF8(layout_text) : nullptr;
  const std::string prefix = "torch.";
  if (text != nullptr && std::string(text) != "torch.strided") {
    kind = text;
    if (kind.rfind(prefix, 0) == 0) kind = kind.substr(prefix.size());
  }
  Py_XDECREF(layout_text);
  Py_XDECREF(layout);
  PyObject* is_meta = kind.empty() ? PyObject_GetAttrString(x, "is_meta") : nullptr;
  if (is_meta == Py_True) kind = "meta";
  Py_XDECREF(is_meta);
  PyErr_Clear();
  return kind;
}

}  // namespace

bool refuse_storage_less(const char* fn, size_t i, const char* name, PyObject* x) {
  std::string cause;
  if (PyErr_Occurred()) {
    PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
    PyErr_Fetch(&type, &value, &traceback);
    PyObject* text = value != nullptr ? PyObject_Str(value) : nullptr;
    const char* c = text != nullptr ? PyUnicode_AsUTF8(text) : nullptr;
    if (c != nullptr) cause = std::string(c).substr(0, std::string(c).find('\n'));  // no C++ frames
    Py_XDECREF(text);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
    PyErr_Clear();
  }
  const std::string kind = layout_or_meta(x);
  if (!kind.empty() && kind != "meta") {
    PyErr_Format(PyExc_TypeError,
                 "%s: argument #%zu '%s' is a %s tensor, whose layout kjit does not read; pass %s.to_dense()", fn, i,
                 name, kind.c_str(), name);
    return false;
  }
  const char* what = kind == "meta"
                         ? "a meta tensor (shape and dtype, no data)"
                         : "a torch tensor without storage (one inside torch.func.vmap, grad or functionalize)";
  const std::string torch_said = cause.empty() ? "" : " (torch: " + cause + ")";
  PyErr_Format(PyExc_TypeError,
               "%s: argument #%zu '%s' is %s, which has no data a kjit function can read%s; call mod.torch.%s, the "
               "torch op, which torch's dispatcher runs on such tensors",
               fn, i, name, what, torch_said.c_str(), fn);
  return false;
}

bool has_lazy_bits(PyObject* x) { return call_predicate(x, kIsNeg) || call_predicate(x, kIsConj); }

int lazy_torch_bits(PyObject* x) {
  DLTensor t{};
  const DLPackExchangeAPI* api = torch_exchange_api(Py_TYPE(x));
  const bool viewed = api != nullptr && api->dltensor_from_py_object_no_sync(x, &t) == 0;
  if (!viewed) PyErr_Clear();
  if (viewed && g_plain.contains(x, t.data)) return 0;
  if (call_predicate(x, kIsNeg)) return 2;
  if ((!viewed || t.dtype.code == kDLComplex) && call_predicate(x, kIsConj)) return 1;
  if (viewed) g_plain.remember(x, t.data);
  return 0;
}

PyObject* resolve_lazy_bits(PyObject* x) {
  PyObject* conj = PyObject_CallMethod(x, "resolve_conj", nullptr);
  if (conj == nullptr) return nullptr;
  PyObject* plain = PyObject_CallMethod(conj, "resolve_neg", nullptr);
  Py_DECREF(conj);
  return plain;
}

bool bump_torch_versions(PyObject* const* tensors, size_t n) {
  PyTypeObject* torch_tensor = torch_tensor_type();
  if (torch_tensor != nullptr && native_torch(torch_tensor)) {
    const size_t done = bump_natively(tensors, n);
    tensors += done;
    n -= done;
    if (n == 0) return true;
  }
  static PyObject* increment = nullptr;
  static PyObject* reused = nullptr;  // one list for every call: a new one per call made the GC run
  static bool in_use = false;         // the call below may let another thread in
  if (increment == nullptr) {
    PyObject* torch_c = PyImport_ImportModule("torch._C");
    increment = torch_c != nullptr ? PyObject_GetAttrString(torch_c, "_increment_version") : nullptr;
    Py_XDECREF(torch_c);
    if (increment == nullptr) return false;
  }
  if (reused == nullptr && (reused = PyList_New(0)) == nullptr) return false;
  PyObject* list = in_use ? PyList_New(0) : reused;
  if (list == nullptr) return false;
  Py_INCREF(list);
  bool ok = true;
  for (size_t i = 0; i < n && ok; ++i) ok = PyList_Append(list, tensors[i]) == 0;
  PyObject* r = nullptr;
  if (ok) {
    const bool was_in_use = in_use;
    in_use = true;
    r = PyObject_CallOneArg(increment, list);
    in_use = was_in_use;
  }
  const bool cleared = PyList_SetSlice(list, 0, PY_SSIZE_T_MAX, nullptr) == 0;
  ok = ok && r != nullptr && cleared;
  Py_XDECREF(r);
  Py_DECREF(list);
  return ok;
}

TensorBridge torch_bridge(PyTypeObject* torch_tensor, const DLPackExchangeAPI* api) {
  auto view = [](const void* context, PyObject* x, DLTensor* t, int64_t*, bool) {
    return view_torch_cpu(static_cast<const DLPackExchangeAPI*>(context), x, t);
  };
  auto wrap = [](const void* context, TVMFFIObjectHandle tensor) {
    return torch_owning(static_cast<const DLPackExchangeAPI*>(context), tensor);
  };
  return TensorBridge{torch_tensor, view, wrap, api};
}

PyObject* torch_owning(const DLPackExchangeAPI* api, TVMFFIObjectHandle tensor) {
  DLManagedTensorVersioned* managed = nullptr;
  if (TVMFFITensorToDLPackVersioned(tensor, &managed) != 0) {
    TVMFFIObjectHandle error = nullptr;
    TVMFFIErrorMoveFromRaised(&error);
    if (error != nullptr) TVMFFIObjectDecRef(error);
    TVMFFIObjectDecRef(tensor);
    PyErr_SetString(PyExc_RuntimeError, "kjit._call: a result could not be exported through DLPack");
    return nullptr;
  }
  void* object = nullptr;
  if (api->managed_tensor_to_py_object_no_sync(managed, &object) != 0) {
    if (managed->deleter != nullptr) managed->deleter(managed);
    TVMFFIObjectDecRef(tensor);
    return nullptr;
  }
  TVMFFIObjectDecRef(tensor);  // the torch tensor holds the managed tensor's own reference
  return static_cast<PyObject*>(object);
}

PyObject* py_torch_access(PyObject*, PyObject* mode) {
  const char* m = mode != Py_None ? PyUnicode_AsUTF8(mode) : "";
  if (m == nullptr) return nullptr;
  const std::string wanted = m;
  if (wanted != "" && wanted != "native" && wanted != "python") {
    PyErr_Format(PyExc_ValueError, "kjit._call.torch_access: mode must be None, 'native' or 'python', got %R", mode);
    return nullptr;
  }
  if (!wanted.empty()) g_python_only = wanted == "python";
  PyTypeObject* torch_tensor = torch_tensor_type();
  return PyUnicode_FromString(torch_tensor != nullptr && native_torch(torch_tensor) ? "native" : "python");
}

}  // namespace kjit::pyext
