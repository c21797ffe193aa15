"""The Python benchmark scripts run (smoke): each with its smallest settings, in a
subprocess, checking that it finishes and reports. No timing is asserted: these
catch a script that no longer runs against the current API, not a slow kjit."""

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _run(script, *args, tmp_path):
    env = dict(os.environ, KJIT_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, str(BENCH / script), *args], capture_output=True, text=True, env=env,
                          timeout=600)
    assert proc.returncode == 0, f"{script} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def test_bench_elementwise_smoke(tmp_path):
    out = _run("bench_elementwise.py", "--smoke", tmp_path=tmp_path)
    for heading in ("float32 add, 2^24 contiguous:", "broadcast (1,32,32,2) + (1024,1,1,2)",
                    "transposed input a.T + b", "1-element call, float32", "first call: cold",
                    "smoke run: every case ran and computed the right values"):
        assert heading in out, out


def test_bench_elementwise_paired_smoke(tmp_path):
    out = _run("bench_elementwise.py", "--smoke", "--paired", tmp_path=tmp_path)
    assert "paired out= calls, 3 alternating rounds" in out, out
    for size in ("2^16", "2^18", "2^20"):
        assert f"  {size}" in out and "vs numpy: kjit" in out, out


def test_bench_reduction_smoke(tmp_path):
    out = _run("bench_reduction.py", "--smoke", tmp_path=tmp_path)
    for heading in ("sum of 4096 float32, all axes:", "sum over axis 0 of (64, 64) float32:", "argmax of 4096 float32:",
                    "size sweep",
                    "smoke run: every case ran and computed the right values"):
        assert heading in out, out


def test_bench_call_overhead_smoke(tmp_path):
    out = _run("bench_call_overhead.py", "--number", "200", "--repeat", "1", tmp_path=tmp_path)
    assert "target (kjit fn within 10% of the tvm-ffi export's fn" in out, out
    assert "kjit call forms vs the positional out= call" in out, out
    assert "mod.fn vs its own stub's tvm_ffi.Function" in out, out


def test_bench_compile_smoke(tmp_path):
    out = _run("bench_compile.py", "--repeat", "1", "--fresh", "1", tmp_path=tmp_path)
    assert "target: cached kjit.load_inline in a fresh process" in out, out


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (the CUDA toolkit)")
def test_bench_cuda_compile_smoke(tmp_path):
    out = _run("bench_cuda_compile.py", "--repeat", "1", "--fresh", "1", tmp_path=tmp_path)
    assert "cold load_inline, one .cu kernel" in out, out


@pytest.mark.skipif(importlib.util.find_spec("jax_tvm_ffi") is None or importlib.util.find_spec("jax") is None,
                    reason="needs jax and jax-tvm-ffi (bench/run_all.sh installs them)")
def test_bench_jax_smoke(tmp_path):
    out = _run("bench_jax.py", "--rounds", "1", "--compiles", "1", tmp_path=tmp_path)
    assert "cold compile of a 2-function module" in out, out


@pytest.mark.parametrize("mode", [(), ("--steady",), ("--op", "sum")])
def test_bench_contention_smoke(tmp_path, mode):
    out = _run("bench_contention.py", "--smoke", "--engines", "pool", *mode, tmp_path=tmp_path)
    op = "sum" if "sum" in mode else "add"
    assert f"== {op}, load quiet, engine pool" in out and "2^16   out |" in out, out
    assert ("steady" in out) == ("--steady" in mode), out


def test_ab_trees_call_smoke(tmp_path):
    out = _run("ab_trees.py", "--smoke", tmp_path=tmp_path)
    assert "2 pairs of fresh processes" in out, out
    for case in ("numpy new", "numpy out="):
        assert f"{case} |" in out, out


def test_ab_trees_sweep_smoke(tmp_path):
    out = _run("ab_trees.py", "--smoke", "--case", "sweep", tmp_path=tmp_path)
    assert "best of 1 rounds" in out, out
    for case in ("2^10 out", "2^24 new"):
        assert f"{case} |" in out, out


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="needs jax (scripts/run installs it)")
def test_ab_trees_xla_compile_smoke(tmp_path):
    out = _run("ab_trees.py", "--smoke", "--case", "xla-compile", tmp_path=tmp_path)
    assert "without / with XLA handlers, median of 1 each" in out, out
    for figure in ("without (s)", "with (s)", "ratio"):
        assert f"{figure} |" in out, out


def test_ab_trees_median_interval():
    spec = importlib.util.spec_from_file_location("ab_trees", BENCH / "ab_trees.py")
    ab = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ab)
    assert ab.median_interval([0.1] * 5) is None  # too few pairs for a 95% sign-test interval
    diffs = [float(i) for i in range(16)]
    assert ab.median_interval(diffs) == (3.0, 12.0)  # the 4th smallest and the 4th largest of 16
    assert ab.median_interval([float(i) for i in range(6)]) == (0.0, 5.0)


def test_ab_trees_names_a_tree_without_a_library(tmp_path):
    proc = subprocess.run([sys.executable, str(BENCH / "ab_trees.py"), "--a", str(tmp_path), "--b", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert f"ab_trees: {tmp_path}/build/bench/libkjit.so does not exist; build that tree first" in proc.stderr


def test_bench_frontends_smoke(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    out = _run("bench_frontends.py", "--smoke", tmp_path=tmp_path)
    for heading in ("== torch eager: one call", "torch.compile(fullgraph=True)", "== JAX: jax.jit(mod.jax.twice)",
                    "front-end targets:", "smoke run: every case ran"):
        assert heading in out, out


def test_bench_iterator_smoke(tmp_path):
    out = _run("bench_iterator.py", "--smoke", tmp_path=tmp_path)
    for heading in ("float32 add, out=", "float32 sum, all axes", "smoke run: every case ran and computed the right values"):
        assert heading in out, out


def test_bench_expressions_smoke(tmp_path):
    out = _run("bench_expressions.py", "--sizes", "10", "--repeat", "1", "--matrix", "64,96", tmp_path=tmp_path)
    assert "| tanh-GELU | 2^10 | new |" in out and "| var (Welford, one pass) | 0 |" in out
    assert "## elementwise (ms, best of 1), bfloat16" in out  # the bfloat16 rows, checked against torch's
    assert "| kjit checked kernel (load_inline defaults) |" in out and "max error (ULP)" in out


def test_bench_sharding_smoke(tmp_path):
    pytest.importorskip("jax")
    out = _run("bench_sharding.py", "--rows", "64", "--cols", "16", "--repeat", "1", tmp_path=tmp_path)
    assert "| rows sharded, kjit's rule |" in out and "| rows sharded, everything replicated (no rule) |" in out, out
