"""Reductions whose accumulator is a type of the code (docs/reductions.md
"Accumulators of several values"): Welford's mean and M2, an online logsumexp and
an argmax that carries its value, each one pass, against NumPy over axes, threads
(per-part accumulators) and outer reductions; and the rejections."""

import pathlib

import numpy as np
import pytest

import kjit

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
WELFORD = (EXAMPLES / "welford.h").read_text()
LOGSUMEXP = (EXAMPLES / "logsumexp.h").read_text()
ARGMAX = r"""
template <typename T> struct Best { T value; int64_t index; };
template <typename T> Best<T> better(Best<T> a, Best<T> b) {
  if (a.index < 0) return b;
  if (b.index < 0) return a;
  if (a.value != b.value) return a.value > b.value ? a : b;
  return a.index < b.index ? a : b;
}
"""


@pytest.fixture(scope="module")
def var():
    return kjit.reduction(WELFORD, accumulator="Welford<T>", identity="Welford<T>{T(0), T(0), 0}",
                          map_code="template <typename T> Welford<T> one(T x) { return {x, T(0), 1}; }",
                          post_code="template <typename T> T variance(Welford<T> a, int64_t) { return a.m2 / T(a.n); }",
                          name="welford_var")


@pytest.mark.parametrize("shape, axis", [((1000,), None), ((300, 257), 0), ((300, 257), 1), ((4, 70000), 1),
                                         ((70000, 3), 0), ((64, 64, 33), (0, 2))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_welford_variance_is_numpys(var, shape, axis, dtype):
    x = (np.random.default_rng(0).standard_normal(shape) * 3 + 100).astype(dtype)
    got = var(x, axis=axis)
    want = np.var(x.astype(np.float64), axis=axis)
    assert np.asarray(got).dtype == dtype
    np.testing.assert_allclose(got, want, rtol=1e-3 if dtype == np.float32 else 1e-10)


def test_welford_of_an_empty_axis_is_post_of_the_identity(var):
    got = var(np.zeros((3, 0), np.float64), axis=1)
    assert got.shape == (3,) and np.isnan(got).all()  # 0 / 0, as np.var of nothing


def test_an_online_logsumexp_in_one_pass():
    lse = kjit.reduction(LOGSUMEXP, accumulator="Lse<T>",
                         identity="Lse<T>{-std::numeric_limits<T>::infinity(), T(0)}",
                         map_code="template <typename T> Lse<T> one(T x) { return {x, T(1)}; }",
                         post_code="template <typename T> T finish(Lse<T> a, int64_t) { return a.max + std::log(a.sum); }",
                         name="online_lse")
    x = np.random.default_rng(1).standard_normal((50, 40000)) * 30
    m = x.max(axis=1, keepdims=True)
    want = (m + np.log(np.exp(x - m).sum(axis=1, keepdims=True)))[:, 0]
    np.testing.assert_allclose(lse(x, axis=1), want, rtol=1e-12)
    np.testing.assert_allclose(lse(x, axis=0), (x.max(0) + np.log(np.exp(x - x.max(0)).sum(0))), rtol=1e-12)
    assert lse(np.zeros((2, 0)), axis=1).tolist() == [-np.inf, -np.inf]
    # infinities as scipy.special.logsumexp and torch.logsumexp have them
    edges = np.array([[-np.inf, -np.inf], [np.inf, 1.0], [1.0, np.inf], [-np.inf, 2.0], [np.nan, 1.0]])
    got = lse(edges, axis=1)
    assert got[:4].tolist() == [-np.inf, np.inf, np.inf, 2.0] and np.isnan(got[4]), got


def test_argmax_that_carries_its_value():
    argmax = kjit.reduction(ARGMAX, accumulator="Best<T>", identity="Best<T>{T(0), -1}",
                            map_code="template <typename T> Best<T> one(T x, T i) { return {x, int64_t(i)}; }",
                            post_code="template <typename T> int64_t where(Best<T> a, int64_t) { return a.index; }",
                            name="carried_argmax")
    x = np.random.default_rng(2).integers(0, 50, (7, 90001)).astype(np.float64)
    got = argmax(x, np.arange(x.shape[1], dtype=np.float64), axis=1)
    assert got.dtype == np.int64  # post_code's declared type
    np.testing.assert_array_equal(got, np.argmax(x, axis=1))


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(post_code="template <typename T> T f(Welford<T> a, int64_t) { return a.mean; }"), kjit.SpecError,
     r"^kjit.reduction: accumulator='Welford<T>' needs map_code, whose function makes an accumulator from each "
     r"element"),
    (dict(map_code="template <typename T> Welford<T> one(T x) { return {x, T(0), 1}; }"), kjit.SpecError,
     r"^kjit.reduction: accumulator='Welford<T>' needs post_code, whose function makes the result from one"),
    (dict(identity=0), TypeError,
     r"^kjit.reduction: with accumulator='Welford<T>', identity is a C\+\+ expression of T "
     r"\(\"Welford<T>\{...\}\"\) or None, got int$"),
])
def test_what_a_user_accumulator_needs(kwargs, error, message):
    args = dict(accumulator="Welford<T>", identity=None)
    args.update(kwargs)
    with pytest.raises(error, match=message):
        kjit.reduction(WELFORD, **args)


def test_code_identity_needs_an_accumulator():
    with pytest.raises(TypeError, match=r"^kjit.reduction: identity must be None or a bool, int, float or complex, "
                                        r"got str \(a C\+\+ expression is the identity of an accumulator= type of "
                                        r"the code only\)$"):
        kjit.reduction("template <typename T> T add(T a, T b) { return a + b; }", identity="T(0)")


def test_without_an_identity_an_empty_reduction_is_refused():
    mean = kjit.reduction(WELFORD, accumulator="Welford<T>", identity=None,
                          map_code="template <typename T> Welford<T> one(T x) { return {x, T(0), 1}; }",
                          post_code="template <typename T> T mean(Welford<T> a, int64_t) { return a.mean; }",
                          name="welford_mean")
    assert mean(np.arange(5.0)) == 2.0
    with pytest.raises(ValueError, match="zero-size array to reduction operation welford_mean which has no identity"):
        mean(np.zeros(0))
