"""Symbols passed to the kernel by name: `n: int64 symbol` hands the kernel's
`int64_t n` the value the shapes bound, and the caller does not pass it."""

import inspect

import numpy as np
import pytest

import kjit
from conftest import build

SRC = r"""
#include <cstdint>
void scale(const float* x, float* y, int64_t n, float alpha) {
  for (int64_t i = 0; i < n; ++i) y[i] = alpha * x[i];
}
int64_t area(const float* a, int32_t rows, int64_t cols) { (void)a; return rows * 1000 + cols; }
int64_t lead(const float* a, int64_t ld) { (void)a; return ld; }
int64_t count(const float* a, int64_t n) { return a == nullptr ? -1 : n; }
int64_t narrow(const uint8_t* a, int8_t n) { (void)a; return n; }
"""

FUNCTIONS = {
    "scale": "x: float32[n], y: float32[n] out, n: int64 symbol, alpha: float32 = 1",
    "area": "a: float32[rows, cols], rows: int32 symbol, cols: int64 symbol",
    "lead": "a: float32[m, k] strides[ld, 1], ld: int64 symbol",
    "count": "a: float32[n] optional, n: int64 symbol",
    "narrow": "a: uint8[n], n: int8 symbol",
}


@pytest.fixture(scope="module")
def mod():
    return build("symbol_params", SRC, FUNCTIONS)


def test_the_kernel_gets_the_bound_value(mod):
    x = np.arange(5, dtype=np.float32)
    y = np.zeros(5, dtype=np.float32)
    mod.scale(x, y, 2.0)
    assert y.tolist() == [0.0, 2.0, 4.0, 6.0, 8.0]
    mod.scale(x, y, alpha=3.0)  # the binder path
    assert y.tolist() == [0.0, 3.0, 6.0, 9.0, 12.0]
    assert mod.area(np.zeros((3, 7), dtype=np.float32)) == 3007
    base = np.zeros((4, 10), dtype=np.float32)
    assert mod.lead(base[:, :6]) == 10  # bound by a stride


def test_torch_tensors(mod):
    torch = pytest.importorskip("torch")
    x = torch.arange(4, dtype=torch.float32)
    y = torch.zeros(4, dtype=torch.float32)
    mod.scale(x, y, 0.5)
    assert y.tolist() == [0.0, 0.5, 1.0, 1.5]


def test_the_caller_does_not_pass_it(mod):
    assert str(inspect.signature(mod.scale)) == "(x: 'float32[n]', y: 'float32[n] out', alpha: 'float32' = 1.0)"
    assert "n: int64 symbol" in mod.scale.__doc__  # the signature line shows the spec
    assert "def scale(self, x: SupportsDLPack, y: SupportsDLPack, alpha: float = 1.0) -> None:" in mod.stub()
    with pytest.raises(TypeError) as err:
        mod.scale(np.zeros(2, np.float32), np.zeros(2, np.float32), 2, 1.0)
    assert str(err.value) == "scale() takes 3 arguments (x, y, alpha) but 4 were given"
    with pytest.raises(TypeError) as err:
        mod.area(np.zeros((1, 1), np.float32), 1, 1)
    assert str(err.value) == "area() takes 1 argument (a) but 3 were given"
    assert mod.arg_specs["scale"] == ["arg", "ret", "attr.alpha:float32"]  # no token for a symbol


def test_a_symbol_bound_only_by_a_missing_optional_tensor(mod):
    assert mod.count(np.zeros(6, np.float32)) == 6
    with pytest.raises(ValueError) as err:
        mod.count(None)
    assert str(err.value) == (
        "count: symbol 'n' is needed but no argument determined it (it is carried by a; a None tensor or a zero "
        "factor such as n = 0 in n*k leaves it open)")


def test_a_symbol_outside_its_type(mod):
    assert mod.narrow(np.zeros(127, np.uint8)) == 127
    with pytest.raises(ValueError) as err:
        mod.narrow(np.zeros(300, np.uint8))
    assert str(err.value) == (
        "narrow: symbol 'n' = 300 (bound by a.shape[0]) is out of range for int8 [-128, 127], the type the "
        "kernel's parameter 'n: int8 symbol' has")


def test_builder():
    spec = kjit.Spec("scale").tensor("x", "float32", ["n"]).tensor("y", "float32", ["n"], out=True).symbol("n")
    assert spec.signature() == "x: float32[n], y: float32[n] out, n: int64 symbol"
    assert kjit.Spec("f").tensor("x", "float32", ["n"]).symbol("n", "int32").signature() == \
        "x: float32[n], n: int32 symbol"
    mod = build("symbol_builder", SRC, {"scale": spec.scalar("alpha", "float32")})
    y = np.zeros(2, np.float32)
    mod.scale(np.ones(2, np.float32), y, 4.0)
    assert y.tolist() == [4.0, 4.0]


@pytest.mark.parametrize(
    "signature, message",
    [
        ("x: float32[n], n: float32 symbol",
         "signature of 'f': parameter 'n' is a symbol (kjit passes the value the shapes bind to 'n') but has type "
         "float32; symbols are integers: write 'n: int64 symbol' (or another integer type)\n"
         "  x: float32[n], n: float32 symbol\n"
         "                 ^~~~~~~~~~~~~~~~~"),
        ("x: float32[n], m: int64 symbol",
         "signature of 'f': parameter 'm' is a symbol (kjit passes the value the shapes bind to 'm'), but no "
         "tensor's shape or strides bind a symbol 'm' (its symbols: n); name it after one of them, or drop 'symbol' "
         "to have the caller pass 'm'\n"
         "  x: float32[n], m: int64 symbol\n"
         "                 ^~~~~~~~~~~~~~~"),
        ("x: float32[n], n: int64 symbol, n: int64",
         "signature of 'f': duplicate parameter name 'n': 'n: int64 symbol' is passed by kjit (the value the shapes "
         "bind), so the caller cannot pass 'n: int64' too; keep one: the symbol to have kjit pass it, or drop "
         "'symbol' to have the caller pass it (checked against the shapes)\n"
         "  x: float32[n], n: int64 symbol, n: int64\n"
         "                                  ^~~~~~~~"),
        ("x: float32[n], n: int64 symbol = 4",
         "signature of 'f': parameter 'n' is a symbol (kjit passes the value the shapes bind, the caller never "
         "does): it takes no default; write 'n: int64 symbol'\n"
         "  x: float32[n], n: int64 symbol = 4\n"
         "                                   ^"),
    ],
)
def test_spec_errors_say_what_to_write(signature, message):
    with pytest.raises(kjit.SpecError) as err:
        kjit.parse_signature(signature, name="f")
    assert str(err.value) == message


def test_the_cpp_parameter_must_carry_the_symbols_name():
    src = "#include <cstdint>\nvoid k(const float* x, int64_t len) { (void)x; (void)len; }\n"
    with pytest.raises(kjit.SpecError) as err:
        build("symbol_misnamed", src, {"k": "x: float32[n], n: int64 symbol"})
    assert str(err.value) == (
        "signature of 'k': parameter #1 'n: int64 symbol' passes symbol 'n' to C++ parameter #1 'int64_t len' of k "
        "at cpp_sources:2; a symbol goes to the parameter of its name: rename the C++ parameter to 'n', or name the "
        "symbol 'len' in the spec's shapes")


@pytest.mark.parametrize(
    "cpp_type, expected",
    [
        ("float", "must be an integer type: declare it int64_t"),
        ("int32_t", "is narrower than the symbol's type in the spec"),
    ],
)
def test_a_non_integer_cpp_parameter_is_a_compile_error(cpp_type, expected):
    src = f"#include <cstdint>\nvoid k(const float* x, {cpp_type} n) {{ (void)x; (void)n; }}\n"
    with pytest.raises(kjit.CompileError) as err:
        build(f"symbol_cpp_{cpp_type}", src, {"k": "x: float32[n], n: int64 symbol"})
    assert "kjit: a kernel parameter that receives a shape symbol" in err.value.log
    assert expected in err.value.log


def test_xla_handlers_pass_the_symbol_too():
    jax = pytest.importorskip("jax")
    import kjit.jax  # noqa: PLC0415

    mod = build("tj_symbol_params", SRC, {"scale": FUNCTIONS["scale"]}, jax=True)
    kjit.jax.register(mod)
    x = np.arange(3, dtype=np.float32)
    call = jax.ffi.ffi_call("tj_symbol_params.scale", jax.ShapeDtypeStruct((3,), np.float32))
    y = jax.jit(lambda a: call(a, alpha=np.float32(2)))(x)
    assert np.asarray(y).tolist() == [0.0, 2.0, 4.0]
