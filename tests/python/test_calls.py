"""Calls as Python expects them: keyword and default arguments, read-only NumPy
inputs, readable functions (repr, __doc__, inspect.signature) and .pyi stubs."""

import ast
import inspect
import os
import subprocess
import sys

import numpy as np
import pytest
import tvm_ffi

import kjit
from conftest import build

SCALE_SRC = r"""
#include <kjit/kernel.h>
void scale(const kjit::TensorView x, kjit::TensorView y, float alpha, int32_t shift) {
  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] = alpha * x.data<float>()[i] + shift;
}
"""
SCALE_SIG = "x: float32[n], y: float32[n] out, alpha: float32 = 2.0, shift: int32 = 0"


@pytest.fixture(scope="module")
def mod():
    return build("calls_scale", SCALE_SRC, {"scale": SCALE_SIG})


@pytest.fixture(scope="module")
def plain():
    src = "#include <kjit/kernel.h>\nvoid copy(const kjit::TensorView x, kjit::TensorView y) {\n" \
          "  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] = x.data<float>()[i];\n}\n"
    return build("calls_plain", src, {"copy": "x: float32[n], y: float32[n] out; n % 2 == 0"})


def _xy(n=4):
    return np.arange(n, dtype=np.float32), np.zeros(n, dtype=np.float32)


# ---- keyword and default arguments ----

def test_positional_with_every_argument(mod):
    x, y = _xy()
    mod.scale(x, y, 3.0, 1)
    assert y.tolist() == [1.0, 4.0, 7.0, 10.0]


def test_defaults_fill_left_out_arguments(mod):
    x, y = _xy()
    mod.scale(x, y)
    assert y.tolist() == [0.0, 2.0, 4.0, 6.0]
    mod.scale(x, y, 1.0)
    assert y.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_keywords_bind_by_the_spec_names(mod):
    x, y = _xy()
    mod.scale(x, y, shift=5)
    assert y.tolist() == [5.0, 7.0, 9.0, 11.0]
    mod.scale(y=y, x=x, alpha=-1.0)
    assert y.tolist() == [0.0, -1.0, -2.0, -3.0]


def test_keywords_on_a_function_without_defaults(plain):
    x, y = _xy()
    plain.copy(x, y=y)
    assert y.tolist() == x.tolist()


def test_keyword_call_runs_the_same_checks(mod):
    x, _ = _xy()
    with pytest.raises(ValueError, match=r"^scale: argument #1 'y': shape\[0\] must equal n = 4"):
        mod.scale(x, y=np.zeros(5, dtype=np.float32))


def test_missing_argument_names_function_and_parameter(mod):
    x, _ = _xy()
    with pytest.raises(TypeError) as err:
        mod.scale(x, alpha=1.0)
    assert str(err.value) == "scale() missing required argument: 'y'"
    with pytest.raises(TypeError) as err:
        mod.scale(alpha=1.0)
    assert str(err.value) == "scale() missing required arguments: 'x', 'y'"


def test_unknown_keyword_names_function_and_parameter(mod):
    x, y = _xy()
    with pytest.raises(TypeError) as err:
        mod.scale(x, y, beta=1.0)
    assert str(err.value) == "scale() got an unexpected keyword argument 'beta' (its parameters: x, y, alpha, shift)"


def test_duplicate_argument_names_function_and_parameter(mod):
    x, y = _xy()
    with pytest.raises(TypeError) as err:
        mod.scale(x, y, 1.0, alpha=2.0)
    assert str(err.value) == "scale() got multiple values for argument 'alpha' (#2, also passed by position)"


def test_too_many_arguments_with_defaults(mod):
    x, y = _xy()
    with pytest.raises(TypeError) as err:
        mod.scale(x, y, 1.0, 2, 3)
    assert str(err.value) == "scale() takes 4 arguments (x, y, alpha, shift) but 5 were given"


def test_wrong_count_without_defaults_is_the_call_models_message(plain):
    x, _ = _xy()
    with pytest.raises(TypeError, match=r"^copy\(\) missing required argument: 'y'$"):
        plain.copy(x)
    with pytest.raises(TypeError, match=r"^copy: expected 2 arguments"):  # the stub's, for ffi_function callers
        plain.copy.ffi_function(x)


def test_defaults_in_the_canonical_signature():
    assert kjit.parse_signature("a: float32[n], b: bool = True, k: int64 = +7, s: float64 = -2.5e-3") == \
        "a: float32[n], b: bool = true, k: int64 = 7, s: float64 = -2.5e-3"


@pytest.mark.parametrize("sig, message", [
    ("a: float32[n], k: int8 = 300", "bad default '300' of 'k': the default 300 is out of the range of int8"),
    ("a: float32[n], k: uint32 = -1", "bad default '-1' of 'k': the default -1 is out of the range of uint32"),
    ("a: float32[n], k: int32 = 1.5", "bad default '1.5' of 'k': a default of int32 is an integer"),
    ("a: float32[n], b: bool = 2", "bad default '2' of 'b': a bool default is true or false"),
    ("a: float32[n], s: float32 = 1.2.3", "bad default '1.2.3' of 's': a default of float32 is a number"),
    ("a: float32[n] = 1", "parameter 'a' is a tensor: only scalars take a default"),
    ("a: float32[n], s: float32 =", "expected a default value after '=', got end of signature"),
    ("a: float32[n], s: float32 = 1, t: int32",
     "parameter 't' has no default but follows 's', which has one: parameters after a default need defaults too"),
])
def test_bad_defaults_are_spec_errors(sig, message):
    with pytest.raises(kjit.SpecError) as err:
        kjit.parse_signature(sig, name="f")
    assert str(err.value).startswith("signature of 'f': " + message)


def test_builder_defaults():
    spec = kjit.Spec("f").tensor("x", "float32", ["n"]).scalar("alpha", "float32", default=1.5) \
        .scalar("flag", "bool", default=False).scalar("k", "int64", default=3)
    assert spec.signature() == "x: float32[n], alpha: float32 = 1.5, flag: bool = false, k: int64 = 3"
    with pytest.raises(kjit.SpecError) as err:
        kjit.Spec("f").tensor("x", "float32", ["n"]).scalar("k", "int8", default=1000).signature()
    assert str(err.value) == "builder of 'f': scalar('k', ...): bad default '1000': the default 1000 is out of the range of int8"


def test_arg_spec_tokens_leave_defaults_out(mod):
    assert mod.arg_specs["scale"] == ["arg", "ret", "attr.alpha:float32", "attr.shift:int32"]


# ---- read-only NumPy inputs ----

def test_read_only_input_is_accepted(mod):
    x, y = _xy()
    x.setflags(write=False)
    mod.scale(x, y, 1.0, 0)
    assert y.tolist() == [0.0, 1.0, 2.0, 3.0]
    mod.scale(x, y=y)  # the keyword path too
    assert y.tolist() == [0.0, 2.0, 4.0, 6.0]


def test_broadcast_to_is_accepted_by_a_strided_input():
    src = "#include <kjit/kernel.h>\nfloat total(const kjit::TensorView x) {\n  float s = 0;\n" \
          "  for (int64_t i = 0; i < x.size(0); ++i) s += x.data<float>()[i * x.stride(0)];\n  return s;\n}\n"
    m = build("calls_total", src, {"total": "x: float32[n] strided"})
    assert m.total(np.broadcast_to(np.float32(2.5), (4,))) == 10.0


def test_jax_array_as_numpy_is_accepted(mod):
    jnp = pytest.importorskip("jax.numpy")
    x = np.asarray(jnp.arange(4, dtype=jnp.float32))
    assert not x.flags.writeable
    y = np.zeros(4, dtype=np.float32)
    mod.scale(x, y, 1.0, 0)
    assert y.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_read_only_output_is_a_value_error_naming_it(mod, plain):
    x, y = _xy()
    y.setflags(write=False)
    for call in (lambda: mod.scale(x, y, 1.0, 0), lambda: mod.scale(x, y), lambda: plain.copy(x, y)):
        with pytest.raises(ValueError) as err:
            call()
        fn = "scale" if "scale" in str(err.value) else "copy"
        assert str(err.value).startswith(
            f"{fn}: argument #1 'y' is a read-only NumPy array, but the kernel writes it (y: float32[n] out)")
    assert y.tolist() == [0.0] * 4


# ---- functions you can read ----

def test_repr(mod):
    assert repr(mod.scale) == f"<kjit function calls_scale.scale({SCALE_SIG})>"


def test_doc_has_signature_constraints_and_location(plain, mod):
    doc = plain.copy.__doc__
    assert doc.startswith("copy(x, y)\n")
    assert "Signature: x: float32[n], y: float32[n] out\n" in doc
    assert "Constraints (checked on every call): n % 2 == 0\n" in doc
    assert "Writes: y\n" in doc
    assert "C++ source: copy at cpp_sources:2\n" in doc
    assert mod.scale.__doc__.startswith("scale(x, y, alpha=2.0, shift=0)\n")


def test_inspect_signature(mod):
    sig = inspect.signature(mod.scale)
    assert list(sig.parameters) == ["x", "y", "alpha", "shift"]
    assert sig.parameters["alpha"].default == 2.0
    assert sig.parameters["shift"].default == 0
    assert sig.parameters["x"].default is inspect.Parameter.empty
    assert sig.parameters["y"].annotation == "float32[n] out"
    assert sig.bind(1, 2, shift=3).arguments == {"x": 1, "y": 2, "shift": 3}


def test_function_attributes(mod):
    assert mod.scale.__name__ == "scale"
    assert mod["scale"] is mod.scale
    assert isinstance(mod.scale.ffi_function, tvm_ffi.Function)
    assert mod.ffi_functions["scale"] is mod.scale.ffi_function


def test_py_typed_is_in_the_package():
    assert os.path.exists(os.path.join(os.path.dirname(kjit.__file__), "py.typed"))


def test_stub_text_is_valid_python(mod):
    text = mod.stub()
    ast.parse(text)
    assert "class Module(kjit.Module):" in text
    assert "    def scale(self, x: SupportsDLPack, y: SupportsDLPack, alpha: float = 2.0, shift: int = 0) -> None:" \
        in text


def test_stub_return_types():
    src = "#include <kjit/kernel.h>\n#include <cstdint>\n" \
          "bool ok(const kjit::TensorView x) { return true; }\n" \
          "int64_t count(const kjit::TensorView x) { return x.numel(); }\n" \
          "double mean(const kjit::TensorView x, kjit::TensorView y) { return 0; }\n"
    m = build("calls_returns", src, {"ok": "x: any[...]", "count": "x: any[...]", "mean": ["arg", "ret"]})
    text = m.stub()
    assert "def ok(self, x: SupportsDLPack) -> bool:" in text
    assert "def count(self, x: SupportsDLPack) -> int:" in text
    assert "def mean(self, x: SupportsDLPack, y: SupportsDLPack) -> float:" in text


def test_stubgen_command_writes_a_pyi(tmp_path):
    src = tmp_path / "k.cc"
    src.write_text(SCALE_SRC)
    out = tmp_path / "calls_cli.pyi"
    env = dict(os.environ)
    subprocess.run([sys.executable, "-m", "kjit", "stubgen", "--name", "calls_cli", "-f", f"scale={SCALE_SIG}",
                    "-o", str(out), str(src)], check=True, env=env)
    text = out.read_text()
    ast.parse(text)
    assert "def scale(self, x: SupportsDLPack, y: SupportsDLPack, alpha: float = 2.0, shift: int = 0) -> None:" in text
    assert f"scale at {src}:3" in text  # the file the definition is in, by its path
    mod = kjit.load_inline("calls_cli", sources=[src], functions={"scale": SCALE_SIG})
    assert mod.stub() == text


# ---- returned outputs ----

TWICE_SRC = r"""
#include <kjit/kernel.h>
void twice(const kjit::TensorView x, kjit::TensorView y) {
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (x.dtype().bits == 64) {
      y.data<double>()[2 * i] = y.data<double>()[2 * i + 1] = x.data<double>()[i];
    } else {
      y.data<float>()[2 * i] = y.data<float>()[2 * i + 1] = x.data<float>()[i];
    }
  }
}
double split(const kjit::TensorView x, kjit::TensorView lo, kjit::TensorView hi, int64_t k) {
  for (int64_t i = 0; i < k; ++i) lo.data<float>()[i] = x.data<float>()[i];
  for (int64_t i = k; i < x.numel(); ++i) hi.data<float>()[i - k] = x.data<float>()[i];
  return 1.5;
}
"""


@pytest.fixture(scope="module")
def ret():
    return build("calls_returned", TWICE_SRC, {
        "twice": "x: float32|float64[n], y: dtype(x)[2*n] return",
        "split": "x: float32[n], lo: float32[k] return, hi: float32[n - k] return, k: int64; k <= n",
    })


def test_returned_numpy(ret):
    y = ret.twice(np.array([1.0, 2.0], dtype=np.float32))
    assert type(y) is np.ndarray and y.dtype == np.float32 and y.tolist() == [1.0, 1.0, 2.0, 2.0]
    y = ret.twice(np.array([3.0], dtype=np.float64))
    assert y.dtype == np.float64 and y.tolist() == [3.0, 3.0]


def test_returned_keyword_call(ret):
    y = ret.twice(x=np.array([1.0], dtype=np.float32))
    assert y.tolist() == [1.0, 1.0]


def test_returned_read_only_input(ret):
    x = np.array([4.0], dtype=np.float32)
    x.setflags(write=False)
    assert ret.twice(x).tolist() == [4.0, 4.0]


def test_returned_tvm_ffi_tensor(ret):
    y = ret.twice(tvm_ffi.from_dlpack(np.array([1.0, 2.0], dtype=np.float32)))
    assert isinstance(y, tvm_ffi.Tensor)
    assert np.from_dlpack(y).tolist() == [1.0, 1.0, 2.0, 2.0]


def test_returned_torch():
    torch = pytest.importorskip("torch")
    m = build("calls_returned", TWICE_SRC, {
        "twice": "x: float32|float64[n], y: dtype(x)[2*n] return",
        "split": "x: float32[n], lo: float32[k] return, hi: float32[n - k] return, k: int64; k <= n",
    })
    y = m.twice(torch.tensor([1.0, 2.0], dtype=torch.float64))
    assert isinstance(y, torch.Tensor) and y.dtype == torch.float64 and y.tolist() == [1.0, 1.0, 2.0, 2.0]


def test_several_returned_and_a_kernel_result(ret):
    value, lo, hi = ret.split(np.arange(5, dtype=np.float32), 2)
    assert value == 1.5 and lo.tolist() == [0.0, 1.0] and hi.tolist() == [2.0, 3.0, 4.0]


def test_returned_checks_still_run(ret):
    with pytest.raises(TypeError, match=r"^split: argument #0 'x': dtype must be float32, got float64"):
        ret.split(np.arange(5, dtype=np.float64), 2)
    with pytest.raises(TypeError, match=r"^twice: argument #0 'x': dtype must be one of float32, float64, got int32"):
        ret.twice(np.arange(3, dtype=np.int32))


def test_returned_negative_extent_is_a_value_error(ret):
    with pytest.raises(ValueError) as err:
        ret.split(np.arange(2, dtype=np.float32), 3)
    assert str(err.value) == ("split: constraint 'k <= n' failed with k = 3 (bound by argument 'k'), n = 2 (bound by "
                              "x.shape[0])")  # the spec's own checks come first
    m = build("calls_returned_negative", "#include <kjit/kernel.h>\nvoid f(const kjit::TensorView x, int64_t k, kjit::TensorView y) {}\n",
              {"f": "x: float32[n], k: int64, y: float32[n - k] return"})
    with pytest.raises(ValueError) as err:
        m.f(np.arange(2, dtype=np.float32), 3)
    assert str(err.value) == ("f: returned tensor 'y': shape[0] = n - k is -1 with k = 3 (bound by argument 'k'), "
                              "n = 2 (bound by x.shape[0]); an extent must not be negative")


def test_returned_shape_symbol_given_a_float_is_a_type_error(ret):
    with pytest.raises(TypeError) as err:
        ret.split(np.arange(5, dtype=np.float32), 2.0)
    assert str(err.value) == "split: argument #1 'k': expected an int (int64), got float 2"


def test_returned_is_not_a_caller_parameter(ret):
    assert list(inspect.signature(ret.split).parameters) == ["x", "k"]
    assert "Returns (allocated by kjit): lo: float32[k] return, hi: float32[n - k] return" in ret.split.__doc__
    assert ret.arg_specs["split"] == ["arg", "ret", "ret", "attr.k:int64"]
    assert "def split(self, x: SupportsDLPack, k: int) -> Tuple[float, SupportsDLPack, SupportsDLPack]:" in ret.stub()
    assert "def twice(self, x: SupportsDLPack) -> SupportsDLPack:" in ret.stub()


def test_returned_in_the_grammar_and_builder():
    sig = "x: float16|bfloat16[n], y: dtype(x)[2*n] return"
    assert kjit.parse_signature(sig) == sig
    spec = kjit.Spec("f").tensor("x", "float32", ["n"]).tensor("y", "dtype(x)", ["n"], returned=True)
    assert spec.signature() == "x: float32[n], y: dtype(x)[n] return"


@pytest.mark.parametrize("sig, message", [
    ("x: float32[n], y: float32|float64[n] return",
     "returned tensor 'y' needs exactly one dtype (kjit allocates it), got 2 alternatives; write dtype(x)"),
    ("x: float32[n], y: any[n] return", "returned tensor 'y' needs exactly one dtype (kjit allocates it), got any"),
    ("x: float32[n], y: dtype(q)[n] return", "returned tensor 'y': dtype(q) must name another input or out tensor, "
                                              "but 'q' is no parameter"),
    ("x: float32[n], y: float32[...] return", "returned tensor 'y' needs a shape (kjit allocates it), not [...]"),
    ("x: float32[n], y: float32[n] return strided", "returned tensor 'y' is allocated compact by kjit"),
    ("x: float32[n], y: float32[m] return", "returned tensor 'y': symbol 'm' of its shape must be a whole dim of an "
                                            "input tensor (like x: float32[m]) or an integer parameter named 'm'"),
    ("x: float32[n + 1], y: float32[n] return", "returned tensor 'y': symbol 'n' of its shape must be a whole dim"),
    ("x: float32[n], y: dtype(y)[n] out", "tensor 'y': dtype(y) must name another input or out tensor, but 'y' is "
                                          "this tensor"),
    ("x: float32[n], y: float32[n] out return", "'return' conflicts with 'out' given before"),
])
def test_bad_returned_tensors_are_spec_errors(sig, message):
    with pytest.raises(kjit.SpecError) as err:
        kjit.parse_signature(sig, name="f")
    assert str(err.value).startswith("signature of 'f': " + message), str(err.value)


def test_function_names_never_shadow_the_modules_own_state():
    names = ["_fns", "_options", "_stubs", "_torch_ops", "path", "name", "stub", "functions", "keys"]
    src = "#include <kjit/kernel.h>\n" + "".join(f"int64_t {n}(int64_t k) {{ return k + {i}; }}\n"
                                                  for i, n in enumerate(names))
    m = build("calls_names", src, {n: "k: int64" for n in names})
    assert [m[n](10) for n in names] == [10 + i for i in range(len(names))]
    assert m.keys(1) == 1 + names.index("keys")  # not a Module attribute: a plain attribute
    assert m.path.endswith(".so") and m.name == "calls_names" and callable(m.stub)
    assert set(names) <= set(dir(m))
    assert "def _fns(self, k: int) -> int:" in m.stub()
    assert m.functions["_stubs"] == "k: int64"


# -- held-out cases of the earlier probe, and what a wrong argument is called -------

HELD_OUT_SRC = r"""
#include <kjit/kernel.h>
#include <string>
std::string echo(std::string s) { return s; }
void fill_n(kjit::TensorView y, int64_t n) { for (int64_t i = 0; i < n; ++i) y.data<float>()[i] = 1; }
void fill_rows(const kjit::TensorView x, kjit::TensorView y, int64_t n) {}
void many(const kjit::TensorView x, kjit::TensorView y, float a, float b, float c, float d, int64_t s) {}
void scale(const kjit::TensorView x, kjit::TensorView y, float alpha) {}
"""
HELD_OUT_SIGS = {
    "echo": "s: str",
    "fill_n": "y: float32[n] return, n: int64",
    "fill_rows": "x: float32[n], y: float32[n] out, n: int64",
    "many": "x: float32[n], y: float32[n] out, a: float32 = 1.0, b: float32 = 1.0, c: float32 = 1.0, "
            "d: float32 = 1.0, s: int64 = 0",
    "scale": "x: float32[n], y: float32[n] return, alpha: float32",
}


@pytest.fixture(scope="module")
def held_out():
    return build("calls_held_out", HELD_OUT_SRC, HELD_OUT_SIGS)


@pytest.mark.parametrize("text", ["a\0b", "\0", "ab\0\0cd" * 10, "é\0ü"])
def test_a_str_holding_nul_reaches_the_kernel_whole(held_out, text):
    assert held_out.echo(text) == text
    assert held_out.echo(s=text) == text


@pytest.mark.parametrize("call", [lambda m: m.fill_n(True), lambda m: m.fill_n(n=True),
                                  lambda m: m.fill_rows(np.ones(1, np.float32), np.ones(1, np.float32), True)])
def test_a_bool_is_not_a_size(held_out, call):
    """NumPy and torch refuse a bool as a size; an integer scalar that binds a shape
    symbol does too (fill_n(n=True) returned one element)."""
    with pytest.raises(TypeError, match=r"argument #\d 'n': expected an int \(int64\), got bool True; 'n' is a size, "
                                        r"which a bool is not \(NumPy and torch take none as one\)$"):
        call(held_out)
    assert held_out.fill_n(n=2).tolist() == [1.0, 1.0]


def test_an_integer_out_of_range_is_named_by_its_keyword(held_out):
    x = np.ones(2, np.float32)
    for call in (lambda: held_out.many(x, x, s=2**70), lambda: held_out.many(x, x, 1.0, 1.0, 1.0, 1.0, 2**70)):
        with pytest.raises(ValueError, match=r"^many: argument #6 's': the integer is out of range for int64"):
            call()


def test_a_returned_tensor_passed_by_the_caller_is_named(held_out):
    x = np.ones(2, np.float32)
    with pytest.raises(TypeError, match=r"^scale\(\) takes 2 arguments \(x, alpha\) but 3 were given; 'y' is returned "
                                        r"by scale, not passed: call scale\(x, alpha\)$"):
        held_out.scale(x, x, 3.0)
    with pytest.raises(TypeError, match=r"^scale: argument #1 'alpha': expected a float \(float32\), got a "
                                        r"numpy.ndarray; 'y' is returned by scale, not passed: call scale\(x, alpha\)$"):
        held_out.scale(x, x)


@pytest.mark.parametrize("value, shown", [(1j, "complex"), (object(), "object"), ({1}, "set")])
def test_a_value_tvm_ffi_does_not_convert_is_named_by_its_type(held_out, value, shown):
    x = np.ones(2, np.float32)
    with pytest.raises(TypeError, match=rf"^scale: argument #1 'alpha': expected a float \(float32\), got a {shown}"):
        held_out.scale(x, value)
    with pytest.raises(TypeError, match=rf"^many: argument #2 'a': expected a float \(float32\), got a {shown}$"):
        held_out.many(x, x, value)
