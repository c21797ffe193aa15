// Front door 1: the signature string ("a: float32[n], b: float32[n] out; n % 4 == 0").
#include <map>
#include <string>
#include <vector>

#include "kjit/errors.h"
#include "kjit/spec.h"
#include "signature/lexer.h"
#include "signature/validate.h"

namespace kjit {
namespace {

using spec_detail::Tok;
using spec_detail::Token;

const char* const kAttrHelp = "out, return, optional, strided, strides[...], align(N), @cpu, @cuda";

class SignatureParser {
 public:
  SignatureParser(std::string context, const std::string& text, DeviceKind default_device)
      : context_(std::move(context)),
        text_(text),
        tokens_(spec_detail::tokenize(text, context_)),
        default_device_(default_device) {}

  FunctionSpec parse_function(const std::string& name) {
    FunctionSpec spec;
    spec.name = name;
    if (accept("<")) parse_dtype_vars(&spec);
    vars_ = &spec.dtype_vars;
    if (peek().kind == Tok::kEnd) return spec;  // a function without parameters
    spec.params.push_back(parse_param());
    while (accept(",")) spec.params.push_back(parse_param());
    if (accept(";")) {
      do {
        if (!parse_independent(&spec)) spec.constraints.push_back(parse_constraint());
      } while (accept(","));
    }
    if (peek().kind != Tok::kEnd) {
      fail(peek(),
           "unexpected '" + peek().text + "': expected ',' before the next parameter or ';' before constraints");
    }
    return spec;
  }

  Expr parse_standalone_expr() {
    Expr e = checked_expr(peek().begin);
    if (peek().kind != Tok::kEnd) fail(peek(), "unexpected '" + peek().text + "' after the expression");
    return e;
  }

 private:
  const Token& peek() const { return tokens_[pos_]; }
  const Token& next() { return tokens_[pos_ == tokens_.size() - 1 ? pos_ : pos_++]; }

  bool accept(const char* punct) {
    if (peek().kind == Tok::kPunct && peek().text == punct) {
      ++pos_;
      return true;
    }
    return false;
  }

  [[noreturn]] void fail(const Token& at, const std::string& what) const {
    throw SpecError(spec_detail::spec_error_message(context_, text_, at.begin, at.end, what));
  }
  [[noreturn]] void fail_span(size_t begin, size_t end, const std::string& what) const {
    throw SpecError(spec_detail::spec_error_message(context_, text_, begin, end, what));
  }

  std::string describe(const Token& t) const {
    return t.kind == Tok::kEnd ? std::string("end of signature") : "'" + t.text + "'";
  }

  void expect(const char* punct, const char* why) {
    if (!accept(punct)) fail(peek(), std::string("expected '") + punct + "' " + why + ", got " + describe(peek()));
  }

  const Token& expect_name(const char* what) {
    if (peek().kind != Tok::kName) fail(peek(), std::string("expected ") + what + ", got " + describe(peek()));
    return next();
  }

  /// A literal's value (negated: written after a unary minus); at most 2**63 - 1,
  /// or 2**63 when negated.
  int64_t parse_int(const Token& t, bool negated) {
    uint64_t v = 0;
    const uint64_t limit = negated ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
    for (char c : t.text) {
      uint64_t digit = static_cast<uint64_t>(c - '0');
      if (v > (limit - digit) / 10) {
        fail(t, "number '" + std::string(negated ? "-" : "") + t.text + "' does not fit in int64 (" +
                    (negated ? "at least -2**63" : "at most 2**63 - 1") + ")");
      }
      v = v * 10 + digit;
    }
    return negated ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
  }

  /// "<T: float32|float64, U: int32|int64>" before the parameters: the dtype
  /// variables, each with its alternatives.
  void parse_dtype_vars(FunctionSpec* spec) {
    do {
      const Token& name = expect_name("a dtype variable's name (<T: float32|float64> ...)");
      DTypeVar v;
      v.name = name.text;
      v.span.begin = name.begin;
      for (const DTypeVar& seen : spec->dtype_vars) {
        if (seen.name == v.name) fail(name, "dtype variable '" + v.name + "' is declared twice");
      }
      if (find_dtype(v.name) || find_scalar_type(v.name) || v.name == "any" || v.name == "dtype" ||
          v.name == "stream") {
        fail(name, "'" + v.name + "' names a type: a dtype variable needs a name of its own (T, U, ...)");
      }
      expect(":", ("after dtype variable '" + v.name + "' (<" + v.name + ": float32|float64>)").c_str());
      TensorSpec alternatives;
      parse_dtypes(expect_name(("the dtypes dtype variable '" + v.name + "' takes").c_str()), &alternatives);
      if (alternatives.dtypes.empty() || !alternatives.dtype_of.empty() || !alternatives.dtype_var.empty()) {
        fail_span(name.begin, tokens_[pos_ - 1].end,
                  "dtype variable '" + v.name + "' needs its dtypes listed (" + v.name +
                      ": float32|float64): 'any', dtype(...) and other variables do not apply");
      }
      v.dtypes = std::move(alternatives.dtypes);
      v.span.end = tokens_[pos_ - 1].end;
      spec->dtype_vars.push_back(std::move(v));
    } while (accept(","));
    expect(">", "to close the dtype variables (<T: float32|float64> x: T[n], ...)");
  }

  const DTypeVar* dtype_var_named(const std::string& name) const {
    if (vars_ == nullptr) return nullptr;
    for (const DTypeVar& v : *vars_) {
      if (v.name == name) return &v;
    }
    return nullptr;
  }

  Param parse_param() {
    const Token& name = expect_name("a parameter name");
    Param p;
    p.name = name.text;
    p.span.begin = name.begin;
    expect(":", ("after parameter name '" + name.text + "'").c_str());
    parse_type(&p);
    if (accept("=")) parse_default(&p);
    p.span.end = tokens_[pos_ - 1].end;
    return p;
  }

  /// "= VALUE" after a scalar: its default, in canonical form.
  void parse_default(Param* p) {
    if (peek().kind != Tok::kValue) fail(peek(), "expected a default value after '=', got " + describe(peek()));
    const Token& v = next();
    if (p->kind != ParamKind::kScalar) {
      fail(v, "parameter '" + p->name + "' is a " + (p->kind == ParamKind::kTensor ? "tensor" : "stream") +
                  ": only scalars take a default");
    }
    if (p->symbol) {
      fail(v, "parameter '" + p->name + "' is a symbol (kjit passes the value the shapes bind, the caller never does)" +
                  ": it takes no default; write '" + p->name + ": " + scalar_type_name(p->scalar) + " symbol'");
    }
    std::string why;
    std::optional<std::string> value = canonical_default(p->scalar, v.text, &why);
    if (!value) fail(v, "bad default '" + v.text + "' of '" + p->name + "': " + why);
    p->default_value = *value;
  }

  void parse_type(Param* p) {
    const Token& first = expect_name("a type (a dtype such as float32[n], a scalar type, or stream)");
    if (first.text == "stream") {
      p->kind = ParamKind::kStream;
      return;
    }
    bool is_tensor = peek().text == "[" || peek().text == "|" || (first.text == "dtype" && peek().text == "(");
    if (!is_tensor) {
      if (const DTypeVar* v = dtype_var_named(first.text)) {  // "eps: T": read in T's family, converted to its dtype
        p->kind = ParamKind::kScalar;
        p->scalar_var = v->name;
        p->scalar = dtype_var_scalar(*v, first);
        parse_scalar_attr(p);
        if (p->symbol)
          fail(first, "scalar '" + p->name + "' is typed by dtype variable " + v->name +
                          ": a symbol's type is an integer type (n: int64 symbol)");
        return;
      }
      auto scalar = find_scalar_type(first.text);
      if (scalar) {
        p->kind = ParamKind::kScalar;
        p->scalar = *scalar;
        parse_scalar_attr(p);
        return;
      }
      if (find_dtype(first.text) || first.text == "any") {
        fail(first, "'" + first.text + "' without a shape is not a scalar type: a tensor needs one, e.g. '" +
                        first.text + "[n]' ('" + first.text + "[]' for rank 0, '" + first.text +
                        "[...]' for any rank); scalar types are " + known_scalar_names());
      }
      fail(first, "unknown type '" + first.text + "'" + dtype_spelling_hint(first.text) +
                      ": expected a dtype with a shape (" + known_dtype_names() + "), a scalar type or 'stream'");
    }
    p->kind = ParamKind::kTensor;
    p->tensor.device = default_device_;
    parse_dtypes(first, &p->tensor);
    expect("[", "to open the shape");
    if (accept("...")) {
      p->tensor.any_rank = true;
      if (peek().text == ",") {
        fail(peek(), kAnyRankAlone);
      }
      expect("]", "to close '[...]' (any rank)");
    } else if (accept("*")) {  // "[*batch, n]": a named group of leading dims
      p->tensor.batch = expect_name("a batch group's name after '*' ([*batch, n])").text;
      if (accept(",")) parse_dims(p);
      expect("]", "to close the shape");
    } else if (!accept("]")) {
      parse_dims(p);
      expect("]", "to close the shape");
    }
    parse_attrs(p);
  }

  static constexpr const char* kAnyRankAlone =
      "'[...]' is any rank and shape, alone; for leading dims of any count before named ones, name a batch group: "
      "[*batch, n]";

  void parse_dims(Param* p) {
    do {
      if (peek().text == "...") fail(peek(), kAnyRankAlone);
      if (peek().text == "*")
        fail(peek(), "a shape has at most one batch group (*batch), first: it names the leading dims");
      p->tensor.shape.push_back(parse_dim("shape"));
    } while (accept(","));
  }

  /// "symbol" after a scalar type: kjit passes the shape symbol's value. Any other
  /// word there is a mistake worth naming (tensor attributes do not apply).
  void parse_scalar_attr(Param* p) {
    if (peek().kind != Tok::kName) return;
    const Token& a = next();
    if (a.text != "symbol") {
      fail(a, "unknown attribute '" + a.text + "' of scalar '" + p->name +
                  "': a scalar takes 'symbol' (kjit passes the shape symbol's value) or '= default'");
    }
    p->symbol = true;
  }

  /// The type a scalar typed by dtype variable `v` is read as: float64 when v's
  /// alternatives are floating types, int64 when integer types (bool among them).
  ScalarType dtype_var_scalar(const DTypeVar& v, const Token& at) const {
    bool floating = true, integral = true;
    for (const DTypeInfo& d : v.dtypes) {
      floating = floating && (d.dl.code == kDLFloat || d.dl.code == kDLBfloat) && d.dl.lanes == 1 && !is_packed(d);
      integral = integral && (d.dl.code == kDLInt || d.dl.code == kDLUInt || d.dl.code == kDLBool) && d.dl.lanes == 1 &&
                 !is_packed(d);
    }
    if (floating) return ScalarType::kFloat64;
    if (integral) return ScalarType::kInt64;
    fail(at, "a scalar typed by dtype variable " + v.name + " takes a value of the dtype " + v.name + " binds, so " +
                 v.name + "'s dtypes must be all floating (float16, bfloat16, float32, float64) or all integer types");
  }

  void parse_dtypes(const Token& first, TensorSpec* t) {
    if (first.text == "dtype" && accept("(")) {  // "dtype(x)": the dtype of tensor x
      t->dtype_of = expect_name("a tensor parameter's name in dtype(...)").text;
      expect(")", "to close dtype(...)");
      return;
    }
    if (const DTypeVar* v = dtype_var_named(first.text)) {  // "T": the dtype variable's
      t->dtype_var = v->name;
      t->dtypes = v->dtypes;
      if (peek().text == "|") fail(peek(), "dtype variable " + v->name + " stands alone: list alternatives in <...>");
      return;
    }
    const Token* tok = &first;
    bool any = false;
    while (true) {
      if (tok->text == "any") {
        any = true;
      } else {
        const DTypeInfo* d = find_dtype(tok->text);
        if (!d) {
          fail(*tok, "unknown dtype '" + tok->text + "'" + dtype_spelling_hint(tok->text) + ": expected one of " +
                         known_dtype_names());
        }
        t->dtypes.push_back(*d);
      }
      if (!accept("|")) break;
      tok = &expect_name("a dtype after '|'");
    }
    if (any) t->dtypes.clear();
  }

  Expr parse_dim(const char* what) {
    size_t begin = peek().begin;
    Expr e = checked_expr(begin);
    auto v = constant_value(e);
    if (v && *v < 0)
      fail_span(begin, tokens_[pos_ - 1].end,
                std::string(what) + " dimension must not be negative, got " + std::to_string(*v));
    return e;
  }

  void parse_attrs(Param* p) {
    TensorSpec& t = p->tensor;
    std::map<std::string, std::string> given;  // attribute kind -> its text, to refuse a second one
    while (peek().kind == Tok::kName || peek().text == "@") {
      size_t begin = peek().begin;
      const Token& a = next();
      if (a.text == "@") {
        const Token& dev = expect_name("a device after '@' (cpu or cuda)");
        if (dev.text == "cpu") {
          t.device = DeviceKind::kCPU;
        } else if (dev.text == "cuda") {
          t.device = DeviceKind::kCUDA;
        } else {
          fail(dev, "unknown device '" + dev.text + "': expected cpu or cuda");
        }
        t.device_given = true;
        note_attr(p, "device", begin, &given);
      } else if (a.text == "out") {
        t.out = true;
        note_attr(p, "out", begin, &given);
      } else if (a.text == "return") {
        t.out = true;
        t.returned = true;
        note_attr(p, "out", begin, &given);
      } else if (a.text == "optional") {
        t.optional = true;
        note_attr(p, "optional", begin, &given);
      } else if (a.text == "strided") {
        if (!t.strides.empty()) fail(a, "'strided' conflicts with the explicit strides[...] given before");
        t.strided = true;
        note_attr(p, "strided", begin, &given);
      } else if (a.text == "strides") {
        parse_strides(a, &t);
        note_attr(p, "strides", begin, &given);
      } else if (a.text == "align") {
        expect("(", "after 'align'");
        if (peek().kind != Tok::kInt) fail(peek(), "expected a byte count in align(...), got " + describe(peek()));
        const Token& n = next();
        int64_t v = parse_int(n, false);
        if (v <= 0 || (v & (v - 1)) != 0) fail(n, "align(" + n.text + ") must be a power of two");
        t.align = v;
        expect(")", "to close align(...)");
        note_attr(p, "align", begin, &given);
      } else {
        fail(a, "unknown attribute '" + a.text + "' of tensor '" + p->name + "': expected " + kAttrHelp);
      }
    }
  }

  /// Records the attribute just parsed (text [begin, here)); a second one of the same
  /// kind ("align(16) align(32)", "@cpu @cuda", "out out") is a SpecError.
  void note_attr(const Param* p, const std::string& kind, size_t begin, std::map<std::string, std::string>* given) {
    size_t end = tokens_[pos_ - 1].end;
    std::string text = text_.substr(begin, end - begin);
    auto [it, fresh] = given->emplace(kind, text);
    if (fresh) return;
    fail_span(begin, end,
              "'" + text + "' conflicts with '" + it->second + "' given before: tensor '" + p->name + "' takes one " +
                  (kind == "device" ? std::string("device") : "'" + kind + "' attribute"));
  }

  void parse_strides(const Token& at, TensorSpec* t) {
    if (t->strided) fail(at, "strides[...] conflicts with 'strided' given before");
    expect("[", "after 'strides'");
    std::vector<Expr> strides;
    if (!accept("]")) {
      strides.push_back(parse_dim("stride"));
      while (accept(",")) strides.push_back(parse_dim("stride"));
      expect("]", "to close strides[...]");
    }
    if (strides.size() != t->shape.size()) {
      fail_span(at.begin, tokens_[pos_ - 1].end,
                "strides[...] has " + std::to_string(strides.size()) + " entries but the shape has rank " +
                    std::to_string(t->shape.size()));
    }
    t->strides = std::move(strides);
  }

  /// "independent(m, k)" among the constraints; false (nothing taken) for a constraint.
  /// A symbol cannot be called, so a name followed by '(' is this clause.
  bool parse_independent(FunctionSpec* spec) {
    if (peek().kind != Tok::kName || peek().text != "independent" || pos_ + 1 >= tokens_.size() ||
        tokens_[pos_ + 1].text != "(") {
      return false;
    }
    pos_ += 2;
    do {
      if (peek().kind != Tok::kName)
        fail(peek(), "expected a shape symbol in independent(...), got " + describe(peek()));
      spec->independent.push_back(peek().text);
      ++pos_;
    } while (accept(","));
    if (!accept(")")) fail(peek(), "expected ')' to close independent(...), got " + describe(peek()));
    return true;
  }

  Constraint parse_constraint() {
    Constraint c;
    c.span.begin = peek().begin;
    c.lhs = checked_expr(c.span.begin);
    static const std::pair<const char*, CmpOp> kOps[] = {{"==", CmpOp::kEq}, {"!=", CmpOp::kNe}, {"<=", CmpOp::kLe},
                                                         {">=", CmpOp::kGe}, {"<", CmpOp::kLt},  {">", CmpOp::kGt}};
    bool found = false;
    for (const auto& [text, op] : kOps) {
      if (accept(text)) {
        c.op = op;
        found = true;
        break;
      }
    }
    if (!found) fail(peek(), "expected a comparison (==, !=, <, <=, >, >=) in the constraint, got " + describe(peek()));
    c.rhs = checked_expr(peek().begin);
    c.span.end = tokens_[pos_ - 1].end;
    return c;
  }

  // expr := term (('+'|'-') term)*
  Expr parse_expr() {
    Expr e = parse_term();
    while (true) {
      const Token& op = peek();
      if (accept("+")) {
        e = bounded(op, make_binary(ExprOp::kAdd, e, parse_term()));
      } else if (accept("-")) {
        e = bounded(op, make_binary(ExprOp::kSub, e, parse_term()));
      } else {
        return e;
      }
    }
  }

  // term := unary (('*'|'/'|'%') unary)*
  Expr parse_term() {
    Expr e = parse_unary();
    while (true) {
      if (peek().text == "*" || peek().text == "/" || peek().text == "%") {
        const Token& op = next();
        Expr rhs = parse_unary();
        if (op.text != "*") {
          auto v = constant_value(rhs);
          if (v && *v == 0) fail(op, "division by zero");
        }
        ExprOp kind = op.text == "*" ? ExprOp::kMul : op.text == "/" ? ExprOp::kDiv : ExprOp::kMod;
        e = bounded(op, make_binary(kind, e, rhs));
      } else {
        return e;
      }
    }
  }

  // unary := '-' unary | INT | NAME | '(' expr ')'; "-5" is the literal -5 (so
  // -9223372036854775808 can be written), "-(5)" the negation of 5.
  Expr parse_unary() {
    const Token& at = peek();
    if (accept("-")) {
      if (peek().kind == Tok::kInt) return make_const(parse_int(next(), true));
      Nesting guard(this, at);
      return bounded(at, make_neg(parse_unary()));
    }
    if (accept("(")) {
      Nesting guard(this, at);
      Expr e = parse_expr();
      expect(")", "to close the parenthesis");
      return e;
    }
    if (peek().kind == Tok::kInt) return make_const(parse_int(next(), false));
    if (peek().kind == Tok::kName) return make_symbol(next().text);
    fail(peek(), "expected a number, a symbol or '(' in the expression, got " + describe(peek()));
  }

  /// Counts the parser's own recursion (parentheses, unary minus) so deep input is a
  /// SpecError, not a stack overflow.
  class Nesting {
   public:
    Nesting(SignatureParser* p, const Token& at) : p_(p) {
      if (++p_->nesting_ > kMaxExprDepth) {
        p_->fail(at, "the expression nests more than " + std::to_string(kMaxExprDepth) +
                         " levels deep (parentheses and unary minus); simplify it");
      }
    }
    ~Nesting() { --p_->nesting_; }
    Nesting(const Nesting&) = delete;
    Nesting& operator=(const Nesting&) = delete;

   private:
    SignatureParser* p_;
  };

  /// The tree e, unless it is deeper than every recursion over it may go (a chain of
  /// thousands of '+ 1' terms is a tree that deep).
  Expr bounded(const Token& at, Expr e) {
    if (e->depth > kMaxExprDepth) {
      fail(at, "the expression is more than " + std::to_string(kMaxExprDepth) +
                   " operators deep (chained or nested terms); simplify it");
    }
    return e;
  }

  /// A whole dim or constraint side: constant parts must fold within int64.
  Expr checked_expr(size_t begin) {
    Expr e = parse_expr();
    if (Expr bad = first_unfoldable_constant(e)) {
      bool zero = (bad->op == ExprOp::kDiv || bad->op == ExprOp::kMod) && constant_value(bad->rhs) == 0;
      fail_span(begin, tokens_[pos_ - 1].end,
                zero ? "'" + to_string(bad) + "' divides by zero"
                     : "'" + to_string(bad) + "' overflows int64 (the exact value is outside [-2**63, 2**63 - 1])");
    }
    return e;
  }

  const std::vector<DTypeVar>* vars_ = nullptr;  ///< the function's dtype variables, once parsed
  std::string context_;
  std::string text_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int nesting_ = 0;
  DeviceKind default_device_;
};

}  // namespace

FunctionSpec parse_signature_syntax(const std::string& name, const std::string& signature, DeviceKind default_device) {
  SignatureParser parser("signature of '" + name + "'", signature, default_device);
  return parser.parse_function(name);
}

FunctionSpec parse_signature(const std::string& name, const std::string& signature, DeviceKind default_device) {
  FunctionSpec spec = parse_signature_syntax(name, signature, default_device);
  validate_with_text(spec, signature);
  return spec;
}

Expr parse_expr(const std::string& text) {
  SignatureParser parser("expression", text, DeviceKind::kCPU);
  return parser.parse_standalone_expr();
}

}  // namespace kjit
