// The call model's checks: the sections of a generated stub (argument kinds and
// scalar values, rank and dtype, shapes and strides, layout and placement,
// constraints, passed symbols) run over one call's arguments, then the returned
// tensors' shapes. The plan is built once from the spec's binding plan, as the stub
// emitter builds the stub from it; failures call the stub prelude's message
// functions, so a call reads the same whether the model or a stub rejects it.
#include <kjit/detail/stub_prelude.h>

#include <map>
#include <set>

#include "call/call_model.h"
#include "signature/binding_plan.h"
#include "signature/describe.h"

namespace kjit {
namespace {

using kjit_stub::SymVal;

/// An integer expression compiled over the model's symbol slots, evaluated exactly
/// (fold_binary: floor division and modulo as in Python, nothing that leaves int64).
class Program {
 public:
  Program() = default;
  Program(const Expr& e, const std::map<std::string, int>& slots) : text_(to_string(e)) {
    compile(e, slots);
    for (const std::string& s : symbols_of(e)) symbols_.push_back(slots.at(s));  // by name, as the stubs list them
  }

  /// False when the exact value does not fit in int64 (divisors are guarded before).
  bool evaluate(const int64_t* s, int64_t* value) const {
    if (ops_.size() == 1) {  // a literal or a symbol: most dims
      *value = ops_[0].op == ExprOp::kConst ? ops_[0].operand : s[ops_[0].operand];
      return true;
    }
    SmallVector<int64_t, 16> stack;
    for (const Op& op : ops_) {
      if (op.op == ExprOp::kConst || op.op == ExprOp::kSymbol) {
        stack.push_back(op.op == ExprOp::kConst ? op.operand : s[op.operand]);
        continue;
      }
      const size_t top = stack.size();
      std::optional<int64_t> r = op.op == ExprOp::kNeg ? fold_binary(ExprOp::kSub, 0, stack[top - 1])
                                                       : fold_binary(op.op, stack[top - 2], stack[top - 1]);
      if (!r) return false;
      if (op.op != ExprOp::kNeg) stack.resize(top - 1);
      stack[stack.size() - 1] = *r;
    }
    if (stack.empty()) return false;  // no program is empty: compile() emits at least one op
    *value = stack[0];
    return true;
  }
  const std::string& text() const { return text_; }
  const std::vector<int>& symbols() const { return symbols_; }

 private:
  struct Op {
    ExprOp op;
    int64_t operand;
  };
  void compile(const Expr& e, const std::map<std::string, int>& slots) {
    switch (e->op) {
      case ExprOp::kConst:
        ops_.push_back({ExprOp::kConst, e->value});
        return;
      case ExprOp::kSymbol:
        ops_.push_back({ExprOp::kSymbol, slots.at(e->name)});
        return;
      case ExprOp::kNeg:
        compile(e->lhs, slots);
        ops_.push_back({ExprOp::kNeg, 0});
        return;
      default:
        compile(e->lhs, slots);
        compile(e->rhs, slots);
        ops_.push_back({e->op, 0});
    }
  }
  std::vector<Op> ops_;
  std::string text_;
  std::vector<int> symbols_;
};

/// A divisor that is not a constant, checked non-zero before an expression using it.
struct DivisorGuard {
  Program divisor;
  std::string where;          ///< what needs it: "x.shape[0]", "constraint 'n % k == 0'"
  std::string overflow_what;  ///< "<where> needs the divisor <d>", for fail_overflow
};

std::vector<DivisorGuard> divisor_guards(const Expr& e, const std::string& where,
                                         const std::map<std::string, int>& slots) {
  std::set<std::string> texts;
  std::vector<Expr> divisors;
  collect_divisors(e, &texts, &divisors);
  std::vector<DivisorGuard> out;
  for (const Expr& d : divisors) {
    Program program(d, slots);
    std::string overflow_what = where + " needs the divisor " + program.text();
    out.push_back({std::move(program), where, std::move(overflow_what)});
  }
  return out;
}

}  // namespace

static_assert(kPythonTypeNamed == kjit_stub::kPythonTypeNamed, "one marker of a named Python type");

struct CallModel::Plan {
  struct TensorCheck {
    int caller;
    const TensorSpec* spec;
    std::string type_text;
    std::string expected;  ///< expected_dtype_text
    std::string values;    ///< packed_values, for packed tensors
    int bits = 0;          ///< packed_bits, for packed tensors
  };
  struct Step {
    int caller;
    BindingStep::Field field;
    int dim;
    BindingStep::Action action;
    Program expr;
    int unknown = -1;
    Program coef, rest;
    std::vector<int> others;  ///< symbols of expr less unknown, by name
    std::vector<int> guards;
    std::vector<DivisorGuard> divisors;
    bool in_optional;
    bool packed_dim;
    int bits = 0;
    std::string values;
    std::string label;       ///< "x.shape[0]": what binds a symbol
    std::string field_text;  ///< "shape[0]"
    std::string name;        ///< the parameter's
    std::string check_what;  ///< "argument #1 'x': shape[0] must equal 2*n"
    std::string solve_what;  ///< "argument #1 'x': solving shape[0] == 2*n for n"
  };
  struct ConstraintCheck {
    std::string text;
    CmpOp op;
    Program lhs, rhs;
    std::string lhs_what, rhs_what;  ///< "constraint '<text>' needs <side>", for fail_overflow
    std::vector<int> symbols;        ///< of both sides
    std::vector<DivisorGuard> divisors;
  };
  struct PassedSymbol {
    int slot;
    std::string name;
    const char* type;
    IntRange range;
  };
  struct ReturnedTensor {
    std::string name;
    std::vector<Program> dims;
    std::vector<std::vector<DivisorGuard>> divisors;  ///< per dim
    std::vector<std::string> what;                    ///< per dim: "returned tensor 'y': shape[0] = 2*n"
    int dtype_of = -1;                                ///< caller index, or -1: `dtype`
    int dtype_var = -1;                               ///< index into dtype_vars, or -1
    int batch = -1;                                   ///< index into batch_groups, or -1: its leading dims
    DLDataType dtype{};
    DeviceKind device;
  };

  std::vector<std::string> symbols;   ///< slot -> name
  std::vector<std::string> carriers;  ///< slot -> "x, y": the tensors carrying it
  std::map<std::string, int> slots;
  std::map<std::string, SymbolSource> sources;  ///< symbol -> where it is bound directly
  std::vector<TensorCheck> tensors;
  std::vector<Step> steps;
  std::vector<int> constraint_guards;
  std::vector<ConstraintCheck> constraints;
  std::vector<int> passed_guards;
  std::vector<PassedSymbol> passed;
  std::vector<ReturnedTensor> returned;
  std::vector<char> size_callers;  ///< per caller: an integer scalar that binds a symbol (no bools)
  /// A dtype variable: the callers that carry it, in binding order (returned tensors,
  /// which kjit allocates from the binding, are not among them).
  struct DTypeVar {
    std::string name;
    std::vector<int> carriers;
    std::string carrier_names;  ///< "x, w", for messages
  };
  std::vector<DTypeVar> dtype_vars;
  /// "w: dtype(x)[...]" among the callers: w must have x's dtype.
  struct DTypeOf {
    int caller, source;
    std::string label;  ///< "dtype(x)"
  };
  std::vector<DTypeOf> dtype_ofs;
  /// A scalar typed by dtype variable `var` (an index into dtype_vars).
  struct VarScalar {
    int caller, var;
    bool integral;  ///< range-checked against the bound dtype (a floating one is rounded by the stub)
  };
  std::vector<VarScalar> var_scalars;
  /// A batch group ("[*batch, n]"): the callers that name it, in binding order, with
  /// the count of their declared dims after it.
  struct BatchGroup {
    std::string name;
    std::vector<std::pair<int, int>> carriers;  ///< {caller, declared dims}
    std::string carrier_names;                  ///< "x, y", for messages
  };
  std::vector<BatchGroup> batch_groups;
  /// Callers with a batch group, whose later checks read their declared dims only.
  std::vector<std::pair<int, int>> batched;  ///< {caller, declared dims}
};

namespace {

/// The spec as the caller sees it: returned tensors left out, so every symbol their
/// shapes use is bound by the caller's arguments before they are computed.
FunctionSpec callers_only(const FunctionSpec& spec) {
  FunctionSpec out = spec;
  out.params.clear();
  for (const Param& p : spec.params) {
    if (!(p.kind == ParamKind::kTensor && p.tensor.returned)) out.params.push_back(p);
  }
  return out;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

class PlanBuilder {
 public:
  explicit PlanBuilder(const CallModel& model) : model_(model), spec_(callers_only(model.spec())) {}

  std::shared_ptr<CallModel::Plan> build() {
    binding_ = make_binding_plan(spec_);
    for (const std::string& s : binding_.symbols) {
      plan_->slots[s] = static_cast<int>(plan_->symbols.size());
      plan_->symbols.push_back(s);
    }
    for (const auto& c : binding_.carriers) plan_->carriers.push_back(joined(c));
    for (size_t i = 0; i < model_.callers().size(); ++i)
      caller_of_name_[model_.callers()[i].name] = static_cast<int>(i);
    tensors();
    dtype_vars();
    batch_groups();
    for (const BindingStep& s : binding_.steps) step(s);
    scalars_of_returned_shapes();
    constraints();
    passed_symbols();
    returned();
    return plan_;
  }

 private:
  int caller_of(size_t reduced_param) const { return caller_of_name_.at(spec_.params[reduced_param].name); }

  std::vector<int> slots_of(const std::vector<std::string>& names) const {
    std::vector<int> out;
    out.reserve(names.size());
    for (const std::string& n : names) out.push_back(plan_->slots.at(n));
    return out;
  }

  void tensors() {
    for (size_t i = 0; i < model_.callers().size(); ++i) {
      const CallerParam& c = model_.callers()[i];
      if (!c.tensor) continue;
      const TensorSpec& t = model_.spec().params[c.param].tensor;
      CallModel::Plan::TensorCheck check{static_cast<int>(i), &t, c.type_text, "", "", 0};
      if (!t.dtypes.empty()) check.expected = expected_dtype_text(t);
      if (is_packed(t)) {
        check.values = packed_values(t);
        check.bits = packed_bits(t);
      }
      plan_->tensors.push_back(std::move(check));
    }
  }

  void dtype_vars() {
    const FunctionSpec& full = model_.spec();
    for (const DTypeVar& v : full.dtype_vars) {
      CallModel::Plan::DTypeVar out;
      out.name = v.name;
      for (const Param* c : dtype_var_carriers(full, v.name)) {
        if (!c->tensor.returned) out.carriers.push_back(caller_of_name_.at(c->name));
      }
      out.carrier_names = dtype_var_carrier_names(full, v.name);
      plan_->dtype_vars.push_back(std::move(out));
    }
    for (size_t i = 0; i < model_.callers().size(); ++i) {
      const Param& p = full.params[model_.callers()[i].param];
      if (p.kind == ParamKind::kTensor && !p.tensor.dtype_of.empty()) {
        plan_->dtype_ofs.push_back(
            {static_cast<int>(i), caller_of_name_.at(p.tensor.dtype_of), "dtype(" + p.tensor.dtype_of + ")"});
      }
      if (p.kind == ParamKind::kScalar && !p.scalar_var.empty()) {
        plan_->var_scalars.push_back({static_cast<int>(i), dtype_var_index(p.scalar_var), is_integer(p.scalar)});
      }
    }
  }

  void batch_groups() {
    const FunctionSpec& full = model_.spec();
    for (const std::string& g : kjit::batch_groups(full)) {
      CallModel::Plan::BatchGroup out;
      out.name = g;
      for (const Param* c : batch_carriers(full, g)) {
        if (c->tensor.returned) continue;
        const std::pair<int, int> carrier{caller_of_name_.at(c->name), static_cast<int>(c->tensor.shape.size())};
        out.carriers.push_back(carrier);
        plan_->batched.push_back(carrier);
      }
      out.carrier_names = batch_carrier_names(full, g);
      plan_->batch_groups.push_back(std::move(out));
    }
  }

  int batch_group_index(const std::string& name) const {
    for (size_t g = 0; g < plan_->batch_groups.size(); ++g) {
      if (plan_->batch_groups[g].name == name) return static_cast<int>(g);
    }
    throw InternalError("kjit internal error: a batch group the spec does not name");
  }

  int dtype_var_index(const std::string& name) const {
    const std::vector<DTypeVar>& vars = model_.spec().dtype_vars;
    for (size_t v = 0; v < vars.size(); ++v) {
      if (vars[v].name == name) return static_cast<int>(v);
    }
    throw InternalError("kjit internal error: a dtype variable the spec does not declare");
  }

  void step(const BindingStep& s) {
    const Param& p = spec_.params[s.param];
    const int caller = caller_of(s.param);
    if (s.field == BindingStep::Field::kScalar) {
      plan_->size_callers.resize(model_.callers().size(), 0);
      plan_->size_callers[static_cast<size_t>(caller)] = 1;
    }
    CallModel::Plan::Step out;
    out.caller = caller;
    out.field = s.field;
    out.dim = s.dim;
    out.action = s.action;
    out.expr = Program(s.expr, plan_->slots);
    out.in_optional = s.in_optional;
    out.packed_dim = s.field == BindingStep::Field::kShape && is_packed(p.tensor) &&
                     static_cast<size_t>(s.dim) + 1 == p.tensor.shape.size();
    if (out.packed_dim) {
      out.bits = packed_bits(p.tensor);
      out.values = packed_values(p.tensor);
    }
    out.label = field_label(spec_, s);
    out.field_text = field_text(spec_, s);
    out.name = p.name;
    out.guards = slots_of(s.guard_symbols);
    out.divisors = divisor_guards(s.expr, out.label, plan_->slots);
    const std::string head = "argument #" + std::to_string(caller) + " '" + p.name + "': ";
    out.check_what = head + out.field_text + " must equal " + to_string(s.expr);
    if (!s.unknown.empty()) {
      out.unknown = plan_->slots.at(s.unknown);
      out.solve_what = head + "solving " + out.field_text + " == " + to_string(s.expr) + " for " + s.unknown;
    }
    if (s.action == BindingStep::Action::kSolve || s.action == BindingStep::Action::kCheckOrSolve) {
      out.coef = Program(simplify(s.form.coef), plan_->slots);
      out.rest = Program(simplify(s.form.rest), plan_->slots);
      std::set<std::string> others = symbols_of(s.expr);
      others.erase(s.unknown);
      for (const std::string& o : others) out.others.push_back(plan_->slots.at(o));
    }
    if (s.action == BindingStep::Action::kBind && !s.in_optional && !plan_->sources.count(s.unknown)) {
      const bool whole_dim = s.field == BindingStep::Field::kShape && !out.packed_dim;
      if (whole_dim || s.field == BindingStep::Field::kScalar) {
        CallModel::SymbolSource source{caller, s.dim, s.field == BindingStep::Field::kScalar};
        if (!p.tensor.batch.empty()) source.dim -= static_cast<int>(p.tensor.shape.size());
        plan_->sources[s.unknown] = source;
      }
    }
    plan_->steps.push_back(std::move(out));
  }

  /// An integer parameter named like a symbol only returned tensors use (`k: int64,
  /// y: int32[k] return`) binds nothing among the caller's tensors: it binds here.
  void scalars_of_returned_shapes() {
    for (size_t index : model_.returned()) {
      for (const Expr& e : model_.spec().params[index].tensor.shape) {
        for (const std::string& sym : symbols_of(e)) {
          if (plan_->slots.count(sym)) continue;
          for (size_t r = 0; r < spec_.params.size(); ++r) {
            const Param& p = spec_.params[r];
            if (p.kind != ParamKind::kScalar || p.symbol || p.name != sym || !is_integer(p.scalar)) continue;
            plan_->slots[sym] = static_cast<int>(plan_->symbols.size());
            plan_->symbols.push_back(sym);
            plan_->carriers.push_back("");
            BindingStep bind;
            bind.param = r;
            bind.field = BindingStep::Field::kScalar;
            bind.expr = make_symbol(sym);
            bind.action = BindingStep::Action::kBind;
            bind.unknown = sym;
            step(bind);
          }
        }
      }
    }
  }

  void constraints() {
    plan_->constraint_guards = slots_of(binding_.constraint_guards);
    for (const Constraint& c : spec_.constraints) {
      CallModel::Plan::ConstraintCheck check;
      check.text = to_string(c.lhs) + " " + cmp_op_text(c.op) + " " + to_string(c.rhs);
      check.op = c.op;
      Expr both = make_binary(ExprOp::kAdd, c.lhs, c.rhs);
      check.lhs = Program(c.lhs, plan_->slots);
      check.rhs = Program(c.rhs, plan_->slots);
      for (const std::string& s : symbols_of(both)) check.symbols.push_back(plan_->slots.at(s));
      const std::string where = "constraint '" + check.text + "'";
      check.divisors = divisor_guards(both, where, plan_->slots);
      check.lhs_what = where + " needs " + check.lhs.text();
      check.rhs_what = where + " needs " + check.rhs.text();
      plan_->constraints.push_back(std::move(check));
    }
  }

  void passed_symbols() {
    plan_->passed_guards = slots_of(binding_.passed_guards);
    for (const Param& p : spec_.params) {
      if (p.kind != ParamKind::kScalar || !p.symbol) continue;
      std::optional<IntRange> range = checked_int_range(p.scalar);
      if (!range) continue;
      plan_->passed.push_back({plan_->slots.at(p.name), p.name, scalar_type_name(p.scalar), *range});
    }
  }

  void returned() {
    for (size_t index : model_.returned()) {
      const Param& p = model_.spec().params[index];
      CallModel::Plan::ReturnedTensor r;
      r.name = p.name;
      r.device = p.tensor.device;
      for (size_t d = 0; d < p.tensor.shape.size(); ++d) {
        const Expr& e = p.tensor.shape[d];
        r.dims.emplace_back(e, plan_->slots);
        const std::string field = shape_field_text(p.tensor, "shape", static_cast<int>(d));
        r.what.push_back("returned tensor '" + p.name + "': " + field + " = " + r.dims.back().text());
        r.divisors.push_back(divisor_guards(e, "returned tensor '" + p.name + "': " + field, plan_->slots));
      }
      if (!p.tensor.batch.empty()) r.batch = batch_group_index(p.tensor.batch);
      if (!p.tensor.dtype_of.empty()) {
        r.dtype_of = caller_of_name_.at(p.tensor.dtype_of);
      } else if (!p.tensor.dtype_var.empty()) {
        r.dtype_var = dtype_var_index(p.tensor.dtype_var);
      } else {
        r.dtype = p.tensor.dtypes[0].dl;
      }
      plan_->returned.push_back(std::move(r));
    }
  }

  const CallModel& model_;
  FunctionSpec spec_;
  BindingPlan binding_;
  std::map<std::string, int> caller_of_name_;
  std::shared_ptr<CallModel::Plan> plan_ = std::make_shared<CallModel::Plan>();
};

bool compare(CmpOp op, int64_t a, int64_t b) {
  switch (op) {
    case CmpOp::kEq:
      return a == b;
    case CmpOp::kNe:
      return a != b;
    case CmpOp::kLt:
      return a < b;
    case CmpOp::kLe:
      return a <= b;
    case CmpOp::kGt:
      return a > b;
    case CmpOp::kGe:
      return a >= b;
  }
  return false;
}

using Plan = CallModel::Plan;

/// One call's checks over its arguments; each method returns 0, or -1 with the
/// error raised.
class Checker {
 public:
  Checker(const CallModel& model, const Plan& plan, const TVMFFIAny* args, bool data_checked)
      : model_(model),
        plan_(plan),
        args_(args),
        data_checked_(data_checked),
        fn_(model.spec().name.c_str()),
        tensors_(model.callers().size(), nullptr),
        ints_(model.callers().size(), 0),
        s_(plan.symbols.size(), 0),
        by_(plan.symbols.size(), nullptr),
        bound_(plan.dtype_vars.size(), DLDataType{}),
        bound_by_(plan.dtype_vars.size(), nullptr) {}

  int run(OutputMeta* outputs) {
    if (kinds() || ranks_and_dtypes() || dtype_variables() || batch_groups() || steps() || layout() || constraints() ||
        passed()) {
      return -1;
    }
    return returned(outputs);
  }

 private:
  using Syms = SmallVector<SymVal, 8>;

  Syms syms(const std::vector<int>& slots) const {
    Syms out;
    for (int k : slots) out.push_back(SymVal{plan_.symbols[k].c_str(), s_[k], by_[k]});
    return out;
  }

  int unbound(int slot) const {
    return kjit_stub::fail_unbound(fn_, plan_.symbols[slot].c_str(), plan_.carriers[slot].c_str());
  }

  int guards(const std::vector<int>& slots) const {
    for (int k : slots) {
      if (by_[k] == nullptr) return unbound(k);
    }
    return 0;
  }

  /// The value of `p`, or -1 (fail_overflow naming `what`) when it leaves int64.
  int value(const Program& p, const std::string& what, const std::vector<int>& sym_slots, int64_t* out) const {
    if (p.evaluate(s_.data(), out)) return 0;
    Syms sv = syms(sym_slots);
    return kjit_stub::fail_overflow(fn_, what.c_str(), sv.data(), static_cast<int>(sv.size()));
  }

  int divisors(const std::vector<DivisorGuard>& guards) const {
    if (guards.empty()) return 0;
    for (const DivisorGuard& g : guards) {
      int64_t d = 0;
      if (value(g.divisor, g.overflow_what, g.divisor.symbols(), &d)) return -1;
      if (d == 0) {
        Syms sv = syms(g.divisor.symbols());
        return kjit_stub::fail_div_zero(fn_, g.where.c_str(), g.divisor.text().c_str(), sv.data(),
                                        static_cast<int>(sv.size()));
      }
    }
    return 0;
  }

  // ---- 2. argument kinds, scalar values ----
  int kinds() {
    for (size_t i = 0; i < model_.callers().size(); ++i) {
      const CallerParam& c = model_.callers()[i];
      const TVMFFIAny* a = &args_[i];
      const int index = static_cast<int>(i);
      if (c.tensor) {
        const bool optional = model_.spec().params[c.param].tensor.optional;
        if (optional && kjit_stub::is_none(a)) continue;
        tensors_[i] = kjit_stub::as_tensor(a);
        if (tensors_[i] == nullptr) {
          return kjit_stub::fail_tensor_kind(fn_, index, c.name.c_str(), c.type_text.c_str(), a, optional);
        }
      } else if (scalar(c, index, a)) {
        return -1;
      }
    }
    return 0;
  }

  /// A tensor (or an object tvm-ffi does not convert) where a scalar goes, in a call
  /// of a function that returns tensors: the caller may have passed what it returns.
  std::string note(const TVMFFIAny* a) const {
    const bool tensor_like =
        a->type_index == kTVMFFIDLTensorPtr || a->type_index == kTVMFFITensor || a->type_index == kTVMFFIOpaquePyObject;
    return tensor_like ? model_.returned_note() : std::string();
  }

  int scalar(const CallerParam& c, int i, const TVMFFIAny* a) {
    const ScalarType t = model_.spec().params[c.param].scalar;
    const char* name = c.name.c_str();
    const char* type = scalar_type_name(t);
    const bool int_or_bool = a->type_index == kTVMFFIInt || a->type_index == kTVMFFIBool;
    if (is_text(t)) {
      const bool bytes = t == ScalarType::kBytes;
      TVMFFIByteArray content;
      if (kjit_stub::text_bytes(a, bytes, &content)) return 0;
      return kjit_stub::fail_scalar_kind(fn_, i, name, type, bytes ? "bytes" : "a str", a, note(a).c_str());
    }
    if (is_complex(t) || is_float(t)) {
      if (a->type_index == kTVMFFIFloat || int_or_bool) return 0;
      return kjit_stub::fail_scalar_kind(fn_, i, name, type,
                                         is_complex(t) ? "a real number (tvm-ffi has no complex scalar)" : "a float", a,
                                         note(a).c_str());
    }
    const bool size = static_cast<size_t>(i) < plan_.size_callers.size() && plan_.size_callers[static_cast<size_t>(i)];
    if (size && a->type_index == kTVMFFIBool) {
      return kjit_stub::fail_scalar_kind(fn_, i, name, type, "an int", a, size_scalar_note(c.name).c_str());
    }
    if (!int_or_bool) {
      return kjit_stub::fail_scalar_kind(fn_, i, name, type, t == ScalarType::kBool ? "a bool" : "an int", a,
                                         note(a).c_str());
    }
    const int64_t v = a->v_int64;
    ints_[static_cast<size_t>(i)] = v;
    if (t == ScalarType::kBool) return v == 0 || v == 1 ? 0 : kjit_stub::fail_bool_value(fn_, i, name, v);
    if (t == ScalarType::kUInt64) {
      return v >= 0 ? 0 : kjit_stub::fail_int_range(fn_, i, name, type, v, "[0, 18446744073709551615]");
    }
    std::optional<IntRange> range = checked_int_range(t);
    if (!range || (v >= range->lo && v <= range->hi)) return 0;
    const std::string text = "[" + std::to_string(range->lo) + ", " + std::to_string(range->hi) + "]";
    return kjit_stub::fail_int_range(fn_, i, name, type, v, text.c_str());
  }

  // ---- 3. rank and dtype ----
  int ranks_and_dtypes() const {
    for (const Plan::TensorCheck& check : plan_.tensors) {
      const DLTensor* t = tensors_[static_cast<size_t>(check.caller)];
      if (t == nullptr) continue;
      const TensorSpec& spec = *check.spec;
      const char* name = model_.callers()[static_cast<size_t>(check.caller)].name.c_str();
      const int rank = static_cast<int>(spec.shape.size());
      // A group alone ([*batch]) takes any rank: a negative one is malformed, below.
      if (!spec.batch.empty() ? rank > 0 && t->ndim < rank : !spec.any_rank && t->ndim != rank) {
        return (spec.batch.empty() ? kjit_stub::fail_ndim : kjit_stub::fail_ndim_at_least)(
            fn_, check.caller, name, check.type_text.c_str(), rank, t->ndim);
      }
      if (const char* why = kjit_stub::malformed_tensor(t))
        return kjit_stub::fail_malformed(fn_, check.caller, name, t, why);
      if (spec.dtypes.empty()) continue;
      bool accepted = false;
      for (const DTypeInfo& d : spec.dtypes) {
        accepted = accepted || kjit_stub::dtype_accepted(t->dtype, d.dl.code, d.dl.bits) ||
                   (check.bits > 0 && kjit_stub::packs_values(t->dtype, d.dl.code, d.dl.bits));
      }
      if (!accepted) return kjit_stub::fail_dtype(fn_, check.caller, name, check.expected.c_str(), t->dtype);
      if (check.bits > 0 && t->ndim > 0 && kjit_stub::packed_extent(t, check.bits) < 0) {
        return kjit_stub::fail_packed_count(fn_, check.caller, name, t, check.bits, check.values.c_str());
      }
      if (check.bits > 0 && 8 % check.bits != 0 && t->ndim > 0 && !kjit_stub::packed_whole(t, check.bits)) {
        return kjit_stub::fail_packed_bits(fn_, check.caller, name, t, check.bits, check.values.c_str(),
                                           check.bits / 2);
      }
    }
    return 0;
  }

  // ---- 3b. dtype variables ----
  const char* caller_name(int c) const { return model_.callers()[static_cast<size_t>(c)].name.c_str(); }

  int dtype_variables() {
    for (size_t v = 0; v < plan_.dtype_vars.size(); ++v) {
      const Plan::DTypeVar& var = plan_.dtype_vars[v];
      for (int c : var.carriers) {
        const DLTensor* t = tensors_[static_cast<size_t>(c)];
        if (t == nullptr) continue;
        if (bound_by_[v] == nullptr) {
          bound_[v] = t->dtype;
          bound_by_[v] = caller_name(c);
        } else if (kjit_stub::dtype_word(t->dtype) != kjit_stub::dtype_word(bound_[v])) {
          return kjit_stub::fail_dtype_bound(fn_, c, caller_name(c), var.name.c_str(), bound_[v], bound_by_[v],
                                             t->dtype);
        }
      }
    }
    for (const Plan::DTypeOf& d : plan_.dtype_ofs) {
      const DLTensor *t = tensors_[static_cast<size_t>(d.caller)], *x = tensors_[static_cast<size_t>(d.source)];
      if (t != nullptr && x != nullptr && kjit_stub::dtype_word(t->dtype) != kjit_stub::dtype_word(x->dtype)) {
        return kjit_stub::fail_dtype_bound(fn_, d.caller, caller_name(d.caller), d.label.c_str(), x->dtype,
                                           caller_name(d.source), t->dtype);
      }
    }
    for (const Plan::VarScalar& sc : plan_.var_scalars) {
      const size_t v = static_cast<size_t>(sc.var);
      const Plan::DTypeVar& var = plan_.dtype_vars[v];
      if (bound_by_[v] == nullptr) {
        return kjit_stub::fail_dtype_unbound(fn_, sc.caller, caller_name(sc.caller), var.name.c_str(),
                                             var.carrier_names.c_str());
      }
      const int64_t value = ints_[static_cast<size_t>(sc.caller)];
      if (sc.integral && !kjit_stub::int_fits_dtype(value, bound_[v])) {
        return kjit_stub::fail_dtype_range(fn_, sc.caller, caller_name(sc.caller), var.name.c_str(), bound_[v], value);
      }
    }
    return 0;
  }

  // ---- 3c. batch groups ----
  int batch_groups() {
    if (plan_.batch_groups.empty()) return 0;
    group_dims_.assign(plan_.batch_groups.size(), nullptr);
    group_len_.assign(plan_.batch_groups.size(), 0);
    group_by_.assign(plan_.batch_groups.size(), nullptr);
    for (size_t g = 0; g < plan_.batch_groups.size(); ++g) {
      for (const auto& [c, dims] : plan_.batch_groups[g].carriers) {
        const DLTensor* t = tensors_[static_cast<size_t>(c)];
        if (t == nullptr) continue;
        const int lead = t->ndim - dims;
        if (group_by_[g] == nullptr) {
          group_dims_[g] = t->shape;
          group_len_[g] = lead;
          group_by_[g] = caller_name(c);
        } else if (!kjit_stub::same_dims(t->shape, lead, group_dims_[g], group_len_[g])) {
          return kjit_stub::fail_batch(fn_, c, caller_name(c), plan_.batch_groups[g].name.c_str(), group_dims_[g],
                                       group_len_[g], group_by_[g], t->shape, lead);
        }
      }
    }
    // The later checks read each batched tensor's declared dims; layout() the whole.
    whole_.assign(tensors_.data(), tensors_.data() + tensors_.size());
    views_.resize(plan_.batched.size());
    for (size_t k = 0; k < plan_.batched.size(); ++k) {
      const auto& [c, dims] = plan_.batched[k];
      const DLTensor* t = tensors_[static_cast<size_t>(c)];
      if (t == nullptr) continue;
      views_[k] = kjit_stub::trailing_dims(t, dims);
      tensors_[static_cast<size_t>(c)] = &views_[k];
    }
    return 0;
  }

  // ---- 4. shapes and strides ----
  int steps() {
    for (const Plan::Step& step : plan_.steps) {
      if (run_step(step)) return -1;
    }
    return 0;
  }

  int64_t step_value(const Plan::Step& step, const DLTensor* t) const {
    switch (step.field) {
      case BindingStep::Field::kShape:
        return step.packed_dim ? kjit_stub::packed_extent(t, step.bits) : t->shape[step.dim];
      case BindingStep::Field::kStride:
        return kjit_stub::stride_of(t, step.dim);
      case BindingStep::Field::kScalar:
        break;
    }
    return ints_[static_cast<size_t>(step.caller)];
  }

  int run_step(const Plan::Step& step) {
    const DLTensor* t = tensors_[static_cast<size_t>(step.caller)];
    if (step.in_optional && t == nullptr) return 0;
    if (guards(step.guards) || divisors(step.divisors)) return -1;
    const int64_t v = step_value(step, t);
    switch (step.action) {
      case BindingStep::Action::kBind:
        bind(step, v);
        return 0;
      case BindingStep::Action::kCheckOrBind:
        if (by_[step.unknown] == nullptr) {
          bind(step, v);
          return 0;
        }
        return check(step, t, v);
      case BindingStep::Action::kSolve:
        return solve(step, v) || check(step, t, v) ? -1 : 0;
      case BindingStep::Action::kCheckOrSolve:
        if (by_[step.unknown] == nullptr && solve(step, v)) return -1;
        return check(step, t, v);
      case BindingStep::Action::kCheck:
        return check(step, t, v);
    }
    return 0;
  }

  void bind(const Plan::Step& step, int64_t v) {
    s_[step.unknown] = v;
    by_[step.unknown] = step.label.c_str();
  }

  int check(const Plan::Step& step, const DLTensor* t, int64_t v) const {
    // Strides of dims with extent 0 or 1 are arbitrary (torch), so they never fail.
    if (step.field == BindingStep::Field::kStride && t->shape[step.dim] <= 1) return 0;
    int64_t expected = 0;
    if (value(step.expr, step.check_what, step.expr.symbols(), &expected)) return -1;
    if (v == expected) return 0;
    Syms sv = syms(step.expr.symbols());
    const int n = static_cast<int>(sv.size());
    const char* expr = step.expr.text().c_str();
    if (step.packed_dim) {
      return kjit_stub::fail_packed_field(fn_, step.caller, step.name.c_str(), step.field_text.c_str(), expr, expected,
                                          sv.data(), n, v, t, step.bits, step.values.c_str());
    }
    return kjit_stub::fail_field(fn_, step.caller, step.name.c_str(), step.field_text.c_str(), expr, expected,
                                 sv.data(), n, v);
  }

  /// `v == coef * unknown + rest`: coef == 0 (n*k with n = 0) fixes nothing, and the
  /// symbol stays open for a later argument.
  int solve(const Plan::Step& step, int64_t v) {
    bool ovf = false;
    int64_t coef = 0, rest = 0;
    ovf = !step.coef.evaluate(s_.data(), &coef) || !step.rest.evaluate(s_.data(), &rest);
    rest = kjit_stub::kjit_sub(v, rest, ovf);
    const int64_t q = coef == 0 ? 0 : kjit_stub::kjit_floordiv(rest, coef, ovf);
    const int64_t m = coef == 0 ? rest : kjit_stub::kjit_floormod(rest, coef, ovf);
    Syms sv = syms(step.others);
    const int n = static_cast<int>(sv.size());
    if (ovf) return kjit_stub::fail_overflow(fn_, step.solve_what.c_str(), sv.data(), n);
    if (m != 0 || q < 0) {
      return kjit_stub::fail_solve(fn_, step.caller, step.name.c_str(), step.field_text.c_str(),
                                   step.expr.text().c_str(), plan_.symbols[step.unknown].c_str(), sv.data(), n, v);
    }
    if (coef != 0) bind(step, q);
    return 0;
  }

  // ---- 5. layout and placement ----
  int layout() const {
    DLDevice device[2] = {{kDLCPU, 0}, {kDLCUDA, 0}};  // by DeviceKind: cpu, cuda
    const char* device_by[2] = {nullptr, nullptr};
    for (const Plan::TensorCheck& check : plan_.tensors) {
      const DLTensor* t =
          whole_.empty() ? tensors_[static_cast<size_t>(check.caller)] : whole_[static_cast<size_t>(check.caller)];
      if (t == nullptr) continue;
      const TensorSpec& spec = *check.spec;
      const int i = check.caller;
      const char* name = model_.callers()[static_cast<size_t>(i)].name.c_str();
      if (check.bits > 0 && t->ndim > 0 && t->strides != nullptr && t->shape[t->ndim - 1] > 1 &&
          t->strides[t->ndim - 1] != 1) {
        return kjit_stub::fail_packed_stride(fn_, i, name, t, check.values.c_str());
      }
      if (!spec.strided && spec.strides.empty()) {
        const int d = kjit_stub::first_noncompact_dim(t);
        if (d >= 0) return kjit_stub::fail_compact(fn_, i, name, t, d);
      }
      const int64_t bytes = kjit_stub::element_bytes(t->dtype);
      if (t->byte_offset != 0 && (bytes == 0 || t->byte_offset % static_cast<uint64_t>(bytes) != 0)) {
        return kjit_stub::fail_byte_offset(fn_, i, name, t);
      }
      if (data_checked_ && spec.align > 0 && t->data != nullptr &&
          (reinterpret_cast<uintptr_t>(t->data) + t->byte_offset) % static_cast<uintptr_t>(spec.align) != 0) {
        return kjit_stub::fail_align(fn_, i, name, static_cast<const char*>(t->data) + t->byte_offset, spec.align);
      }
      const bool cuda = spec.device == DeviceKind::kCUDA;
      if (cuda ? t->device.device_type != kDLCUDA
               : t->device.device_type != kDLCPU && t->device.device_type != kDLCUDAHost) {
        return kjit_stub::fail_device_type(fn_, i, name, cuda ? "cuda" : "cpu", t->device);
      }
      if (device_by[cuda] == nullptr) {
        device[cuda] = t->device;
        device_by[cuda] = name;
      } else if (t->device.device_id != device[cuda].device_id) {
        return kjit_stub::fail_device_id(fn_, i, name, device[cuda], device_by[cuda], t->device);
      }
      if (data_checked_ && t->data == nullptr && !kjit_stub::has_zero_extent(t)) {
        return kjit_stub::fail_null_data(fn_, i, name);
      }
    }
    return 0;
  }

  // ---- 6. constraints, 6b. symbols passed to the kernel ----
  int constraints() const {
    if (guards(plan_.constraint_guards)) return -1;
    for (const Plan::ConstraintCheck& c : plan_.constraints) {
      int64_t lhs = 0, rhs = 0;
      if (divisors(c.divisors) || value(c.lhs, c.lhs_what, c.symbols, &lhs) ||
          value(c.rhs, c.rhs_what, c.symbols, &rhs)) {
        return -1;
      }
      if (compare(c.op, lhs, rhs)) continue;
      Syms sv = syms(c.symbols);
      return kjit_stub::fail_constraint(fn_, c.text.c_str(), sv.data(), static_cast<int>(sv.size()));
    }
    return 0;
  }

  int passed() const {
    if (guards(plan_.passed_guards)) return -1;
    for (const Plan::PassedSymbol& p : plan_.passed) {
      const int64_t v = s_[p.slot];
      if (v >= p.range.lo && v <= p.range.hi) continue;
      const std::string range = "[" + std::to_string(p.range.lo) + ", " + std::to_string(p.range.hi) + "]";
      return kjit_stub::fail_symbol_range(fn_, p.name.c_str(), p.type, v, by_[p.slot], range.c_str());
    }
    return 0;
  }

  // ---- the returned tensors ----
  int returned(OutputMeta* outputs) const {
    DLDevice device{kDLCPU, 0};
    bool device_known = false;
    for (const DLTensor* t : tensors_) {
      if (t != nullptr && !device_known) {
        device = t->device;
        device_known = true;
      }
    }
    for (size_t k = 0; k < plan_.returned.size(); ++k) {
      const Plan::ReturnedTensor& r = plan_.returned[k];
      OutputMeta& out = outputs[k];
      out.shape.clear();
      if (r.batch >= 0) {
        const size_t g = static_cast<size_t>(r.batch);
        if (group_by_[g] == nullptr) {
          return kjit_stub::fail_batch_unbound_returned(fn_, r.name.c_str(), plan_.batch_groups[g].name.c_str(),
                                                        plan_.batch_groups[g].carrier_names.c_str());
        }
        for (int d = 0; d < group_len_[g]; ++d) out.shape.push_back(group_dims_[g][d]);
      }
      for (size_t d = 0; d < r.dims.size(); ++d) {
        const Program& dim = r.dims[d];
        const std::string& what = r.what[d];
        int64_t extent = 0;
        if (guards(dim.symbols()) || divisors(r.divisors[d]) || value(dim, what, dim.symbols(), &extent)) return -1;
        if (extent < 0) {
          Syms sv = syms(dim.symbols());
          return kjit_stub::fail_negative_extent(fn_, what.c_str(), extent, sv.data(), static_cast<int>(sv.size()));
        }
        out.shape.push_back(extent);
      }
      if (r.dtype_of >= 0) {
        const DLTensor* source = tensors_[static_cast<size_t>(r.dtype_of)];
        if (source == nullptr) {
          return kjit_stub::fail_dtype_source_none(fn_, r.name.c_str(),
                                                   model_.callers()[static_cast<size_t>(r.dtype_of)].name.c_str());
        }
        if (find_dtype(source->dtype) == nullptr) {
          return kjit_stub::fail_dtype_source_unknown(
              fn_, r.name.c_str(), model_.callers()[static_cast<size_t>(r.dtype_of)].name.c_str(), source->dtype);
        }
        out.dtype = source->dtype;
      } else if (r.dtype_var >= 0) {
        const size_t v = static_cast<size_t>(r.dtype_var);
        if (bound_by_[v] == nullptr) {
          return kjit_stub::fail_dtype_unbound_returned(fn_, r.name.c_str(), plan_.dtype_vars[v].name.c_str(),
                                                        plan_.dtype_vars[v].carrier_names.c_str());
        }
        out.dtype = bound_[v];
      } else {
        out.dtype = r.dtype;
      }
      out.device = device_known ? device : DLDevice{static_cast<DLDeviceType>(r.device), 0};
    }
    return 0;
  }

  const CallModel& model_;
  const Plan& plan_;
  const TVMFFIAny* args_;
  bool data_checked_;
  const char* fn_;
  SmallVector<const DLTensor*, 8> tensors_;  ///< per caller: its tensor, nullptr for None and scalars
  SmallVector<int64_t, 8> ints_;             ///< per caller: an integer scalar's value
  SmallVector<int64_t, 16> s_;               ///< per symbol: its value
  SmallVector<const char*, 16> by_;          ///< per symbol: what bound it, nullptr while unbound
  SmallVector<DLDataType, 4> bound_;         ///< per dtype variable: its dtype in this call
  SmallVector<const char*, 4> bound_by_;     ///< per dtype variable: the tensor that bound it, nullptr while unbound
  // Batch groups (only when the spec names one): per group its bound leading dims,
  // their count and the tensor that bound them; the callers' tensors as passed
  // (tensors_ then holds views of batched ones' declared dims, kept in views_).
  std::vector<const int64_t*> group_dims_;
  std::vector<int> group_len_;
  std::vector<const char*> group_by_;
  std::vector<const DLTensor*> whole_;
  std::vector<DLTensor> views_;
};

}  // namespace

std::shared_ptr<const CallModel::Plan> CallModel::make_plan() const { return PlanBuilder(*this).build(); }

int CallModel::infer(const TVMFFIAny* args, bool data_checked, OutputMeta* outputs) const {
  return Checker(*this, *plan_, args, data_checked).run(outputs);
}

int CallModel::check_data(const TVMFFIAny* args) const {
  const char* fn = spec_.name.c_str();
  for (const Plan::TensorCheck& check : plan_->tensors) {
    const TVMFFIAny* a = &args[check.caller];
    if (kjit_stub::is_none(a)) continue;
    const DLTensor* t = kjit_stub::as_tensor(a);
    if (t == nullptr) continue;  // infer() named it
    const char* name = callers_[static_cast<size_t>(check.caller)].name.c_str();
    const int64_t align = check.spec->align;
    if (align > 0 && t->data != nullptr &&
        (reinterpret_cast<uintptr_t>(t->data) + t->byte_offset) % static_cast<uintptr_t>(align) != 0) {
      return kjit_stub::fail_align(fn, check.caller, name, static_cast<const char*>(t->data) + t->byte_offset, align);
    }
    if (t->data == nullptr && !kjit_stub::has_zero_extent(t)) return kjit_stub::fail_null_data(fn, check.caller, name);
  }
  return 0;
}

CallModel::SymbolSource CallModel::symbol_source(const std::string& symbol) const {
  auto it = plan_->sources.find(symbol);
  return it == plan_->sources.end() ? SymbolSource{} : it->second;
}

std::vector<std::pair<int, int>> CallModel::batch_sources(const std::string& group) const {
  for (const Plan::BatchGroup& g : plan_->batch_groups) {
    if (g.name == group) return g.carriers;
  }
  return {};
}

}  // namespace kjit
