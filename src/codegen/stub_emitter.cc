// Emits one function's checked safe call from its spec and binding plan.
//
// The stub reads in the order a user debugs in: count, kinds, rank and dtype,
// shapes and strides (binding symbols), layout and placement, constraints, call.
#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "codegen/cpp_text.h"
#include "kjit/codegen.h"
#include "kjit/errors.h"
#include "signature/binding_plan.h"
#include "signature/describe.h"

namespace kjit {
namespace {

std::string tensor_var(const Param& p) { return "t_" + p.name; }
std::string scalar_var(const Param& p) { return "v_" + p.name; }

/// `d` with one lane as the word the prelude's dtype_word() makes of it.
std::string dtype_word_text(const DTypeInfo& d) {
  return "dtype_word(DLDataType{" + std::to_string(d.dl.code) + ", " + std::to_string(d.dl.bits) + ", 1})";
}

/// The DLPack codes a dtype check accepts for `d`: float8 formats accept their
/// relatives' codes (one set of bits, several names across frameworks).
std::vector<int> accepted_codes(const DTypeInfo& d) {
  if (d.dl.code == kDLFloat8_e4m3 || d.dl.code == kDLFloat8_e4m3fn || d.dl.code == kDLFloat8_e4m3fnuz)
    return {kDLFloat8_e4m3, kDLFloat8_e4m3fn, kDLFloat8_e4m3fnuz};
  if (d.dl.code == kDLFloat8_e5m2 || d.dl.code == kDLFloat8_e5m2fnuz) return {kDLFloat8_e5m2, kDLFloat8_e5m2fnuz};
  return {d.dl.code};
}

/// Whether exactly one DLDataType passes `d`'s dtype check (bool and the float8
/// formats accept several).
bool is_one_dtype(const DTypeInfo& d) { return d.dl.code != kDLBool && accepted_codes(d).size() == 1; }

/// The dtype check of `d` on tensor variable `t`: one word compare when exactly one
/// DLDataType passes, else the prelude's dtype_accepted (bool's tolerance, float8
/// relatives), which the call model applies too.
std::string dtype_predicate(const DTypeInfo& d, const std::string& t) {
  std::string dt = t + "->dtype";
  if (is_one_dtype(d)) return "(dtype_word(" + dt + ") == " + dtype_word_text(d) + ")";
  return "dtype_accepted(" + dt + ", " + std::to_string(d.dl.code) + ", " + std::to_string(d.dl.bits) + ")";
}

/// The range of an integer scalar narrower than int64 as C text ({lo, hi}); nullopt
/// for int64 and non-integers.
std::optional<std::pair<std::string, std::string>> int_range_text(ScalarType t) {
  std::optional<IntRange> r = checked_int_range(t);
  if (!r) return std::nullopt;
  return std::make_pair(std::to_string(r->lo), std::to_string(r->hi));
}

/// Bytes that carry a packed tensor's values (the prelude's packs_values).
std::string carrier_predicate(const TensorSpec& t, const std::string& var) {
  std::string out;
  for (const DTypeInfo& d : t.dtypes) {
    out += (out.empty() ? "" : " || ") + std::string("packs_values(") + var + "->dtype, " + std::to_string(d.dl.code) +
           ", " + std::to_string(d.dl.bits) + ")";
  }
  return out;
}

/// The dtype_word a tensor must hold when its dtype check accepts exactly one
/// DLDataType, else "".
std::string single_dtype_word(const TensorSpec& t) {
  if (t.dtypes.size() != 1 || is_packed(t) || !is_one_dtype(t.dtypes[0])) return "";
  return dtype_word_text(t.dtypes[0]);
}

std::string element_type(const TensorSpec& t) {
  if (t.dtypes.size() == 1 && t.dtypes[0].cpp_type != nullptr) return t.dtypes[0].cpp_type;
  return "void";
}

class StubEmitter {
 public:
  StubEmitter(const FunctionSpec& spec, const StubOptions& options)
      : spec_(spec), plan_(make_binding_plan(spec)), options_(options) {
    int i = 0;
    for (const Param* p : spec_.call_args()) arg_index_[p->name] = i++;
  }

  std::string emit() {
    header();
    count_check();
    decode_args();
    rank_and_dtype();
    dtype_variables();
    batch_groups();
    shapes_and_strides();
    layout_and_placement();
    constraints();
    passed_symbols();
    call();
    return out_.str();
  }

 private:
  // ---- sections ----
  void header() {
    // The checks live in one function so the XLA handler (ctx != nullptr: its
    // stream, complex attrs) runs exactly the checks the tvm-ffi safe call runs.
    out_ << "// " << spec_.name << "(" << to_string(spec_) << ")\n"
         << (options_.shared_with_xla ? "static __attribute__((noinline)) int "
                                      : "static inline __attribute__((always_inline)) int ")
         << checked_function_name(spec_.name) << "(const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result,\n"
         << "    [[maybe_unused]] const kjit_stub::CallContext* ctx) {\n"
         << "  using namespace kjit_stub;\n"
         << "  static const char kFn[] = " << c_string(spec_.name) << ";\n";
  }

  void count_check() {
    size_t n = spec_.call_args().size();
    std::string sig;
    for (const Param* p : spec_.call_args()) sig += (sig.empty() ? "" : ", ") + to_string(*p);
    out_ << "\n  // 1. argument count\n"
         << "  if (num_args != " << n << ") return fail_count(kFn, " << c_string(sig) << ", " << n << ", num_args);\n";
  }

  void decode_args() {
    out_ << "\n  // 2. argument kinds (tensors: exactly Tensor or DLTensor*), scalar values\n";
    for (const Param* p : spec_.call_args()) {
      int i = arg_index_[p->name];
      std::string a = "&args[" + std::to_string(i) + "]";
      if (p->kind == ParamKind::kTensor) {
        decode_tensor(*p, i, a);
      } else {
        decode_scalar(*p, i, a);
      }
    }
  }

  void decode_tensor(const Param& p, int i, const std::string& a) {
    std::string v = tensor_var(p);
    std::string fail = "return fail_tensor_kind(kFn, " + std::to_string(i) + ", " + c_string(p.name) + ", " +
                       c_string(param_type_text(p)) + ", " + a + ", " + (p.tensor.optional ? "true" : "false") + ");";
    if (p.tensor.optional) {
      out_ << "  const DLTensor* " << v << " = nullptr;\n"
           << "  if (!is_none(" << a << ")) {\n"
           << "    " << v << " = as_tensor(" << a << ");\n"
           << "    if (" << v << " == nullptr) " << fail << "\n"
           << "  }\n";
    } else {
      // as_tensor() is nullptr for None too; fail_tensor_kind tells the two apart.
      out_ << "  const DLTensor* " << v << " = as_tensor(" << a << ");\n"
           << "  if (" << v << " == nullptr) " << fail << "\n";
    }
  }

  void decode_scalar(const Param& p, int i, const std::string& a) {
    std::string v = scalar_var(p);
    std::string idx = std::to_string(i);
    std::string name = c_string(p.name);
    std::string type = c_string(scalar_type_name(p.scalar));
    std::string ti = "args[" + idx + "].type_index";
    std::string int_or_bool = ti + " == kTVMFFIInt || " + ti + " == kTVMFFIBool";
    if (is_text(p.scalar)) {
      bool bytes = p.scalar == ScalarType::kBytes;
      out_ << "  TVMFFIByteArray " << v << ";\n"
           << "  if (!text_bytes(" << a << ", " << (bytes ? "true" : "false") << ", &" << v
           << ")) return fail_scalar_kind(kFn, " << idx << ", " << name << ", " << type << ", "
           << (bytes ? "\"bytes\"" : "\"a str\"") << ", " << a << ");\n";
      return;
    }
    if (is_complex(p.scalar)) {
      // tvm-ffi has no complex scalar: real numbers only, except from the XLA
      // handler, which passes a std::complex<double> by pointer.
      out_ << "  std::complex<double> " << v << ";\n"
           << "  if (" << ti << " == kTVMFFIFloat) " << v << " = args[" << idx << "].v_float64;\n"
           << "  else if (" << int_or_bool << ") " << v << " = static_cast<double>(args[" << idx << "].v_int64);\n"
           << "  else if (ctx != nullptr && " << ti << " == kTVMFFIOpaquePtr) " << v
           << " = {static_cast<const WideValue*>(args[" << idx << "].v_ptr)->re, static_cast<const WideValue*>(args["
           << idx << "].v_ptr)->im};\n"
           << "  else return fail_scalar_kind(kFn, " << idx << ", " << name << ", " << type
           << ", \"a real number (tvm-ffi has no complex scalar)\", " << a << ");\n";
      return;
    }
    if (is_float(p.scalar)) {
      out_ << "  double " << v << ";\n"
           << "  if (" << ti << " == kTVMFFIFloat) " << v << " = args[" << idx << "].v_float64;\n"
           << "  else if (" << int_or_bool << ") " << v << " = static_cast<double>(args[" << idx << "].v_int64);\n"
           << "  else return fail_scalar_kind(kFn, " << idx << ", " << name << ", " << type << ", \"a float\", " << a
           << ");\n";
      return;
    }
    if (p.scalar == ScalarType::kUInt64) {
      // Values above INT64_MAX only come from the XLA handler, by pointer; the
      // int64 view saturates (it only matters if the scalar also names a symbol).
      out_ << "  int64_t " << v << ";\n  uint64_t u_" << p.name << ";\n"
           << "  if (" << int_or_bool << ") { " << v << " = args[" << idx << "].v_int64; u_" << p.name
           << " = static_cast<uint64_t>(" << v << "); }\n"
           << "  else if (ctx != nullptr && " << ti << " == kTVMFFIOpaquePtr) { u_" << p.name
           << " = static_cast<const WideValue*>(args[" << idx << "].v_ptr)->u64; " << v << " = INT64_MAX; }\n"
           << "  else return fail_scalar_kind(kFn, " << idx << ", " << name << ", " << type << ", \"an int\", " << a
           << ");\n"
           << "  if (" << v << " < 0) return fail_int_range(kFn, " << idx << ", " << name << ", " << type << ", " << v
           << ", \"[0, 18446744073709551615]\");\n";
      return;
    }
    if (is_size_scalar(plan_, static_cast<size_t>(&p - spec_.params.data()))) {
      out_ << "  if (" << ti << " == kTVMFFIBool) return fail_scalar_kind(kFn, " << idx << ", " << name << ", " << type
           << ", \"an int\", " << a << ", " << c_string(size_scalar_note(p.name)) << ");\n";
    }
    out_ << "  if (!(" << int_or_bool << ")) return fail_scalar_kind(kFn, " << idx << ", " << name << ", " << type
         << ", " << (p.scalar == ScalarType::kBool ? "\"a bool\"" : "\"an int\"") << ", " << a << ");\n"
         << "  const int64_t " << v << " = args[" << idx << "].v_int64;\n";
    if (p.scalar == ScalarType::kBool) {
      out_ << "  if (" << v << " != 0 && " << v << " != 1) return fail_bool_value(kFn, " << idx << ", " << name << ", "
           << v << ");\n";
      return;
    }
    auto range_text = int_range_text(p.scalar);
    if (!range_text) return;
    const auto& [lo, hi] = *range_text;
    std::string cond = v + " < INT64_C(" + lo + ") || " + v + " > INT64_C(" + hi + ")";
    std::string range = "[" + lo + ", " + hi + "]";
    out_ << "  if (" << cond << ") return fail_int_range(kFn, " << idx << ", " << name << ", " << type << ", " << v
         << ", " << c_string(range) << ");\n";
  }

  void rank_and_dtype() {
    out_ << "\n  // 3. rank and dtype\n";
    for (const Param* p : spec_.call_args()) {
      if (p->kind != ParamKind::kTensor) continue;
      int i = arg_index_[p->name];
      std::string t = tensor_var(*p);
      std::string idx = std::to_string(i);
      std::string body;
      const bool batched = !p->tensor.batch.empty();
      if (!p->tensor.any_rank && !(batched && p->tensor.shape.empty()))
        body = "  if (" + t + "->ndim " + (batched ? "<" : "!=") + " " + std::to_string(p->tensor.shape.size()) +
               ") return " + (batched ? "fail_ndim_at_least" : "fail_ndim") + "(kFn, " + idx + ", " +
               c_string(p->name) + ", " + c_string(param_type_text(*p)) + ", " +
               std::to_string(p->tensor.shape.size()) + ", " + t + "->ndim);\n";
      // A fixed rank, checked just above, lets the check run without a loop.
      // With one dtype to match, the fast test compares the dtype word the dtype
      // check below compares too, instead of testing bits and lanes for zero.
      const std::string word = single_dtype_word(p->tensor);
      const std::string check = p->tensor.any_rank || batched
                                    ? "malformed_tensor(" + t + ")"
                                    : "malformed_ranked<" + std::to_string(p->tensor.shape.size()) + ">(" + t +
                                          (word.empty() ? "" : ", " + word) + ")";
      body += "  if (const char* why = " + check + ") return fail_malformed(kFn, " + idx + ", " + c_string(p->name) +
              ", " + t + ", why);\n";
      if (!p->tensor.dtypes.empty()) {
        std::string pred;
        for (const DTypeInfo& d : p->tensor.dtypes) pred += (pred.empty() ? "" : " || ") + dtype_predicate(d, t);
        if (is_packed(p->tensor)) pred += " || " + carrier_predicate(p->tensor, t);
        if (p->tensor.dtypes.size() > 1 || is_packed(p->tensor)) pred = "(" + pred + ")";
        body += "  if (!" + pred + ")\n    return fail_dtype(kFn, " + idx + ", " + c_string(p->name) + ", " +
                c_string(expected_dtype_text(p->tensor)) + ", " + t + "->dtype);\n";
        body += packed_count_checks(*p, idx);
      }
      emit_guarded(*p, body);
    }
  }

  /// 3b. dtype variables: each bound by the first tensor present that carries it
  /// (spec_detail::dtype_var_carriers' order), the others checked against it; a
  /// dtype(x) tensor checked against x; a scalar typed by a variable converted to
  /// the bound dtype (rounded, or range-checked).
  void dtype_variables() {
    bool any = !spec_.dtype_vars.empty();
    for (const Param* p : spec_.call_args()) any = any || is_dtype_of_input(*p);
    if (!any) return;
    out_ << "\n  // 3b. dtype variables: bound by the first tensor that carries one, the rest checked\n";
    for (const DTypeVar& v : spec_.dtype_vars) {
      if (bind_dtype_var(v)) always_bound_.insert(v.name);
    }
    for (const Param* p : spec_.call_args()) {
      if (is_dtype_of_input(*p)) check_dtype_of(*p);
      if (p->kind == ParamKind::kScalar && !p->scalar_var.empty())
        convert_to_dtype_var(*p, always_bound_.count(p->scalar_var) != 0);
    }
  }

  static bool is_dtype_of_input(const Param& p) {
    return p.kind == ParamKind::kTensor && !p.tensor.dtype_of.empty() && !p.tensor.returned;
  }

  /// Binds `v` from its carriers in order; returns whether a required carrier binds
  /// it on every call (then later carriers only compare, and no "unbound" check).
  bool bind_dtype_var(const DTypeVar& v) {
    const std::string dt = "tv_" + v.name, by = "tvby_" + v.name;
    out_ << "  [[maybe_unused]] DLDataType " << dt << "{};\n  [[maybe_unused]] const char* " << by << " = nullptr;\n";
    return bind_from_carriers(dtype_var_carriers(spec_, v.name), by, [&](const Param& c) {
      const std::string t = tensor_var(c), name = c_string(c.name);
      return CarrierCode{{dt + " = " + t + "->dtype;", by + " = " + name + ";"},
                         "dtype_word(" + t + "->dtype) != dtype_word(" + dt + ")",
                         "return fail_dtype_bound(kFn, " + std::to_string(arg_index_.at(c.name)) + ", " + name + ", " +
                             c_string(v.name) + ", " + dt + ", " + by + ", " + t + "->dtype);"};
    });
  }

  /// What one carrier of a bound value emits: the statements binding the value from
  /// it, the test that it differs from the bound value, and the failure's return.
  struct CarrierCode {
    std::vector<std::string> bind;
    std::string differs, fail;
  };

  /// Binds a value (a dtype variable's dtype, a batch group's dims) from its
  /// carriers in order: the first present binds it (`by` says which), the others
  /// compare. Returns whether a required carrier binds it on every call; until one
  /// has, a carrier tests `by` at run time.
  bool bind_from_carriers(const std::vector<const Param*>& carriers, const std::string& by,
                          const std::function<CarrierCode(const Param&)>& code) {
    bool bound = false, first = true;
    for (const Param* c : carriers) {
      const CarrierCode k = code(*c);
      std::string bind2, bind4;
      for (const std::string& line : k.bind) {
        bind2 += "  " + line + "\n";
        bind4 += "    " + line + "\n";
      }
      if (bound) {
        emit_guarded(*c, "  if (" + k.differs + ")\n    " + k.fail + "\n");
      } else if (first && !c->tensor.optional) {
        out_ << bind2;
      } else {
        emit_guarded(*c, "  if (" + by + " == nullptr) {\n" + bind4 + "  } else if (" + k.differs + ") {\n    " +
                             k.fail + "\n  }\n");
      }
      bound = bound || !c->tensor.optional;
      first = false;
    }
    return bound;
  }

  /// dtype(x) on an input: its dtype equals x's when both are present.
  void check_dtype_of(const Param& p) {
    const Param& x = *std::find_if(spec_.params.begin(), spec_.params.end(),
                                   [&](const Param& q) { return q.name == p.tensor.dtype_of; });
    const std::string t = tensor_var(p), tx = tensor_var(x);
    out_ << "  if (";
    if (p.tensor.optional) out_ << t << " != nullptr && ";
    if (x.tensor.optional) out_ << tx << " != nullptr && ";
    out_ << "dtype_word(" << t << "->dtype) != dtype_word(" << tx << "->dtype))\n    return fail_dtype_bound(kFn, "
         << arg_index_.at(p.name) << ", " << c_string(p.name) << ", " << c_string("dtype(" + x.name + ")") << ", " << tx
         << "->dtype, " << c_string(x.name) << ", " << t << "->dtype);\n";
  }

  /// A scalar typed by a dtype variable: rounded to the bound float dtype, or
  /// range-checked against the bound integer dtype.
  void convert_to_dtype_var(const Param& p, bool always_bound) {
    const std::string var = p.scalar_var, v = scalar_var(p), idx = std::to_string(arg_index_.at(p.name));
    if (!always_bound) {
      out_ << "  if (tvby_" << var << " == nullptr) return fail_dtype_unbound(kFn, " << idx << ", " << c_string(p.name)
           << ", " << c_string(var) << ", " << c_string(dtype_var_carrier_names(spec_, var)) << ");\n";
    }
    if (p.scalar == ScalarType::kFloat64) {
      out_ << "  " << v << " = round_to_dtype(" << v << ", tv_" << var << ");\n";
    } else {
      out_ << "  if (!int_fits_dtype(" << v << ", tv_" << var << ")) return fail_dtype_range(kFn, " << idx << ", "
           << c_string(p.name) << ", " << c_string(var) << ", tv_" << var << ", " << v << ");\n";
    }
  }

  /// 3c. batch groups: each bound by the first tensor present that names it (as
  /// dtype variables), the others' leading dims compared with it; then each such
  /// tensor's later checks read its declared dims only (full_<name> keeps the
  /// tensor for the layout checks and the kernel).
  void batch_groups() {
    const std::vector<std::string> groups = kjit::batch_groups(spec_);
    if (groups.empty()) return;
    out_ << "\n  // 3c. batch groups: leading dims, bound by the first tensor that names the group, the rest checked\n";
    for (const std::string& g : groups) bind_batch_group(g);
    for (const Param* p : spec_.call_args()) {
      if (p->kind != ParamKind::kTensor || p->tensor.batch.empty()) continue;
      const std::string t = tensor_var(*p), k = std::to_string(p->tensor.shape.size());
      out_ << "  const DLTensor* full_" << p->name << " = " << t << ";\n";
      if (p->tensor.optional) {
        out_ << "  DLTensor tail_" << p->name << "{};\n";
        emit_guarded(*p, "  tail_" + p->name + " = trailing_dims(" + t + ", " + k + ");\n  " + t + " = &tail_" +
                             p->name + ";\n");
      } else {
        out_ << "  DLTensor tail_" << p->name << " = trailing_dims(" << t << ", " << k << ");\n  " << t << " = &tail_"
             << p->name << ";\n";
      }
    }
  }

  void bind_batch_group(const std::string& g) {
    const std::string dims = "g_" + g, len = "gn_" + g, by = "gby_" + g;
    out_ << "  [[maybe_unused]] const int64_t* " << dims << " = nullptr;\n  [[maybe_unused]] int " << len
         << " = 0;\n  [[maybe_unused]] const char* " << by << " = nullptr;\n";
    bind_from_carriers(batch_carriers(spec_, g), by, [&](const Param& c) {
      const std::string t = tensor_var(c), name = c_string(c.name);
      const std::string lead =
          c.tensor.shape.empty() ? t + "->ndim" : t + "->ndim - " + std::to_string(c.tensor.shape.size());
      return CarrierCode{{dims + " = " + t + "->shape;", len + " = " + lead + ";", by + " = " + name + ";"},
                         "!same_dims(" + t + "->shape, " + lead + ", " + dims + ", " + len + ")",
                         "return fail_batch(kFn, " + std::to_string(arg_index_.at(c.name)) + ", " + name + ", " +
                             c_string(g) + ", " + dims + ", " + len + ", " + by + ", " + t + "->shape, " + lead + ");"};
    });
  }

  /// The variable holding a tensor as the caller passed it: after a batch group the
  /// checks of its declared dims read a view of them (batch_groups).
  static std::string whole_tensor_var(const Param& p) {
    return p.tensor.batch.empty() ? tensor_var(p) : "full_" + p.name;
  }

  /// 6-bit values fill whole bytes only 4 to every 3 bytes: a byte carrier's last
  /// dim must hold a whole number of them.
  /// A byte carrier's values must also be countable in int64 (uint1 over 2^60
  /// bytes is 2^63 values): packed_extent binds symbols from that count.
  std::string packed_count_checks(const Param& p, const std::string& idx) const {
    if (!is_packed(p.tensor)) return "";
    std::string t = tensor_var(p);
    int bits = packed_bits(p.tensor);
    std::string head = "kFn, " + idx + ", " + c_string(p.name) + ", " + t + ", " + std::to_string(bits) + ", " +
                       c_string(packed_values(p.tensor));
    std::string out = "  if (" + t + "->ndim > 0 && packed_extent(" + t + ", " + std::to_string(bits) +
                      ") < 0) return fail_packed_count(" + head + ");\n";
    if (8 % bits == 0) return out;
    return out + "  if (" + t + "->ndim > 0 && !packed_whole(" + t + ", " + std::to_string(bits) +
           ")) return fail_packed_bits(" + head + ", " + std::to_string(bits / 2) + ");\n";
  }

  /// Whether a step reads the last dim of a packed tensor, counted in values.
  bool is_packed_dim(const BindingStep& s) const {
    const Param& p = spec_.params[s.param];
    return s.field == BindingStep::Field::kShape && is_packed(p.tensor) &&
           static_cast<size_t>(s.dim) + 1 == p.tensor.shape.size();
  }

  void shapes_and_strides() {
    if (plan_.steps.empty()) return;
    out_ << "\n  // 4. shapes and strides: bind symbols at first sight, solve linear dims, check the rest\n";
    for (const std::string& s : plan_.symbols) {
      // A symbol only bound, never checked, must not warn under -Werror.
      out_ << "  [[maybe_unused]] int64_t s_" << s << " = 0;\n  [[maybe_unused]] const char* by_" << s
           << " = nullptr;\n";
    }
    for (const BindingStep& step : plan_.steps) emit_step(step);
  }

  void layout_and_placement() {
    out_ << "\n  // 5. layout and placement: strides, byte_offset, alignment, device, data pointer\n";
    std::set<DeviceKind> kinds;
    for (const Param* p : spec_.call_args()) {
      if (p->kind == ParamKind::kTensor) kinds.insert(p->tensor.device);
    }
    for (DeviceKind k : kinds) {
      std::string d = device_kind_name(k);
      out_ << "  [[maybe_unused]] DLDevice dev_" << d << "{" << (k == DeviceKind::kCUDA ? "kDLCUDA" : "kDLCPU")
           << ", 0};\n"
           << "  [[maybe_unused]] const char* dev_" << d << "_by = nullptr;\n";
    }
    std::map<DeviceKind, Binding> device_bound;  // per device kind, in parameter order
    for (const Param* p : spec_.call_args()) {
      if (p->kind != ParamKind::kTensor) continue;
      Binding& state = device_bound[p->tensor.device];
      emit_guarded(*p, layout_checks(*p, state));
      if (state != Binding::kBound) state = p->tensor.optional ? Binding::kMaybe : Binding::kBound;
    }
  }

  /// Whether the device of a kind is bound when a tensor's checks run: known at
  /// generation time unless an optional tensor came first.
  enum class Binding { kUnbound, kMaybe, kBound };

  std::string layout_checks(const Param& p, Binding device) {
    const TensorSpec& ts = p.tensor;
    std::string t = whole_tensor_var(p);
    std::string head = "kFn, " + std::to_string(arg_index_[p.name]) + ", " + c_string(p.name);
    std::ostringstream b;
    if (is_packed(ts)) {
      b << "  if (" << t << "->ndim > 0 && " << t << "->strides != nullptr && " << t << "->shape[" << t
        << "->ndim - 1] > 1 && " << t << "->strides[" << t << "->ndim - 1] != 1)\n"
        << "    return fail_packed_stride(" << head << ", " << t << ", " << c_string(packed_values(ts)) << ");\n";
    }
    if (!ts.strided && ts.strides.empty()) {
      b << "  { const int d = first_noncompact_dim(" << t << "); if (d >= 0) return fail_compact(" << head << ", " << t
        << ", d); }\n";
    }
    b << "  if (" << t << "->byte_offset != 0 && (element_bytes(" << t << "->dtype) == 0 || " << t
      << "->byte_offset % static_cast<uint64_t>(element_bytes(" << t << "->dtype)) != 0))\n"
      << "    return fail_byte_offset(" << head << ", " << t << ");\n";
    if (ts.align > 0) {
      b << "  if (" << t << "->data != nullptr && (reinterpret_cast<uintptr_t>(" << t << "->data) + " << t
        << "->byte_offset) % " << ts.align << " != 0)\n"
        << "    return fail_align(" << head << ", static_cast<const char*>(" << t << "->data) + " << t
        << "->byte_offset, " << ts.align << ");\n";
    }
    std::string d = device_kind_name(ts.device);
    if (ts.device == DeviceKind::kCUDA) {
      b << "  if (" << t << "->device.device_type != kDLCUDA) return fail_device_type(" << head << ", \"cuda\", " << t
        << "->device);\n";
    } else {
      b << "  if (" << t << "->device.device_type != kDLCPU && " << t
        << "->device.device_type != kDLCUDAHost) return fail_device_type(" << head << ", \"cpu\", " << t
        << "->device);\n";
    }
    std::string bind = "dev_" + d + " = " + t + "->device; dev_" + d + "_by = " + c_string(p.name) + ";";
    std::string check = "if (" + t + "->device.device_id != dev_" + d + ".device_id) return fail_device_id(" + head +
                        ", dev_" + d + ", dev_" + d + "_by, " + t + "->device);";
    if (device == Binding::kUnbound) {
      b << "  " << bind << "\n";
    } else if (device == Binding::kBound) {
      b << "  " << check << "\n";
    } else {
      b << "  if (dev_" << d << "_by == nullptr) { " << bind << " }\n  else " << check << "\n";
    }
    b << "  if (" << t << "->data == nullptr && !has_zero_extent(" << t << ")) return fail_null_data(" << head
      << ");\n";
    return b.str();
  }

  void constraints() {
    if (spec_.constraints.empty()) return;
    out_ << "\n  // 6. constraints\n";
    for (const std::string& s : plan_.constraint_guards) emit_unbound_guard(s, "  ");
    for (const Constraint& c : spec_.constraints) {
      std::string text = to_string(c.lhs) + " " + cmp_op_text(c.op) + " " + to_string(c.rhs);
      Expr both = make_binary(ExprOp::kAdd, c.lhs, c.rhs);
      std::string where = "constraint '" + text + "'";
      emit_divisor_guards(both, where, "  ");
      std::string syms = sym_array(symbols_of(both), "    ");
      out_ << "  {\n";
      emit_value("lhs", c.lhs, where + " needs " + to_string(c.lhs), syms, "    ");
      emit_value("rhs", c.rhs, where + " needs " + to_string(c.rhs), syms, "    ");
      out_ << "    if (!(lhs " << cmp_op_text(c.op) << " rhs)) {\n"
           << syms << "      return fail_constraint(kFn, " << c_string(text) << ", syms, nsyms);\n    }\n  }\n";
    }
  }

  /// Symbols passed to the kernel ("n: int64 symbol"): bound (optional carriers may
  /// all be None) and within the parameter's type.
  void passed_symbols() {
    std::string body;
    for (const Param& p : spec_.params) {
      if (p.kind != ParamKind::kScalar || !p.symbol) continue;
      auto range_text = int_range_text(p.scalar);
      if (!range_text) continue;
      const auto& [lo, hi] = *range_text;
      body += "  if (s_" + p.name + " < INT64_C(" + lo + ") || s_" + p.name + " > INT64_C(" + hi +
              ")) return fail_symbol_range(kFn, " + c_string(p.name) + ", " + c_string(scalar_type_name(p.scalar)) +
              ", s_" + p.name + ", by_" + p.name + ", " + c_string("[" + lo + ", " + hi + "]") + ");\n";
    }
    if (body.empty() && plan_.passed_guards.empty()) return;
    out_ << "\n  // 6b. symbols passed to the kernel\n";
    for (const std::string& s : plan_.passed_guards) emit_unbound_guard(s, "  ");
    out_ << body;
  }

  /// `const int64_t name = e;`, overflow-checked: on overflow the stub fails with
  /// "<what>, which overflows int64 with <symbols>" (`syms` declares them).
  void emit_value(const std::string& name, const Expr& e, const std::string& what, const std::string& syms,
                  const std::string& ind, const std::string& skip = "") {
    std::string flag = "ovf_" + name;
    out_ << ind << "bool " << flag << " = false;\n"
         << ind << "const int64_t " << name << " = " << to_cpp(e, "s_", flag) << ";\n"
         << ind << "if (" << skip << flag << ") {\n"
         << reindent(syms, ind + "  ") << ind << "  return fail_overflow(kFn, " << c_string(what) << ", syms, nsyms);\n"
         << ind << "}\n";
  }

  /// `text` (lines of sym_array) with each line's leading spaces replaced by `ind`.
  static std::string reindent(const std::string& text, const std::string& ind) {
    std::istringstream lines(text);
    std::string line, out;
    while (std::getline(lines, line)) out += ind + line.substr(line.find_first_not_of(' ')) + "\n";
    return out;
  }

  bool has_cuda_tensor() const {
    return std::any_of(spec_.params.begin(), spec_.params.end(), [](const Param& q) {
      return q.kind == ParamKind::kTensor && q.tensor.device == DeviceKind::kCUDA;
    });
  }

  void call() {
    bool guard = options_.cuda_runtime && has_cuda_tensor();
    if (guard) cuda_guard();
    out_ << "\n  // " << (guard ? "9" : "7") << ". call\n";
    for (const Param& p : spec_.params) {
      if (p.kind != ParamKind::kStream) continue;
      out_ << "  void* stream = ctx != nullptr ? ctx->stream : TVMFFIEnvGetStream("
           << (has_cuda_tensor() ? "kDLCUDA, dev_cuda.device_id" : "kDLCPU, 0") << ");\n";
    }
    std::string callee = spec_.callee.empty() ? spec_.name : spec_.callee;
    for (const std::string& v : spec_.callee_template_vars) {
      if (always_bound_.count(v)) continue;
      out_ << "  if (tvby_" << v << " == nullptr) return fail_template_unbound(kFn, " << c_string(callee + "<...>")
           << ", " << c_string(v) << ", " << c_string(dtype_var_carrier_names(spec_, v)) << ");\n";
    }
    std::string invoke = invoke_text(callee);
    if (guard) {
      // The device is restored on every path, the error path included.
      out_ << "  int rc = 0;\n"
           << "  try {\n"
           << "    " << invoke << "\n"
           << "  } catch (...) {\n"
           << "    rc = raise_current_exception(kFn);\n"
           << "  }\n"
           << "  {  // read (and clear) a launch error even after an exception, so it cannot leak into the next call\n"
           << "    const int e = kjit_cudaGetLastError();\n"
           << "    if (e != 0 && rc == 0) rc = fail_cuda(kFn, \"the kernel launch (cudaGetLastError after the call)\", "
              "-1, e);\n"
           << "  }\n"
           << "  if (switch_device) {\n"
           << "    const int e = kjit_cudaSetDevice(previous_device);\n"
           << "    if (e != 0 && rc == 0) rc = fail_cuda(kFn, \"restoring the previous device: cudaSetDevice\", "
              "previous_device, e);\n"
           << "  }\n"
           << "  return rc;\n";
    } else {
      out_ << "  try {\n"
           << "    " << invoke << "\n"
           << "  } catch (...) {\n"
           << "    return raise_current_exception(kFn);\n"
           << "  }\n"
           << "  return 0;\n";
    }
    out_ << "}\n\n"
         << "extern \"C\" __attribute__((visibility(\"default\"))) int __tvm_ffi_" << spec_.name
         << "(void*, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {\n"
         << "  return " << checked_function_name(spec_.name) << "(args, num_args, result, nullptr);\n"
         << "}\n";
    metadata_exports(callee);
  }

  /// The kernel's return type, as decltype of a call: of each instantiation of a
  /// template kernel, comma-separated.
  std::string return_types(const std::string& callee) const {
    std::string out;
    for (const auto& combo : template_instantiations(spec_)) {
      out += (out.empty() ? "" : ", ") + std::string("decltype(::") + template_callee(callee, combo) + "(" +
             call_argument_types() + "))";
    }
    return out;
  }

  /// The kernel call: of a template kernel, the instantiation for the dtypes its
  /// variables are bound to (the dtype checks let exactly one through; the last
  /// needs no test).
  std::string invoke_text(const std::string& callee) const {
    const auto combos = template_instantiations(spec_);
    std::string out;
    for (size_t k = 0; k < combos.size(); ++k) {
      std::string cond;
      for (size_t i = 0; i + 1 < combos.size() && i < combos[k].size(); ++i) {
        const DTypeInfo& d = *combos[k][i];
        cond += (cond.empty() ? "" : " && ") + std::string("dtype_accepted(tv_") + spec_.callee_template_vars[i] +
                ", " + std::to_string(d.dl.code) + ", " + std::to_string(d.dl.bits) + ")";
      }
      std::string call = "call_and_store(result, [&]() { return ::" + template_callee(callee, combos[k]) + "(" +
                         call_arguments() + "); });";
      if (combos.size() == 1) return call;
      out += (k == 0                  ? "if (" + cond + ") "
              : k + 1 < combos.size() ? "\n    else if (" + cond + ") "
                                      : "\n    else ") +
             call;
    }
    return out;
  }

  /// CuTe DSL's sequence: initialise CUDA once, switch to the tensors' device if
  /// another is current (restored after the call).
  void cuda_guard() {
    out_ << "\n  // 7. CUDA, initialised on the first call (once, thread-safe)\n"
         << "  if (const int e = cuda_init_status()) return fail_cuda_init(kFn, e);\n"
         << "\n  // 8. device guard: the tensors' device becomes current for the call\n"
         << "  int previous_device = 0;\n"
         << "  if (const int e = kjit_cudaGetDevice(&previous_device)) return fail_cuda(kFn, \"cudaGetDevice\", -1, "
            "e);\n"
         << "  if (dev_cuda_by == nullptr) dev_cuda.device_id = previous_device;  // every CUDA tensor is None\n"
         << "  const bool switch_device = previous_device != dev_cuda.device_id;\n"
         << "  if (switch_device) {\n"
         << "    if (const int e = kjit_cudaSetDevice(dev_cuda.device_id))\n"
         << "      return fail_cuda(kFn, \"cudaSetDevice\", dev_cuda.device_id, e);\n"
         << "  }\n";
  }

  /// The C++ type of each argument call_arguments() passes, for decltype.
  std::string call_argument_types() const {
    std::string types;
    for (const Param& p : spec_.params) {
      if (!types.empty()) types += ", ";
      std::string t;
      if (p.kind == ParamKind::kTensor) {
        t = "TensorArg<" + element_type(p.tensor) + ">";
      } else if (p.kind == ParamKind::kStream) {
        t = "StreamArg";
      } else if (p.symbol) {
        t = "SymbolArg<" + std::string(scalar_cpp_type(p.scalar)) + ">";
      } else if (is_text(p.scalar)) {
        t = "TextArg";
      } else if (p.scalar == ScalarType::kBool) {
        t = "bool";
      } else if (p.scalar == ScalarType::kFloat16 || p.scalar == ScalarType::kBFloat16) {
        t = "uint16_t";
      } else {
        t = scalar_cpp_type(p.scalar);
      }
      types += "std::declval<" + t + ">()";
    }
    return types;
  }

  /// tvm-ffi's schema of each caller argument: what TypeSchema.from_json_str reads.
  std::string params_schema() const {
    std::string out;
    for (const Param* p : spec_.call_args()) {
      std::string t;
      if (p->kind == ParamKind::kTensor) {
        t = R"({"type":"ffi.Tensor"})";
        if (p->tensor.optional) t = R"({"type":"Optional","args":[)" + t + "]}";
      } else if (p->scalar == ScalarType::kBool) {
        t = R"({"type":"bool"})";
      } else if (p->scalar == ScalarType::kStr) {
        t = R"({"type":"ffi.String"})";
      } else if (p->scalar == ScalarType::kBytes) {
        t = R"({"type":"ffi.Bytes"})";
      } else if (is_integer(p->scalar)) {
        t = R"({"type":"int"})";
      } else {
        t = R"({"type":"float"})";  // floats, and complex (real numbers through tvm-ffi)
      }
      out += (out.empty() ? "" : ",") + t;
    }
    return out;
  }

  /// `__tvm_ffi__metadata_<fn>` and `__tvm_ffi__doc_<fn>`, the symbols
  /// TVM_FFI_DLL_EXPORT_TYPED_FUNC(_DOC) export, read by
  /// tvm_ffi.Module.get_function_metadata / get_function_doc. Everything but the
  /// return type's schema is known here; that one comes from the kernel's type.
  void metadata_exports(const std::string& callee) {
    std::string signature = to_string(spec_);
    std::string doc = spec_.name + "(" + signature + ")\n\nArguments are checked by kjit before the kernel runs.";
    std::string schema_head = R"({"type":"ffi.Function","named_args":{"return":[)";
    std::string schema_tail = R"(],"params":[)" + params_schema() + "]}}";
    // The schema is a JSON string inside the metadata: quote the pieces around the
    // return type's (already escaped) schema.
    std::string quoted_head = json_quote(schema_head);
    std::string quoted_tail = json_quote(schema_tail);
    std::string head = R"({"type_schema":)" + quoted_head.substr(0, quoted_head.size() - 1);
    // kjit_signature and kjit_device are what the stub checks: kjit.load holds the
    // module's manifest against them.
    std::string tail = quoted_tail.substr(1) + R"(,"kjit_signature":)" + json_quote(signature) + R"(,"kjit_device":)" +
                       json_quote(device_of(spec_)) + R"(,"doc":)" + json_quote(doc) + "}";
    out_ << "\nextern \"C\" __attribute__((visibility(\"default\"))) int __tvm_ffi__metadata_" << spec_.name
         << "(void*, const TVMFFIAny*, int32_t, TVMFFIAny* result) {\n"
         << "  using namespace kjit_stub;\n"
         << "  return store_text(result, " << c_string(head) << ", results_schema<" << return_types(callee) << ">(), "
         << c_string(tail) << ");\n"
         << "}\n\n"
         << "extern \"C\" __attribute__((visibility(\"default\"))) int __tvm_ffi__doc_" << spec_.name
         << "(void*, const TVMFFIAny*, int32_t, TVMFFIAny* result) {\n"
         << "  return kjit_stub::store_text(result, " << c_string(doc) << ");\n"
         << "}\n";
  }

  std::string call_arguments() const {
    std::string args;
    for (const Param& p : spec_.params) {
      if (!args.empty()) args += ", ";
      if (p.kind == ParamKind::kTensor) {
        int i = arg_index_.at(p.name);
        args += "TensorArg<" + element_type(p.tensor) + ">{" + whole_tensor_var(p) + ", &args[" + std::to_string(i) +
                "], kFn, " + std::to_string(i) + ", " + c_string(p.name) + "}";
      } else if (p.kind == ParamKind::kStream) {
        args += "StreamArg{stream}";
      } else if (p.symbol) {
        args += "SymbolArg<" + std::string(scalar_cpp_type(p.scalar)) + ">{s_" + p.name + "}";
      } else if (is_text(p.scalar)) {
        args += "TextArg{" + scalar_var(p) + ", &args[" + std::to_string(arg_index_.at(p.name)) + "]}";
      } else if (p.scalar == ScalarType::kBool) {
        args += scalar_var(p) + " != 0";
      } else if (p.scalar == ScalarType::kUInt64) {
        args += "u_" + p.name;
      } else if (p.scalar == ScalarType::kFloat16) {
        args += "float16_bits(" + scalar_var(p) + ")";
      } else if (p.scalar == ScalarType::kBFloat16) {
        args += "bfloat16_bits(" + scalar_var(p) + ")";
      } else {
        args += "static_cast<" + std::string(scalar_cpp_type(p.scalar)) + ">(" + scalar_var(p) + ")";
      }
    }
    return args;
  }

  // ---- pieces ----
  void emit_guarded(const Param& p, const std::string& body) {
    if (!p.tensor.optional) {
      out_ << body;
      return;
    }
    out_ << "  if (" << tensor_var(p) << " != nullptr) {\n";
    std::istringstream lines(body);
    std::string line;
    while (std::getline(lines, line)) out_ << "  " << line << "\n";
    out_ << "  }\n";
  }

  std::string sym_array(const std::set<std::string>& syms, const std::string& ind) {
    if (syms.empty()) return ind + "const SymVal* syms = nullptr;\n" + ind + "const int nsyms = 0;\n";
    std::string out = ind + "const SymVal syms[] = {";
    bool first = true;
    for (const std::string& s : syms) {
      out += std::string(first ? "" : ", ") + "{\"" + s + "\", s_" + s + ", by_" + s + "}";
      first = false;
    }
    return out + "};\n" + ind + "const int nsyms = " + std::to_string(syms.size()) + ";\n";
  }

  void emit_unbound_guard(const std::string& sym, const std::string& ind) {
    size_t k = std::find(plan_.symbols.begin(), plan_.symbols.end(), sym) - plan_.symbols.begin();
    std::string carriers;
    if (k < plan_.carriers.size()) {
      for (const std::string& c : plan_.carriers[k]) carriers += (carriers.empty() ? "" : ", ") + c;
    }
    out_ << ind << "if (by_" << sym << " == nullptr) return fail_unbound(kFn, " << c_string(sym) << ", "
         << c_string(carriers) << ");\n";
  }

  void emit_divisor_guards(const Expr& e, const std::string& where, const std::string& ind) {
    std::set<std::string> texts;
    std::vector<Expr> divisors;
    collect_divisors(e, &texts, &divisors);
    for (const Expr& d : divisors) {
      std::string syms = sym_array(symbols_of(d), ind + "  ");
      out_ << ind << "{\n";
      emit_value("divisor", d, where + " needs the divisor " + to_string(d), syms, ind + "  ");
      out_ << ind << "  if (divisor == 0) {\n"
           << reindent(syms, ind + "    ") << ind << "    return fail_div_zero(kFn, " << c_string(where) << ", "
           << c_string(to_string(d)) << ", syms, nsyms);\n"
           << ind << "  }\n"
           << ind << "}\n";
    }
  }

  std::string step_value(const BindingStep& s) {
    const Param& p = spec_.params[s.param];
    switch (s.field) {
      case BindingStep::Field::kShape:
        if (is_packed_dim(s))
          return "packed_extent(" + tensor_var(p) + ", " + std::to_string(packed_bits(p.tensor)) + ")";
        return tensor_var(p) + "->shape[" + std::to_string(s.dim) + "]";
      case BindingStep::Field::kStride:
        return "stride_of(" + tensor_var(p) + ", " + std::to_string(s.dim) + ")";
      case BindingStep::Field::kScalar:
        return scalar_var(p);
    }
    throw InternalError("kjit internal error: unknown step field");
  }

  void emit_step(const BindingStep& s) {
    const Param& p = spec_.params[s.param];
    std::string ind = s.in_optional ? "    " : "  ";
    std::string label = field_label(spec_, s);
    out_ << "  // " << label << " == " << to_string(s.expr) << (s.deferred ? " (after all parameters)" : "") << "\n";
    if (s.in_optional) out_ << "  if (" << tensor_var(p) << " != nullptr) {\n";
    for (const std::string& g : s.guard_symbols) emit_unbound_guard(g, ind);
    emit_divisor_guards(s.expr, label, ind);
    std::string v = step_value(s);
    std::string bind = "s_" + s.unknown + " = " + v + "; by_" + s.unknown + " = " + c_string(label) + ";";
    // Strides of dims with extent 0 or 1 are arbitrary (torch), so they never fail.
    std::string skip =
        s.field == BindingStep::Field::kStride ? tensor_var(p) + "->shape[" + std::to_string(s.dim) + "] > 1 && " : "";
    switch (s.action) {
      case BindingStep::Action::kBind:
        out_ << ind << bind << "\n";
        break;
      case BindingStep::Action::kCheckOrBind:
        out_ << ind << "if (by_" << s.unknown << " == nullptr) { " << bind << " }\n";
        out_ << ind << "else ";
        emit_check(s, v, skip, ind, false);
        break;
      case BindingStep::Action::kSolve:
        emit_solve(s, v, ind);
        emit_check(s, v, skip, ind, true);
        break;
      case BindingStep::Action::kCheckOrSolve:
        out_ << ind << "if (by_" << s.unknown << " == nullptr)\n";
        emit_solve(s, v, ind + "  ");
        emit_check(s, v, skip, ind, true);
        break;
      case BindingStep::Action::kCheck:
        emit_check(s, v, skip, ind, true);
        break;
    }
    if (s.in_optional) out_ << "  }\n";
  }

  void emit_check(const BindingStep& s, const std::string& v, const std::string& skip, const std::string& ind,
                  bool indent_first) {
    const Param& p = spec_.params[s.param];
    std::string head = "argument #" + std::to_string(arg_index_[p.name]) + " '" + p.name + "': ";
    std::string syms = sym_array(symbols_of(s.expr), ind + "    ");
    out_ << (indent_first ? ind : "") << "{\n";
    emit_value("expected", s.expr, head + field_text(spec_, s) + " must equal " + to_string(s.expr), syms, ind + "  ",
               skip);
    out_ << ind << "  if (" << skip << v << " != expected) {\n"
         << syms << ind << "    return " << (is_packed_dim(s) ? "fail_packed_field" : "fail_field") << "(kFn, "
         << arg_index_[p.name] << ", " << c_string(p.name) << ", " << c_string(field_text(spec_, s)) << ", "
         << c_string(to_string(s.expr)) << ", expected, syms, nsyms, " << v << packed_tail(s) << ");\n"
         << ind << "  }\n"
         << ind << "}\n";
  }

  /// fail_packed_field's extra arguments: the tensor, the width and the values' name.
  std::string packed_tail(const BindingStep& s) const {
    if (!is_packed_dim(s)) return "";
    const Param& p = spec_.params[s.param];
    return ", " + tensor_var(p) + ", " + std::to_string(packed_bits(p.tensor)) + ", " +
           c_string(packed_values(p.tensor));
  }

  void emit_solve(const BindingStep& s, const std::string& v, const std::string& ind) {
    const Param& p = spec_.params[s.param];
    std::set<std::string> others = symbols_of(s.expr);
    others.erase(s.unknown);
    std::string syms = sym_array(others, ind + "    ");
    std::string head = "argument #" + std::to_string(arg_index_[p.name]) + " '" + p.name + "': ";
    // coef == 0 (n*k with n = 0) fixes nothing: the dim must equal rest and the
    // symbol stays open for a later argument to determine.
    out_ << ind << "{  // solve " << s.unknown << " = (" << field_label(spec_, s) << " - ("
         << to_string(simplify(s.form.rest)) << ")) / " << to_string(simplify(s.form.coef)) << "\n"
         << ind << "  bool ovf = false;\n"
         << ind << "  const int64_t coef = " << to_cpp(simplify(s.form.coef), "s_") << ";\n"
         << ind << "  const int64_t rest = kjit_sub(" << v << ", " << to_cpp(simplify(s.form.rest), "s_") << ", ovf);\n"
         << ind << "  const int64_t q = coef == 0 ? 0 : kjit_floordiv(rest, coef, ovf);\n"
         << ind << "  const int64_t m = coef == 0 ? rest : kjit_floormod(rest, coef, ovf);\n"
         << ind << "  if (ovf) {\n"
         << syms << ind << "    return fail_overflow(kFn, "
         << c_string(head + "solving " + field_text(spec_, s) + " == " + to_string(s.expr) + " for " + s.unknown)
         << ", syms, nsyms);\n"
         << ind << "  }\n"
         << ind << "  if (m != 0 || q < 0) {\n"
         << syms << ind << "    return fail_solve(kFn, " << arg_index_[p.name] << ", " << c_string(p.name) << ", "
         << c_string(field_text(spec_, s)) << ", " << c_string(to_string(s.expr)) << ", " << c_string(s.unknown)
         << ", syms, nsyms, " << v << ");\n"
         << ind << "  }\n"
         << ind << "  if (coef != 0) { s_" << s.unknown << " = q; by_" << s.unknown << " = "
         << c_string(field_label(spec_, s)) << "; }\n"
         << ind << "}\n";
  }

  const FunctionSpec& spec_;
  BindingPlan plan_;
  StubOptions options_;
  std::map<std::string, int> arg_index_;
  std::set<std::string> always_bound_;  ///< dtype variables a required tensor binds on every call
  std::ostringstream out_;
};

}  // namespace

std::string emit_stub(const FunctionSpec& spec, const StubOptions& options) {
  return StubEmitter(spec, options).emit();
}

std::string checked_function_name(const std::string& fn) { return "kjit_checked_" + fn; }

std::vector<std::vector<const DTypeInfo*>> template_instantiations(const FunctionSpec& spec) {
  std::vector<std::vector<const DTypeInfo*>> out{{}};
  for (const std::string& v : spec.callee_template_vars) {
    std::vector<std::vector<const DTypeInfo*>> next;
    for (const auto& prefix : out) {
      for (const DTypeInfo& d : spec.find_dtype_var(v)->dtypes) {
        next.push_back(prefix);
        next.back().push_back(&d);
      }
    }
    out = std::move(next);
  }
  return out;
}

std::string template_callee(const std::string& callee, const std::vector<const DTypeInfo*>& combo) {
  if (combo.empty()) return callee;
  std::string args;
  for (const DTypeInfo* d : combo) args += (args.empty() ? "" : ", ") + std::string(d->cpp_type);
  return callee + "<" + args + ">";
}

}  // namespace kjit
