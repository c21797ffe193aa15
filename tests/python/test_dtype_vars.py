"""Dtype variables (docs/spec.md, Dtype variables): `<T: float32|float64> x: T[n],
w: T[n]` ties the tensors typed T to one dtype per call, bound by the first one
present; a returned tensor typed T is allocated in it, a scalar typed T converted to
it; `w: dtype(x)[n]` ties one tensor to another. The stub, the call model (fn.infer,
torch fakes, JAX result types) and the builders carry them."""

import numpy as np
import pytest

import kjit
from conftest import build

SRC = r"""
#include <kjit/kernel.h>
#include <cmath>
template <typename E> void rms_t(const kjit::TensorView x, const kjit::TensorView w, kjit::TensorView y, double eps) {
  const int64_t m = x.size(0), n = x.size(1);
  for (int64_t i = 0; i < m; ++i) {
    double ss = 0;
    for (int64_t j = 0; j < n; ++j) ss += double(x.data<E>()[i * n + j]) * double(x.data<E>()[i * n + j]);
    const double r = 1.0 / std::sqrt(ss / n + eps);
    for (int64_t j = 0; j < n; ++j) y.data<E>()[i * n + j] = E(x.data<E>()[i * n + j] * r * w.data<E>()[j]);
  }
}
void rmsnorm(const kjit::TensorView x, const kjit::TensorView w, kjit::TensorView y, double eps) {
  if (x.dtype().bits == 64) rms_t<double>(x, w, y, eps); else rms_t<float>(x, w, y, eps);
}
double echo(const kjit::TensorView x, double eps) { return eps; }
int64_t echo_int(const kjit::TensorView j, int64_t k) { return k; }
int64_t pick(const kjit::TensorView a, const kjit::TensorView b, double eps) { return a.defined() ? 1 : 2; }
void same(const kjit::TensorView x, const kjit::TensorView w) {}
void late(const kjit::TensorView a, const kjit::TensorView x) {}
int64_t echo_wide(const kjit::TensorView j, int64_t k) { return k; }
"""
SIGS = {
    "rmsnorm": "<T: float32|float64> x: T[m, n], w: T[n], y: T[m, n] return, eps: T = 1e-6",
    "echo": "<T: float16|bfloat16|float32|float64> x: T[n], eps: T",
    "echo_int": "<U: int8|int32|uint8> j: U[n], k: U",
    "pick": "<T: float32|float64> a: T[n] optional, b: T[n] optional, eps: T",
    "same": "x: float32|float64[n], w: dtype(x)[n]",
    "late": "<T: float32|float64> a: T[n] optional, x: T[n]",
    "echo_wide": "<W: int64|uint64|int8> j: W[n], k: W",
}


@pytest.fixture(scope="module")
def mod():
    return build("dtype_vars", SRC, SIGS)


def test_signatures_are_canonical_and_round_trip(mod):
    assert mod.functions["rmsnorm"] == "<T: float32|float64> x: T[m, n], w: T[n], y: T[m, n] return, eps: T = 1e-6"
    for sig in SIGS.values():
        canonical = kjit.parse_signature(sig)
        assert kjit.parse_signature(canonical) == canonical


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tensors_typed_t_share_one_dtype_and_the_returned_one_takes_it(mod, dtype):
    x = np.random.default_rng(0).random((3, 4)).astype(dtype)
    w = np.linspace(0.5, 1.5, 4).astype(dtype)
    y = mod.rmsnorm(x, w)
    assert y.dtype == dtype
    want = x / np.sqrt((x.astype(np.float64) ** 2).mean(axis=1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(y, want, rtol=1e-5)


def test_a_tensor_of_another_dtype_than_t_is_refused_naming_the_binding(mod):
    x, w = np.ones((2, 3), np.float32), np.ones(3, np.float64)
    with pytest.raises(TypeError, match=r"^rmsnorm: argument #1 'w': dtype must be float32 \(T, bound by x\), got "
                                        r"float64$"):
        mod.rmsnorm(x, w)
    with pytest.raises(TypeError, match=r"^rmsnorm: argument #0 'x': dtype must be one of float32, float64, got int32$"):
        mod.rmsnorm(np.ones((2, 3), np.int32), w)
    with pytest.raises(TypeError, match=r"^rmsnorm: argument #1 'w': dtype must be float32 \(T, bound by x\)"):
        mod.rmsnorm.infer(kjit.TensorMeta((2, 3), "float32", 1, 0), kjit.TensorMeta((3,), "float64", 1, 0))


@pytest.mark.parametrize("dtype, value, want", [
    (np.float16, 0.1, float(np.float16(0.1))), ("bfloat16", 0.1, None), (np.float32, 0.1, float(np.float32(0.1))),
    (np.float64, 0.1, 0.1)])
def test_a_scalar_typed_t_is_converted_to_the_bound_dtype(mod, dtype, value, want):
    if dtype == "bfloat16":  # NumPy has no bfloat16 DLPack can carry: a torch tensor
        torch = pytest.importorskip("torch")
        want = torch.tensor(value, dtype=torch.bfloat16).item()
        assert mod.echo(torch.zeros(2, dtype=torch.bfloat16), value) == want
        return
    assert mod.echo(np.zeros(2, dtype), value) == want


def test_an_integer_scalar_typed_u_must_fit_the_bound_dtype(mod):
    assert mod.echo_int(np.zeros(2, np.int8), 127) == 127
    with pytest.raises(ValueError, match=r"^echo_int: argument #1 'k': 300 is out of range for int8 \(U's dtype in "
                                         r"this call\)$"):
        mod.echo_int(np.zeros(2, np.int8), 300)
    with pytest.raises(ValueError, match=r"out of range for uint8"):
        mod.echo_int(np.zeros(2, np.uint8), -1)
    assert mod.echo_int(np.zeros(2, np.int32), 300) == 300


@pytest.mark.parametrize("dtype, value, fits", [
    (np.int64, -2**63, True), (np.int64, 2**62, True), (np.int64, -1, True), (np.int64, 0, True),
    (np.uint64, -1, False), (np.uint64, -2**63, False), (np.uint64, 2**62, True), (np.uint64, 0, True),
    (np.int8, -2**63, False), (np.int8, 2**62, False), (np.int8, -128, True), (np.int8, 128, False)])
def test_integer_scalars_at_the_edges_of_the_bound_dtype(mod, dtype, value, fits):
    j = np.zeros(2, dtype)
    if fits:
        assert mod.echo_wide(j, value) == value
        assert mod.echo_wide.ffi_function(j, value) == value
        return
    name = np.dtype(dtype).name
    for fn in (mod.echo_wide, mod.echo_wide.ffi_function):
        with pytest.raises(ValueError, match=rf"^echo_wide: argument #1 'k': {value} is out of range for {name} "
                                             r"\(W's dtype in this call\)$"):
            fn(j, value)


def test_optional_carriers_bind_when_present(mod):
    assert mod.pick(np.ones(2, np.float32), None, 0.5) == 1
    assert mod.pick(None, np.ones(2, np.float64), 0.5) == 2
    with pytest.raises(TypeError, match=r"^pick: argument #1 'b': dtype must be float32 \(T, bound by a\), got "
                                        r"float64$"):
        mod.pick(np.ones(2, np.float32), np.ones(2, np.float64), 0.5)
    with pytest.raises(ValueError, match=r"^pick: argument #2 'eps' is typed by dtype variable T, but no tensor bound "
                                         r"it \(a, b: all None\); pass one$"):
        mod.pick(None, None, 0.5)


@pytest.mark.parametrize("path", ["call", "stub"])
def test_a_required_carrier_after_an_optional_one_is_checked_against_it(mod, path):
    fn = mod.late if path == "call" else mod.late.ffi_function
    fn(None, np.ones(2, np.float64))
    fn(np.ones(2, np.float64), np.ones(2, np.float64))
    with pytest.raises(TypeError, match=r"^late: argument #1 'x': dtype must be float32 \(T, bound by a\), got "
                                        r"float64$"):
        fn(np.ones(2, np.float32), np.ones(2, np.float64))


def test_dtype_of_ties_an_input_to_another(mod):
    mod.same(np.ones(2, np.float64), np.ones(2, np.float64))
    with pytest.raises(TypeError, match=r"^same: argument #1 'w': dtype must be float64 \(dtype\(x\), bound by x\), "
                                        r"got float32$"):
        mod.same(np.ones(2, np.float64), np.ones(2, np.float32))


@pytest.mark.parametrize("sig, message", [
    ("<T: float32|float64> x: float32[n]", r"dtype variable T is carried by no input or out tensor"),
    ("<T: float32, T: float64> x: T[n]", r"dtype variable 'T' is declared twice"),
    ("<float32: float32|float64> x: float32[n]", r"'float32' names a type: a dtype variable needs a name of its own"),
    ("<T: any> x: T[n]", r"dtype variable 'T' needs its dtypes listed"),
    ("<T: int4|int8> x: T[n]", r"packed dtype int4 cannot be listed with int8"),
    ("<T: float32|int32> x: T[n], s: T", r"a scalar typed by dtype variable T takes a value of the dtype T binds, so "
                                         r"T's dtypes must be all floating"),
    ("<T: float32|float64> x: T[n], y: T|float16[n]", r"dtype variable T stands alone"),
    ("<T: float32|float64> x: float32[n], y: T[n] return", r"returned tensor 'y' takes dtype variable T, which no "
                                                          r"input or out tensor carries"),
    ("<T: float32|float64> x: T[n], T: int64", r"dtype variable T has the name of a parameter"),
    ("<T: float32|float64 x: T[n]", r"expected '>' to close the dtype variables"),
    ("x: float32[n], w: dtype(w)[n]", r"dtype\(w\) must name another input or out tensor, but 'w' is this tensor"),
    ("x: float32[n] return, w: dtype(x)[n]", r"dtype\(x\) must name another input or out tensor, but 'x' is "
                                             r"returned too"),
    ("x: int4[n], w: dtype(x)[n]", r"dtype\(x\) names packed tensor 'x'"),
    ("<T: float32|float64> x: T[n], n: T symbol", r"a symbol's type is an integer type"),
])
def test_mistakes_are_spec_errors(sig, message):
    with pytest.raises(kjit.SpecError, match=message):
        kjit.parse_signature(sig)


def test_the_builders_declare_variables():
    sig = (kjit.Spec("rms").dtype_var("T", ["float32", np.float64]).tensor("x", "T", ["m", "n"])
           .tensor("w", "T", ["n"]).tensor("y", "T", ["m", "n"], returned=True).scalar("eps", "T").signature())
    assert sig == "<T: float32|float64> x: T[m, n], w: T[n], y: T[m, n] return, eps: T"
    with pytest.raises(kjit.SpecError, match=r"carried by no input or out tensor"):
        kjit.Spec("f").dtype_var("T", "float32").tensor("x", "float32", ["n"]).signature()


def test_docs_and_stubs_read_the_scalar_as_its_family(mod, tmp_path):
    import inspect
    assert str(inspect.signature(mod.rmsnorm)) == "(x: 'T[m, n]', w: 'T[n]', eps: 'T' = 1e-06)"
    mod.stub(tmp_path / "dtype_vars.pyi")
    text = (tmp_path / "dtype_vars.pyi").read_text()
    assert "eps: float = 1e-06" in text and "k: int" in text


def test_torch_ops_and_fakes_follow_the_binding(mod):
    torch = pytest.importorskip("torch")
    ops = mod.torch
    assert str(ops.rmsnorm.op._opoverload._schema) == \
        "dtype_vars::rmsnorm(Tensor x, Tensor w, float eps=9.9999999999999995e-07) -> Tensor"
    f = torch.compile(lambda x, w: ops.rmsnorm(x, w) * 2, fullgraph=True)
    for dtype in (torch.float32, torch.float64):
        x, w = torch.ones(2, 3, dtype=dtype), torch.ones(3, dtype=dtype)
        out = f(x, w)
        assert out.dtype == dtype
    with pytest.raises(Exception, match=r"rmsnorm: argument #1 'w': dtype must be float32 \(T, bound by x\), got "
                                        r"float64"):
        f(torch.ones(2, 3), torch.ones(3, dtype=torch.float64))


def test_jax_result_types_follow_the_binding():
    jax = pytest.importorskip("jax")
    m = build("dtype_vars_jax", SRC, {"rmsnorm": SIGS["rmsnorm"]}, jax=True)
    x = jax.numpy.ones((2, 3), jax.numpy.float32)
    (y,) = m.jax.rmsnorm.result_shape_dtypes(x, jax.numpy.ones(3, jax.numpy.float32))
    assert y == jax.ShapeDtypeStruct((2, 3), jax.numpy.float32)
    np.testing.assert_allclose(jax.jit(m.jax.rmsnorm)(x, jax.numpy.ones(3, jax.numpy.float32)), np.ones((2, 3)),
                               rtol=1e-5)
    with pytest.raises(TypeError, match=r"rmsnorm: argument #1 'w': dtype must be one of float32, float64, got int32"):
        m.jax.rmsnorm(x, jax.numpy.ones(3, jax.numpy.int32))
