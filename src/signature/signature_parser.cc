// Front door 1: the signature string ("a: float32[n], b: float32[n] out; n % 4 == 0").
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

const char* const kAttrHelp = "out, optional, strided, strides[...], align(N), @cpu, @cuda";

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
    if (peek().kind == Tok::kEnd) fail(peek(), "empty signature: expected 'name: type, ...'");
    spec.params.push_back(parse_param());
    while (accept(",")) spec.params.push_back(parse_param());
    if (accept(";")) {
      spec.constraints.push_back(parse_constraint());
      while (accept(",")) spec.constraints.push_back(parse_constraint());
    }
    if (peek().kind != Tok::kEnd) {
      fail(peek(),
           "unexpected '" + peek().text + "': expected ',' before the next parameter or ';' before constraints");
    }
    return spec;
  }

  Expr parse_standalone_expr() {
    Expr e = parse_expr();
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

  int64_t parse_int(const Token& t) {
    try {
      return std::stoll(t.text);
    } catch (const std::exception&) {
      fail(t, "number '" + t.text + "' does not fit in int64");
    }
  }

  Param parse_param() {
    const Token& name = expect_name("a parameter name");
    Param p;
    p.name = name.text;
    p.span.begin = name.begin;
    expect(":", ("after parameter name '" + name.text + "'").c_str());
    parse_type(&p);
    p.span.end = tokens_[pos_ - 1].end;
    return p;
  }

  void parse_type(Param* p) {
    const Token& first = expect_name("a type (a dtype such as float32[n], a scalar type, or stream)");
    if (first.text == "stream") {
      p->kind = ParamKind::kStream;
      return;
    }
    bool is_tensor = peek().text == "[" || peek().text == "|";
    if (!is_tensor) {
      auto scalar = find_scalar_type(first.text);
      if (scalar) {
        p->kind = ParamKind::kScalar;
        p->scalar = *scalar;
        return;
      }
      if (find_dtype(first.text) || first.text == "any") {
        fail(first, "'" + first.text + "' without a shape is not a scalar type: a tensor needs one, e.g. '" +
                        first.text + "[n]' ('" + first.text + "[]' for rank 0, '" + first.text +
                        "[...]' for any rank); scalar types are " + known_scalar_names());
      }
      fail(first, "unknown type '" + first.text + "': expected a dtype with a shape (" + known_dtype_names() +
                      "), a scalar type or 'stream'");
    }
    p->kind = ParamKind::kTensor;
    p->tensor.device = default_device_;
    parse_dtypes(first, &p->tensor);
    expect("[", "to open the shape");
    if (accept("...")) {
      p->tensor.any_rank = true;
      expect("]", "to close '[...]' (any rank)");
    } else if (!accept("]")) {
      p->tensor.shape.push_back(parse_dim("shape"));
      while (accept(",")) p->tensor.shape.push_back(parse_dim("shape"));
      expect("]", "to close the shape");
    }
    parse_attrs(p);
  }

  void parse_dtypes(const Token& first, TensorSpec* t) {
    const Token* tok = &first;
    bool any = false;
    while (true) {
      if (tok->text == "any") {
        any = true;
      } else {
        const DTypeInfo* d = find_dtype(tok->text);
        if (!d) fail(*tok, "unknown dtype '" + tok->text + "': expected one of " + known_dtype_names());
        t->dtypes.push_back(*d);
      }
      if (!accept("|")) break;
      tok = &expect_name("a dtype after '|'");
    }
    if (any) t->dtypes.clear();
  }

  Expr parse_dim(const char* what) {
    size_t begin = peek().begin;
    Expr e = parse_expr();
    auto v = constant_value(e);
    if (v && *v < 0)
      fail_span(begin, tokens_[pos_ - 1].end,
                std::string(what) + " dimension must not be negative, got " + std::to_string(*v));
    return e;
  }

  void parse_attrs(Param* p) {
    TensorSpec& t = p->tensor;
    while (peek().kind == Tok::kName || peek().text == "@") {
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
      } else if (a.text == "out") {
        t.out = true;
      } else if (a.text == "optional") {
        t.optional = true;
      } else if (a.text == "strided") {
        if (!t.strides.empty()) fail(a, "'strided' conflicts with the explicit strides[...] given before");
        t.strided = true;
      } else if (a.text == "strides") {
        parse_strides(a, &t);
      } else if (a.text == "align") {
        expect("(", "after 'align'");
        if (peek().kind != Tok::kInt) fail(peek(), "expected a byte count in align(...), got " + describe(peek()));
        const Token& n = next();
        int64_t v = parse_int(n);
        if (v <= 0 || (v & (v - 1)) != 0) fail(n, "align(" + n.text + ") must be a power of two");
        t.align = v;
        expect(")", "to close align(...)");
      } else {
        fail(a, "unknown attribute '" + a.text + "' of tensor '" + p->name + "': expected " + kAttrHelp);
      }
    }
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

  Constraint parse_constraint() {
    Constraint c;
    c.span.begin = peek().begin;
    c.lhs = parse_expr();
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
    c.rhs = parse_expr();
    c.span.end = tokens_[pos_ - 1].end;
    return c;
  }

  // expr := term (('+'|'-') term)*
  Expr parse_expr() {
    Expr e = parse_term();
    while (true) {
      if (accept("+")) {
        e = make_binary(ExprOp::kAdd, e, parse_term());
      } else if (accept("-")) {
        e = make_binary(ExprOp::kSub, e, parse_term());
      } else {
        return e;
      }
    }
  }

  // term := unary (('*'|'/'|'%') unary)*
  Expr parse_term() {
    Expr e = parse_unary();
    while (true) {
      if (accept("*")) {
        e = make_binary(ExprOp::kMul, e, parse_unary());
      } else if (peek().text == "/" || peek().text == "%") {
        const Token& op = next();
        Expr rhs = parse_unary();
        auto v = constant_value(rhs);
        if (v && *v == 0) fail(op, "division by zero");
        e = make_binary(op.text == "/" ? ExprOp::kDiv : ExprOp::kMod, e, rhs);
      } else {
        return e;
      }
    }
  }

  Expr parse_unary() {
    if (accept("-")) return make_neg(parse_unary());
    if (accept("(")) {
      Expr e = parse_expr();
      expect(")", "to close the parenthesis");
      return e;
    }
    if (peek().kind == Tok::kInt) return make_const(parse_int(next()));
    if (peek().kind == Tok::kName) return make_symbol(next().text);
    fail(peek(), "expected a number, a symbol or '(' in the expression, got " + describe(peek()));
  }

  std::string context_;
  std::string text_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
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
