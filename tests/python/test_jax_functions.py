"""kjit functions as JAX-traceable callables (mod.jax.fn, kjit.jax.function,
docs/jax.md): arguments bound and checked by the call model while tracing, result
shapes and dtypes from it, out tensors aliased, a batching rule from the spec, and
elementwise functions through one shared XLA handler. jit, vmap and shard_map (4
host devices, in a subprocess) equal the sequential calls."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = jax.numpy

import kjit  # noqa: E402
import kjit.jax  # noqa: E402
from conftest import build  # noqa: E402

SRC = r"""
#include <kjit/kernel.h>
void scale(const kjit::TensorView x, kjit::TensorView y, float alpha, int32_t shift) {
  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] = alpha * x.data<float>()[i] + shift;
}
void axpy(const kjit::TensorView x, kjit::TensorView y, float alpha) {
  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] += alpha * x.data<float>()[i];
}
void twice(const kjit::TensorView x, kjit::TensorView y) {
  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[2 * i] = y.data<float>()[2 * i + 1] = x.data<float>()[i];
}
void rowsum(const kjit::TensorView x, kjit::TensorView y) {
  const int64_t m = x.size(0), n = x.size(1);
  for (int64_t i = 0; i < m; ++i) {
    float s = 0;
    for (int64_t j = 0; j < n; ++j) s += x.data<float>()[i * n + j];
    y.data<float>()[i] = s;
  }
}
void add3(const kjit::TensorView a, const kjit::TensorView b, kjit::TensorView c) {
  for (int64_t i = 0; i < a.numel(); ++i) c.data<float>()[i] = a.data<float>()[i] + b.data<float>()[i];
}
double value(const kjit::TensorView x) { return 1.0; }
"""
SIGS = {
    "scale": "x: float32[n], y: float32[n] return, alpha: float32 = 2.0, shift: int32 = 0",
    "axpy": "x: float32[n], y: float32[n] out, alpha: float32 = 1.0",
    "twice": "x: float32[n], y: float32[2*n] return",
    "rowsum": "x: float32[m, n], y: float32[m] return; n % 2 == 0",
    "add3": "a: float32[...], b: float32[...], c: float32[...] out",
    "value": "x: float32[n]",
}


@pytest.fixture(scope="module")
def mod():
    return build("tjf_mod", SRC, SIGS, jax=True)


def test_defaults_keywords_and_result_shapes(mod):
    x = jnp.arange(4, dtype=jnp.float32)
    np.testing.assert_array_equal(mod.jax.scale(x), [0, 2, 4, 6])
    np.testing.assert_array_equal(mod.jax.scale(x, shift=1, alpha=0.5), [1, 1.5, 2, 2.5])
    np.testing.assert_array_equal(jax.jit(mod.jax.twice)(x), [0, 0, 1, 1, 2, 2, 3, 3])
    assert mod.jax.twice.result_shape_dtypes(x) == [jax.ShapeDtypeStruct((8,), jnp.float32)]
    np.testing.assert_array_equal(mod.jax.rowsum(jnp.ones((3, 4), jnp.float32)), [4, 4, 4])
    np.testing.assert_array_equal(mod.jax.twice(np.arange(2, dtype=np.float32)), [0, 0, 1, 1])  # NumPy in


def test_out_tensors_are_results_aliased_to_their_inputs(mod):
    x, y = jnp.ones(4, jnp.float32), jnp.arange(4, dtype=jnp.float32)
    assert mod.jax.axpy.input_output_aliases == {1: 0}
    out = jax.jit(lambda a, b: mod.jax.axpy(a, b, alpha=3.0))(x, y)
    np.testing.assert_array_equal(out, [3, 4, 5, 6])  # the kernel read y's values
    np.testing.assert_array_equal(y, [0, 1, 2, 3])  # y itself is unchanged (JAX arrays are immutable)


@pytest.mark.parametrize("call, kind, message", [
    (lambda m: m.jax.twice(jnp.ones(3, jnp.int32)), TypeError, "twice: argument #0 'x': dtype must be float32, got int32"),
    (lambda m: m.jax.twice(jnp.ones((2, 2), jnp.float32)), TypeError,
     "twice: argument #0 'x': ndim must be 1 (float32[n]), got 2"),
    (lambda m: m.jax.axpy(jnp.ones(3, jnp.float32), jnp.ones(4, jnp.float32)), ValueError,
     "axpy: argument #1 'y': shape[0] must equal n = 3 (bound by x.shape[0]), got 4"),
    (lambda m: m.jax.rowsum(jnp.ones((2, 3), jnp.float32)), ValueError,
     "rowsum: constraint 'n % 2 == 0' failed with n = 3 (bound by x.shape[1])"),
    (lambda m: m.jax.scale(jnp.ones(3, jnp.float32), shift=2**40), ValueError,
     "scale: argument #2 'shift': 1099511627776 is out of range for int32 [-2147483648, 2147483647]"),
    (lambda m: m.jax.scale(jnp.ones(3, jnp.float32), beta=1.0), TypeError,
     "scale() got an unexpected keyword argument 'beta' (its parameters: x, alpha, shift)"),
    (lambda m: m.jax.twice(1.5), TypeError, "twice: argument 'x' must be an array, got float 1.5"),
])
def test_each_check_kind_fails_at_trace_time_with_kjits_message(mod, call, kind, message):
    with pytest.raises(kind) as err:
        jax.jit(lambda: call(mod))()
    assert str(err.value).startswith(message)


def test_traced_scalars_are_refused_by_name(mod):
    with pytest.raises(TypeError, match=r"^scale: argument 'alpha' is traced, but scalars reach the kernel as XLA "
                                        r"attributes"):
        jax.jit(lambda a, s: mod.jax.scale(a, alpha=s))(jnp.ones(2, jnp.float32), 2.0)
    f = jax.jit(lambda a, s: mod.jax.scale(a, alpha=s), static_argnums=1)
    np.testing.assert_array_equal(f(jnp.ones(2, jnp.float32), 3.0), [3, 3])


def test_mod_fn_with_jax_values_names_the_jax_callable(mod):
    with pytest.raises(TypeError, match=r"call mod\.jax\.twice, its JAX-traceable form"):
        jax.jit(lambda a: mod.twice(a))(jnp.ones(2, jnp.float32))


def test_vmap_rules_from_the_spec(mod):
    assert mod.jax.twice.vmap_method == "sequential"  # fixed rank: a loop
    assert mod.jax.add3.vmap_method == "broadcast_all"  # any rank: the kernel takes the batch dim
    xs = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
    batched = jax.vmap(mod.jax.twice)(xs)
    np.testing.assert_array_equal(batched, np.stack([np.repeat(np.asarray(r), 2) for r in xs]))
    b = jnp.ones(4, jnp.float32)
    np.testing.assert_array_equal(jax.vmap(lambda a: mod.jax.add3(a, b, jnp.zeros(4, jnp.float32)))(xs), xs + 1)
    np.testing.assert_array_equal(jax.jit(jax.vmap(lambda a: mod.jax.scale(a, alpha=2.0)))(xs), xs * 2)
    looped = kjit.jax.function(mod, "add3", vmap="sequential")
    assert looped.vmap_method == "sequential"


def test_functions_xla_cannot_call_are_skipped_with_a_reason(mod):
    assert "returns a float" in mod.jax.skipped["value"]
    with pytest.raises(AttributeError, match=r"kjit\.jax: 'value' has no JAX callable: its kernel returns a float"):
        mod.jax.value  # noqa: B018


def test_a_module_without_handlers_is_rebuilt_once():
    m = build("tjf_plain", SRC, {"twice": SIGS["twice"]})
    assert not m.has_xla_handlers
    np.testing.assert_array_equal(m.jax.twice(jnp.ones(1, jnp.float32)), [1, 1])
    assert kjit.jax.function(m, "twice") is m.jax.twice


def test_jitted_call_matches_the_raw_ffi_call(mod):
    x = jnp.arange(6, dtype=jnp.float32)
    raw = jax.ffi.ffi_call("tjf_mod.twice", jax.ShapeDtypeStruct((12,), jnp.float32))
    np.testing.assert_array_equal(jax.jit(mod.jax.twice)(x), jax.jit(raw)(x))


# ---- elementwise functions ----

@pytest.fixture(scope="module")
def jadd():
    add = kjit.elementwise("template <typename T> T add(T a, T b) { return a + b; }")
    return kjit.jax.function(add)


def test_elementwise_broadcasts_and_promotes_at_trace_time(jadd):
    a = jnp.arange(3, dtype=jnp.int32).reshape(3, 1)
    b = jnp.ones(4, jnp.float32)
    out = jax.jit(jadd)(a, b)
    assert out.shape == (3, 4)
    assert out.dtype == jax.dtypes.canonicalize_dtype(np.result_type(np.int32, np.float32))  # NumPy's rules, then JAX's
    np.testing.assert_allclose(np.asarray(out), np.asarray(a) + np.asarray(b))
    with pytest.raises(ValueError, match=r"add: the input shapes \(3, 2\), \(4,\) do not broadcast"):
        jax.jit(jadd)(jnp.ones((3, 2), jnp.float32), b)


def test_elementwise_under_vmap_and_jit(jadd):
    xs = jnp.arange(12, dtype=jnp.float32).reshape(4, 3)
    y = jnp.ones(3, jnp.float32)
    np.testing.assert_array_equal(jax.jit(jax.vmap(lambda r: jadd(r, y)))(xs), np.asarray(xs) + 1)
    with pytest.raises(TypeError, match=r"add: input #1 must be an array, got float 1.0"):
        jadd(xs, 1.0)


def test_elementwise_vmap_over_inputs_of_different_ranks(jadd):
    # a leading batch dim lines up only at equal ranks: the callable passes every operand at the result's rank
    xs = jnp.arange(6, dtype=jnp.float32).reshape(2, 3)
    bs = jnp.array([10.0, 20.0], jnp.float32)
    got = jax.vmap(jadd)(xs, bs)
    np.testing.assert_array_equal(got, np.asarray(xs) + np.asarray(bs)[:, None])


SGN = "template <typename T> void sgn(T a, T b, bool& pos, T& twice) { pos = a + b > 0; twice = (a + b) * 2; }"


@pytest.fixture(scope="module")
def sgn():
    return kjit.elementwise(SGN, num_outputs=2)


def test_elementwise_several_outputs_each_with_its_dtype(sgn):
    jsgn = kjit.jax.function(sgn)
    a = np.array([[-3], [1], [2]], np.int32)
    b = np.array([1.0, -0.5, 4.0], np.float32)
    assert [(r.shape, r.dtype) for r in jsgn.result_shape_dtypes(a, b)] == [((3, 3), np.bool_), ((3, 3), np.float32)]
    pos, twice = jax.jit(jsgn)(jnp.asarray(a), jnp.asarray(b))
    want_pos, want_twice = sgn(a, b)  # the eager kjit call on NumPy arrays
    assert pos.dtype == jnp.bool_ and twice.dtype == jnp.float32
    np.testing.assert_array_equal(pos, want_pos)
    np.testing.assert_array_equal(twice, want_twice)
    np.testing.assert_array_equal(pos, jnp.asarray(a) + jnp.asarray(b) > 0)  # jnp's reference
    np.testing.assert_allclose(twice, (jnp.asarray(a) + jnp.asarray(b)) * 2)


def test_elementwise_several_outputs_under_vmap_and_jit(sgn):
    jsgn = kjit.jax.function(sgn)
    xs = jnp.arange(12, dtype=jnp.float32).reshape(4, 3) - 6
    ys = jnp.array([1.0, -1.0, 2.0, -2.0], jnp.float32)  # one per row: a batched input of lower rank
    pos, twice = jax.jit(jax.vmap(jsgn))(xs, ys)
    want = np.asarray(xs) + np.asarray(ys)[:, None]
    np.testing.assert_array_equal(pos, want > 0)
    np.testing.assert_array_equal(twice, want * 2)
    pos, twice = jax.vmap(lambda r: jsgn(r, ys[0]))(xs)  # one input batched, the other not
    np.testing.assert_array_equal(twice, (np.asarray(xs) + 1) * 2)


def test_elementwise_extras_reach_the_kernel_under_jax():
    axpy = kjit.elementwise("template <typename T> T axpy(T x, T y, double alpha, int64_t k, bool neg) "
                            "{ return T((neg ? -1 : 1) * (T(alpha) * x + y) + k); }")
    jaxpy = kjit.jax.function(axpy)
    x = jnp.arange(3, dtype=jnp.float32)
    want = axpy(np.asarray(x), np.ones(3, np.float32), 2.0, 3, True)
    got = jax.jit(lambda a, b: jaxpy(a, b, alpha=2.0, k=3, neg=True))(x, jnp.ones(3, jnp.float32))
    np.testing.assert_allclose(got, want)
    np.testing.assert_allclose(jax.vmap(lambda a: jaxpy(a, a, alpha=0.5, k=1, neg=False))(jnp.ones((2, 3))),
                               np.full((2, 3), 2.5))
    with pytest.raises(TypeError, match=r"^axpy: extra argument 'alpha' is traced; extras are fixed when XLA "
                                        r"compiles the call"):
        jax.jit(lambda a, s: jaxpy(a, a, alpha=s, k=1, neg=False))(x, 2.0)
    with pytest.raises(TypeError, match=r"^axpy: extra argument 'alpha' is complex"):
        jaxpy(x, x, alpha=1j, k=1, neg=False)


SHARD_MAP = textwrap.dedent(r"""
    import os
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    import numpy as np, jax, jax.numpy as jnp
    from jax.sharding import Mesh, PartitionSpec as P
    import kjit, kjit.jax
    src = '''
    #include <kjit/kernel.h>
    void twice(const kjit::TensorView x, kjit::TensorView y) {
      for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[2 * i] = y.data<float>()[2 * i + 1] = x.data<float>()[i];
    }
    '''
    mod = kjit.load_inline("tjf_shard", cpp_sources=src, functions={"twice": "x: float32[n], y: float32[2*n] return"},
                           jax=True)
    assert len(jax.devices()) == 4
    mesh = Mesh(np.array(jax.devices()), ("d",))
    shard_map = getattr(jax, "shard_map", None) or __import__("jax.experimental.shard_map", fromlist=["x"]).shard_map
    f = jax.jit(shard_map(mod.jax.twice, mesh=mesh, in_specs=P("d"), out_specs=P("d")))
    x = jnp.arange(16, dtype=jnp.float32)
    got = np.asarray(f(x))
    want = np.concatenate([np.repeat(np.asarray(s), 2) for s in np.split(np.asarray(x), 4)])
    np.testing.assert_array_equal(got, want)
    add = kjit.jax.function(kjit.elementwise("template <typename T> T add(T a, T b) { return a + b; }"))
    g = jax.jit(shard_map(lambda a: add(a, a), mesh=mesh, in_specs=P("d"), out_specs=P("d")))
    np.testing.assert_array_equal(np.asarray(g(x)), 2 * np.asarray(x))
    print("ok")
""")


def test_shard_map_over_four_host_devices(kjit_cache_dir):
    env = dict(os.environ, KJIT_CACHE_DIR=str(kjit_cache_dir))
    proc = subprocess.run([sys.executable, "-c", SHARD_MAP], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]


X64_SRC = r"""
#include <kjit/kernel.h>
void iota(const kjit::TensorView a, kjit::TensorView y) {
  for (int64_t i = 0; i < y.numel(); ++i) y.data<int64_t>()[i] = (int64_t(1) << 40) + i;
}
void dbl(const kjit::TensorView x, kjit::TensorView y) {
  for (int64_t i = 0; i < y.numel(); ++i) y.data<double>()[i] = 2 * x.data<double>()[i];
}
"""


@pytest.fixture(scope="module")
def x64_mod():
    return build("tjf_x64", X64_SRC, {"iota": "a: float32[n], y: int64[n] return",
                                      "dbl": "x: float64[n], y: float64[n] return"}, jax=True)


def test_a_64_bit_result_without_x64_is_refused_at_trace_time(x64_mod):
    """With jax_enable_x64 off (JAX's default) JAX holds no int64 array: a kernel's
    int64 values would be read as int32 by the next JAX op (2**40 + i became i)."""
    assert not jax.config.jax_enable_x64
    with pytest.raises(TypeError, match=r"^iota: returned tensor 'y' is int64, which JAX holds only with "
                                        r"jax_enable_x64 \(off, JAX's default\): set "
                                        r"jax.config.update\('jax_enable_x64', True\), or return a 32-bit dtype"):
        jax.jit(lambda a: x64_mod.jax.iota(a) + 1)(jnp.ones(3))


def test_a_64_bit_input_jax_converted_says_so(x64_mod):
    with pytest.raises(TypeError, match=r"^dbl: argument #0 'x': dtype must be float64, got float32 \('x' was "
                                        r"float64, which JAX converted to float32: jax_enable_x64 is off, JAX's "
                                        r"default; set jax.config.update\('jax_enable_x64', True\)\)$"):
        x64_mod.jax.dbl(np.ones(3))


def test_x64_results_under_x64_in_a_subprocess(kjit_cache_dir):
    """With jax_enable_x64 on, the same kernels give JAX their int64 and float64 values."""
    code = textwrap.dedent(f"""
        import jax
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp, numpy as np, kjit
        mod = kjit.load_inline("tjf_x64", cpp_sources={X64_SRC!r},
                               functions={{"iota": "a: float32[n], y: int64[n] return",
                                           "dbl": "x: float64[n], y: float64[n] return"}}, jax=True)
        got = jax.jit(lambda a: mod.jax.iota(a) + 1)(jnp.ones(3, jnp.float32))
        assert got.dtype == jnp.int64 and got.tolist() == [2**40 + 1, 2**40 + 2, 2**40 + 3], got
        assert mod.jax.dbl(np.ones(2)).tolist() == [2.0, 2.0]
        print("ok")
    """)
    env = dict(os.environ, KJIT_CACHE_DIR=str(kjit_cache_dir))
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-3000:]


def test_symbolic_shapes_are_refused_with_kjits_message(mod):
    from jax import export
    spec = jax.ShapeDtypeStruct(export.symbolic_shape("n"), jnp.float32)
    with pytest.raises(TypeError, match=r"^twice: argument 'x' has the symbolic shape \(n,\), but kjit functions "
                                        r"check concrete sizes while tracing: export with concrete shapes"):
        export.export(jax.jit(mod.jax.twice))(spec)


def test_result_shape_dtypes_takes_shape_dtype_structs(mod):
    assert mod.jax.twice.result_shape_dtypes(jax.ShapeDtypeStruct((3,), jnp.float32)) == \
        [jax.ShapeDtypeStruct((6,), jnp.float32)]
    with pytest.raises(TypeError, match=r"^twice: argument #0 'x': dtype must be float32, got int32$"):
        mod.jax.twice.result_shape_dtypes(jax.ShapeDtypeStruct((3,), jnp.int32))
