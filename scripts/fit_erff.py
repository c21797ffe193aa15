#!/usr/bin/env python3
"""Fits the polynomials of kjit's float erf (src/cpu/vector_math.cc,
erff_from_polynomials) and prints them as the C++ arrays there.

    .venv/bin/python scripts/fit_erff.py

Three minimax polynomials (Lawson's iteration over least squares at Chebyshev
nodes, references in mpmath at 30 digits):
- A(u), u = x^2 on |x| < 0.9: erf(x)/x - 1, degree 5;
- B(c - 2.425) on [0.9, 3.95]: log2(erfc(c)) + c^2 log2(e), degree 6, its error
  weighted by erfc(c) ln 2 (what reaches 1 - erfc);
- E(f) on [-1/2, 1/2]: 2^f, degree 5, relative.
The kernel's accuracy (1.53 ULP at most) is measured by
tests/python/test_vector_math.py, not here.
"""
import numpy as np
import mpmath

SPLIT, TOP = 0.9, 3.95
MID = (SPLIT + TOP) / 2


def nodes(lo, hi, n=1200):
    return np.cos(np.pi * (np.arange(n) + 0.5) / n) * (hi - lo) / 2 + (hi + lo) / 2


def minimax(v, ys, weight, degree, iterations=40):
    """Coefficients (lowest first) of the polynomial in v whose weighted error
    |p(v) - ys| * weight is smallest at its largest, and that error."""
    basis = np.vander(v, degree + 1, increasing=True)
    lawson = np.ones(len(v))
    for _ in range(iterations):
        w = np.sqrt(lawson) * weight
        coef, *_ = np.linalg.lstsq(basis * w[:, None], ys * w, rcond=None)
        err = np.abs(basis @ coef - ys) * weight
        lawson = lawson * err
        lawson /= lawson.sum()
    return coef, err.max()


def main():
    mpmath.mp.dps = 30
    xs = [mpmath.mpf(float(x)) for x in nodes(0, SPLIT)]
    ys = np.array([float(mpmath.erf(x) / x - 1) for x in xs])
    a, a_err = minimax(np.array([float(x * x) for x in xs]), ys, np.ones(len(xs)), 5)
    xs = [mpmath.mpf(float(x)) for x in nodes(SPLIT, TOP)]
    ys = np.array([float(mpmath.log(mpmath.erfc(x), 2) + x * x / mpmath.log(2)) for x in xs])
    weight = np.array([float(mpmath.erfc(x) * mpmath.log(2)) for x in xs])
    b, b_err = minimax(np.array([float(x) - MID for x in xs]), ys, weight, 6)
    fs = nodes(-0.5, 0.5)
    e, e_err = minimax(fs, 2.0**fs, 2.0**-fs, 5)
    print(f"// A: {a_err:.3g} relative; B: erfc within {b_err:.3g}; E: {e_err:.3g} relative")
    for name, coef in (("a", a), ("b", b), ("e", e)):
        print(f"static const std::vector<float> {name} = {{" + ", ".join(f"{np.float32(c):.9e}f" for c in coef) + "};")


if __name__ == "__main__":
    main()
