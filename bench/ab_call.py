"""A/B of the 1-element kjit.elementwise call between two kjit trees.

The 1-element call costs about a microsecond, and one process's best time moves by
about +-0.05 us from process to process on a shared machine: a comparison of two
single runs cannot tell a 0.05 us change from noise. This script runs each tree
in fresh processes, alternating A, B, A, B, ..., and reports per case the median
of the paired differences (B - A) with a distribution-free 95% interval for it
(order statistics of the sign test), so "B is within 0.05 us of A" is a claim
the interval can support or not.

Each tree is a kjit source tree whose library is built (build/bench/libkjit.so by
default, as bench/run_all.sh builds it).

Run: .venv/bin/python bench/ab_call.py --a /path/to/base --b /path/to/main [--pairs 16]
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

# What one child process measures: its best time per case, in us.
CHILD = r"""
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


def child_env(tree: Path, library: str) -> dict:
    lib = tree / library
    if not lib.is_file():
        raise SystemExit(f"ab_call: {lib} does not exist; build that tree first (bench/run_all.sh builds it)")
    return dict(os.environ, KJIT_LIBRARY=str(lib), PYTHONPATH=str(tree / "python"))


def run_child(env: dict, calls: int, rounds: int) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, str(calls), str(rounds)], env=env, capture_output=True,
                          text=True, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"ab_call: a measuring process failed:\n{proc.stderr[-3000:]}")
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
    ap.add_argument("--pairs", type=int, default=16)
    ap.add_argument("--library", default="build/bench/libkjit.so", help="each tree's library, relative to it")
    ap.add_argument("--smoke", action="store_true", help="2 pairs of short runs, the same kjit on both sides")
    args = ap.parse_args()
    calls, rounds = 100_000, 7
    if args.smoke:
        args.pairs, calls, rounds = 2, 2000, 2
        env_a = env_b = dict(os.environ)  # whatever kjit this interpreter imports
        names = ("this interpreter's kjit", "the same")
    else:
        if args.a is None or args.b is None:
            ap.error("--a and --b name the two trees (or --smoke)")
        env_a, env_b = child_env(args.a.resolve(), args.library), child_env(args.b.resolve(), args.library)
        names = (str(args.a), str(args.b))
    print(f"A = {names[0]}\nB = {names[1]}")
    print(f"1-element float32 add, {args.pairs} pairs of fresh processes (A then B, alternating), "
          f"best of {rounds} x {calls} calls each, us per call")
    runs_a, runs_b = [], []
    for p in range(args.pairs):
        runs_a.append(run_child(env_a, calls, rounds))
        runs_b.append(run_child(env_b, calls, rounds))
        print(f"  pair {p + 1}: " + ", ".join(f"{k} {runs_a[-1][k]:.3f} / {runs_b[-1][k]:.3f}" for k in runs_a[-1]),
              flush=True)
    print(f"{'case':>12} | {'A median':>8} | {'B median':>8} | {'B - A median':>12} | 95% interval of B - A")
    for case in runs_a[0]:
        a = [r[case] for r in runs_a]
        b = [r[case] for r in runs_b]
        diffs = [y - x for x, y in zip(a, b)]
        ci = median_interval(diffs)
        ci_text = f"[{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else "(too few pairs)"
        print(f"{case:>12} | {statistics.median(a):8.3f} | {statistics.median(b):8.3f} | "
              f"{statistics.median(diffs):+12.3f} | {ci_text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
