"""Gradients of kjit functions in JAX (docs/jax.md, "Gradients"): a module's pairing
(load_inline(..., backward=...), mod.backward) makes mod.jax.fn a jax.custom_vjp
whose backward is the paired kjit function, matched by parameter names as torch's
autograd formula is (kjit._pairing). Checked against jax.test_util.check_grads and
jnp references under grad, vjp, jit(grad) and vmap(grad); the same pairing drives
torch (gradcheck in float64); an unpaired function under jax.grad is kjit's error;
bad pairings are refused with messages naming the pair."""

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = jax.numpy
from jax.test_util import check_grads  # noqa: E402

import kjit  # noqa: E402
import kjit.jax  # noqa: E402
from conftest import build  # noqa: E402

SRC = r"""
#include <kjit/kernel.h>
#include <kjit/dispatch.h>
#include <cmath>
#include <cstring>
// y = x / sqrt(mean(x^2) + eps) * w over the rows of x, in T (float or double)
template <typename T> void rms(const kjit::TensorView x, const kjit::TensorView w, kjit::TensorView y, double eps) {
  const int64_t m = x.size(0), n = x.size(1);
  const T* a = x.data<T>();
  for (int64_t i = 0; i < m; ++i) {
    double ss = 0;
    for (int64_t j = 0; j < n; ++j) ss += double(a[i * n + j]) * a[i * n + j];
    const double r = 1 / std::sqrt(ss / n + eps);
    for (int64_t j = 0; j < n; ++j) y.data<T>()[i * n + j] = T(a[i * n + j] * r * w.data<T>()[j]);
  }
}
void rmsnorm(const kjit::TensorView x, const kjit::TensorView w, kjit::TensorView y, double eps) {
  KJIT_DISPATCH_FLOATING_TYPES(x.dtype(), "rmsnorm", [&] { rms<scalar_t>(x, w, y, eps); });
}
// grad_x = r (g w) - r^3 / n x sum_k(g_k w_k x_k); grad_w = sum_i g x r
template <typename T> void rms_bwd(const kjit::TensorView gy, const kjit::TensorView x, const kjit::TensorView w,
                                   kjit::TensorView gx, kjit::TensorView gw, double eps) {
  const int64_t m = x.size(0), n = x.size(1);
  const T *a = x.data<T>(), *g = gy.data<T>(), *v = w.data<T>();
  std::memset(gw.data_ptr(), 0, sizeof(T) * n);
  for (int64_t i = 0; i < m; ++i) {
    double ss = 0, dot = 0;
    for (int64_t j = 0; j < n; ++j) {
      ss += double(a[i * n + j]) * a[i * n + j];
      dot += double(g[i * n + j]) * v[j] * a[i * n + j];
    }
    const double r = 1 / std::sqrt(ss / n + eps);
    for (int64_t j = 0; j < n; ++j) {
      gx.data<T>()[i * n + j] = T(r * g[i * n + j] * v[j] - r * r * r / n * a[i * n + j] * dot);
      gw.data<T>()[j] += T(g[i * n + j] * a[i * n + j] * r);
    }
  }
}
void rmsnorm_backward(const kjit::TensorView grad_y, const kjit::TensorView x, const kjit::TensorView w,
                      kjit::TensorView grad_x, kjit::TensorView grad_w, double eps) {
  KJIT_DISPATCH_FLOATING_TYPES(x.dtype(), "rmsnorm_backward", [&] { rms_bwd<scalar_t>(grad_y, x, w, grad_x, grad_w, eps); });
}
void sine(const kjit::TensorView x, kjit::TensorView y) {
  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] = std::sin(x.data<float>()[i]);
}
void sine_backward(const kjit::TensorView grad_y, const kjit::TensorView x, kjit::TensorView grad_x) {
  for (int64_t i = 0; i < x.numel(); ++i) grad_x.data<float>()[i] = grad_y.data<float>()[i] * std::cos(x.data<float>()[i]);
}
// the backward reads the forward's output: d exp(x) = exp(x)
void expo(const kjit::TensorView x, kjit::TensorView y) {
  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] = std::exp(x.data<float>()[i]);
}
void expo_backward(const kjit::TensorView grad_y, const kjit::TensorView y, kjit::TensorView grad_x) {
  for (int64_t i = 0; i < y.numel(); ++i) grad_x.data<float>()[i] = grad_y.data<float>()[i] * y.data<float>()[i];
}
// y = alpha x[idx]: an integer input (no gradient) and a scalar (a Python value)
void gather(const kjit::TensorView x, const kjit::TensorView idx, kjit::TensorView y, float alpha) {
  for (int64_t i = 0; i < idx.numel(); ++i) y.data<float>()[i] = alpha * x.data<float>()[idx.data<int32_t>()[i]];
}
void gather_backward(const kjit::TensorView grad_y, const kjit::TensorView x, const kjit::TensorView idx,
                     kjit::TensorView grad_x, float alpha) {
  std::memset(grad_x.data_ptr(), 0, sizeof(float) * x.numel());
  for (int64_t i = 0; i < idx.numel(); ++i) grad_x.data<float>()[idx.data<int32_t>()[i]] += alpha * grad_y.data<float>()[i];
}
// y = x * m with m held constant: the backward returns no grad_m
void masked(const kjit::TensorView x, const kjit::TensorView m, kjit::TensorView y) {
  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] = x.data<float>()[i] * m.data<float>()[i];
}
void masked_backward(const kjit::TensorView grad_y, const kjit::TensorView m, kjit::TensorView grad_x) {
  masked(grad_y, m, grad_x);
}
// y = x^3, its backward 3 g x^2 and that one's backward: second derivatives through pairs
void cube(const kjit::TensorView x, kjit::TensorView y) {
  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] = x.data<float>()[i] * x.data<float>()[i] * x.data<float>()[i];
}
void cube_backward(const kjit::TensorView grad_y, const kjit::TensorView x, kjit::TensorView grad_x) {
  for (int64_t i = 0; i < x.numel(); ++i)
    grad_x.data<float>()[i] = 3 * grad_y.data<float>()[i] * x.data<float>()[i] * x.data<float>()[i];
}
void cube_backward_backward(const kjit::TensorView grad_grad_x, const kjit::TensorView grad_y,
                            const kjit::TensorView x, kjit::TensorView grad_grad_y, kjit::TensorView grad_x) {
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float g = grad_grad_x.data<float>()[i], v = x.data<float>()[i];
    grad_grad_y.data<float>()[i] = 3 * v * v * g;
    grad_x.data<float>()[i] = 6 * grad_y.data<float>()[i] * v * g;
  }
}
void twice(const kjit::TensorView x, kjit::TensorView y) {
  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[2 * i] = y.data<float>()[2 * i + 1] = x.data<float>()[i];
}
void axpy(const kjit::TensorView x, kjit::TensorView y, float alpha) {
  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] += alpha * x.data<float>()[i];
}
// a backward of the wrong shape, for the cotangent check, and one returning a scalar's gradient
void sine_wrong(const kjit::TensorView grad_y, kjit::TensorView grad_x) {}
void gather_alpha(const kjit::TensorView grad_y, kjit::TensorView grad_alpha) {}
"""
SIGS = {
    "rmsnorm": "<T: float32|float64> x: T[m, n], w: T[n], y: T[m, n] return, eps: float64 = 1e-6",
    "rmsnorm_backward": "<T: float32|float64> grad_y: T[m, n], x: T[m, n], w: T[n], grad_x: T[m, n] return, "
                        "grad_w: T[n] return, eps: float64 = 1e-6",
    "sine": "x: float32[n], y: float32[n] return",
    "sine_backward": "grad_y: float32[n], x: float32[n], grad_x: float32[n] return",
    "expo": "x: float32[n], y: float32[n] return",
    "expo_backward": "grad_y: float32[n], y: float32[n], grad_x: float32[n] return",
    "gather": "x: float32[n], idx: int32[k], y: float32[k] return, alpha: float32 = 1.0",
    "gather_backward": "grad_y: float32[k], x: float32[n], idx: int32[k], grad_x: float32[n] return, "
                       "alpha: float32 = 1.0",
    "masked": "x: float32[n], m: float32[n], y: float32[n] return",
    "masked_backward": "grad_y: float32[n], m: float32[n], grad_x: float32[n] return",
    "cube": "x: float32[n], y: float32[n] return",
    "cube_backward": "grad_y: float32[n], x: float32[n], grad_x: float32[n] return",
    "cube_backward_backward": "grad_grad_x: float32[n], grad_y: float32[n], x: float32[n], "
                              "grad_grad_y: float32[n] return, grad_x: float32[n] return",
    "twice": "x: float32[n], y: float32[2*n] return",
    "axpy": "x: float32[n], y: float32[n] out, alpha: float32 = 1.0",
    "sine_wrong": "grad_y: float32[n], grad_x: float32[2*n] return",
    "gather_alpha": "grad_y: float32[k], grad_alpha: float32[k] return",
}
PAIRS = {"rmsnorm": "rmsnorm_backward", "sine": "sine_backward", "expo": "expo_backward",
         "gather": "gather_backward", "masked": "masked_backward", "cube": "cube_backward",
         "cube_backward": "cube_backward_backward"}


@pytest.fixture(scope="module")
def mod():
    return build("jax_grad", SRC, SIGS, jax=True, backward=PAIRS)


def _rms_ref(x, w, eps=1e-6):
    return x / jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps) * w


def _data(*shape, seed=0):
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), jnp.float32)


def test_the_pairing_is_a_property_of_the_module(mod):
    assert dict(mod.backward) == PAIRS
    with pytest.raises(TypeError):
        mod.backward["twice"] = "sine_backward"  # read-only: pair through load_inline or kjit.torch.register


def test_grad_matches_check_grads_and_the_jnp_reference(mod):
    x, w = _data(3, 5), _data(5, seed=1) + 2
    check_grads(mod.jax.rmsnorm, (x, w), order=1, modes=["rev"], atol=2e-2, rtol=2e-2)
    loss = lambda f: lambda a, b: (f(a, b) * jnp.arange(5.0)).sum()  # noqa: E731
    got = jax.grad(loss(mod.jax.rmsnorm), argnums=(0, 1))(x, w)
    want = jax.grad(loss(_rms_ref), argnums=(0, 1))(x, w)
    for g, r in zip(got, want):
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-5)
    check_grads(mod.jax.sine, (_data(7),), order=1, modes=["rev"])
    np.testing.assert_allclose(jax.grad(lambda t: mod.jax.sine(t).sum())(x[0]), jnp.cos(x[0]), rtol=1e-6)


def test_vjp_with_the_forwards_output_as_residual(mod):
    x = _data(4)
    y, pullback = jax.vjp(mod.jax.expo, x)
    np.testing.assert_allclose(y, jnp.exp(x), rtol=1e-6)
    (gx,) = pullback(jnp.full(4, 2.0, jnp.float32))
    np.testing.assert_allclose(gx, 2 * jnp.exp(x), rtol=1e-6)
    check_grads(mod.jax.expo, (x,), order=1, modes=["rev"])


def test_jit_of_grad_and_grad_of_jit(mod):
    x, w = _data(2, 5), _data(5, seed=2)
    loss = lambda a, b: (mod.jax.rmsnorm(a, b, eps=1e-3) ** 2).sum()  # noqa: E731
    want = jax.grad(lambda a, b: (_rms_ref(a, b, 1e-3) ** 2).sum(), argnums=(0, 1))(x, w)
    for f in (jax.jit(jax.grad(loss, argnums=(0, 1))), jax.grad(jax.jit(loss), argnums=(0, 1))):
        for g, r in zip(f(x, w), want):
            np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-5)


def test_vmap_of_grad(mod):
    xs = _data(3, 6)
    got = jax.vmap(jax.grad(lambda t: mod.jax.sine(t).sum()))(xs)
    np.testing.assert_allclose(got, jnp.cos(xs), rtol=1e-6)
    got = jax.jit(jax.vmap(jax.grad(lambda t: (mod.jax.expo(t) * t).sum())))(xs)
    np.testing.assert_allclose(got, jnp.exp(xs) * (1 + xs), rtol=1e-5)
    xs3, w = _data(4, 2, 5, seed=5), _data(5, seed=6)  # a batch of matrices, w shared (not batched)
    per_example = lambda f: jax.vmap(jax.grad(lambda a, b: (f(a, b) ** 2).sum(), argnums=(0, 1)),  # noqa: E731
                                     in_axes=(0, None))
    for g, r in zip(per_example(mod.jax.rmsnorm)(xs3, w), per_example(_rms_ref)(xs3, w)):
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-5)


def test_second_derivatives_go_through_the_backwards_own_pair(mod):
    x = _data(4)
    second = lambda f: jax.grad(lambda t: jax.grad(lambda u: f(u).sum())(t).sum())  # noqa: E731
    np.testing.assert_allclose(second(mod.jax.cube)(x), 6 * x, rtol=1e-5)
    np.testing.assert_allclose(jax.jit(second(mod.jax.cube))(x), 6 * x, rtol=1e-5)
    check_grads(mod.jax.cube, (x,), order=2, modes=["rev"], atol=5e-2, rtol=5e-2)
    with pytest.raises(TypeError, match=r"^sine_backward: has no backward, so JAX cannot differentiate it"):
        second(mod.jax.sine)(x)  # sine's backward has no pair of its own: kjit's error, never a wrong value


def test_scalars_stay_python_values_and_int_inputs_get_no_gradient(mod):
    x, idx = _data(5), jnp.asarray([4, 0, 4, 2], jnp.int32)
    loss = lambda a: (mod.jax.gather(a, idx, alpha=3.0) * jnp.arange(1.0, 5.0)).sum()  # noqa: E731
    np.testing.assert_allclose(jax.grad(loss)(x), [6.0, 0.0, 12.0, 0.0, 12.0])
    np.testing.assert_allclose(jax.jit(jax.grad(loss))(x), [6.0, 0.0, 12.0, 0.0, 12.0])
    _, pullback = jax.vjp(lambda a, i: mod.jax.gather(a, i), x, idx)
    gx, gi = pullback(jnp.ones(4, jnp.float32))
    assert gi.dtype == jax.dtypes.float0 and gi.shape == (4,)  # JAX's zero cotangent of an integer input
    np.testing.assert_allclose(gx, [1.0, 0.0, 1.0, 0.0, 2.0])


def test_inputs_without_a_gradient_get_zeros(mod):
    x, m = _data(4), _data(4, seed=3)
    gx, gm = jax.grad(lambda a, b: mod.jax.masked(a, b).sum(), argnums=(0, 1))(x, m)
    rx, rm = jax.grad(lambda a, b: (a * jax.lax.stop_gradient(b)).sum(), argnums=(0, 1))(x, m)
    np.testing.assert_allclose(gx, rx)
    np.testing.assert_array_equal(gm, np.zeros(4, np.float32))
    np.testing.assert_array_equal(gm, rm)


def test_an_unpaired_function_under_grad_is_kjits_error(mod):
    message = (r"^twice: has no backward, so JAX cannot differentiate it \(jax.grad, jax.vjp, jax.jvp\); pair it "
               r"with a kjit function of its module that computes its gradients: kjit.load_inline\(\.\.\., "
               r"backward=\{'twice': 'twice_backward'\}\) \(docs/jax.md, \"Gradients\"\)(\n|$)")  # then JAX's note
    x = _data(3)
    f = lambda t: mod.jax.twice(t).sum()  # noqa: E731
    for differentiate in (jax.grad(f), jax.jit(jax.grad(f)), jax.grad(jax.jit(f)),
                          lambda t: jax.jvp(f, (t,), (t,))):
        with pytest.raises(TypeError, match=message):
            differentiate(x)


def test_the_undifferentiated_path_is_unchanged(mod):
    """A concrete call is a plain ffi_call; a traced one (jit, vmap) lowers to the same
    program as the bare ffi_call, with or without a pair; grad of something else runs."""
    x = _data(3)
    for name in ("twice", "sine"):
        fn = getattr(mod.jax, name)
        results = fn.result_shape_dtypes(x)
        bare = jax.ffi.ffi_call(fn.target, results, vmap_method=fn.vmap_method)
        assert jax.jit(lambda t: fn(t)).lower(x).as_text() == jax.jit(lambda t: bare(t)[0]).lower(x).as_text()
    np.testing.assert_array_equal(jax.jit(mod.jax.twice)(x), np.repeat(np.asarray(x), 2))
    y = jax.jit(lambda a, b: mod.jax.axpy(a, b, alpha=2.0))(x, jnp.ones(3, jnp.float32))
    np.testing.assert_allclose(y, 2 * x + 1)
    const = mod.jax.twice(x)  # not differentiated: grad of an expression beside it runs
    assert jax.grad(lambda t: (t * const[:3]).sum())(x).shape == (3,)


def test_a_backward_of_the_wrong_shape_is_named():
    m = build("jax_grad", SRC, SIGS, jax=True, backward={"sine": "sine_wrong"})
    with pytest.raises(TypeError, match=r"^sine: backward 'sine_wrong' returns grad_x as float32\[6\], but 'x' is "
                                        r"float32\[3\]: a gradient has its argument's shape and dtype(\n|$)"):
        jax.grad(lambda t: m.jax.sine(t).sum())(_data(3))


def test_kjit_torch_register_pairs_for_jax_too():
    """kjit.torch.register(mod, backward=...) is an alias: it updates the one pairing,
    which mod.jax reads at trace time (even when mod.jax was made before)."""
    pytest.importorskip("torch")
    import kjit.torch  # noqa: PLC0415

    m = build("jax_grad", SRC, SIGS, jax=True)
    fns = m.jax
    with pytest.raises(TypeError, match=r"^sine: has no backward"):
        jax.grad(lambda t: fns.sine(t).sum())(_data(3))
    kjit.torch.register(m, "jax_grad_alias", backward={"sine": "sine_backward"})
    assert dict(m.backward) == {"sine": "sine_backward"} and m.jax is fns
    np.testing.assert_allclose(jax.grad(lambda t: fns.sine(t).sum())(_data(3)), jnp.cos(_data(3)), rtol=1e-6)


def test_one_pairing_drives_torch_and_jax():
    """One load_inline(backward=...): torch's gradcheck in float64, JAX's check_grads
    and reference in float32, through the same rmsnorm_backward kernel."""
    torch = pytest.importorskip("torch")
    m = build("jax_grad", SRC, SIGS, jax=True, backward={"rmsnorm": "rmsnorm_backward"})
    x = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    w = torch.randn(5, dtype=torch.float64, requires_grad=True)
    assert m.torch.rmsnorm.has_backward
    assert torch.autograd.gradcheck(m.torch.rmsnorm, (x, w))
    xj, wj = _data(3, 5), _data(5, seed=4)
    check_grads(m.jax.rmsnorm, (xj, wj), order=1, modes=["rev"], atol=2e-2, rtol=2e-2)
    got = jax.grad(lambda a, b: m.jax.rmsnorm(a, b).sum(), argnums=1)(xj, wj)
    np.testing.assert_allclose(got, jax.grad(lambda a, b: _rms_ref(a, b).sum(), argnums=1)(xj, wj), rtol=1e-4)


@pytest.mark.parametrize("backward, error, message", [
    (["sine"], TypeError, r"^kjit.load_inline: backward= must be a dict \{forward function name: backward function "
                          r"name\}, got list$"),
    ({"sine": 3}, TypeError, r"^kjit.load_inline: backward=\{'sine': 3\}: the backward must be a function name "
                             r"\(str\), got int$"),
    ({"sine": "cosine"}, kjit.SpecError, r"^kjit.load_inline: backward=\{'sine': 'cosine'\} names 'cosine', which "
                                         r"module 'jax_grad' does not have \(it has: rmsnorm, .*\)$"),
    ({"sine": "masked_backward"}, kjit.SpecError,
     r"^kjit.load_inline: backward 'masked_backward' of 'sine' has parameter 'm', which is neither grad_<output> "
     r"\(grad_y\), an argument of 'sine' \(x\) nor one of its outputs \(y\)$"),
    ({"sine": "gather_backward"}, kjit.SpecError,
     r"^kjit.load_inline: backward 'gather_backward' of 'sine' has parameter 'idx', which is neither grad_<output> "
     r"\(grad_y\), an argument of 'sine' \(x\) nor one of its outputs \(y\)$"),
    ({"axpy": "sine_backward"}, kjit.SpecError,
     r"^kjit.load_inline: 'axpy' writes an out tensor; a function with a backward must return its results "
     r"\('return' tensors\), not mutate its arguments"),
    ({"sine": "twice"}, kjit.SpecError, r"^kjit.load_inline: backward 'twice' returns 'y'; its returned tensors "
                                        r"must be grad_<input> for a tensor input of 'sine' \(grad_x\)$"),
    ({"gather": "gather_alpha"}, kjit.SpecError,
     r"^kjit.load_inline: backward 'gather_alpha' returns 'grad_alpha'; its returned tensors must be grad_<input> "
     r"for a tensor input of 'gather' \(grad_x, grad_idx\)$"),
])
def test_bad_pairings_are_refused_with_the_pair_named(backward, error, message):
    with pytest.raises(error, match=message):
        build("jax_grad", SRC, SIGS, jax=True, backward=backward)


def test_a_conflicting_second_pairing_is_refused():
    pytest.importorskip("torch")
    import kjit.torch  # noqa: PLC0415

    with pytest.raises(kjit.SpecError, match=r"^kjit.torch.register: 'sine' has backward 'sine_backward' already "
                                             r"\(mod.backward\); a function has one backward, so it cannot also have "
                                             r"'sine_wrong'$"):
        build("jax_grad", SRC, SIGS, jax=True, backward={"sine": "sine_backward"},
              torch={"backward": {"sine": "sine_wrong"}, "namespace": "jax_grad_conflict"})
    same = build("jax_grad", SRC, SIGS, jax=True, backward={"sine": "sine_backward"},
                 torch={"backward": {"sine": "sine_backward"}, "namespace": "jax_grad_same"})
    assert dict(same.backward) == {"sine": "sine_backward"} and same.torch.sine.has_backward


def test_kjit_load_takes_a_pairing_and_kjit_build_refuses_one(tmp_path):
    path = kjit.build("jax_grad_built", output=tmp_path / "jax_grad_built.so", jax=True, cpp_sources=SRC,
                      functions={k: SIGS[k] for k in ("sine", "sine_backward")})
    m = kjit.load(path, backward={"sine": "sine_backward"})
    np.testing.assert_allclose(jax.grad(lambda t: m.jax.sine(t).sum())(_data(3)), jnp.cos(_data(3)), rtol=1e-6)
    with pytest.raises(TypeError, match=r"^kjit.build: backward= is not stored in the built library; pass it to "
                                        r"kjit.load\(path, backward=\.\.\.\) where the library is loaded$"):
        kjit.build("jax_grad_built", output=tmp_path / "x.so", cpp_sources=SRC, backward={"sine": "sine_backward"})
