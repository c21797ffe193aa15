// Front door 2: SpecBuilder, the spec in code. Each piece reuses the string
// grammar's parsers so both doors accept and reject exactly the same things.
#include "kjit/errors.h"
#include "kjit/spec.h"
#include "signature/lexer.h"
#include "signature/validate.h"

namespace kjit {
namespace {

/// "builder of 'f': tensor('a', ...)": the call a builder error is about.
std::string call_text(const std::string& fn, const char* method, const std::string& first_arg) {
  return "builder of '" + spec_detail::printable(fn) + "': " + method + "('" + spec_detail::printable(first_arg) +
         "', ...)";
}

/// A name is one identifier: "a: float32[n], b" would splice a parameter into the
/// signature the builder writes.
void check_name(const std::string& fn, const char* method, const std::string& name) {
  if (is_c_identifier(name)) return;
  throw SpecError(call_text(fn, method, name) +
                  ": the name must be an identifier (letters, digits and '_', not starting with a digit)" +
                  first_bad_char(name));
}

/// The tokens of a piece of builder input that must stay inside its slot: no
/// punctuation outside `allowed` (so a dim cannot close the shape and add a parameter).
void check_piece(const std::string& fn, const char* method, const std::string& first_arg, const char* what,
                 const std::string& piece, const std::string& allowed) {
  for (const spec_detail::Token& t : spec_detail::tokenize(piece, call_text(fn, method, first_arg) + ": " + what)) {
    if (t.kind != spec_detail::Tok::kPunct || allowed.find(" " + t.text + " ") != std::string::npos) continue;
    throw SpecError(call_text(fn, method, first_arg) + ": " + what + " '" + spec_detail::printable(piece) +
                    "' is not one " + (allowed.find("==") != std::string::npos ? "constraint" : "expression") + ": '" +
                    t.text + "' cannot appear in it");
  }
}

const char kExprPunct[] = " + - * / % ( ) ";
const char kConstraintPunct[] = " + - * / % ( ) == != < <= > >= ";

}  // namespace

SpecBuilder::SpecBuilder(std::string name) { spec_.name = std::move(name); }

namespace {

/// "<T: float32|float64> ": the dtype variables declared so far, before the piece
/// the builder parses, so a dtype or scalar type may name one.
std::string vars_prefix(const FunctionSpec& spec) {
  FunctionSpec vars;
  vars.dtype_vars = spec.dtype_vars;
  return to_string(vars);
}

}  // namespace

SpecBuilder& SpecBuilder::dtype_var(const std::string& name, const std::string& dtypes) {
  check_name(spec_.name, "dtype_var", name);
  check_piece(spec_.name, "dtype_var", name, "dtypes", dtypes, " | ");
  const std::string prefix = vars_prefix(spec_);
  const std::string text =
      (prefix.empty() ? "<" : prefix.substr(0, prefix.size() - 2) + ", ") + name + ": " + dtypes + ">";
  spec_.dtype_vars = parse_signature_syntax(spec_.name, text, DeviceKind::kCPU).dtype_vars;
  return *this;
}

SpecBuilder& SpecBuilder::tensor(const std::string& name, const std::string& dtype,
                                 const std::vector<std::string>& dims) {
  check_name(spec_.name, "tensor", name);
  check_piece(spec_.name, "tensor", name, "dtype", dtype, " | ( ) ");
  for (const std::string& d : dims) check_piece(spec_.name, "tensor", name, "dim", d, kExprPunct);
  std::string text = vars_prefix(spec_) + name + ": " + dtype + "[";
  for (size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + dims[i];
  text += "]";
  FunctionSpec one = parse_signature_syntax(spec_.name, text, DeviceKind::kCPU);
  spec_.params.push_back(one.params.at(0));
  return *this;
}

SpecBuilder& SpecBuilder::scalar(const std::string& name, const std::string& type) {
  check_name(spec_.name, "scalar", name);
  if (spec_.find_dtype_var(type) != nullptr) {  // "eps: T"
    spec_.params.push_back(
        parse_signature_syntax(spec_.name, vars_prefix(spec_) + name + ": " + type, DeviceKind::kCPU).params.at(0));
    return *this;
  }
  auto t = find_scalar_type(type);
  if (!t) {
    throw SpecError("builder of '" + spec_.name + "': scalar '" + name + "' has unknown type '" + type + "'" +
                    dtype_spelling_hint(type) +
                    ": expected bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float32 or float64");
  }
  Param p;
  p.name = name;
  p.kind = ParamKind::kScalar;
  p.scalar = *t;
  spec_.params.push_back(p);
  return *this;
}

SpecBuilder& SpecBuilder::symbol(const std::string& name, const std::string& type) {
  scalar(name, type);
  spec_.params.back().symbol = true;
  return *this;
}

SpecBuilder& SpecBuilder::default_value(const std::string& text) {
  if (spec_.params.empty() || spec_.params.back().kind != ParamKind::kScalar) {
    throw SpecError("builder of '" + spec_.name + "': default_value('" + spec_detail::printable(text) +
                    "') applies to the last scalar added, but " +
                    (spec_.params.empty() ? std::string("no parameter was added yet")
                                          : "the last parameter '" + spec_.params.back().name + "' is not a scalar"));
  }
  Param& p = spec_.params.back();
  std::string why;
  std::optional<std::string> value = canonical_default(p.scalar, text, &why);
  if (!value) {
    throw SpecError(call_text(spec_.name, "scalar", p.name) + ": bad default '" + spec_detail::printable(text) +
                    "': " + why);
  }
  p.default_value = *value;
  return *this;
}

SpecBuilder& SpecBuilder::stream(const std::string& name) {
  check_name(spec_.name, "stream", name);
  Param p;
  p.name = name;
  p.kind = ParamKind::kStream;
  spec_.params.push_back(p);
  return *this;
}

TensorSpec& SpecBuilder::last_tensor(const char* modifier) {
  if (spec_.params.empty() || spec_.params.back().kind != ParamKind::kTensor) {
    throw SpecError("builder of '" + spec_.name + "': " + modifier + "() applies to the last tensor added, but " +
                    (spec_.params.empty() ? std::string("no parameter was added yet")
                                          : "the last parameter '" + spec_.params.back().name + "' is not a tensor"));
  }
  return spec_.params.back().tensor;
}

SpecBuilder& SpecBuilder::out() {
  last_tensor("out").out = true;
  return *this;
}

SpecBuilder& SpecBuilder::returned() {
  TensorSpec& t = last_tensor("returned");
  t.out = true;
  t.returned = true;
  return *this;
}

SpecBuilder& SpecBuilder::optional() {
  last_tensor("optional").optional = true;
  return *this;
}

SpecBuilder& SpecBuilder::strided() {
  last_tensor("strided").strided = true;
  return *this;
}

SpecBuilder& SpecBuilder::strides(const std::vector<std::string>& strides) {
  TensorSpec& t = last_tensor("strides");
  t.strides.clear();
  for (const std::string& s : strides) t.strides.push_back(parse_expr(s));
  return *this;
}

SpecBuilder& SpecBuilder::align(int64_t bytes) {
  last_tensor("align").align = bytes;
  return *this;
}

SpecBuilder& SpecBuilder::device(const std::string& device) {
  TensorSpec& t = last_tensor("device");
  if (device == "cpu") {
    t.device = DeviceKind::kCPU;
  } else if (device == "cuda") {
    t.device = DeviceKind::kCUDA;
  } else {
    throw SpecError("builder of '" + spec_.name + "': unknown device '" + device + "': expected cpu or cuda");
  }
  t.device_given = true;
  return *this;
}

SpecBuilder& SpecBuilder::constraint(const std::string& text) {
  check_piece(spec_.name, "constraint", text, "constraint", text, kConstraintPunct);
  constraint_text_.push_back(text);  // parsed and checked with the whole spec in build()
  return *this;
}

SpecBuilder& SpecBuilder::independent(const std::vector<std::string>& symbols) {
  for (const std::string& s : symbols) {
    check_name(spec_.name, "independent", s);
    independent_.push_back(s);
  }
  return *this;
}

FunctionSpec SpecBuilder::build() const {
  // Round-trip through the canonical text: one parser, one validator.
  std::string text = to_string(spec_);
  for (size_t i = 0; i < constraint_text_.size(); ++i) text += (i == 0 ? "; " : ", ") + constraint_text_[i];
  for (size_t i = 0; i < independent_.size(); ++i) {
    text += i > 0 ? ", " : (constraint_text_.empty() ? "; independent(" : ", independent(");
    text += independent_[i];
  }
  if (!independent_.empty()) text += ")";
  return parse_signature(spec_.name, text);
}

}  // namespace kjit
