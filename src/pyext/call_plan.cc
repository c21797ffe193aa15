#include "call_plan.h"

#include <memory>

#include "frameworks.h"

namespace kjit::pyext {
namespace {

constexpr Py_ssize_t kTableSize = 7;

/// A tuple's items as Py_ssize_t; false (error set) when one is not an int.
bool read_indices(PyObject* tuple, std::vector<Py_ssize_t>& out) {
  if (!PyTuple_Check(tuple)) {
    PyErr_SetString(PyExc_TypeError, "kjit._call: a call plan field must be a tuple of ints");
    return false;
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tuple); ++i) {
    Py_ssize_t v = PyLong_AsSsize_t(PyTuple_GET_ITEM(tuple, i));
    if (v == -1 && PyErr_Occurred()) return false;
    out.push_back(v);
  }
  return true;
}

bool read_program(PyObject* tuple, std::vector<int64_t>& out) {
  if (!PyTuple_Check(tuple)) {
    PyErr_SetString(PyExc_TypeError, "kjit._call: a dim program must be a tuple of ints");
    return false;
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tuple); ++i) {
    long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(tuple, i));
    if (v == -1 && PyErr_Occurred()) return false;
    out.push_back(v);
  }
  return true;
}

/// Python's // and % on int64; false where Python's answer leaves int64 or divides by 0.
bool floor_div(int64_t a, int64_t b, int64_t& q) {
  if (b == 0 || (a == INT64_MIN && b == -1)) return false;
  q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  return true;
}

bool floor_mod(int64_t a, int64_t b, int64_t& r) {
  if (b == 0) return false;
  if (b == -1) {
    r = 0;
    return true;
  }
  r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return true;
}

bool apply(int64_t op, int64_t a, int64_t b, int64_t& out) {
  switch (op) {
    case kOpAdd:
      return !__builtin_add_overflow(a, b, &out);
    case kOpSub:
      return !__builtin_sub_overflow(a, b, &out);
    case kOpMul:
      return !__builtin_mul_overflow(a, b, &out);
    case kOpFloorDiv:
      return floor_div(a, b, out);
    case kOpMod:
      return floor_mod(a, b, out);
    default:
      return false;
  }
}

/// A dim program's value; false where the binder must decide (overflow, zero divisor).
bool evaluate(const std::vector<int64_t>& program, const Int64s& symbols, int64_t& value) {
  int64_t stack[64];
  size_t top = 0;
  for (size_t pc = 0; pc < program.size(); ++pc) {
    int64_t op = program[pc];
    if (op == kOpConst || op == kOpSymbol) {
      if (top == 64 || pc + 1 == program.size()) return false;
      int64_t operand = program[++pc];
      if (op == kOpSymbol && (operand < 0 || static_cast<size_t>(operand) >= symbols.size())) return false;
      stack[top++] = op == kOpConst ? operand : symbols[static_cast<size_t>(operand)];
    } else if (op == kOpNeg) {
      if (top < 1 || stack[top - 1] == INT64_MIN) return false;
      stack[top - 1] = -stack[top - 1];
    } else {
      if (top < 2 || !apply(op, stack[top - 2], stack[top - 1], stack[top - 2])) return false;
      --top;
    }
  }
  if (top != 1) return false;
  value = stack[0];
  return true;
}

/// An integer scalar as the binder reads it: exact ints give their value; bool, float,
/// complex and None bind nothing; anything else (np.integer, int subclasses) is the binder's.
enum class ScalarSymbol { kValue, kNone, kUnusual };

ScalarSymbol scalar_symbol(PyObject* x, int64_t& value) {
  if (PyLong_CheckExact(x)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(x, &overflow);
    if (overflow != 0 || (v == -1 && PyErr_Occurred())) {
      PyErr_Clear();
      return ScalarSymbol::kUnusual;
    }
    value = v;
    return ScalarSymbol::kValue;
  }
  if (x == Py_None || PyBool_Check(x) || PyFloat_CheckExact(x) || PyComplex_CheckExact(x)) return ScalarSymbol::kNone;
  return ScalarSymbol::kUnusual;
}

/// shape[dim] of a tensor's shape tuple; kNone when its rank is shorter (the stub names that).
ScalarSymbol dim_symbol(PyObject* shape, Py_ssize_t dim, int64_t& value) {
  if (!PyTuple_Check(shape)) return ScalarSymbol::kUnusual;
  if (dim >= PyTuple_GET_SIZE(shape)) return ScalarSymbol::kNone;
  ScalarSymbol got = scalar_symbol(PyTuple_GET_ITEM(shape, dim), value);
  return got == ScalarSymbol::kValue ? got : ScalarSymbol::kUnusual;  // an extent that is no int
}

}  // namespace

CallPlan* CallPlan::from_tuple(PyObject* plan) {
  std::unique_ptr<CallPlan> p(new CallPlan());
  if (!p->parse(plan)) return nullptr;
  return p.release();
}

CallPlan::~CallPlan() {
  for (ReturnedOutput& r : returned_) Py_XDECREF(r.torch_dtype);
  Py_XDECREF(table_);
}

/// (names, defaults, required, slots, tensors, symbols, returned); see _call_plan.
bool CallPlan::parse(PyObject* plan) {
  if (!PyTuple_Check(plan) || PyTuple_GET_SIZE(plan) != kTableSize) {
    PyErr_SetString(PyExc_TypeError, "kjit._call: a call plan is a tuple of 7 fields");
    return false;
  }
  Py_INCREF(plan);
  table_ = plan;
  PyObject* names = PyTuple_GET_ITEM(plan, 0);
  PyObject* defaults = PyTuple_GET_ITEM(plan, 1);
  PyObject* required = PyTuple_GET_ITEM(plan, 2);
  if (!PyTuple_Check(names) || !PyTuple_Check(defaults) || PyTuple_GET_SIZE(names) != PyTuple_GET_SIZE(defaults)) {
    PyErr_SetString(PyExc_TypeError, "kjit._call: names and defaults must be tuples of one length");
    return false;
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); ++i) {
    PyObject* name = PyTuple_GET_ITEM(names, i);
    if (!PyUnicode_Check(name)) {
      PyErr_SetString(PyExc_TypeError, "kjit._call: parameter names must be str");
      return false;
    }
    names_.push_back(name);
    PyObject* d = PyTuple_GET_ITEM(defaults, i);
    defaults_.push_back(d == required ? nullptr : d);
  }
  if (!read_indices(PyTuple_GET_ITEM(plan, 3), slots_) || !read_indices(PyTuple_GET_ITEM(plan, 4), tensors_)) {
    return false;
  }
  PyObject* symbols = PyTuple_GET_ITEM(plan, 5);
  PyObject* returned = PyTuple_GET_ITEM(plan, 6);
  if (!PyTuple_Check(symbols) || !PyTuple_Check(returned)) {
    PyErr_SetString(PyExc_TypeError, "kjit._call: symbols and returned must be tuples");
    return false;
  }
  for (Py_ssize_t s = 0; s < PyTuple_GET_SIZE(symbols); ++s) {
    std::vector<Py_ssize_t> flat;
    if (!read_indices(PyTuple_GET_ITEM(symbols, s), flat)) return false;
    std::vector<SymbolSource> sources;
    for (size_t k = 0; k + 1 < flat.size(); k += 2) sources.push_back({flat[k], flat[k + 1]});
    symbols_.push_back(sources);
  }
  for (Py_ssize_t r = 0; r < PyTuple_GET_SIZE(returned); ++r) {
    PyObject* entry = PyTuple_GET_ITEM(returned, r);
    if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 4 || !PyTuple_Check(PyTuple_GET_ITEM(entry, 0)) ||
        !PyUnicode_Check(PyTuple_GET_ITEM(entry, 3))) {
      PyErr_SetString(PyExc_TypeError, "kjit._call: a returned output is (dims, dtype_of, numpy_dtype, dtype_name)");
      return false;
    }
    ReturnedOutput out;
    PyObject* dims = PyTuple_GET_ITEM(entry, 0);
    for (Py_ssize_t d = 0; d < PyTuple_GET_SIZE(dims); ++d) {
      out.dims.emplace_back();
      if (!read_program(PyTuple_GET_ITEM(dims, d), out.dims.back())) return false;
    }
    out.dtype_of = PyLong_AsSsize_t(PyTuple_GET_ITEM(entry, 1));
    if (out.dtype_of == -1 && PyErr_Occurred()) return false;
    out.numpy_dtype = PyTuple_GET_ITEM(entry, 2);
    out.dtype_name = PyTuple_GET_ITEM(entry, 3);
    returned_.push_back(out);
  }
  // Every index must stay inside the caller's arguments: a bad table is a kjit bug.
  Py_ssize_t n = static_cast<Py_ssize_t>(names_.size());
  Py_ssize_t nret = static_cast<Py_ssize_t>(returned_.size());
  bool ok = true;
  for (Py_ssize_t s : slots_) ok &= s < n && s >= -nret;
  for (Py_ssize_t t : tensors_) ok &= t >= 0 && t < n;
  for (const auto& sources : symbols_) {
    for (const SymbolSource& src : sources) ok &= src.param >= 0 && src.param < n && src.dim >= -1;
  }
  for (const ReturnedOutput& r : returned_) ok &= r.dtype_of >= -1 && r.dtype_of < n;
  if (!ok) {
    PyErr_SetString(PyExc_ValueError, "kjit._call: a call plan index is out of range");
    return false;
  }
  return true;
}

Py_ssize_t CallPlan::index_of(PyObject* name) const {
  for (size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] == name) return static_cast<Py_ssize_t>(i);  // interned: the common case
  }
  for (size_t i = 0; i < names_.size(); ++i) {
    int eq = PyUnicode_Compare(names_[i], name);
    if (eq == 0) return static_cast<Py_ssize_t>(i);
    if (eq == -1 && PyErr_Occurred()) PyErr_Clear();
  }
  return -1;
}

/// The caller's values in parameter order (borrowed); false for anything the binder
/// reports: too many arguments, an unknown or repeated keyword, a missing argument.
bool CallPlan::bind(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, PyObject** values) const {
  Py_ssize_t n = static_cast<Py_ssize_t>(names_.size());
  if (nargs > n) return false;
  for (Py_ssize_t i = 0; i < n; ++i) values[i] = i < nargs ? args[i] : nullptr;
  Py_ssize_t nkw = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t k = 0; k < nkw; ++k) {
    Py_ssize_t i = index_of(PyTuple_GET_ITEM(kwnames, k));
    if (i < 0 || values[i] != nullptr) return false;
    values[i] = args[nargs + k];
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (values[i] == nullptr) values[i] = defaults_[static_cast<size_t>(i)];
    if (values[i] == nullptr) return false;
  }
  return true;
}

/// Each symbol from its first available source, as the binder's setdefault order;
/// shapes[i] keeps x.shape of caller argument i once read (owned, nullptr until then).
bool CallPlan::symbol_values(PyObject* const* values, PyObject** shapes, Int64s& out) const {
  for (const auto& sources : symbols_) {
    bool found = false;
    for (const SymbolSource& src : sources) {
      PyObject* x = values[src.param];
      int64_t v = 0;
      ScalarSymbol got = ScalarSymbol::kNone;
      if (src.dim < 0) {
        got = scalar_symbol(x, v);
      } else if (x != Py_None) {
        PyObject*& shape = shapes[src.param];
        if (shape == nullptr && (shape = shape_of(x)) == nullptr) {
          PyErr_Clear();
          return false;
        }
        got = dim_symbol(shape, src.dim, v);
      }
      if (got == ScalarSymbol::kUnusual) return false;
      if (got == ScalarSymbol::kValue) {
        out.push_back(v);
        found = true;
        break;
      }
    }
    if (!found) return false;  // the binder raises (NameError) for an unbound symbol
  }
  return true;
}

bool CallPlan::symbol_values(PyObject* const* values, Int64s& out) const {
  SmallVector<PyObject*, 16> shapes(names_.size(), nullptr);
  bool ok = symbol_values(values, shapes.data(), out);
  for (PyObject* shape : shapes) Py_XDECREF(shape);
  return ok;
}

/// The returned tensors in the framework of the first tensor argument (None: NumPy);
/// false (nothing set) when the binder must do it.
bool CallPlan::allocate_outputs(PyObject* const* values, PyObject** outputs) {
  PyObject* template_ = Py_None;
  for (Py_ssize_t t : tensors_) {
    PyObject* x = values[t];
    if (x == Py_None) continue;
    if (framework_of(x) == Framework::kOther) return false;  // the binder reads x.shape of each
    if (template_ == Py_None) template_ = x;
  }
  Framework framework = framework_of(template_);
  if (framework == Framework::kOther) return false;
  Int64s symbols;
  if (!symbol_values(values, symbols)) return false;
  Int64s shape;
  for (size_t r = 0; r < returned_.size(); ++r) {
    ReturnedOutput& out = returned_[r];
    shape.clear();
    for (const auto& program : out.dims) {
      int64_t extent = 0;
      if (!evaluate(program, symbols, extent) || extent < 0) return false;
      shape.push_back(extent);
    }
    PyObject* source = out.dtype_of >= 0 ? values[out.dtype_of] : nullptr;
    outputs[r] = allocate_output(framework, template_, out, source, shape.data(), shape.size());
    if (outputs[r] == nullptr) return false;
  }
  return true;
}

/// The binder's result: the returned tensors (one alone, several a tuple), after the
/// kernel's own result when it has one. Steals kernel_result.
PyObject* CallPlan::assemble(PyObject* kernel_result, PyObject** outputs) const {
  Py_ssize_t nret = static_cast<Py_ssize_t>(returned_.size());
  bool with_result = kernel_result != Py_None;
  if (!with_result && nret == 1) {
    Py_DECREF(kernel_result);
    Py_INCREF(outputs[0]);
    return outputs[0];
  }
  PyObject* tuple = PyTuple_New(nret + (with_result ? 1 : 0));
  if (tuple == nullptr) {
    Py_DECREF(kernel_result);
    return nullptr;
  }
  Py_ssize_t at = 0;
  if (with_result) {
    PyTuple_SET_ITEM(tuple, at++, kernel_result);
  } else {
    Py_DECREF(kernel_result);
  }
  for (Py_ssize_t r = 0; r < nret; ++r) {
    Py_INCREF(outputs[r]);
    PyTuple_SET_ITEM(tuple, at++, outputs[r]);
  }
  return tuple;
}

bool CallPlan::read_only_array_among(PyObject* const* values) const {
  for (Py_ssize_t t : tensors_) {
    if (is_read_only_ndarray(values[t])) return true;
  }
  return false;
}

/// Whether the stub's error is one the binder answers differently: a read-only array
/// never converts, so the kernel did not run, and the binder passes it its own way (or
/// names it, for a tensor the kernel writes).
bool CallPlan::binder_answers(PyObject* const* values) const {
  if (PyErr_ExceptionMatches(PyExc_BufferError)) return true;
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
  bool read_only = read_only_array_among(values);
  PyErr_Restore(type, value, traceback);
  return read_only;
}

Outcome CallPlan::call(PyObject* stub, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, PyObject** result) {
  size_t n = names_.size(), nret = returned_.size(), nslots = slots_.size();
  // values (caller order), then the returned outputs, then the stub's arguments.
  SmallVector<PyObject*, 48> buffer(n + nret + nslots, nullptr);
  PyObject** values = buffer.data();
  PyObject** outputs = values + n;
  PyObject** stub_args = outputs + nret;
  if (!bind(args, nargs, kwnames, values)) return Outcome::kFallBack;
  auto release = [&] {
    for (size_t r = 0; r < nret; ++r) Py_XDECREF(outputs[r]);
  };
  if (nret > 0 && !allocate_outputs(values, outputs)) {
    release();
    return Outcome::kFallBack;
  }
  for (size_t s = 0; s < nslots; ++s) {
    Py_ssize_t slot = slots_[s];
    stub_args[s] = slot >= 0 ? values[slot] : outputs[-1 - slot];
  }
  PyObject* r = PyObject_Vectorcall(stub, stub_args, nslots, nullptr);
  if (r == nullptr && binder_answers(values)) {
    PyErr_Clear();
    release();
    return Outcome::kFallBack;
  }
  *result = r != nullptr && nret > 0 ? assemble(r, outputs) : r;
  release();
  return Outcome::kDone;
}

}  // namespace kjit::pyext
