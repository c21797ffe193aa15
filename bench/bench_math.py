"""Math functions in kjit.elementwise's CPU loops (issue 40): the expressions people
write, side by side with PyTorch eager and NumPy in one process, and each function's
accuracy next to theirs.

1. Time (best of R runs of N calls, new outputs on every side) of tanh-GELU,
   erf-GELU, exp, SiLU, sigmoid, log1p|x|, tanh, and a clamp with two Python-scalar
   inputs, float32, at the sizes given (default 2^10, 2^16, 2^20, 2^22), on the
   threads given (default: kjit's and torch's default, 2 here). Prints ms and the
   ratios kjit/torch and kjit/NumPy. Target: kjit/torch <= 1.0 from 2^16 up.
2. Max error in ULP of float32 exp, expm1, log, log1p, sin, cos, tan, tanh, erf,
   erfc, pow against a float64 reference over random bit patterns (the whole range)
   and [-30, 30], for kjit (the library `kjit doctor` names), torch and NumPy.

Run: .venv/bin/python bench/bench_math.py [--sizes 10,16,20,22] [--repeat R]
     KJIT_VECTOR_MATH=libmvec|off compares the other libraries.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import torch
import tvm_ffi

import kjit

T = "template <typename T> T "
EXPRESSIONS = {
    # name: (kjit computation string, torch, NumPy (None: none))
    "tanh-GELU": (T + "f(T x) { return T(0.5) * x * (T(1) + std::tanh(T(0.7978845608028654) * (x + T(0.044715) * x"
                      " * x * x))); }", lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
                  lambda x: 0.5 * x * (1 + np.tanh(np.float32(0.7978845608028654) * (x + np.float32(0.044715) * x ** 3)))),
    "erf-GELU": (T + "f(T x) { return T(0.5) * x * (T(1) + std::erf(x * T(0.7071067811865476))); }",
                 torch.nn.functional.gelu, None),
    "exp": (T + "f(T x) { return std::exp(x); }", torch.exp, np.exp),
    "SiLU": (T + "f(T x) { return x / (T(1) + std::exp(-x)); }", torch.nn.functional.silu,
             lambda x: x / (1 + np.exp(-x))),
    "sigmoid": (T + "f(T x) { return T(1) / (T(1) + std::exp(-x)); }", torch.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
    "log1p|x|": (T + "f(T x) { return std::log1p(std::abs(x)); }", lambda x: torch.log1p(torch.abs(x)),
                 lambda x: np.log1p(np.abs(x))),
    "tanh": (T + "f(T x) { return std::tanh(x); }", torch.tanh, np.tanh),
    "clamp(x, -1.0, 1.0)": (T + "f(T x, T lo, T hi) { return x < lo ? lo : (x > hi ? hi : x); }",
                            lambda x: torch.clamp(x, -1.0, 1.0), lambda x: np.clip(x, -1.0, 1.0)),
}
SCALARS = {"clamp(x, -1.0, 1.0)": (-1.0, 1.0)}

ACCURACY = {
    "exp": ("std::exp(x)", np.exp, torch.exp), "expm1": ("std::expm1(x)", np.expm1, torch.expm1),
    "log": ("std::log(x)", np.log, torch.log), "log1p": ("std::log1p(x)", np.log1p, torch.log1p),
    "sin": ("std::sin(x)", np.sin, torch.sin), "cos": ("std::cos(x)", np.cos, torch.cos),
    "tan": ("std::tan(x)", np.tan, torch.tan), "tanh": ("std::tanh(x)", np.tanh, torch.tanh),
    "erf": ("std::erf(x)", None, torch.erf), "erfc": ("std::erfc(x)", None, torch.erfc),
    "pow": ("std::pow(x, y)", np.power, torch.pow),
}
REFERENCE = {"erf": np.vectorize(math.erf, otypes=[np.float64]), "erfc": np.vectorize(math.erfc, otypes=[np.float64])}


def best_ms(fn, number: int, repeat: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - start) / number)
    return best * 1e3


def speed(sizes, repeat: int) -> None:
    fns = {name: kjit.elementwise(code) for name, (code, _, _) in EXPRESSIONS.items()}
    rng = np.random.default_rng(0)
    print(f"\n## time (ms, best of {repeat}), float32, new outputs; torch threads {torch.get_num_threads()}")
    print("| expression | n | kjit | torch | NumPy | kjit/torch | kjit/NumPy |\n| --- | --- | --- | --- | --- | --- | --- |")
    for name, (_, with_torch, with_numpy) in EXPRESSIONS.items():
        for p in sizes:
            n = 1 << p
            x = rng.standard_normal(n).astype(np.float32)
            xt = torch.from_numpy(x)
            extra = SCALARS.get(name, ())
            number = max(1, min(1000, (1 << 22) // n))
            k = best_ms(lambda: fns[name](x, *extra), number, repeat)
            t = best_ms(lambda: with_torch(xt), number, repeat)
            npy = best_ms(lambda: with_numpy(x), number, repeat) if with_numpy else float("nan")
            print(f"| {name} | 2^{p} | {k:.4f} | {t:.4f} | {npy:.4f} | {k / t:.2f} | {k / npy:.2f} |")


def ulps(got, want):
    rounded = want.astype(np.float32)
    with np.errstate(all="ignore"):
        err = np.abs(got.astype(np.float64) - want) / np.spacing(np.abs(rounded)).astype(np.float64)
    same = (np.isnan(got) & np.isnan(rounded)) | (np.isinf(rounded) & (got == rounded))
    err = np.where(same, 0.0, err)
    return float(np.where(np.isnan(err), np.inf, err).max())


def accuracy() -> None:
    rng = np.random.default_rng(1)
    n = 1 << 18
    raw = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.concatenate([raw, rng.uniform(-30, 30, n).astype(np.float32)])
    y = np.roll(x, 7919)
    report = tvm_ffi.get_global_func("kjit.toolchain_report")()["vector_math"]
    print(f"\n## max error (ULP), float32, {x.size} values; kjit's vector math: {report['detail']}")
    print("| function | kjit | torch | NumPy |\n| --- | --- | --- | --- |")
    for name, (expr, with_numpy, with_torch) in ACCURACY.items():
        binary = name == "pow"
        f = kjit.elementwise(T + f"f_{name}(T x{', T y' if binary else ''}) {{ return {expr}; }}")
        args = (x, y) if binary else (x,)
        with np.errstate(all="ignore"):
            want = (REFERENCE.get(name) or with_numpy)(*(a.astype(np.float64) for a in args))
            npy = ulps(with_numpy(*args), want) if with_numpy else float("nan")
        tch = ulps(with_torch(*(torch.from_numpy(a) for a in args)).numpy(), want)
        print(f"| {name} | {ulps(f(*args), want):.2f} | {tch:.2f} | {npy:.2f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10,16,20,22", help="log2 of the element counts")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-accuracy", action="store_true")
    args = ap.parse_args()
    speed([int(s) for s in args.sizes.split(",")], args.repeat)
    if not args.no_accuracy:
        accuracy()


if __name__ == "__main__":
    main()
