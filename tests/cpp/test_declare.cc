// The front doors besides the signature string: arg_spec tokens, C++ parameter
// types, `// @kjit` / `// @BE` annotations, and resolving declarations into specs.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "decl_builders.h"
#include "declare/arg_spec.h"
#include "declare/cpp_signature.h"
#include "declare/cpp_types.h"
#include "declare/macro_expansion.h"
#include "kjit/declare.h"
#include "kjit/errors.h"
#include "kjit/runtime.h"
#include "kjit/spec.h"

namespace kjit {
namespace {

using Tokens = std::vector<std::string>;

/// The SpecError `f` throws, or "<no error>".
std::string spec_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const SpecError& e) {
    return e.what();
  }
  return "<no error>";
}

// ---------------------------------------------------------------------------
// normalize_arg_spec / to_arg_spec
// ---------------------------------------------------------------------------

const char kValid[] =
    "Valid tokens: arg, ret, stream, attr.<name>, attr.<name>:<type> (aliases: args, rets, ctx.stream, "
    "attrs.<name>, attrs.<name>:<type>)";

TEST(DeclareNormalize, CanonicalTokensPassThrough) {
  Tokens t = {"arg", "ret", "stream", "attr.x", "attr.y:float32"};
  EXPECT_EQ(normalize_arg_spec("f", t), t);
}

TEST(DeclareNormalize, AliasesBecomeCanonical) {
  EXPECT_EQ(normalize_arg_spec("f", {"args", "rets", "ctx.stream", "attrs.x", "attrs.y:int64", "attrs._z9:bool"}),
            (Tokens{"arg", "ret", "stream", "attr.x", "attr.y:int64", "attr._z9:bool"}));
}

TEST(DeclareNormalize, EveryScalarTypeNameIsAcceptedAsAttrType) {
  for (const char* type : {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
                           "bfloat16", "float32", "float64", "complex64", "complex128"}) {
    std::string tok = std::string("attrs.v:") + type;
    EXPECT_EQ(normalize_arg_spec("f", {"ret", tok}), (Tokens{"ret", std::string("attr.v:") + type})) << type;
  }
}

TEST(DeclareNormalize, RetCanComeAnywhereAndRepeat) {
  EXPECT_EQ(normalize_arg_spec("f", {"rets", "args", "rets"}), (Tokens{"ret", "arg", "ret"}));
}

TEST(DeclareNormalize, InvalidTokenListsTheValidOnes) {
  EXPECT_EQ(spec_error([] {
              normalize_arg_spec("f", {"arg", "output"});
            }),
            std::string("arg_spec of 'f': token #1 'output': invalid arg_spec token. ") + kValid);
  // Case, whitespace and near misses are not forgiven.
  for (const char* bad : {"Arg", " arg", "ret ", "argument", "ctx.streams", "attr", "attrs", "ctx", ""}) {
    EXPECT_EQ(spec_error([&] {
                normalize_arg_spec("g", {"ret", bad});
              }),
              std::string("arg_spec of 'g': token #1 '") + bad + "': invalid arg_spec token. " + kValid)
        << "'" << bad << "'";
  }
}

TEST(DeclareNormalize, UnknownAttrTypeListsTheKnownOnes) {
  EXPECT_EQ(
      spec_error([] {
        normalize_arg_spec("f", {"ret", "attr.x:float33"});
      }),
      "arg_spec of 'f': token #1 'attr.x:float33': unknown attr type 'float33'; valid types: " + known_scalar_names());
  EXPECT_EQ(spec_error([] {
              normalize_arg_spec("f", {"ret", "attrs.x:"});
            }),
            "arg_spec of 'f': token #1 'attrs.x:': unknown attr type ''; valid types: " + known_scalar_names());
  // A dtype that is not a scalar type (float8) is not an attr type either.
  EXPECT_NE(spec_error([] {
              normalize_arg_spec("f", {"ret", "attr.x:float8_e4m3fn"});
            }).find("unknown attr type 'float8_e4m3fn'"),
            std::string::npos);
}

TEST(DeclareNormalize, AttrNameMustBeACIdentifier) {
  auto msg = [](const std::string& tok, const std::string& name) {
    return "arg_spec of 'f': token #0 '" + tok + "': attr name '" + name +
           "' is not a C identifier (letters, digits and '_', not starting with a digit)";
  };
  EXPECT_EQ(spec_error([] { normalize_arg_spec("f", {"attr.1x", "ret"}); }), msg("attr.1x", "1x"));
  EXPECT_EQ(spec_error([] { normalize_arg_spec("f", {"attr.", "ret"}); }), msg("attr.", ""));
  EXPECT_EQ(spec_error([] { normalize_arg_spec("f", {"attrs.a-b:int32", "ret"}); }), msg("attrs.a-b:int32", "a-b"));
  EXPECT_EQ(spec_error([] { normalize_arg_spec("f", {"attr.a.b", "ret"}); }), msg("attr.a.b", "a.b"));
  EXPECT_EQ(spec_error([] { normalize_arg_spec("f", {"attr.:float32", "ret"}); }), msg("attr.:float32", ""));
  // C++ keywords are not names either.
  EXPECT_EQ(spec_error([] { normalize_arg_spec("f", {"attr.int", "ret"}); }), msg("attr.int", "int"));
  EXPECT_EQ(spec_error([] { normalize_arg_spec("f", {"attrs.class:bool", "ret"}); }), msg("attrs.class:bool", "class"));
}

TEST(DeclareNormalize, DuplicateStreamNamesBothPositions) {
  EXPECT_EQ(spec_error([] {
              normalize_arg_spec("f", {"stream", "ret", "ctx.stream"});
            }),
            "arg_spec of 'f': token #2 'ctx.stream': duplicate 'stream' token (token #0 is already the stream)");
}

TEST(DeclareNormalize, DuplicateAttrAcrossSpellings) {
  EXPECT_EQ(spec_error([] {
              normalize_arg_spec("f", {"ret", "attr.x:float32", "arg", "attrs.x"});
            }),
            "arg_spec of 'f': token #3 'attrs.x': attr 'x' is given twice");
}

TEST(DeclareNormalize, NoRetQuotesTheTokens) {
  EXPECT_EQ(spec_error([] {
              normalize_arg_spec("f", {"arg", "attrs.x"});
            }),
            "arg_spec of 'f': the arg_spec must contain at least one 'ret' token (an output tensor XLA "
            "allocates); got ['arg', 'attrs.x']. For a function without tensor outputs, give a signature string "
            "instead");
  EXPECT_EQ(spec_error([] { normalize_arg_spec("h", {}); }),
            "arg_spec of 'h': the arg_spec must contain at least one 'ret' token (an output tensor XLA "
            "allocates); got []. For a function without tensor outputs, give a signature string instead");
}

TEST(DeclareNormalize, ErrorsAreSpecErrorsWhichAreInvalidArgument) {
  EXPECT_THROW(normalize_arg_spec("f", {"bogus"}), SpecError);
  EXPECT_THROW(normalize_arg_spec("f", {"bogus"}), std::invalid_argument);
}

TEST(DeclareNormalize, ParseKeepsWhatWasWritten) {
  std::vector<ArgToken> t = parse_arg_spec("here", {"args", "attrs.s", "attrs.k:int32", "ctx.stream", "rets"});
  ASSERT_EQ(t.size(), 5u);
  EXPECT_EQ(t[0].kind, ArgToken::Kind::kArg);
  EXPECT_EQ(t[1].kind, ArgToken::Kind::kAttr);
  EXPECT_EQ(t[1].attr_name, "s");
  EXPECT_FALSE(t[1].attr_type.has_value());
  EXPECT_EQ(t[2].attr_type, ScalarType::kInt32);
  EXPECT_EQ(t[3].kind, ArgToken::Kind::kStream);
  EXPECT_EQ(t[4].kind, ArgToken::Kind::kRet);
  EXPECT_EQ(t[2].written, "attrs.k:int32");
  EXPECT_EQ(canonical_token(t[2]), "attr.k:int32");
  EXPECT_EQ(canonical_token(t[1]), "attr.s");
  EXPECT_EQ(spec_error([] { parse_arg_spec("the where", {"x"}); }).rfind("the where: token #0 'x': ", 0), 0u);
}

TEST(DeclareToArgSpec, MapsEveryParamKind) {
  FunctionSpec s =
      parse_signature("f", "x: float32[n], y: any[n, m] out, alpha: float32, st: stream, k: int32, z: bool[n] out");
  EXPECT_EQ(to_arg_spec(s), (Tokens{"arg", "ret", "attr.alpha:float32", "stream", "attr.k:int32", "ret"}));
}

TEST(DeclareToArgSpec, IsAFixedPointOfNormalize) {
  FunctionSpec s = parse_signature("f",
                                   "a: float16[m, k], b: float16[k] optional, o: float16[m] out, "
                                   "h: float16, c: complex128, u: uint64");
  Tokens t = to_arg_spec(s);
  EXPECT_EQ(t, (Tokens{"arg", "arg", "ret", "attr.h:float16", "attr.c:complex128", "attr.u:uint64"}));
  EXPECT_EQ(normalize_arg_spec("f", t), t);
}

TEST(DeclareToArgSpec, RoundTripsThroughResolveWithTheCppDefinition) {
  const char* src = "void f(const float* x, kjit::TensorView y, float alpha, kjit::Stream st, int32_t k) {}\n";
  FunctionSpec original = parse_signature("f", "x: float32[n], y: any[n] out, alpha: float32, st: stream, k: int32");
  FunctionDecl d;
  d.name = "f";
  d.form = FunctionDecl::Form::kTokens;
  d.tokens = to_arg_spec(original);
  d.origin = "functions['f']";
  EXPECT_EQ(d.tokens, (Tokens{"arg", "ret", "attr.alpha:float32", "stream", "attr.k:int32"}));
  std::vector<FunctionSpec> specs = resolve_functions({d}, {{"cpp_sources", src}});
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(to_arg_spec(specs[0]), d.tokens);
  // Tokens carry no shapes: the names, kinds and dtypes come back, the ranks are open.
  EXPECT_EQ(to_string(specs[0]), "x: float32[...], y: any[...] out, alpha: float32, st: stream, k: int32");
}

// "[...]" lexes as one token, so the canonical text of a token-declared spec parses back.
TEST(DeclareToArgSpec, AnyRankTextOfAResolvedSpecParsesBack) {
  FunctionDecl d;
  d.name = "f";
  d.form = FunctionDecl::Form::kTokens;
  d.tokens = {"arg", "ret", "attr.alpha:float32"};
  d.origin = "functions['f']";
  std::vector<FunctionSpec> specs =
      resolve_functions({d}, {{"cpp_sources", "void f(const float* x, kjit::TensorView y, float alpha) {}"}});
  ASSERT_EQ(specs.size(), 1u);
  std::string text = to_string(specs[0]);
  ASSERT_EQ(text, "x: float32[...], y: any[...] out, alpha: float32");
  FunctionSpec back = parse_signature("f", text);
  EXPECT_EQ(to_string(back), text);
  ASSERT_EQ(back.params.size(), 3u);
  EXPECT_TRUE(back.params[0].tensor.any_rank);
}

// ---------------------------------------------------------------------------
// classify_cpp_param
// ---------------------------------------------------------------------------

/// The only parameter of "void f(<decl>);", as the C++ scanner reads it.
CppParam param_of(const std::string& decl) {
  std::vector<CppFunction> fns = find_cpp_functions("void f(" + decl + ");", "f");
  if (fns.size() != 1 || fns[0].params.size() != 1) {
    ADD_FAILURE() << "cannot read a single parameter from '" << decl << "'";
    return CppParam{};
  }
  return fns[0].params[0];
}

CppRole role_of(const std::string& decl) { return classify_cpp_param(param_of(decl)); }

TEST(DeclareCppTypes, ScalarTypeTable) {
  const std::vector<std::pair<std::string, ScalarType>> table = {
      {"bool", ScalarType::kBool},
      {"char", ScalarType::kInt8},
      {"signed char", ScalarType::kInt8},
      {"unsigned char", ScalarType::kUInt8},
      {"int8_t", ScalarType::kInt8},
      {"uint8_t", ScalarType::kUInt8},
      {"short", ScalarType::kInt16},
      {"short int", ScalarType::kInt16},
      {"unsigned short", ScalarType::kUInt16},
      {"int16_t", ScalarType::kInt16},
      {"uint16_t", ScalarType::kUInt16},
      {"int", ScalarType::kInt32},
      {"signed", ScalarType::kInt32},
      {"unsigned", ScalarType::kUInt32},
      {"unsigned int", ScalarType::kUInt32},
      {"int32_t", ScalarType::kInt32},
      {"std::int32_t", ScalarType::kInt32},
      {"uint32_t", ScalarType::kUInt32},
      {"long", ScalarType::kInt64},
      {"unsigned long", ScalarType::kUInt64},
      {"long long", ScalarType::kInt64},
      {"unsigned long long", ScalarType::kUInt64},
      {"size_t", ScalarType::kUInt64},
      {"std::size_t", ScalarType::kUInt64},
      {"int64_t", ScalarType::kInt64},
      {"std::int64_t", ScalarType::kInt64},
      {"uint64_t", ScalarType::kUInt64},
      {"ptrdiff_t", ScalarType::kInt64},
      {"std::ptrdiff_t", ScalarType::kInt64},
      {"float", ScalarType::kFloat32},
      {"double", ScalarType::kFloat64},
      {"std::complex<float>", ScalarType::kComplex64},
      {"std::complex<double>", ScalarType::kComplex128},
  };
  for (const auto& [type, expected] : table) {
    for (const std::string& decl : {type + " v", "const " + type + " v", "const " + type + "& v"}) {
      CppRole r = role_of(decl);
      EXPECT_EQ(r.kind, CppRole::Kind::kScalar) << decl << ": " << r.problem;
      EXPECT_EQ(r.scalar, expected) << decl;
    }
    EXPECT_EQ(scalar_type_of_cpp(type), expected) << type;
  }
  EXPECT_EQ(scalar_type_of_cpp("::std::size_t"), ScalarType::kUInt64);
  EXPECT_EQ(scalar_type_of_cpp("Foo"), std::nullopt);
  EXPECT_EQ(scalar_type_of_cpp("long double"), std::nullopt);
}

TEST(DeclareCppTypes, NonConstScalarReferenceIsUnmapped) {
  CppRole r = role_of("int& n");
  EXPECT_EQ(r.kind, CppRole::Kind::kUnmapped);
  EXPECT_EQ(r.problem, "a scalar attr cannot be a non-const reference");
}

TEST(DeclareCppTypes, TensorViewsByValueAndConstReference) {
  struct Case {
    const char* decl;
    bool out;
  };
  for (const Case& c : {Case{"kjit::TensorView t", true}, Case{"const kjit::TensorView t", false},
                        Case{"const kjit::TensorView& t", false}, Case{"kjit::TensorView const& t", false},
                        Case{"::kjit::TensorView t", true}, Case{"TensorView t", true}, Case{"BE::Tensor t", true},
                        Case{"const BE::Tensor& t", false}, Case{"const BE::Tensor t", false}}) {
    CppRole r = role_of(c.decl);
    EXPECT_EQ(r.kind, CppRole::Kind::kTensor) << c.decl << ": " << r.problem;
    EXPECT_EQ(r.out, c.out) << c.decl;
    EXPECT_EQ(r.dtype, nullptr) << c.decl;
  }
}

TEST(DeclareCppTypes, NonConstTensorReferenceIsUnmappedWithAFix) {
  CppRole r = role_of("kjit::TensorView& t");
  EXPECT_EQ(r.kind, CppRole::Kind::kUnmapped);
  EXPECT_EQ(r.problem,
            "a non-const reference to a tensor view cannot bind to kjit's argument; take 'kjit::TensorView' by value "
            "(non-const = output) or by const reference (input)");
  EXPECT_EQ(role_of("BE::Tensor& t").kind, CppRole::Kind::kUnmapped);
}

TEST(DeclareCppTypes, TypedPointersCarryTheirDtype) {
  const std::vector<std::pair<std::string, std::string>> table = {
      {"float", "float32"},
      {"double", "float64"},
      {"int32_t", "int32"},
      {"int", "int32"},
      {"int64_t", "int64"},
      {"uint8_t", "uint8"},
      {"bool", "bool"},
      {"char", "int8"},
      {"__half", "float16"},
      {"half", "float16"},
      {"__nv_bfloat16", "bfloat16"},
      {"nv_bfloat16", "bfloat16"},
      {"std::complex<float>", "complex64"},
      {"size_t", "uint64"},
  };
  for (const auto& [type, dtype] : table) {
    for (bool is_const : {true, false}) {
      std::string decl = (is_const ? "const " : "") + type + "* p";
      CppRole r = role_of(decl);
      ASSERT_EQ(r.kind, CppRole::Kind::kTensor) << decl << ": " << r.problem;
      EXPECT_EQ(r.out, !is_const) << decl;
      ASSERT_NE(r.dtype, nullptr) << decl;
      EXPECT_STREQ(r.dtype->name, dtype.c_str()) << decl;
    }
  }
  // An array declarator is a pointer; a const pointer to non-const data is an output.
  EXPECT_TRUE(role_of("float p[]").out);
  EXPECT_TRUE(role_of("float* const p").out);
  EXPECT_FALSE(role_of("float const* p").out);
}

TEST(DeclareCppTypes, VoidPointerIsAnUntypedTensorUnlessNamedStream) {
  CppRole out = role_of("void* p");
  EXPECT_EQ(out.kind, CppRole::Kind::kTensor);
  EXPECT_TRUE(out.out);
  EXPECT_EQ(out.dtype, nullptr);
  CppRole in = role_of("const void* p");
  EXPECT_EQ(in.kind, CppRole::Kind::kTensor);
  EXPECT_FALSE(in.out);
  EXPECT_EQ(role_of("void* stream").kind, CppRole::Kind::kStream);
}

TEST(DeclareCppTypes, Streams) {
  for (const char* decl : {"cudaStream_t s", "CUstream s", "kjit::Stream s", "::kjit::Stream s", "int64_t stream",
                           "long stream", "int stream", "uint64_t stream", "void* stream"}) {
    EXPECT_EQ(role_of(decl).kind, CppRole::Kind::kStream) << decl;
  }
  // Only an integer called "stream" is brainevent's stream; other names are attrs.
  EXPECT_EQ(role_of("int64_t s").kind, CppRole::Kind::kScalar);
  EXPECT_EQ(role_of("float stream").kind, CppRole::Kind::kScalar);
  EXPECT_EQ(role_of("bool stream").kind, CppRole::Kind::kScalar);
}

TEST(DeclareCppTypes, UnmappableTypesSayWhy) {
  CppRole pp = role_of("float** p");
  EXPECT_EQ(pp.kind, CppRole::Kind::kUnmapped);
  EXPECT_EQ(pp.problem, "a pointer to a pointer has no kjit meaning");

  CppRole sp = role_of("const Foo* p");
  EXPECT_EQ(sp.kind, CppRole::Kind::kUnmapped);
  EXPECT_EQ(sp.problem,
            "a pointer to 'Foo' is not a known element type (typed pointers: float*, double*, int32_t*, ..., "
            "__half*, void*; or take kjit::TensorView)");

  CppRole st = role_of("Foo v");
  EXPECT_EQ(st.kind, CppRole::Kind::kUnmapped);
  EXPECT_EQ(st.problem,
            "kjit maps tensors (kjit::TensorView, BE::Tensor, tvm::ffi::TensorView, tvm::ffi::Tensor, typed "
            "pointers), scalars (bool, int8_t..uint64_t, int, long, size_t, float, double, "
            "std::complex<float|double>, ...), str and bytes (tvm::ffi::String, tvm::ffi::Bytes, std::string, "
            "std::string_view) and streams (cudaStream_t, kjit::Stream, int64_t stream)");
  EXPECT_EQ(role_of("long double v").kind, CppRole::Kind::kUnmapped);
  EXPECT_EQ(role_of("std::string& s").kind, CppRole::Kind::kUnmapped);

  CppRole h = role_of("__half h");
  EXPECT_EQ(h.kind, CppRole::Kind::kUnmapped);
  EXPECT_EQ(h.problem,
            "16-bit float attrs reach the kernel as uint16_t raw bits: declare it 'uint16_t h' with the token "
            "'attr.h:float16' (or bfloat16)");
}

TEST(DeclareCppTypes, DescribeWritesTheParameterBack) {
  EXPECT_EQ(describe_cpp_param(param_of("const float* x")), "const float* x");
  EXPECT_EQ(describe_cpp_param(param_of("const kjit::TensorView&")), "const kjit::TensorView&");
}

/// A module of inferred functions `void p<i>(const T* x, T* y)`, one per type.
Module typed_pointer_module(const std::string& name, const std::vector<std::string>& types) {
  std::string src = "#include <kjit/kernel.h>\n#include <complex>\n#include <cstddef>\n";
  std::vector<FunctionDecl> decls;
  for (size_t i = 0; i < types.size(); ++i) {
    std::string fn = "p" + std::to_string(i);
    src += "void " + fn + "(const " + types[i] + "* x, " + types[i] + "* y) { y[0] = x[0]; }\n";
    FunctionDecl d;
    d.name = fn;
    d.form = FunctionDecl::Form::kInfer;
    d.origin = "functions['" + fn + "']";
    decls.push_back(d);
  }
  return load_inline(name, {src}, decls);
}

// What classify_cpp_param accepts as a typed pointer, the stub must be able to pass.
TEST(DeclareTypedPointers, AcceptedTypedPointersCompileAndBind) {
  Module m = typed_pointer_module(
      "declare_typed_ptrs", {"float", "double", "int", "unsigned", "long", "unsigned long", "short", "unsigned short",
                             "signed char", "unsigned char", "bool", "int8_t", "uint64_t", "std::int32_t", "size_t",
                             "std::size_t", "ptrdiff_t", "std::complex<float>", "std::complex<double>"});
  EXPECT_EQ(to_string(m.specs()[0]), "x: float32[...], y: float32[...] out");
  EXPECT_EQ(to_string(m.specs()[4]), "x: int64[...], y: int64[...] out");
  EXPECT_EQ(to_string(m.specs()[17]), "x: complex64[...], y: complex64[...] out");
}

// Integer typed pointers match by width and signedness (char* is int8, long long* is int64).
TEST(DeclareTypedPointers, CharAndLongLongPointersCompile) {
  for (const char* type : {"char", "long long", "unsigned long long"}) {
    std::string name = std::string("declare_typed_ptr_") + (type[0] == 'c' ? "char" : type[0] == 'l' ? "ll" : "ull");
    try {
      typed_pointer_module(name, {type});
    } catch (const CompileError& e) {
      ADD_FAILURE() << type << "*: " << e.log();
    }
  }
}

// ---------------------------------------------------------------------------
// read_annotations / uses_brainevent_spelling
// ---------------------------------------------------------------------------

TEST(DeclareAnnotations, ReadsAllThreeForms) {
  const char* src =
      "#include <kjit/kernel.h>\n"                              // 1
      "// @kjit add arg arg ret attr.scale:float32\n"           // 2
      "void add(const float*, const float*, float*, float);\n"  // 3
      "// @kjit rowsum(a: float32[m, k], o: float32[m] out)\n"  // 4
      "  // @BE infer_me\n";                                    // 5
  std::vector<FunctionDecl> d = read_annotations({{"cpp_sources", src}});
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].name, "add");
  EXPECT_EQ(d[0].form, FunctionDecl::Form::kTokens);
  EXPECT_EQ(d[0].tokens, (Tokens{"arg", "arg", "ret", "attr.scale:float32"}));
  EXPECT_EQ(d[0].origin, "cpp_sources:2 (// @kjit annotation)");
  EXPECT_EQ(d[1].name, "rowsum");
  EXPECT_EQ(d[1].form, FunctionDecl::Form::kSignature);
  EXPECT_EQ(d[1].signature, "a: float32[m, k], o: float32[m] out");
  EXPECT_EQ(d[1].origin, "cpp_sources:4 (// @kjit annotation)");
  EXPECT_EQ(d[2].name, "infer_me");
  EXPECT_EQ(d[2].form, FunctionDecl::Form::kInfer);
  EXPECT_TRUE(d[2].tokens.empty());
  EXPECT_EQ(d[2].origin, "cpp_sources:5 (// @BE annotation)");
}

TEST(DeclareAnnotations, BackwardPairsInEveryForm) {
  std::vector<FunctionDecl> d = read_annotations({{"s",
                                                   "// @kjit f(x: float32[n], y: float32[n] return) backward=f_bwd\n"
                                                   "// @kjit g(x: float32[n])backward=g_bwd\n"
                                                   "// @kjit h arg ret backward=h_bwd\n"
                                                   "// @kjit k backward=k_bwd\n"
                                                   "// @kjit m(x: float32[n])\n"}});
  ASSERT_EQ(d.size(), 5u);
  EXPECT_EQ(d[0].signature, "x: float32[n], y: float32[n] return");
  EXPECT_EQ(d[0].backward, "f_bwd");
  EXPECT_EQ(d[1].signature, "x: float32[n]");
  EXPECT_EQ(d[1].backward, "g_bwd");
  EXPECT_EQ(d[2].tokens, (Tokens{"arg", "ret"}));
  EXPECT_EQ(d[2].backward, "h_bwd");
  EXPECT_EQ(d[3].form, FunctionDecl::Form::kInfer);
  EXPECT_EQ(d[3].backward, "k_bwd");
  EXPECT_TRUE(d[4].backward.empty());
  EXPECT_THROW(read_annotations({{"s", "// @kjit f(x: float32[n]) backward=1x\n"}}), SpecError);
}

// A comment that ends inside a tag's length is no annotation (the fuzzer's
// heap-buffer-overflow: the byte after the tag was read before the tag matched).
TEST(DeclareAnnotations, LinesShorterThanATagAreNoAnnotations) {
  const std::string long_line = "//" + std::string(40, '\t') + "l.h>";
  for (const std::string& line : {std::string("//"), std::string("// @"), std::string("//@B"), std::string("// @kj"),
                                  std::string("// @kji"), long_line}) {
    EXPECT_TRUE(read_annotations({{"s", line}}).empty()) << line;
    EXPECT_TRUE(read_annotations({{"s", line + "\n"}}).empty()) << line;
  }
  try {  // the tag alone, ending the line, is an annotation without a name
    read_annotations({{"s", "//@BE"}});
    FAIL() << "no error";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("expected a function name after '@BE', got ''"), std::string::npos)
        << e.what();
  }
}

TEST(DeclareAnnotations, OriginsFollowTheSourceFiles) {
  std::vector<FunctionDecl> d = read_annotations(
      {{"cpp_sources[0]", "\n\n// @kjit f ret\n"}, {"cpp_sources[1]", "// @BE g\n// @kjit h(x: int32)"}});
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].origin, "cpp_sources[0]:3 (// @kjit annotation)");
  EXPECT_EQ(d[1].origin, "cpp_sources[1]:1 (// @BE annotation)");
  EXPECT_EQ(d[2].origin, "cpp_sources[1]:2 (// @kjit annotation)");  // last line without '\n'
  EXPECT_EQ(d[2].signature, "x: int32");
}

TEST(DeclareAnnotations, ForgivesListPunctuationAndOddSpacing) {
  std::vector<FunctionDecl> d = read_annotations({{"s",
                                                   "//@kjit a [\"arg\", 'ret', attrs.x:int32]\n"
                                                   "//\t@BE\tb\targ, ret\r\n"
                                                   "   //   @kjit   c  (x: float32[n] out)  \r\n"
                                                   "// @kjit d , ,\n"}});
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[0].tokens, (Tokens{"arg", "ret", "attrs.x:int32"}));  // aliases are normalised later
  EXPECT_EQ(d[1].tokens, (Tokens{"arg", "ret"}));
  EXPECT_EQ(d[2].form, FunctionDecl::Form::kSignature);
  EXPECT_EQ(d[2].signature, "x: float32[n] out");
  EXPECT_EQ(d[3].form, FunctionDecl::Form::kInfer);  // only punctuation: no tokens
}

// "arg,ret" in an annotation is two tokens, like "arg, ret".
TEST(DeclareAnnotations, CommaWithoutASpaceSeparatesTokens) {
  std::vector<FunctionDecl> d = read_annotations({{"s", "// @BE b arg,arg,ret\n// @kjit c [arg,ret]\n"}});
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].tokens, (Tokens{"arg", "arg", "ret"}));
  EXPECT_EQ(d[1].tokens, (Tokens{"arg", "ret"}));
}

TEST(DeclareAnnotations, IgnoresLookalikes) {
  const char* src =
      "int x;  // @kjit not_at_line_start arg ret\n"
      "/// @kjit triple_slash\n"
      "/* @kjit block */\n"
      "// @kjitx longer_tag\n"
      "// @BEx longer_tag2\n"
      "// kjit no_at\n"
      "// text @kjit later\n"
      "#define X // @kjit in_macro\n";
  EXPECT_TRUE(read_annotations({{"s", src}}).empty());
}

TEST(DeclareAnnotations, DuplicateNamesBothOrigins) {
  EXPECT_EQ(spec_error([] {
              read_annotations({{"a.cc", "// @kjit f ret\n"}, {"b.cc", "\n// @BE f\n"}});
            }),
            "duplicate annotation for 'f': a.cc:1 (// @kjit annotation) and b.cc:2 (// @BE annotation)");
}

TEST(DeclareAnnotations, MalformedAnnotations) {
  auto err = [](const std::string& line) { return spec_error([&] { read_annotations({{"s", "\n" + line}}); }); };
  EXPECT_EQ(err("// @kjit"),
            "s:2 (// @kjit annotation): expected a function name after '@kjit', got ''; write '// @kjit NAME "
            "[tokens...]'");
  EXPECT_EQ(err("// @BE   -f arg"),
            "s:2 (// @BE annotation): expected a function name after '@BE', got '-f arg'; write '// @BE NAME "
            "[tokens...]'");
  EXPECT_EQ(err("// @kjit 9lives arg ret"), "s:2 (// @kjit annotation): function name '9lives' is not a C identifier");
  EXPECT_EQ(err("// @kjit class arg ret"), "s:2 (// @kjit annotation): function name 'class' is not a C identifier");
  EXPECT_EQ(err("// @kjit f(a: float32[n]"),
            "s:2 (// @kjit annotation): 'f(' opens a signature that is not closed with ')' on the same line");
  EXPECT_EQ(err("// @kjit f-g arg ret"),
            "s:2 (// @kjit annotation): function name 'f' must be followed by a space, '(' or the end of the line, "
            "got '-g arg ret'");
  EXPECT_EQ(err("// @kjit f.g"),
            "s:2 (// @kjit annotation): function name 'f' must be followed by a space, '(' or the end of the line, "
            "got '.g'");
}

TEST(DeclareAnnotations, NoAnnotationsIsEmpty) {
  EXPECT_TRUE(read_annotations({}).empty());
  EXPECT_TRUE(read_annotations({{"s", ""}, {"t", "void f() {}\n"}}).empty());
}

TEST(DeclareAnnotations, BraineventSpellingIsDetected) {
  EXPECT_TRUE(uses_brainevent_spelling({{"s", "void f(BE::Tensor x);"}}));
  EXPECT_TRUE(uses_brainevent_spelling({{"a", ""}, {"b", "// @BE f"}}));
  EXPECT_FALSE(uses_brainevent_spelling({{"s", "// @kjit f\nvoid f(kjit::TensorView x);"}}));
  EXPECT_FALSE(uses_brainevent_spelling({}));
}

// ---------------------------------------------------------------------------
// resolve_functions
// ---------------------------------------------------------------------------

using kjit_test::infer_decl;
using kjit_test::signature_decl;
using kjit_test::tokens_decl;

FunctionSpec resolve_one(const FunctionDecl& d, const std::string& src, DeviceKind device = DeviceKind::kCPU) {
  std::vector<FunctionSpec> specs = resolve_functions({d}, {{"cpp_sources", src}}, device);
  EXPECT_EQ(specs.size(), 1u);
  return specs.empty() ? FunctionSpec{} : specs[0];
}

std::string resolve_error(const FunctionDecl& d, const std::string& src) {
  return spec_error([&] { resolve_functions({d}, {{"cpp_sources", src}}); });
}

TEST(DeclareResolve, TokensWithTheDefinitionTakeNamesDtypesAndCallee) {
  const char* src =
      "namespace ops {\n"
      "void add(const float* x, const kjit::TensorView y, double* out, float scale, int64_t stream) {}\n"
      "}\n";
  FunctionSpec s = resolve_one(tokens_decl("add", {"args", "arg", "rets", "attrs.scale:float32", "ctx.stream"}), src);
  EXPECT_EQ(s.name, "add");
  EXPECT_EQ(s.callee, "ops::add");
  EXPECT_EQ(to_string(s), "x: float32[...], y: any[...], out: float64[...] out, scale: float32, stream: stream");
}

TEST(DeclareResolve, TokensWithoutTheDefinitionAreRejected) {
  // Nothing to check the tokens against and nothing for the stub to call.
  EXPECT_EQ(resolve_error(tokens_decl("f", {"arg", "stream", "ret", "arg", "attr.k:int32", "ret"}), ""),
            "arg_spec of 'f' (functions['f']): no definition of 'f' was found in cpp_sources (kjit looks for a free "
            "function 'RET f(...)' at namespace scope)");
}

TEST(DeclareResolve, TokensForAMacroGeneratedFunctionReadTheExpansion) {
  const char* src =
      "#define GEN(SUFFIX, T) \\\n"
      "  void scale##SUFFIX(const T* x, T* y, float alpha, int64_t stream) {}\n"
      "GEN(_f32, float)\n"
      "GEN(_f64, double)\n";
  FunctionSpec s = resolve_one(tokens_decl("scale_f64", {"arg", "ret", "attr.alpha", "stream"}), src);
  EXPECT_EQ(s.callee, "scale_f64");
  EXPECT_EQ(to_string(s), "x: float64[...], y: float64[...] out, alpha: float32, stream: stream");
}

TEST(DeclareResolve, TokensTakeTheDefaultDevice) {
  FunctionSpec s = resolve_one(tokens_decl("f", {"arg", "ret"}),
                               "void f(const kjit::TensorView x, kjit::TensorView y) {}", DeviceKind::kCUDA);
  for (const Param& p : s.params) {
    EXPECT_EQ(p.tensor.device, DeviceKind::kCUDA);
    EXPECT_FALSE(p.tensor.device_given);
  }
}

TEST(DeclareResolve, UnnamedCppTensorsUseFallbackNames) {
  FunctionSpec s = resolve_one(tokens_decl("f", {"arg", "ret"}), "void f(const float*, float*) {}");
  EXPECT_EQ(to_string(s), "arg0: float32[...], ret0: float32[...] out");
}

TEST(DeclareResolve, BareAttrTakesItsTypeFromTheCppParameterOfThatName) {
  const char* src = "void f(kjit::TensorView o, std::size_t count, const double& w, bool flag, unsigned short u) {}";
  FunctionSpec s = resolve_one(tokens_decl("f", {"ret", "attr.count", "attrs.w", "attr.flag", "attr.u"}), src);
  EXPECT_EQ(to_string(s), "o: any[...] out, count: uint64, w: float64, flag: bool, u: uint16");
}

TEST(DeclareResolve, ExplicitAttrTypeWinsOverTheCppType) {
  // brainevent's float16 convention: the kernel takes uint16_t raw bits.
  FunctionSpec s =
      resolve_one(tokens_decl("f", {"ret", "attr.h:float16"}), "void f(kjit::TensorView o, uint16_t h) {}");
  EXPECT_EQ(to_string(s), "o: any[...] out, h: float16");
}

TEST(DeclareResolve, StreamTokenAcceptsAnyIntegerParameter) {
  FunctionSpec s = resolve_one(tokens_decl("f", {"ret", "stream"}), "void f(kjit::TensorView o, int64_t s) {}");
  EXPECT_EQ(to_string(s), "o: any[...] out, s: stream");
  FunctionSpec v = resolve_one(tokens_decl("f", {"ret", "stream"}), "void f(kjit::TensorView o, void* stream) {}");
  EXPECT_EQ(to_string(v), "o: any[...] out, stream: stream");
}

TEST(DeclareResolve, DefinitionWinsOverForwardDeclarations) {
  const char* src =
      "void f(const float* a, float* b);\n"
      "void f(const float* x, float* y) {}\n"
      "void f(const float* p, float* q);\n";
  FunctionSpec s = resolve_one(tokens_decl("f", {"arg", "ret"}), src);
  EXPECT_EQ(to_string(s), "x: float32[...], y: float32[...] out");
  // Without a definition, the last declaration.
  FunctionSpec d =
      resolve_one(tokens_decl("f", {"arg", "ret"}), "void f(int* a, int* b);\nvoid f(const int* c, int* d);\n");
  EXPECT_EQ(to_string(d), "c: int32[...], d: int32[...] out");
}

TEST(DeclareResolve, InfersTheWholeSpecFromTheDefinition) {
  const char* src =
      "namespace a { namespace b {\n"
      "void k(const kjit::TensorView& x, const __half* h, BE::Tensor out, float alpha, std::complex<double> c,\n"
      "       cudaStream_t st, size_t n) {}\n"
      "} }\n";
  FunctionSpec s = resolve_one(infer_decl("k"), src);
  EXPECT_EQ(s.callee, "a::b::k");
  EXPECT_EQ(to_string(s),
            "x: any[...], h: float16[...], out: any[...] out, alpha: float32, c: complex128, st: stream, n: uint64");
}

TEST(DeclareResolve, InferenceNamesUnnamedTensors) {
  FunctionSpec s = resolve_one(infer_decl("k"), "void k(const float*, double*) {}");
  EXPECT_EQ(to_string(s), "arg0: float32[...], arg1: float64[...] out");
}

TEST(DeclareResolve, InferenceAndTokensMakeTemplateParametersDtypeVariables) {
  const char* src =
      "template <typename T>\n"
      "void scale(const T* x, T* y, T alpha, int64_t n) {}\n"
      "template <typename T, typename I>\n"
      "void gather(const T* x, const I* idx, T* y) {}\n";
  const char* scale = "<T: float32|float64> x: T[...], y: T[...] out, alpha: T, n: int64";
  FunctionSpec s = resolve_one(infer_decl("scale"), src);
  EXPECT_EQ(to_string(s), scale);
  EXPECT_EQ(s.callee_template_vars, (std::vector<std::string>{"T"}));
  EXPECT_EQ(to_string(resolve_one(tokens_decl("scale", {"arg", "ret", "attr.alpha", "attr.n"}), src)), scale);
  FunctionSpec g = resolve_one(infer_decl("gather"), src);
  EXPECT_EQ(to_string(g), "<T: float32|float64, I: float32|float64> x: T[...], idx: I[...], y: T[...] out");
  EXPECT_EQ(g.callee_template_vars, (std::vector<std::string>{"T", "I"}));
}

TEST(DeclareResolveErrors, TemplatesInferenceCannotInstantiate) {
  EXPECT_EQ(resolve_error(infer_decl("f"), "template <typename T, typename U> void f(const T* x, T* y, U a) {}"),
            "cannot infer the spec of 'f' (cpp_sources:1): template parameter U types no tensor parameter (const U* "
            "x, U* y), so no call could tell which instantiation to run; give a signature (<T: float32|float64> x: "
            "T[n], ...) to say which dtypes to instantiate");
  EXPECT_EQ(resolve_error(infer_decl("f"), "template <typename T, int N> void f(const T* x, T* y) {}"),
            "cannot infer the spec of 'f' (cpp_sources:1): it is a template over a value or a pack, which kjit cannot "
            "choose; declare a plain function that calls the instantiations you need");
  EXPECT_EQ(resolve_error(tokens_decl("f", {"arg", "ret"}), "template <typename T> void f(const T* x, const T* y) {}"),
            "arg_spec of 'f' (functions['f']): token #1 'ret' declares an output, but C++ parameter #1 'const T* y' "
            "at cpp_sources:1 points to const data the kernel cannot write; drop the const or use 'arg'");
}

TEST(DeclareResolve, SignatureFormPicksUpANamespaceQualifiedCallee) {
  const char* src =
      "namespace kern { inline namespace v1 {\nvoid rowsum(const kjit::TensorView a, kjit::TensorView o) {}\n} }\n";
  FunctionSpec s = resolve_one(signature_decl("rowsum", "a: float32[m, k], o: float32[m] out; k % 2 == 0"), src);
  EXPECT_EQ(s.callee, "kern::v1::rowsum");
  EXPECT_EQ(to_string(s), "a: float32[m, k], o: float32[m] out; k % 2 == 0");
}

TEST(DeclareResolve, SignatureFormNeedsNoDefinition) {
  FunctionSpec s = resolve_one(signature_decl("f", "a: float32[n]"), "");
  EXPECT_EQ(s.callee, "");
  FunctionSpec g = resolve_one(signature_decl("f", "a: float32[n]"), "void f(const float* a) {}");
  EXPECT_EQ(g.callee, "f");
}

TEST(DeclareResolve, SignatureFormTakesTheDefaultDevice) {
  FunctionSpec s = resolve_one(signature_decl("f", "a: float32[n], b: float32[n] @cpu"), "", DeviceKind::kCUDA);
  EXPECT_EQ(s.params[0].tensor.device, DeviceKind::kCUDA);
  EXPECT_EQ(s.params[1].tensor.device, DeviceKind::kCPU);
}

TEST(DeclareResolve, SignatureErrorsPassThrough) {
  EXPECT_THROW(resolve_one(signature_decl("f", "a: float33[n]"), ""), SpecError);
}

TEST(DeclareResolve, ResolvesSeveralDeclarationsInOrder) {
  const char* src =
      "void a(const float* x, float* y) {}\n"
      "void b(kjit::TensorView o, int n) {}\n";
  std::vector<FunctionSpec> specs = resolve_functions(
      {infer_decl("b"), tokens_decl("a", {"arg", "ret"}), signature_decl("c", "x: int8[n]")}, {{"cpp_sources", src}});
  ASSERT_EQ(specs.size(), 3u);
  EXPECT_EQ(specs[0].name, "b");
  EXPECT_EQ(specs[1].name, "a");
  EXPECT_EQ(specs[2].name, "c");
}

TEST(DeclareResolve, LooksAcrossSources) {
  std::vector<FunctionSpec> specs =
      resolve_functions({infer_decl("f")}, {{"cpp_sources[0]", "void f(const float* x, float* y);"},
                                            {"cpp_sources[1]", "void f(const float* x, float* y) {}"}});
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(to_string(specs[0]), "x: float32[...], y: float32[...] out");
}

// ---- every SpecError of resolve_functions ----

TEST(DeclareResolveErrors, BareAttrWithoutADefinition) {
  EXPECT_EQ(resolve_error(tokens_decl("f", {"ret", "attr.x"}), "void g() {}"),
            "arg_spec of 'f' (functions['f']): a bare 'attr.<name>' takes its type from the C++ definition, but no "
            "definition of 'f' was found in cpp_sources (kjit looks for a free function 'RET f(...)' at namespace "
            "scope); write 'attr.<name>:<type>' instead");
}

TEST(DeclareResolveErrors, BareAttrWithNoSourcesAtAll) {
  EXPECT_EQ(spec_error([] {
              resolve_functions({tokens_decl("f", {"ret", "attr.x"})}, {});
            }),
            "arg_spec of 'f' (functions['f']): a bare 'attr.<name>' takes its type from the C++ definition, but no "
            "definition of 'f' was found in the sources (kjit looks for a free function 'RET f(...)' at namespace "
            "scope); write 'attr.<name>:<type>' instead");
}

TEST(DeclareResolveErrors, TokenCountMustMatchTheParameters) {
  EXPECT_EQ(resolve_error(tokens_decl("f", {"arg", "ret"}), "\nvoid f(const float* x, float* y, int) {}"),
            "arg_spec of 'f' (functions['f']): 2 tokens, but the C++ definition at cpp_sources:2 has 3 parameters "
            "(x, y, <unnamed>); there is one token per parameter, in order");
  EXPECT_EQ(resolve_error(tokens_decl("f", {"ret"}), "void f() {}"),
            "arg_spec of 'f' (functions['f']): 1 tokens, but the C++ definition at cpp_sources:1 has 0 parameters "
            "(none); there is one token per parameter, in order");
}

TEST(DeclareResolveErrors, TokenRoleMustMatchTheParameter) {
  EXPECT_EQ(resolve_error(tokens_decl("f", {"ret", "arg"}), "void f(float* y, int n) {}"),
            "arg_spec of 'f' (functions['f']): token #1 'arg' declares a tensor, but C++ parameter #1 'int n' at "
            "cpp_sources:1 is a scalar");
  EXPECT_EQ(resolve_error(tokens_decl("f", {"ret", "attrs.n:int32"}), "void f(float* y, const float* n) {}"),
            "arg_spec of 'f' (functions['f']): token #1 'attrs.n:int32' declares a scalar, but C++ parameter #1 "
            "'const float* n' at cpp_sources:1 is a tensor");
  EXPECT_EQ(resolve_error(tokens_decl("f", {"ret", "ctx.stream"}), "void f(float* y, float s) {}"),
            "arg_spec of 'f' (functions['f']): token #1 'ctx.stream' declares a stream, but C++ parameter #1 "
            "'float s' at cpp_sources:1 is a scalar");
  EXPECT_EQ(resolve_error(tokens_decl("f", {"ret", "attr.s:int64"}), "void f(float* y, cudaStream_t s) {}"),
            "arg_spec of 'f' (functions['f']): token #1 'attr.s:int64' declares a scalar, but C++ parameter #1 "
            "'cudaStream_t s' at cpp_sources:1 is a stream");
}

TEST(DeclareResolveErrors, TokenOnAnUnmappableParameterSaysWhy) {
  EXPECT_EQ(resolve_error(tokens_decl("f", {"ret", "arg"}), "void f(float* y, float** p) {}"),
            "arg_spec of 'f' (functions['f']): token #1 'arg' declares a tensor, but C++ parameter #1 'float** p' "
            "at cpp_sources:1 is a type kjit cannot map (a pointer to a pointer has no kjit meaning)");
  EXPECT_EQ(resolve_error(tokens_decl("f", {"ret"}), "void f(kjit::TensorView& y) {}"),
            "arg_spec of 'f' (functions['f']): token #0 'ret' declares a tensor, but C++ parameter #0 "
            "'kjit::TensorView& y' at cpp_sources:1 is a type kjit cannot map (a non-const reference to a tensor "
            "view cannot bind to kjit's argument; take 'kjit::TensorView' by value (non-const = output) or by const "
            "reference (input))");
}

TEST(DeclareResolveErrors, BareAttrNotAmongTheParameters) {
  EXPECT_EQ(resolve_error(tokens_decl("f", {"ret", "attr.alpha"}), "void f(float* y, float scale) {}"),
            "arg_spec of 'f' (functions['f']): parameter 'alpha' (from 'attr.alpha') not found in the C++ signature "
            "of 'f' at cpp_sources:1; its parameters are: y, scale");
}

TEST(DeclareResolveErrors, BareAttrNamingANonScalarParameter) {
  // Token #1 sits on a scalar, but its name points at the tensor.
  EXPECT_EQ(resolve_error(tokens_decl("f", {"ret", "attr.y"}), "void f(float* y, float scale) {}"),
            "arg_spec of 'f' (functions['f']): cannot map C++ type 'float*' of parameter 'y' in 'f' (cpp_sources:1) "
            "to an attr type (it is a tensor); write 'attr.y:<type>' with one of: " +
                known_scalar_names());
}

TEST(DeclareResolveErrors, BareAttrNamingAnUnmappableParameter) {
  EXPECT_EQ(resolve_error(tokens_decl("f", {"ret", "attr.n", "attr.h"}), "void f(float* y, int n, __half h) {}"),
            "arg_spec of 'f' (functions['f']): token #2 'attr.h' declares a scalar, but C++ parameter #2 '__half h' "
            "at cpp_sources:1 is a type kjit cannot map (16-bit float attrs reach the kernel as uint16_t raw bits: "
            "declare it 'uint16_t h' with the token 'attr.h:float16' (or bfloat16))");
}

TEST(DeclareResolveErrors, TokenErrorsNameTheOrigin) {
  EXPECT_EQ(resolve_error(tokens_decl("f", {"arg"}), ""),
            "arg_spec of 'f' (functions['f']): the arg_spec must contain at least one 'ret' token (an output tensor "
            "XLA allocates); got ['arg']. For a function without tensor outputs, give a signature string instead");
}

TEST(DeclareResolveErrors, TypedAttrNamesTheParameterInItsSlot) {
  // An attr is passed by name: a typed attr's name must be its parameter's.
  EXPECT_EQ(resolve_error(tokens_decl("f", {"ret", "attr.y:int32"}), "void f(float* y, int n) {}"),
            "arg_spec of 'f' (functions['f']): token #1 'attr.y:int32' names attr 'y', but C++ parameter #1 at "
            "cpp_sources:1 is 'int n'; 'y' is another parameter (tokens follow the parameters' order) (its "
            "parameters are: y, n)");
  EXPECT_EQ(resolve_error(tokens_decl("f", {"ret", "attr.m:int32"}), "void f(float* y, int n) {}"),
            "arg_spec of 'f' (functions['f']): token #1 'attr.m:int32' names attr 'm', but C++ parameter #1 at "
            "cpp_sources:1 is 'int n'; the definition has no parameter 'm' (its parameters are: y, n)");
}

TEST(DeclareResolveErrors, InferWithoutADefinition) {
  EXPECT_EQ(resolve_error(infer_decl("f"), "void g(float* y) {}"),
            "cannot infer the spec of 'f' (functions['f']): no definition of 'f' was found in cpp_sources (kjit "
            "looks for a free function 'RET f(...)' at namespace scope). Give arg_spec tokens or a signature string "
            "instead");
}

TEST(DeclareResolveErrors, InferWithAnUnmappableType) {
  EXPECT_EQ(resolve_error(infer_decl("f"), "void f(float* y, Foo cfg) {}"),
            "cannot map C++ type 'Foo' of parameter 'cfg' (#1) in 'f' (cpp_sources:1) to a kjit type: kjit maps "
            "tensors (kjit::TensorView, BE::Tensor, tvm::ffi::TensorView, tvm::ffi::Tensor, typed pointers), "
            "scalars (bool, int8_t..uint64_t, int, long, size_t, float, double, std::complex<float|double>, ...), "
            "str and bytes (tvm::ffi::String, tvm::ffi::Bytes, std::string, std::string_view) and streams "
            "(cudaStream_t, kjit::Stream, int64_t stream). Or declare the function with arg_spec tokens or a "
            "signature string");
  EXPECT_EQ(resolve_error(infer_decl("f"), "void f(float* y, float**) {}"),
            "cannot map C++ type 'float**' of parameter 'arg1' (#1) in 'f' (cpp_sources:1) to a kjit type: a pointer "
            "to a pointer has no kjit meaning. Or declare the function with arg_spec tokens or a signature string");
}

TEST(DeclareResolveErrors, InferredScalarsNeedNames) {
  EXPECT_EQ(resolve_error(infer_decl("f"), "void f(float* y, int) {}"),
            "parameter #1 'int' of 'f' (cpp_sources:1) has no name; an attr is passed by name, so name it");
}

TEST(DeclareResolve, ScalarOnlyFunctionsInfer) {
  EXPECT_EQ(to_string(resolve_one(infer_decl("f"), "int f(int n, kjit::Stream s) { return n; }")),
            "n: int32, s: stream");
}

TEST(DeclareResolve, TvmFfiTypesInfer) {
  const char* src =
      "namespace ffi = tvm::ffi;\n"
      "ffi::Tensor f(const tvm::ffi::TensorView& x, tvm::ffi::Tensor y, tvm::ffi::String s, const ffi::Bytes& b,\n"
      "              const std::string& t, std::string_view u) { return y; }";
  EXPECT_EQ(to_string(resolve_one(infer_decl("f"), src)),
            "x: any[...], y: any[...] out, s: str, b: bytes, t: str, u: str");
}

TEST(DeclareResolve, AllConstTensorsInferWhenTheFunctionReturns) {
  EXPECT_EQ(to_string(resolve_one(infer_decl("f"), "double f(const tvm::ffi::TensorView x) { return 0; }")),
            "x: any[...]");
}

TEST(DeclareResolveErrors, InferNeedsAnOutput) {
  EXPECT_EQ(resolve_error(infer_decl("f"), "void f(const float* x, const kjit::TensorView& y) {}"),
            "No non-const tensor output found in 'f' (cpp_sources:1). Mark input tensors 'const' to tell them from "
            "outputs, or use the explicit form: functions={'f': ['arg', 'ret', ...]}");
}

TEST(DeclareResolveErrors, InferredSpecIsValidated) {
  EXPECT_EQ(resolve_error(infer_decl("f"), "void f(float* y, void* stream, kjit::Stream s2) {}"),
            "signature of 'f': a second stream parameter 's2' (the first is 'stream'); a kernel gets one stream");
}

TEST(DeclareResolveErrors, AmbiguousNamespaces) {
  const char* src =
      "namespace a { void f(float* y) {} }\n"
      "namespace b { void f(float* y) {} }\n";
  std::string expected =
      "'f' names different functions (a::f at cpp_sources:1, b::f at cpp_sources:2); kjit cannot choose";
  EXPECT_EQ(resolve_error(infer_decl("f"), src), "cannot infer the spec of 'f' (functions['f']): " + expected +
                                                     ". Give arg_spec tokens or a signature string instead");
  EXPECT_EQ(resolve_error(tokens_decl("f", {"ret", "attr.x"}), src),
            "arg_spec of 'f' (functions['f']): a bare 'attr.<name>' takes its type from the C++ definition, but " +
                expected + "; write 'attr.<name>:<type>' instead");
  // Tokens need the definition (to check them and declare the kernel); a signature does not.
  EXPECT_EQ(resolve_error(tokens_decl("f", {"ret"}), src), "arg_spec of 'f' (functions['f']): " + expected);
  EXPECT_EQ(resolve_one(signature_decl("f", "y: float32[n] out"), src).callee, "");
}

TEST(DeclareResolveErrors, Overloads) {
  const char* src =
      "void f(float* y) {}\n"
      "void f(double* y) {}\n";
  EXPECT_EQ(resolve_error(infer_decl("f"), src),
            "cannot infer the spec of 'f' (functions['f']): 'f' is defined 2 times (f at cpp_sources:1, f at "
            "cpp_sources:2): overloads cannot share one exported name. Give arg_spec tokens or a signature string "
            "instead");
}

// ---- functions generated by macros #defined in the source ----

TEST(MacroExpansion, PastesSubstitutesAndReportsTheCallLine) {
  const char* src =
      "// a comment with GEN(_x, int) in it is no call\n"
      "#define GEN(SUFFIX, T)   \\\n"
      "  void f##SUFFIX(const T* x, /* note */ T* y) {}\n"
      "GEN(_a, float)\n"
      "GEN(\n"
      "    _b, std::pair<int, int>)\n";
  std::vector<CppFunction> a = find_macro_generated_functions(src, "f_a");
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].line, 4);
  EXPECT_EQ(a[0].params[0].type, "const float*");
  EXPECT_TRUE(a[0].is_definition);
  // The call's commas inside <> split macro arguments, as the preprocessor does.
  EXPECT_TRUE(find_macro_generated_functions(src, "f_b").empty());
  EXPECT_TRUE(find_macro_generated_functions(src, "f_x").empty());
}

TEST(MacroExpansion, VariadicAndStringisedParameters) {
  const char* src =
      "#define DECL(NAME, ...) void NAME(__VA_ARGS__) { const char* n = #NAME; (void)n; }\n"
      "DECL(g, const float* x, float* y, int k)\n";
  std::vector<CppFunction> g = find_macro_generated_functions(src, "g");
  ASSERT_EQ(g.size(), 1u);
  ASSERT_EQ(g[0].params.size(), 3u);
  EXPECT_EQ(g[0].params[2].name, "k");
}

TEST(MacroExpansion, AWrittenDefinitionWins) {
  const char* src =
      "#define GEN(S) void h##S(float* y) {}\n"
      "void h_a(double* y) {}\n"
      "GEN(_b)\n";
  std::vector<CppFunction> h = find_written_or_generated(src, "h_a");
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].params[0].type, "double*");
  EXPECT_EQ(find_written_or_generated(src, "h_b").size(), 1u);
}

TEST(MacroExpansion, ExplainsAnAnnotationItCannotFollow) {
  const char* src =
      "#define GEN(S, T) void f##S(const T* x, T* y) {}\n"
      "// @BE f_b\n"
      "GEN(_a, float)\n"
      "// @BE f_c\n"
      "void f_c_typo(float* y) {}\n";
  EXPECT_EQ(explain_macro_annotation(src, 2, "f_b"),
            "the macro call 'GEN(...)' at line 3 (#define at line 1) expands to functions 'f_a', not 'f_b'");
  // A written definition after the annotation is no macro call: nothing macro-specific to say.
  EXPECT_EQ(explain_macro_annotation(src, 4, "f_c"), "");
  EXPECT_EQ(explain_macro_annotation("// @BE k\nK_GEN(_a)\n", 1, "k"),
            "the macro call 'K_GEN(...)' at line 2 after the annotation has no #define in this source (kjit expands "
            "macros defined in the same source, not in #include'd headers)");
}

TEST(MacroExpansion, AMacroCallWithoutSemicolonIsNotPartOfTheNextReturnType) {
  const char* src =
      "#define GEN(S, T) void f##S(const T* x, T* y) {}\n"
      "GEN(_a, float)\n"
      "\n"
      "void g(float* y) {}\n"
      "decltype(1) h(float* y);\n";
  std::vector<CppFunction> g = find_cpp_functions(src, "g");
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].return_type, "void");
  std::vector<CppFunction> h = find_cpp_functions(src, "h");
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].return_type, "decltype(1)");
}

}  // namespace
}  // namespace kjit
