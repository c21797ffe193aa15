"""What the signature forms of issue 39 cost: template kernels dispatched by the stub,
dtype variables and batch groups, each against the form it replaces.

1. Cold build (force_rebuild, a fresh cache folder per build, median of R builds) of
   an RMSNorm written once as `template <typename T>` and dispatched by the stub
   (`<T: float32|float64>`, and `<T: float32|float64|int32>` for a scale kernel),
   against the same kernels dispatched by hand in a plain function over
   `float32|float64[...]`. Target: the template build within 10% of the hand one.
2. Per-call time (timeit, best of R, N calls) of a no-op over two tensors:
   `float32|float64[n]` (independent unions) vs `<T: float32|float64> x: T[n],
   w: T[n]` vs a template kernel over T vs `x: float32[*batch, n]`. Target: each
   within 2% of the union form.

Run: /work/main/.venv/bin/python bench/bench_signature_forms.py [--builds R] [--number N]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import timeit

import numpy as np

import kjit

RMS_BODY = r"""
  const int64_t n = x.size(-1), rows = n == 0 ? 0 : x.numel() / n;
  for (int64_t i = 0; i < rows; ++i) {
    double ss = 0;
    for (int64_t j = 0; j < n; ++j) ss += double(x.data<T>()[i * n + j]) * x.data<T>()[i * n + j];
    const double r = 1 / std::sqrt(ss / n + eps);
    for (int64_t j = 0; j < n; ++j) y.data<T>()[i * n + j] = T(x.data<T>()[i * n + j] * r * w.data<T>()[j]);
  }
"""
HEAD = "#include <kjit/kernel.h>\n#include <cmath>\n"
RMS_TEMPLATE = HEAD + ("template <typename T> void rmsnorm(const kjit::TensorView x, const kjit::TensorView w, "
                       "kjit::TensorView y, double eps) {" + RMS_BODY + "}\n")
RMS_HAND = HEAD + ("template <typename T> void rms_t(const kjit::TensorView x, const kjit::TensorView w, "
                   "kjit::TensorView y, double eps) {" + RMS_BODY + "}\n"
                   "void rmsnorm(const kjit::TensorView x, const kjit::TensorView w, kjit::TensorView y, double eps) {\n"
                   "  if (x.dtype().bits == 64) rms_t<double>(x, w, y, eps); else rms_t<float>(x, w, y, eps);\n}\n")
SCALE_BODY = "{ for (int64_t i = 0; i < x.numel(); ++i) y.data<T>()[i] = T(x.data<T>()[i] * a); }\n"
SCALE_TEMPLATE = HEAD + ("template <typename T> void scale(const kjit::TensorView x, kjit::TensorView y, double a) "
                         + SCALE_BODY)
SCALE_HAND = HEAD + ("template <typename T> void scale_t(const kjit::TensorView x, kjit::TensorView y, double a) "
                     + SCALE_BODY + "void scale(const kjit::TensorView x, kjit::TensorView y, double a) {\n"
                     "  if (x.dtype().code == kDLInt) scale_t<int32_t>(x, y, a);\n"
                     "  else if (x.dtype().bits == 64) scale_t<double>(x, y, a); else scale_t<float>(x, y, a);\n}\n")

BUILDS = [
    ("RMSNorm, 2 types", "rmsnorm", RMS_TEMPLATE, "<T: float32|float64> x: T[*b, n], w: T[n], y: T[*b, n] return, "
     "eps: T = 1e-6", RMS_HAND, "x: float32|float64[*b, n], w: dtype(x)[n], y: dtype(x)[*b, n] return, "
     "eps: float64 = 1e-6"),
    ("scale, 3 types", "scale", SCALE_TEMPLATE, "<T: float32|float64|int32> x: T[n], y: T[n] return, a: float64",
     SCALE_HAND, "x: float32|float64|int32[n], y: dtype(x)[n] return, a: float64"),
]


def cold_build(name: str, fn: str, source: str, signature: str) -> float:
    with tempfile.TemporaryDirectory() as cache:
        start = time.perf_counter()
        kjit.load_inline(name, cpp_sources=source, functions={fn: signature}, build_directory=cache,
                         force_rebuild=True)
        return time.perf_counter() - start


def builds(rounds: int) -> None:
    print(f"cold build, median of {rounds} (s)")
    print(f"{'kernel':<18} {'template':>9} {'by hand':>9} {'ratio':>7}")
    for label, fn, t_src, t_sig, h_src, h_sig in BUILDS:
        t, h = [], []
        for r in range(rounds):  # interleaved, so a busy moment hits both
            t.append(cold_build(f"bench_tmpl_{fn}_{r}", fn, t_src, t_sig))
            h.append(cold_build(f"bench_hand_{fn}_{r}", fn, h_src, h_sig))
        tm, hm = statistics.median(t), statistics.median(h)
        print(f"{label:<18} {tm:9.3f} {hm:9.3f} {tm / hm:7.2f}")


CALLS = {
    "union": ("void f(const kjit::TensorView x, const kjit::TensorView w) {}\n", "x: float32|float64[n], "
              "w: float32|float64[n]"),
    "dtype variable": ("void f(const kjit::TensorView x, const kjit::TensorView w) {}\n",
                       "<T: float32|float64> x: T[n], w: T[n]"),
    "template over T": ("template <typename T> void f(const kjit::TensorView x, const kjit::TensorView w) {}\n",
                        "<T: float32|float64> x: T[n], w: T[n]"),
    "batch group": ("void f(const kjit::TensorView x, const kjit::TensorView w) {}\n",
                    "x: float32|float64[*b, n], w: float32|float64[n]"),
}


def calls(number: int, repeat: int) -> None:
    x, w = np.ones(4, np.float32), np.ones(4, np.float32)
    fns = {label: kjit.load_inline(f"bench_forms_{k}", cpp_sources=HEAD + src, functions={"f": sig}).f
           for k, (label, (src, sig)) in enumerate(CALLS.items())}
    best = {label: float("inf") for label in fns}
    for _ in range(repeat):  # interleaved repeats
        for label, f in fns.items():
            best[label] = min(best[label], min(timeit.repeat(lambda f=f: f(x, w), number=number, repeat=1)) / number)
    base = best["union"]
    print(f"\nper call, NumPy float32 (4,) x2, best of {repeat} x {number} (ns)")
    for label, t in best.items():
        print(f"{label:<18} {t * 1e9:7.0f} {t / base:7.3f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--builds", type=int, default=3)
    parser.add_argument("--number", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    builds(args.builds)
    calls(args.number, args.repeat)


if __name__ == "__main__":
    main()
