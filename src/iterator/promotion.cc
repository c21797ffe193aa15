// Promotion follows NumPy 2 (NEP 50) and PyTorch's ResultTypeState; the tests use
// numpy.result_type and torch as oracles.
#include "iterator/promotion.h"

#include <algorithm>

#include "kjit/errors.h"

namespace kjit {
namespace iterator {
namespace {

struct Info {
  EwType type;
  DLDataType dl;
  Kind kind;
  int size;
  const char* storage;
};

constexpr Info kInfo[] = {
    {EwType::kBool, {kDLBool, 8, 1}, Kind::kBool, 1, "bool"},
    {EwType::kInt8, {kDLInt, 8, 1}, Kind::kInt, 1, "int8_t"},
    {EwType::kInt16, {kDLInt, 16, 1}, Kind::kInt, 2, "int16_t"},
    {EwType::kInt32, {kDLInt, 32, 1}, Kind::kInt, 4, "int32_t"},
    {EwType::kInt64, {kDLInt, 64, 1}, Kind::kInt, 8, "int64_t"},
    {EwType::kUInt8, {kDLUInt, 8, 1}, Kind::kUInt, 1, "uint8_t"},
    {EwType::kUInt16, {kDLUInt, 16, 1}, Kind::kUInt, 2, "uint16_t"},
    {EwType::kUInt32, {kDLUInt, 32, 1}, Kind::kUInt, 4, "uint32_t"},
    {EwType::kUInt64, {kDLUInt, 64, 1}, Kind::kUInt, 8, "uint64_t"},
    {EwType::kFloat16, {kDLFloat, 16, 1}, Kind::kFloat, 2, "uint16_t"},
    {EwType::kBFloat16, {kDLBfloat, 16, 1}, Kind::kFloat, 2, "uint16_t"},
    {EwType::kFloat32, {kDLFloat, 32, 1}, Kind::kFloat, 4, "float"},
    {EwType::kFloat64, {kDLFloat, 64, 1}, Kind::kFloat, 8, "double"},
    {EwType::kComplex64, {kDLComplex, 64, 1}, Kind::kComplex, 8, "std::complex<float>"},
    {EwType::kComplex128, {kDLComplex, 128, 1}, Kind::kComplex, 16, "std::complex<double>"},
};

const Info& info(EwType t) {
  for (const Info& i : kInfo) {
    if (i.type == t) return i;
  }
  throw InternalError("kjit internal error: unknown EwType");
}

EwType int_of_size(int bytes) {
  switch (bytes) {
    case 1:
      return EwType::kInt8;
    case 2:
      return EwType::kInt16;
    case 4:
      return EwType::kInt32;
    default:
      return EwType::kInt64;
  }
}

/// The smallest float that holds every value of an integer type exactly (NumPy).
EwType float_for_int(EwType t) {
  int s = size_of(t);
  if (s == 1) return EwType::kFloat16;
  if (s == 2) return EwType::kFloat32;
  return EwType::kFloat64;
}

int float_rank(EwType t) {
  switch (t) {
    case EwType::kFloat16:
    case EwType::kBFloat16:
      return 1;
    case EwType::kFloat32:
      return 2;
    default:
      return 3;
  }
}

EwType float_max(EwType a, EwType b) {
  if ((a == EwType::kFloat16 && b == EwType::kBFloat16) || (a == EwType::kBFloat16 && b == EwType::kFloat16))
    return EwType::kFloat32;
  return float_rank(a) >= float_rank(b) ? a : b;
}

EwType complex_of(EwType real) { return real == EwType::kFloat64 ? EwType::kComplex128 : EwType::kComplex64; }

EwType real_of(EwType c) { return c == EwType::kComplex128 ? EwType::kFloat64 : EwType::kFloat32; }

EwType promote_ints(EwType a, EwType b) {
  bool ua = kind_of(a) == Kind::kUInt, ub = kind_of(b) == Kind::kUInt;
  if (ua == ub) return size_of(a) >= size_of(b) ? a : b;
  EwType s = ua ? b : a, u = ua ? a : b;
  if (size_of(s) > size_of(u)) return s;
  if (size_of(u) == 8) return EwType::kFloat64;  // int64 + uint64: NumPy's float64
  return int_of_size(2 * size_of(u));
}

/// NumPy's promotion of two types (ml_dtypes' for bfloat16).
std::optional<EwType> numpy_pair(EwType a, EwType b) {
  if (a == b) return a;
  Kind ka = kind_of(a), kb = kind_of(b);
  if (ka == Kind::kBool) return b;
  if (kb == Kind::kBool) return a;
  if (is_integer(a) && is_integer(b)) return promote_ints(a, b);
  if (ka == Kind::kComplex || kb == Kind::kComplex) {
    EwType ra = ka == Kind::kComplex ? real_of(a) : a, rb = kb == Kind::kComplex ? real_of(b) : b;
    std::optional<EwType> r = numpy_pair(ra, rb);
    return complex_of(r == EwType::kFloat64 ? EwType::kFloat64 : EwType::kFloat32);
  }
  if (a == EwType::kBFloat16 || b == EwType::kBFloat16) {
    // ml_dtypes: bfloat16 holds int8/uint8 exactly; float32 and float64 hold it.
    EwType other = a == EwType::kBFloat16 ? b : a;
    if (other == EwType::kFloat32 || other == EwType::kFloat64) return other;
    if (is_integer(other) && size_of(other) == 1) return EwType::kBFloat16;
    return std::nullopt;
  }
  if (ka == Kind::kFloat && kb == Kind::kFloat) return float_max(a, b);
  EwType f = ka == Kind::kFloat ? a : b, i = ka == Kind::kFloat ? b : a;
  return float_max(f, float_for_int(i));
}

bool is_wide_unsigned(EwType t) { return t == EwType::kUInt16 || t == EwType::kUInt32 || t == EwType::kUInt64; }

/// PyTorch's promoteTypes.
std::optional<EwType> torch_pair(EwType a, EwType b) {
  if (a == b) return a;
  Kind ka = kind_of(a), kb = kind_of(b);
  if (is_wide_unsigned(a) || is_wide_unsigned(b)) {  // torch promotes these only with floats
    if (ka == Kind::kFloat) return a;
    if (kb == Kind::kFloat) return b;
    return std::nullopt;
  }
  if (ka == Kind::kBool) return b;
  if (kb == Kind::kBool) return a;
  if (is_integer(a) && is_integer(b)) return promote_ints(a, b);
  if (ka == Kind::kComplex || kb == Kind::kComplex) {
    bool wide = a == EwType::kComplex128 || b == EwType::kComplex128 || a == EwType::kFloat64 || b == EwType::kFloat64;
    return wide ? EwType::kComplex128 : EwType::kComplex64;
  }
  if (ka == Kind::kFloat && kb == Kind::kFloat) return float_max(a, b);
  return ka == Kind::kFloat ? a : b;  // the float type wins
}

std::string operand_text(const TypeInput& in) {
  const char* what = in.weight == TypeInput::Weight::kWeak ? "a Python scalar" : nullptr;
  return (what != nullptr ? std::string(what) + " (input #" : "input #") + std::to_string(in.index) +
         (what != nullptr ? ", " : " (") + ew_type_name(in.type) + ")";
}

[[noreturn]] void throw_no_torch_pair(const std::string& fn, EwType acc, const TypeInput& in) {
  throw TypeError(fn + ": PyTorch's rules do not promote " + operand_text(in) + " with " + ew_type_name(acc) +
                  " (the type of the inputs before it): torch promotes uint16, uint32 and uint64 only with "
                  "themselves and floating types; cast one of them");
}

/// PyTorch's combine_categories(higher, lower): the lower category (0-d tensors,
/// then Python scalars) only raises the kind. A float16 or bfloat16 with a complex
/// type gives complex32, which the engine lacks: complex64 stands in and
/// *half_complex says so (`lower_half_complex`: `lower` stands in so).
std::optional<EwType> combine_categories(const std::string& fn, std::optional<EwType> higher,
                                         std::optional<EwType> lower, bool lower_half_complex, bool* half_complex) {
  *half_complex = false;
  if (!higher || !lower) {
    *half_complex = !higher && lower_half_complex;
    return higher ? higher : lower;
  }
  Kind h = kind_of(*higher), l = kind_of(*lower);
  if (h == Kind::kComplex) return higher;
  if (l == Kind::kComplex) {
    if (h != Kind::kFloat) {
      *half_complex = lower_half_complex;
      return lower;
    }
    *half_complex = *higher == EwType::kFloat16 || *higher == EwType::kBFloat16;
    return complex_of(*higher);  // the float type's precision, as a complex type
  }
  if (h == Kind::kFloat) return higher;
  if (*higher == EwType::kBool || l == Kind::kFloat) {
    std::optional<EwType> r = torch_pair(*higher, *lower);
    if (!r) {
      throw TypeError(fn + ": PyTorch's rules do not promote " + ew_type_name(*higher) + " with " +
                      ew_type_name(*lower) +
                      " (from 0-d tensors or Python scalars): torch promotes uint16, uint32 "
                      "and uint64 only with themselves and floating types; cast one of them");
    }
    return r;
  }
  return higher;
}

}  // namespace

Kind kind_of(EwType t) { return info(t).kind; }
int size_of(EwType t) { return info(t).size; }
const char* storage_type(EwType t) { return info(t).storage; }

EwType compute_type(EwType t) { return (t == EwType::kFloat16 || t == EwType::kBFloat16) ? EwType::kFloat32 : t; }
const char* cpp_compute_type(EwType t) { return storage_type(compute_type(t)); }

std::optional<EwType> from_dl(DLDataType d) {
  if (d.lanes != 1) return std::nullopt;
  if (d.code == kDLBool && (d.bits == 8 || d.bits == 1)) return EwType::kBool;
  for (const Info& i : kInfo) {
    if (i.dl.code == d.code && i.dl.bits == d.bits) return i.type;
  }
  return std::nullopt;
}

std::string dl_name(DLDataType d) {
  if (auto t = from_dl(d)) return ew_type_name(*t);
  return "dtype(code=" + std::to_string(d.code) + ", bits=" + std::to_string(d.bits) +
         (d.lanes != 1 ? ", lanes=" + std::to_string(d.lanes) : std::string()) + ")";
}

std::optional<EwType> promote(EwType a, EwType b, Promotion p) {
  return p == Promotion::kTorch ? torch_pair(a, b) : numpy_pair(a, b);
}

namespace {

/// NumPy: the least type every strong input casts to safely (np.result_type of
/// them all, whatever their order). The promotion table is not a lattice (int8 and
/// uint8 have both int16 and float16 as minimal bounds), so among several minimal
/// bounds the one of the inputs' highest kind wins, as NumPy's does. Pairs without
/// a NumPy promotion (bfloat16 with float16 or wider integers, where
/// np.result_type raises but ml_dtypes' ufunc loops run) get the least type both
/// cast to, which is what those loops compute in.
std::optional<EwType> numpy_least_common(const std::vector<EwType>& types) {
  if (types.empty()) return std::nullopt;
  Kind top = Kind::kBool;
  for (EwType t : types) top = std::max(top, kind_of(t));
  std::vector<EwType> bounds;
  for (const Info& c : kInfo) {
    bool bound = true;
    for (EwType t : types) bound = bound && numpy_pair(t, c.type) == c.type;
    if (bound) bounds.push_back(c.type);
  }
  std::optional<EwType> best;
  for (EwType c : bounds) {
    bool minimal = true;
    for (EwType u : bounds) minimal = minimal && (u == c || numpy_pair(u, c) != c);
    if (minimal && (!best || (kind_of(c) == top && kind_of(*best) != top))) best = c;
  }
  return best;
}

std::vector<EwType> strong_types(const std::vector<TypeInput>& inputs) {
  std::vector<EwType> out;
  for (const TypeInput& in : inputs) {
    if (in.weight != TypeInput::Weight::kWeak) out.push_back(in.type);
  }
  return out;
}

Kind weak_kind_of(const std::vector<TypeInput>& inputs, bool* any) {
  Kind k = Kind::kBool;
  *any = false;
  for (const TypeInput& in : inputs) {
    if (in.weight != TypeInput::Weight::kWeak) continue;
    k = std::max(k, kind_of(in.type));
    *any = true;
  }
  return k;
}

/// NumPy 2 (NEP 50): 0-d arrays and NumPy scalars are strong; a Python scalar only
/// raises the kind of the strong result.
EwType numpy_result_type(const std::vector<TypeInput>& inputs) {
  bool any_weak = false;
  const Kind weak_kind = weak_kind_of(inputs, &any_weak);
  const std::optional<EwType> strong = numpy_least_common(strong_types(inputs));
  internal_check(strong || any_weak, "result_type of no inputs");
  if (!strong) {  // Python scalars only: their default types
    if (weak_kind == Kind::kComplex) return EwType::kComplex128;
    if (weak_kind == Kind::kFloat) return EwType::kFloat64;
    return weak_kind == Kind::kBool ? EwType::kBool : EwType::kInt64;
  }
  Kind s = kind_of(*strong);
  // ml_dtypes' bfloat16 loops take a Python float as float32 (np.add gives float32,
  // although np.result_type says float64).
  if (*strong == EwType::kBFloat16 && weak_kind == Kind::kFloat) return EwType::kFloat32;
  if (!any_weak || weak_kind <= s || (weak_kind == Kind::kInt && s == Kind::kUInt)) return *strong;
  if (weak_kind == Kind::kInt || weak_kind == Kind::kUInt) return EwType::kInt64;  // bool tensor + int
  if (weak_kind == Kind::kFloat) return EwType::kFloat64;                          // integer tensor + float
  // A complex scalar keeps the precision of a float result.
  if (s == Kind::kFloat) return *strong == EwType::kFloat64 ? EwType::kComplex128 : EwType::kComplex64;
  return EwType::kComplex128;
}

/// PyTorch's promoteTypes over one category of inputs, in their order (as
/// TensorIterator reduces them).
std::optional<EwType> torch_reduce(const std::string& fn, const std::vector<TypeInput>& inputs,
                                   TypeInput::Weight weight) {
  std::optional<EwType> acc;
  for (const TypeInput& in : inputs) {
    if (in.weight != weight) continue;
    EwType t = in.type;
    if (weight == TypeInput::Weight::kWeak) {  // Python scalars: int64, the default float32, complex64
      t = kind_of(t) == Kind::kComplex ? EwType::kComplex64 : kind_of(t) == Kind::kFloat ? EwType::kFloat32 : t;
    }
    if (!acc) {
      acc = t;
      continue;
    }
    std::optional<EwType> r = torch_pair(*acc, t);
    if (!r) throw_no_torch_pair(fn, *acc, in);
    acc = r;
  }
  return acc;
}

}  // namespace

EwType result_type(const std::string& fn, const std::vector<TypeInput>& inputs, Promotion p) {
  if (p == Promotion::kNumPy) return numpy_result_type(inputs);
  std::optional<EwType> dims = torch_reduce(fn, inputs, TypeInput::Weight::kStrong);
  std::optional<EwType> zero = torch_reduce(fn, inputs, TypeInput::Weight::kZeroDim);
  std::optional<EwType> wrapped = torch_reduce(fn, inputs, TypeInput::Weight::kWeak);
  internal_check(dims || zero || wrapped, "result_type of no inputs");
  bool lower_half_complex = false, half_complex = false;
  std::optional<EwType> lower = combine_categories(fn, zero, wrapped, false, &lower_half_complex);
  std::optional<EwType> result = combine_categories(fn, dims, lower, lower_half_complex, &half_complex);
  if (half_complex) {
    throw TypeError(fn +
                    ": under PyTorch's rules the result type is complex32 (a float16 or bfloat16 input with a "
                    "complex one), which kjit.elementwise does not support; cast the inputs to float32 first");
  }
  return *result;
}

EwType float_result_type(const std::vector<TypeInput>& inputs, EwType promoted, Promotion p) {
  Kind k = kind_of(promoted);
  if (k == Kind::kFloat || k == Kind::kComplex) return promoted;
  if (p == Promotion::kTorch) return EwType::kFloat32;  // the default dtype
  // NumPy picks the first float loop every input casts to safely: float16 first.
  std::vector<EwType> types = strong_types(inputs);
  // A Python int that raised a bool result to int64 counts as int64.
  if (numpy_least_common(types) != promoted) types.push_back(promoted);
  types.push_back(EwType::kFloat16);
  return *numpy_least_common(types);
}

bool can_cast(EwType from, EwType to, Promotion p) {
  Kind f = kind_of(from), t = kind_of(to);
  if (f == Kind::kComplex && t != Kind::kComplex) return false;
  if (f == Kind::kFloat && (t == Kind::kInt || t == Kind::kUInt || t == Kind::kBool)) return false;
  if (f != Kind::kBool && t == Kind::kBool) return false;
  if (p == Promotion::kNumPy && f == Kind::kInt && t == Kind::kUInt) return false;  // same_kind
  return true;
}

}  // namespace iterator

DLDataType ew_dl_type(EwType t) { return iterator::info(t).dl; }

}  // namespace kjit
