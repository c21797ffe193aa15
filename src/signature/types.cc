// Name tables of the spec model: dtypes, scalar types, devices, comparison ops.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kjit/errors.h"
#include "kjit/spec.h"
#include "support/closest_name.h"

namespace kjit {
namespace {

constexpr DTypeInfo kDTypes[] = {
    {"bool", {kDLBool, 8, 1}, "bool"},
    {"int8", {kDLInt, 8, 1}, "int8_t"},
    {"int16", {kDLInt, 16, 1}, "int16_t"},
    {"int32", {kDLInt, 32, 1}, "int32_t"},
    {"int64", {kDLInt, 64, 1}, "int64_t"},
    {"uint8", {kDLUInt, 8, 1}, "uint8_t"},
    {"uint16", {kDLUInt, 16, 1}, "uint16_t"},
    {"uint32", {kDLUInt, 32, 1}, "uint32_t"},
    {"uint64", {kDLUInt, 64, 1}, "uint64_t"},
    {"float16", {kDLFloat, 16, 1}, nullptr},
    {"bfloat16", {kDLBfloat, 16, 1}, nullptr},
    {"float32", {kDLFloat, 32, 1}, "float"},
    {"float64", {kDLFloat, 64, 1}, "double"},
    {"complex64", {kDLComplex, 64, 1}, nullptr},
    {"complex128", {kDLComplex, 128, 1}, nullptr},
    {"float8_e3m4", {kDLFloat8_e3m4, 8, 1}, nullptr},
    {"float8_e4m3", {kDLFloat8_e4m3, 8, 1}, nullptr},
    {"float8_e4m3b11fnuz", {kDLFloat8_e4m3b11fnuz, 8, 1}, nullptr},
    {"float8_e4m3fn", {kDLFloat8_e4m3fn, 8, 1}, nullptr},
    {"float8_e4m3fnuz", {kDLFloat8_e4m3fnuz, 8, 1}, nullptr},
    {"float8_e5m2", {kDLFloat8_e5m2, 8, 1}, nullptr},
    {"float8_e5m2fnuz", {kDLFloat8_e5m2fnuz, 8, 1}, nullptr},
    {"float8_e8m0fnu", {kDLFloat8_e8m0fnu, 8, 1}, nullptr},
    {"float6_e2m3fn", {kDLFloat6_e2m3fn, 6, 1}, nullptr},
    {"float6_e3m2fn", {kDLFloat6_e3m2fn, 6, 1}, nullptr},
    {"float4_e2m1fn", {kDLFloat4_e2m1fn, 4, 1}, nullptr},
    // TileLang's tfloat32: float32 storage (DLPack has no tf32 code), so a
    // float32 tensor is accepted and the kernel reads floats.
    {"tfloat32", {kDLFloat, 32, 1}, "float"},
    // Sub-byte integers: packed storage (docs/spec.md, "Packed sub-byte tensors").
    {"int1", {kDLInt, 1, 1}, nullptr},
    {"int2", {kDLInt, 2, 1}, nullptr},
    {"int4", {kDLInt, 4, 1}, nullptr},
    {"uint1", {kDLUInt, 1, 1}, nullptr},
    {"uint2", {kDLUInt, 2, 1}, nullptr},
    {"uint4", {kDLUInt, 4, 1}, nullptr},
};

struct ScalarInfo {
  ScalarType type;
  const char* name;
  const char* cpp;
};

constexpr ScalarInfo kScalars[] = {
    {ScalarType::kBool, "bool", "bool"},
    {ScalarType::kInt8, "int8", "int8_t"},
    {ScalarType::kInt16, "int16", "int16_t"},
    {ScalarType::kInt32, "int32", "int32_t"},
    {ScalarType::kInt64, "int64", "int64_t"},
    {ScalarType::kUInt8, "uint8", "uint8_t"},
    {ScalarType::kUInt16, "uint16", "uint16_t"},
    {ScalarType::kUInt32, "uint32", "uint32_t"},
    {ScalarType::kUInt64, "uint64", "uint64_t"},
    {ScalarType::kFloat16, "float16", "uint16_t"},
    {ScalarType::kBFloat16, "bfloat16", "uint16_t"},
    {ScalarType::kFloat32, "float32", "float"},
    {ScalarType::kFloat64, "float64", "double"},
    {ScalarType::kComplex64, "complex64", "std::complex<float>"},
    {ScalarType::kComplex128, "complex128", "std::complex<double>"},
    {ScalarType::kStr, "str", "std::string"},
    {ScalarType::kBytes, "bytes", "std::string"},
};

/// Other spellings that mean one dtype in NumPy, PyTorch and C++ alike (NumPy's
/// character codes, torch's aliases).
struct Alias {
  const char* spelling;
  const char* name;
};
constexpr Alias kAliases[] = {
    {"half", "float16"},     {"double", "float64"},     {"short", "int16"},   {"long", "int64"},
    {"cfloat", "complex64"}, {"cdouble", "complex128"}, {"bf16", "bfloat16"}, {"f2", "float16"},
    {"f4", "float32"},       {"f8", "float64"},         {"c8", "complex64"},  {"c16", "complex128"},
    {"i1", "int8"},          {"i2", "int16"},           {"i4", "int32"},      {"i8", "int64"},
    {"u1", "uint8"},         {"u2", "uint16"},          {"u4", "uint32"},     {"u8", "uint64"},
    {"b1", "bool"},
};

/// Spellings whose meaning differs between NumPy, PyTorch and C++: refused, with why.
struct Ambiguous {
  const char* spelling;
  const char* why;
};
constexpr Ambiguous kAmbiguous[] = {
    {"float", "float64 in NumPy but float32 in PyTorch and C++: write float32 or float64"},
    {"int", "int64 in NumPy but int32 in PyTorch and C++: write int32 or int64"},
    {"complex", "complex128 in NumPy and Python but has no fixed width elsewhere: write complex64 or complex128"},
    {"uint", "uint64 in NumPy but has no fixed width elsewhere: write uint32 or uint64"},
};

/// The canonical name of `name` (itself when it is not an alias).
const char* canonical(const std::string& name) {
  for (const Alias& a : kAliases) {
    if (name == a.spelling) return a.name;
  }
  return name.c_str();
}

const ScalarInfo& scalar_info(ScalarType t) {
  for (const ScalarInfo& s : kScalars) {
    if (s.type == t) return s;
  }
  throw InternalError("kjit internal error: unknown ScalarType");
}

}  // namespace

const DTypeInfo* find_dtype(const std::string& name) {
  const std::string wanted = canonical(name);
  for (const DTypeInfo& d : kDTypes) {
    if (wanted == d.name) return &d;
  }
  return nullptr;
}

std::string dtype_spelling_hint(const std::string& name) {
  if (find_dtype(name) != nullptr) return "";  // a dtype, refused for another reason (not a scalar type, say)
  for (const Ambiguous& a : kAmbiguous) {
    if (name == a.spelling) return " ('" + name + "' means " + a.why + ")";
  }
  std::vector<std::string> names;
  for (const DTypeInfo& d : kDTypes) names.push_back(d.name);
  for (const Alias& a : kAliases) names.push_back(a.name);
  const std::string best = closest_name(name, names);
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

const DTypeInfo* find_dtype(DLDataType dl) {
  for (const DTypeInfo& d : kDTypes) {
    if (d.dl.code == dl.code && d.dl.bits == dl.bits && d.dl.lanes == dl.lanes) return &d;
  }
  return nullptr;
}

bool is_packed(const DTypeInfo& d) { return d.dl.code != kDLBool && d.dl.bits * d.dl.lanes < 8; }

bool is_packed(const TensorSpec& t) { return !t.dtypes.empty() && is_packed(t.dtypes[0]); }

std::string known_dtype_names() {
  std::string out;
  for (const DTypeInfo& d : kDTypes) {
    if (!out.empty()) out += ", ";
    out += d.name;
  }
  return out + ", any";
}

std::optional<ScalarType> find_scalar_type(const std::string& name) {
  const std::string wanted = canonical(name);
  for (const ScalarInfo& s : kScalars) {
    if (wanted == s.name) return s.type;
  }
  return std::nullopt;
}

const char* scalar_type_name(ScalarType t) { return scalar_info(t).name; }
const char* scalar_cpp_type(ScalarType t) { return scalar_info(t).cpp; }

bool is_float(ScalarType t) {
  return t == ScalarType::kFloat16 || t == ScalarType::kBFloat16 || t == ScalarType::kFloat32 ||
         t == ScalarType::kFloat64;
}
bool is_complex(ScalarType t) { return t == ScalarType::kComplex64 || t == ScalarType::kComplex128; }
bool is_text(ScalarType t) { return t == ScalarType::kStr || t == ScalarType::kBytes; }
std::optional<IntRange> checked_int_range(ScalarType t) {
  switch (t) {
    case ScalarType::kInt8:
      return IntRange{INT8_MIN, INT8_MAX};
    case ScalarType::kInt16:
      return IntRange{INT16_MIN, INT16_MAX};
    case ScalarType::kInt32:
      return IntRange{INT32_MIN, INT32_MAX};
    case ScalarType::kUInt8:
      return IntRange{0, UINT8_MAX};
    case ScalarType::kUInt16:
      return IntRange{0, UINT16_MAX};
    case ScalarType::kUInt32:
      return IntRange{0, UINT32_MAX};
    case ScalarType::kUInt64:
      return IntRange{0, INT64_MAX};
    default:
      return std::nullopt;
  }
}

bool is_integer(ScalarType t) { return !is_float(t) && !is_complex(t) && !is_text(t) && t != ScalarType::kBool; }

std::string known_scalar_names() {
  std::string out;
  for (const ScalarInfo& s : kScalars) out += (out.empty() ? "" : ", ") + std::string(s.name);
  return out;
}

const char* device_kind_name(DeviceKind d) { return d == DeviceKind::kCUDA ? "cuda" : "cpu"; }

const char* cmp_op_text(CmpOp op) {
  switch (op) {
    case CmpOp::kEq:
      return "==";
    case CmpOp::kNe:
      return "!=";
    case CmpOp::kLt:
      return "<";
    case CmpOp::kLe:
      return "<=";
    case CmpOp::kGt:
      return ">";
    case CmpOp::kGe:
      return ">=";
  }
  throw InternalError("kjit internal error: unknown CmpOp");
}

const DTypeVar* FunctionSpec::find_dtype_var(const std::string& name) const {
  for (const DTypeVar& v : dtype_vars) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

std::vector<const Param*> FunctionSpec::call_args() const {
  std::vector<const Param*> out;
  for (const Param& p : params) {
    if (p.kind != ParamKind::kStream && !p.symbol) out.push_back(&p);
  }
  return out;
}

}  // namespace kjit
