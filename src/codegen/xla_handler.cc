// Emits one function's XLA FFI handler: XLA buffers and attrs become the same
// arguments a tvm-ffi call passes, and the checked function runs every check.
#include <sstream>

#include "codegen/cpp_text.h"
#include "kjit/codegen.h"
#include "kjit/errors.h"

namespace kjit {
namespace {

const char* attr_kind(ScalarType t) {
  if (t == ScalarType::kBool) return "kAttrBool";
  if (t == ScalarType::kFloat16) return "kAttrFloat16";
  if (t == ScalarType::kBFloat16) return "kAttrBFloat16";
  if (is_complex(t)) return "kAttrComplex";
  if (is_float(t)) return "kAttrFloat";
  if (t == ScalarType::kUInt64) return "kAttrUInt64";
  return "kAttrInt";
}

std::string names_text(const std::vector<const Param*>& ps) {
  std::string out;
  for (const Param* p : ps) out += (out.empty() ? "" : ", ") + p->name;
  return out.empty() ? "none" : out;
}

}  // namespace

std::string xla_handler_symbol(const std::string& fn) { return "__kjit_xla_" + fn; }

std::string emit_xla_handler(const FunctionSpec& spec) {
  std::vector<const Param*> inputs, results, attrs;
  size_t aliased = 0;  // out tensors a caller may also pass as operands (their results alias them)
  bool cuda = false, has_stream = false;
  for (const Param& p : spec.params) {
    if (p.kind == ParamKind::kTensor) {
      (p.tensor.out ? results : inputs).push_back(&p);
      aliased += p.tensor.out && !p.tensor.returned;
      cuda = cuda || p.tensor.device == DeviceKind::kCUDA;
    } else if (p.kind == ParamKind::kScalar) {
      if (p.symbol) continue;  // kjit passes it from the shapes, not an attr
      if (is_text(p.scalar)) {
        throw SpecError("function '" + spec.name + "': parameter '" + p.name + "' is " + scalar_type_name(p.scalar) +
                        ", which kjit's XLA FFI handlers do not pass (numeric attrs only); load it without jax=True");
      }
      attrs.push_back(&p);
    } else {
      has_stream = true;
    }
  }
  std::vector<const Param*> call_args = spec.call_args();
  std::ostringstream o;
  o << "// XLA FFI handler of " << spec.name << ": inputs (" << names_text(inputs) << "), results ("
    << names_text(results) << "), attrs (" << names_text(attrs) << ")\n"
    << "extern \"C\" __attribute__((visibility(\"default\"))) XLA_FFI_Error* " << xla_handler_symbol(spec.name)
    << "(XLA_FFI_CallFrame* frame) {\n"
    << "  using namespace kjit_xla;\n"
    << "  static const char kFn[] = " << c_string(spec.name) << ";\n"
    << "  if (XLA_FFI_Error* e = check_frame(frame, kFn)) return e;\n"
    << "  if (frame->extension_start != nullptr && frame->extension_start->type == XLA_FFI_Extension_Metadata)\n"
    << "    return fill_metadata(frame, kFn);\n"
    << "  if (frame->stage != XLA_FFI_ExecutionStage_EXECUTE) return nullptr;\n"
    // kjit.jax passes each out tensor's value as one more operand, aliased to its
    // result (input_output_aliases): the result buffer already holds it.
    << "  if ((frame->args.size != " << inputs.size()
    << (aliased ? " && frame->args.size != " + std::to_string(inputs.size() + aliased) : std::string())
    << ") || frame->rets.size != " << results.size() << ")\n"
    << "    return fail_arity(frame, kFn, " << c_string(names_text(inputs)) << ", " << inputs.size() << ", "
    << c_string(names_text(results)) << ", " << results.size() << ");\n";
  if (cuda) {
    o << "  const DLDevice device{kDLCUDA, device_ordinal(frame)};\n";
  } else {
    o << "  const DLDevice device{kDLCPU, 0};\n";
  }
  size_t n_tensors = inputs.size() + results.size();
  o << "  DLTensor tensors[" << (n_tensors ? n_tensors : 1) << "];\n"
    << "  TVMFFIAny args[" << (call_args.empty() ? 1 : call_args.size()) << "];\n";
  if (!attrs.empty()) {
    o << "  static const char* const kAttrNames[] = {";
    for (size_t k = 0; k < attrs.size(); ++k) o << (k ? ", " : "") << c_string(attrs[k]->name);
    o << "};\n"
      << "  const XLA_FFI_Scalar* attr[" << attrs.size() << "] = {};\n"
      << "  if (XLA_FFI_Error* e = collect_attrs(frame, kFn, kAttrNames, " << attrs.size() << ", attr)) return e;\n"
      << "  kjit_stub::WideValue wide_values[" << attrs.size() << "];\n";
  } else {
    o << "  if (frame->attrs.size != 0) return collect_attrs(frame, kFn, nullptr, 0, nullptr);\n";
  }
  size_t in_i = 0, out_i = 0, attr_i = 0, tensor_i = 0;
  for (size_t a = 0; a < call_args.size(); ++a) {
    const Param& p = *call_args[a];
    std::string slot = "&args[" + std::to_string(a) + "]";
    if (p.kind == ParamKind::kTensor) {
      std::string src =
          p.tensor.out
              ? "frame->rets.types[" + std::to_string(out_i) + "], frame->rets.rets[" + std::to_string(out_i) + "]"
              : "frame->args.types[" + std::to_string(in_i) + "], frame->args.args[" + std::to_string(in_i) + "]";
      (p.tensor.out ? out_i : in_i)++;
      o << "  if (XLA_FFI_Error* e = buffer_to_tensor(frame, kFn, " << c_string(p.name) << ", " << src
        << ", device, &tensors[" << tensor_i++ << "], " << slot << ")) return e;\n";
    } else {
      o << "  if (XLA_FFI_Error* e = attr_to_any(frame, kFn, " << c_string(p.name) << ", " << attr_kind(p.scalar)
        << ", attr[" << attr_i << "], " << slot << ", &wide_values[" << attr_i << "])) return e;\n";
      ++attr_i;
    }
  }
  o << "  kjit_stub::CallContext ctx{nullptr};\n";
  if (has_stream && cuda) {
    o << "  if (XLA_FFI_Error* e = get_stream(frame, &ctx.stream)) return e;\n";
  }
  o << "  TVMFFIAny result;\n"
    << "  if (" << checked_function_name(spec.name) << "(args, " << call_args.size()
    << ", &result, &ctx) != 0) return error_from_ffi(frame, kFn);\n"
    << "  return nullptr;\n"
    << "}\n";
  return o.str();
}

}  // namespace kjit
