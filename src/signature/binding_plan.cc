// Orders the shape/stride equations of a spec and proves every symbol bindable.
#include "signature/binding_plan.h"

#include <algorithm>
#include <map>

#include "kjit/errors.h"
#include "signature/lexer.h"

namespace kjit {
namespace {

enum class SymState { kUnbound, kMaybe, kBound };

class PlanBuilder {
 public:
  PlanBuilder(const FunctionSpec& spec, const std::string& signature) : spec_(spec), signature_(signature) {}

  BindingPlan build() {
    collect_carriers();
    for (size_t i = 0; i < spec_.params.size(); ++i) add_param_steps(i);
    resolve_deferred();
    check_passed_symbols();
    check_constraints();
    return std::move(plan_);
  }

 private:
  void collect_carriers() {
    for (const Param& p : spec_.params) {
      if (p.kind != ParamKind::kTensor) continue;
      std::set<std::string> syms;
      for (const Expr& e : p.tensor.shape) {
        auto s = symbols_of(e);
        syms.insert(s.begin(), s.end());
      }
      for (const Expr& e : p.tensor.strides) {
        auto s = symbols_of(e);
        syms.insert(s.begin(), s.end());
      }
      for (const std::string& s : syms) carriers_[s].push_back(p.name);
    }
  }

  void add_param_steps(size_t i) {
    const Param& p = spec_.params[i];
    if (p.kind == ParamKind::kTensor) {
      for (size_t d = 0; d < p.tensor.shape.size(); ++d) {
        consider(make_step(i, BindingStep::Field::kShape, static_cast<int>(d), p.tensor.shape[d]), false);
      }
      for (size_t d = 0; d < p.tensor.strides.size(); ++d) {
        consider(make_step(i, BindingStep::Field::kStride, static_cast<int>(d), p.tensor.strides[d]), false);
      }
    } else if (p.kind == ParamKind::kScalar && p.symbol) {
      return;  // passed to the kernel, not read from the caller: check_passed_symbols()
    } else if (p.kind == ParamKind::kScalar && carriers_.count(p.name)) {
      if (!is_integer(p.scalar)) {
        fail(p, "scalar '" + p.name + "' names the shape symbol '" + p.name + "' but has type " +
                    scalar_type_name(p.scalar) + "; a symbol's scalar must be an integer type");
      }
      consider(make_step(i, BindingStep::Field::kScalar, 0, make_symbol(p.name)), false);
    } else if (p.kind == ParamKind::kScalar && constraint_symbols().count(p.name)) {
      // A plain scalar in a constraint (`k: int32; k % 8 == 0`) binds its symbol.
      if (!is_integer(p.scalar)) {
        fail(p, "scalar '" + p.name + "' is used in a constraint but has type " + scalar_type_name(p.scalar) +
                    "; constraints compare integers, so it must be an integer type");
      }
      consider(make_step(i, BindingStep::Field::kScalar, 0, make_symbol(p.name)), false);
    }
  }

  std::set<std::string> constraint_symbols() const {
    std::set<std::string> out;
    for (const Constraint& c : spec_.constraints) {
      for (const Expr* e : {&c.lhs, &c.rhs}) {
        auto s = symbols_of(*e);
        out.insert(s.begin(), s.end());
      }
    }
    return out;
  }

  BindingStep make_step(size_t param, BindingStep::Field field, int dim, const Expr& expr) {
    BindingStep s;
    s.param = param;
    s.field = field;
    s.dim = dim;
    s.expr = expr;
    s.in_optional = spec_.params[param].kind == ParamKind::kTensor && spec_.params[param].tensor.optional;
    return s;
  }

  static bool always_determines(const LinearForm& f) {
    auto c = constant_value(f.coef);
    return c.has_value() && *c != 0;
  }

  SymState state(const std::string& sym) const {
    auto it = state_.find(sym);
    return it == state_.end() ? SymState::kUnbound : it->second;
  }

  void mark_bound(const std::string& sym, bool in_optional) {
    if (state(sym) == SymState::kUnbound) plan_.symbols.push_back(sym);
    if (state(sym) == SymState::kBound) return;
    state_[sym] = in_optional ? SymState::kMaybe : SymState::kBound;
  }

  /// Places the step in the plan if it can be handled now; returns false (and, on
  /// the first pass, queues it) otherwise.
  bool consider(BindingStep step, bool deferred) {
    std::vector<std::string> unknown, maybe;
    for (const std::string& s : symbols_of(step.expr)) {
      if (state(s) == SymState::kUnbound) unknown.push_back(s);
      if (state(s) == SymState::kMaybe) maybe.push_back(s);
    }
    step.deferred = deferred;
    if (step.expr->op == ExprOp::kSymbol) {
      const std::string& sym = step.expr->name;
      SymState st = state(sym);
      step.action = st == SymState::kBound   ? BindingStep::Action::kCheck
                    : st == SymState::kMaybe ? BindingStep::Action::kCheckOrBind
                                             : BindingStep::Action::kBind;
      step.unknown = sym;
      mark_bound(sym, step.in_optional);
    } else if (unknown.empty()) {
      // One symbol that may be unbound (its carriers were optional): solve for it
      // at run time if it is, check otherwise.
      auto form = maybe.size() == 1 ? linearize(step.expr, maybe[0]) : std::nullopt;
      if (form && constant_value(form->coef) != std::optional<int64_t>(0)) {
        step.action = BindingStep::Action::kCheckOrSolve;
        step.unknown = maybe[0];
        step.form = *form;
        mark_bound(maybe[0], step.in_optional || !always_determines(*form));
      } else {
        step.action = BindingStep::Action::kCheck;
        step.guard_symbols = maybe;
      }
    } else if (unknown.size() == 1) {
      auto form = linearize(step.expr, unknown[0]);
      if (!form || constant_value(form->coef) == std::optional<int64_t>(0)) {
        if (!deferred) pending_.push_back(step);
        return false;
      }
      step.action = BindingStep::Action::kSolve;
      step.unknown = unknown[0];
      step.form = *form;
      step.guard_symbols = maybe;
      // A run-time coefficient (n in n*k) may be 0 and then fixes nothing.
      mark_bound(unknown[0], step.in_optional || !always_determines(*form));
    } else {
      if (!deferred) pending_.push_back(step);
      return false;
    }
    plan_.steps.push_back(std::move(step));
    return true;
  }

  void resolve_deferred() {
    bool progress = true;
    while (progress && !pending_.empty()) {
      progress = false;
      std::vector<BindingStep> still;
      for (BindingStep& s : pending_) {
        if (consider(s, true)) {
          progress = true;
        } else {
          still.push_back(s);
        }
      }
      pending_ = std::move(still);
    }
    if (!pending_.empty()) fail_unsolvable(pending_.front());
  }

  void fail_unsolvable(const BindingStep& s) {
    std::vector<std::string> unknown;
    for (const std::string& sym : symbols_of(s.expr)) {
      if (state(sym) == SymState::kUnbound) unknown.push_back(sym);
    }
    std::string list;
    for (const std::string& u : unknown) list += (list.empty() ? "" : ", ") + u;
    std::string why = unknown.size() == 1
                          ? "it is not linear in " + list + " and no other dimension binds " + list
                          : "no dimension binds " + list + " on its own, and a dim can solve only one unknown";
    fail(spec_.params[s.param], field_label(spec_, s) + " = " + to_string(s.expr) + " can never be solved: " + why +
                                    " (give one of them its own dimension, or pass it as an integer scalar)");
  }

  void check_constraints() {
    for (const Constraint& c : spec_.constraints) {
      std::set<std::string> syms = symbols_of(c.lhs);
      auto r = symbols_of(c.rhs);
      syms.insert(r.begin(), r.end());
      for (const std::string& s : syms) {
        SymState st = state(s);
        if (st == SymState::kUnbound) {
          fail_at(c.span, "constraint uses '" + s + "', which no parameter or dimension binds");
        }
        if (st == SymState::kMaybe && std::find(plan_.constraint_guards.begin(), plan_.constraint_guards.end(), s) ==
                                          plan_.constraint_guards.end()) {
          plan_.constraint_guards.push_back(s);
        }
      }
    }
    for (const std::string& sym : plan_.symbols) {
      plan_.carriers.push_back(carriers_[sym]);
    }
  }

  /// A symbol scalar ("n: int64 symbol") is an integer some tensor binds; one bound
  /// only by optional tensors is checked at run time.
  void check_passed_symbols() {
    for (const Param& p : spec_.params) {
      if (p.kind != ParamKind::kScalar || !p.symbol) continue;
      std::string head =
          "parameter '" + p.name + "' is a symbol (kjit passes the value the shapes bind to '" + p.name + "')";
      if (!is_integer(p.scalar)) {
        fail(p, head + " but has type " + scalar_type_name(p.scalar) + "; symbols are integers: write '" + p.name +
                    ": int64 symbol' (or another integer type)");
      }
      SymState st = state(p.name);
      if (st == SymState::kUnbound) {
        fail(p, head + ", but no tensor's shape or strides bind a symbol '" + p.name + "'" + symbol_list() +
                    "; name it after one of them, or drop 'symbol' to have the caller pass '" + p.name + "'");
      }
      if (st == SymState::kMaybe) plan_.passed_guards.push_back(p.name);
    }
  }

  /// " (its symbols: m, n)", or " (it has none)".
  std::string symbol_list() const {
    std::string list;
    for (const std::string& s : plan_.symbols) list += (list.empty() ? "" : ", ") + s;
    return list.empty() ? " (the spec has no shape symbols)" : " (its symbols: " + list + ")";
  }

  [[noreturn]] void fail(const Param& p, const std::string& what) const { fail_at(p.span, what); }

  [[noreturn]] void fail_at(const SourceSpan& span, const std::string& what) const {
    std::string context = "signature of '" + spec_.name + "'";
    if (!signature_.empty()) {
      throw SpecError(spec_detail::spec_error_message(context, signature_, span.begin, span.end, what));
    }
    throw SpecError(context + ": " + what + "\n  " + to_string(spec_));
  }

  const FunctionSpec& spec_;
  const std::string& signature_;
  std::map<std::string, SymState> state_;
  std::map<std::string, std::vector<std::string>> carriers_;
  std::vector<BindingStep> pending_;
  BindingPlan plan_;
};

}  // namespace

bool is_size_scalar(const BindingPlan& plan, size_t param) {
  for (const BindingStep& s : plan.steps) {
    if (s.field == BindingStep::Field::kScalar && s.param == param) return true;
  }
  return false;
}

namespace {

/// The tensors whose `field` (dtype_var or batch) is `name`: those the caller passes
/// in parameter order, then returned ones.
std::vector<const Param*> carriers_of(const FunctionSpec& spec, std::string TensorSpec::*field,
                                      const std::string& name) {
  std::vector<const Param*> out;
  for (bool returned : {false, true}) {
    for (const Param& p : spec.params) {
      if (p.kind == ParamKind::kTensor && p.tensor.*field == name && p.tensor.returned == returned) out.push_back(&p);
    }
  }
  return out;
}

std::string passed_names(const std::vector<const Param*>& carriers) {
  std::string out;
  for (const Param* p : carriers) {
    if (!p->tensor.returned) out += (out.empty() ? "" : ", ") + p->name;
  }
  return out;
}

}  // namespace

std::vector<const Param*> dtype_var_carriers(const FunctionSpec& spec, const std::string& var) {
  return carriers_of(spec, &TensorSpec::dtype_var, var);
}

std::string dtype_var_carrier_names(const FunctionSpec& spec, const std::string& var) {
  return passed_names(dtype_var_carriers(spec, var));
}

std::vector<std::string> batch_groups(const FunctionSpec& spec) {
  std::vector<std::string> out;
  for (const Param& p : spec.params) {
    if (p.kind == ParamKind::kTensor && !p.tensor.batch.empty() &&
        std::find(out.begin(), out.end(), p.tensor.batch) == out.end()) {
      out.push_back(p.tensor.batch);
    }
  }
  return out;
}

std::vector<const Param*> batch_carriers(const FunctionSpec& spec, const std::string& group) {
  return carriers_of(spec, &TensorSpec::batch, group);
}

std::string batch_carrier_names(const FunctionSpec& spec, const std::string& group) {
  return passed_names(batch_carriers(spec, group));
}

std::string size_scalar_note(const std::string& name) {
  return "; '" + name + "' is a size, which a bool is not (NumPy and torch take none as one)";
}

std::string field_text(const FunctionSpec& spec, const BindingStep& step) {
  const TensorSpec& t = spec.params[step.param].tensor;
  switch (step.field) {
    case BindingStep::Field::kShape:
      return shape_field_text(t, "shape", step.dim);
    case BindingStep::Field::kStride:
      return shape_field_text(t, "strides", step.dim);
    case BindingStep::Field::kScalar:
      return "value";
  }
  throw InternalError("kjit internal error: unknown BindingStep::Field");
}

std::string field_label(const FunctionSpec& spec, const BindingStep& step) {
  const Param& p = spec.params[step.param];
  if (step.field == BindingStep::Field::kScalar) return "argument '" + p.name + "'";
  return p.name + "." + field_text(spec, step);
}

BindingPlan make_binding_plan(const FunctionSpec& spec, const std::string& signature) {
  return PlanBuilder(spec, signature).build();
}

}  // namespace kjit
