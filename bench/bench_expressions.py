"""What people write, side by side (issue 40): elementwise expressions, reductions
that carry several values, and a fused checked kernel, in one process against
PyTorch eager, NumPy and (when installed: pip install numexpr) numexpr; and the
accuracy of the math functions next to torch's and NumPy's.

1. Elementwise, float32 and bfloat16 (--dtypes; float16 too), at the sizes given
   (default 2^10, 2^16, 2^20, 2^24), new outputs and out=: tanh-GELU, erf-GELU, SiLU, softplus, sigmoid, exp, log1p,
   clamp with two Python scalars, a multiply-add chain, a comparison-select.
   Targets: kjit/torch <= 1.0 and kjit/numexpr <= 1.0 from 2^16 up. With
   --inductor, the torch expression under torch.compile(dynamic=True) too (one
   compile per expression, Inductor's C++ for this CPU; new outputs only):
   kjit/Inductor <= 1.2. bfloat16 rows take torch tensors (NumPy and numexpr have
   no bfloat16): kjit computes in float and rounds once, torch's composite rows
   (the multiply-add chain, the select) round after each operation.
2. Reductions along each axis of a (rows, cols) float32 matrix, new outputs: var
   (kjit.reduction with a Welford accumulator), logsumexp (an online one), L2 norm
   (map x*x, post sqrt); against torch.var / torch.logsumexp / torch.linalg.norm and
   NumPy's formulas.
3. RMSNorm over (4096, 1024) float32: the checked kernel of examples/rmsnorm.cc
   (load_inline at its default flags) against torch's F.rms_norm.
4. Max error in ULP of float32 exp, expm1, log, log1p, sin, cos, tan, tanh, erf,
   erfc, pow against a float64 reference over random bit patterns (the whole range)
   and [-30, 30], for kjit (the library `kjit doctor` names), torch and NumPy.

Each time is the best of R rounds of N calls (N scaled to the size).

Run: .venv/bin/python bench/bench_expressions.py [--sizes 10,16,20,24] [--repeat R]
     [--sections elementwise,broadcast,reductions,rmsnorm,accuracy] [--inductor]
     [--dtypes float32,bfloat16]
     KJIT_VECTOR_MATH=libmvec|off compares the other vector math libraries.
"""

from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np
import torch
import tvm_ffi

import kjit

try:
    import numexpr
except ImportError:  # an optional anchor
    numexpr = None

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
T = "template <typename T> T "
C = "0.7978845608028654"
# name: (kjit computation string, Python scalars passed after x, torch, NumPy, numexpr expression)
EXPRESSIONS = {
    "tanh-GELU": (T + f"f(T x) {{ return T(0.5) * x * (T(1) + std::tanh(T({C}) * (x + T(0.044715) * x * x * x))); }}",
                  (), lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
                  lambda x: 0.5 * x * (1 + np.tanh(np.float32(C) * (x + np.float32(0.044715) * x ** 3))),
                  f"0.5 * x * (1 + tanh({C} * (x + 0.044715 * x * x * x)))"),
    "erf-GELU": (T + "f(T x) { return T(0.5) * x * (T(1) + std::erf(x * T(0.7071067811865476))); }", (),
                 torch.nn.functional.gelu, None, None),
    "SiLU": (T + "f(T x) { return x / (T(1) + std::exp(-x)); }", (), torch.nn.functional.silu,
             lambda x: x / (1 + np.exp(-x)), "x / (1 + exp(-x))"),
    "softplus": (T + "f(T x) { return x > T(20) ? x : std::log1p(std::exp(x)); }", (), torch.nn.functional.softplus,
                 lambda x: np.logaddexp(np.float32(0), x), "where(x > 20, x, log1p(exp(x)))"),
    "sigmoid": (T + "f(T x) { return T(1) / (T(1) + std::exp(-x)); }", (), torch.sigmoid,
                lambda x: 1 / (1 + np.exp(-x)), "1 / (1 + exp(-x))"),
    "exp": (T + "f(T x) { return std::exp(x); }", (), torch.exp, np.exp, "exp(x)"),
    "log1p|x|": (T + "f(T x) { return std::log1p(std::abs(x)); }", (), lambda x: torch.log1p(torch.abs(x)),
                 lambda x: np.log1p(np.abs(x)), "log1p(abs(x))"),
    "clamp(x, -1.0, 1.0)": (T + "f(T x, T lo, T hi) { return x < lo ? lo : (x > hi ? hi : x); }", (-1.0, 1.0),
                            lambda x: torch.clamp(x, -1.0, 1.0), lambda x: np.clip(x, -1.0, 1.0),
                            "where(x < -1, -1, where(x > 1, 1, x))"),
    "multiply-add chain": (T + "f(T x) { return ((x * T(1.5) + T(0.5)) * x + T(2)) * x - T(1); }", (),
                           lambda x: ((x * 1.5 + 0.5) * x + 2) * x - 1,
                           lambda x: ((x * np.float32(1.5) + np.float32(0.5)) * x + np.float32(2)) * x - np.float32(1),
                           "((x * 1.5 + 0.5) * x + 2) * x - 1"),
    "select x > 0 ? x : 0.1x": (T + "f(T x) { return x > T(0) ? x : T(0.1) * x; }", (),
                                lambda x: torch.where(x > 0, x, 0.1 * x),
                                lambda x: np.where(x > 0, x, np.float32(0.1) * x), "where(x > 0, x, 0.1 * x)"),
}

WELFORD = open(os.path.join(ROOT, "examples", "welford.h")).read()
LSE = open(os.path.join(ROOT, "examples", "logsumexp.h")).read()

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


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b == b and b > 0 else "—"


def inductor_forms():
    """Each expression's torch form under torch.compile(dynamic=True): Inductor's
    generated C++ loop, compiled once for every size."""
    import torch._dynamo

    torch._dynamo.config.cache_size_limit = 64
    return {name: torch.compile(e[2], dynamic=True) for name, e in EXPRESSIONS.items()}


def elementwise(sizes, repeat: int, inductor: bool = False, dtype: str = "float32") -> None:
    """The rows at `dtype`: float32 against every anchor; bfloat16 (torch tensors in
    and out: NumPy and numexpr have no bfloat16) against torch and Inductor only."""
    fns = {name: kjit.elementwise(e[0]) for name, e in EXPRESSIONS.items()}
    compiled = inductor_forms() if inductor else {}
    rng = np.random.default_rng(0)
    half = dtype != "float32"
    print(f"\n## elementwise (ms, best of {repeat}), {dtype}; torch threads {torch.get_num_threads()}"
          f"{'' if numexpr or half else '; numexpr not installed'}")
    print("| expression | n | output | kjit | torch | NumPy | numexpr | Inductor | kjit/torch | kjit/numexpr | "
          "kjit/Inductor |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, (_, scalars, with_torch, with_numpy, ne_expr) in EXPRESSIONS.items():
        for p in sizes:
            n = 1 << p
            x = rng.standard_normal(n).astype(np.float32)
            xt = torch.from_numpy(x).to(getattr(torch, dtype))
            if half:  # kjit takes the torch tensor; no NumPy or numexpr row
                x, with_numpy, ne_expr = xt, None, None
                torch.testing.assert_close(fns[name](x, *scalars), with_torch(xt), rtol=3e-2, atol=1e-2)  # torch rounds per op
            out, out_t = (torch.empty_like(xt) if half else np.empty_like(x)), torch.empty_like(xt)
            number = max(1, min(1000, (1 << 22) // n))
            for form in ("new", "out="):
                if form == "new":
                    k = best_ms(lambda: fns[name](x, *scalars), number, repeat)
                    t = best_ms(lambda: with_torch(xt), number, repeat)
                else:
                    k = best_ms(lambda: fns[name](x, *scalars, out=out), number, repeat)
                    t = best_ms(lambda: out_t.copy_(with_torch(xt)), number, repeat)  # torch ops here take no out=
                npy = best_ms(lambda: with_numpy(x), number, repeat) if with_numpy and form == "new" else float("nan")
                ne = float("nan")
                if numexpr is not None and ne_expr is not None:
                    kw = {} if form == "new" else {"out": out}
                    ne = best_ms(lambda: numexpr.evaluate(ne_expr, local_dict={"x": x}, **kw), number, repeat)
                ind = float("nan")
                if compiled and form == "new":
                    torch.testing.assert_close(compiled[name](xt), with_torch(xt))
                    ind = best_ms(lambda: compiled[name](xt), number, repeat)
                print(f"| {name} | 2^{p} | {form} | {k:.4f} | {t:.4f} | {npy:.4f} | {ne:.4f} | {ind:.4f} | "
                      f"{ratio(k, t)} | {ratio(k, ne)} | {ratio(k, ind)} |")


def broadcast(repeat: int) -> None:
    """(x - mean) * rstd with mean and rstd of shape (rows, 1): two inputs broadcast
    along the inner dimension, the several-broadcast block loop (docs/elementwise.md)."""
    f = kjit.elementwise(T + "norm(T x, T m, T r) { return (x - m) * r; }")
    rng = np.random.default_rng(3)
    print(f"\n## (x - mean) * rstd, mean and rstd (rows, 1), float32 (ms, best of {repeat})")
    print("| shape | output | kjit | torch | NumPy | numexpr | kjit/torch | kjit/numexpr |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for rows, cols in [(1024, 1024), (16384, 64), (64, 16384), (4096, 4096)]:
        x = rng.standard_normal((rows, cols)).astype(np.float32)
        m, r = x.mean(axis=1, keepdims=True), 1 / x.std(axis=1, keepdims=True)
        xt, mt, rt = (torch.from_numpy(a) for a in (x, m, r))
        out, out_t = np.empty_like(x), torch.empty_like(xt)
        np.testing.assert_allclose(f(x, m, r), (x - m) * r, rtol=1e-6, atol=1e-6)
        number = max(1, (1 << 22) // x.size)
        for form in ("new", "out="):
            if form == "new":
                k = best_ms(lambda: f(x, m, r), number, repeat)
                t = best_ms(lambda: (xt - mt) * rt, number, repeat)
                npy = best_ms(lambda: (x - m) * r, number, repeat)
            else:
                k = best_ms(lambda: f(x, m, r, out=out), number, repeat)
                t = best_ms(lambda: torch.mul(torch.sub(xt, mt, out=out_t), rt, out=out_t), number, repeat)
                npy = best_ms(lambda: np.multiply(np.subtract(x, m, out=out), r, out=out), number, repeat)
            ne = float("nan")
            if numexpr is not None:
                kw = {} if form == "new" else {"out": out}
                ne = best_ms(lambda: numexpr.evaluate("(x - m) * r", local_dict={"x": x, "m": m, "r": r}, **kw),
                             number, repeat)
            print(f"| ({rows}, {cols}) | {form} | {k:.4f} | {t:.4f} | {npy:.4f} | {ne:.4f} | {ratio(k, t)} | "
                  f"{ratio(k, ne)} |")


def reductions(repeat: int, rows: int, cols: int) -> None:
    var = kjit.reduction(WELFORD, accumulator="Welford<T>", identity="Welford<T>{T(0), T(0), 0}",
                         map_code="template <typename T> Welford<T> one(T x) { return {x, T(0), 1}; }",
                         post_code="template <typename T> T var(Welford<T> a, int64_t) { return a.m2 / T(a.n); }",
                         name="bench_var")
    lse = kjit.reduction(LSE, accumulator="Lse<T>", identity="Lse<T>{-std::numeric_limits<T>::infinity(), T(0)}",
                         map_code="template <typename T> Lse<T> one(T x) { return {x, T(1)}; }",
                         post_code="template <typename T> T lse(Lse<T> a, int64_t) { return a.max + std::log(a.sum); }",
                         name="bench_lse")
    l2 = kjit.reduction("template <typename T> T add(T a, T b) { return a + b; }", identity=0,
                        map_code="template <typename T> T sq(T x) { return x * x; }",
                        post_code="#include <cmath>\ntemplate <typename T> T root(T s, int64_t) { return std::sqrt(s); }",
                        name="bench_l2")
    x = np.random.default_rng(1).standard_normal((rows, cols)).astype(np.float32)
    xt = torch.from_numpy(x)

    def np_lse(a, axis):
        m = a.max(axis=axis, keepdims=True)
        return (m + np.log(np.exp(a - m).sum(axis=axis, keepdims=True))).squeeze(axis)

    cases = {
        "var (Welford, one pass)": (var, lambda a: torch.var(xt, a, correction=0), lambda a: np.var(x, axis=a)),
        "logsumexp (online)": (lse, lambda a: torch.logsumexp(xt, a), lambda a: np_lse(x, a)),
        "L2 norm": (l2, lambda a: torch.linalg.norm(xt, dim=a), lambda a: np.linalg.norm(x, axis=a)),
    }
    print(f"\n## reductions of ({rows}, {cols}) float32 (ms, best of {repeat}), new outputs")
    print("| reduction | axis | kjit | torch | NumPy | kjit/torch | kjit/NumPy |\n| --- | --- | --- | --- | --- | --- | --- |")
    for name, (f, with_torch, with_numpy) in cases.items():
        for axis in (1, 0):
            np.testing.assert_allclose(f(x, axis=axis), with_numpy(axis), rtol=2e-3, atol=1e-4)
            k = best_ms(lambda: f(x, axis=axis), 5, repeat)
            t = best_ms(lambda: with_torch(axis), 5, repeat)
            npy = best_ms(lambda: with_numpy(axis), 5, repeat)
            print(f"| {name} | {axis} | {k:.3f} | {t:.3f} | {npy:.3f} | {ratio(k, t)} | {ratio(k, npy)} |")


def rmsnorm(repeat: int) -> None:
    with open(os.path.join(ROOT, "examples", "rmsnorm.cc")) as f:
        mod = kjit.load_inline("bench_rmsnorm", cpp_sources=f.read())
    x = np.random.default_rng(2).standard_normal((4096, 1024)).astype(np.float32)
    w = np.linspace(0.5, 1.5, 1024, dtype=np.float32)
    xt, wt = torch.from_numpy(x), torch.from_numpy(w)
    k = best_ms(lambda: mod.rmsnorm(x, w), 5, repeat)
    t = best_ms(lambda: torch.nn.functional.rms_norm(xt, (1024,), wt, eps=1e-6), 5, repeat)
    print(f"\n## RMSNorm (4096, 1024) float32 (ms; the kernel is one-threaded, torch {torch.get_num_threads()} threads)")
    print(f"| kjit checked kernel (load_inline defaults) | {k:.3f} |\n| torch F.rms_norm | {t:.3f} |\n| ratio | "
          f"{ratio(k, t)} |")


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
            got = ulps(f(*args), want)
        print(f"| {name} | {got:.2f} | {tch:.2f} | {npy:.2f} |")


def gelu_accuracy() -> None:
    """erf-GELU as written, 0.5 x (1 + erf(x / sqrt 2)), against the same formula in
    float64 over [-3, 6] (below -3 the formula itself cancels): kjit with std::erf,
    torch's F.gelu (whose vector kernel takes erf from a short polynomial with an
    absolute error near 1.5e-7)."""
    x = np.linspace(-3, 6, 1 << 18).astype(np.float32)
    c = np.float32(0.7071067811865476)
    erf64 = np.vectorize(math.erf, otypes=[np.float64])
    want = 0.5 * x.astype(np.float64) * (1 + erf64(x.astype(np.float64) * c))
    f = kjit.elementwise(EXPRESSIONS["erf-GELU"][0])
    print("\n## erf-GELU, float32 over [-3, 6]: error in ULP against the formula in float64")
    print("| | max | mean |\n| --- | --- | --- |")
    for name, got in (("kjit (std::erf)", f(x)), ("torch F.gelu", torch.nn.functional.gelu(torch.from_numpy(x)).numpy())):
        err = np.abs(got.astype(np.float64) - want) / np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
        print(f"| {name} | {err.max():.1f} | {err.mean():.2f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10,16,20,24", help="log2 of the element counts")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--sections", default="elementwise,broadcast,reductions,rmsnorm,accuracy")
    ap.add_argument("--matrix", default="4096,4096", help="rows,cols of the reductions' input")
    ap.add_argument("--inductor", action="store_true", help="add torch.compile's Inductor code to the elementwise rows")
    ap.add_argument("--dtypes", default="float32,bfloat16", help="the elementwise rows' dtypes (float32, bfloat16, float16)")
    args = ap.parse_args()
    sections = set(args.sections.split(","))
    if "elementwise" in sections:
        for dtype in args.dtypes.split(","):
            elementwise([int(s) for s in args.sizes.split(",")], args.repeat, args.inductor, dtype)
    if "broadcast" in sections:
        broadcast(args.repeat)
    if "reductions" in sections:
        rows, cols = (int(v) for v in args.matrix.split(","))
        reductions(args.repeat, rows, cols)
    if "rmsnorm" in sections:
        rmsnorm(args.repeat)
    if "accuracy" in sections:
        accuracy()
        gelu_accuracy()


if __name__ == "__main__":
    main()
