// Front door 2: SpecBuilder, the spec in code. Each piece reuses the string
// grammar's parsers so both doors accept and reject exactly the same things.
#include "kjit/errors.h"
#include "kjit/spec.h"
#include "signature/validate.h"

namespace kjit {

SpecBuilder::SpecBuilder(std::string name) { spec_.name = std::move(name); }

SpecBuilder& SpecBuilder::tensor(const std::string& name, const std::string& dtype,
                                 const std::vector<std::string>& dims) {
  std::string text = name + ": " + dtype + "[";
  for (size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + dims[i];
  text += "]";
  FunctionSpec one = parse_signature_syntax(spec_.name, text, DeviceKind::kCPU);
  spec_.params.push_back(one.params.at(0));
  return *this;
}

SpecBuilder& SpecBuilder::scalar(const std::string& name, const std::string& type) {
  auto t = find_scalar_type(type);
  if (!t) {
    throw SpecError("builder of '" + spec_.name + "': scalar '" + name + "' has unknown type '" + type +
                    "': expected bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float32 or float64");
  }
  Param p;
  p.name = name;
  p.kind = ParamKind::kScalar;
  p.scalar = *t;
  spec_.params.push_back(p);
  return *this;
}

SpecBuilder& SpecBuilder::stream(const std::string& name) {
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
  constraint_text_.push_back(text);  // parsed and checked with the whole spec in build()
  return *this;
}

FunctionSpec SpecBuilder::build() const {
  // Round-trip through the canonical text: one parser, one validator.
  std::string text = to_string(spec_);
  for (size_t i = 0; i < constraint_text_.size(); ++i) text += (i == 0 ? "; " : ", ") + constraint_text_[i];
  return parse_signature(spec_.name, text);
}

}  // namespace kjit
