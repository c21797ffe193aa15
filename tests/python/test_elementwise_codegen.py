"""kjit.elementwise regressions of issue 15 (classes 1, 2, 6, 7, 8, 10) and issue 12
(elementwise sizes that overflow, user exceptions): one test per class, CPU."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kjit
from conftest import loop_vectorised

ml_dtypes = pytest.importorskip("ml_dtypes")

# Every identifier the generated CPU and CUDA code uses, and C/C++ standard names.
_GENERATED = ["k", "n", "j", "q", "i", "u", "e", "V", "r", "r0", "d0", "s0", "ex", "buf", "data", "strides", "extra",
              "C", "ld", "st", "kBlock", "start", "remaining", "off", "oc", "sc", "in0", "out0", "vec_t", "v0", "w0",
              "kjit_ew", "kjit_ew_kernel", "kjit_float16", "float16_bits", "float16_value", "bfloat16_value",
              "float16_float", "bfloat16_float", "to_float16_bits", "to_bfloat16_bits", "float_bits", "bits_float",
              "kjit_complex", "kjit_ptrs", "kjit_extra", "kjit_unrolled", "kjit_user_code", "KJIT_WORK", "bb1", "q1",
              "filled", "block", "m", "v"]
_STANDARD = ["sin", "exp", "abs", "div", "max", "min", "swap", "move", "forward", "get", "tuple", "complex", "size_t",
             "int64_t", "uintptr_t", "memcpy", "malloc", "printf", "std", "main", "_mm_sfence", "declval", "real"]


@pytest.mark.parametrize("names", [_GENERATED, _STANDARD], ids=["generated", "standard"])
def test_any_entry_name_compiles_and_is_called(names):
    """Class 1: the generated code's names cannot clash with the entry's."""
    x = np.arange(4.0)
    for name in names:
        f = kjit.elementwise(f"template <typename T> T {name}(T a, T b) {{ return a * b + T(1); }}")
        assert f.name == name
        np.testing.assert_array_equal(f(x, x), x * x + 1, err_msg=name)


_MATH_UNARY = ["sin", "exp", "sqrt", "floor", "fabs"]
_MATH_BINARY = ["remainder", "fmod", "pow", "fmax", "hypot", "atan2", "copysign"]


def test_user_functions_named_like_math_functions_are_called():
    """Class 2: a user's `sin` is the one called, not <cmath>'s."""
    x = np.array([0.25, 2.0, 9.0])
    for name in _MATH_UNARY:
        f = kjit.elementwise(f"template <typename T> T {name}(T a) {{ return a + 100; }}")
        np.testing.assert_array_equal(f(x), x + 100, err_msg=name)
    for name in _MATH_BINARY:
        f = kjit.elementwise(f"template <typename T> T {name}(T a, T b) {{ return a - b + 100; }}")
        np.testing.assert_array_equal(f(x, x), np.full(3, 100.0), err_msg=name)
    absf = kjit.elementwise("template <typename T> T abs(T a) { return a + 100; }")
    for dtype in (np.float32, np.int32):
        a = np.array([-3, 4], dtype)
        np.testing.assert_array_equal(absf(a), a + 100)
    div = kjit.elementwise("template <typename T> T div(T a, T b) { return a * 10 + b; }")
    np.testing.assert_array_equal(div(np.array([7, 9], np.int32), np.int32(2)), [72, 92])
    # Unqualified calls inside the user's code find the user's function too.
    user = kjit.elementwise("template <typename T> T sqrt(T a) { return a; }\n"
                            "template <typename T> T twice_root(T a) { return sqrt(a) * 2; }")
    np.testing.assert_array_equal(user(np.array([9.0])), [18.0])


def test_includes_in_the_code_string_stay_at_global_scope():
    f = kjit.elementwise("#include <algorithm>\n#include <cmath>\n"
                         "template <typename T> T clip1(T a) { return std::min(std::max(a, T(-1)), T(1)); }")
    np.testing.assert_array_equal(f(np.array([-3.0, 0.5, 7.0])), [-1.0, 0.5, 1.0])


@pytest.mark.parametrize("value", [
    ml_dtypes.bfloat16(12.3125), np.float16(12.3125), np.float32(12.3125), np.float64(12.3125), np.int8(12),
    np.uint64(12), np.bool_(True), np.complex64(1 + 2j), np.complex128(3 - 1j), np.array(12.3125),
    np.array(12.3125, ml_dtypes.bfloat16), 12.3125, 12, True,
], ids=repr)
def test_operands_passed_by_description_outlive_the_call(value):
    """Class 6: NumPy scalars (incl. bfloat16, passed by address), 0-d arrays and
    Python scalars give the value NumPy computes."""
    add = kjit.elementwise("template <typename T> T add(T a, T b) { return a + b; }")
    x = np.array([1.0, -6.5], dtype=ml_dtypes.bfloat16)
    for _ in range(3):  # garbage in freed memory would show within a few calls
        np.asarray(np.arange(64.0) * 1e9)  # reuse the freed block, if any
        got = add(x, value)
        np.testing.assert_array_equal(got, np.add(x, value).astype(got.dtype))
    ro = np.array([2.0, 4.0], ml_dtypes.bfloat16)
    ro.flags.writeable = False
    np.testing.assert_array_equal(add(ro, ml_dtypes.bfloat16(0.5)), [2.5, 4.5])


def _may_raise_overlap(f, a, b, out):
    try:
        f(a, b, out=out)
    except ValueError as err:
        assert "overlaps" in str(err)
        return True
    return False


def test_no_false_overlap_errors():
    """Class 7: outputs that share no element with an input run."""
    add = kjit.elementwise("template <typename T> T add(T a, T b) { return a + b; }")
    x = np.arange(10.0)
    add(x[1::2], 1.0, out=x[::2])
    np.testing.assert_array_equal(x[::2], [2.0, 4.0, 6.0, 8.0, 10.0])
    m = np.arange(16.0).reshape(4, 4)
    add(m[:, :2], 1.0, out=m[:, 2:])
    np.testing.assert_array_equal(m[:, 2:], m[:, :2] + 1)
    z = np.array([1 + 2j, 3 + 4j])
    add(z.imag, 10.0, out=z.real)
    np.testing.assert_array_equal(z, [12 + 2j, 14 + 4j])
    y = np.arange(6.0)
    add(y, 1.0, out=y)  # exact in place stays allowed
    np.testing.assert_array_equal(y, np.arange(6.0) + 1)
    with pytest.raises(ValueError, match=r"out\[0\] partially overlaps input #0"):
        add(y[1:], y[1:], out=y[:-1])


def test_overlap_agrees_with_numpy_shares_memory():
    """Class 7, as NumPy's test_mem_overlap: random views of one buffer. kjit
    refuses exactly when np.shares_memory says an element is shared, unless the
    output is the input itself."""
    add = kjit.elementwise("template <typename T> T add(T a, T b) { return a + b; }")
    rng = np.random.default_rng(7)
    base = np.zeros(400, np.float64)
    outcomes = set()
    for _ in range(300):
        shape = tuple(int(s) for s in rng.integers(1, 5, size=rng.integers(1, 3)))
        views = []
        for _ in range(2):
            step = [int(s) for s in rng.choice([-3, -2, -1, 1, 2, 3], size=len(shape))]
            start = int(rng.integers(100, 300))
            strides = tuple(st * 8 * m for st, m in zip(step, (7, 1)[:len(shape)][::-1] if len(shape) == 2 else (1,)))
            views.append(np.lib.stride_tricks.as_strided(base[start:], shape, strides))
        a, out = views
        same_start = a.__array_interface__["data"][0] == out.__array_interface__["data"][0]
        identical = same_start and all(sa == so for sa, so, n in zip(a.strides, out.strides, shape) if n > 1)
        refused = _may_raise_overlap(add, a, 0.0, out)
        assert refused == (np.shares_memory(a, out) and not identical), (shape, a.strides, out.strides)
        outcomes.add((refused, np.may_share_memory(a, out)))
    assert outcomes == {(True, True), (False, True), (False, False)}  # refused; bounds meet, no element shared; apart


def test_single_output_by_reference_and_several_by_return():
    """Class 8: both forms for any output count."""
    ref1 = kjit.elementwise("template <typename T> void neg(T a, T& out) { out = -a; }", num_outputs=1)
    np.testing.assert_array_equal(ref1(np.arange(3.0)), [0.0, -1.0, -2.0])
    o = np.empty(3)
    ref1(np.arange(3.0), out=o)
    np.testing.assert_array_equal(o, [0.0, -1.0, -2.0])
    ret2 = kjit.elementwise("#include <utility>\n"
                            "template <typename T> std::pair<T, T> sd(T a, T b) { return {a + b, a - b}; }",
                            num_outputs=2)
    s, d = ret2(np.array([5, 7]), np.array([1, 2]))
    assert s.tolist() == [6, 9] and d.tolist() == [4, 5]
    ref3 = kjit.elementwise("template <typename T> void three(T a, T& x, T& y, T& z) { x = a; y = 2 * a; z = 3 * a; }",
                            num_outputs=3)
    assert [r.tolist() for r in ref3(np.array([1.0, 2.0]))] == [[1, 2], [2, 4], [3, 6]]
    # void without an output reference: named before any compile
    with pytest.raises(TypeError, match=r"bad\(a\) takes 1 argument: .*then its 1 output by reference; this call "
                                        r"passes 1 input and 0 extra arguments"):
        kjit.elementwise("template <typename T> void bad(T a) {}")(np.arange(2.0))
    with pytest.raises(kjit.CompileError, match="the entry function must take the inputs and extra scalars"):
        kjit.elementwise("template <typename T> void bad(T a, int* p) {}")(np.arange(2.0))


def test_extra_scalars_keep_their_type():
    """Class 10: extras travel as bool/int64/float64 (complex: the compute type) and
    convert to the entry's declared parameter type."""
    scale = kjit.elementwise("template <typename T> T scale(T x, double s) { return x * s; }")
    got = scale(np.array([3, -3], np.int32), s=2.5)
    assert got.dtype == np.int32 and got.tolist() == [7, -7]
    big = kjit.elementwise("template <typename T> T big(T x, long long s) { return x + T(s % 1000); }")
    assert big(np.array([1.0]), s=2**62 + 7).tolist() == [1.0 + (2**62 + 7) % 1000]
    with pytest.raises(TypeError, match=r"scale: extra argument 's' is complex \(\(2\+1j\)\) but the kernel computes "
                                        r"in float64, a real type: its imaginary part would be lost"):
        scale(np.array([1.0]), s=2 + 1j)
    with pytest.raises(TypeError, match="extra argument 's' is complex"):
        scale(np.array([1], np.int32), s=np.complex64(1j))


def test_extra_complex_to_a_real_kernel_from_cpp_is_a_type_error():
    """The engine's own check (C++ callers and the call functions): TypeError naming the position."""
    import tvm_ffi  # noqa: PLC0415

    from kjit._lib import api  # noqa: PLC0415

    eid, _ = api.ew_create("template <typename T> T f(T x, T s) { return x * s; }", "", 1, "", False)
    with pytest.raises(TypeError, match=r"f: extra argument #0 is complex \(1.000000\+2.000000j\) but the kernel "
                                        "computes in float64, a real type"):
        api.ew_run(eid, 0, 1, 1, tvm_ffi.from_dlpack(np.ones(2)), tvm_ffi.from_dlpack(np.ones(2)), [1.0, 2.0])
    api.ew_free(eid)


def _run(code: str):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)


def test_sizes_that_overflow_are_value_errors_and_huge_ones_memory_errors():
    """Issue 12: a broadcast of zero-stride views to 2^60 elements, whose size in
    bytes wraps, is a ValueError naming the shape; a huge valid size a
    MemoryError; the process lives (subprocess)."""
    r = _run("""
        import numpy as np, kjit
        add = kjit.elementwise("template <typename T> T add(T a, T b) { return a + b; }")
        a = np.broadcast_to(np.float32(1), (2**60,))
        for call in (lambda: add(a, a), lambda: add(a, a, out=np.empty(1, np.float32))):
            try:
                call()
            except ValueError as e:
                print("ValueError:", e)
        b = np.broadcast_to(np.float32(1), (2**44,))
        try:
            add(b, b)
        except MemoryError as e:
            print("MemoryError")
        print("alive")
    """)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == ("ValueError: add: the broadcast shape (1152921504606846976,) has too many elements: at 4 "
                        "bytes each, its size in bits overflows int64 (at most 2^60 bytes)")
    assert lines[1].startswith("ValueError: add: the broadcast shape (1152921504606846976,)")
    assert lines[2:] == ["MemoryError", "alive"]


def test_huge_output_allocated_by_kjit_is_a_memory_error():
    torch = pytest.importorskip("torch")
    r = _run("""
        import torch, kjit
        add = kjit.elementwise("template <typename T> T add(T a, T b) { return a + b; }")
        t = torch.ones(1).expand(2**44)
        try:
            add(t, t)
        except MemoryError as e:
            print(e)
        print("alive")
    """)
    del torch
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["kjit.elementwise: cannot allocate 70368744177664 bytes for an output of shape "
                                     "(17592186044416,)", "alive"]


_THROWS = """
#include <new>
#include <stdexcept>
template <typename T> T f(T a) {
  if (a == T(KIND)) {
    if (KIND == 1) throw 42;
    if (KIND == 2) throw std::invalid_argument("a is 2");
    if (KIND == 3) throw std::out_of_range("a is 3");
    if (KIND == 4) throw std::bad_alloc();
    throw std::runtime_error("a is 5");
  }
  return a;
}
"""


@pytest.mark.parametrize("kind,exc,message", [
    (1, RuntimeError, "^f: the code threw an exception that is not a std::exception$"),
    (2, ValueError, "^f: a is 2$"), (3, IndexError, "^f: a is 3$"), (4, MemoryError, "^f: std::bad_alloc$"),
    (5, RuntimeError, "^f: a is 5$"),
])
@pytest.mark.parametrize("n", [16, 1 << 20], ids=["one_thread", "pool"])
def test_user_exceptions_map_like_checked_kernels(kind, exc, message, n):
    """Issue 12: what the entry throws, also on a pool worker (the element sits in
    the last chunk), reaches the caller as the checked kernels' table says."""
    kjit.set_num_threads(2)
    try:
        f = kjit.elementwise(_THROWS.replace("KIND", str(kind)))
        x = np.zeros(n)
        x[-1] = kind
        with pytest.raises(exc, match=message):
            f(x)
        np.testing.assert_array_equal(f(np.zeros(n)), np.zeros(n))  # the pool still works
    finally:
        kjit.set_num_threads(0)


def _last_level_cache_bytes() -> int:
    """cpu0's largest data cache from sysfs (as loop_driver reads it), 64 MiB when unknown."""
    best = 0
    for index in range(8):
        base = f"/sys/devices/system/cpu/cpu0/cache/index{index}/"
        try:
            with open(base + "type") as t, open(base + "size") as s:
                kind, size = t.read().strip(), s.read().strip()
        except OSError:
            continue
        if kind != "Instruction" and size[:-1].isdigit():
            best = max(best, int(size[:-1]) * {"K": 1 << 10, "M": 1 << 20}.get(size[-1], 0))
    return best or 64 << 20


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.complex128])
def test_streamed_runs_write_every_element(dtype, threads):
    """Operands past the last-level cache: runs of 4 MB of output or more go through
    the kernel's non-temporal store path (256-byte blocks after a head that aligns
    the output to 64 bytes, then a tail). The output starts 1 element past an
    aligned address and the length is no multiple of a block, so head, blocks and
    tail all run."""
    item = np.dtype(dtype).itemsize
    n = max(2 * _last_level_cache_bytes() // (3 * item), (4 << 20) // item) + 37
    a = (np.arange(n) % 251).astype(dtype)
    b = (np.arange(n)[::-1] % 7).astype(dtype)
    if dtype == np.complex128:
        b = b * 1j + 1
    out = np.empty(n + 1, dtype)[1:]
    kjit.set_num_threads(threads)
    try:
        add = kjit.elementwise("template <typename T> T add(T a, T b) { return a + b; }")
        add(a, b, out=out)
        np.testing.assert_array_equal(out, a + b)
        np.testing.assert_array_equal(add(a, b), a + b)
    finally:
        kjit.set_num_threads(0)


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint16, np.int64, np.float16, np.float32, np.float64,
                                   np.complex64, np.complex128])
def test_several_broadcast_inputs_take_vector_loops_with_numpys_values(dtype):
    """Two or more inputs broadcast along the inner dimension ((m, 1) beside
    (m, n)). With up to three tensor inputs each set of broadcast ones has a loop
    that loads their values once; with more, the kernel copies each broadcast
    value into a block and runs all-contiguous blocks of 256 elements
    (docs/elementwise.md). Rows around the block size (a partial last block, one
    element, none), the broadcast inputs in every position, a strided output (the
    generic loop), a Python scalar among the inputs and a mixed-dtype call."""
    f = kjit.elementwise("template <typename T> T fma3(T x, T m, T r) { return (x - m) * r + m; }")
    f5 = kjit.elementwise("template <typename T> T fma5(T x, T m, T r, T s, T t) { return (x - m) * r + s - t; }")
    rng = np.random.default_rng(5)

    def values(shape):
        v = rng.integers(0, 3, shape) if dtype == np.bool_ else rng.integers(-9, 9, shape)
        v = v.astype(dtype)
        return v + (1j * v[..., ::-1]).astype(dtype) if np.issubdtype(dtype, np.complexfloating) else v

    def check(fn, want_of, args, label):
        ints = [v.astype(np.int64) for v in args] if dtype == np.bool_ else args  # C++: bool math is int
        with np.errstate(all="ignore"):
            want = want_of(*ints)
        got = fn(*args)
        np.testing.assert_array_equal(got, want.astype(got.dtype), err_msg=label)
        rows, cols = got.shape
        if cols:
            out = np.empty((rows, 2 * cols), got.dtype)[:, ::2]
            fn(*args, out=out)
            np.testing.assert_array_equal(out, got, err_msg=label + " strided out=")

    for rows, cols in [(3, 255), (2, 256), (2, 257), (2, 513), (4, 1), (1, 1), (3, 0)]:
        x, col, col2 = values((rows, cols)), values((rows, 1)), values((rows, 1))
        for args in [(x, col, col2), (col, x, col2), (col, col2, x), (x, x, col), (x, col, x), (col, col2, col)]:
            check(f, lambda a, b, c: (a - b) * c + b, args, f"fma3 {rows}x{cols}")
        for k in range(32):  # every set of broadcast inputs of five, beyond the sets with loops of their own
            args = [col if (k >> i) & 1 else x for i in range(5)]
            if k == 31 or k & (k - 1):
                check(f5, lambda a, b, c, d, e: (a - b) * c + d - e, args, f"fma5 {rows}x{cols} set {k:05b}")
    if dtype == np.float32:  # mixed: a float64 column promotes; a Python scalar in the middle
        x, col = values((2, 300)), values((2, 1)).astype(np.float64)
        np.testing.assert_array_equal(f(x, col, col), (x - col) * col + col)
        np.testing.assert_array_equal(f(x, 2.0, col.astype(np.float32)), (x - 2) * col.astype(np.float32) + 2)


def test_a_function_of_more_inputs_than_the_broadcast_sets_count_gives_numpys_values():
    """The broadcast sets count the first 32 tensor inputs (a bit each); a
    function of 34 inputs, broadcast ones among the last two and a Python scalar
    last, takes the other loops and gives NumPy's sums."""
    n = 34
    f = kjit.elementwise("template <typename T> T many(" + ", ".join(f"T a{i}" for i in range(n)) + ") { return " +
                         " + ".join(f"a{i}" for i in range(n)) + "; }")
    rng = np.random.default_rng(2)
    x, col = rng.integers(-9, 9, (5, 300)).astype(np.float32), rng.integers(-9, 9, (5, 1)).astype(np.float32)
    for args in ([x] * n, [col] * n, [x if i % 2 else col for i in range(n)], [col if i == 33 else x for i in range(n)],
                 [col if i >= 32 else x for i in range(n)], [2.0 if i == 33 else x for i in range(n)]):
        np.testing.assert_array_equal(f(*args), sum(np.asarray(a, np.float64) for a in args).astype(np.float32))


def test_the_several_broadcast_loops_are_vectorised():
    """The loop for two broadcast inputs of three (values loaded once) and the
    block loop of a five-input function are reported vectorised by g++ -fopt-info
    on the kept kernel source, so a regression to the strided loop cannot pass."""
    import pathlib

    f = kjit.elementwise("template <typename T> T ew_bb(T x, T m, T r) { return (x - m) * r; }")
    f5 = kjit.elementwise("template <typename T> T ew_bb5(T x, T m, T r, T s, T t) { return (x - m) * r + s * t; }")
    x, half, two = np.ones((4, 300), np.float32), np.full((4, 1), 0.5, np.float32), np.full((4, 1), 2, np.float32)
    np.testing.assert_array_equal(f(x, half, two), x)
    np.testing.assert_array_equal(f5(x, half, two, half, two), x + 1)
    cache = pathlib.Path(os.environ["KJIT_CACHE_DIR"])
    [source] = cache.glob("kjit_ew_ew_bb-*/*.cc")
    found, why = loop_vectorised(source, "    for (int64_t __k = 0; __k < __n; ++__k)",
                                  after="  if (__s0 == 4 && __s1 == 4 && __s2 == 0 && __s3 == 0) {")
    assert found, why
    [source5] = cache.glob("kjit_ew_ew_bb5-*/*.cc")
    found, why = loop_vectorised(source5, "      for (int64_t __j = 0; __j < __m; ++__j)")
    assert found, why


def test_rows_of_a_two_dimensional_call_run_in_one_kernel_call():
    """Whole rows along dim 1 go to the kernel in one call (its outer loop, as
    TensorIterator's loop2d), the rest of a row in calls of their own: every
    split of a (rows, cols) loop across threads, odd row lengths, a transposed
    operand and a 3-D loop give NumPy's values."""
    f = kjit.elementwise("template <typename T> T rows2d(T x, T m, T r) { return (x - m) * r; }")
    rng = np.random.default_rng(11)
    try:
        for threads in (1, 2):
            kjit.set_num_threads(threads)
            for shape in [(1, 7), (7, 1), (3, 5), (40000, 3), (3, 40000), (2, 3, 70001), (70001, 2), (5, 2, 1, 9)]:
                x = rng.standard_normal(shape).astype(np.float32)
                m = rng.standard_normal(shape[:-1] + (1,)).astype(np.float32)
                r = rng.standard_normal(shape).astype(np.float32)
                np.testing.assert_array_equal(f(x, m, r), (x - m) * r, err_msg=f"{shape}, {threads} threads")
                if len(shape) == 2:
                    xt = np.ascontiguousarray(x.T).T  # column-major: the loop runs down columns
                    np.testing.assert_array_equal(f(xt, m, r), (xt - m) * r, err_msg=f"{shape} transposed")
    finally:
        kjit.set_num_threads(0)


_STREAMED_AT_LEVEL = """
import numpy as np, kjit
n = {n}
a = (np.arange(n) % 251).astype(np.float32)
b = (np.arange(n)[::-1] % 7).astype(np.float32)
out = np.empty(n + 1, np.float32)[1:]
kjit.set_num_threads(1)
add = kjit.elementwise("template <typename T> T add(T a, T b) {{ return a + b; }}")
add(a, b, out=out)
assert np.array_equal(out, a + b)
"""


def _cpu_flags() -> set:
    try:
        with open("/proc/cpuinfo") as f:
            return next((set(line.split(":")[1].split()) for line in f if line.startswith("flags")), set())
    except OSError:
        return set()


@pytest.mark.parametrize("level", ["baseline", "x86-64-v3", "x86-64-v4"])
def test_streamed_runs_at_each_instruction_set_level(level, tmp_path):
    """The non-temporal store helper has one form per level (16-, 32- and 64-byte
    stores); KJIT_HOST_ISA caps the level (a level above the CPU's leaves its own),
    and the kernel's compile command shows the level's flags."""
    n = max(2 * _last_level_cache_bytes() // 12, 1 << 20) + 37
    proc = subprocess.run([sys.executable, "-c", _STREAMED_AT_LEVEL.format(n=n)], capture_output=True, text=True,
                          env={**os.environ, "KJIT_HOST_ISA": level, "KJIT_CACHE_DIR": str(tmp_path)}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    commands = "".join(p.read_text() for p in tmp_path.glob("kjit_ew_add-*/build.log"))
    flags = _cpu_flags()
    v4 = level == "x86-64-v4" and {"avx512f", "avx512vl", "avx512bw", "avx512dq", "avx512cd"} <= flags
    assert ("-mavx512f" in commands) == v4, commands
    assert ("-mavx2" in commands) == (level != "baseline" and "avx2" in flags), commands


def test_an_unknown_instruction_set_level_is_a_toolchain_error():
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import numpy as np, kjit
        try:
            kjit.elementwise("template <typename T> T add2(T a, T b) { return a + b; }")(np.ones(2), np.ones(2))
        except kjit.ToolchainError as e:
            print(e)
        """)], capture_output=True, text=True, env={**os.environ, "KJIT_HOST_ISA": "avx512"}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ("KJIT_HOST_ISA='avx512': expected baseline, x86-64-v3 or x86-64-v4 (the highest "
                                   "level kjit compiles elementwise loops for), or unset for this CPU's own level")


# Every common word a user's macro may take: kjit's code after the user's uses none.
_COMMON_WORDS = ["count", "n", "data", "out", "identity", "value", "map", "combine", "store", "better", "Acc", "Value",
                 "kArg", "kOperands", "kSizes", "i", "j", "k", "u", "e", "v", "w", "r", "s", "p", "b", "d", "q", "V",
                 "S", "start", "remaining", "off", "x", "y", "part", "parts", "acc", "index", "level", "leaf", "block",
                 "lanes", "base", "half", "kept", "rest", "shift", "bits", "sign", "stream64", "stream_fence"]
_MACROS = "".join(f"#define {w} 1\n" for w in _COMMON_WORDS)


def test_user_macros_named_like_common_words_do_not_break_the_generated_loops():
    """Issue 38: `#define count ...` in a computation string broke kjit's loops (its
    headers came after the user's code, and its Ops used plain names)."""
    f = kjit.elementwise(_MACROS + "template <typename Tz> Tz f(Tz lhs, Tz rhs) { return lhs * rhs + Tz(1); }")
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(f(x, x), x * x + 1)
    np.testing.assert_array_equal(f(x.T, 2.0), x.T * 2 + 1)  # strided and broadcast loops
    h = np.arange(4, dtype=np.float16)
    np.testing.assert_array_equal(f(h, h), h * h + 1)  # the float16 conversions
    big = np.ones(1 << 21, np.float32)
    np.testing.assert_array_equal(f(big, big), big + 1)  # the streamed stores
    red = kjit.reduction(_MACROS + "template <typename Tz> Tz add(Tz lhs, Tz rhs) { return lhs + rhs; }",
                         identity=0, map_code=_MACROS + "template <typename Tz> Tz sq(Tz lhs) { return lhs * lhs; }",
                         post_code=_MACROS + "template <typename Tz> Tz mean(Tz acc_, int64_t m) { return acc_ / m; }")
    np.testing.assert_allclose(red(x, axis=1), (x * x).mean(axis=1))
    np.testing.assert_allclose(red(np.arange(100000.0)), (np.arange(100000.0) ** 2).mean())
    arg = kjit.arg_reduction(_MACROS + "template <typename Tz> bool gt(Tz lhs, Tz rhs) { return lhs > rhs; }")
    assert arg(np.array([1.0, 5.0, 2.0])) == 1 and arg(h) == 3


@pytest.mark.parametrize("name, message", [
    ("fooo", r"kjit.elementwise: name='fooo' is not a function the code defines \(it defines helper, foo; did you "
             r"mean 'foo'\?\)"),
    ("zzz", r"kjit.elementwise: name='zzz' is not a function the code defines \(it defines helper, foo\)"),
])
def test_a_name_the_code_does_not_define_is_a_spec_error(name, message):
    code = ("template <typename T> T helper(T a) { return a; }\n"
            "template <typename T> T foo(T a) { return helper(a) + T(1); }")
    with pytest.raises(kjit.SpecError, match=message):
        kjit.elementwise(code, name=name)
    assert kjit.elementwise(code, name="helper")(np.ones(2)).tolist() == [1.0, 1.0]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_loops_are_vectorised_and_round_once(dtype):
    """A float16 or bfloat16 loop reads and writes through the branch-free float
    forms (float16_conversions.h), so g++ -fopt-info reports the contiguous loop
    vectorised (it was a scalar loop: tanh-GELU in bfloat16 was 10x torch); where
    the CPU has F16C, float16 goes through blocks of the conversion instructions
    (half_blocks.h) instead. Every bit pattern goes through it, through the streamed
    path past the caches, the last partial block and the scalar tail, and comes out
    as the float computation rounded once, as torch's .float() then .to(dtype)
    rounds (NaN as NaN)."""
    import pathlib

    torch = pytest.importorskip("torch")
    name = f"ew_half_{dtype}"
    f = kjit.elementwise(f"template <typename T> T {name}(T x) {{ return x * T(3) + T(0.1); }}")
    bits = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16)
    x = bits.view(getattr(torch, dtype))
    want = (x.float() * 3 + np.float32(0.1)).to(x.dtype)
    for n in (65536, 65536 - 3, (1 << 21) + 5):  # whole, a scalar tail, past the caches (streamed)
        xs = x.repeat(n // 65536 + 1)[:n]
        got, expect = f(xs), want.repeat(n // 65536 + 1)[:n]
        assert got.dtype == x.dtype
        torch.testing.assert_close(got, expect, rtol=0, atol=0, equal_nan=True)
    [source] = pathlib.Path(os.environ["KJIT_CACHE_DIR"]).glob(f"kjit_ew_{name}-*/*.cc")
    found, why = loop_vectorised(source, "    for (int64_t __k = 0; __k < __n; ++__k)", after="  if (__s0 == 2 && __s1 == 2) {")
    assert found, why
    text = source.read_text()
    assert ("kjit_half_blocks::__widen(__f1, __d1 + __k0 * 2, __m);" in text) == (dtype == "float16"), text
