// The binding plan: in which order a stub reads shape/stride fields, which symbol
// each field binds or solves, and which it only checks. Building the plan is how a
// spec is proved solvable; the stub emitter turns it into code line by line.
#ifndef KJIT_SRC_SIGNATURE_BINDING_PLAN_H_
#define KJIT_SRC_SIGNATURE_BINDING_PLAN_H_

#include <string>
#include <vector>

#include "kjit/spec.h"

namespace kjit {

/// One equation "field == expr" and what the stub does with it.
struct BindingStep {
  enum class Field { kShape, kStride, kScalar };
  enum class Action {
    kCheck,         ///< every symbol is bound: compare
    kBind,          ///< expr is a bare unbound symbol: bind it
    kCheckOrBind,   ///< bare symbol that may be bound (by an optional tensor): decide at run time
    kSolve,         ///< one unbound symbol, linear: solve for it, then compare
    kCheckOrSolve,  ///< one symbol that may be bound: solve if it is not, then compare
  };
  size_t param;  ///< index into FunctionSpec::params
  Field field;
  int dim = 0;  ///< shape/stride index
  Expr expr;
  Action action = Action::kCheck;
  std::string unknown;       ///< kBind, kCheckOrBind, kSolve
  LinearForm form;           ///< kSolve: expr == coef * unknown + rest
  bool in_optional = false;  ///< inside `if (tensor present)`
  bool deferred = false;     ///< had two unknowns at first sight; placed after all params
  /// Symbols that may be unbound at run time (bound only by optional tensors);
  /// the stub checks them before use.
  std::vector<std::string> guard_symbols;
};

struct BindingPlan {
  std::vector<BindingStep> steps;
  /// Every symbol, in first-binding order.
  std::vector<std::string> symbols;
  /// Symbols used by constraints that may be unbound at run time.
  std::vector<std::string> constraint_guards;
  /// Symbols passed to the kernel ("n: int64 symbol") that may be unbound at run time.
  std::vector<std::string> passed_guards;
  /// For each symbol, the tensor parameters that carry it (for "all were None").
  std::vector<std::vector<std::string>> carriers;
};

/// Builds the plan; throws SpecError (text-pointing when `signature` is given) if a
/// dim can never be solved or a symbol is never bound.
BindingPlan make_binding_plan(const FunctionSpec& spec, const std::string& signature = "");

/// Whether scalar parameter `param` (an index into FunctionSpec::params) binds or
/// is checked against a shape symbol: a size, which takes an int, never a bool
/// (NumPy and torch refuse a bool as a size).
bool is_size_scalar(const BindingPlan& plan, size_t param);

/// What a message about a bool given for size scalar `name` adds: "; 'n' is a
/// size, which a bool is not".
std::string size_scalar_note(const std::string& name);

/// The tensors that carry dtype variable `var`, in the order they bind it: those the
/// caller passes (inputs and outs) in parameter order, then returned tensors (kjit
/// allocated those in the bound dtype; a C++ caller's are checked all the same).
std::vector<const Param*> dtype_var_carriers(const FunctionSpec& spec, const std::string& var);

/// "x, w": the names of dtype_var_carriers, for messages.
std::string dtype_var_carrier_names(const FunctionSpec& spec, const std::string& var);

/// Every batch group (`[*batch, n]`) the spec names, in first-use order.
std::vector<std::string> batch_groups(const FunctionSpec& spec);

/// The tensors that name batch group `group`, in the order they bind it (as
/// dtype_var_carriers).
std::vector<const Param*> batch_carriers(const FunctionSpec& spec, const std::string& group);

/// "x, y": the names of batch_carriers the caller passes, for messages.
std::string batch_carrier_names(const FunctionSpec& spec, const std::string& group);

/// "shape[0]", "strides[1]" ("shape[-1]" after a batch group), "value": the field a
/// step reads, as messages name it.
std::string field_text(const FunctionSpec& spec, const BindingStep& step);

/// "a.shape[0]", "a.strides[1]", "argument 'n'": where a step reads its value.
std::string field_label(const FunctionSpec& spec, const BindingStep& step);

}  // namespace kjit

#endif  // KJIT_SRC_SIGNATURE_BINDING_PLAN_H_
