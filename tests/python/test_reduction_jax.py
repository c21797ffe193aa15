"""kjit.jax.function of kjit.reduction and kjit.arg_reduction functions under jax.jit
and vmap, against NumPy: shapes, dtypes, values and the trace-time errors."""

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = jax.numpy

import kjit  # noqa: E402
import kjit.jax  # noqa: E402

ADD = "template <typename T> T add(T a, T b) { return a + b; }"
GT = "template <typename T> bool gt(T a, T b) { return a > b || (a != a && b == b); }"
MEAN = "template <typename T> T mean(T acc, int64_t n) { return acc / T(n); }"


@pytest.fixture(scope="module")
def fns():
    return {
        "sum": kjit.jax.function(kjit.reduction(ADD, identity=0, name="jsum")),
        "mean": kjit.jax.function(kjit.reduction(ADD, identity=0, post_code=MEAN, name="jmean")),
        "sqdist": kjit.jax.function(kjit.reduction(
            ADD, identity=0, name="jsqdist", map_code="template <typename T> T sq(T a, T b) { return (a - b) * (a - b); }")),
        "argmax": kjit.jax.function(kjit.arg_reduction(GT, name="jargmax")),
    }


X = np.random.default_rng(0).standard_normal((5, 7, 3)).astype(np.float32)


@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2), (), (2, 0, 1)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_sum_and_mean_match_numpy(fns, axis, keepdims):
    for name, ref in (("sum", np.sum), ("mean", np.mean)):
        got = jax.jit(lambda v: fns[name](v, axis=axis, keepdims=keepdims))(X)
        want = ref(X, axis=axis, keepdims=keepdims)
        assert got.shape == want.shape and got.dtype == want.dtype, (name, got.shape, got.dtype)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)


def test_several_inputs_broadcast_through_map_code(fns):
    a, b = X[:, :, :1], X[0]
    got = jax.jit(lambda u, v: fns["sqdist"](u, v, axis=(1, 2)))(a, b)
    np.testing.assert_allclose(np.asarray(got), ((a - b) ** 2).sum(axis=(1, 2)), rtol=1e-5)


@pytest.mark.parametrize("axis", [None, 0, 1, 2, -1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_argmax_matches_numpy(fns, axis, keepdims):
    x = X.copy()
    x[1, 2, 0] = np.nan
    got = jax.jit(lambda v: fns["argmax"](v, axis=axis, keepdims=keepdims))(x)
    want = np.argmax(x, axis=axis, keepdims=keepdims)
    assert got.shape == want.shape
    np.testing.assert_array_equal(np.asarray(got), want)


def test_integer_sums_take_jaxs_canonical_dtype(fns):
    x = np.arange(10, dtype=np.int32)
    got = jax.jit(fns["sum"])(x)
    assert got.dtype == jnp.int32 and int(got) == 45  # NumPy says int64; JAX without x64 int32


def test_vmap_runs_once_per_batch_element(fns):
    got = jax.vmap(lambda r: fns["sum"](r, axis=0))(X)
    np.testing.assert_allclose(np.asarray(got), X.sum(axis=1), rtol=1e-5)


def test_errors_come_at_trace_time(fns):
    with pytest.raises(ValueError, match="jsum: axis 3 is out of bounds for array of dimension 3"):
        jax.jit(lambda v: fns["sum"](v, axis=3))(X)
    with pytest.raises(ValueError, match="duplicate value in 'axis'"):
        jax.jit(lambda v: fns["sum"](v, axis=(0, -3)))(X)
    with pytest.raises(TypeError, match="jargmax: axis must be None or an int, got tuple"):
        fns["argmax"](X, axis=(0, 1))
    with pytest.raises(TypeError, match=r"jsum: input #0 must be an array, got float"):
        fns["sum"](1.5)
    with pytest.raises(ValueError, match="zero-size array to reduction operation"):
        kjit.jax.function(kjit.reduction(ADD, identity=None, name="jmax_like"))(jnp.zeros((0,), jnp.float32))
