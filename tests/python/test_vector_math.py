"""Math functions in generated CPU loops (docs/elementwise.md "Math functions"):
with libmvec's vector forms the loops stay vectorised, and every function stays
within its documented error bound against a float64 reference (float32) or an
80-bit one (float64), over the whole domain: subnormals, +-0, +-inf and NaN agree
with NumPy's results exactly. bench/bench_expressions.py prints the same figures next to
torch's and NumPy's."""

import math
import os
import pathlib
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import tvm_ffi
from conftest import loop_vectorised

import kjit

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the references overflow where the functions do

# name: (expression of x and y, its float64 reference)
FUNCS = {
    "exp": ("std::exp(x)", np.exp),
    "expm1": ("std::expm1(x)", np.expm1),
    "exp2": ("std::exp2(x)", np.exp2),
    "log": ("std::log(x)", np.log),
    "log1p": ("std::log1p(x)", np.log1p),
    "log2": ("std::log2(x)", np.log2),
    "log10": ("std::log10(x)", np.log10),
    "sqrt": ("std::sqrt(x)", np.sqrt),
    "sin": ("std::sin(x)", np.sin),
    "cos": ("std::cos(x)", np.cos),
    "tan": ("std::tan(x)", np.tan),
    "tanh": ("std::tanh(x)", np.tanh),
    "sinh": ("std::sinh(x)", np.sinh),
    "cosh": ("std::cosh(x)", np.cosh),
    "atan": ("std::atan(x)", np.arctan),
    "asin": ("std::asin(x)", np.arcsin),
    "acos": ("std::acos(x)", np.arccos),
    "cbrt": ("std::cbrt(x)", np.cbrt),
    "erf": ("std::erf(x)", np.vectorize(math.erf, otypes=[np.float64])),
    "erfc": ("std::erfc(x)", np.vectorize(math.erfc, otypes=[np.float64])),
    # its exp rounded to the dtype, as the formula's intermediate is (exp(89) is inf in float32)
    "sigmoid": ("T(1) / (T(1) + std::exp(-x))", None),
    "pow": ("std::pow(x, y)", np.power),
    "atan2": ("std::atan2(x, y)", np.arctan2),
    "hypot": ("std::hypot(x, y)", np.hypot),
}
BINARY = ("pow", "atan2", "hypot")
NO_WIDE_REFERENCE = ("erf", "erfc")  # math.erf is a float64 one: enough for float32 only

# docs/elementwise.md "Math functions": the bound in ULP per vector library. SLEEF's
# forms are its 1-ULP ones; of the three it gets wrong near overflow, sinh and cosh
# stay glibc's scalar calls and log1p is composed over SLEEF's log (2 ULP); float
# erf is kjit's own polynomials (2 ULP) under either library; the sigmoid formula
# adds the division's rounding to exp's error.
BOUNDS = {
    "SLEEF": {"default": 1.5, "log1p": 2, "erf": 2, "sinh": 2, "cosh": 2, "sigmoid": 3, "sqrt": 0.5},
    "libmvec": {"default": 4, "sigmoid": 5, "sqrt": 0.5},
    "": {"default": 4, "sigmoid": 5, "sqrt": 0.5},  # glibc's scalar functions
}


def library():
    """The vector math library kjit links (kjit doctor's line)."""
    report = tvm_ffi.get_global_func("kjit.toolchain_report")()["vector_math"]
    return str(report["detail"]).split(" ")[0] if report["found"] else ""


def bound(name):
    b = BOUNDS[library()]
    return b.get(name, b["default"])


def kernel_code(name):
    params = "T x, T y" if name in BINARY else "T x"
    return f"template <typename T> T vm_{name}({params}) {{ return {FUNCS[name][0]}; }}"


@pytest.fixture(scope="module")
def fns():
    return {name: kjit.elementwise(kernel_code(name)) for name in FUNCS}


def specials(dtype):
    info = np.finfo(dtype)
    v = [0.0, -0.0, np.inf, -np.inf, np.nan, info.tiny, -info.tiny, info.smallest_subnormal, -info.smallest_subnormal,
         info.tiny / 3, info.max, -info.max, 1.0, -1.0, 0.5, 2.0, 88.72, -103.9, 709.78, -745.1, 1e-30, 20.0, -20.0]
    return np.array(v, dtype)


def samples(dtype, n=1 << 17):
    """Every kind of value: random bit patterns (the whole range), the range most
    code computes in, tiny magnitudes, and the special values."""
    rng = np.random.default_rng(11)
    bits = rng.integers(0, 2 ** (8 * np.dtype(dtype).itemsize), n, dtype=np.uint64)
    raw = bits.astype(np.uint32 if dtype == np.float32 else np.uint64).view(dtype)
    common = rng.uniform(-30, 30, n).astype(dtype)
    tiny = (rng.choice([-1, 1], n) * 10.0 ** rng.uniform(-45 if dtype == np.float32 else -320, -3, n)).astype(dtype)
    return np.concatenate([raw, common, tiny, specials(dtype)])


def ulps(got, want, dtype):
    """|got - want| in units in the last place of `dtype` at `want` (a wider
    reference); 0 where both are the same non-finite value."""
    rounded = want.astype(dtype)
    spacing = np.spacing(np.abs(rounded)).astype(want.dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(got.astype(want.dtype) - want) / spacing
    same_special = (np.isnan(got) & np.isnan(rounded)) | (np.isinf(rounded) & (got == rounded))
    return np.where(same_special, 0.0, err)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_function_within_its_bound(fns, dtype):
    x = samples(dtype)
    y = np.roll(x, 7919)  # another value of every kind
    wide = np.float64 if dtype == np.float32 else np.longdouble
    worst = {}
    for name, (_, reference) in FUNCS.items():
        if dtype == np.float64 and name in NO_WIDE_REFERENCE:
            continue
        args = (x.astype(wide), y.astype(wide)) if name in BINARY else (x.astype(wide),)
        got = fns[name](*((x, y) if name in BINARY else (x,)))
        with np.errstate(all="ignore"):
            want = reference(*args) if reference else 1 / (1 + np.exp(-args[0]).astype(dtype).astype(wide))
        err = ulps(got, want, dtype)
        k = int(np.nanargmax(np.where(np.isnan(err), np.inf, err)))
        worst[name] = float(err[k])
        assert not np.isnan(err).any() and err[k] <= bound(name), (
            f"{name}({x[k]!r}{', ' + repr(y[k]) if len(args) == 2 else ''}) = {got[k]!r}, "
            f"reference {want[k]!r}: {err[k]:.2f} ULP > {bound(name)} ({library() or 'scalar libm'})")
    print(dtype.__name__, {k: round(v, 2) for k, v in worst.items()})


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_special_values_agree_with_numpy(fns, dtype):
    s = specials(dtype)
    x, y = np.repeat(s, len(s)), np.tile(s, len(s))
    for name, (_, reference) in FUNCS.items():
        if name in NO_WIDE_REFERENCE:
            continue  # NumPy has none
        with np.errstate(all="ignore"):
            want = (reference(*((x, y) if name in BINARY else (x,))) if reference
                    else 1 / (1 + np.exp(-x))).astype(dtype)
        got = fns[name](*((x, y) if name in BINARY else (x,)))
        exact = ~np.isfinite(want) | (want == 0)
        mismatch = exact & ~((np.isnan(got) & np.isnan(want)) | ((got == want) & (np.signbit(got) == np.signbit(want))))
        assert not mismatch.any(), (name, x[mismatch][:4], y[mismatch][:4], got[mismatch][:4], want[mismatch][:4])


@pytest.mark.parametrize("name", ["exp", "tanh", "pow"])
def test_the_loop_calls_the_vector_forms(fns, name, tmp_path):
    """A regression to one scalar call per element cannot pass: the kernel library
    imports the vector function ABI's symbols (_ZGVdN8v_expf, ...)."""
    if not library():
        pytest.skip("no vector math library here (kjit doctor)")
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("no nm to read the kernel's symbols")
    fns[name](*([np.ones(64, np.float32)] * (2 if name in BINARY else 1)))
    cache = pathlib.Path(os.environ["KJIT_CACHE_DIR"])
    libs = sorted(cache.glob(f"kjit_ew_vm_{name}-*/*.so"))
    assert libs, list(cache.iterdir())
    imported = " ".join(subprocess.run([nm, "-D", "--undefined-only", str(p)], capture_output=True, text=True).stdout
                        for p in libs)
    assert re.search(rf"_ZGV[bcde]N\d+v+_{name}f\b", imported), imported


def test_log1p_under_sleef_is_composed_in_the_kernel_over_the_vector_log(fns, tmp_path):
    """SLEEF's own log1p is inf near the largest finite values, so kjit composes
    log1p's vector forms from SLEEF's log inside the kernel library: local symbols
    (nothing exported that could stand in for another library's log1p), the vector
    log imported, and finfo.max's log1p finite (test_special_values covers it)."""
    if library() != "SLEEF":
        pytest.skip("log1p is composed under SLEEF only (kjit doctor)")
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("no nm to read the kernel's symbols")
    x = np.array([np.finfo(np.float32).max, 1e-30, -0.0, 3.0], np.float32)
    got = fns["log1p"](x)
    assert np.isfinite(got[0]) and got[1] == np.float32(1e-30) and np.signbit(got[2])
    cache = pathlib.Path(os.environ["KJIT_CACHE_DIR"])
    libs = sorted(cache.glob("kjit_ew_vm_log1p-*/*.so"))
    assert libs, list(cache.iterdir())

    def symbols(*flags):
        return " ".join(subprocess.run([nm, *flags, str(p)], capture_output=True, text=True).stdout for p in libs)

    local, exported, imported = symbols(), symbols("-D", "--defined-only"), symbols("-D", "--undefined-only")
    for isa in ("bN4", "cN8", "dN8", "eN16"):
        assert re.search(rf"\bt _ZGV{isa}v_log1pf\b", local) and re.search(rf"\bt _ZGV{isa}v_kjit_log1pf\b", local), local
    assert "log1p" not in exported and "_ZGV" not in exported, exported
    assert re.search(r"_ZGV[bcde]N\d+v_logf\b", imported), imported


def test_float_erf_is_kjits_own_polynomials_in_the_kernel(fns):
    """float erf's vector forms are kjit's own (vector_math.cc), local to the
    kernel library and calling no library function: the clones the vectoriser
    calls for erff are kjit_erff's, nothing is imported or exported for them, and
    the double erf still calls the library's. Values at the branch joins (0.9,
    3.95), in the exponent's range and the specials are within the bound."""
    if not library():
        pytest.skip("no vector math library here (kjit doctor)")
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("no nm to read the kernel's symbols")
    edges = np.array([0.9, np.nextafter(np.float32(0.9), np.float32(0)), 3.95, 3.9500003, 3.92, 0.5, 2.0, 1e-20,
                      np.finfo(np.float32).smallest_subnormal, 8.0, 1e30], np.float32)
    x = np.concatenate([edges, -edges, np.linspace(-5, 5, 100001, dtype=np.float32)])
    got, want = fns["erf"](x), np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64))
    err = ulps(got, want, np.float32)
    assert err.max() <= bound("erf"), (x[err.argmax()], got[err.argmax()], want[err.argmax()], err.max())
    assert (np.signbit(got) == np.signbit(x)).all() and (np.abs(got) <= 1).all()
    np.testing.assert_array_equal(fns["erf"](np.array([0.0, -0.0, np.inf, -np.inf], np.float32)), [0, -0.0, 1, -1])
    assert np.isnan(fns["erf"](np.array([np.nan], np.float32)))[0]
    fns["erf"](np.ones(64, np.float64))
    cache = pathlib.Path(os.environ["KJIT_CACHE_DIR"])
    libs = sorted(cache.glob("kjit_ew_vm_erf-*/*.so"))

    def symbols(*flags):
        return " ".join(subprocess.run([nm, *flags, str(p)], capture_output=True, text=True).stdout for p in libs)

    local, exported, imported = symbols(), symbols("-D", "--defined-only"), symbols("-D", "--undefined-only")
    for isa in ("bN4", "cN8", "dN8", "eN16"):
        assert re.search(rf"\bt _ZGV{isa}v_erff\b", local) and re.search(rf"\bt _ZGV{isa}v_kjit_erff\b", local), local
    assert "erf" not in exported and not re.search(r"_ZGV\w+_erff\b", imported), (exported, imported)
    if library() == "SLEEF":
        assert re.search(r"_ZGV[bcde]N\d+v_erf\b", imported), imported  # the double form: the library's


def test_python_scalar_inputs_keep_the_vector_loop():
    """Python scalars are loaded once before the loops (docs/elementwise.md "Math
    functions"), so a clamp with two of them takes the contiguous loop, which the
    compiler vectorises: the kept kernel source, compiled again with
    -fopt-info-vec-optimized, reports that loop vectorised."""
    clamp = kjit.elementwise("template <typename T> T vm_clamp(T x, T lo, T hi) { return x < lo ? lo : (x > hi ? hi : x); }")
    x = np.linspace(-3, 3, 1001, dtype=np.float32)
    np.testing.assert_array_equal(clamp(x, -1.0, 1.0), np.clip(x, -1.0, 1.0))
    np.testing.assert_array_equal(clamp(x[::2], np.float32(-1), 1.0), np.clip(x[::2], -1.0, 1.0))  # strided too
    [source] = [p for p in pathlib.Path(os.environ["KJIT_CACHE_DIR"]).glob("kjit_ew_vm_clamp-*/*.cc")
                if "\n  const __C __b1 = " in p.read_text()]  # loaded at the top: a Python scalar
    # the contiguous branch tests the output's and x's strides only, then its loop
    found, why = loop_vectorised(source, "    for (int64_t __k = 0; __k < __n;", after="  if (__s0 == 4 && __s1 == 4) {")
    assert found, why


@pytest.mark.parametrize("value, message", [
    ("fast", "KJIT_VECTOR_MATH='fast': expected sleef, libmvec or off (or unset: SLEEF when installed, else libmvec)"),
])
def test_an_unknown_vector_math_choice_is_a_toolchain_error(value, message):
    code = ("import numpy as np, kjit\n"
            "try:\n"
            "    kjit.elementwise('template <typename T> T e(T x) { return std::exp(x); }')(np.ones(2))\n"
            "except kjit.ToolchainError as err:\n"
            "    print(err)\n")
    env = dict(os.environ, KJIT_VECTOR_MATH=value)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout.strip() == message, (out.stdout, out.stderr)


def test_off_leaves_scalar_calls_with_the_same_values():
    code = ("import numpy as np, kjit\n"
            "x = np.linspace(-5, 5, 999, dtype=np.float32)\n"
            "y = kjit.elementwise('template <typename T> T e2(T x) { return std::tanh(x); }')(x)\n"
            "assert np.allclose(y, np.tanh(x), rtol=1e-6, atol=1e-7)\n"
            "print('ok')\n")
    env = dict(os.environ, KJIT_VECTOR_MATH="off")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout.strip() == "ok", out.stderr


def test_fit_erff_reproduces_the_kernels_coefficients():
    """scripts/fit_erff.py, run again, prints the polynomials vector_math.cc holds
    for float erf, digit for digit: the kernel's constants have a source."""
    pytest.importorskip("mpmath")
    root = pathlib.Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, str(root / "scripts" / "fit_erff.py")], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    printed = re.findall(r"static const std::vector<float> (\w) = \{([^}]*)\};", out.stdout)
    source = (root / "src" / "cpu" / "vector_math.cc").read_text()
    assert [name for name, _ in printed] == ["a", "b", "e"], out.stdout
    for name, values in printed:
        held = re.search(rf"static const std::vector<float> {name} = \{{([^}}]*)\}};", source)
        assert held, name
        assert [v.strip() for v in held.group(1).split(",")] == [v.strip() for v in values.split(",")], (name, values)
