"""kjit.reduction against NumPy and PyTorch: values, result dtypes and error kinds
over axes, keepdims, dtype=, out=, layouts and sizes (cases ported from CuPy's
tests/cupy_tests/core_tests/test_reduction.py and NumPy's reduction tests), the
accumulation rules (no compile: result_type), pairwise accuracy, threads, and
every rejection's message.

Each reduction compiles once per dtype set: the tables stay on a few dtypes.
"""

import threading

import numpy as np
import pytest

import kjit

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")

ADD = "template <typename T> T add(T a, T b) { return a + b; }"
MUL = "template <typename T> T mul(T a, T b) { return a * b; }"
MAX = "template <typename T> T maximum(T a, T b) { return a > b ? a : b; }"
MEAN = "template <typename T> T mean(T acc, int64_t n) { return acc / static_cast<T>(n); }"
SQDIFF = "template <typename T> T sqdiff(T x, T y) { return (x - y) * (x - y); }"


@pytest.fixture(scope="module")
def rsum():
    return kjit.reduction(ADD, identity=0, name="rsum")


@pytest.fixture(scope="module")
def rprod():
    return kjit.reduction(MUL, identity=1, name="rprod")


@pytest.fixture(scope="module")
def rmax():
    return kjit.reduction(MAX, identity=None, upcast_integers=False, name="rmax")


def check(got, want, rtol=1e-5):
    """Same dtype, shape and values (NumPy scalars for 0-d, as NumPy returns)."""
    assert type(got) is type(want) or (np.ndim(got) == 0 and np.isscalar(got) == np.isscalar(want)), (got, want)
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind in "fc":
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)
    else:
        np.testing.assert_array_equal(got, want)


def axes_of(ndim):
    out = [None] + list(range(-ndim, ndim))
    if ndim >= 2:
        out += [(0, ndim - 1), tuple(range(ndim))]
    return out


# -- values against NumPy ---------------------------------------------------------


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int32", "int64", "float32", "float64", "complex64"])
@pytest.mark.parametrize("shape", [(), (1,), (7,), (3, 5), (2, 3, 4), (0, 3), (5, 1, 7)])
def test_sum_matches_numpy_over_axes_and_keepdims(rsum, dtype, shape):
    rng = np.random.default_rng(len(shape))
    x = (rng.standard_normal(shape) * 4).astype(dtype)
    for axis in axes_of(len(shape)):
        for keepdims in (False, True):
            check(rsum(x, axis=axis, keepdims=keepdims), np.sum(x, axis=axis, keepdims=keepdims))


@pytest.mark.parametrize("dtype", ["int8", "uint16", "float32", "float64"])
def test_max_and_prod_match_numpy(rmax, rprod, dtype):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((4, 6, 5)) * 3).astype(dtype)
    for axis in axes_of(3):
        check(rmax(x, axis=axis), np.max(x, axis=axis))
        check(rprod(x, axis=axis), np.prod(x, axis=axis))


def test_float16_accumulates_in_float32_and_returns_float16(rsum, rprod):
    x = np.random.default_rng(6).uniform(0.9, 1.1, (33, 65)).astype(np.float16)
    got = rprod(x, axis=0)  # rounded once at the end, not after every row as NumPy's float16 loop does
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, np.prod(x.astype(np.float32), axis=0).astype(np.float16))
    y = np.full(4097, 1, np.float16)  # float16 counts exactly only to 2048
    assert rsum(y) == np.float16(4096) and rsum(y).dtype == np.float16  # 4097 rounds to 4096 in float16


# CuPy's test_reduction.py: sizes around powers of two, both axes, transposed.
@pytest.mark.parametrize("n", [2**i + d for i in (0, 3, 7, 10, 15, 17) for d in (-1, 1)])
def test_cupy_sizes_around_powers_of_two(rsum, n):
    x = np.arange(n, dtype=np.float64) % 7 - 3
    check(rsum(x), x.sum())
    check(rsum(x.astype(np.int32)), x.astype(np.int32).sum())


@pytest.mark.parametrize("rows", [2**i + d for i in (3, 9) for d in (-1, 1)])
@pytest.mark.parametrize("axis", [0, 1])
def test_cupy_rows_by_1000_both_axes_and_transposed(rsum, rmax, rows, axis):
    rng = np.random.default_rng(rows)
    x = rng.standard_normal((rows, 1000)).astype(np.float32)
    check(rsum(x, axis=axis), x.sum(axis=axis), rtol=1e-4)
    check(rmax(x, axis=axis), x.max(axis=axis))
    check(rsum(x.T, axis=axis), x.T.sum(axis=axis), rtol=1e-4)
    check(rmax(x.T, axis=axis), x.T.max(axis=axis))


@pytest.mark.parametrize("shape", [(512, 4096), (513, 4097)])
def test_cupy_wide_both_axes(rsum, shape):
    x = np.random.default_rng(0).random(shape, dtype=np.float32)
    for axis in (None, 0, 1):
        check(rsum(x, axis=axis), x.sum(axis=axis, dtype=np.float64).astype(np.float32), rtol=1e-4)


def test_layouts_strided_negative_and_broadcast(rsum, rmax):
    x = np.arange(60, dtype=np.float64).reshape(3, 4, 5)
    for view in (x[::-1], x[:, ::2], x[..., ::-2], x.transpose(2, 0, 1), np.broadcast_to(x[:1], (6, 4, 5)), x[1, 2]):
        for axis in axes_of(view.ndim):
            check(rsum(view, axis=axis), view.sum(axis=axis))
            check(rmax(view, axis=axis), view.max(axis=axis))


def test_scalars_and_zero_d(rsum):
    check(rsum(np.float32(2.5)), np.float32(2.5))
    check(rsum(np.array(3, np.int16)), np.sum(np.array(3, np.int16)))
    assert rsum(2.5) == 2.5 and type(rsum(2.5)) is np.float64
    check(rsum(np.ones((2, 3)), axis=(0, 1), keepdims=True), np.ones((1, 1)) * 6)


def test_empty_reductions_give_the_identity_through_post(rsum, rprod):
    check(rsum(np.ones((0, 3), np.float32), axis=0), np.zeros(3, np.float32))
    check(rprod(np.ones((3, 0), np.int8), axis=1), np.ones(3, np.int64))
    assert rsum(np.ones((3, 0)), axis=0).shape == (0,)
    mean = kjit.reduction(ADD, identity=0, post_code=MEAN, name="emptymean")
    with np.errstate(invalid="ignore"):
        assert np.isnan(mean(np.ones((0,), np.float64)))


# -- map, post, several inputs ----------------------------------------------------


def test_mean_through_post_code():
    mean = kjit.reduction(ADD, identity=0, post_code=MEAN, name="mean")
    x = np.random.default_rng(2).random((6, 7))
    check(mean(x, axis=1), x.mean(axis=1))
    check(mean(x, dtype=np.float32), np.float32(x.astype(np.float32).mean()), rtol=1e-5)


def test_map_code_over_broadcast_inputs_with_scalars():
    sqdist = kjit.reduction(ADD, identity=0, map_code=SQDIFF, name="sqdist")
    x = np.random.default_rng(3).random((4, 5))
    y = np.random.default_rng(4).random(5)
    check(sqdist(x, y, axis=1), ((x - y) ** 2).sum(axis=1))
    check(sqdist(x, 0.5), ((x - 0.5) ** 2).sum())
    assert sqdist.result_type(x.astype(np.float32), 0.5) == np.float32


# -- dtype= and out= --------------------------------------------------------------


def test_dtype_sets_accumulator_and_result(rsum):
    x = np.full(300, 100, np.int8)
    check(rsum(x, dtype=np.int8), np.sum(x, dtype=np.int8))  # wraps, as NumPy's
    check(rsum(x, dtype="float32"), np.float32(30000))
    check(rsum(np.array([1.5, 2.5]), dtype=np.int32), np.sum(np.array([1.5, 2.5]), dtype=np.int32))
    assert rsum.result_type(x, dtype=np.float16) == np.float16


def test_out_is_written_and_returned(rsum):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = np.empty(4, np.float64)
    assert rsum(x, axis=0, out=out) is out
    np.testing.assert_array_equal(out, x.sum(axis=0))
    strided = np.zeros((4, 2))[:, 0]
    rsum(x, axis=0, out=strided)
    np.testing.assert_array_equal(strided, x.sum(axis=0))
    keep = np.empty((3, 1), np.float32)
    rsum(x, axis=1, keepdims=True, out=keep)
    np.testing.assert_array_equal(keep, x.sum(axis=1, keepdims=True))


def test_repeated_calls_see_new_data_layouts_and_flags(rsum):
    for i in range(3):  # the second call of a layout takes the fast path
        x = np.full((4, 5), i, np.float32)
        check(rsum(x, axis=1), x.sum(axis=1))
    x = np.arange(20.0).reshape(4, 5)
    check(rsum(x, axis=0), x.sum(axis=0))
    check(rsum(np.asfortranarray(x), axis=0), x.sum(axis=0))
    ro = x.copy()
    ro.flags.writeable = False  # the same key as x: DLPack cannot carry it, the general path does
    check(rsum(ro, axis=0), x.sum(axis=0))
    check(rsum(x, axis=[0]), x.sum(axis=0))  # an unhashable axis
    check(rsum(x, axis=np.int64(1)), x.sum(axis=1))


@needs_torch
def test_torch_repeated_calls_still_check_grad_and_lazy_bits(rsum):
    x = torch.ones(3)
    rsum(x)
    assert float(rsum(x)) == 3.0
    with pytest.raises(TypeError, match=r"input #0 requires grad"):
        rsum(torch.ones(3, requires_grad=True))
    with torch.no_grad():
        assert float(rsum(torch.ones(3, requires_grad=True))) == 3.0
    z = torch.tensor([1 + 2j, 3 - 1j])
    rsum(z)
    assert complex(rsum(z.conj())) == complex(z.conj().sum())


def paths(f):
    return f._direct_calls, f._ffi_calls, f._checked_calls


def moved(f, before):
    return tuple(b - a for a, b in zip(before, paths(f)))


def test_the_function_is_the_c_call_type_of_elementwise_functions(rsum):
    from kjit._lib import call_type
    assert type(rsum) is call_type.Computation and rsum.__qualname__ == "kjit.reduction[rsum]"
    assert repr(rsum) == "<function kjit.reduction[rsum]>"
    assert str(__import__("inspect").signature(rsum)) == "(*inputs, axis=None, keepdims=False, dtype=None, out=None)"


@pytest.mark.parametrize("repeat", range(2))  # the first call of a class makes its call function
def test_common_numpy_calls_run_in_c(rsum, repeat):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    before = paths(rsum)
    check(rsum(x), x.sum())  # a NumPy scalar, as np.sum's
    check(rsum(x, axis=1), x.sum(axis=1))
    check(rsum(x, axis=-2, keepdims=True), x.sum(axis=-2, keepdims=True))
    check(rsum(x, keepdims=1, axis=0), x.sum(axis=0, keepdims=True))  # keyword order, an int keepdims
    check(rsum(x, axis=None, dtype=None, out=None), x.sum())  # None is as not given
    out = np.empty(4, np.float32)
    assert rsum(x, axis=0, out=out) is out
    check(out, x.sum(axis=0))
    assert moved(rsum, before) == (6, 0, 0)


@pytest.mark.parametrize("repeat", range(2))
def test_tuple_axes_dtypes_and_read_only_inputs_run_in_c(rsum, repeat):
    """Everyday NumPy calls (np.sum(x, axis=(0, 1)), dtype=, a read-only input) take
    the C path too (they took the checked one: 26-70 us against np.sum's 3-7)."""
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    before = paths(rsum)
    check(rsum(x, axis=(0, 2)), x.sum(axis=(0, 2)))
    check(rsum(x, axis=(-1,), keepdims=True), x.sum(axis=(-1,), keepdims=True))
    check(rsum(x, axis=()), x.sum(axis=()))
    for dtype in (np.float64, "float64", np.dtype("float64"), np.int32):
        check(rsum(x, dtype=dtype), x.sum(dtype=dtype))
    check(rsum(x, axis=(0, 1), dtype=np.float64), x.sum(axis=(0, 1), dtype=np.float64))
    ro = x.copy()
    ro.flags.writeable = False
    check(rsum(ro, axis=1), ro.sum(axis=1))
    check(rsum(np.broadcast_to(np.float32(2), (5, 5))), np.float32(50))
    assert moved(rsum, before) == (10, 0, 0)
    with pytest.raises(ValueError, match=r"^rsum: duplicate value in 'axis'"):
        rsum(x, axis=(1, 1))
    with pytest.raises(getattr(np, "exceptions", np).AxisError, match=r"^rsum: axis 5 is out of bounds"):
        rsum(x, axis=(0, 5))
    if torch is not None:
        t = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
        before = paths(rsum)
        assert torch.equal(rsum(t, axis=(0, 2)), t.sum(dim=(0, 2)))
        assert torch.equal(rsum(t, dtype=torch.float64), t.sum(dtype=torch.float64))
        assert moved(rsum, before) == (2, 0, 0)


def test_other_calls_take_the_checked_path(rsum):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    before = paths(rsum)
    check(rsum(x, axis=[0, 1]), x.sum(axis=(0, 1)))  # a list (NumPy refuses one; kjit reads it)
    check(rsum(x, axis=(np.int64(0), 1)), x.sum(axis=(0, 1)))
    with pytest.raises(TypeError, match=r"^kjit.reduction: input #0 must be a tensor .* got list$"):
        rsum(x.tolist())
    check(rsum(2.5), np.sum(2.5))
    ro = x.copy()
    ro.flags.writeable = False
    with pytest.raises(ValueError, match=r"^rsum: out is a read-only NumPy array"):
        rsum(x, axis=0, out=ro[0])
    with pytest.raises(TypeError, match=r"^rsum\(\) got an unexpected keyword argument 'axes'$"):
        rsum(x, axes=0)
    assert moved(rsum, before) == (0, 0, 6)


def test_errors_from_the_c_path_are_the_checked_paths(rsum):
    x = np.ones((2, 3), np.float32)
    with pytest.raises(ValueError, match=r"^rsum: axis 2 is out of bounds for array of dimension 2$"):
        rsum(x, axis=2)
    with pytest.raises(ValueError, match=r"^rsum: out has shape \(2,\) but the reduction gives \(3,\)"):
        rsum(x, axis=0, out=np.empty(2, np.float32))
    with pytest.raises(TypeError, match=r"^rsum: the result type float32 cannot be cast safely to the output type int8"):
        rsum(x, axis=0, out=np.empty(3, np.int8))


@pytest.mark.parametrize("axis", [-2**63, -2**62, -3, 2, 2**62, 2**63 - 1, 2**63, -2**63 - 1])
def test_hostile_axes_are_value_errors_on_either_path(rsum, axis):
    with pytest.raises(ValueError, match=rf"^rsum: axis {axis} is out of bounds"):
        rsum(np.ones((2, 3), np.float32), axis=axis)


def test_concurrent_calls_through_the_c_path(rsum):
    xs = [np.full((64, 33), i, np.float32) for i in range(8)]
    errors = []

    def work(i):
        try:
            for _ in range(200):
                got = rsum(xs[i], axis=1 if i % 2 else None)
                want = xs[i].sum(axis=1) if i % 2 else xs[i].sum()
                np.testing.assert_array_equal(got, want)
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


@needs_torch
def test_common_torch_calls_run_in_c(rsum):
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    rsum(x)
    before = paths(rsum)
    assert torch.equal(rsum(x), x.sum()) and rsum(x).dim() == 0
    assert torch.equal(rsum(x, axis=1), x.sum(dim=1))
    assert torch.equal(rsum(x, axis=0, keepdims=True), x.sum(dim=0, keepdim=True))
    out = torch.empty(4)
    v = out._version
    assert rsum(x, axis=0, out=out) is out and torch.equal(out, x.sum(dim=0)) and out._version > v
    assert moved(rsum, before) == (5, 0, 0)
    with pytest.raises(TypeError, match=r"^rsum: input #0 requires grad, but kjit.reduction functions compute no "
                                        r"gradients"):
        rsum(torch.ones(3, requires_grad=True), axis=0)


@needs_torch
def test_an_empty_axis_tuple_reduces_nothing_for_torch_inputs_too(rsum):
    # NumPy's meaning, documented; torch.sum(x, dim=()) reduces every dim instead.
    x = torch.arange(6, dtype=torch.int32).reshape(2, 3)
    got = rsum(x, axis=())
    assert got.shape == (2, 3) and got.dtype == torch.int64 and torch.equal(got, x.long())


def _fake_cuda(n):
    """A fake CUDA float32 tensor of n <= 4 elements (never dereferenced)."""
    from test_elementwise import FakeDLPack

    t = FakeDLPack(device_type=2)
    t._shape[0] = n
    return t


def test_cuda_reductions_plan_and_reach_the_driver(rsum):
    # The plan is made for CUDA and the kernel chosen; the launch fails because this
    # machine has no CUDA driver (scripts/gpu_check runs them on a GPU).
    with pytest.raises(RuntimeError, match=r"^kjit: CUDA driver not available"):
        rsum(_fake_cuda(4), axis=0, keepdims=True, out=_fake_cuda(1))
    with pytest.raises(ValueError, match=r"^rsum: an output is on cuda:0 but the call's tensors are on cpu; all "
                                         r"tensors of a call must be on one device$"):
        rsum(np.ones(4, np.float32), axis=0, keepdims=True, out=_fake_cuda(1))
    # A Python scalar input travels in the launch's parameter, as the CPU kernels read it.
    sqmean = kjit.reduction(ADD, identity=0, map_code=SQDIFF, post_code=MEAN, name="sqmean")
    with pytest.raises(RuntimeError, match=r"^kjit: CUDA driver not available"):
        sqmean(_fake_cuda(4), 2.0, axis=0, keepdims=True, out=_fake_cuda(1))


# -- accumulation rules (result_type compiles nothing) -----------------------------

NUMPY_SUM = {"bool": "int64", "int8": "int64", "int16": "int64", "int32": "int64", "int64": "int64",
             "uint8": "uint64", "uint16": "uint64", "uint32": "uint64", "uint64": "uint64", "float16": "float16",
             "float32": "float32", "float64": "float64", "complex64": "complex64", "complex128": "complex128"}


@pytest.mark.parametrize("name", sorted(NUMPY_SUM))
def test_result_types_as_numpy_sum_and_max(rsum, rmax, name):
    x = np.zeros(3, name)
    assert rsum.result_type(x) == np.sum(x).dtype == np.dtype(NUMPY_SUM[name])
    if np.dtype(name).kind != "c":
        assert rmax.result_type(x) == np.max(x).dtype == np.dtype(name)


@needs_torch
@pytest.mark.parametrize("name", ["bool", "int8", "uint8", "int16", "int32", "int64", "float16", "bfloat16",
                                  "float32", "float64", "complex64"])
def test_result_types_as_torch_sum_and_amax(rsum, rmax, name):
    x = torch.zeros(3, dtype=getattr(torch, name))
    assert rsum.result_type(x) == torch.sum(x).dtype
    if not name.startswith("complex"):
        assert rmax.result_type(x) == torch.amax(x).dtype


@needs_torch
def test_torch_inputs_give_torch_results(rsum, rmax):
    x = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    got = rsum(x, axis=1)
    assert isinstance(got, torch.Tensor) and torch.equal(got, x.sum(dim=1))
    assert torch.equal(rsum(x), x.sum())
    i8 = torch.tensor([100, 100, 100], dtype=torch.int8)
    assert rsum(i8).dtype == torch.int64 and int(rsum(i8)) == 300
    h = torch.full((5000,), 1.0, dtype=torch.bfloat16)
    assert rsum(h).dtype == torch.bfloat16 and float(rsum(h)) == float(h.sum())
    assert torch.equal(rmax(x, axis=(0, 2), keepdims=True), x.amax(dim=(0, 2), keepdim=True))
    out = torch.empty(3)
    v = out._version
    rsum(x, axis=(0, 2), out=out)
    assert torch.equal(out, x.sum(dim=(0, 2))) and out._version > v


# -- accuracy ---------------------------------------------------------------------


def test_float32_sums_are_pairwise(rsum):
    x = np.ones(2**24 + 64, np.float32)
    x[::1024] += np.float32(1e-3)
    exact = np.sum(x.astype(np.float64))
    assert abs(float(rsum(x)) - exact) <= 4.0  # a running float32 sum stops at 16777216


def test_float32_outer_reduction_is_pairwise_over_rows(rsum):
    # numpy issue 22956: NumPy's axis=0 sum adds row by row and stops at 2**24.
    x = np.ones((2**24 + 64, 2), np.float32)
    np.testing.assert_array_equal(rsum(x, axis=0), np.full(2, 2**24 + 64, np.float32))


# -- threads ----------------------------------------------------------------------


@pytest.mark.parametrize("shape,axis", [((3, 100_001), None), ((3, 100_001), 1), ((100_001, 3), 0),
                                        ((65_536, 4), 0), ((4, 65_536), 0), ((512, 512), 1), ((512, 512), 0)])
def test_every_split_gives_the_one_thread_result(rsum, shape, axis):
    x = np.random.default_rng(5).integers(-50, 50, shape).astype(np.int64)
    want = x.sum(axis=axis)
    old = kjit.get_num_threads()
    try:
        for n in (1, 2, 3, 8):
            kjit.set_num_threads(n)
            check(rsum(x, axis=axis), want)
    finally:
        kjit.set_num_threads(old)


def test_eight_threads_call_one_reduction(rsum):
    xs = [np.random.default_rng(i).random((300, 301)) for i in range(8)]
    errors = []

    def run(x):
        try:
            for _ in range(20):
                check(rsum(x, axis=1), x.sum(axis=1))
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=run, args=(x,)) for x in xs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


# -- rejections -------------------------------------------------------------------


def test_axis_errors_name_the_axis(rsum):
    x = np.ones((2, 3))
    with pytest.raises(ValueError, match=r"rsum: axis 2 is out of bounds for array of dimension 2"):
        rsum(x, axis=2)
    with pytest.raises(ValueError, match=r"axis -3 is out of bounds"):
        rsum(x, axis=-3)
    with pytest.raises(ValueError, match=r"duplicate value in 'axis': -1 names dimension 1 twice"):
        rsum(x, axis=(1, -1))
    with pytest.raises(TypeError, match=r"axis must be None, an int or a tuple of ints, got float"):
        rsum(x, axis=1.0)
    for axis in (True, (0, False)):  # an int to Python, not to NumPy or torch
        with pytest.raises(TypeError, match=r"^rsum: axis must be None, an int or a tuple of ints, got bool "):
            rsum(x, axis=axis)
    with pytest.raises(ValueError, match=r"axis 1 is out of bounds for array of dimension 0"):
        rsum(np.float64(1), axis=1)


def test_an_axis_out_of_bounds_is_numpys_axis_error_on_every_path(rsum):
    # NumPy raises AxisError, torch IndexError: kjit's is both, on the direct and checked paths.
    for call in (lambda: rsum(np.ones((2, 3)), axis=2), lambda: rsum(np.ones((2, 3)), axis=(0, 2)),
                 lambda: rsum(np.ones((2, 3)), axis=2 ** 63), lambda: rsum(np.ones(()), axis=-2)):
        with pytest.raises(getattr(np, "exceptions", np).AxisError, match=r"^rsum: axis -?\d+ is out of bounds") as info:
            call()
        assert isinstance(info.value, ValueError) and isinstance(info.value, IndexError)


# (shape, axis, keepdims): NumPy's np.sum and np.max decide the value, dtype and
# error kind of each. A 0-d input's axis in a tuple is left out: NumPy refuses
# (0,) but takes the int 0, kjit takes both (as torch does).
AXIS_CASES = [((2, 3, 4), (), False), ((2, 3, 4), (), True), ((), 0, False), ((), -1, True), ((), None, True),
              ((), (), False), ((2, 3, 4), -1, False), ((2, 3, 4), (0, 2), True), ((2, 3, 4), (-3, -1), False),
              ((2, 3, 4), (2, 0, 1), False), ((0, 3), 1, True), ((1, 5, 1), (0, 2), False), ((2, 3, 4), 3, False),
              ((2, 3, 4), -4, True), ((2, 3, 4), (0, 0), False), ((2, 3, 4), (1, -2), False), ((), 1, False),
              ((), -2, False), ((2, 3), 2 ** 62, False), ((2, 3), -2 ** 63, False)]


@pytest.mark.parametrize("shape, axis, keepdims", AXIS_CASES)
def test_axis_cases_agree_with_numpy(rsum, rmax, shape, axis, keepdims):
    x = (np.arange(int(np.prod(shape)), dtype=np.float32) % 7).reshape(shape)
    case = f"np.sum(np.ones({shape}, np.float32), axis={axis}, keepdims={keepdims})"
    for mine, theirs in ((rsum, np.sum), (rmax, np.max)):
        try:
            want = theirs(x, axis=axis, keepdims=keepdims)
        except (ValueError, TypeError) as err:  # AxisError is a ValueError
            with pytest.raises(type(err)):
                mine(x, axis=axis, keepdims=keepdims)
            continue
        if x.size == 0 and theirs is np.max:
            continue  # an empty max: the identity-less error, tested on its own
        got = np.asarray(mine(x, axis=axis, keepdims=keepdims))
        assert (got.shape, got.dtype) == (np.shape(want), np.asarray(want).dtype), case
        np.testing.assert_array_equal(got, want, err_msg=case)


def test_a_0d_inputs_axis_0_or_minus_1_reduces_nothing(rsum, rmax):
    # NumPy's int axis and torch's dim: the one value is its reduction.
    mean = kjit.reduction(ADD, identity=0, post_code=MEAN, name="mean0d")
    z = np.array(2.5, np.float32)
    for axis in (0, -1, (0,), (-1,)):
        for keepdims in (False, True):
            got = rsum(z, axis=axis, keepdims=keepdims)
            assert np.shape(got) == () and got == 2.5 and np.asarray(got).dtype == np.float32
            assert rmax(z, axis=axis, keepdims=keepdims) == 2.5
            assert mean(z, axis=axis, keepdims=keepdims) == 2.5  # a count of one
    assert rsum(np.array(3, np.int8), axis=0) == np.sum(np.array(3, np.int8), axis=0)
    assert np.asarray(rsum(np.array(3, np.int8), axis=0)).dtype == np.int64
    out = np.empty((), np.float32)
    assert rsum(z, axis=0, out=out) is out and out == 2.5
    with pytest.raises(ValueError, match=r"^rsum: duplicate value in 'axis': -1 names the 0-d input's axis twice$"):
        rsum(z, axis=(0, -1))


def test_empty_reduction_without_identity(rmax):
    with pytest.raises(ValueError, match=r"zero-size array to reduction operation rmax which has no identity"):
        rmax(np.ones((0, 3)), axis=0)
    check(rmax(np.ones((0, 3)), axis=1), np.ones(0))  # no empty reduction: fine


def test_out_rejections(rsum):
    x = np.ones((3, 4), np.float32)
    with pytest.raises(ValueError, match=r"out has shape \(3,\) but the reduction gives \(4,\)"):
        rsum(x, axis=0, out=np.empty(3, np.float32))
    with pytest.raises(TypeError, match=r"result type float32 cannot be cast safely to the output type int32"):
        rsum(x, axis=0, out=np.empty(4, np.int32))
    ro = np.empty(4, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match=r"out is a read-only NumPy array"):
        rsum(x, axis=0, out=ro)
    with pytest.raises(ValueError, match=r"out overlaps input #0 in memory"):
        rsum(x, axis=1, out=x[:, 0])
    with pytest.raises(TypeError, match=r"out must be one tensor"):
        rsum(x, axis=0, out=(np.empty(4),))


def test_call_rejections(rsum):
    x = np.ones(3)
    with pytest.raises(TypeError, match=r"rsum: a reduction without map_code takes one input, got 2"):
        rsum(x, x)
    with pytest.raises(TypeError, match=r"rsum: expected at least one input"):
        rsum()
    with pytest.raises(TypeError, match=r"dtype nope is not one kjit.reduction computes in"):
        rsum(x, dtype="nope")
    with pytest.raises(TypeError, match=r"input #0 is complex but the reduction accumulates in float64"):
        rsum(np.ones(2, np.complex64), dtype=np.float64)
    with pytest.raises(OverflowError, match=r"Python integer 36893488147419103232 is outside the int64 range"):
        rsum(2**65)


def test_definition_rejections():
    with pytest.raises(kjit.SpecError, match=r"reduce_code defines no function"):
        kjit.reduction("a + b", identity=0)
    with pytest.raises(kjit.SpecError, match=r"reduce_code's function f\(a, b, c\) must take 2 arguments"):
        kjit.reduction("template <typename T> T f(T a, T b, T c) { return a; }", identity=0)
    with pytest.raises(kjit.SpecError, match=r"post_code's function p\(a\) must take 2 arguments"):
        kjit.reduction(ADD, identity=0, post_code="template <typename T> T p(T a) { return a; }")
    with pytest.raises(kjit.SpecError, match=r"name 'my sum' is not a C identifier"):
        kjit.reduction(ADD, identity=0, name="my sum")
    with pytest.raises(TypeError, match=r"identity must be None or a bool, int, float or complex, got str"):
        kjit.reduction(ADD, identity="0")
    with pytest.raises(TypeError, match=r"reduce_code must be a str, got int"):
        kjit.reduction(3, identity=0)
    with pytest.raises(TypeError, match=r"identity"):
        kjit.reduction(ADD)


def test_map_arity_is_checked_before_compiling():
    sqdist = kjit.reduction(ADD, identity=0, map_code=SQDIFF, name="sqdist2")
    with pytest.raises(TypeError, match=r"map_code's function sqdiff\(x, y\) takes 2 argument\(s\), one per input; "
                                        r"this call passes 3 input\(s\)"):
        sqdist(np.ones(2), np.ones(2), np.ones(2))


def test_identity_that_is_not_a_value_of_the_accumulator():
    bad = kjit.reduction(MAX, identity=float("-inf"), upcast_integers=False, name="badmax")
    with pytest.raises(ValueError, match=r"the identity -inf is not a value of int32"):
        bad(np.ones(3, np.int32))
    assert bad(np.ones(3, np.float32)) == 1.0


def test_a_failing_compile_is_not_repeated():
    broken = kjit.reduction("template <typename T> T f(T a, T b) { return a + undefined_name; }", identity=0)
    for _ in range(2):
        with pytest.raises(kjit.CompileError, match=r"kjit.reduction 'f' \(float64\) -> float64, accumulating in "
                                                     r"float64: the code does not compile"):
            broken(np.ones(3))


def test_integer_division_by_zero_is_a_zero_division_error():
    div = kjit.reduction("template <typename T> T f(T a, T b) { return a / b; }", identity=1, upcast_integers=False)
    with pytest.raises(ZeroDivisionError, match=r"^f: integer division by zero"):
        div(np.array([4, 0, 2], np.int32))


# -- arg reductions ---------------------------------------------------------------

ARGMAX = "template <typename T> bool gt(T a, T b) { return a > b || (a != a && b == b); }"
ARGMIN = "template <typename T> bool lt(T a, T b) { return a < b || (a != a && b == b); }"


@pytest.fixture(scope="module")
def argmax():
    return kjit.arg_reduction(ARGMAX, name="argmax")


@pytest.fixture(scope="module")
def argmin():
    return kjit.arg_reduction(ARGMIN, name="argmin")


@pytest.mark.parametrize("dtype", ["int8", "uint16", "float32", "float64"])
@pytest.mark.parametrize("shape", [(1,), (7,), (3, 5), (4, 6, 5), (2**16 + 3,), (300, 301), (5000, 3)])
def test_arg_reductions_match_numpy_with_ties(argmax, argmin, dtype, shape):
    x = np.random.default_rng(len(shape)).integers(-5, 5, shape).astype(dtype)  # many ties
    for axis in [None] + list(range(-len(shape), len(shape))):
        for keepdims in (False, True):
            check(argmax(x, axis=axis, keepdims=keepdims), np.argmax(x, axis=axis, keepdims=keepdims))
            check(argmin(x, axis=axis, keepdims=keepdims), np.argmin(x, axis=axis, keepdims=keepdims))


def test_arg_reductions_follow_numpy_nan_rules_and_layouts(argmax, argmin):
    x = np.array([1.0, np.nan, 3.0, np.nan, 7.0])
    assert argmax(x) == np.argmax(x) == 1 and argmin(x) == np.argmin(x) == 1
    m = np.random.default_rng(7).random((40, 70))
    m[3, 5] = m[30, 60] = np.nan
    for view in (m, m.T, m[::-1, ::3]):
        for axis in (None, 0, 1):
            check(argmax(view, axis=axis), np.argmax(view, axis=axis))
            check(argmin(view, axis=axis), np.argmin(view, axis=axis))
    big = np.zeros(2**20, np.float32)
    big[[12345, 700000, 900001]] = 5  # ties across blocks and threads: the first
    assert argmax(big) == 12345


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint16", "float16", "float32", "float64"])
def test_arg_reductions_at_lane_and_block_edges(argmax, argmin, dtype):
    # Blocks of 2^16 elements (and the threads' parts of them) run in groups of
    # eight 64-byte vectors, then a tail; the winner and its ties are put at every
    # kind of edge (float16 is compared as float32: 16 lanes, not 32).
    lanes = 64 // np.dtype(dtype).itemsize
    for n in (1, lanes - 1, lanes, lanes + 1, 3 * lanes + 5, 2**16 - 1, 2**16, 2**16 + 1, 3 * 2**16 + 17):
        for first, second in ((n - 1, None), (0, n - 1), (lanes - 1, lanes), (min(lanes + 3, n - 1), 1),
                              (n // 2, n // 2 + lanes), (2**16 + 5, 2**16 + 1), (8 * lanes, 8 * lanes - 1),
                              (16 * lanes + 1, 8 * lanes + 2), (n - 1, n - 8 * lanes - 1)):
            if first >= n or (second is not None and not 0 <= second < n):
                continue
            x = np.zeros(n, dtype)
            x[first] = 9
            y = np.full(n, 3, dtype)
            y[first] = 1
            if second is not None:
                x[second] = 9
                y[second] = 1
            assert argmax(x) == np.argmax(x), (dtype, n, first, second)
            assert argmin(y) == np.argmin(y), (dtype, n, first, second)
            if np.dtype(dtype).kind == "f":
                x[first] = np.nan
                assert argmax(x) == np.argmax(x) and argmin(x) == np.argmin(x), (dtype, n, first, second, "nan")


def test_arg_reduction_rejections(argmax):
    with pytest.raises(ValueError, match=r"argmax: attempt to get the index of an empty sequence"):
        argmax(np.ones(0))
    with pytest.raises(TypeError, match=r"axis must be None or an int, got tuple"):
        argmax(np.ones((2, 2)), axis=(0, 1))
    with pytest.raises(kjit.SpecError, match=r"reduce_code's function f\(a\) must take 2 arguments \(the two values "
                                             r"it compares\)"):
        kjit.arg_reduction("template <typename T> bool f(T a) { return a; }")


@needs_torch
def test_arg_reduction_of_torch_tensors(argmax):
    x = torch.tensor([[1.0, 5.0, 5.0], [7.0, 0.0, 7.0]])
    got = argmax(x, axis=1)
    assert isinstance(got, torch.Tensor) and torch.equal(got, torch.argmax(x, dim=1))
    assert int(argmax(x)) == int(torch.argmax(x))


def test_hostile_arguments_are_named_errors(rsum):
    x = np.ones((2, 3))
    for axis in (2**62, -(2**63)):
        with pytest.raises(ValueError, match=rf"rsum: axis {axis} is out of bounds for array of dimension 2"):
            rsum(x, axis=axis)
    with pytest.raises(ValueError, match=r"rsum: axis 9223372036854775808 is out of bounds"):
        rsum(x, axis=2**63)
    with pytest.raises(TypeError, match=r"kjit.reduction: input #0 has dtype object, which kjit.reduction does not"):
        rsum(np.ones(3, dtype=object))
    with pytest.raises(TypeError, match=r"kjit.reduction: input #0 must be a tensor"):
        rsum("abc")
    with pytest.raises(OverflowError, match=r"identity 1180591620717411303424 is outside the int64 range"):
        kjit.reduction(ADD, identity=2**70)
    with pytest.raises(TypeError, match=r"the identity is complex but the reduction accumulates in float64"):
        kjit.reduction(ADD, identity=1j, name="cplx")(np.ones(2))
    with pytest.raises(kjit.SpecError, match=r"reduce_code defines no function"):
        kjit.reduction("\0", identity=0)
    check(rsum(x, axis=()), x)  # no axis: every element its own reduction, as NumPy's


def test_code_holding_a_nul_fails_to_compile_with_a_message():
    f = kjit.reduction(ADD + "\0junk", identity=0, name="nul")
    with pytest.raises(kjit.CompileError, match=r"kjit.reduction 'nul'"):
        f(np.ones(2))


@needs_torch
def test_reductions_as_torch_ops_pass_opcheck_and_compile(rsum, argmax):
    import kjit.torch  # noqa: F401

    op = kjit.torch.op(rsum, name="rsum_op")
    # Seeded, and an absolute tolerance: kjit and torch add a row in different
    # orders, so a row summing to near zero differs by more than rtol alone allows.
    x = torch.randn(4, 5, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(op(x, axis=1), x.sum(1), atol=1e-6) and op(x, axis=(0, 1), keepdims=True).shape == (1, 1)
    torch.library.opcheck(op.op, ([x], [1], False))
    torch.library.opcheck(op.op, ([x], None, True))
    aop = kjit.torch.op(argmax, name="argmax_op")
    assert torch.equal(aop(x, axis=0), x.argmax(0))
    torch.library.opcheck(aop.op, ([x], [0], False))
    compiled = torch.compile(lambda t: op(torch.relu(t), axis=1) * 2, fullgraph=True)
    assert torch.allclose(compiled(x), torch.relu(x).sum(1) * 2)


# -- right or refused (issue 38) ------------------------------------------------------

@pytest.mark.parametrize("identity, dtype, shown", [
    (300, "int8", "300"), (-129, "int8", "-129"), (256, "uint8", "256"), (-1, "uint16", "-1"),
    (2**31, "int32", "2147483648"), (1.5, "int32", "1.5"), (2, "bool", "2"), (1e39, "float32", "1e\\+39"),
    (-3.5e38, "float32", "-3.5e\\+38"),
])
def test_an_identity_outside_the_accumulator_is_a_value_error(identity, dtype, shown):
    """It would wrap (300 into int8 gave 44), round or overflow: refused, as the docs say."""
    red = kjit.reduction(ADD, identity=identity, upcast_integers=False, name="idr")
    with pytest.raises(ValueError, match=rf"^idr: the identity {shown} is not a value of {dtype}, which this call "
                                         r"accumulates in \(it would (wrap or round|overflow)\)"):
        red(np.zeros(0, dtype), dtype=dtype)


def test_identities_at_the_edges_of_the_accumulator_are_kept():
    for identity, dtype in ((-128, "int8"), (127, "int8"), (255, "uint8"), (1, "bool"), (float("inf"), "float32"),
                            (65504.0, "float32")):
        red = kjit.reduction(MAX, identity=identity, upcast_integers=False, name="edge")
        got = red(np.zeros(0, dtype), dtype=dtype)
        assert got == np.array(identity).astype(dtype), (identity, dtype, got)


@pytest.mark.parametrize("x_dtype, out_dtype", [("float32", "float64"), ("float16", "float64"),
                                                ("complex64", "complex128")])
def test_a_wider_float_out_widens_the_accumulation(rsum, x_dtype, out_dtype):
    """np.sum(x, out=o) computes in o's dtype (ufunc.reduce's dtype defaults to
    out's), as torch.sum(out=) does: 1e8 + 4 ones is 100000004 in float64."""
    # 1e8 + 1 == 1e8 in float32; 2048 + 1 == 2048 in float16 (whose sums go through float32)
    x = np.array([2048, 1, 1, 1, 1] if x_dtype == "float16" else [1e8, 1, 1, 1, 1]).astype(x_dtype)
    out, want = np.zeros((), out_dtype), np.zeros((), out_dtype)
    rsum(x, out=out)
    np.sum(x, out=want)
    assert out == want and out.dtype == want.dtype, (out, want)
    if torch is not None:
        t_out = torch.zeros((), dtype=getattr(torch, out_dtype))
        rsum(torch.from_numpy(x), out=t_out)
        assert t_out.item() == torch.sum(torch.from_numpy(x), dim=0, dtype=getattr(torch, out_dtype)).item()


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_an_arg_reduction_finds_the_first_nan_whatever_its_comparison(threads, dtype):
    """NaN is better than any number for every comparison (NumPy's and torch's
    argmax and argmin): a plain `a > b` ranked NaN nowhere and the index depended on
    the layout and the split."""
    gt = kjit.arg_reduction("template <typename T> bool gt(T a, T b) { return a > b; }", name="gt")
    lt = kjit.arg_reduction("template <typename T> bool lt(T a, T b) { return a < b; }", name="lt")
    kjit.set_num_threads(threads)
    try:
        small = np.array([1.0, np.nan, 3.0, np.nan], dtype)
        assert gt(small) == lt(small) == np.argmax(small) == np.argmin(small) == 1
        big = np.random.default_rng(3).random(300001).astype(dtype)
        big[[77777, 200000]] = np.nan
        assert gt(big) == lt(big) == 77777
        m = big[:300000].reshape(600, 500)
        m[m < 0.01] = np.nan
        for view in (m, m.T, m[::-1, ::7]):
            for axis in (0, 1):
                np.testing.assert_array_equal(gt(view, axis=axis), np.argmax(view, axis=axis))
                np.testing.assert_array_equal(lt(view, axis=axis), np.argmin(view, axis=axis))
        if torch is not None:
            t = torch.from_numpy(small)
            assert int(gt(t)) == int(torch.argmax(t)) and int(lt(t)) == int(torch.argmin(t))
    finally:
        kjit.set_num_threads(0)


def test_an_arg_reductions_out_must_hold_indices(argmax):
    x = np.arange(6000, dtype=np.float32).reshape(2, 3000)
    with pytest.raises(TypeError, match=r"^argmax: out has dtype float32, but an arg reduction writes int64 indices: "
                                        r"pass an integer out \(int64\)$"):
        argmax(x, axis=1, out=np.zeros(2, np.float32))  # was [2999.0, 2999.0] (3000 for larger indices)
    with pytest.raises(TypeError, match=r"^argmax: out has dtype int8, which cannot hold the index 2999 this call "
                                        r"may return \(3000 elements reduced\): pass an int64 out$"):
        argmax(x, axis=1, out=np.zeros(2, np.int8))
    out = np.zeros(2, np.int16)
    argmax(x, axis=1, out=out)
    assert out.tolist() == [2999, 2999]


def test_argmax_of_everything_with_keepdims_checks_outs_shape(argmax):
    x = np.arange(6.0).reshape(2, 3)
    with pytest.raises(ValueError, match=r"^argmax: out has shape \(5, 5\) but the reduction gives \(1, 1\) "
                                         r"\(kjit.reduction does not resize outputs\)$"):
        argmax(x, keepdims=True, out=np.zeros((5, 5), np.int64))
    out = np.full((1, 1), -1)
    assert argmax(x, keepdims=True, out=out) is out and out.tolist() == [[5]]
    with pytest.raises(TypeError, match=r"^argmax: out has dtype float64"):
        argmax(x, keepdims=True, out=np.zeros((1, 1)))


@pytest.mark.parametrize("keepdims", ["no", 1.5, [True]])
def test_keepdims_must_be_a_bool(rsum, argmax, keepdims):
    for f, name in ((rsum, "rsum"), (argmax, "argmax")):
        with pytest.raises(TypeError, match=rf"^{name}: keepdims must be a bool, got {type(keepdims).__name__}"):
            f(np.ones((2, 2)), axis=1, keepdims=keepdims)
    assert rsum(np.ones((2, 2)), axis=1, keepdims=1).shape == (2, 1)  # an int, as NumPy takes it


@pytest.mark.parametrize("n", [1.5, "2", True, None])
def test_set_num_threads_takes_an_int(n):
    with pytest.raises(TypeError, match=rf"^kjit.set_num_threads: n must be an int \(0 restores the default\), got "
                                        rf"{type(n).__name__}"):
        kjit.set_num_threads(n)
    with pytest.raises(ValueError, match=r"kjit.set_num_threads: n must be a thread count in \[1, \d+\], or 0 for "
                                         r"the default, got -1"):
        kjit.set_num_threads(-1)


@pytest.mark.parametrize("code, kind, message", [
    ("throw 42;", RuntimeError, "^thrower: the code threw an exception that is not a std::exception$"),
    ('throw std::runtime_error("boom");', RuntimeError, "^thrower: boom$"),
    ('throw std::invalid_argument("bad");', ValueError, "^thrower: bad$"),
    ('throw std::out_of_range("far");', IndexError, "^thrower: far$"),
])
def test_what_reduction_code_throws_maps_as_elementwise(code, kind, message):
    """throw 42 aborted the process, std:: exceptions were 'a bug in kjit'."""
    red = kjit.reduction("#include <stdexcept>\ntemplate <typename T> T add(T a, T b) { if (a + b > 5) { " + code +
                         " } return a + b; }", identity=0, name="thrower")
    for x in (np.ones(10), np.ones(1 << 20)):  # the calling thread, and pool workers
        with pytest.raises(kind, match=message):
            red(x)
    assert red(np.ones(3)) == 3.0


def test_inputs_kjit_cannot_read_are_type_errors(rsum):
    with pytest.raises(TypeError, match=r"^kjit.reduction: input #0 has dtype float128, which kjit.reduction does "
                                        r"not support"):
        rsum(np.ones(3, np.longdouble))
    f = kjit.elementwise("template <typename T> T same(T a) { return a; }")
    with pytest.raises(TypeError, match=r"^kjit.elementwise: input #0 has dtype complex256, which kjit.elementwise "
                                        r"does not support"):
        f(np.ones(2, np.clongdouble))
    if torch is not None:
        sparse = torch.ones(3).to_sparse()
        with pytest.raises(TypeError, match=r"^kjit.reduction: input #0 is a sparse_coo tensor, whose layout kjit "
                                            r"does not read; pass x.to_dense\(\)$"):
            rsum(sparse)
        with pytest.raises(TypeError, match=r"^kjit.elementwise: input #0 is a sparse_coo tensor"):
            f(sparse)
        with pytest.raises(TypeError, match=r"^kjit.elementwise: input #0 is a meta tensor"):
            f(torch.ones(3, device="meta"))


def test_an_out_that_interleaves_with_an_input_but_shares_no_element_is_accepted(rsum):
    """NumPy and torch accept them; the exact test (as kjit.elementwise's) decides."""
    x = np.arange(8.0)
    rsum(x[::2].reshape(2, 2), axis=1, out=x[1:4:2])
    assert x[1:4:2].tolist() == [0.0 + 2.0, 4.0 + 6.0] and x[::2].tolist() == [0.0, 2.0, 4.0, 6.0]
    z = np.array([1 + 2j, 3 + 4j, 5 + 6j])
    rsum(z.real.reshape(3, 1), axis=1, out=z.imag)
    assert z.tolist() == [1 + 1j, 3 + 3j, 5 + 5j]
    y = np.arange(8.0)
    with pytest.raises(ValueError, match=r"^rsum: out overlaps input #0 in memory; the reduction would read what it "
                                         r"wrote; pass a separate out$"):
        rsum(y[:4].reshape(2, 2), axis=1, out=y[1:3])
    if torch is not None:
        t = torch.arange(8.0)
        rsum(t[::2].reshape(2, 2), axis=1, out=t[1:4:2])
        assert t[1:4:2].tolist() == [2.0, 10.0]
