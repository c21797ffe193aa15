"""Batch groups (docs/spec.md, Batch dimensions): `x: float32[*batch, n]` names the
leading dims before the declared ones; every tensor naming the group has the same
leading dims in a call, bound by the first one present; a returned tensor is
allocated with them. The stub, the call model (fn.infer, torch fakes, JAX result
shapes), the JAX vmap rule and the builders carry them."""

import numpy as np
import pytest

import kjit
from conftest import build

SRC = r"""
#include <kjit/kernel.h>
#include <cmath>
template <typename E> void rms_t(const kjit::TensorView x, const kjit::TensorView w, kjit::TensorView y, double eps) {
  const int64_t n = x.size(x.ndim() - 1), rows = n == 0 ? 0 : x.numel() / n;
  for (int64_t i = 0; i < rows; ++i) {
    double ss = 0;
    for (int64_t j = 0; j < n; ++j) ss += double(x.data<E>()[i * n + j]) * double(x.data<E>()[i * n + j]);
    const double r = 1.0 / std::sqrt(ss / n + eps);
    for (int64_t j = 0; j < n; ++j) y.data<E>()[i * n + j] = E(x.data<E>()[i * n + j] * r * w.data<E>()[j]);
  }
}
void rmsnorm(const kjit::TensorView x, const kjit::TensorView w, kjit::TensorView y, double eps) {
  if (x.dtype().bits == 64) rms_t<double>(x, w, y, eps); else rms_t<float>(x, w, y, eps);
}
void rowsum(const kjit::TensorView x, kjit::TensorView s) {
  const int64_t n = x.size(x.ndim() - 1);
  for (int64_t i = 0; i < s.numel(); ++i) {
    float acc = 0;
    for (int64_t j = 0; j < n; ++j) acc += x.data<float>()[i * n + j];
    s.data<float>()[i] = acc;
  }
}
int64_t lead(const kjit::TensorView a, const kjit::TensorView b) { return a.defined() ? a.ndim() : b.ndim(); }
void two(const kjit::TensorView a, const kjit::TensorView b) {}
void fill(const kjit::TensorView a, kjit::TensorView y) { for (int64_t i = 0; i < y.numel(); ++i) y.data<float>()[i] = 1; }
"""
SIGS = {
    "rmsnorm": "<T: float32|float64> x: T[*batch, n], w: T[n], y: T[*batch, n] return, eps: T = 1e-6",
    "rowsum": "x: float32[*batch, n], s: float32[*batch] return",
    "lead": "a: float32[*g, 2] optional, b: float32[*g, 3] optional",
    "two": "a: float32[*p, n], b: float32[*q, n]",
    "fill": "a: float32[*b, 2] optional, y: float32[*b] return",
}


@pytest.fixture(scope="module")
def mod():
    return build("batch_dims", SRC, SIGS)


def _rms(x, w, eps=1e-6):
    return x / np.sqrt((x.astype(np.float64) ** 2).mean(axis=-1, keepdims=True) + eps) * w


def test_signatures_are_canonical_and_round_trip(mod):
    assert mod.functions["rmsnorm"] == SIGS["rmsnorm"]
    for sig in SIGS.values():
        canonical = kjit.parse_signature(sig)
        assert kjit.parse_signature(canonical) == canonical


@pytest.mark.parametrize("shape", [(4,), (3, 4), (2, 3, 4), (2, 1, 3, 4), (0, 4), (2, 0, 4)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_any_count_of_leading_dims_and_the_returned_tensor_takes_them(mod, shape, dtype):
    x = np.random.default_rng(0).random(shape).astype(dtype)
    w = np.linspace(0.5, 1.5, 4).astype(dtype)
    y = mod.rmsnorm(x, w)
    assert y.shape == shape and y.dtype == dtype
    np.testing.assert_allclose(y, _rms(x, w), rtol=1e-5)


def test_a_group_alone_is_the_returned_shape(mod):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(mod.rowsum(x), x.sum(-1))
    assert mod.rowsum(np.ones(5, np.float32)).shape == ()


@pytest.mark.parametrize("path", ["call", "stub"])
def test_leading_dims_that_differ_are_refused_naming_the_group(mod, path):
    fn = mod.rmsnorm if path == "call" else mod.rmsnorm.ffi_function
    x, w = np.ones((4, 16, 8), np.float32), np.ones(8, np.float32)
    args = (x, w, np.ones((4, 8, 8), np.float32), 1e-6) if path == "stub" else None
    if path == "stub":
        with pytest.raises(ValueError, match=r"^rmsnorm: argument #2 'y': leading dims must equal batch = \(4, 16\) "
                                             r"\(bound by x\), got \(4, 8\)$"):
            fn(*args)
        with pytest.raises(ValueError, match=r"leading dims must equal batch = \(4, 16\) \(bound by x\), got \(16,\)"):
            fn(x, w, np.ones((16, 8), np.float32), 1e-6)
    with pytest.raises(ValueError, match=r"^rmsnorm: argument #1 'w': shape\[0\] must equal n = 8 \(bound by "
                                         r"x.shape\[-1\]\), got 7$"):
        fn(x, np.ones(7, np.float32), *([np.ones((4, 16, 8), np.float32), 1e-6] if path == "stub" else []))
    with pytest.raises(TypeError, match=r"^rmsnorm: argument #0 'x': ndim must be at least 1 \(T\[\*batch, n\]\), "
                                        r"got 0$"):
        fn(np.ones((), np.float32), w, *([np.ones((4, 16, 8), np.float32), 1e-6] if path == "stub" else []))


def test_a_non_compact_tensor_is_refused_over_all_its_dims(mod):
    x = np.ones((4, 16, 8), np.float32)[:, ::2]
    with pytest.raises(ValueError, match=r"^rmsnorm: argument #0 'x': strides\[1\] must be 8 for a compact"):
        mod.rmsnorm(x, np.ones(8, np.float32))


def test_optional_carriers_bind_when_present(mod):
    assert mod.lead(np.ones((2, 5, 2), np.float32), None) == 3
    assert mod.lead(None, np.ones((7, 3), np.float32)) == 2
    assert mod.lead(np.ones((2, 5, 2), np.float32), np.ones((2, 5, 3), np.float32)) == 3
    with pytest.raises(ValueError, match=r"^lead: argument #1 'b': leading dims must equal g = \(2, 5\) \(bound by "
                                         r"a\), got \(2,\)$"):
        mod.lead(np.ones((2, 5, 2), np.float32), np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match=r"^fill: returned tensor 'y' has batch group \*b, but no tensor bound it "
                                         r"\(a: all None\); pass one$"):
        mod.fill(None)
    np.testing.assert_array_equal(mod.fill(np.ones((3, 2), np.float32)), np.ones(3))


def test_groups_are_independent(mod):
    mod.two(np.ones((2, 3, 4), np.float32), np.ones((5, 4), np.float32))
    with pytest.raises(ValueError, match=r"argument #1 'b': shape\[-1\] must equal n = 4 \(bound by a.shape\[-1\]\)"):
        mod.two(np.ones((2, 3, 4), np.float32), np.ones((5, 3), np.float32))


def test_the_model_infers_and_describes_returned_shapes(mod):
    meta = kjit.TensorMeta((5, 6, 4), "float64", 1, 0)
    assert mod.rmsnorm.infer(meta, kjit.TensorMeta((4,), "float64", 1, 0)) == (((5, 6, 4), "float64", (1, 0)),)
    assert mod.rmsnorm.returned_shapes() == ((("batch", ((0, 1),)), ("dim", 0, -1)),)
    assert mod.fill.returned_shapes() == ((("batch", ((0, 1),)),),)


@pytest.mark.parametrize("sig, message", [
    ("x: float32[*b, n], b: int64", r"tensor 'x': batch group \*b has the name of a parameter"),
    ("x: float32[*n, n]", r"batch group \*n has the name of a shape symbol \(x\)"),
    ("x: float32[n, *b]", r"a shape has at most one batch group \(\*batch\), first"),
    ("x: float32[*b, *c]", r"a shape has at most one batch group"),
    ("x: float32[..., n]", r"'\[...\]' is any rank and shape, alone; for leading dims of any count before named "
                           r"ones, name a batch group: \[\*batch, n\]"),
    ("x: float32[n, ...]", r"'\[...\]' is any rank and shape, alone"),
    ("x: float32[*b, n] strides[1]", r"batch group \*b has leading dims of any count, so strides\[...\] cannot list"),
    ("x: float32[n], y: float32[*b, n] return", r"returned tensor 'y': batch group \*b is named by no input or out "
                                                r"tensor"),
    ("x: float32[*1, n]", r"expected a batch group's name after '\*' \(\[\*batch, n\]\), got '1'"),
    ("<b: float32> x: b[*b]", r"batch group \*b has the name of a dtype variable"),
])
def test_mistakes_are_spec_errors(sig, message):
    with pytest.raises(kjit.SpecError, match=message):
        kjit.parse_signature(sig)


def test_the_builders_declare_groups():
    sig = (kjit.Spec("f").tensor("x", "float32", ["*batch", "n"]).tensor("y", "float32", ["*batch", "n"],
                                                                          returned=True).signature())
    assert sig == "x: float32[*batch, n], y: float32[*batch, n] return"


def test_torch_ops_fakes_and_dynamic_shapes(mod):
    torch = pytest.importorskip("torch")
    ops = mod.torch
    for dynamic in (False, True):
        f = torch.compile(lambda x, w: ops.rmsnorm(x, w) * 2, fullgraph=True, dynamic=dynamic)
        for shape in [(3, 4), (2, 3, 4), (5, 3, 4)]:
            x = torch.rand(*shape)
            torch.testing.assert_close(f(x, torch.ones(4)), 2 * mod.rmsnorm(x, torch.ones(4)))
    torch.library.opcheck(ops.rmsnorm.op, (torch.rand(2, 3, 4), torch.rand(4)))
    with pytest.raises(Exception, match=r"rmsnorm: argument #1 'w': shape\[0\] must equal n = 4 \(bound by "
                                        r"x.shape\[-1\]\), got 3"):
        torch.compile(lambda x, w: ops.rmsnorm(x, w), fullgraph=True)(torch.ones(2, 4), torch.ones(3))


def test_jax_result_shapes_and_the_vmap_rule():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    m = build("batch_dims_jax", SRC, {"rmsnorm": SIGS["rmsnorm"], "rowsum": SIGS["rowsum"]}, jax=True)
    x = jnp.asarray(np.random.default_rng(1).random((2, 3, 4)).astype(np.float32))
    w = jnp.ones(4, jnp.float32)
    np.testing.assert_allclose(jax.jit(m.jax.rmsnorm)(x, w), _rms(np.asarray(x), np.asarray(w)), rtol=1e-5)
    # w has no group: JAX loops; every tensor of rowsum has the group: one call on the batched tensors.
    assert m.jax.rmsnorm.vmap_method == "sequential" and m.jax.rowsum.vmap_method == "broadcast_all"
    np.testing.assert_allclose(jax.vmap(m.jax.rmsnorm, in_axes=(1, None), out_axes=1)(x, w),
                               _rms(np.asarray(x), np.asarray(w)), rtol=1e-5)
    np.testing.assert_allclose(jax.jit(jax.vmap(m.jax.rowsum))(x), np.asarray(x).sum(-1), rtol=1e-6)
    (s,) = m.jax.rowsum.result_shape_dtypes(x)
    assert s == jax.ShapeDtypeStruct((2, 3), jnp.float32)
