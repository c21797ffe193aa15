"""Signatures: canonical text, SpecError messages, the Spec builder, load_inline's argument checks."""

import re

import numpy as np
import pytest

import kjit
from kjit import Spec, SpecError

from conftest import build

KNOWN_DTYPES = (
    "bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, bfloat16, float32, float64, "
    "complex64, complex128, float8_e3m4, float8_e4m3, float8_e4m3b11fnuz, float8_e4m3fn, float8_e4m3fnuz, "
    "float8_e5m2, float8_e5m2fnuz, float8_e8m0fnu, float6_e2m3fn, float6_e3m2fn, float4_e2m1fn, tfloat32, int1, int2, int4, "
    "uint1, uint2, uint4, any"
)


def spec_error(signature, name="fn"):
    with pytest.raises(SpecError) as info:
        kjit.parse_signature(signature, name=name)
    return str(info.value)


def test_spec_error_is_value_error():
    assert issubclass(SpecError, ValueError)


@pytest.mark.parametrize(
    "signature, canonical",
    [
        ("a: float32[n], b: float32 [ n ] out , c:int32; n%4==0", "a: float32[n], b: float32[n] out, c: int32; n % 4 == 0"),
        ("a: float32[2 * k + 1]", "a: float32[2*k + 1]"),
        ("a: any[n]", "a: any[n]"),
        ("a: float16 | bfloat16[n] optional strided align(16)", "a: float16|bfloat16[n] optional strided align(16)"),
        ("a: float32[m, n] strides[ld, 1], s: stream", "a: float32[m, n] strides[ld, 1], s: stream"),
        ("x: float32", "x: float32"),
        ("a: bool[]", "a: bool[]"),
    ],
)
def test_canonical(signature, canonical):
    assert kjit.parse_signature(signature) == canonical
    assert kjit.parse_signature(canonical) == canonical  # canonical text is a fixed point


def test_parse_signature_rejects_non_str():
    with pytest.raises(TypeError, match="signature must be a str, got int"):
        kjit.parse_signature(3)


@pytest.mark.parametrize(
    "signature, message",
    [
        ("a float32[n]", "signature of 'fn': expected ':' after parameter name 'a', got 'float32'\n"
                         "  a float32[n]\n"
                         "    ^~~~~~~"),
        ("a: float32[2k]", "signature of 'fn': a number cannot run into a name; write 2*k, not 2k\n"
                           "  a: float32[2k]\n"
                           "             ^~"),
        ("a: float32[n]; n > ", "signature of 'fn': expected a number, a symbol or '(' in the expression, "
                                "got end of signature\n"
                                "  a: float32[n]; n > \n"
                                "                     ^"),
        (",", "signature of 'fn': expected a parameter name, got ','\n  ,\n  ^"),
        ("a: float32[n] $", "signature of 'fn': unexpected character '$'\n  a: float32[n] $\n                ^"),
    ],
)
def test_syntax_errors_point_with_a_caret(signature, message):
    assert spec_error(signature) == message


def test_unknown_dtype_lists_known_ones():
    assert spec_error("a: float33[n]") == (
        f"signature of 'fn': unknown dtype 'float33' (did you mean 'float32'?): expected one of {KNOWN_DTYPES}\n"
        "  a: float33[n]\n"
        "     ^~~~~~~"
    )


def test_unknown_attribute():
    assert spec_error("a: float32[n] outt") == (
        "signature of 'fn': unknown attribute 'outt' of tensor 'a': expected out, return, optional, strided, "
        "strides[...], align(N), @cpu, @cuda\n"
        "  a: float32[n] outt\n"
        "                ^~~~"
    )


def test_unknown_type():
    msg = spec_error("a: tensor")
    assert msg.startswith("signature of 'fn': unknown type 'tensor': expected a dtype with a shape (")
    assert "a scalar type or 'stream'" in msg
    assert msg.endswith("\n  a: tensor\n     ^~~~~~")


def test_dtype_without_shape_is_not_a_scalar():
    assert "'float8_e4m3fn' without a shape is not a scalar type" in spec_error("a: float8_e4m3fn")
    assert "'any[...]' for any rank" in spec_error("a: any")


@pytest.mark.parametrize(
    "signature, message",
    [
        ("a: float32[n*k]",
         "signature of 'fn': a.shape[0] = n*k can never be solved: no dimension binds k, n on its own, and a dim "
         "can solve only one unknown (give one of them its own dimension, or pass it as an integer scalar)\n"
         "  a: float32[n*k]\n"
         "  ^~~~~~~~~~~~~~~"),
        ("a: float32[n / 2]",
         "signature of 'fn': a.shape[0] = n / 2 can never be solved: it is not linear in n and no other dimension "
         "binds n (give one of them its own dimension, or pass it as an integer scalar)\n"
         "  a: float32[n / 2]\n"
         "  ^~~~~~~~~~~~~~~~~"),
        ("a: float32[n], a: float32[n]",
         "signature of 'fn': duplicate parameter name 'a'\n"
         "  a: float32[n], a: float32[n]\n"
         "                 ^~~~~~~~~~~~~"),
        ("s: stream, t: stream",
         "signature of 'fn': a second stream parameter 't' (the first is 's'); a kernel gets one stream\n"
         "  s: stream, t: stream\n"
         "             ^~~~~~~~~"),
        ("a: float32[b], b: float32[3]",
         "signature of 'fn': shape symbol 'b' has the name of tensor parameter 'b'; rename one of them\n"
         "  a: float32[b], b: float32[3]\n"
         "  ^~~~~~~~~~~~~"),
        ("a: float32[m, n] strides[1]",
         "signature of 'fn': strides[...] has 1 entries but the shape has rank 2\n"
         "  a: float32[m, n] strides[1]\n"
         "                   ^~~~~~~~~~"),
        ("a: float32[n] align(12)",
         "signature of 'fn': align(12) must be a power of two\n"
         "  a: float32[n] align(12)\n"
         "                      ^~"),
        ("a: float32[n] strided strides[1]",
         "signature of 'fn': strides[...] conflicts with 'strided' given before\n"
         "  a: float32[n] strided strides[1]\n"
         "                        ^~~~~~~"),
        ("a: float32[n] strides[1] strided",
         "signature of 'fn': 'strided' conflicts with the explicit strides[...] given before\n"
         "  a: float32[n] strides[1] strided\n"
         "                           ^~~~~~~"),
        ("a: float32[-1]",
         "signature of 'fn': shape dimension must not be negative, got -1\n"
         "  a: float32[-1]\n"
         "             ^~"),
        ("a: float32[n / 0]",
         "signature of 'fn': division by zero\n"
         "  a: float32[n / 0]\n"
         "               ^"),
        ("a: float32[n]; m > 0",
         "signature of 'fn': constraint uses 'm', which no parameter or dimension binds\n"
         "  a: float32[n]; m > 0\n"
         "                 ^~~~~"),
        ("a: float32[n], n: float32",
         "signature of 'fn': scalar 'n' names the shape symbol 'n' but has type float32; a symbol's scalar must "
         "be an integer type\n"
         "  a: float32[n], n: float32\n"
         "                 ^~~~~~~~~~"),
    ],
)
def test_semantic_errors(signature, message):
    assert spec_error(signature) == message


@pytest.mark.parametrize("name", ["1bad", "my-fn", "", "a b"])
def test_bad_function_name(name):
    assert spec_error("a: float32[n]", name=name) == (
        f"function name '{name}' is not a C identifier (letters, digits and '_', not starting with a digit)"
    )


def test_keyword_function_name():
    with pytest.raises(SpecError, match=re.escape("function name 'class' is a C++ keyword")):
        kjit.parse_signature("a: float32[n]", name="class")


# ---- the Spec builder ----


def test_builder_matches_signature_string():
    spec = (
        Spec("mm")
        .tensor("a", "float32", ["m", "k"])
        .tensor("b", "float32", ["k", "n"], strides=["ld", 1])
        .tensor("c", "float32", ["m", "n"], out=True, align=16)
        .tensor("bias", "float16|bfloat16", ["n"], optional=True, strided=True)
        .scalar("alpha", "float32")
        .stream()
        .constraint("k % 8 == 0")
        .constraint("n <= 4096")
    )
    text = ("a: float32[m, k], b: float32[k, n] strides[ld, 1], c: float32[m, n] out align(16), "
            "bias: float16|bfloat16[n] optional strided, alpha: float32, stream: stream; k % 8 == 0, n <= 4096")
    assert spec.signature() == text
    assert kjit.parse_signature(text, name="mm") == text
    assert repr(spec) == f"Spec('mm': {text})"


def test_builder_linear_dims_and_literals():
    spec = Spec("f").tensor("a", "float32", ["m", 3]).tensor("b", "float32", ["2 * m + 1"]).scalar("k", "int8")
    assert spec.signature() == kjit.parse_signature("a: float32[m, 3], b: float32[2 * m + 1], k: int8")


@pytest.mark.parametrize(
    "make, signature",
    [
        (lambda: Spec("f").tensor("a", "float33", ["n"]), "a: float33[n]"),
        (lambda: Spec("f").tensor("a", "float32", ["m", "n"], strides=["1"]), "a: float32[m, n] strides[1]"),
        (lambda: Spec("f").tensor("a", "float32", ["n"], align=12), "a: float32[n] align(12)"),
        (lambda: Spec("f").tensor("a", "float32", ["n"], strided=True, strides=["1"]),
         "a: float32[n] strided strides[1]"),
        (lambda: Spec("f").tensor("a", "float32", ["n"]).tensor("a", "float32", ["n"]),
         "a: float32[n], a: float32[n]"),
        (lambda: Spec("f").stream("s").stream("t"), "s: stream, t: stream"),
        (lambda: Spec("f").tensor("a", "float32", ["n*k"]), "a: float32[n*k]"),
        (lambda: Spec("f").tensor("a", "float32", ["b"]).tensor("b", "float32", [3]), "a: float32[b], b: float32[3]"),
        (lambda: Spec("f").tensor("a", "float32", [-1]), "a: float32[-1]"),
        (lambda: Spec("f").tensor("a", "float32", ["n / 0"]), "a: float32[n / 0]"),
        (lambda: Spec("f").tensor("a", "float32", ["n"]).constraint("m > 0"), "a: float32[n]; m > 0"),
    ],
)
def test_builder_raises_the_same_spec_errors(make, signature):
    with pytest.raises(SpecError) as info:
        make().signature()
    assert str(info.value) == spec_error(signature, name="f")


def test_builder_specific_errors():
    with pytest.raises(SpecError, match=r"^builder of 'f': scalar 'x' has unknown type 'float8_e4m3fn': expected bool"):
        Spec("f").scalar("x", "float8_e4m3fn").signature()
    with pytest.raises(SpecError, match=r"^builder of 'f': unknown device 'tpu': expected cpu or cuda$"):
        Spec("f").tensor("a", "float32", ["n"], device="tpu").signature()
    with pytest.raises(SpecError, match=r"^function name '1f' is not a C identifier"):
        Spec("1f").tensor("a", "float32", ["n"]).signature()


def test_builder_values_of_the_wrong_type_are_type_errors():
    with pytest.raises(TypeError, match=r"^builder of 'f': tensor\('a', \.\.\.\): expected a dtype \(a name such as "
                                        r"'float32', np.float32 or torch.float32\), got int 32$"):
        Spec("f").tensor("a", 32, ["n"]).signature()
    with pytest.raises(TypeError, match=r"^kjit\.Spec: 'name' must be str, got None$"):
        Spec(None).tensor("a", "float32", ["n"]).signature()


# ---- load_inline's front door ----


def test_load_inline_bad_spec_raises_before_compiling(tmp_path):
    with pytest.raises(SpecError) as info:
        build("badspec", "this is not C++ at all", {"f": "a: float33[n]"}, build_directory=str(tmp_path))
    assert "unknown dtype 'float33'" in str(info.value)
    assert list(tmp_path.iterdir()) == []  # nothing was compiled or written


def test_load_inline_bad_names():
    with pytest.raises(SpecError, match=r"^module name 'my module' is not a C identifier"):
        build("my module", "", {"f": "a: int32"})
    with pytest.raises(SpecError, match=r"^module name '\.\./evil' is not a C identifier"):
        build("../evil", "", {"f": "a: int32"})
    with pytest.raises(SpecError, match=r"^function name 'my-fn' is not a C identifier"):
        build("ok", "", {"my-fn": "a: int32"})
    with pytest.raises(SpecError, match=r"^module 'ok': no functions given"):
        build("ok", "", {})


def test_load_inline_argument_types():
    with pytest.raises(TypeError, match=r"^functions\[0\] must be a function name \(str\), got tuple$"):
        build("m", "", [("f", "a: int32")])
    with pytest.raises(TypeError, match=r"^functions\['f'\] must be a signature string, a kjit\.Spec, a list of "
                                        r"arg_spec tokens or None \(inferred from the C\+\+ definition\), got int$"):
        build("m", "", {"f": 3})
    with pytest.raises(TypeError, match=r"^functions must be a dict .*; got the str 'f' \(did you mean \['f'\]\?\)$"):
        build("m", "", "f")
    with pytest.raises(TypeError, match=r"^functions\['f'\]\[1\] must be an arg_spec token \(str\), got int$"):
        build("m", "", {"f": ["arg", 1]})
    with pytest.raises(TypeError, match=r"^functions: a function name must be a str, got int$"):
        build("m", "", {1: "a: int32"})
    with pytest.raises(TypeError, match=r"^cpp_sources must be a str or a list of str, got int$"):
        build("m", 3, {"f": "a: int32"})
    with pytest.raises(TypeError, match=r"^cpp_sources\[1\] must be a str, got int$"):
        build("m", ["", 1], {"f": "a: int32"})
    with pytest.raises(TypeError, match=r"^name must be a str, got int$"):
        build(5, "", {"f": "a: int32"})


# --- dtype spellings (issue 30: friendlier inputs) ---


@pytest.mark.parametrize(("spelling", "name"), [
    ("half", "float16"), ("double", "float64"), ("short", "int16"), ("long", "int64"), ("cfloat", "complex64"),
    ("cdouble", "complex128"), ("bf16", "bfloat16"), ("f2", "float16"), ("f4", "float32"), ("f8", "float64"),
    ("c8", "complex64"), ("c16", "complex128"), ("i1", "int8"), ("i4", "int32"), ("u8", "uint64"), ("b1", "bool"),
])
def test_numpy_and_torch_spellings_mean_one_dtype(spelling, name):
    assert kjit.parse_signature(f"a: {spelling}[n]") == f"a: {name}[n]"
    if name not in ("bfloat16", "float16", "complex64", "complex128", "bool") or name == "bool":
        assert kjit.parse_signature(f"s: {spelling}") == f"s: {name}"


@pytest.mark.parametrize(("spelling", "why"), [
    ("float", "float64 in NumPy but float32 in PyTorch and C++: write float32 or float64"),
    ("int", "int64 in NumPy but int32 in PyTorch and C++: write int32 or int64"),
    ("complex", "complex128 in NumPy and Python but has no fixed width elsewhere: write complex64 or complex128"),
])
def test_spellings_that_differ_between_frameworks_are_refused_with_why(spelling, why):
    assert spec_error(f"a: {spelling}[n]").startswith(
        f"signature of 'fn': unknown dtype '{spelling}' ('{spelling}' means {why}): expected one of bool")
    assert spec_error(f"s: {spelling}").startswith(f"signature of 'fn': unknown type '{spelling}' ('{spelling}' means")


def test_a_close_misspelling_is_named_and_a_far_one_is_not():
    assert "unknown dtype 'flaot16' (did you mean 'float16'?)" in spec_error("a: flaot16[n]")
    assert "unknown dtype 'bfloat61' (did you mean 'bfloat16'?)" in spec_error("a: bfloat61[n]")
    assert "did you mean" not in spec_error("a: quux[n]") and "did you mean" not in spec_error("a: xy[n]")


def test_spec_takes_numpy_and_torch_dtype_objects():
    torch = pytest.importorskip("torch")
    spec = (kjit.Spec("f").tensor("a", np.float32, ["n"]).tensor("b", torch.float16, ["n"])
            .tensor("c", [np.int8, "half", np.dtype("complex64")], ["n"]).scalar("s", np.float64).scalar("t", "double"))
    assert spec.signature() == "a: float32[n], b: float16[n], c: int8|float16|complex64[n], s: float64, t: float64"
    for bad in (3.5, None, float, int):
        with pytest.raises(TypeError, match=r"^builder of 'f': tensor\('a', \.\.\.\): "):
            kjit.Spec("f").tensor("a", bad, ["n"])


def test_a_function_without_parameters_can_be_declared():
    mod = kjit.load_inline("no_params", cpp_sources="#include <kjit/kernel.h>\nint64_t answer() { return 42; }\n",
                           functions={"answer": ""})
    assert mod.answer() == 42
    with pytest.raises(TypeError, match=r"^answer\(\) takes no arguments but 1 was given$"):
        mod.answer(1)
