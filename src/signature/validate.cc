// Checks a FunctionSpec as a whole: names, duplicates, the stream, solvability.
#include "signature/validate.h"

#include <cctype>
#include <set>

#include "kjit/errors.h"
#include "signature/binding_plan.h"
#include "signature/lexer.h"

namespace kjit {
namespace {

[[noreturn]] void fail_param(const FunctionSpec& spec, const std::string& signature, const Param& p,
                             const std::string& what) {
  std::string context = "signature of '" + spec_detail::printable(spec.name) + "'";
  if (!signature.empty() && p.span.end > p.span.begin) {
    throw SpecError(spec_detail::spec_error_message(context, signature, p.span.begin, p.span.end, what));
  }
  throw SpecError(context + ": " + what);
}

const Param* find_param(const FunctionSpec& spec, const std::string& name) {
  for (const Param& q : spec.params) {
    if (q.name == name) return &q;
  }
  return nullptr;
}

/// A symbol Python can read before the call: a whole dim of an input tensor
/// kjit does not allocate, or an integer parameter of that name.
bool is_read_before_call(const FunctionSpec& spec, const std::string& symbol) {
  for (const Param& q : spec.params) {
    if (q.kind == ParamKind::kScalar && q.name == symbol && is_integer(q.scalar) && !q.symbol) return true;
    if (q.kind != ParamKind::kTensor || q.tensor.returned) continue;
    // A packed tensor's last dim counts values, not the elements Python sees.
    size_t dims = q.tensor.shape.size() - (is_packed(q.tensor) && !q.tensor.shape.empty() ? 1 : 0);
    for (size_t d = 0; d < dims; ++d) {
      if (to_string(q.tensor.shape[d]) == symbol) return true;
    }
  }
  return false;
}

/// What kjit needs to allocate a returned tensor: one dtype, a fixed rank, a
/// compact layout, and dims it can compute from the caller's arguments.
void check_returned(const FunctionSpec& spec, const std::string& signature, const Param& p) {
  const TensorSpec& t = p.tensor;
  std::string what = "returned tensor '" + p.name + "'";
  if (!t.dtype_var.empty()) {
    if (dtype_var_carrier_names(spec, t.dtype_var).empty()) {
      fail_param(spec, signature, p,
                 what + " takes dtype variable " + t.dtype_var + ", which no input or out tensor carries: nothing " +
                     "would bind it before kjit allocates '" + p.name + "'");
    }
  } else if (t.dtype_of.empty() && t.dtypes.size() != 1) {
    fail_param(spec, signature, p,
               what + " needs exactly one dtype (kjit allocates it), got " +
                   (t.dtypes.empty() ? std::string("any") : std::to_string(t.dtypes.size()) + " alternatives") +
                   "; write dtype(x) to take input x's");
  }
  if (is_packed(t)) {
    fail_param(spec, signature, p,
               what + " is packed (" + t.dtypes[0].name +
                   "), which kjit cannot allocate (NumPy and torch have no such dtype); pass it as an out tensor of " +
                   "uint8 bytes");
  }
  if (t.any_rank) fail_param(spec, signature, p, what + " needs a shape (kjit allocates it), not [...]");
  if (t.optional || t.strided || !t.strides.empty()) {
    fail_param(spec, signature, p,
               what + " is allocated compact by kjit: it takes no optional, strided or strides[...]");
  }
  for (const Expr& e : t.shape) {
    for (const std::string& s : symbols_of(e)) {
      if (is_read_before_call(spec, s)) continue;
      fail_param(spec, signature, p,
                 what + ": symbol '" + s + "' of its shape must be a whole dim of an input tensor (like x: float32[" +
                     s + "]) or an integer parameter named '" + s + "', so kjit knows it before the call");
    }
  }
}

/// A packed tensor's last dim counts values held in bytes: its alternatives share
/// one width (else a uint8 tensor would be both bytes and values), it has a last dim,
/// and its layout is compact or `strided` (explicit strides would mix units).
void check_packed(const FunctionSpec& spec, const std::string& signature, const Param& p) {
  const TensorSpec& t = p.tensor;
  std::string head = "tensor '" + p.name + "'";
  const DTypeInfo* packed = nullptr;
  const DTypeInfo* other = nullptr;
  for (const DTypeInfo& d : t.dtypes) {
    if (is_packed(d) && !packed) {
      packed = &d;
    } else if (!is_packed(d) || d.dl.bits != packed->dl.bits) {
      other = &d;
    }
  }
  if (!packed) return;
  if (other) {
    fail_param(spec, signature, p,
               head + ": packed dtype " + packed->name + " cannot be listed with " + other->name +
                   " (a uint8/int8 tensor would hold either); list packed dtypes of one width only");
  }
  if (!t.any_rank && t.shape.empty()) {
    fail_param(spec, signature, p,
               head + " is packed (" + packed->name + ") and needs rank >= 1: its last dim counts the packed values");
  }
  if (!t.strides.empty()) {
    fail_param(spec, signature, p,
               head + " is packed (" + packed->name +
                   "): strides[...] would mix bytes and values; declare it 'strided' (its last dim stays contiguous)");
  }
}

/// "dtype(x)": x is another tensor parameter kjit does not allocate, and not packed
/// (its storage dtype says nothing of its values).
void check_dtype_of(const FunctionSpec& spec, const std::string& signature, const Param& p) {
  const std::string& x = p.tensor.dtype_of;
  const std::string what = (p.tensor.returned ? "returned tensor '" : "tensor '") + p.name + "': dtype(" + x + ")";
  const Param* src = find_param(spec, x);
  if (!src || src->kind != ParamKind::kTensor || src->tensor.returned || src == &p) {
    fail_param(spec, signature, p,
               what + " must name another input or out tensor, but '" + x + "' is " +
                   (!src                              ? "no parameter"
                    : src == &p                       ? "this tensor"
                    : src->kind != ParamKind::kTensor ? "not a tensor"
                                                      : "returned too (kjit allocates it)"));
  }
  if (is_packed(src->tensor)) {
    fail_param(spec, signature, p,
               what + " names packed tensor '" + x + "', whose storage dtype says nothing of its values; write the " +
                   (p.tensor.returned ? "returned dtype" : "dtype"));
  }
}

/// "[*batch, n]": a group name of its own (no parameter, symbol or dtype variable),
/// no strides[...] (its leading dims vary), and, on a returned tensor, a group some
/// input or out tensor binds.
void check_batch(const FunctionSpec& spec, const std::string& signature, const Param& p) {
  const std::string& g = p.tensor.batch;
  const std::string what = (p.tensor.returned ? "returned tensor '" : "tensor '") + p.name + "': batch group *" + g;
  if (!is_c_identifier(g)) fail_param(spec, signature, p, what + " is not a C identifier");
  if (find_param(spec, g)) fail_param(spec, signature, p, what + " has the name of a parameter; rename one");
  if (spec.find_dtype_var(g)) fail_param(spec, signature, p, what + " has the name of a dtype variable; rename one");
  for (const Param& q : spec.params) {
    if (q.kind != ParamKind::kTensor) continue;
    for (const Expr& e : q.tensor.shape) {
      if (symbols_of(e).count(g)) {
        fail_param(spec, signature, p,
                   what + " has the name of a shape symbol (" + q.name + "); a group is several dims, a symbol one");
      }
    }
  }
  if (!p.tensor.strides.empty()) {
    fail_param(spec, signature, p,
               what + " has leading dims of any count, so strides[...] cannot list its strides; declare it 'strided'");
  }
  if (p.tensor.returned && batch_carrier_names(spec, g).empty()) {
    fail_param(
        spec, signature, p,
        what + " is named by no input or out tensor: nothing would bind it before kjit allocates '" + p.name + "'");
  }
}

/// independent(...): each a shape symbol of some tensor, named once, and only ever a
/// whole dim: a dim such as 2*n or n + 1 could not be split with n.
void check_independent(const FunctionSpec& spec) {
  const std::string context = "signature of '" + spec_detail::printable(spec.name) + "': independent(";
  std::set<std::string> seen;
  for (const std::string& s : spec.independent) {
    if (!seen.insert(s).second) throw SpecError(context + s + ") names '" + s + "' twice");
    bool whole = false;
    for (const Param& p : spec.params) {
      if (p.kind != ParamKind::kTensor) continue;
      if (p.tensor.batch == s) {
        throw SpecError(context + s + "): '" + s + "' is a batch group, whose dims are independent already");
      }
      for (const Expr& e : p.tensor.shape) {
        if (e->op == ExprOp::kSymbol && e->name == s) {
          whole = true;
        } else if (symbols_of(e).count(s)) {
          throw SpecError(context + s + "): tensor '" + p.name + "' has the dim '" + to_string(e) + "', which kjit " +
                          "cannot split with '" + s + "': a symbol that is independent is only ever a whole dim");
        }
      }
    }
    if (!whole) {
      throw SpecError(context + s + "): '" + s + "' is not a dim of any tensor; independent(...) names shape " +
                      "symbols (x: float32[m, n] has m and n)");
    }
  }
}

/// Dtype variables: names of their own, alternatives that are not packed (a byte
/// carrier would hold either), each carried by a tensor the caller passes.
void check_dtype_vars(const FunctionSpec& spec, const std::string& signature) {
  const std::string context = "signature of '" + spec_detail::printable(spec.name) + "'";
  auto fail_var = [&](const DTypeVar& v, const std::string& what) {
    if (!signature.empty() && v.span.end > v.span.begin) {
      throw SpecError(spec_detail::spec_error_message(context, signature, v.span.begin, v.span.end, what));
    }
    throw SpecError(context + ": " + what);
  };
  for (const DTypeVar& v : spec.dtype_vars) {
    if (!is_c_identifier(v.name))
      fail_var(v, "dtype variable name '" + spec_detail::printable(v.name) + "' is not a C identifier");
    if (find_param(spec, v.name)) fail_var(v, "dtype variable " + v.name + " has the name of a parameter; rename one");
    for (const DTypeInfo& d : v.dtypes) {
      if (is_packed(d)) {
        fail_var(v, "dtype variable " + v.name + " lists packed dtype " + d.name +
                        ", whose byte carriers would match any variable; give packed tensors their dtype");
      }
    }
    if (dtype_var_carrier_names(spec, v.name).empty()) {
      fail_var(v, "dtype variable " + v.name + " is carried by no input or out tensor (x: " + v.name +
                      "[n]): nothing would bind it");
    }
  }
}

void check_tensor(const FunctionSpec& spec, const std::string& signature, const Param& p) {
  const TensorSpec& t = p.tensor;
  if (!t.strides.empty() && t.strides.size() != t.shape.size()) {
    fail_param(spec, signature, p,
               "tensor '" + p.name + "' has " + std::to_string(t.strides.size()) + " strides for rank " +
                   std::to_string(t.shape.size()));
  }
  if (t.any_rank && !t.strides.empty()) {
    fail_param(spec, signature, p, "tensor '" + p.name + "' has any rank ([...]) and cannot list strides[...]");
  }
  if (!t.strides.empty() && t.strided) {
    fail_param(spec, signature, p, "tensor '" + p.name + "' is both 'strided' and has explicit strides[...]");
  }
  if (t.align < 0 || (t.align & (t.align - 1)) != 0) {
    fail_param(spec, signature, p,
               "tensor '" + p.name + "': align(" + std::to_string(t.align) + ") must be a power of two");
  }
  if (!t.dtype_of.empty()) check_dtype_of(spec, signature, p);
  if (!t.batch.empty()) check_batch(spec, signature, p);
  check_packed(spec, signature, p);
  if (t.returned) check_returned(spec, signature, p);
}

/// As in Python, once a parameter has a default every later one the caller
/// passes has one too: otherwise positional calls could not leave it out.
void check_default_order(const FunctionSpec& spec, const std::string& signature) {
  const Param* first_default = nullptr;
  for (const Param* p : spec.call_args()) {
    if (p->kind == ParamKind::kTensor && p->tensor.returned) continue;  // not passed by Python callers
    if (!p->default_value.empty()) {
      if (!first_default) first_default = p;
    } else if (first_default) {
      fail_param(spec, signature, *p,
                 "parameter '" + p->name + "' has no default but follows '" + first_default->name +
                     "', which has one: parameters after a default need defaults too (move '" + p->name + "' before '" +
                     first_default->name + "')");
    }
  }
}

/// A second parameter of the name; when one of the two is a symbol scalar, say
/// which one to keep.
[[noreturn]] void fail_duplicate(const FunctionSpec& spec, const std::string& signature, const Param& second) {
  const Param* first = find_param(spec, second.name);
  std::string what = "duplicate parameter name '" + second.name + "'";
  if (first->symbol != second.symbol) {
    const Param& symbol = first->symbol ? *first : second;
    const Param& passed = first->symbol ? second : *first;
    what += ": '" + to_string(symbol) + "' is passed by kjit (the value the shapes bind), so the caller cannot pass '" +
            to_string(passed) + "' too; keep one: the symbol to have kjit pass it, or drop 'symbol' to have the " +
            "caller pass it (checked against the shapes)";
  }
  fail_param(spec, signature, second, what);
}

}  // namespace

std::string first_bad_char(const std::string& name) {
  for (size_t i = 0; i < name.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(name[i]);
    if (c >= 0x80 || c < 0x20 || c == 0x7f) return "; it has a " + spec_detail::describe_char(name, i);
  }
  return "";
}

bool is_cpp_keyword(const std::string& name) {
  static const std::set<std::string> kKeywords = {
      "alignas",     "alignof",   "and",       "and_eq",    "asm",      "auto",         "bitand",
      "bitor",       "bool",      "break",     "case",      "catch",    "char",         "char16_t",
      "char32_t",    "char8_t",   "class",     "compl",     "concept",  "const",        "const_cast",
      "consteval",   "constexpr", "constinit", "continue",  "co_await", "co_return",    "co_yield",
      "decltype",    "default",   "delete",    "do",        "double",   "dynamic_cast", "else",
      "enum",        "explicit",  "export",    "extern",    "false",    "float",        "for",
      "friend",      "goto",      "if",        "inline",    "int",      "long",         "mutable",
      "namespace",   "new",       "noexcept",  "not",       "not_eq",   "nullptr",      "operator",
      "or",          "or_eq",     "private",   "protected", "public",   "register",     "reinterpret_cast",
      "requires",    "return",    "short",     "signed",    "sizeof",   "static",       "static_assert",
      "static_cast", "struct",    "switch",    "template",  "this",     "thread_local", "throw",
      "true",        "try",       "typedef",   "typeid",    "typename", "union",        "unsigned",
      "using",       "virtual",   "void",      "volatile",  "wchar_t",  "while",        "xor",
      "xor_eq"};
  return kKeywords.count(name) != 0;
}

bool is_c_identifier(const std::string& name) {
  if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_')) return false;
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

void validate_with_text(const FunctionSpec& spec, const std::string& signature) {
  if (!is_c_identifier(spec.name)) {
    throw SpecError("function name '" + spec_detail::printable(spec.name) +
                    "' is not a C identifier (letters, digits and '_', not starting with a digit)" +
                    first_bad_char(spec.name));
  }
  if (is_cpp_keyword(spec.name)) {
    throw SpecError("function name '" + spec.name + "' is a C++ keyword; the kernel needs a name it can be called by");
  }
  std::set<std::string> names;
  const Param* stream = nullptr;
  for (const Param& p : spec.params) {
    if (!is_c_identifier(p.name)) {
      fail_param(
          spec, signature, p,
          "parameter name '" + spec_detail::printable(p.name) + "' is not a C identifier" + first_bad_char(p.name));
    }
    if (!names.insert(p.name).second) fail_duplicate(spec, signature, p);
    if (p.kind == ParamKind::kStream) {
      if (stream)
        fail_param(spec, signature, p,
                   "a second stream parameter '" + p.name + "' (the first is '" + stream->name +
                       "'); a kernel gets one stream");
      stream = &p;
    }
    if (p.kind == ParamKind::kTensor) check_tensor(spec, signature, p);
  }
  check_default_order(spec, signature);
  check_dtype_vars(spec, signature);
  check_independent(spec);
  // A symbol may share its name with an integer scalar (which then passes it) but
  // not with a tensor or the stream.
  for (const Param& p : spec.params) {
    if (p.kind != ParamKind::kTensor) continue;
    for (const std::vector<Expr>* dims : {&p.tensor.shape, &p.tensor.strides}) {
      for (const Expr& e : *dims) {
        for (const std::string& s : symbols_of(e)) {
          for (const Param& q : spec.params) {
            if (q.name == s && q.kind != ParamKind::kScalar) {
              fail_param(spec, signature, p,
                         "shape symbol '" + s + "' has the name of " +
                             (q.kind == ParamKind::kTensor ? "tensor" : "stream") + " parameter '" + s +
                             "'; rename one of them");
            }
          }
        }
      }
    }
  }
  make_binding_plan(spec, signature);
}

void validate(const FunctionSpec& spec) { validate_with_text(spec, ""); }

}  // namespace kjit
