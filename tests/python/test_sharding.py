"""Sharding rules derived from what kjit knows of a function (kjit.sharding,
docs/distributed.md): the rules themselves, the grammar's independent(...), and
JAX's partitioner using them under jax.jit over 4 host devices (a subprocess: the
device count is fixed when JAX starts)."""

import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kjit
from kjit import sharding
from conftest import build  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RMSNORM = open(os.path.join(ROOT, "examples", "rmsnorm.cc")).read()

AXPY = r"""
#include <kjit/kernel.h>
void axpy(const kjit::TensorView x, kjit::TensorView y, double a) {
  float* out = y.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) out[i] += static_cast<float>(a) * x.data<float>()[i];
}
"""


def test_a_batched_kernel_splits_its_batch_and_replicates_the_rest():
    mod = build("shard_rms", RMSNORM, None)
    rule = mod.rmsnorm.sharding_rule
    assert isinstance(rule, kjit.ShardingRule)
    assert str(rule) == "*batch n, n -> *batch n; split: *batch; replicated: n"
    assert repr(rule) == ("<kjit.ShardingRule rmsnorm: x[*batch, n], w[n] -> y[*batch, n]; split: *batch; replicated: "
                          "n>\n  n: the spec does not say independent(n): the kernel may read every index of n")
    assert rule.inputs == ("x", "w") and rule.outputs == ("y",)
    assert rule.call_dims({"x": 3, "w": 1, "y": 3}) == {"x": ("batch.0", "batch.1", "n"), "w": ("n",),
                                                        "y": ("batch.0", "batch.1", "n")}
    assert rule.shardy([("x", 3), ("w", 1)], [("y", 3)])[:2] == ("f0 f1 f2, f2 -> f0 f1 f2", ("f2",))


def test_independent_symbols_split_and_out_tensors_are_read_and_written():
    sig = "x: float32[m, n], y: float32[m, n] out, a: float64; independent(m)"
    assert kjit.parse_signature(sig) == sig
    assert kjit.Spec("axpy").tensor("x", "float32", ["m", "n"]).tensor("y", "float32", ["m", "n"], out=True) \
        .scalar("a", "float64").independent("m").signature() == sig
    mod = build("shard_axpy", AXPY, {"axpy": sig})
    assert str(mod.axpy.sharding_rule) == "m n, m n -> m n; split: m; replicated: n"
    x, y = np.ones((2, 3), np.float32), np.zeros((2, 3), np.float32)
    mod.axpy(x, y, 2.0)  # the clause changes no check
    np.testing.assert_array_equal(y, 2 * x)


def test_expressions_literals_and_any_rank_tensors_are_replicated():
    rule = sharding.of_spec("f", "x: float32[m, n, 3], w: float32[...], y: float32[2*m, n] out; independent(n)")
    assert str(rule) == "m n x.2, ..., y.0 n -> y.0 n; split: n; replicated: m, x.2, y.0"
    assert rule.why["m"] == "m appears in an expression dim, which kjit does not split"
    assert rule.why["x.2"] == "x's dim 2 is the literal '3', which kjit does not split"
    assert rule.call_dims({"w": 2})["w"] == ("w.0", "w.1")
    assert rule.kind_of("w.0") == sharding.REPLICATED


@pytest.mark.parametrize("sig, message", [
    ("x: float32[m, n]; independent(k)", "independent(k): 'k' is not a dim of any tensor"),
    ("x: float32[m, n]; independent(m, m)", "independent(m) names 'm' twice"),
    ("x: float32[*b, n]; independent(b)", "independent(b): 'b' is a batch group, whose dims are independent already"),
    ("x: float32[m], y: float32[m + 1] out; independent(m)",
     "independent(m): tensor 'y' has the dim 'm + 1', which kjit cannot split with 'm'"),
    ("x: float32[m]; independent()", "expected a shape symbol in independent(...), got ')'"),
])
def test_independent_names_whole_dims_only(sig, message):
    with pytest.raises(kjit.SpecError, match="^" + re.escape("signature of 'fn': " + message)):
        kjit.parse_signature(sig)
    with pytest.raises(kjit.SpecError, match=r"builder of 'f': independent\('m, n'"):
        kjit.Spec("f").tensor("x", "float32", ["m", "n"]).independent("m, n").signature()


def test_a_rule_is_overridden_by_assignment_and_checked_by_name():
    mod = build("shard_rms", RMSNORM, None)
    rule = mod.rmsnorm.sharding_rule
    assert str(rule.independent("n")) == "*batch n, n -> *batch n; split: *batch, n"
    assert str(rule.replicated("*batch")) == "*batch n, n -> *batch n; replicated: *batch, n"
    assert rule.independent("n").independent("n") == rule.independent("n") != rule
    with pytest.raises(kjit.SpecError, match=r"^rmsnorm: sharding_rule.independent\('k'\): 'k' is not a factor of "
                                             r"the rule \(its factors: \*batch, n\)$"):
        rule.independent("k")
    red = sharding.for_reduction("total", [(4, 8)], [1], False, True)
    with pytest.raises(kjit.SpecError, match=r"'d1' is reduced; a reduced factor is split only where its partial "
                                             r"results combine"):
        red.independent("d1")
    mod.rmsnorm.sharding_rule = "batch n"
    try:
        with pytest.raises(TypeError, match=r"^rmsnorm.sharding_rule must be a kjit.ShardingRule, got str$"):
            sharding.rule_of(mod.rmsnorm)
    finally:
        mod.rmsnorm.sharding_rule = rule


def test_elementwise_and_reduction_rules_follow_broadcasting():
    ew = sharding.for_elementwise("add", [(4, 8), (1, 8), (8,)], 1)
    assert str(ew) == "d0 d1, input1.0 d1, d1 -> d0 d1; split: d0, d1; replicated: input1.0"
    assert str(sharding.for_reduction("total", [(4, 8)], [1], False, True)) == "d0 d1 -> d0; split: d0; reduced: d1"
    kept = sharding.for_reduction("l2", [(4, 8)], [0], True, False)
    assert str(kept) == "d0 d1 -> output.0 d1; split: d1; replicated: d0, output.0"
    assert "whose partial results kjit cannot combine" in kept.why["d0"]


def test_dtensor_strategies_shard_every_tensor_of_a_split_factor():
    rule = sharding.of_spec("rms", "x: float32[*batch, n], w: float32[n], y: float32[*batch, n] return")
    got = sharding.strategies(rule, {"x": 3, "w": 1}, lambda d: f"S{d}", lambda: "R")
    assert got == [{"x": "R", "w": "R", "y": "R"}, {"x": "S0", "w": "R", "y": "S0"},
                   {"x": "S1", "w": "R", "y": "S1"}]
    square = sharding.of_spec("sq", "x: float32[n, n], y: float32[n, n] out; independent(n)")
    assert sharding.strategies(square, {"x": 2, "y": 2}, lambda d: f"S{d}", lambda: "R") == [{"x": "R", "y": "R"}]


SHARDED_JIT = textwrap.dedent(r"""
    import os, sys
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    import numpy as np, jax, jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P
    import kjit, kjit.jax
    mod = kjit.load_inline("shard_jit_rms", cpp_sources=open(sys.argv[1]).read(), jax=True)
    mesh = jax.make_mesh((4,), ("d",))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 8)).astype(np.float32)
    w = rng.random(8).astype(np.float32)

    def put(a, *spec):
        return jax.device_put(a, NamedSharding(mesh, P(*spec)))

    def collectives(f, *args):
        text = jax.jit(f).lower(*args).compile().as_text()
        return {k: text.count(k) for k in ("all-gather", "all-reduce", "all-to-all", "collective-permute")
                if text.count(k)}

    def check(what, f, args, want, comms, spec=None):
        got = jax.jit(f)(*args)
        np.testing.assert_allclose(np.asarray(got), want, rtol=2e-6, atol=2e-6, err_msg=what)
        assert collectives(f, *args) == comms, (what, collectives(f, *args))
        if spec is not None:
            assert got.sharding.spec == P(*spec), (what, got.sharding.spec)

    rms = lambda a, b: mod.jax.rmsnorm(a, b)
    want = mod.rmsnorm(x, w)
    check("rmsnorm, rows", rms, (put(x, "d", None), put(w)), want, {}, ("d",))
    check("rmsnorm, 3-d batch", rms, (put(x.reshape(4, 4, 8), None, "d", None), put(w)), want.reshape(4, 4, 8), {},
          (None, "d"))
    got = jax.jit(rms)(put(x, None, "d"), put(w))  # n is replicated: gathered, then right
    np.testing.assert_allclose(np.asarray(got), want, rtol=2e-6)
    grad = jax.jit(jax.grad(lambda a, b: rms(a, b).sum(), argnums=(0, 1)))
    gx, gw = grad(put(x, "d", None), put(w))
    rx, rw = jax.grad(lambda a, b: rms(a, b).sum(), argnums=(0, 1))(x, w)
    np.testing.assert_allclose(np.asarray(gx), np.asarray(rx), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(gw), np.asarray(rw), rtol=1e-5, atol=1e-5)
    # the backward returns grad_w[n], summed over the batch: its batch is replicated (rule below), never split
    assert "grad_w" in mod.rmsnorm_backward.sharding_rule.why["*batch"]
    xb = rng.standard_normal((3, 16, 8)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(jax.jit(jax.vmap(lambda a: rms(a, w)))(xb)),
                               np.stack([mod.rmsnorm(a, w) for a in xb]), rtol=2e-6)

    add = kjit.jax.function(kjit.elementwise("template <typename T> T add(T a, T b) { return a + b; }"))
    check("elementwise, rows", add, (put(x, "d", None), w), x + w, {}, ("d",))
    check("elementwise, columns", add, (put(x, None, "d"), put(w, "d")), x + w, {}, (None, "d"))
    total = kjit.jax.function(kjit.reduction("template <typename T> T add(T a, T b) { return a + b; }", identity=0))
    check("reduction, kept dim", lambda a: total(a, axis=1), (put(x, "d", None),), x.sum(1), {}, ("d",))
    # the reduced dim sharded: each device reduces its piece; the 4 partial rows are gathered and reduced
    check("reduction, reduced dim", lambda a: total(a, axis=1), (put(x, None, "d"),), x.sum(1), {"all-gather": 1})
    check("reduction, all", lambda a: total(a), (put(x, "d", None),), x.sum(), {"all-gather": 1})
    sq = kjit.jax.function(kjit.reduction("template <typename T> T add(T a, T b) { return a + b; }", identity=0,
                                          map_code="template <typename T> T sq(T v) { return v * v; }"))
    assert str(sq.sharding_rule(x, axis=1)) == "d0 d1 -> d0; split: d0; replicated: d1"
    got = jax.jit(lambda a: sq(a, axis=1))(put(x, None, "d"))  # partial sums of squares would not combine: gathered
    np.testing.assert_allclose(np.asarray(got), (x * x).sum(1), rtol=2e-6)

    # an out tensor is an operand and a result (aliased): sharded alike, written on each device's rows
    axpy = kjit.load_inline("shard_jit_axpy", cpp_sources=sys.argv[2], jax=True,
                            functions={"axpy": "x: float32[m, n], y: float32[m, n] out, a: float64; independent(m)"})
    f = lambda a, b: axpy.jax.axpy(a, b, 2.0)
    check("out tensor, rows", f, (put(x, "d", None), put(np.ones_like(x), "d", None)), 1 + 2 * x, {}, ("d",))

    # an override reaches the partitioner: n declared independent (wrong for RMSNorm, so the result says it)
    rule = mod.rmsnorm.sharding_rule
    mod.rmsnorm.sharding_rule = rule.independent("n")
    wrong = jax.jit(rms)(put(x, None, "d"), put(w, "d"))
    assert collectives(rms, put(x, None, "d"), put(w, "d")) == {}
    assert not np.allclose(np.asarray(wrong), want, rtol=1e-3)
    mod.rmsnorm.sharding_rule = rule
    print("ok")
""")


def test_jax_partitions_kjit_calls_by_their_rules(kjit_cache_dir):
    pytest.importorskip("jax")
    env = dict(os.environ, KJIT_CACHE_DIR=str(kjit_cache_dir))
    proc = subprocess.run([sys.executable, "-c", SHARDED_JIT, os.path.join(ROOT, "examples", "rmsnorm.cc"), AXPY],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout[-2000:] + proc.stderr[-4000:]
