"""A/B of one measurement between two kjit trees, in alternating fresh processes.

Cases (--case):
  call         the 1-element kjit.elementwise call (NumPy and torch inputs, new
               output and out=), best time per call in us;
  sweep        float32 add at 2^10, 2^12, ..., 2^24 elements, out= and a new
               output, NumPy inputs, the machine's threads: best time per call in
               us (the quiet size sweep's figures, for "unchanged within 5%");
  xla-compile  the cold compile of bench_jax.py's 2-function module without and
               with XLA FFI handlers (load_inline(jax=...), force_rebuild), median
               of 3 each in s, and their ratio.

One process's figure moves from process to process on a shared machine by about
the size of the changes these cases must judge (+-0.05 us for the call, +-20%
for a compile): two single runs cannot tell such a change from noise. This
script runs each tree in fresh processes, alternating A, B, A, B, ..., and
reports per figure the median of the paired differences (B - A) with a
distribution-free 95% interval for it (order statistics of the sign test), so
"B is within 0.05 us of A" is a claim the interval can support or not.

Each tree is a kjit source tree whose library is built (build/bench/libkjit.so by
default, as bench/run_all.sh builds it).

Run: .venv/bin/python bench/ab_trees.py --a /path/to/base --b /path/to/main [--case call] [--pairs 16]
     (--smoke: two pairs of short runs, both sides the kjit this interpreter imports, for the tests)
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

# What one child process measures for --case call: its best time per case, in us.
CALL_CHILD = r"""
import json, sys, time
import numpy as np
import kjit
calls, rounds = int(sys.argv[1]), int(sys.argv[2])
add = kjit.elementwise("template <typename T> T add(T a, T b) { return a + b; }")
a, c = np.ones(1, np.float32), np.empty(1, np.float32)
cases = {"numpy new": lambda: add(a, a), "numpy out=": lambda: add(a, a, out=c)}
try:
    import torch
except ImportError:
    torch = None
if torch is not None:
    ta, tc = torch.ones(1), torch.empty(1)
    cases.update({"torch new": lambda: add(ta, ta), "torch out=": lambda: add(ta, ta, out=tc)})
best = {}
for name, f in cases.items():
    assert float(f().reshape(-1)[0]) == 2.0, name
    for _ in range(1000):
        f()
    t = 1e9
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            f()
        t = min(t, (time.perf_counter() - t0) / calls)
    best[name] = t * 1e6
print(json.dumps(best))
"""

# --case sweep: float32 add over the size range, best of rounds, each round about
# 20 ms of calls.
SWEEP_CHILD = r"""
import json, sys, time
import numpy as np
import kjit
rounds = int(sys.argv[1])
add = kjit.elementwise("template <typename T> T add(T a, T b) { return a + b; }")
best = {}
for log2 in range(10, 25, 2):
    n = 1 << log2
    a, b, c = (np.random.default_rng(log2).random(n, dtype=np.float32) for _ in range(3))
    for name, f in ((f"2^{log2} out", lambda: add(a, b, out=c)), (f"2^{log2} new", lambda: add(a, b))):
        f()
        t0 = time.perf_counter()
        f()
        calls = max(1, min(20000, int(0.02 / max(time.perf_counter() - t0, 1e-7))))
        t = 1e9
        for _ in range(rounds):
            t0 = time.perf_counter()
            for _ in range(calls):
                f()
            t = min(t, (time.perf_counter() - t0) / calls)
        best[name] = t * 1e6
print(json.dumps(best))
"""

# --case xla-compile: bench_jax.py's module, compiled cold without and with XLA
# handlers (alternating), after one compile that imports jax and warms the toolchain.
XLA_COMPILE_CHILD = r"""
import json, statistics, sys, tempfile, time
import kjit
sys.path.insert(0, sys.argv[-1])  # bench/
from bench_jax import KJIT_SRC
build_dir = tempfile.mkdtemp(prefix="kjit-ab-xla-")
kjit.load_inline("ab_warm", cpp_sources=KJIT_SRC, jax=True, build_directory=build_dir)
times = {False: [], True: []}
for r in range(int(sys.argv[1])):
    for jax in ((False, True) if r % 2 == 0 else (True, False)):
        t0 = time.perf_counter()
        kjit.load_inline("ab_xla", cpp_sources=KJIT_SRC, jax=jax, force_rebuild=True, build_directory=build_dir)
        times[jax].append(time.perf_counter() - t0)
without, with_ = statistics.median(times[False]), statistics.median(times[True])
print(json.dumps({"without (s)": without, "with (s)": with_, "ratio": with_ / without}))
"""

# Per case: the child's source, its arguments (normal, smoke; bench/ follows them)
# and what it measures.
CASES = {
    "call": (CALL_CHILD, ((100_000, 7), (2000, 2)), "1-element float32 add, best of {1} x {0} calls each, us per call"),
    "sweep": (SWEEP_CHILD, ((7,), (1,)), "float32 add, NumPy inputs, best of {0} rounds of ~20 ms each, us per call"),
    "xla-compile": (XLA_COMPILE_CHILD, ((3,), (1,)),
                    "cold compile of a 2-function module without / with XLA handlers, median of {0} each"),
}


def child_env(tree: Path, library: str) -> dict:
    lib = tree / library
    if not lib.is_file():
        raise SystemExit(f"ab_trees: {lib} does not exist; build that tree first (bench/run_all.sh builds it)")
    return dict(os.environ, KJIT_LIBRARY=str(lib), PYTHONPATH=str(tree / "python"))


def run_child(child: str, env: dict, args: tuple) -> dict:
    argv = [sys.executable, "-c", child, *map(str, args), str(Path(__file__).resolve().parent)]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"ab_trees: a measuring process failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def median_interval(diffs: list) -> tuple:
    """The sign test's 95% interval for the median of `diffs`: the k-th smallest
    and k-th largest, with k the largest rank whose two-sided binomial tail stays
    within 5%. None when there are too few pairs for one (fewer than 6)."""
    n, d = len(diffs), sorted(diffs)
    k = 0
    for j in range(1, n // 2 + 1):
        tail = sum(math.comb(n, i) for i in range(j)) / 2**n  # P(X < j), X ~ Binomial(n, 1/2)
        if 2 * tail <= 0.05:
            k = j
    return (d[k - 1], d[n - k]) if k > 0 else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", type=Path, help="tree A (the reference)")
    ap.add_argument("--b", type=Path, help="tree B (the change)")
    ap.add_argument("--case", choices=sorted(CASES), default="call", help="what to measure (see above)")
    ap.add_argument("--pairs", type=int, default=16)
    ap.add_argument("--library", default="build/bench/libkjit.so", help="each tree's library, relative to it")
    ap.add_argument("--smoke", action="store_true", help="2 pairs of short runs, the same kjit on both sides")
    args = ap.parse_args()
    child, (child_args, smoke_args), unit = CASES[args.case]
    if args.smoke:
        args.pairs, child_args = 2, smoke_args
        env_a = env_b = dict(os.environ)  # whatever kjit this interpreter imports
        names = ("this interpreter's kjit", "the same")
    else:
        if args.a is None or args.b is None:
            ap.error("--a and --b name the two trees (or --smoke)")
        env_a, env_b = child_env(args.a.resolve(), args.library), child_env(args.b.resolve(), args.library)
        names = (str(args.a), str(args.b))
    print(f"A = {names[0]}\nB = {names[1]}")
    print(f"{args.pairs} pairs of fresh processes (A then B, alternating); " + unit.format(*child_args))
    runs_a, runs_b = [], []
    for p in range(args.pairs):
        runs_a.append(run_child(child, env_a, child_args))
        runs_b.append(run_child(child, env_b, child_args))
        print(f"  pair {p + 1}: " + ", ".join(f"{k} {runs_a[-1][k]:.3f} / {runs_b[-1][k]:.3f}" for k in runs_a[-1]),
              flush=True)
    print(f"{'case':>12} | {'A median':>8} | {'B median':>8} | {'B / A':>6} | {'B - A median':>12} | "
          "95% interval of B - A")
    for case in runs_a[0]:
        a = [r[case] for r in runs_a]
        b = [r[case] for r in runs_b]
        diffs = [y - x for x, y in zip(a, b)]
        ci = median_interval(diffs)
        ci_text = f"[{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else "(too few pairs)"
        ratio = statistics.median(b) / statistics.median(a)
        print(f"{case:>12} | {statistics.median(a):8.3f} | {statistics.median(b):8.3f} | {ratio:6.3f} | "
              f"{statistics.median(diffs):+12.3f} | {ci_text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
