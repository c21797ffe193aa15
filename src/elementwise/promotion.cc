// Promotion follows NumPy 2 (NEP 50) and PyTorch's ResultTypeState; the tests use
// numpy.result_type and torch as oracles.
#include "elementwise/promotion.h"

#include <algorithm>

#include "kjit/errors.h"

namespace kjit {
namespace ew {
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

/// PyTorch's combine_categories(higher, lower).
EwType combine_categories(std::optional<EwType> higher, std::optional<EwType> lower, Promotion p) {
  if (!higher) return *lower;
  if (!lower) return *higher;
  Kind h = kind_of(*higher), l = kind_of(*lower);
  if (h == Kind::kComplex) return *higher;
  if (l == Kind::kComplex)
    return h == Kind::kFloat ? complex_of(*higher == EwType::kFloat64 ? *higher : EwType::kFloat32) : *lower;
  if (h == Kind::kFloat) return *higher;
  if (*higher == EwType::kBool || l == Kind::kFloat) return promote(*higher, *lower, p);
  return *higher;
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

EwType promote(EwType a, EwType b, Promotion p) {
  if (a == b) return a;
  Kind ka = kind_of(a), kb = kind_of(b);
  if (ka == Kind::kBool) return b;
  if (kb == Kind::kBool) return a;
  if (is_integer(a) && is_integer(b)) return promote_ints(a, b);
  if (ka == Kind::kComplex || kb == Kind::kComplex) {
    EwType ra = ka == Kind::kComplex ? real_of(a) : a, rb = kb == Kind::kComplex ? real_of(b) : b;
    return complex_of(promote(ra, rb, p) == EwType::kFloat64 ? EwType::kFloat64 : EwType::kFloat32);
  }
  if (ka == Kind::kFloat && kb == Kind::kFloat) return float_max(a, b);
  // One integer, one float.
  EwType f = ka == Kind::kFloat ? a : b, i = ka == Kind::kFloat ? b : a;
  if (p == Promotion::kTorch) return f;  // PyTorch: the float type wins
  // ml_dtypes: bfloat16 holds int8/uint8 exactly, so it stays bfloat16.
  if (f == EwType::kBFloat16 && size_of(i) == 1) return f;
  return float_max(f, float_for_int(i));
}

EwType result_type(const std::vector<TypeInput>& inputs, Promotion p) {
  std::optional<EwType> strong, zero_dim, weak;
  Kind weak_kind = Kind::kBool;
  for (const TypeInput& in : inputs) {
    auto& slot = in.weight == TypeInput::Weight::kStrong
                     ? strong
                     : (in.weight == TypeInput::Weight::kZeroDim && p == Promotion::kTorch ? zero_dim : strong);
    if (in.weight == TypeInput::Weight::kWeak) {
      weak_kind = std::max(weak_kind, kind_of(in.type));
      weak = weak ? promote(*weak, in.type, p) : in.type;
      continue;
    }
    slot = slot ? promote(*slot, in.type, p) : in.type;
  }
  if (p == Promotion::kTorch) {
    // Python scalars: int64, the default float32, complex64.
    std::optional<EwType> wrapped;
    if (weak) {
      wrapped = weak_kind == Kind::kComplex ? EwType::kComplex64
                : weak_kind == Kind::kFloat ? EwType::kFloat32
                : weak_kind == Kind::kBool  ? EwType::kBool
                                            : EwType::kInt64;
    }
    std::optional<EwType> lower =
        zero_dim || wrapped ? std::optional<EwType>(combine_categories(zero_dim, wrapped, p)) : std::nullopt;
    internal_check(strong || lower, "result_type of no inputs");
    return combine_categories(strong, lower, p);
  }
  // NumPy 2: a weak scalar only raises the kind of the strong result.
  if (!strong) {
    internal_check(weak.has_value(), "result_type of no inputs");
    if (weak_kind == Kind::kComplex) return EwType::kComplex128;
    if (weak_kind == Kind::kFloat) return EwType::kFloat64;
    if (weak_kind == Kind::kBool) return EwType::kBool;
    return EwType::kInt64;
  }
  Kind s = kind_of(*strong);
  if (!weak || weak_kind <= s || (weak_kind == Kind::kInt && s == Kind::kUInt)) return *strong;
  if (weak_kind == Kind::kInt || weak_kind == Kind::kUInt) return EwType::kInt64;  // bool tensor + int
  if (weak_kind == Kind::kFloat) return s == Kind::kComplex ? *strong : EwType::kFloat64;
  // complex scalar: keep the precision of a float result
  if (s == Kind::kFloat) return *strong == EwType::kFloat64 ? EwType::kComplex128 : EwType::kComplex64;
  return EwType::kComplex128;
}

bool can_cast(EwType from, EwType to, Promotion p) {
  Kind f = kind_of(from), t = kind_of(to);
  if (f == Kind::kComplex && t != Kind::kComplex) return false;
  if (f == Kind::kFloat && (t == Kind::kInt || t == Kind::kUInt || t == Kind::kBool)) return false;
  if (f != Kind::kBool && t == Kind::kBool) return false;
  if (p == Promotion::kNumPy && f == Kind::kInt && t == Kind::kUInt) return false;  // same_kind
  return true;
}

}  // namespace ew

DLDataType ew_dl_type(EwType t) { return ew::info(t).dl; }

}  // namespace kjit
