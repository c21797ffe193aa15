"""The four front doors (docs/frontdoors.md): arg_spec tokens, names inferred from
the C++ definitions, `// @kjit` / `// @BE` annotations, and the spec they all end in.

Most cases use kjit.resolve (no compiler); a few build and call with NumPy.
"""

import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kjit
from kjit import SpecError

from conftest import build

TV = "kjit::TensorView"
INC = "#include <kjit/kernel.h>\n#include <cstdint>\n#include <complex>\n"
ATTR_TYPES = (
    "bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, bfloat16, float32, float64, "
    "complex64, complex128, str, bytes"
)
VALID_TOKENS = (
    "arg, ret, stream, attr.<name>, attr.<name>:<type> (aliases: args, rets, ctx.stream, attrs.<name>, "
    "attrs.<name>:<type>)"
)
CPP_MAPS = (
    "kjit maps tensors (kjit::TensorView, BE::Tensor, tvm::ffi::TensorView, tvm::ffi::Tensor, typed pointers), "
    "scalars (bool, int8_t..uint64_t, int, long, size_t, float, double, std::complex<float|double>, ...), str and "
    "bytes (tvm::ffi::String, tvm::ffi::Bytes, std::string, std::string_view) and streams (cudaStream_t, "
    "kjit::Stream, int64_t stream)"
)
# The usual kernel shape: one input, one output, then whatever the test adds.
XY = f"const {TV} x, {TV} y"


def fn_src(params, name="f", body="{}"):
    return f"void {name}({params}) {body}\n"


def spec_error(src, functions=None):
    with pytest.raises(SpecError) as info:
        kjit.resolve(src, functions)
    return str(info.value)


def tokens_error(tokens, params=XY + ", float a", name="f"):
    return spec_error(fn_src(params, name), {name: tokens})


def token_where(name="f"):
    return f"arg_spec of '{name}' (functions['{name}'])"


# ---------------------------------------------------------------------------
# token parsing and normalisation
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "token, canonical",
    [
        ("arg", "arg"),
        ("args", "arg"),
        ("ret", "ret"),
        ("rets", "ret"),
        ("stream", "stream"),
        ("ctx.stream", "stream"),
        ("attr.x", "attr.x"),
        ("attrs.x", "attr.x"),
        ("attr.x:float32", "attr.x:float32"),
        ("attrs.x:float32", "attr.x:float32"),  # brainevent rejects this spelling; kjit does not
        ("attr._x1", "attr._x1"),
    ],
)
def test_normalize_each_alias(token, canonical):
    tokens = ["ret", token] if token not in ("ret", "rets") else [token]
    assert kjit.normalize_arg_spec(tokens)[-1] == canonical


def test_normalize_mixed_styles_keeps_order():
    tokens = ["args", "arg", "rets", "ret", "attrs.a", "attr.b", "attrs.c:int8", "attr.d:uint64", "ctx.stream"]
    assert kjit.normalize_arg_spec(tokens) == [
        "arg", "arg", "ret", "ret", "attr.a", "attr.b", "attr.c:int8", "attr.d:uint64", "stream"]


def test_normalize_is_a_fixed_point():
    canonical = ["arg", "ret", "attr.alpha:float32", "attr.n", "stream"]
    assert kjit.normalize_arg_spec(canonical) == canonical


def test_normalize_accepts_a_tuple():
    assert kjit.normalize_arg_spec(("args", "rets")) == ["arg", "ret"]


@pytest.mark.parametrize("dtype", ATTR_TYPES.split(", "))
def test_normalize_every_explicit_attr_type(dtype):
    assert kjit.normalize_arg_spec(["arg", "ret", f"attrs.a:{dtype}"]) == ["arg", "ret", f"attr.a:{dtype}"]


def test_normalize_error_names_the_function():
    with pytest.raises(SpecError) as info:
        kjit.normalize_arg_spec(["arg", "bogus"], name="g")
    assert str(info.value) == f"arg_spec of 'g': token #1 'bogus': invalid arg_spec token. Valid tokens: {VALID_TOKENS}"


@pytest.mark.parametrize(
    "cpp_type, dtype",
    [
        ("bool", "bool"),
        ("int8_t", "int8"),
        ("char", "int8"),
        ("signed char", "int8"),
        ("uint8_t", "uint8"),
        ("unsigned char", "uint8"),
        ("int16_t", "int16"),
        ("short", "int16"),
        ("short int", "int16"),
        ("uint16_t", "uint16"),
        ("unsigned short", "uint16"),
        ("int32_t", "int32"),
        ("int", "int32"),
        ("uint32_t", "uint32"),
        ("unsigned", "uint32"),
        ("unsigned int", "uint32"),
        ("int64_t", "int64"),
        ("std::int64_t", "int64"),
        ("long", "int64"),
        ("long int", "int64"),
        ("long long", "int64"),
        ("ptrdiff_t", "int64"),
        ("uint64_t", "uint64"),
        ("unsigned long", "uint64"),
        ("unsigned long long", "uint64"),
        ("unsigned long long int", "uint64"),
        ("size_t", "uint64"),
        ("std::size_t", "uint64"),
        ("float", "float32"),
        ("double", "float64"),
        ("std::complex<float>", "complex64"),
        ("std::complex<double>", "complex128"),
        ("const float", "float32"),
        ("const int64_t&", "int64"),
        ("const std::complex<double>&", "complex128"),
    ],
)
def test_bare_attr_type_comes_from_the_cpp_parameter(cpp_type, dtype):
    src = fn_src(f"{XY}, {cpp_type} a")
    sig = f"x: any[...], y: any[...] out, a: {dtype}"
    assert kjit.resolve(src, {"f": ["arg", "ret", "attr.a"]}) == {"f": sig}
    assert kjit.resolve(src, {"f": ["args", "rets", "attrs.a"]}) == {"f": sig}
    assert kjit.resolve(src, ["f"]) == {"f": sig}  # and inferred without tokens


@pytest.mark.parametrize(
    "dtype, cpp_type",
    [
        ("bool", "bool"),
        ("int8", "int8_t"),
        ("int16", "int16_t"),
        ("int32", "int32_t"),
        ("int64", "int64_t"),
        ("uint8", "uint8_t"),
        ("uint16", "uint16_t"),
        ("uint32", "uint32_t"),
        ("uint64", "uint64_t"),
        ("float16", "uint16_t"),
        ("bfloat16", "uint16_t"),
        ("float32", "float"),
        ("float64", "double"),
        ("complex64", "std::complex<float>"),
        ("complex128", "std::complex<double>"),
    ],
)
def test_explicit_attr_type(dtype, cpp_type):
    src = fn_src(f"{XY}, {cpp_type} a")
    assert kjit.resolve(src, {"f": ["arg", "ret", f"attrs.a:{dtype}"]}) == {
        "f": f"x: any[...], y: any[...] out, a: {dtype}"}


def test_tokens_for_a_function_the_sources_do_not_define_are_rejected():
    # Nothing to check the tokens against and nothing for the stub to call: a
    # SpecError now, not a compile (or link) error later.
    with pytest.raises(kjit.SpecError) as err:
        kjit.resolve("", {"g": ["args", "rets", "attr.a:float32", "ctx.stream"]})
    assert str(err.value) == (
        "arg_spec of 'g' (functions['g']): no definition of 'g' was found in cpp_sources (kjit looks for a free "
        "function 'RET g(...)' at namespace scope)")


def test_mixed_styles_in_one_token_list():
    src = fn_src(f"const {TV} x, const {TV} w, {TV} y, {TV} z, float alpha, int8_t k, int64_t stream")
    tokens = ["args", "arg", "rets", "ret", "attrs.alpha", "attr.k:int8", "ctx.stream"]
    assert kjit.resolve(src, {"f": tokens}) == {
        "f": "x: any[...], w: any[...], y: any[...] out, z: any[...] out, alpha: float32, k: int8, stream: stream"}


def test_mixed_front_doors_in_one_functions_dict():
    src = fn_src(f"{XY}, float a", "f") + fn_src(XY, "g")
    assert kjit.resolve(src, {"f": ["arg", "ret", "attr.a"], "g": "x: float32[n], y: float32[n] out"}) == {
        "f": "x: any[...], y: any[...] out, a: float32",
        "g": "x: float32[n], y: float32[n] out",
    }


# ---------------------------------------------------------------------------
# token errors
# ---------------------------------------------------------------------------


def test_invalid_token_lists_the_valid_ones():
    assert tokens_error(["arg", "output", "attr.a"]) == (
        f"{token_where()}: token #1 'output': invalid arg_spec token. Valid tokens: {VALID_TOKENS}")


def test_duplicate_stream():
    src = fn_src(f"{XY}, int64_t stream, int64_t s2")
    assert spec_error(src, {"f": ["arg", "ret", "stream", "ctx.stream"]}) == (
        f"{token_where()}: token #3 'ctx.stream': duplicate 'stream' token (token #2 is already the stream)")


def test_no_ret():
    assert tokens_error(["arg", "args", "attr.a"], params=f"const {TV} x, const {TV} y, float a") == (
        f"{token_where()}: the arg_spec must contain at least one 'ret' token (an output tensor XLA allocates); "
        "got ['arg', 'args', 'attr.a']. For a function without tensor outputs, give a signature string instead")


def test_unknown_attr_type_lists_the_types():
    assert tokens_error(["arg", "ret", "attr.a:float33"]) == (
        f"{token_where()}: token #2 'attr.a:float33': unknown attr type 'float33'; valid types: {ATTR_TYPES}")


@pytest.mark.parametrize("bad", ["1a", "int", "a-b", ""])
def test_attr_name_must_be_a_c_identifier(bad):
    assert tokens_error(["arg", "ret", f"attr.{bad}:float32"]) == (
        f"{token_where()}: token #2 'attr.{bad}:float32': attr name '{bad}' is not a C identifier "
        "(letters, digits and '_', not starting with a digit)")


def test_duplicate_attr_across_aliases():
    assert tokens_error(["arg", "ret", "attr.a", "attrs.a:float32"], params=f"{XY}, float a, float b") == (
        f"{token_where()}: token #3 'attrs.a:float32': attr 'a' is given twice")


def test_bare_attr_parameter_not_found_lists_the_parameters():
    assert tokens_error(["arg", "ret", "attr.alpha"]) == (
        f"{token_where()}: parameter 'alpha' (from 'attr.alpha') not found in the C++ signature of 'f' at "
        "cpp_sources:1; its parameters are: x, y, a")


def test_bare_attr_without_a_definition():
    assert spec_error(fn_src(f"{XY}, float a"), {"g": ["arg", "ret", "attr.a"]}) == (
        "arg_spec of 'g' (functions['g']): a bare 'attr.<name>' takes its type from the C++ definition, but no "
        "definition of 'g' was found in cpp_sources (kjit looks for a free function 'RET g(...)' at namespace "
        "scope); write 'attr.<name>:<type>' instead")


def test_bare_attr_with_a_half_parameter_points_at_uint16_bits():
    assert tokens_error(["arg", "ret", "attr.a"], params=f"{XY}, __half a") == (
        f"{token_where()}: token #2 'attr.a' declares a scalar, but C++ parameter #2 '__half a' at cpp_sources:1 "
        "is a type kjit cannot map (16-bit float attrs reach the kernel as uint16_t raw bits: declare it "
        "'uint16_t a' with the token 'attr.a:float16' (or bfloat16))")


def test_bare_attr_with_a_struct_parameter():
    src = "struct Opts { int k; };\n" + fn_src(f"{XY}, Opts a")
    assert spec_error(src, {"f": ["arg", "ret", "attr.a"]}) == (
        f"{token_where()}: token #2 'attr.a' declares a scalar, but C++ parameter #2 'Opts a' at cpp_sources:2 "
        f"is a type kjit cannot map ({CPP_MAPS})")


def test_bare_attr_naming_a_tensor_parameter():
    # attr.x names the tensor x while its own slot is a float: the name lookup fails the type mapping.
    msg = tokens_error(["arg", "ret", "attr.x"])
    assert msg == (
        f"{token_where()}: cannot map C++ type 'const kjit::TensorView' of parameter 'x' in 'f' (cpp_sources:1) to an "
        f"attr type (it is a tensor); write 'attr.x:<type>' with one of: {ATTR_TYPES}")


@pytest.mark.parametrize("tokens", [["arg", "ret"], ["arg", "ret", "attr.a", "ret"]])
def test_token_count_must_match_the_parameters(tokens):
    assert tokens_error(tokens) == (
        f"{token_where()}: {len(tokens)} tokens, but the C++ definition at cpp_sources:1 has 3 parameters "
        "(x, y, a); there is one token per parameter, in order")


@pytest.mark.parametrize(
    "tokens, message",
    [
        (["arg", "ret", "ret"], "token #2 'ret' declares a tensor, but C++ parameter #2 'float a' at cpp_sources:1 "
                                "is a scalar"),
        (["ret", "attr.x", "attr.a"], "token #1 'attr.x' declares a scalar, but C++ parameter #1 "
                                      "'kjit::TensorView y' at cpp_sources:1 is a tensor"),
        (["arg", "ret", "stream"], "token #2 'stream' declares a stream, but C++ parameter #2 'float a' at "
                                   "cpp_sources:1 is a scalar"),
        (["stream", "ret", "attr.a"], "token #0 'stream' declares a stream, but C++ parameter #0 "
                                      "'const kjit::TensorView x' at cpp_sources:1 is a tensor"),
    ],
)
def test_token_kind_must_fit_its_cpp_parameter(tokens, message):
    assert tokens_error(tokens) == f"{token_where()}: {message}"


def test_explicit_16bit_attr_type_on_a_float_parameter_is_rejected():
    with pytest.raises(SpecError, match=r"token #2 'attr\.a:float16' declares a float16 attr, but C\+\+ parameter #2 "
                                        r"'float a' at cpp_sources:\d+ takes float32; float16 attrs reach the kernel "
                                        r"as uint16_t raw bits, so declare 'uint16_t a'$"):
        kjit.resolve(fn_src(f"{XY}, float a"), {"f": ["arg", "ret", "attr.a:float16"]})


def test_explicit_attr_type_narrower_parameter_is_rejected():
    with pytest.raises(SpecError, match=r"token #2 'attr\.a:int64' declares a int64 attr, but C\+\+ parameter #2 "
                                        r"'int32_t a' at cpp_sources:\d+ takes int32; write 'attr\.a:int32' \(or a "
                                        r"bare 'attr\.a'\)$"):
        kjit.resolve(fn_src(f"{XY}, int32_t a"), {"f": ["arg", "ret", "attr.a:int64"]})


# ---------------------------------------------------------------------------
# inference errors
# ---------------------------------------------------------------------------


def test_function_not_found():
    assert spec_error(fn_src(XY, "g"), ["f"]) == (
        "cannot infer the spec of 'f' (functions[0]): no definition of 'f' was found in cpp_sources (kjit looks for "
        "a free function 'RET f(...)' at namespace scope). Give arg_spec tokens or a signature string instead")


def test_function_not_found_names_every_source():
    assert spec_error(["int a;", "int b;"], ["f"]).startswith(
        "cannot infer the spec of 'f' (functions[0]): no definition of 'f' was found in cpp_sources[0], "
        "cpp_sources[1] ")


def test_overloaded_definitions():
    src = fn_src(XY) + fn_src(f"{XY}, int k")
    assert spec_error(src, ["f"]) == (
        "cannot infer the spec of 'f' (functions[0]): 'f' is defined 2 times (f at cpp_sources:1, f at "
        "cpp_sources:2): overloads cannot share one exported name. Give arg_spec tokens or a signature string "
        "instead")


def test_same_name_in_two_namespaces():
    src = f"namespace a {{ {fn_src(XY).strip()} }}\nnamespace b {{ {fn_src(XY).strip()} }}"
    assert spec_error(src, ["f"]) == (
        "cannot infer the spec of 'f' (functions[0]): 'f' names different functions (a::f at cpp_sources:1, b::f "
        "at cpp_sources:2); kjit cannot choose. Give arg_spec tokens or a signature string instead")


def test_all_const_tensors():
    assert spec_error(fn_src(f"const {TV} x, const {TV} y"), ["f"]) == (
        "No non-const tensor output found in 'f' (cpp_sources:1). Mark input tensors 'const' to tell them from "
        "outputs, or use the explicit form: functions={'f': ['arg', 'ret', ...]}")


def test_scalar_only_functions_infer():
    assert kjit.resolve(fn_src("int a, float b"), ["f"]) == {"f": "a: int32, b: float32"}


@pytest.mark.parametrize(
    "param, cpp_type, problem",
    [
        ("__half h", "__half", "16-bit float attrs reach the kernel as uint16_t raw bits: declare it 'uint16_t h' "
                               "with the token 'attr.h:float16' (or bfloat16)"),
        ("float** h", "float**", "a pointer to a pointer has no kjit meaning"),
        ("Opts h", "Opts", CPP_MAPS),
        ("void (*h)(int)", "void(*)(int)", "a pointer to 'void(int)' is not a known element type (typed pointers: "
                                           "float*, double*, int32_t*, ..., __half*, void*; or take "
                                           "kjit::TensorView)"),
        (f"{TV}& h", "kjit::TensorView&", "a non-const reference to a tensor view cannot bind to kjit's argument; "
                                          "take 'kjit::TensorView' by value (non-const = output) or by const "
                                          "reference (input)"),
    ],
)
def test_unmappable_inferred_type_names_parameter_and_type(param, cpp_type, problem):
    src = "struct Opts { int k; };\n" + fn_src(f"{XY}, {param}")
    assert spec_error(src, ["f"]) == (
        f"cannot map C++ type '{cpp_type}' of parameter 'h' (#2) in 'f' (cpp_sources:2) to a kjit type: {problem}. "
        "Or declare the function with arg_spec tokens or a signature string")


def test_unnamed_scalar_parameter():
    assert spec_error(fn_src(f"{XY}, int"), ["f"]) == (
        "parameter #2 'int' of 'f' (cpp_sources:1) has no name; an attr is passed by name, so name it")


# ---------------------------------------------------------------------------
# inference robustness
# ---------------------------------------------------------------------------


def test_definition_wins_over_a_forward_declaration_with_other_names():
    src = f"void f(const {TV} a, {TV} b, int k);\n" + fn_src(f"{XY}, int n")
    assert kjit.resolve(src, ["f"]) == {"f": "x: any[...], y: any[...] out, n: int32"}
    assert kjit.resolve(src, {"f": ["arg", "ret", "attr.n"]}) == {"f": "x: any[...], y: any[...] out, n: int32"}


def test_declaration_after_the_definition():
    src = fn_src(XY) + f"void f(const {TV} a, {TV} b);\n"
    assert kjit.resolve(src, ["f"]) == {"f": "x: any[...], y: any[...] out"}


def test_default_arguments_with_parens_commas_and_templates():
    src = fn_src(f"{XY}, float alpha = 1.0f, int n = (3), int m = std::max(1, 2), "
                 "int k = sizeof(std::pair<int, int>), const bool flag = false")
    assert kjit.resolve(src, ["f"]) == {
        "f": "x: any[...], y: any[...] out, alpha: float32, n: int32, m: int32, k: int32, flag: bool"}


def test_templates_with_commas_elsewhere_in_the_file():
    src = (
        "#include <map>\n"
        "template <typename K, typename V> struct P {};\n"
        "static std::map<int, std::pair<int, float>> table;\n"
        "template <typename T> void helper(std::map<T, int> m, P<int, float> p) {}\n"
        + fn_src(f"{XY}, int64_t n")
    )
    assert kjit.resolve(src, ["f"]) == {"f": "x: any[...], y: any[...] out, n: int64"}


def test_comments_inside_the_parameter_list():
    src = f"void f(const {TV} x /* in, (a) */, // the input, yes )\n  {TV} y /* out */) {{}}\n"
    assert kjit.resolve(src, ["f"]) == {"f": "x: any[...], y: any[...] out"}


def test_commented_out_and_string_definitions_are_skipped():
    src = ('// void f(int a) {}\n/* void f(int b) {} */\nconst char* s = "void f(int c) {}";\n'
           "char c = ')';\n" + fn_src(XY))
    assert kjit.resolve(src, ["f"]) == {"f": "x: any[...], y: any[...] out"}


def test_attributes_and_specifiers():
    src = f"[[gnu::noinline]] static inline void f([[maybe_unused]] const {TV} x, {TV} y) noexcept {{}}\n"
    assert kjit.resolve(src, ["f"]) == {"f": "x: any[...], y: any[...] out"}


def test_nested_namespaces():
    src = f"namespace ns {{ namespace inner {{ {fn_src(XY)} }} }}"
    assert kjit.resolve(src, ["f"]) == {"f": "x: any[...], y: any[...] out"}


def test_qualified_definition():
    src = f"namespace ns {{ void f(const {TV} a, {TV} b); }}\nvoid ns::f(const {TV} x, {TV} y) {{}}\n"
    assert kjit.resolve(src, ["f"]) == {"f": "x: any[...], y: any[...] out"}


def test_line_breaks_everywhere():
    src = f"void\nf(\n  const {TV}\n    x,\n  {TV} y\n)\n{{}}\n"
    assert kjit.resolve(src, ["f"]) == {"f": "x: any[...], y: any[...] out"}


@pytest.mark.parametrize(
    "param, name",
    [("int64_t stream", "stream"), ("cudaStream_t stream", "stream"), ("kjit::Stream s", "s"),
     ("CUstream s", "s"), ("void* stream", "stream")],
)
def test_stream_parameters(param, name):
    src = fn_src(f"{XY}, {param}")
    sig = f"x: any[...], y: any[...] out, {name}: stream"
    assert kjit.resolve(src, ["f"]) == {"f": sig}
    assert kjit.resolve(src, {"f": ["arg", "ret", "ctx.stream"]}) == {"f": sig}


def test_an_integer_not_named_stream_is_an_attr_unless_the_token_says_stream():
    src = fn_src(f"{XY}, int64_t s")
    assert kjit.resolve(src, ["f"]) == {"f": "x: any[...], y: any[...] out, s: int64"}
    assert kjit.resolve(src, {"f": ["arg", "ret", "stream"]}) == {"f": "x: any[...], y: any[...] out, s: stream"}


@pytest.mark.parametrize(
    "params, sig",
    [
        ("const float* x, float* y", "x: float32[...], y: float32[...] out"),
        ("float const* x, float* const y", "x: float32[...], y: float32[...] out"),
        ("const float* __restrict__ x, float* __restrict__ y", "x: float32[...], y: float32[...] out"),
        ("const double *x, int32_t *y", "x: float64[...], y: int32[...] out"),
        ("const int8_t* x, uint8_t* y, const bool* m, int64_t* z", "x: int8[...], y: uint8[...] out, m: bool[...], "
                                                                   "z: int64[...] out"),
        ("const __half* x, __nv_bfloat16* y", "x: float16[...], y: bfloat16[...] out"),
        ("const void* x, void* y", "x: any[...], y: any[...] out"),
        (f"{TV} const x, {TV} y", "x: any[...], y: any[...] out"),
        (f"const {TV}& x, {TV} y", "x: any[...], y: any[...] out"),
        ("const BE::Tensor x, BE::Tensor y", "x: any[...], y: any[...] out"),
    ],
)
def test_tensor_parameters(params, sig):
    assert kjit.resolve(fn_src(params), ["f"]) == {"f": sig}


def test_typed_pointers_fix_the_dtype_of_token_declared_tensors():
    src = fn_src("const float* x, double* y, int64_t n")
    assert kjit.resolve(src, {"f": ["arg", "ret", "attr.n"]}) == {
        "f": "x: float32[...], y: float64[...] out, n: int64"}


INFERRED_SOURCE = r"""
#include <kjit/kernel.h>
#include <algorithm>
#include <map>

static std::map<int, std::pair<int, float>> unused_table;

namespace ops {
namespace detail { inline float one() { return 1.0f; } }
// A forward declaration with other names first: the definition below wins.
void add_one(const kjit::TensorView a, kjit::TensorView b);
[[gnu::noinline]] void add_one(const kjit::TensorView x,   // the input, (really)
                               kjit::TensorView y) {       /* the output */
  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] = x.data<float>()[i] + detail::one();
}
void twice(const float* x, float* y, int64_t n);
}  // namespace ops

void ops::twice(const float* __restrict__ x,
                float* __restrict__ y,
                int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = 2 * x[i];
}

void with_defaults(const kjit::TensorView x, kjit::TensorView y, float alpha = std::max(1.0f, 2.0f),
                   int k = sizeof(std::pair<int, int>)) {
  y.data<float>()[0] = alpha;
  y.data<float>()[1] = static_cast<float>(k);
}

void with_stream(const kjit::TensorView x, kjit::TensorView y, kjit::Stream s) {
  y.data<float>()[0] = s == nullptr ? 7.0f : 8.0f;
}

void with_int_stream(const kjit::TensorView x, kjit::TensorView y, int64_t stream) {
  y.data<float>()[0] = stream == 0 ? 5.0f : 6.0f;
}
"""


@pytest.fixture(scope="module")
def inferred():
    return build("fd_inferred", INFERRED_SOURCE, ["add_one", "twice", "with_defaults", "with_stream",
                                                  "with_int_stream"])


def test_inferred_module_signatures(inferred):
    assert inferred.functions == {
        "add_one": "x: any[...], y: any[...] out",
        "twice": "x: float32[...], y: float32[...] out, n: int64",
        "with_defaults": "x: any[...], y: any[...] out, alpha: float32, k: int32",
        "with_stream": "x: any[...], y: any[...] out, s: stream",
        "with_int_stream": "x: any[...], y: any[...] out, stream: stream",
    }
    assert inferred.arg_specs == {
        "add_one": ["arg", "ret"],
        "twice": ["arg", "ret", "attr.n:int64"],
        "with_defaults": ["arg", "ret", "attr.alpha:float32", "attr.k:int32"],
        "with_stream": ["arg", "ret", "stream"],
        "with_int_stream": ["arg", "ret", "stream"],
    }
    assert set(inferred.devices.values()) == {"cpu"}


def test_namespaced_function_is_called_qualified(inferred):
    assert "ops::add_one(" in inferred.get_host_source("add_one")
    x = np.arange(4, dtype=np.float32)
    y = np.zeros_like(x)
    inferred.add_one(x, y)
    np.testing.assert_array_equal(y, x + 1)


def test_qualified_definition_builds_and_runs(inferred):
    x = np.arange(5, dtype=np.float32)
    y = np.zeros_like(x)
    inferred.twice(x, y, 5)
    np.testing.assert_array_equal(y, 2 * x)


def test_typed_pointer_rejects_a_wrong_dtype(inferred):
    x = np.arange(5, dtype=np.float32)
    with pytest.raises(TypeError) as info:
        inferred.twice(x.astype(np.float64), np.zeros_like(x), 5)
    assert str(info.value) == "twice: argument #0 'x': dtype must be float32, got float64"
    with pytest.raises(TypeError) as info:
        inferred.twice(x, np.zeros(5, np.int32), 5)
    assert str(info.value) == "twice: argument #1 'y': dtype must be float32, got int32"


def test_default_arguments_are_still_required_arguments(inferred):
    y = np.zeros(2, np.float32)
    inferred.with_defaults(np.zeros(1, np.float32), y, 3.5, 9)
    np.testing.assert_array_equal(y, [3.5, 9.0])
    with pytest.raises(TypeError, match=r"^with_defaults\(\) missing required arguments: '\w+', '\w+'$"):
        inferred.with_defaults(np.zeros(1, np.float32), y)


def test_streams_are_not_caller_arguments(inferred):
    y = np.zeros(1, np.float32)
    inferred.with_stream(np.zeros(1, np.float32), y)
    assert y[0] == 7.0  # CPU: no stream
    inferred.with_int_stream(np.zeros(1, np.float32), y)
    assert y[0] == 5.0


# ---------------------------------------------------------------------------
# annotations
# ---------------------------------------------------------------------------


def test_plain_annotation():
    src = "// @kjit f\n" + fn_src(f"{XY}, int n")
    assert kjit.resolve(src) == {"f": "x: any[...], y: any[...] out, n: int32"}


def test_multiple_annotations_in_source_order():
    src = ("// @kjit g\n" + fn_src(XY, "g") + "  // @kjit f arg ret attr.a\n" + fn_src(f"{XY}, float a")
           + "// @BE h args rets attrs.k:int8 ctx.stream\n" + fn_src(f"{XY}, int8_t k, int64_t stream", "h"))
    sigs = kjit.resolve(src)
    assert sigs == {
        "g": "x: any[...], y: any[...] out",
        "f": "x: any[...], y: any[...] out, a: float32",
        "h": "x: any[...], y: any[...] out, k: int8, stream: stream",
    }
    assert list(sigs) == ["g", "f", "h"]


def test_annotations_across_sources():
    assert kjit.resolve(["// @kjit f\n" + fn_src(XY), "// @kjit g\n" + fn_src(XY, "g")]) == {
        "f": "x: any[...], y: any[...] out", "g": "x: any[...], y: any[...] out"}


def test_no_annotations_resolve_to_nothing():
    assert kjit.resolve(fn_src(XY)) == {}
    assert kjit.resolve("// @kjitx f\n// kjit f\n" + fn_src(XY)) == {}


def test_no_functions_at_all_is_an_error_at_load():
    with pytest.raises(SpecError) as info:
        build("fd_nofns", fn_src(XY), None)
    assert str(info.value) == (
        "module 'fd_nofns': no functions given; pass functions={name: signature or arg_spec tokens}, a list of "
        "names, or annotate the sources with '// @kjit NAME [tokens...]'")


def test_explicit_functions_take_precedence_over_annotations():
    src = "// @kjit f arg ret attr.a:int8\n" + fn_src(f"{XY}, float a")
    assert kjit.resolve(src, ["f"]) == {"f": "x: any[...], y: any[...] out, a: float32"}


@pytest.mark.parametrize("signature", ["x: float32[n], y: float32[n] out",
                                       "x: float32[n], y: float32[n] out; n % 4 == 0"])
def test_annotation_with_a_signature_string(signature):
    src = f"// @kjit f({signature})\n" + fn_src(XY)
    assert kjit.resolve(src) == {"f": signature}


def test_annotation_tokens_forgive_list_punctuation():
    src = "// @kjit f [\"arg\", 'ret', attr.a]\n" + fn_src(f"{XY}, float a")
    assert kjit.resolve(src) == {"f": "x: any[...], y: any[...] out, a: float32"}


def test_be_annotation_is_an_alias():
    src = "   //   @BE   f   arg ret   \n" + fn_src(XY)
    assert kjit.resolve(src) == {"f": "x: any[...], y: any[...] out"}


def test_duplicate_annotation_names_both_lines():
    src = "// @kjit f\n// @BE f arg ret\n" + fn_src(XY)
    assert spec_error(src) == (
        "duplicate annotation for 'f': cpp_sources:1 (// @kjit annotation) and cpp_sources:2 (// @BE annotation)")


def test_duplicate_annotation_across_sources():
    assert spec_error(["// @kjit f\n" + fn_src(XY), "\n// @kjit f\n"]) == (
        "duplicate annotation for 'f': cpp_sources[0]:1 (// @kjit annotation) and cpp_sources[1]:2 "
        "(// @kjit annotation)")


@pytest.mark.parametrize(
    "line, message",
    [
        ("// @kjit", "cpp_sources:1 (// @kjit annotation): expected a function name after '@kjit', got ''; write "
                     "'// @kjit NAME [tokens...]'"),
        ("// @BE (x: float32[n])", "cpp_sources:1 (// @BE annotation): expected a function name after '@BE', got "
                                   "'(x: float32[n])'; write '// @BE NAME [tokens...]'"),
        ("// @kjit f(x: float32[n], y: float32[n] out", "cpp_sources:1 (// @kjit annotation): 'f(' opens a "
                                                        "signature that is not closed with ')' on the same line"),
        ("// @kjit f-g", "cpp_sources:1 (// @kjit annotation): function name 'f' must be followed by a space, '(' "
                         "or the end of the line, got '-g'"),
    ],
)
def test_malformed_annotation(line, message):
    assert spec_error(line + "\n" + fn_src(XY)) == message


@pytest.mark.parametrize("bad", ["1f", "int"])
def test_annotation_name_must_be_a_c_identifier(bad):
    assert spec_error(f"// @kjit {bad}\n" + fn_src(XY)) == (
        f"cpp_sources:1 (// @kjit annotation): function name '{bad}' is not a C identifier")


def test_annotation_token_errors_name_the_line():
    assert spec_error("\n// @kjit f arg ret attr.a:float33\n" + fn_src(f"{XY}, float a")) == (
        "arg_spec of 'f' (cpp_sources:2 (// @kjit annotation)): token #2 'attr.a:float33': unknown attr type "
        f"'float33'; valid types: {ATTR_TYPES}")


def test_annotation_for_a_missing_function():
    assert spec_error("// @kjit g\n" + fn_src(XY)) == (
        "cannot infer the spec of 'g' (cpp_sources:1 (// @kjit annotation)): no definition of 'g' was found in "
        "cpp_sources (kjit looks for a free function 'RET g(...)' at namespace scope). Give arg_spec tokens or a "
        "signature string instead")


def test_annotation_text_after_the_signature_is_rejected():
    with pytest.raises(SpecError, match=r"unexpected text after the signature of 'f': 'arg ret'$"):
        kjit.resolve("// @kjit f(x: float32[n], y: float32[n] out) arg ret\n" + fn_src(XY))


BRAINEVENT_SOURCE = r"""
#include "brainevent/common.h"
#include <cstdint>

// @BE be_scale arg ret attr.alpha stream
void be_scale(const BE::Tensor x, BE::Tensor y, float alpha, int64_t stream) {
  const float* in = static_cast<const float*>(x.data_ptr());
  float* out = static_cast<float*>(y.data_ptr());
  for (int64_t i = 0; i < x.numel(); ++i) out[i] = alpha * in[i];
}

// @BE be_add
void be_add(const BE::Tensor a, const BE::Tensor b, BE::Tensor c) {
  for (int64_t i = 0; i < c.size(0); ++i)
    static_cast<float*>(c.data_ptr())[i] =
        static_cast<const float*>(a.data_ptr())[i] + static_cast<const float*>(b.data_ptr())[i];
}
"""


def test_brainevent_source_builds_and_runs_unchanged():
    mod = build("fd_brainevent", BRAINEVENT_SOURCE, None)
    assert mod.functions == {
        "be_scale": "x: any[...], y: any[...] out, alpha: float32, stream: stream",
        "be_add": "a: any[...], b: any[...], c: any[...] out",
    }
    assert mod.arg_specs == {"be_scale": ["arg", "ret", "attr.alpha:float32", "stream"],
                             "be_add": ["arg", "arg", "ret"]}
    x = np.arange(3, dtype=np.float32)
    y = np.zeros_like(x)
    mod.be_scale(x, y, 2.5)
    np.testing.assert_array_equal(y, 2.5 * x)
    mod.be_add(x, x + 1, y)
    np.testing.assert_array_equal(y, 2 * x + 1)


# ---------------------------------------------------------------------------
# end to end with NumPy
# ---------------------------------------------------------------------------

TOKENS_SOURCE = INC + r"""
void scale(const kjit::TensorView x, kjit::TensorView y, float alpha, int32_t k, bool neg) {
  const float* in = x.data<float>();
  float* out = y.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    float v = alpha * in[i] + static_cast<float>(k);
    out[i] = neg ? -v : v;
  }
}
void half_bits(const kjit::TensorView x, kjit::TensorView y, uint16_t h, uint16_t b) {
  y.data<uint16_t>()[0] = h;
  y.data<uint16_t>()[1] = b;
}
void split(const kjit::TensorView x, kjit::TensorView lo, kjit::TensorView hi) {
  for (int64_t i = 0; i < x.numel(); ++i) {
    lo.data<float>()[i] = x.data<float>()[i] - 1.0f;
    hi.data<float>()[i] = x.data<float>()[i] + 1.0f;
  }
}
void cplx(const kjit::TensorView x, kjit::TensorView y, std::complex<double> z) {
  y.data<double>()[0] = z.real();
  y.data<double>()[1] = z.imag();
}
void wide(const kjit::TensorView x, kjit::TensorView y, uint64_t u, int64_t i) {
  y.data<uint64_t>()[0] = u;
  y.data<int64_t>()[1] = i;
}
"""
TOKENS_FUNCTIONS = {
    "scale": ["args", "rets", "attr.alpha", "attrs.k:int32", "attr.neg"],
    "half_bits": ["arg", "ret", "attr.h:float16", "attrs.b:bfloat16"],
    "split": ["arg", "ret", "ret"],
    "cplx": ["arg", "ret", "attr.z"],
    "wide": ["arg", "ret", "attr.u", "attr.i"],
}


@pytest.fixture(scope="module")
def tokens_mod():
    return build("fd_tokens", TOKENS_SOURCE, TOKENS_FUNCTIONS)


def test_token_module_exposes_canonical_specs(tokens_mod):
    assert tokens_mod.functions == {
        "scale": "x: any[...], y: any[...] out, alpha: float32, k: int32, neg: bool",
        "half_bits": "x: any[...], y: any[...] out, h: float16, b: bfloat16",
        "split": "x: any[...], lo: any[...] out, hi: any[...] out",
        "cplx": "x: any[...], y: any[...] out, z: complex128",
        "wide": "x: any[...], y: any[...] out, u: uint64, i: int64",
    }
    assert tokens_mod.arg_specs == {
        "scale": ["arg", "ret", "attr.alpha:float32", "attr.k:int32", "attr.neg:bool"],
        "half_bits": ["arg", "ret", "attr.h:float16", "attr.b:bfloat16"],
        "split": ["arg", "ret", "ret"],
        "cplx": ["arg", "ret", "attr.z:complex128"],
        "wide": ["arg", "ret", "attr.u:uint64", "attr.i:int64"],
    }
    assert tokens_mod.devices == {fn: "cpu" for fn in TOKENS_FUNCTIONS}


def test_token_kernel_with_attrs(tokens_mod):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)  # tokens take any rank
    y = np.empty_like(x)
    tokens_mod.scale(x, y, 2.0, 3, True)
    np.testing.assert_array_equal(y, -(2 * x + 3))
    tokens_mod.scale(x, y, np.float32(0.5), np.int32(-1), False)
    np.testing.assert_array_equal(y, 0.5 * x - 1)


@pytest.mark.parametrize("value", [1.5, 0.1, -3.25, 65504.0, 1e-7])
def test_float16_and_bfloat16_attrs_arrive_as_uint16_bits(tokens_mod, value):
    y = np.zeros(2, np.uint16)
    tokens_mod.half_bits(np.zeros(1, np.float32), y, value, value)
    assert y[0] == np.float16(value).view(np.uint16)
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert y[1] == ml_dtypes.bfloat16(value).view(np.uint16)


def test_multi_output(tokens_mod):
    x = np.arange(4, dtype=np.float32)
    lo, hi = np.zeros_like(x), np.zeros_like(x)
    tokens_mod.split(x, lo, hi)
    np.testing.assert_array_equal(lo, x - 1)
    np.testing.assert_array_equal(hi, x + 1)


def test_complex_attr_takes_real_numbers_through_tvm_ffi(tokens_mod):
    y = np.zeros(2)
    tokens_mod.cplx(np.zeros(1), y, 2.5)
    np.testing.assert_array_equal(y, [2.5, 0.0])
    with pytest.raises(TypeError, match=r"^cplx: argument #2 'z': expected a real number \(tvm-ffi has no complex "
                                        r"scalar"):
        tokens_mod.cplx(np.zeros(1), y, 1 + 2j)


def test_core_checks_still_apply_to_token_kernels(tokens_mod):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    with pytest.raises(ValueError) as info:
        tokens_mod.scale(x[:, ::2], np.zeros((2, 2), np.float32), 1.0, 0, False)
    assert str(info.value) == (
        "scale: argument #0 'x': strides[1] must be 1 for a compact row-major tensor, got 2 (pass a contiguous copy, "
        "or declare 'x' strided to accept any layout)")
    y = np.empty_like(x)
    with pytest.raises(ValueError, match=re.escape("scale: argument #3 'k': 1099511627776 is out of range for int32 "
                                                   "[-2147483648, 2147483647]")):
        tokens_mod.scale(x, y, 1.0, 2**40, False)
    with pytest.raises(TypeError, match=re.escape("scale: argument #3 'k': expected an int (int32), got float 2.5")):
        tokens_mod.scale(x, y, 1.0, 2.5, False)
    with pytest.raises(ValueError, match=re.escape("scale: argument #4 'neg': expected a bool (True/False or 0/1), "
                                                   "got int 2")):
        tokens_mod.scale(x, y, 1.0, 0, 2)
    with pytest.raises(TypeError, match=r"^scale: expected 5 arguments \(x: any\[\.\.\.\], .*\), got 4$"):
        tokens_mod.scale.ffi_function(x, y, 1.0, 0)
    with pytest.raises(TypeError, match=r"^scale\(\) missing required argument: '\w+'$"):
        tokens_mod.scale(x, y, 1.0, 0)


def test_wide_integer_attrs_in_int64_range(tokens_mod):
    y = np.zeros(2, np.uint64)
    tokens_mod.wide(np.zeros(1), y, 2**63 - 1, 0)
    assert y[0] == 2**63 - 1
    with pytest.raises(ValueError, match=re.escape("wide: argument #2 'u': -1 is out of range for uint64 "
                                                   "[0, 18446744073709551615]")):
        tokens_mod.wide(np.zeros(1), y, -1, 0)


def test_uint64_attr_beyond_int64_says_why_through_tvm_ffi(tokens_mod):
    # tvm-ffi carries Python ints as int64: uint64 values >= 2**63 cannot cross it
    # (they do cross the XLA handler; see the C++ XlaHandlerAttrs tests).
    with pytest.raises(ValueError, match=r"^wide: argument #2 'u': the integer is out of range for uint64 \(tvm-ffi "
                                         r"carries Python ints as int64, so values outside \[-2\*\*63, 2\*\*63 - 1\] "
                                         r"cannot reach a scalar\)$"):
        tokens_mod.wide(np.zeros(1), np.zeros(2, np.uint64), 2**64 - 1, 0)
    y = np.zeros(2, np.uint64)
    tokens_mod.wide(np.zeros(1), y, 2**63 - 1, 0)
    assert y[0] == 2**63 - 1


def test_int64_attr_overflow_says_out_of_range(tokens_mod):
    with pytest.raises(ValueError, match=r"^wide: argument #3 'i': the integer is out of range for int64"):
        tokens_mod.wide(np.zeros(1), np.zeros(2, np.uint64), 0, 2**63)


CACHE_SOURCE = INC + "void bump(const kjit::TensorView x, kjit::TensorView y) { y.data<float>()[0] = 41.0f + 1; }\n"


def test_cache_hit_in_a_fresh_process_and_force_rebuild():
    first = build("fd_cache", CACHE_SOURCE, {"bump": ["arg", "ret"]})
    assert not first.cache_hit
    code = textwrap.dedent(f"""
        import numpy as np, kjit
        mod = kjit.load_inline("fd_cache", cpp_sources={CACHE_SOURCE!r}, functions={{"bump": ["args", "rets"]}})
        y = np.zeros(1, np.float32)
        mod.bump(np.zeros(1, np.float32), y)
        print(mod.cache_hit, mod.key, float(y[0]))
    """)
    proc = subprocess.run([sys.executable, "-c", code], env=dict(os.environ), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", first.key, "42.0"]
    again = build("fd_cache", CACHE_SOURCE, {"bump": ["arg", "ret"]}, force_rebuild=True)
    assert not again.cache_hit
    assert again.key == first.key


# ---------------------------------------------------------------------------
# review fixes
# ---------------------------------------------------------------------------


def test_definition_inside_if0_is_not_a_definition():
    src = "#if 0\n" + fn_src(f"{XY}, int old") + "#endif\n" + fn_src(f"{XY}, float scale")
    assert kjit.resolve(src, ["f"]) == {"f": "x: any[...], y: any[...] out, scale: float32"}
    nested = "#if 0\n#ifdef X\n#endif\n" + fn_src(XY) + "#else\n" + fn_src(f"{XY}, int k") + "#endif\n"
    assert kjit.resolve(nested, ["f"]) == {"f": "x: any[...], y: any[...] out, k: int32"}


def test_ret_token_on_a_const_pointer_is_rejected():
    with pytest.raises(SpecError, match=r"token #1 'ret' declares an output, but C\+\+ parameter #1 'const float\* y' "
                                        r"at cpp_sources:\d+ points to const data the kernel cannot write; drop the "
                                        r"const or use 'arg'$"):
        kjit.resolve(fn_src("const float* x, const float* y"), {"f": ["arg", "ret"]})


def test_any_rank_signature_round_trips():
    sig = kjit.resolve(fn_src(XY), ["f"])["f"]
    assert kjit.parse_signature(sig, name="f") == sig == "x: any[...], y: any[...] out"


def test_repeat_load_in_process_is_a_cache_hit():
    src = INC + "void again(const kjit::TensorView x, kjit::TensorView y) {}\n"
    first = build("fd_again", src, ["again"], force_rebuild=True)
    second = build("fd_again", src, ["again"])
    assert not first.cache_hit and second.cache_hit


def test_annotation_inside_a_block_comment_is_not_read():
    src = "/*\n// @kjit old\n*/\n// @kjit f\n" + fn_src(XY)
    assert kjit.resolve(src) == {"f": "x: any[...], y: any[...] out"}
    # Line numbers survive the blanking: a duplicate names the real lines.
    with pytest.raises(SpecError, match=r"cpp_sources:4 .* and cpp_sources:5 "):
        kjit.resolve("/* a\n b */\n\n// @kjit f\n// @kjit f\n" + fn_src(XY))


@pytest.mark.parametrize("declared, defined", [("rms_norm", "rmsnorm"), ("RMSNorm", "rmsnorm"), ("rmsnrm", "rmsnorm"),
                                               ("scale", "scal")])
def test_a_signature_for_a_misspelt_function_is_a_spec_error_with_a_did_you_mean(declared, defined):
    """The scanner finds the definitions: a close name is a misspelling, named before
    anything compiles (it was a raw compile error in the generated file)."""
    src = f"#include <kjit/kernel.h>\nvoid {defined}(const kjit::TensorView x) {{}}\n"
    with pytest.raises(kjit.SpecError, match=rf"^functions: '{declared}' is not defined in cpp_sources \(did you "
                                             rf"mean '{defined}', defined at cpp_sources:2\?\); the exported name "
                                             rf"is the C\+\+ function's: declare '{defined}', or rename the function$"):
        kjit.resolve(src, {declared: "x: float32[n]"})


def test_a_signature_for_a_function_the_sources_do_not_mention_is_left_to_the_compiler():
    """It may come from a header (no close name among the definitions): no false refusal."""
    assert kjit.resolve("#include <kjit/kernel.h>\nvoid other(int a) {}\n",
                        {"from_a_header": "x: float32[n]"}) == {"from_a_header": "x: float32[n]"}
