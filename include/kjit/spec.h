// kjit/spec.h — the one signature model every front door produces.
//
// A FunctionSpec lists a kernel's parameters (tensors, scalars, the stream) and the
// constraints checked on every call. Front doors: parse_signature() for the string
// grammar (docs/spec.md) and SpecBuilder for code.
#ifndef KJIT_SPEC_H_
#define KJIT_SPEC_H_

#include <dlpack/dlpack.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kjit/expr.h"

namespace kjit {

/// A named element type ("float16", "float8_e4m3fn") with its DLPack code.
struct DTypeInfo {
  const char* name;
  DLDataType dl;
  const char* cpp_type;  ///< C++ element type for typed pointers, or nullptr.
};
/// Looks up a dtype by name, or by a spelling that means the same dtype in NumPy,
/// PyTorch and C++ ("half", "double", "long", NumPy's "f4", "i8", "c16");
/// nullptr when unknown.
const DTypeInfo* find_dtype(const std::string& name);
/// For an unknown dtype name: " ('float' means float64 in NumPy but float32 in
/// PyTorch and C++: ...)" for an ambiguous spelling, " (did you mean 'float32'?)"
/// for a close one, else "". Appended to messages that refuse `name`.
std::string dtype_spelling_hint(const std::string& name);
/// The dtype of a one-lane DLDataType (its first name: "float32", not "tfloat32");
/// nullptr when kjit has no name for it.
const DTypeInfo* find_dtype(DLDataType dl);
/// Every dtype name the grammar accepts, for error messages.
std::string known_dtype_names();
/// Sub-byte storage as TileLang defines it (bits * lanes < 8, bool aside): int4,
/// uint4, int1, float4_e2m1fn, float6_*. Such a tensor also accepts int8/uint8 bytes
/// that pack its values, its last dim counted in values (docs/spec.md).
bool is_packed(const DTypeInfo& d);

/// Scalar parameter types. float16/bfloat16 reach the kernel as uint16_t raw bits
/// (brainevent's convention); complex as std::complex<float|double>; str and bytes
/// (tvm-ffi's String and Bytes) as std::string, std::string_view or tvm::ffi::String/Bytes.
enum class ScalarType {
  kBool,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kUInt8,
  kUInt16,
  kUInt32,
  kUInt64,
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64,
  kComplex64,
  kComplex128,
  kStr,
  kBytes,
};
std::optional<ScalarType> find_scalar_type(const std::string& name);
const char* scalar_type_name(ScalarType t);
const char* scalar_cpp_type(ScalarType t);
bool is_integer(ScalarType t);
bool is_float(ScalarType t);  ///< float16, bfloat16, float32, float64
bool is_complex(ScalarType t);
bool is_text(ScalarType t);  ///< str, bytes
/// Every scalar type name, for error messages.
std::string known_scalar_names();
/// The values an integer scalar of type `t` takes as an int64 check sees them: the
/// range of the types narrower than int64, and [0, INT64_MAX] for uint64 (larger
/// values never reach a symbol); nullopt for int64 and non-integer types.
struct IntRange {
  int64_t lo;
  int64_t hi;
};
std::optional<IntRange> checked_int_range(ScalarType t);
/// The canonical text of `text` as a default of a scalar of type `t` ("True" ->
/// "true", "+2" -> "2"); nullopt, with the reason in `why`, when it is not one.
std::optional<std::string> canonical_default(ScalarType t, const std::string& text, std::string* why);

enum class DeviceKind { kCPU = kDLCPU, kCUDA = kDLCUDA };
const char* device_kind_name(DeviceKind d);

/// Where a piece of the spec came from, for errors that point at the text.
struct SourceSpan {
  size_t begin = 0;
  size_t end = 0;
};

struct TensorSpec {
  std::vector<DTypeInfo> dtypes;  ///< accepted dtypes; empty means any
  std::vector<Expr> shape;
  bool any_rank = false;  ///< "[...]": any rank and shape (shape is empty)
  bool out = false;
  bool optional = false;
  bool strided = false;
  std::vector<Expr> strides;  ///< explicit strides in elements; empty = none given
  int64_t align = 0;          ///< required data alignment in bytes; 0 = none
  DeviceKind device = DeviceKind::kCPU;
  bool device_given = false;  ///< "@cpu"/"@cuda" written, not defaulted
  /// "return": kjit allocates it (shape from the spec, on the inputs' device, by the
  /// caller's framework) and the call returns it; the kernel sees an output (out is
  /// set too). Python callers do not pass it.
  bool returned = false;
  /// "dtype(x)[...]": the dtype of tensor `x` (a returned tensor is allocated in it;
  /// another must have it); dtypes is empty then.
  std::string dtype_of;
  /// "T[...]": the spec's dtype variable T (FunctionSpec::dtype_vars); dtypes holds
  /// its alternatives.
  std::string dtype_var;
  /// "[*batch, n]": a named group of any number of leading dims (shape holds the
  /// dims after it). Every tensor naming the group has the same leading dims in a
  /// call, bound by the first one present; a returned tensor is allocated with them.
  std::string batch;
};

/// Shape index `dim` of a tensor's declared dims as messages name it: "shape[1]",
/// or counted from the end after a batch group ("shape[-1]"), since the group's
/// length varies from call to call.
std::string shape_field_text(const TensorSpec& t, const char* field, int dim);

/// A tensor of packed dtypes (validation makes every alternative packed alike).
bool is_packed(const TensorSpec& t);

enum class ParamKind { kTensor, kScalar, kStream };

struct Param {
  std::string name;
  ParamKind kind = ParamKind::kTensor;
  TensorSpec tensor;                       ///< kTensor only
  ScalarType scalar = ScalarType::kInt64;  ///< kScalar only
  /// kScalar only: the canonical text of its default ("1.0", "-3", "true"); empty
  /// when the caller must pass it. Python binds it when the argument is left out.
  std::string default_value;
  /// kScalar only ("n: int64 symbol"): kjit passes the value the tensors bound to the
  /// shape symbol of this name; callers do not pass it.
  bool symbol = false;
  /// kScalar only ("eps: T"): typed by dtype variable T, its value is converted to
  /// the dtype T is bound to (rounded, or range-checked); `scalar` is the type it is
  /// read as (float64 when T's alternatives are floating, int64 when integer).
  std::string scalar_var;
  SourceSpan span;
};

/// A dtype variable ("<T: float32|float64> x: T[n], w: T[n]"): the tensors typed T
/// share one dtype per call, that of the first tensor present that carries it
/// (inputs before returned tensors, in parameter order).
struct DTypeVar {
  std::string name;
  std::vector<DTypeInfo> dtypes;  ///< its alternatives (never empty)
  SourceSpan span;
};

enum class CmpOp { kEq, kNe, kLt, kLe, kGt, kGe };
const char* cmp_op_text(CmpOp op);

struct Constraint {
  Expr lhs;
  CmpOp op = CmpOp::kEq;
  Expr rhs;
  SourceSpan span;
};

struct FunctionSpec {
  std::string name;
  std::vector<DTypeVar> dtype_vars;
  std::vector<Param> params;
  std::vector<Constraint> constraints;
  /// How the stub calls the C++ function ("ns::f"); empty means `name` at global scope.
  std::string callee;
  /// A callee that is a template over dtype variables (`template <typename T>` with
  /// `<T: ...>` in the signature): its type parameters' variables in order. The
  /// module instantiates it for every combination of their C++ types and the stub
  /// calls the one for the dtypes bound in the call.
  std::vector<std::string> callee_template_vars;
  /// "; independent(m, k)": shape symbols the kernel computes each index of on its
  /// own (no result at index i reads another index of them), so a partitioner may
  /// split them across devices (docs/distributed.md). Batch groups are independent
  /// without saying so; every other symbol is replicated. In the order written.
  std::vector<std::string> independent;
  /// The module's function computing this one's gradients, declared with it
  /// (`// @kjit f(...) backward=f_backward`): the pairing mod.torch and mod.jax use
  /// (docs/torch.md, Autograd). Not part of the signature; empty when none.
  std::string backward;

  /// Parameters the caller passes (everything but the stream and symbol scalars), in order.
  std::vector<const Param*> call_args() const;
  /// The dtype variable called `name`, or nullptr.
  const DTypeVar* find_dtype_var(const std::string& name) const;
};

/// Canonical signature text; parse_signature(name, to_string(spec)) gives back spec.
std::string to_string(const FunctionSpec& spec);
std::string to_string(const Param& param);

/// Parses the signature grammar of docs/spec.md. Throws SpecError pointing at the
/// offending text. `default_device` applies to tensors without "@cpu"/"@cuda".
FunctionSpec parse_signature(const std::string& name, const std::string& signature,
                             DeviceKind default_device = DeviceKind::kCPU);
/// Parses one dim or constraint side ("2*k + 1"); throws SpecError.
Expr parse_expr(const std::string& text);

/// Checks what a parser cannot see alone: names are C identifiers and unique, every
/// symbol can be bound, every dim can be solved. Throws SpecError.
void validate(const FunctionSpec& spec);

/// Builds a FunctionSpec in code; build() validates it.
///
///   FunctionSpec s = SpecBuilder("add").tensor("a", "float32", {"n"})
///                        .tensor("b", "float32", {"n"}).out().build();
class SpecBuilder {
 public:
  explicit SpecBuilder(std::string name);
  /// Adds a tensor; `dtype` may be "float16|bfloat16" or "any"; dims are expressions.
  SpecBuilder& tensor(const std::string& name, const std::string& dtype, const std::vector<std::string>& dims);
  SpecBuilder& scalar(const std::string& name, const std::string& type);
  /// Declares dtype variable `name` with alternatives `dtypes` ("float32|float64"):
  /// tensors and scalars added after it may take `name` as their dtype or type.
  SpecBuilder& dtype_var(const std::string& name, const std::string& dtypes);
  /// A scalar kjit passes: the value of the shape symbol `name` ("n: int64 symbol").
  SpecBuilder& symbol(const std::string& name, const std::string& type = "int64");
  /// The default of the last scalar added ("1.0", "true"); the grammar's "= 1.0".
  SpecBuilder& default_value(const std::string& text);
  SpecBuilder& stream(const std::string& name = "stream");
  /// Modifiers of the last tensor added.
  SpecBuilder& out();
  /// The last tensor is allocated by kjit and returned ("return" in the grammar).
  SpecBuilder& returned();
  SpecBuilder& optional();
  SpecBuilder& strided();
  SpecBuilder& strides(const std::vector<std::string>& strides);
  SpecBuilder& align(int64_t bytes);
  SpecBuilder& device(const std::string& device);
  /// Adds a constraint such as "k % 8 == 0".
  SpecBuilder& constraint(const std::string& text);
  /// Marks shape symbols independent ("independent(m, k)" in the grammar).
  SpecBuilder& independent(const std::vector<std::string>& symbols);
  FunctionSpec build() const;

 private:
  TensorSpec& last_tensor(const char* modifier);
  FunctionSpec spec_;
  std::vector<std::string> constraint_text_;
  std::vector<std::string> independent_;
};

}  // namespace kjit

#endif  // KJIT_SPEC_H_
