// Canonical signature text of a spec (also part of the cache key).
#include "kjit/spec.h"

namespace kjit {
namespace {

std::string join_exprs(const std::vector<Expr>& exprs) {
  std::string out;
  for (const Expr& e : exprs) {
    if (!out.empty()) out += ", ";
    out += to_string(e);
  }
  return out;
}

std::string alternatives_text(const std::vector<DTypeInfo>& dtypes) {
  if (dtypes.empty()) return "any";
  std::string out;
  for (const DTypeInfo& d : dtypes) {
    if (!out.empty()) out += "|";
    out += d.name;
  }
  return out;
}

std::string dtype_text(const TensorSpec& t) {
  if (!t.dtype_of.empty()) return "dtype(" + t.dtype_of + ")";
  if (!t.dtype_var.empty()) return t.dtype_var;
  return alternatives_text(t.dtypes);
}

}  // namespace

std::string shape_field_text(const TensorSpec& t, const char* field, int dim) {
  const int index = t.batch.empty() ? dim : dim - static_cast<int>(t.shape.size());
  return std::string(field) + "[" + std::to_string(index) + "]";
}

std::string to_string(const Param& p) {
  std::string out = p.name + ": ";
  if (p.kind == ParamKind::kStream) return out + "stream";
  if (p.kind == ParamKind::kScalar) {
    out += p.scalar_var.empty() ? std::string(scalar_type_name(p.scalar)) : p.scalar_var;
    if (p.symbol) out += " symbol";
    return p.default_value.empty() ? out : out + " = " + p.default_value;
  }
  const TensorSpec& t = p.tensor;
  std::string dims = t.any_rank ? std::string("...") : join_exprs(t.shape);
  if (!t.batch.empty()) dims = "*" + t.batch + (dims.empty() ? "" : ", " + dims);
  out += dtype_text(t) + "[" + dims + "]";
  if (t.out) out += t.returned ? " return" : " out";
  if (t.optional) out += " optional";
  if (t.strided) out += " strided";
  if (!t.strides.empty()) out += " strides[" + join_exprs(t.strides) + "]";
  if (t.align) out += " align(" + std::to_string(t.align) + ")";
  // A defaulted device is left out: it follows the module (cpp or cuda sources).
  if (t.device_given) out += std::string(" @") + device_kind_name(t.device);
  return out;
}

std::string to_string(const FunctionSpec& spec) {
  std::string out;
  for (const DTypeVar& v : spec.dtype_vars) {
    out += (out.empty() ? "<" : ", ") + v.name + ": " + alternatives_text(v.dtypes);
  }
  if (!out.empty()) out += "> ";
  const size_t head = out.size();
  for (const Param& p : spec.params) {
    if (out.size() > head) out += ", ";
    out += to_string(p);
  }
  for (size_t i = 0; i < spec.constraints.size(); ++i) {
    const Constraint& c = spec.constraints[i];
    out += i == 0 ? "; " : ", ";
    out += to_string(c.lhs) + " " + cmp_op_text(c.op) + " " + to_string(c.rhs);
  }
  for (size_t i = 0; i < spec.independent.size(); ++i) {
    out += i == 0 ? (spec.constraints.empty() ? "; independent(" : ", independent(") : ", ";
    out += spec.independent[i];
  }
  if (!spec.independent.empty()) out += ")";
  return out;
}

}  // namespace kjit
