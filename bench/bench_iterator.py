"""kjit/iterator.h's cpu_kernel (a load_inline kernel) against kjit.elementwise and NumPy.

Target (issue: TensorIterator for C++ kernels): float32 add over 2^24 elements with
cpu_kernel from a load_inline kernel at least 90% of kjit.elementwise's add
speed, out= both, in the same run. The sweep shows 2^10 to 2^26 (every second
power), and a sum with cpu_reduce beside np.sum and kjit.reduction's.

Each case is the best of several rounds of a fixed number of calls, the variants
in a new seeded order each round.

Run: /work/main/.venv/bin/python bench/bench_iterator.py [--rounds 5]
     (--smoke: tiny sizes and one round, for the test suite: checks that every case
     runs and computes the right values; its timings mean nothing)
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_elementwise import rotate_rounds  # noqa: E402  (one timing loop for the benches)

import kjit  # noqa: E402

SOURCE = r"""
#include <kjit/iterator.h>
void add(const kjit::TensorView a, const kjit::TensorView b, kjit::TensorView c) {
  auto iter = kjit::TensorIteratorConfig().add_output(c).add_input(a).add_input(b).build();
  kjit::cpu_kernel(iter, [](float x, float y) -> float { return x + y; });
}
void sum(const kjit::TensorView x, kjit::TensorView out) {
  auto iter = kjit::TensorIteratorConfig().is_reduction(true).add_output(out).add_input(x).build();
  kjit::cpu_reduce(iter, 0.0f, [](float acc, float v) { return acc + v; });
}
"""
FUNCTIONS = {
    "add": "a: float32[n], b: float32[n], c: float32[n] out",
    "sum": "x: float32[n], out: float32[1] out",
}


def calls_for(n: int) -> int:
    return max(3, min(20000, (1 << 24) // max(n, 1) * 4))


def add_case(mod, ew_add, n: int, rounds: int) -> dict:
    a = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    b = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    outs = {k: np.empty(n, np.float32) for k in ("cpu_kernel", "elementwise", "numpy")}
    variants = {
        "cpu_kernel": lambda: mod.add(a, b, outs["cpu_kernel"]),
        "elementwise": lambda: ew_add(a, b, out=outs["elementwise"]),
        "numpy": lambda: np.add(a, b, out=outs["numpy"]),
    }
    t = {k: min(v) for k, v in rotate_rounds(variants, rounds, calls_for(n)).items()}
    for k, o in outs.items():
        np.testing.assert_array_equal(o, a + b, err_msg=k)
    return t


def sum_case(mod, ew_sum, n: int, rounds: int) -> dict:
    x = np.random.default_rng(2).random(n).astype(np.float32)
    out = np.empty(1, np.float32)
    variants = {
        "cpu_reduce": lambda: mod.sum(x, out),
        "reduction": lambda: ew_sum(x),
        "numpy": lambda: np.sum(x),
    }
    t = {k: min(v) for k, v in rotate_rounds(variants, rounds, calls_for(n)).items()}
    mod.sum(x, out)
    ref = x.astype(np.float64).sum()
    assert abs(out[0] - ref) <= 1e-4 * max(1.0, abs(ref)), (out[0], ref)
    return t


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--smoke", action="store_true")
    args = p.parse_args()
    rounds = 1 if args.smoke else args.rounds
    mod = kjit.load_inline("bench_iterator", cpp_sources=SOURCE, functions=FUNCTIONS)
    ew_add = kjit.elementwise("template <typename T> T add(T a, T b) { return a + b; }")
    ew_sum = kjit.reduction("template <typename T> T add(T a, T b) { return a + b; }", identity=0)
    print(f"kjit {kjit.__version__}, {kjit.get_num_threads()} threads")
    sizes = (10, 12) if args.smoke else (10, 12, 14, 16, 18, 20, 22, 24, 26)
    target_met = True
    print("float32 add, out= (us per call; ratio = elementwise / cpu_kernel speed)")
    for log2 in sizes:
        t = add_case(mod, ew_add, 1 << log2, rounds)
        ratio = t["elementwise"] / t["cpu_kernel"]
        print(f"  2^{log2:<2} cpu_kernel {t['cpu_kernel'] * 1e6:10.2f}  elementwise {t['elementwise'] * 1e6:10.2f}"
              f"  numpy {t['numpy'] * 1e6:10.2f}  cpu_kernel at {ratio:.2f}x of elementwise's speed")
        if log2 >= 24 and ratio < 0.9:
            target_met = False
    print("float32 sum, all axes (us per call)")
    for log2 in sizes:
        t = sum_case(mod, ew_sum, 1 << log2, rounds)
        print(f"  2^{log2:<2} cpu_reduce {t['cpu_reduce'] * 1e6:10.2f}  kjit.reduction {t['reduction'] * 1e6:10.2f}"
              f"  numpy {t['numpy'] * 1e6:10.2f}")
    if args.smoke:
        print("smoke run: every case ran and computed the right values")
    else:
        print(f"target (cpu_kernel add >= 0.9x elementwise at 2^24 and up): {'met' if target_met else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
