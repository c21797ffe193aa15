// Typing and checking a call's operands; scalars written as the kernel loads them.
#include "iterator/call_types.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>

#include "iterator/promotion.h"
#include "kjit/kernel.h"

namespace kjit {
namespace iterator {

std::string operand_name(size_t i) { return "input #" + std::to_string(i); }

std::vector<int64_t> shape_of(const DLTensor* t) { return std::vector<int64_t>(t->shape, t->shape + t->ndim); }

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t step = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = step;
    step *= shape[i];
  }
  return s;
}

std::vector<int64_t> strides_of(const DLTensor* t) {
  if (t->strides == nullptr) return contiguous_strides(shape_of(t));
  return std::vector<int64_t>(t->strides, t->strides + t->ndim);
}

namespace {

EwType type_of(const std::string& fn, const DLTensor* t, size_t input) {
  auto type = from_dl(t->dtype);
  if (!type) {
    const std::string what = operand_name(input);
    throw TypeError(fn + ": " + what + " has dtype " + dl_name(t->dtype) +
                    ", which kjit.elementwise does not support (bool, int8..int64, uint8..uint64, float16, "
                    "bfloat16, float32, float64, complex64, complex128)");
  }
  return *type;
}

std::string device_text(DLDevice d) {
  if (d.device_type == kDLCPU || d.device_type == kDLCUDAHost) return "cpu";
  if (d.device_type == kDLCUDA) return "cuda:" + std::to_string(d.device_id);
  return "device type " + std::to_string(d.device_type);
}

bool is_host(DLDevice d) { return d.device_type == kDLCPU || d.device_type == kDLCUDAHost; }

/// CPU (or pinned host) and CUDA tensors are supported; all tensors of a call must
/// be on one device.
void check_device(const std::string& fn, const DLTensor* t, size_t input, DLDevice* call_device, bool* bound) {
  const std::string what = input == SIZE_MAX ? "an output" : operand_name(input);
  if (!is_host(t->device) && t->device.device_type != kDLCUDA) {
    throw ValueError(fn + ": " + what + " is on " + device_text(t->device) +
                     "; kjit.elementwise runs on CPU and CUDA tensors");
  }
  DLDevice d = is_host(t->device) ? DLDevice{kDLCPU, 0} : t->device;
  if (!*bound) {
    *call_device = d;
    *bound = true;
  } else if (d.device_type != call_device->device_type || d.device_id != call_device->device_id) {
    throw ValueError(fn + ": " + what + " is on " + device_text(t->device) + " but the call's tensors are on " +
                     device_text(*call_device) + "; all tensors of a call must be on one device");
  }
}

EwType scalar_type(const EwOperand& op) {
  switch (op.scalar) {
    case EwOperand::Scalar::kBool:
      return EwType::kBool;
    case EwOperand::Scalar::kInt:
      return EwType::kInt64;
    case EwOperand::Scalar::kFloat:
      return EwType::kFloat64;
    default:
      return EwType::kComplex128;
  }
}

}  // namespace

bool scalar_fits(const EwOperand& op, EwType type) {
  const Kind k = kind_of(type);
  const bool real_valued = op.scalar == EwOperand::Scalar::kFloat || op.scalar == EwOperand::Scalar::kComplex;
  if (op.scalar == EwOperand::Scalar::kComplex && op.imag != 0 && k != Kind::kComplex) return false;
  if (k == Kind::kFloat || k == Kind::kComplex) {
    if (!real_valued || !std::isfinite(op.real) || size_of(type) >= 8 * (k == Kind::kComplex ? 2 : 1)) return true;
    const double max = type == EwType::kFloat16 ? 65504.0 : 3.3895313892515355e38;  // float32's and bfloat16's
    return std::fabs(op.real) <= max && (op.scalar != EwOperand::Scalar::kComplex || std::fabs(op.imag) <= max);
  }
  const int bits = k == Kind::kBool ? 1 : 8 * size_of(type);
  // [lo, hi] of the type, as doubles (exact: powers of two) and as integers
  const double lo = k == Kind::kInt ? -std::ldexp(1.0, bits - 1) : 0.0;
  const double hi = std::ldexp(1.0, k == Kind::kInt ? bits - 1 : bits);  // one past the largest
  if (real_valued) return std::isfinite(op.real) && op.real == std::floor(op.real) && op.real >= lo && op.real < hi;
  const int64_t v = op.int_value;
  if (k == Kind::kInt) return bits == 64 || (v >= -(int64_t{1} << (bits - 1)) && v < (int64_t{1} << (bits - 1)));
  // kjit carries Python ints in int64: a uint64 beyond INT64_MAX does not reach here
  return v >= 0 && (bits >= 63 || v < (int64_t{1} << bits));
}

void write_scalar(const EwOperand& op, EwType type, ScalarSlot* slot) {
  const bool real_valued = op.scalar == EwOperand::Scalar::kFloat || op.scalar == EwOperand::Scalar::kComplex;
  double re = real_valued ? op.real : static_cast<double>(op.int_value);
  double im = op.scalar == EwOperand::Scalar::kComplex ? op.imag : 0.0;
  // A float going into an integer type converts like C++ (and NumPy): toward zero.
  const int64_t whole =
      !real_valued ? op.int_value : (std::isfinite(re) && std::fabs(re) < 9.2e18 ? static_cast<int64_t>(re) : 0);
  auto put = [&](auto v) { std::memcpy(slot->bytes, &v, sizeof(v)); };
  switch (type) {
    case EwType::kBool:
      put(static_cast<bool>(re != 0 || im != 0));
      break;
    case EwType::kInt8:
      put(static_cast<int8_t>(whole));
      break;
    case EwType::kInt16:
      put(static_cast<int16_t>(whole));
      break;
    case EwType::kInt32:
      put(static_cast<int32_t>(whole));
      break;
    case EwType::kInt64:
      put(static_cast<int64_t>(whole));
      break;
    case EwType::kUInt8:
      put(static_cast<uint8_t>(whole));
      break;
    case EwType::kUInt16:
      put(static_cast<uint16_t>(whole));
      break;
    case EwType::kUInt32:
      put(static_cast<uint32_t>(whole));
      break;
    case EwType::kUInt64:
      put(static_cast<uint64_t>(whole));
      break;
    case EwType::kFloat16:
    case EwType::kBFloat16:
    case EwType::kFloat32:
      put(static_cast<float>(re));
      break;
    case EwType::kFloat64:
      put(re);
      break;
    case EwType::kComplex64:
      put(std::complex<float>(static_cast<float>(re), static_cast<float>(im)));
      break;
    case EwType::kComplex128:
      put(std::complex<double>(re, im));
      break;
    case EwType::kStr:  // spec scalar types, never element types
    case EwType::kBytes:
      throw InternalError("kjit internal error: str/bytes is not an elementwise type");
  }
}

EwType extra_travel_type(const std::string& fn, const EwOperand& extra, size_t e, EwType compute) {
  switch (extra.scalar) {
    case EwOperand::Scalar::kBool:
    case EwOperand::Scalar::kInt:
    case EwOperand::Scalar::kFloat:
      return scalar_type(extra);  // as an input scalar travels
    case EwOperand::Scalar::kComplex:
      if (is_complex(compute)) return compute;
      throw TypeError(fn + ": extra argument #" + std::to_string(e) + " is complex (" + std::to_string(extra.real) +
                      (extra.imag < 0 ? "" : "+") + std::to_string(extra.imag) + "j) but the kernel computes in " +
                      ew_type_name(compute) +
                      ", a real type: its imaginary part would be lost; pass a real value, or complex inputs");
    case EwOperand::Scalar::kNone:
      break;
  }
  throw TypeError(fn + ": extra argument #" + std::to_string(e) +
                  " must be a bool, int, float or complex scalar, got "
                  "a tensor");
}

namespace {

/// `v` rounded (to nearest even) to a float with `digits` significand bits and
/// smallest normal exponent `min_exp`: how a Python float becomes a float16 or
/// bfloat16 before NumPy computes with it.
double round_to_precision(double v, int digits, int min_exp, double max_finite) {
  if (!std::isfinite(v) || v == 0) return v;
  int exp = std::max(std::ilogb(v), min_exp);
  double quantum = std::ldexp(1.0, exp - (digits - 1));
  double r = std::nearbyint(v / quantum) * quantum;
  return std::fabs(r) > max_finite ? std::copysign(INFINITY, v) : r;
}

/// NumPy 2 refuses a Python int that does not fit an integer result type.
void check_weak_int_fits(const std::string& fn, const EwOperand& op, EwType result, Promotion p) {
  if (p != Promotion::kNumPy || op.scalar != EwOperand::Scalar::kInt) return;
  Kind k = kind_of(result);
  if (k != Kind::kInt && k != Kind::kUInt) return;
  if (!scalar_fits(op, result)) {
    throw OverflowError(fn + ": Python integer " + std::to_string(op.int_value) + " out of bounds for " +
                        ew_type_name(result) + " (NumPy 2 keeps the array's dtype for Python scalars)");
  }
}

}  // namespace

namespace {

/// Every tensor input must cast to a given compute type as an output would (NumPy's
/// dtype= with casting='same_kind').
void check_inputs_cast_to(const std::string& fn, const std::vector<TypeInput>& tin, EwType type, Promotion p) {
  for (const TypeInput& in : tin) {
    if (in.weight == TypeInput::Weight::kWeak || can_cast(in.type, type, p)) continue;
    throw TypeError(fn + ": " + operand_name(in.index) + " has dtype " + ew_type_name(in.type) +
                    ", which cannot be cast safely to the compute type " + ew_type_name(type) +
                    " (compute=" + ew_type_name(type) +
                    " takes inputs of the same or a lower kind; no complex to "
                    "real, float to integer, or anything to bool)");
  }
}

/// The result type the compute rule makes of the promoted one.
EwType apply_compute(const std::string& fn, const std::vector<TypeInput>& tin, EwType promoted, Promotion p,
                     const EwCompute& compute) {
  switch (compute.rule) {
    case EwCompute::Rule::kPromoted:
      return promoted;
    case EwCompute::Rule::kFloat:
      return float_result_type(tin, promoted, p);
    case EwCompute::Rule::kType:
      check_inputs_cast_to(fn, tin, compute.type, p);
      return compute.type;
  }
  return promoted;
}

}  // namespace

CallTypes resolve_types(const std::string& fn, const std::vector<EwOperand>& inputs, Promotion p,
                        const EwCompute& compute) {
  if (inputs.empty()) throw TypeError(fn + ": expected at least one input");
  std::vector<TypeInput> tin;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<size_t> which;
  CallTypes call;
  bool bound = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const EwOperand& op = inputs[i];
    if (op.tensor != nullptr) {
      check_device(fn, op.tensor, i, &call.device, &bound);
      TypeInput t{type_of(fn, op.tensor, i),
                  op.tensor->ndim == 0 ? TypeInput::Weight::kZeroDim : TypeInput::Weight::kStrong, i};
      tin.push_back(t);
      shapes.push_back(shape_of(op.tensor));
      which.push_back(i);
    } else {
      tin.push_back({scalar_type(op), TypeInput::Weight::kWeak, i});
    }
  }
  call.result = apply_compute(fn, tin, result_type(fn, tin, p), p, compute);
  call.own = compute.own_outputs;
  for (size_t k = 0; k < which.size(); ++k) {
    check_tensor_span(fn, operand_name(which[k]), inputs[which[k]].tensor, size_of(tin[which[k]].type));
  }
  call.shape = broadcast_shapes(fn, shapes, which);
  int widest = size_of(call.result);
  for (const TypeInput& t : tin) widest = std::max(widest, size_of(t.type));
  check_broadcast_size(fn, call.shape, widest);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].tensor != nullptr) {
      call.inputs.push_back(tin[i].type);
    } else {
      check_weak_int_fits(fn, inputs[i], call.result, p);
      // 16-bit floats: the scalar travels as float32, already rounded (bind_scalar_input).
      call.inputs.push_back(is_half(call.result) ? EwType::kFloat32 : call.result);
    }
  }
  return call;
}

namespace {

/// Whether `from` broadcasts to `to` (right-aligned; each dim equal or 1).
bool broadcasts_to(const std::vector<int64_t>& from, const std::vector<int64_t>& to) {
  if (from.size() > to.size()) return false;
  const size_t lead = to.size() - from.size();
  for (size_t d = 0; d < from.size(); ++d) {
    if (from[d] != to[lead + d] && from[d] != 1) return false;
  }
  return true;
}

}  // namespace

void broadcast_to_outputs(const DLTensor* const* outputs, size_t n_out, CallTypes* types, Promotion p) {
  if (p != Promotion::kNumPy || n_out == 0) return;
  std::vector<int64_t> target = shape_of(outputs[0]);
  if (target != types->shape && broadcasts_to(types->shape, target)) types->shape = std::move(target);
}

void bind_scalar_input(const std::string& fn, const EwOperand& input, const CallTypes& types, size_t i, Promotion p,
                       ScalarSlot* slot) {
  check_weak_int_fits(fn, input, types.result, p);
  // 16-bit float results: the scalar travels as float32, rounded as NumPy rounds it.
  EwOperand value = input;
  if (is_half(types.result) && value.scalar != EwOperand::Scalar::kFloat) {
    value.real = static_cast<double>(value.int_value);
    value.scalar = EwOperand::Scalar::kFloat;
  }
  if (types.result == EwType::kFloat16) value.real = round_to_precision(value.real, 11, -14, 65504.0);
  if (types.result == EwType::kBFloat16) value.real = round_to_precision(value.real, 8, -126, 3.3895313892515355e38);
  write_scalar(value, types.inputs[i], slot);
}

detail::Operands input_operands(const std::vector<EwOperand>& inputs, const CallTypes& types) {
  detail::Operands out(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    OperandInfo& op = out[i];
    op.dtype = ew_dl_type(types.inputs[i]);
    op.element_size = size_of(types.inputs[i]);
    if (const DLTensor* t = inputs[i].tensor) {
      op.strides = loop_strides(shape_of(t), strides_of(t), op.element_size, types.shape.size());
    } else {
      op.strides = DimVector(types.shape.size(), 0);
      op.is_scalar = true;
    }
  }
  return out;
}

namespace {

std::string dims_text(const int64_t* shape, int ndim) {
  std::string s = "(";
  for (int d = 0; d < ndim; ++d) s += (d ? ", " : "") + std::to_string(shape[d]);
  return s + (ndim == 1 ? ",)" : ")");
}

}  // namespace

void check_broadcast_size(const std::string& fn, const std::vector<int64_t>& shape, int element_size) {
  for (int64_t d : shape) {
    if (d == 0) return;  // empty: no element, no byte
  }
  // In bits, as DLPack sizes are computed (tvm-ffi's GetDataSize multiplies by bits).
  int64_t bits = 8 * int64_t{element_size};
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(bits, d, &bits)) {
      throw ValueError(fn + ": the broadcast shape " + dims_text(shape.data(), static_cast<int>(shape.size())) +
                       " has too many elements: at " + std::to_string(element_size) +
                       " bytes each, its size in bits overflows int64 (at most 2^60 bytes)");
    }
  }
}

void check_tensor_span(const std::string& fn, const std::string& what, const DLTensor* t, int element_size) {
  int64_t span = element_size, step = 0;
  bool overflow = false;
  for (int d = 0; d < t->ndim; ++d) {
    if (t->shape[d] < 0) {
      throw ValueError(fn + ": " + what + " has a negative size " + std::to_string(t->shape[d]) + " in dimension " +
                       std::to_string(d) + " of its shape " + dims_text(t->shape, t->ndim));
    }
    if (t->strides == nullptr || t->shape[d] == 1) continue;
    if (t->strides[d] == INT64_MIN) {  // no magnitude in int64
      overflow = true;
      continue;
    }
    const int64_t stride = t->strides[d] < 0 ? -t->strides[d] : t->strides[d];
    overflow = overflow || __builtin_mul_overflow(stride, int64_t{element_size}, &step);
    if (!overflow && t->shape[d] > 1) overflow = __builtin_mul_overflow(step, t->shape[d] - 1, &step);
    overflow = overflow || __builtin_add_overflow(span, step, &span);
  }
  if (overflow) {
    throw ValueError(fn + ": " + what + " of shape " + dims_text(t->shape, t->ndim) +
                     " has strides whose byte offsets overflow int64; it cannot describe memory");
  }
}

void check_output(const std::string& fn, size_t k, const DLTensor* out, const CallTypes& call, Promotion p) {
  std::string what = "out[" + std::to_string(k) + "]";
  DLDevice device = call.device;
  bool bound = true;
  check_device(fn, out, SIZE_MAX, &device, &bound);
  auto type = from_dl(out->dtype);
  if (!type)
    throw TypeError(fn + ": " + what + " has dtype " + dl_name(out->dtype) +
                    ", which kjit.elementwise does not support");
  EwType t = *type;
  check_tensor_span(fn, what, out, size_of(t));
  if (shape_of(out) != call.shape) {
    throw ValueError(
        fn + ": " + what + " has shape " + shape_text(shape_of(out)) + " but the inputs broadcast to " +
        shape_text(call.shape) + "; kjit.elementwise does not resize outputs" +
        (p == Promotion::kNumPy ? " (under NumPy's rules the inputs may broadcast to a larger out=)" : ""));
  }
  if (!can_cast(call.output(k), t, p)) {
    throw TypeError(fn + ": the result type " + std::string(ew_type_name(call.output(k))) +
                    " cannot be cast safely to the output type " + ew_type_name(t) + " of " + what +
                    " (allowed: same or a higher kind; no complex to real, float to integer, or anything to bool)");
  }
}

void check_self_overlap(const std::string& fn, const DLTensor* const* outputs, size_t n_out) {
  for (size_t k = 0; k < n_out; ++k) {
    const DLTensor* o = outputs[k];
    bool empty = false;
    for (int d = 0; d < o->ndim; ++d) empty = empty || o->shape[d] == 0;
    for (int d = 0; !empty && d < o->ndim; ++d) {
      if (o->shape[d] > 1 && o->strides != nullptr && o->strides[d] == 0) {
        throw ValueError(fn + ": out[" + std::to_string(k) + "] has stride 0 in dimension " + std::to_string(d) +
                         ": more than one element of the written-to tensor refers to a single memory location "
                         "(pass a contiguous output)");
      }
    }
  }
}

}  // namespace iterator
}  // namespace kjit
