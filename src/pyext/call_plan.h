// The C path of a kjit call that is not plain positional: keywords and defaults bound
// to the stub's slots, returned outputs allocated, all from a table Python computes
// once per function at load time (python/kjit/function.py, _call_plan). Whatever the
// table does not cover exactly (a missing or unknown keyword, an unusual argument, an
// expression that leaves int64) is not handled here: the caller hands the call to the
// Python binder, which produces today's results and messages.
#ifndef KJIT_PYEXT_CALL_PLAN_H_
#define KJIT_PYEXT_CALL_PLAN_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>
#include <vector>

#include "small_vector.h"

namespace kjit::pyext {

using Int64s = SmallVector<int64_t, 16>;  ///< symbol values, a shape

/// Where a shape symbol's value comes from, first available first (the binder's order).
struct SymbolSource {
  Py_ssize_t param;  ///< caller parameter index
  Py_ssize_t dim;    ///< its dim; -1: the parameter is an integer scalar
};

/// One returned tensor: its dims as postfix programs, and its dtype.
struct ReturnedOutput {
  std::vector<std::vector<int64_t>> dims;  ///< kOp* codes and operands
  Py_ssize_t dtype_of = -1;                ///< caller parameter whose dtype it takes; -1: fixed
  PyObject* numpy_dtype = nullptr;         ///< borrowed: the fixed dtype as a NumPy dtype, or None
  PyObject* dtype_name = nullptr;          ///< borrowed: the fixed dtype's name (str)
  PyObject* torch_dtype = nullptr;         ///< owned: getattr(torch, dtype_name), looked up on first use
};

/// Opcodes of a dim program (python/kjit/function.py, _DIM_OPS, uses the same numbers).
enum DimOp : int64_t { kOpConst = 0, kOpSymbol = 1, kOpAdd, kOpSub, kOpMul, kOpFloorDiv, kOpMod, kOpNeg };

/// What a bound call ended in.
enum class Outcome {
  kDone,      ///< a result, or the stub's own error (set)
  kFallBack,  ///< not covered here: call the binder with the original arguments (no error set)
};

class CallPlan {
 public:
  /// Reads the table of _call_plan; nullptr (error set) when it is malformed.
  static CallPlan* from_tuple(PyObject* plan);
  ~CallPlan();
  CallPlan(const CallPlan&) = delete;
  CallPlan& operator=(const CallPlan&) = delete;

  /// Binds args/kwnames, allocates returned outputs and calls `stub` once.
  Outcome call(PyObject* stub, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, PyObject** result);

  PyObject* table() const { return table_; }

 private:
  CallPlan() = default;
  bool parse(PyObject* plan);
  Py_ssize_t index_of(PyObject* name) const;
  bool bind(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, PyObject** values) const;
  bool symbol_values(PyObject* const* values, PyObject** shapes, Int64s& out) const;
  bool symbol_values(PyObject* const* values, Int64s& out) const;
  bool allocate_outputs(PyObject* const* values, PyObject** outputs);
  PyObject* assemble(PyObject* kernel_result, PyObject** outputs) const;
  bool read_only_array_among(PyObject* const* values) const;
  bool binder_answers(PyObject* const* values) const;

  PyObject* table_ = nullptr;                       ///< owned: the tuple every borrowed pointer lives in
  std::vector<PyObject*> names_;                    ///< caller parameter names (borrowed)
  std::vector<PyObject*> defaults_;                 ///< their defaults, nullptr: required (borrowed)
  std::vector<Py_ssize_t> slots_;                   ///< stub slot -> caller index, or -1 - returned index
  std::vector<Py_ssize_t> tensors_;                 ///< caller indices of tensor parameters
  std::vector<std::vector<SymbolSource>> symbols_;  ///< per symbol of the returned shapes
  std::vector<ReturnedOutput> returned_;
};

}  // namespace kjit::pyext

#endif  // KJIT_PYEXT_CALL_PLAN_H_
