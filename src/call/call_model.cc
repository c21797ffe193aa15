// The call model's parameter table and binding; its checks are in call_checks.cc.
#include "call/call_model.h"

#include <tvm/ffi/error.h>

#include <cstdlib>

#include "kjit/errors.h"
#include "signature/describe.h"

namespace kjit {
namespace {

int raise_type_error(const std::string& message) {
  TVMFFIErrorSetRaisedFromCStr(error_kind_name(ErrorKind::kTypeError), message.c_str());
  return -1;
}

/// A scalar default's value as tvm-ffi passes it (the canonical text, docs/spec.md).
TVMFFIAny default_any(const Param& p) {
  TVMFFIAny a{};
  const std::string& text = p.default_value;
  if (p.scalar == ScalarType::kBool) {
    a.type_index = kTVMFFIBool;
    a.v_int64 = text == "true" ? 1 : 0;
  } else if (is_integer(p.scalar)) {
    a.type_index = kTVMFFIInt;
    a.v_int64 = std::strtoll(text.c_str(), nullptr, 10);  // canonical, in the type's range
  } else {
    a.type_index = kTVMFFIFloat;
    a.v_float64 = std::strtod(text.c_str(), nullptr);  // "inf" and "nan" included
  }
  return a;
}

}  // namespace

CallModel::CallModel(FunctionSpec spec) : spec_(std::move(spec)) {
  int slot = 0;
  for (const Param* p : spec_.call_args()) {
    const size_t index = static_cast<size_t>(p - spec_.params.data());
    const bool tensor = p->kind == ParamKind::kTensor;
    if (tensor && p->tensor.returned) {
      stub_slots_.push_back(-1 - static_cast<int32_t>(returned_.size()));
      returned_.push_back(index);
      ++slot;
      continue;
    }
    CallerParam c;
    c.name = p->name;
    c.param = index;
    c.slot = slot++;
    c.tensor = tensor;
    c.written = tensor && p->tensor.out;
    c.has_default = !tensor && !p->default_value.empty();
    if (c.has_default) c.default_value = default_any(*p);
    c.type_text = param_type_text(*p);
    has_defaults_ = has_defaults_ || c.has_default;
    if (tensor) tensor_callers_.push_back({static_cast<int32_t>(callers_.size()), c.written});
    stub_slots_.push_back(static_cast<int32_t>(callers_.size()));
    signature_text_ += (callers_.empty() ? "" : ", ") + c.name;
    callers_.push_back(std::move(c));
  }
  plan_ = make_plan();
}

std::string CallModel::returned_note() const {
  if (returned_.empty()) return "";
  std::string names;
  for (size_t r : returned_) names += (names.empty() ? "'" : ", '") + spec_.params[r].name + "'";
  return "; " + names + (returned_.size() > 1 ? " are" : " is") + " returned by " + spec_.name + ", not passed: call " +
         spec_.name + "(" + signature_text_ + ")";
}

int CallModel::bind(size_t nargs, const std::string_view* kwnames, size_t nkw, int32_t* from) const {
  const size_t n = callers_.size();
  const std::string& fn = spec_.name;
  if (nargs > n) {
    const std::string given = std::to_string(nargs) + (nargs == 1 ? " was given" : " were given");
    if (n == 0) return raise_type_error(fn + "() takes no arguments but " + given);
    return raise_type_error(fn + "() takes " + std::to_string(n) + " argument" + (n == 1 ? "" : "s") + " (" +
                            signature_text_ + ") but " + given + returned_note());
  }
  for (size_t i = 0; i < n; ++i) from[i] = i < nargs ? static_cast<int32_t>(i) : kFromDefault - 1;
  for (size_t k = 0; k < nkw; ++k) {
    size_t i = 0;
    while (i < n && callers_[i].name != kwnames[k]) ++i;
    if (i == n) {
      return raise_type_error(fn + "() got an unexpected keyword argument '" + std::string(kwnames[k]) +
                              "' (its parameters: " + signature_text_ + ")");
    }
    if (i < nargs) {
      return raise_type_error(fn + "() got multiple values for argument '" + callers_[i].name + "' (#" +
                              std::to_string(i) + ", also passed by position)");
    }
    from[i] = static_cast<int32_t>(nargs + k);
  }
  std::string missing;
  size_t n_missing = 0;
  for (size_t i = 0; i < n; ++i) {
    if (from[i] != kFromDefault - 1) continue;
    if (callers_[i].has_default) {
      from[i] = kFromDefault;
    } else {
      missing += (missing.empty() ? "'" : ", '") + callers_[i].name + "'";
      ++n_missing;
    }
  }
  if (n_missing > 0) {
    return raise_type_error(fn + "() missing required argument" + (n_missing > 1 ? "s" : "") + ": " + missing);
  }
  return 0;
}

void raise_if_failed(int rc) {
  if (rc != 0) throw tvm::ffi::detail::MoveFromSafeCallRaised();
}

}  // namespace kjit
