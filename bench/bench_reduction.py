"""kjit.reduction on CPU against NumPy, PyTorch and a plain C OpenMP reduction loop.

Targets (issue: reductions), every comparison in the same run:
  * sum of 2^24 float32, all axes: at least numpy.sum's and torch.sum's speed, and
    at least 85% of a C OpenMP `reduction(+:s)` loop compiled here;
  * sum over the last and over the first axis of (4096, 4096) float32: at least
    NumPy's and torch's speed each, new outputs and out= each;
  * sum of float32 from 1 element to 2^26 (every fourth power to 2^8, every second
    to 2^14, every one after): the ratios, NumPy and torch inputs;
  * argmax of 2^22 float32 (kjit.arg_reduction with NumPy's NaN rule): at least
    np.argmax's speed (torch.argmax shown);
  * everyday call forms on 100 float32 (a tuple axis, dtype=, a read-only input):
    at least np.sum's speed, through kjit's C call path (issue 38; they took the
    Python checked path, 26-70 us);
  * first call of a new reduction: cold (a new cache) and from the disk cache in a
    fresh process.

Each case is the best of several rounds of a fixed number of calls, the variants
in a new seeded order each round.

Run: /work/main/.venv/bin/python bench/bench_reduction.py [--rounds 7] [--sizes]
     (--smoke: tiny sizes and one round, for the test suite: checks that every case
     runs and computes the right values; its timings mean nothing)
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_elementwise import rotate_rounds  # noqa: E402  (one timing loop for the benches)

ADD = "template <typename T> T add(T a, T b) { return a + b; }"
ARGMAX = "template <typename T> bool gt(T a, T b) { return a > b || (a != a && b == b); }"

C_LOOP = r"""
#include <stdint.h>
float c_sum(const float* a, int64_t n) {
  float s = 0;
  #pragma omp parallel for reduction(+:s) schedule(static)
  for (int64_t i = 0; i < n; ++i) s += a[i];
  return s;
}
"""

CHILD = r"""
import json, sys, time
import numpy as np
import kjit
a = np.ones(4, np.float32)
t0 = time.perf_counter()
f = kjit.reduction(sys.argv[1], identity=0)
r = f(a)
print("RESULT " + json.dumps({"first_call_s": time.perf_counter() - t0}))
"""


def rotate(variants: dict, rounds: int, calls: int) -> dict:
    """Best time per call of each variant over `rounds`, in a new seeded order each
    round (bench_elementwise.rotate_rounds)."""
    return {k: min(v) for k, v in rotate_rounds(variants, rounds, calls).items()}


def report(title: str, t: dict) -> None:
    """One case's times and kjit's speed relative to each (an out= variant's to
    kjit's out=)."""
    print(title)
    for k, v in t.items():
        mine = t["kjit out="] if k.endswith("out=") else t["kjit"]
        print(f"  {k:>11}: {v * 1e3:8.3f} ms   kjit speed {v / mine:.2f}x of it")


def compile_c_loop(work: str):
    src, lib = os.path.join(work, "c_sum.c"), os.path.join(work, "c_sum.so")
    with open(src, "w") as f:
        f.write(C_LOOP)
    subprocess.run(["cc", "-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", src, "-o", lib], check=True)
    dll = ctypes.CDLL(lib)
    dll.c_sum.argtypes = [ctypes.c_void_p, ctypes.c_int64]
    dll.c_sum.restype = ctypes.c_float
    return dll.c_sum


def child_first_call(cache: str) -> float:
    env = dict(os.environ, KJIT_CACHE_DIR=cache)
    proc = subprocess.run([sys.executable, "-c", CHILD, ADD], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr)
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])["first_call_s"]


def check_values(rsum, torch, n: int, shape) -> None:
    """Every variant computes the right sum (the smoke run's whole point)."""
    x = np.random.default_rng(0).random(n).astype(np.float32)
    np.testing.assert_allclose(rsum(x), x.sum(dtype=np.float64), rtol=1e-4)
    m = np.random.default_rng(1).random(shape).astype(np.float32)
    for axis in (0, 1):
        np.testing.assert_allclose(rsum(m, axis=axis), m.sum(axis=axis, dtype=np.float64), rtol=1e-4)
    if torch is not None:
        tm = torch.from_numpy(m)
        assert torch.allclose(rsum(tm, axis=1), tm.sum(dim=1), rtol=1e-4)


def size_sweep(what: str, kjit_fn, numpy_fn, torch_fn, rounds: int, smoke: bool) -> None:
    """`what` of float32 from 1 element to 2^26: kjit on NumPy arrays against NumPy,
    and on torch tensors against torch (torch_fn None: without torch)."""
    print(f"{what}, size sweep (us per call; ratio > 1: kjit faster):")
    print(f"  {'n':>9} {'kjit':>9} {'numpy':>9} {'np/kjit':>8} {'kjit(t)':>9} {'torch':>9} {'torch/kjit':>10}")
    sweep = (0, 4, 8, 10, 12, 14) + tuple(range(15, 27))
    for p in (sweep[:4] if smoke else sweep):
        x = np.random.default_rng(p).random(2**p).astype(np.float32)
        calls = max(2, min(20000, 2**26 // 2**p // 8)) if not smoke else 2
        variants = {"kjit": lambda: kjit_fn(x), "numpy": lambda: numpy_fn(x)}
        if torch_fn is not None:
            import torch

            tx = torch.from_numpy(x)
            variants["kjit(t)"] = lambda: kjit_fn(tx)
            variants["torch"] = lambda: torch_fn(tx)
        t = rotate(variants, rounds, calls)
        line = f"  2^{p:<7} {t['kjit'] * 1e6:9.2f} {t['numpy'] * 1e6:9.2f} {t['numpy'] / t['kjit']:8.2f}"
        if torch_fn is not None:
            line += f" {t['kjit(t)'] * 1e6:9.2f} {t['torch'] * 1e6:9.2f} {t['torch'] / t['kjit(t)']:10.2f}"
        print(line)


def call_forms(rsum, torch, rounds: int, smoke: bool) -> bool:
    """Small calls in the forms people write (np.sum(x, axis=(0, 1)), dtype=, a
    read-only array): us per call against NumPy (and torch), and whether each ran
    through the C call path. True when every form is at least NumPy's speed."""
    x = np.arange(100, dtype=np.float32).reshape(10, 10)
    ro = x.copy()
    ro.flags.writeable = False
    forms = {
        "axis=(0, 1)": (lambda: rsum(x, axis=(0, 1)), lambda: np.sum(x, axis=(0, 1))),
        "dtype=float64": (lambda: rsum(x, dtype=np.float64), lambda: np.sum(x, dtype=np.float64)),
        "read-only, axis=1": (lambda: rsum(ro, axis=1), lambda: np.sum(ro, axis=1)),
        "axis=1": (lambda: rsum(x, axis=1), lambda: np.sum(x, axis=1)),
    }
    print("everyday call forms, 100 float32 (us per call; ratio > 1: kjit faster):")
    ok = True
    for name, (mine, theirs) in forms.items():
        before = rsum._checked_calls
        t = rotate({"kjit": mine, "numpy": theirs}, rounds, 2 if smoke else 20000)
        in_c = rsum._checked_calls == before
        print(f"  {name:>18}: kjit {t['kjit'] * 1e6:6.2f}  numpy {t['numpy'] * 1e6:6.2f}  "
              f"np/kjit {t['numpy'] / t['kjit']:5.2f}  {'C path' if in_c else 'CHECKED PATH'}")
        ok &= in_c and t["numpy"] >= t["kjit"]
    if torch is not None:
        tx = torch.from_numpy(x.copy())
        t = rotate({"kjit": lambda: rsum(tx, axis=(0, 1), dtype=torch.float64),
                    "torch": lambda: torch.sum(tx, dim=(0, 1), dtype=torch.float64)}, rounds, 2 if smoke else 20000)
        print(f"  {'torch, (0, 1), f64':>18}: kjit {t['kjit'] * 1e6:6.2f}  torch {t['torch'] * 1e6:6.2f}  "
              f"torch/kjit {t['torch'] / t['kjit']:5.2f}")
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--sizes", action="store_true", help="only the size sweep")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, one round: a test that every case runs")
    args = ap.parse_args()
    import kjit

    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        torch.set_num_threads(kjit.get_num_threads())
    rounds = 1 if args.smoke else args.rounds
    big, side = (2**12, 64) if args.smoke else (2**24, 4096)
    rsum = kjit.reduction(ADD, identity=0)
    check_values(rsum, torch, big, (side, side))
    ok = True
    print(f"kjit.reduction sum, float32, {kjit.get_num_threads()} thread(s); best of {rounds} rounds")
    if not args.sizes:
        with tempfile.TemporaryDirectory() as work:
            c_sum = compile_c_loop(work)
            x = np.random.default_rng(2).random(big).astype(np.float32)
            assert abs(c_sum(x.ctypes.data, x.size) - float(x.sum(dtype=np.float64))) <= 1e-3 * x.size
            variants = {"kjit": lambda: rsum(x), "numpy": lambda: np.sum(x), "C omp": lambda: c_sum(x.ctypes.data, x.size)}
            if torch is not None:
                tx = torch.from_numpy(x)
                variants["torch"] = lambda: torch.sum(tx)
            t = rotate(variants, rounds, 5 if not args.smoke else 2)
            report(f"sum of {big} float32, all axes:", t)
            ok &= t["numpy"] >= t["kjit"] and t["kjit"] <= t["C omp"] / 0.85
            ok &= torch is None or t["torch"] >= t["kjit"]
            m = np.random.default_rng(3).random((side, side)).astype(np.float32)
            o = np.empty(side, np.float32)
            for axis in (1, 0):
                variants = {"kjit": lambda: rsum(m, axis=axis), "numpy": lambda: m.sum(axis=axis),
                            "kjit out=": lambda: rsum(m, axis=axis, out=o),
                            "numpy out=": lambda: np.sum(m, axis=axis, out=o)}
                if torch is not None:
                    tm, to = torch.from_numpy(m), torch.from_numpy(o)
                    variants["torch"] = lambda: tm.sum(dim=axis)
                    variants["torch out="] = lambda: torch.sum(tm, dim=axis, out=to)
                t = rotate(variants, rounds, 5 if not args.smoke else 2)
                report(f"sum over axis {axis} of ({side}, {side}) float32:", t)
                ok &= all(v >= t["kjit out=" if k.endswith("out=") else "kjit"] for k, v in t.items())
    if not args.sizes:
        argmax = kjit.arg_reduction(ARGMAX)
        n = 2**12 if args.smoke else 2**22
        x = np.random.default_rng(4).random(n).astype(np.float32)
        assert argmax(x) == np.argmax(x)
        variants = {"kjit": lambda: argmax(x), "numpy": lambda: np.argmax(x)}
        if torch is not None:
            tx = torch.from_numpy(x)
            variants["torch"] = lambda: torch.argmax(tx)
        t = rotate(variants, rounds, 5 if not args.smoke else 2)
        report(f"argmax of {n} float32:", t)
        ok &= t["numpy"] >= t["kjit"]
    if not args.sizes:
        ok &= call_forms(rsum, torch, rounds, args.smoke)
    argmax = kjit.arg_reduction(ARGMAX)
    size_sweep("sum", rsum, np.sum, torch and torch.sum, rounds, args.smoke)
    size_sweep("argmax", argmax, np.argmax, torch and torch.argmax, rounds, args.smoke)
    if not args.sizes and not args.smoke:
        with tempfile.TemporaryDirectory() as cache:
            cold = child_first_call(cache)
            warm = child_first_call(cache)
        print(f"first call of a new reduction: cold {cold:.2f} s, from the disk cache {warm * 1e3:.1f} ms")
    if args.smoke:
        print("smoke run: every case ran and computed the right values")
        return 0
    print("targets " + ("met" if ok else "MISSED") + " (sum 2^24 >= numpy, torch, 85% of C omp; both axes of "
          "(4096, 4096) >= numpy, torch, new and out=; argmax 2^22 >= numpy; call forms >= numpy, in C)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
