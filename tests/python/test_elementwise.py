"""kjit.elementwise: TensorIterator semantics checked against NumPy 2 and PyTorch.

Oracles: numpy (values, np.result_type, np.can_cast(..., "same_kind")) for NumPy
inputs, torch ops for torch inputs. Every new dtype combination compiles a kernel,
so the kernels are module-scoped fixtures and the dtype matrix is a chosen subset.
"""

import ctypes
import gc
import importlib

import re

import numpy as np
import pytest

import kjit

if int(np.__version__.split(".")[0]) < 2:
    pytest.skip("the NumPy oracle needs NumPy 2 promotion (NEP 50)", allow_module_level=True)

try:
    import ml_dtypes  # NumPy's bfloat16; optional
except ImportError:
    ml_dtypes = None

# `kjit.elementwise` is the factory function; the module holds the thread API.
ew_module = importlib.import_module("kjit.elementwise")

ADD = "template <typename T> T add(T a, T b) { return a + b; }"
MADD = "template <typename T> T madd(T a, T b, T c) { return a * b + c; }"
DIVMOD = "template <typename T> void dm(T a, T b, T& q, T& r) { q = a / b; r = a - q * b; }"
AXPY = "template <typename T> T axpy(T x, T y, T alpha) { return alpha * x + y; }"
LIN = "template <typename T> T lin(T x, T y, T alpha, T beta) { return alpha * x - beta * y; }"


@pytest.fixture(scope="module")
def add():
    return kjit.elementwise(ADD)


@pytest.fixture(scope="module")
def madd():
    return kjit.elementwise(MADD)


@pytest.fixture(scope="module")
def divmod_kernel():
    return kjit.elementwise(DIVMOD, num_outputs=2)


@pytest.fixture(scope="module")
def axpy():
    return kjit.elementwise(AXPY)


@pytest.fixture(scope="module")
def lin():
    return kjit.elementwise(LIN)


@pytest.fixture
def threads():
    """The thread API, with the default restored afterwards."""
    yield ew_module
    ew_module.set_num_threads(0)


# ---------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------

BF16 = np.dtype(ml_dtypes.bfloat16) if ml_dtypes is not None else None


def np_dtype(name):
    return BF16 if name == "bfloat16" else np.dtype(name)


def values(name, shape, seed, span=50.0):
    """Deterministic values of dtype `name`: full range for 8/16-bit ints (wrapping),
    small for int32/int64 (no C++ overflow), uniform floats in [-span, span]."""
    rng = np.random.default_rng(seed)
    dt = np_dtype(name)
    if name == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        lo, hi = (info.min, info.max) if dt.itemsize <= 2 else (-1000, 1000)
        return rng.integers(lo, hi, shape, endpoint=True).astype(dt)
    if dt.kind == "c":
        return (rng.uniform(-span, span, shape) + 1j * rng.uniform(-span, span, shape)).astype(dt)
    return rng.uniform(-span, span, shape).astype(dt)


def is_exact(dt):
    return dt.kind in "biu"


# A small DLPack producer (ctypes): reaches kjit's own dtype/device checks without
# torch or CUDA. kjit never reads the data of a rejected tensor.
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]
_KEEP_ALIVE = []  # the producers outlive any capsule handed out


class FakeDLPack:
    """A 1-d DLPack tensor of 4 elements with a chosen device and dtype."""

    def __init__(self, device_type=1, code=2, bits=32, lanes=1):
        self._buf = np.zeros(8, np.float64)
        self._shape = (ctypes.c_int64 * 1)(4)
        self._deleter = _DELETER(lambda p: None)
        self._device = (device_type, 0)
        self._mt = _DLManagedTensor()
        self._mt.dl_tensor = _DLTensor(
            self._buf.ctypes.data, _DLDevice(device_type, 0), 1, _DLDataType(code, bits, lanes), self._shape, None, 0
        )
        self._mt.deleter = self._deleter
        _KEEP_ALIVE.append(self)

    def __dlpack_device__(self):
        return self._device

    def __dlpack__(self, stream=None, **kwargs):
        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(self._mt), b"dltensor", None)


# ---------------------------------------------------------------------------------
# The dtype matrix against NumPy (values and result dtype)
# ---------------------------------------------------------------------------------

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "float16", "bfloat16", "float32", "float64",
          "complex64"]
CORNER_PAIRS = [
    ("int8", "uint8"), ("uint8", "int8"), ("int16", "uint8"), ("uint8", "int64"), ("bool", "uint8"),
    ("float16", "int8"), ("float16", "int16"), ("uint8", "float16"), ("bool", "float16"),
    ("bfloat16", "int8"), ("uint8", "bfloat16"), ("bool", "bfloat16"), ("float16", "bfloat16"),
    ("complex64", "float64"), ("complex64", "int16"), ("float16", "complex64"),
]


def _pairs():
    out = []
    dtypes = DTYPES if ml_dtypes is not None else [d for d in DTYPES if d != "bfloat16"]
    corners = CORNER_PAIRS if ml_dtypes is not None else [p for p in CORNER_PAIRS if "bfloat16" not in p]
    for d in dtypes:
        for p in ((d, d), (d, "float32"), (d, "int32")):
            if p not in out:
                out.append(p)
    out += [p for p in corners if p not in out]
    kept = []
    for a, b in out:
        try:
            np.result_type(np_dtype(a), np_dtype(b))
        except TypeError:
            continue  # NumPy (with ml_dtypes) has no promotion for this pair
        kept.append((a, b))
    return kept


def _matrix_params():
    params = []
    for a, b in _pairs():
        params.append(pytest.param(a, b, id=f"{a}-{b}"))
    return params


MATRIX = _matrix_params()


@pytest.mark.parametrize("da, db", MATRIX)
def test_add_matches_numpy_values_and_dtype(add, da, db):
    x, y = values(da, (5, 7), 1), values(db, (5, 7), 2)
    expected = x + y
    got = add(x, y)
    assert isinstance(got, np.ndarray)
    assert got.dtype == np.result_type(x, y) == expected.dtype
    # One rounding in both (float16/bfloat16 add in float32 then round): exact.
    np.testing.assert_array_equal(got, expected)


MADD_TOL = {"float16": (2e-3, 0.05), "bfloat16": (1e-2, 0.5), "float32": (1e-5, 1e-5),
            "complex64": (1e-5, 1e-5), "float64": (1e-12, 1e-12), "complex128": (1e-12, 1e-12)}


@pytest.mark.parametrize("da, db", MATRIX)
def test_multiply_add_matches_numpy(madd, da, db):
    x, y = values(da, (5, 7), 3, span=4.0), values(db, (5, 7), 4, span=4.0)
    expected = x * y + x
    got = madd(x, y, x)
    assert got.dtype == expected.dtype == np.result_type(x, y)
    if is_exact(got.dtype):
        np.testing.assert_array_equal(got, expected)
    else:
        # kjit rounds once (float32 compute for 16-bit floats); NumPy rounds a*b first,
        # which for bfloat16 (8-bit significand) moves small sums by up to ~0.4.
        rtol, atol = MADD_TOL[got.dtype.name]
        wide = np.complex128 if got.dtype.kind == "c" else np.float64
        np.testing.assert_allclose(got.astype(wide), expected.astype(wide), rtol=rtol, atol=atol)


@pytest.mark.parametrize("int_code", [0, 1], ids=["int8", "uint8"])
def test_bfloat16_int8_promotion_numpy_rules(add, int_code):
    if ml_dtypes is None:
        pytest.skip("ml_dtypes is not installed")
    # DLPack producers other than torch follow NumPy's rules; NumPy itself cannot
    # export bfloat16 through DLPack, so two raw DLPack tensors stand in.
    other = np.dtype("int8" if int_code == 0 else "uint8")
    got = add(FakeDLPack(code=4, bits=16), FakeDLPack(code=int_code, bits=8))
    assert str(got.dtype) == str(np.result_type(BF16, other))


def test_integer_add_wraps_like_numpy(add):
    x = np.array([127, -128, 100], np.int8)
    np.testing.assert_array_equal(add(x, np.int8(1)), x + np.int8(1))
    u = np.array([255, 0, 200], np.uint8)
    np.testing.assert_array_equal(add(u, u), u + u)


def test_bool_add_is_logical_or(add):
    x = np.array([True, True, False, False])
    y = np.array([True, False, True, False])
    got = add(x, y)
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, x + y)


# ---------------------------------------------------------------------------------
# Broadcasting
# ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sa, sb",
    [
        ((1, 32, 32, 2), (1024, 1, 1, 2)),  # PyTorch issue 57611
        ((1, 5), (4, 1)),  # row + column vector
        ((4, 1), (5,)),
        ((), (3, 4)),  # 0-d with n-d
        ((3, 1, 5), (1, 4, 1)),  # size-1 dims
        ((5,), (2, 3, 5)),  # missing leading dims
        ((2, 1, 3), (2, 1, 3)),
    ],
    ids=["pytorch-57611", "row-col", "col-vec", "0d-nd", "size1-dims", "leading", "same-size1"],
)
def test_broadcast_shapes_match_numpy(add, sa, sb):
    x = values("float32", sa, 5)
    y = values("float32", sb, 6)
    got = add(x, y)
    expected = x + y
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)
    # Broadcast inputs in C order give a C-contiguous output.
    assert got.flags.c_contiguous


def test_broadcast_error_names_inputs_sizes_and_dim(add):
    with pytest.raises(ValueError, match=r"the size of input #0 \(3\) must match the size of input #1 \(4\) "
                                         r"at non-singleton dimension 1"):
        add(np.ones((2, 3)), np.ones(4))
    with pytest.raises(ValueError, match=r"non-singleton dimension 0 \(shapes \(2, 3\) and \(3, 3\)"):
        add(np.ones((2, 3)), np.ones((3, 3)))


# ---------------------------------------------------------------------------------
# Strided inputs and output layout
# ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def grid():
    return np.arange(60, dtype=np.float64).reshape(6, 10) * 0.5


@pytest.mark.parametrize(
    "view",
    [
        lambda g: g.T,
        lambda g: g[::2, 1::2],
        lambda g: g[:, ::3],
        lambda g: g[::-1],
        lambda g: g[:, ::-1],
        lambda g: g[::-2, ::-1],
        lambda g: g.reshape(2, 3, 10).transpose(1, 2, 0),
    ],
    ids=["transposed", "step2", "step3-cols", "neg-rows", "neg-cols", "neg-both", "permuted-3d"],
)
def test_strided_inputs_values(add, grid, view):
    v = view(grid)
    np.testing.assert_array_equal(add(v, 1.5), v + 1.5)
    np.testing.assert_array_equal(add(v, v), v + v)


@pytest.mark.parametrize(
    "view",
    [lambda g: g.T, lambda g: np.asfortranarray(g), lambda g: g.reshape(2, 3, 10).transpose(2, 0, 1),
     lambda g: g.reshape(2, 3, 10).transpose(1, 2, 0)],
    ids=["transposed", "fortran", "permuted-201", "permuted-120"],
)
def test_output_follows_input_memory_order(add, grid, view):
    v = view(grid)
    got = add(v, 1.0)
    assert got.strides == (v + 1.0).strides
    np.testing.assert_array_equal(got, v + 1.0)


@pytest.mark.parametrize("view", [lambda g: g[::-1], lambda g: g[::-1, ::-1],
                                  lambda g: g.reshape(2, 3, 10)[:, ::-1]], ids=["rows", "both", "3d-middle"])
def test_output_of_flipped_input_is_c_ordered(add, grid, view):
    v = view(grid)
    got = add(v, 1.0)
    assert got.strides == (v + 1.0).strides  # NumPy: C order (absolute strides)


def test_unaligned_input_and_output(add):
    buf = bytearray(8 * 10 + 1)
    x = np.frombuffer(buf, dtype=np.float64, offset=1, count=10)
    x[:] = np.arange(10)
    np.testing.assert_array_equal(add(x, 1.0), np.arange(10) + 1.0)
    add(np.arange(10.0), 2.0, out=x)
    np.testing.assert_array_equal(x, np.arange(10) + 2.0)


def test_readonly_input(add):
    row = np.arange(3.0)
    x = np.broadcast_to(row, (4, 3))
    got = add(x, np.ones((4, 3)))
    np.testing.assert_array_equal(got, x + 1.0)


# ---------------------------------------------------------------------------------
# Scalars: NumPy 2 (NEP 50) promotion
# ---------------------------------------------------------------------------------

SCALAR_ARRAYS = ["bool", "int8", "uint8", "int64", "float16", "float32", "complex64"]
PY_SCALARS = [True, 3, 2.5, 1 + 2j]


@pytest.mark.parametrize("dtype", SCALAR_ARRAYS)
@pytest.mark.parametrize("scalar", PY_SCALARS, ids=["bool", "int", "float", "complex"])
def test_python_scalar_right(add, dtype, scalar):
    x = values(dtype, (6,), 7, span=10.0)
    expected = x + scalar
    got = add(x, scalar)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("dtype, scalar", [("int8", 3), ("uint8", True), ("float32", 2.5), ("float16", 1.25),
                                           ("int64", 1j), ("complex64", 2.0)])
def test_python_scalar_left(add, dtype, scalar):
    x = values(dtype, (6,), 8, span=10.0)
    expected = scalar + x
    got = add(scalar, x)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


def test_python_float_is_rounded_to_float16_first(add):
    # NumPy 2 casts the weak scalar to float16 (1 + 2**-12 -> 1.0), so 2048 + 1 ties to 2048.
    x = np.array([2048.0], np.float16)
    s = 1 + 2**-12
    got = add(x, s)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, x + s)
    assert got[0] == 2048


@pytest.mark.parametrize(
    "scalar",
    [np.bool_(True), np.int64(5), np.float32(1.5), np.uint8(200), np.int8(-3), np.float16(1.5),
     np.complex64(1j), np.array(2), np.array(2.5, np.float32)],
    ids=lambda s: f"{type(s).__name__}-{np.asarray(s).dtype}",
)
@pytest.mark.parametrize("dtype", ["int8", "float32"])
def test_numpy_scalars_are_strong(add, dtype, scalar):
    x = values(dtype, (5,), 9, span=10.0)
    expected = x + scalar
    got = add(x, scalar)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("scalar", [np.float64(2.0), np.complex128(2j)], ids=["float64", "complex128"])
def test_numpy_float64_scalar_is_strong(add, scalar):
    x = np.arange(3, dtype=np.float32)
    got = add(x, scalar)
    assert got.dtype == (x + scalar).dtype


@pytest.mark.parametrize("dtype, scalar", [("uint8", -1), ("uint8", 300), ("int8", 128), ("int8", -129),
                                           ("int16", 40000)])
def test_python_int_out_of_bounds_raises(add, dtype, scalar):
    with pytest.raises(OverflowError, match=f"Python integer {scalar} out of bounds for {dtype}"):
        add(np.zeros(3, np.dtype(dtype)), scalar)
    with pytest.raises(OverflowError):  # the oracle agrees that it is an error
        np.zeros(3, np.dtype(dtype)) + scalar


@pytest.mark.parametrize("dtype, scalar", [("uint64", 2**63), ("float64", 2**64)])
def test_python_int_beyond_int64_computes_as_numpy(add, dtype, scalar):
    # tvm-ffi carries Python ints as int64; a wider one takes the checked path, which
    # passes it as NumPy 2 converts it (a uint64 result: as uint64; a float: as float).
    x = np.arange(3, dtype=np.dtype(dtype))
    got = add(x, scalar)
    assert got.dtype == (x + scalar).dtype
    np.testing.assert_array_equal(got, x + scalar)
    np.testing.assert_array_equal(add(x, np.array(scalar, dtype=dtype)), x + np.array(scalar, dtype=dtype))


def test_only_scalars_give_a_numpy_scalar(add):
    got = add(1, 2.5)  # a 0-d result is a NumPy scalar, as np.add(1, 2.5) returns
    assert type(got) is np.float64 and type(got) is type(np.add(1, 2.5))
    assert got == 3.5
    got = add(2, 3)
    assert got.dtype == np.int64 and got == 5


def test_zero_dim_arrays_give_a_numpy_scalar_and_others_arrays(add):
    # 0-d arrays take the NumPy call function, which declines a 0-d result (the
    # checked path makes the NumPy scalar), and a 0-d array broadcast against a
    # 1-d one still gives an array
    x, y = np.array(1.5, np.float32), np.array(2.0, np.float32)
    for _ in range(3):  # the first call makes the call function; the others use it
        got = add(x, y)
        assert type(got) is np.float32 and got == 3.5
        got = add(x, 1.0)
        assert type(got) is np.float32 and got == 2.5
        got = add(x, np.ones(1, np.float32))
        assert type(got) is np.ndarray and got.shape == (1,) and got[0] == 2.5


# ---------------------------------------------------------------------------------
# out=
# ---------------------------------------------------------------------------------


def test_out_in_place_first_input(add):
    a = np.arange(5.0)
    b = np.full(5, 2.0)
    res = add(a, b, out=a)
    assert res is a
    np.testing.assert_array_equal(a, np.arange(5.0) + 2.0)


def test_out_in_place_second_input_and_strided(add):
    a = np.arange(5.0)
    b = np.full(5, 2.0)
    add(a, b, out=b)
    np.testing.assert_array_equal(b, np.arange(5.0) + 2.0)
    x = np.arange(8.0)
    add(x[::2], 1.0, out=x[::2])
    np.testing.assert_array_equal(x, [1, 1, 3, 3, 5, 5, 7, 7])


def test_out_same_elements_through_another_view_is_in_place(add):
    w = np.arange(4.0)
    add(w.reshape(2, 2), 1.0, out=w.reshape(2, 2))
    np.testing.assert_array_equal(w, [1, 2, 3, 4])


def test_out_tuple_for_one_output_is_returned(add):
    o = np.empty(3)
    res = add(np.ones(3), 1.0, out=(o,))
    assert isinstance(res, tuple) and res[0] is o
    np.testing.assert_array_equal(o, 2.0)


@pytest.mark.parametrize(
    "din, dout",
    [("float32", "float64"), ("int64", "int8"), ("uint8", "int8"), ("float64", "float32"), ("bool", "int8"),
     ("int32", "float16"), ("float32", "complex64"), ("float64", "int64"), ("int64", "uint8"),
     ("complex128", "float64"), ("int64", "bool")],
)
def test_out_cast_follows_numpy_same_kind(add, din, dout):
    x = values(din, (4,), 10, span=10.0) if din != "complex128" else np.arange(4) * (1 + 1j)
    o = np.zeros(4, np.dtype(dout))
    if np.can_cast(x.dtype, o.dtype, "same_kind"):
        expected = np.add(x, x, out=np.zeros(4, np.dtype(dout)))
        assert add(x, x, out=o) is o
        np.testing.assert_array_equal(o, expected)
    else:
        with pytest.raises(TypeError, match=f"the result type {din} cannot be cast safely to the output type "
                                            f"{dout} of out\\[0\\]"):
            add(x, x, out=o)


def test_out_shape_mismatch(add):
    with pytest.raises(ValueError, match=r"out\[0\] has shape \(5,\) but the inputs broadcast to \(4,\)"):
        add(np.ones(4), np.ones(4), out=np.empty(5))
    with pytest.raises(ValueError, match="does not resize outputs"):
        add(np.ones((2, 4)), np.ones(4), out=np.empty(4))


def test_wrong_number_of_outs(add, divmod_kernel):
    with pytest.raises(TypeError, match=r"out must hold 1 tensor\(s\), got 2"):
        add(np.ones(4), 1.0, out=(np.empty(4), np.empty(4)))
    with pytest.raises(TypeError, match=r"out must hold 2 tensor\(s\), got 1"):
        divmod_kernel(np.arange(4), 3, out=np.empty(4, np.int64))


def test_out_that_is_not_a_tensor(add):
    with pytest.raises(TypeError, match=r"out\[0\] must be a tensor"):
        add(np.ones(4), 1.0, out=3.0)


# ---------------------------------------------------------------------------------
# Overlap checks
# ---------------------------------------------------------------------------------


def test_out_partially_overlapping_an_input(add):
    x = np.arange(10.0)
    with pytest.raises(ValueError, match=r"out\[0\] partially overlaps input #0"):
        add(x[:-1], 1.0, out=x[1:])
    with pytest.raises(ValueError, match=r"out\[0\] partially overlaps input #1"):
        add(x[1:], x[:-1], out=x[1:])
    np.testing.assert_array_equal(x, np.arange(10.0))  # nothing written


@pytest.mark.parametrize("shape, strides, dim", [((3, 4), (8, 0), 1), ((3, 4), (0, 8), 0)])
def test_out_with_zero_stride_overlaps_itself(add, shape, strides, dim):
    base = np.zeros(max(shape))
    o = np.lib.stride_tricks.as_strided(base, shape=shape, strides=strides, writeable=True)
    with pytest.raises(ValueError, match=f"out\\[0\\] has stride 0 in dimension {dim}"):
        add(np.ones(shape), 1.0, out=o)


def test_two_outputs_sharing_memory(divmod_kernel):
    q = np.empty(4, np.int64)
    with pytest.raises(ValueError, match=r"out\[0\] partially overlaps out\[1\]"):
        divmod_kernel(np.arange(4), 3, out=(q, q))


# ---------------------------------------------------------------------------------
# Multiple outputs, extra scalar arguments
# ---------------------------------------------------------------------------------


def test_two_outputs_divmod(divmod_kernel):
    a = np.arange(20).reshape(4, 5)
    b = np.array([1, 2, 3, 4, 7])
    q, r = divmod_kernel(a, b)
    eq, er = np.divmod(a, b)  # non-negative: truncation == floor
    assert q.dtype == r.dtype == np.int64
    np.testing.assert_array_equal(q, eq)
    np.testing.assert_array_equal(r, er)


def test_two_outputs_into_out_of_different_dtypes(divmod_kernel):
    a = np.arange(10, dtype=np.int32)
    q, r = np.empty(10, np.int64), np.empty(10, np.float64)
    res = divmod_kernel(a, 3, out=(q, r))
    assert res[0] is q and res[1] is r
    np.testing.assert_array_equal(q, a // 3)
    np.testing.assert_array_equal(r, a % 3)


def test_more_operands_and_extras_than_the_call_keeps_on_its_stack(tmp_path):
    # 18 inputs (#1 and #17 Python scalars) and 10 extra scalars: past the 16 operands
    # and 128 bytes of extras a call binds on its stack, so they share one heap block.
    n_in, n_extra = 18, 10
    params = ", ".join(f"T a{i}" for i in range(n_in)) + ", " + ", ".join(f"double e{i}" for i in range(n_extra))
    body = " + ".join(f"a{i} * e{i % n_extra}" for i in range(n_in))
    weighted = kjit.elementwise(f"template <typename T> T weighted({params}) {{ return {body}; }}",
                                build_directory=str(tmp_path))
    inputs = [np.arange(5.0) + i for i in range(n_in)]
    inputs[1], inputs[17] = 2.0, -1.0
    extras = {f"e{i}": 0.5 * i for i in range(n_extra)}
    want = sum(x * (0.5 * (i % n_extra)) for i, x in enumerate(inputs))
    for out in (None, np.empty(5)):
        got = weighted(*inputs, out=out, **extras)
        np.testing.assert_array_equal(got, want)
    a = np.arange(6.0)
    with pytest.raises(ValueError, match=r"out\[0\] partially overlaps input #17"):
        weighted(*inputs[:17], a[1:], out=a[:-1], **extras)


def test_extra_scalar_argument(axpy):
    x, y = np.arange(4.0), np.ones(4)
    np.testing.assert_array_equal(axpy(x, y, alpha=2.5), 2.5 * x + y)
    np.testing.assert_array_equal(axpy(x.astype(np.int32), y.astype(np.int32), alpha=3), 3 * x + 1)


def test_extra_scalars_in_keyword_order(lin):
    x, y = np.arange(4.0), np.ones(4)
    np.testing.assert_array_equal(lin(x, y, alpha=2, beta=3), 2 * x - 3 * y)
    # Passed by position in keyword order, not matched by name.
    np.testing.assert_array_equal(lin(x, y, beta=3, alpha=2), 3 * x - 2 * y)


def test_extra_scalar_in_float32_for_float16(lin):
    x = np.arange(4, dtype=np.float16)
    y = np.ones(4, np.float16)
    got = lin(x, y, alpha=0.1, beta=3)
    expected = (np.float32(0.1) * x.astype(np.float32) - np.float32(3) * y.astype(np.float32)).astype(np.float16)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, expected)


def test_missing_extra_scalar_is_a_type_error_naming_the_counts(axpy):
    with pytest.raises(TypeError, match=r"^axpy: the entry function axpy\(x, y, alpha\) takes 3 arguments: the call's "
                                        r"inputs, then its extra arguments \(keywords, in order\); this call passes "
                                        r"2 inputs and 0 extra arguments$"):
        axpy(np.arange(3.0), np.ones(3))


@pytest.mark.parametrize(("code", "call", "message"), [
    # an axis= meant for a reduction is an extra argument the entry does not take
    ("template <typename T> T add(T a, T b) { return a + b; }",
     lambda f: f(np.ones((2, 3)), 1.0, axis=1), r"add\(a, b\) takes 2 arguments: .* 2 inputs and 1 extra argument$"),
    ("template <typename T> T add(T a, T b) { return a + b; }",
     lambda f: f(np.ones(2), 1, 2), r"takes 2 arguments: .* 3 inputs and 0 extra arguments$"),
    ("template <typename T> void sc(T a, T s, T& o) { o = a * s; }",
     lambda f: f(np.ones(2), 2.0, k=1),
     r"sc\(a, s, o\) takes 3 arguments: the call's inputs, then its extra arguments \(keywords, in order\), then "
     r"its 1 output by reference; this call passes 2 inputs and 1 extra argument$"),
    ("template <typename T> T f(T a, T b = T(1), T c = T(2)) { return a + b + c; }",
     lambda f: f(np.ones(2), 1.0, 2.0, 3.0), r"f\(a, b, c\) takes 1 to 3 arguments: .* 4 inputs and 0 extra"),
])
def test_a_call_with_the_wrong_number_of_arguments_is_refused_before_any_compile(code, call, message, tmp_path):
    f = kjit.elementwise(code, build_directory=str(tmp_path))
    with pytest.raises(TypeError, match=message):
        call(f)
    assert not any(tmp_path.rglob("*.so")), "a kernel was compiled"


def test_defaults_packs_and_overloads_take_what_the_compiler_takes():
    dflt = kjit.elementwise("template <typename T> T f(T a, T b = T(1)) { return a + b; }")
    np.testing.assert_array_equal(dflt(np.ones(2)), [2.0, 2.0])
    np.testing.assert_array_equal(dflt(np.ones(2), 2.0), [3.0, 3.0])
    pack = kjit.elementwise("template <typename... A> double s(A... a) { return (0.0 + ... + double(a)); }")
    np.testing.assert_array_equal(pack(np.ones(2), 2.0, 3.0), [6.0, 6.0])
    over = kjit.elementwise("double g(double a) { return a; }\ndouble g(double a, double b) { return a * b; }")
    np.testing.assert_array_equal(over(np.full(2, 3.0), 2.0), [6.0, 6.0])


def test_a_kernel_that_does_not_compile_is_not_compiled_again(tmp_path, capfd):
    bad = kjit.elementwise("template <typename T> T g(T a) { return a +; }", build_directory=str(tmp_path),
                           verbose=True)
    errors = []
    for _ in range(3):
        with pytest.raises(kjit.CompileError) as info:
            bad(np.ones(2))
        errors.append(str(info.value))
    assert errors[0] == errors[1] == errors[2] and "code:1:" in errors[0]
    # a slow machine adds "still compiling" progress lines to the one compile
    assert len(re.findall(r"^\[kjit\] compiling", capfd.readouterr().err, re.M)) == 1


def test_extra_float_scalar_converted_to_integer_compute_type(axpy):
    x, y = np.arange(4), np.ones(4, np.int64)
    np.testing.assert_array_equal(axpy(x, y, alpha=2.5), 2 * x + y)


def test_extra_complex_scalar(axpy):
    x, y = np.arange(4.0).astype(np.complex128), np.ones(4, np.complex128)
    np.testing.assert_array_equal(axpy(x, y, alpha=1j), 1j * x + y)


def test_extra_numpy_scalar_with_out(lin):
    x, y = np.arange(4.0), np.ones(4)
    o = np.empty(4)
    lin(x, y, alpha=np.float32(2), beta=3, out=o)
    np.testing.assert_array_equal(o, 2 * x - 3 * y)


# ---------------------------------------------------------------------------------
# 0-d and empty tensors
# ---------------------------------------------------------------------------------


def test_zero_dim_inputs(add):
    got = add(np.array(1.5), np.array(2, np.int32))
    expected = np.array(1.5) + np.array(2, np.int32)
    assert got.shape == () and got.dtype == expected.dtype and got == expected
    o = np.empty((), np.int64)
    assert add(1, 2, out=o) is o and o == 3


def test_empty_1d(add):
    got = add(np.ones(0), np.ones(0, np.int32))
    assert got.shape == (0,) and got.dtype == np.float64
    assert add(np.ones(0, np.int8), 1).shape == (0,)


@pytest.mark.parametrize("sa, sb", [((0, 3), (3,)), ((0, 3), (0, 3)), ((2, 0, 3), ())])
def test_empty_nd(add, sa, sb):
    x, y = np.ones(sa), np.ones(sb)
    got = add(x, y)
    assert got.shape == (x + y).shape


# ---------------------------------------------------------------------------------
# Large arrays: the threaded path (above the 32K grain)
# ---------------------------------------------------------------------------------


@pytest.mark.parametrize("n_threads", [1, 2, 3, 5])
def test_large_arrays_threaded(add, threads, n_threads):
    threads.set_num_threads(n_threads)
    assert threads.get_num_threads() == n_threads
    rng = np.random.default_rng(11)
    x = rng.standard_normal((301, 777))
    y = rng.standard_normal(777)
    np.testing.assert_array_equal(add(x, y), x + y)
    np.testing.assert_array_equal(add(x.T, 1.0), x.T + 1.0)
    np.testing.assert_array_equal(add(x[::-1, ::2], y[::2]), x[::-1, ::2] + y[::2])
    big = np.arange(1 << 20, dtype=np.int32)
    np.testing.assert_array_equal(add(big, 7), big + 7)


def test_thread_count_api(threads, monkeypatch):
    monkeypatch.delenv("KJIT_NUM_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    threads.set_num_threads(0)
    default = threads.get_num_threads()
    assert default >= 1
    threads.set_num_threads(3)
    assert threads.get_num_threads() == 3
    threads.set_num_threads(0)
    assert threads.get_num_threads() == default
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    assert threads.get_num_threads() == 4
    monkeypatch.setenv("KJIT_NUM_THREADS", "5")
    assert threads.get_num_threads() == 5
    threads.set_num_threads(2)  # the override wins over the environment
    assert threads.get_num_threads() == 2


def test_thread_api_reachable_as_kjit_elementwise_attribute():
    assert kjit.elementwise.get_num_threads() >= 1


# ---------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------

BAD_CODE = """template <typename T>
T bad(T a, T b) {
  return a + undefined_name * b;
}"""


def test_compile_error_points_into_code_and_names_dtypes():
    f = kjit.elementwise(BAD_CODE)  # nothing compiles before the first call
    with pytest.raises(kjit.CompileError) as info:
        f(np.arange(3, dtype=np.int32), np.ones(3, np.float32))
    msg = str(info.value)
    assert "code:3:" in msg  # line 3 of the user's string
    assert "undefined_name" in msg
    assert "'bad' (int32, float32) -> float64, computing in float64" in msg


def test_compile_error_has_command_and_log():
    f = kjit.elementwise(BAD_CODE)
    with pytest.raises(kjit.CompileError) as info:
        f(np.arange(3.0), np.ones(3))
    assert "code:3:" in info.value.log
    assert info.value.command


@pytest.mark.parametrize("code, bits, lanes, text", [(5, 32, 1, "dtype(code=5, bits=32)"),
                                                     (2, 32, 4, "dtype(code=2, bits=32, lanes=4)")],
                         ids=["complex32", "float32x4"])
def test_unsupported_dtype_raises_type_error(add, code, bits, lanes, text):
    with pytest.raises(TypeError, match=r"input #0 has dtype " + text.replace("(", r"\(").replace(")", r"\)")
                       + ", which kjit.elementwise does not support"):
        add(FakeDLPack(code=code, bits=bits, lanes=lanes), 1.0)


@pytest.mark.parametrize("arr", [np.array(["2020-01-01"], "datetime64[D]"),
                                 np.zeros(1, dtype=[("a", "i4"), ("b", "f4")])], ids=["datetime64", "structured"])
def test_unsupported_numpy_dtype_raises_type_error(add, arr):
    with pytest.raises(TypeError):
        add(arr, np.ones(1))


def test_non_native_byte_order_says_so(add):
    with pytest.raises(TypeError, match=r"^kjit\.elementwise: input #0 has dtype >f4, a non-native byte order"):
        add(np.arange(3, dtype=">f4"), 1.0)


def test_no_function_is_a_spec_error():
    with pytest.raises(kjit.SpecError, match="no function definition found"):
        kjit.elementwise("int x = 3;")
    with pytest.raises(kjit.SpecError, match="num_outputs must be between 1 and 64, got 0"):
        kjit.elementwise(ADD, num_outputs=0)


@pytest.mark.parametrize("bad", [[1, 2], None, "ab"], ids=["list", "None", "str"])
def test_non_tensor_input_is_a_type_error(add, bad):
    with pytest.raises(TypeError, match=r"input #0 must be a tensor \(NumPy, torch, DLPack\) or a Python/NumPy "
                                        r"scalar, got " + type(bad).__name__):
        add(bad, np.ones(2))


def test_no_inputs_is_a_type_error(add):
    for kwargs in ({}, {"alpha": 1.0}, {"out": np.empty(1)}):
        with pytest.raises(TypeError, match="^add: expected at least one input$"):
            add(**kwargs)


def test_cuda_call_without_a_driver_is_a_clear_runtime_error(add):
    # Fake CUDA descriptors (never dereferenced): the plan is made, the kernel is
    # not compiled, and the launch fails because this machine has no CUDA driver.
    a, b, out = FakeDLPack(device_type=2), FakeDLPack(device_type=2), FakeDLPack(device_type=2)
    with pytest.raises(RuntimeError, match=r"^kjit: CUDA driver not available: libcuda\.so\.1 could not "
                                           r"be loaded"):
        add(a, b, out=out)


def test_cuda_call_rules(add):
    cuda = FakeDLPack(device_type=2)
    # A Python scalar goes to the CUDA kernel by value: the call gets as far as the launch.
    with pytest.raises(RuntimeError, match=r"^kjit: CUDA driver not available"):
        add(cuda, 1.0, out=FakeDLPack(device_type=2))
    with pytest.raises(ValueError, match=r"^add: input #1 is on cpu but the call's tensors are on cuda:0; all "
                                         r"tensors of a call must be on one device$"):
        add(cuda, np.ones(4, np.float32), out=FakeDLPack(device_type=2))
    with pytest.raises(TypeError, match=r"^kjit: cannot allocate an output on cuda for FakeDLPack inputs \(kjit "
                                        r"allocates GPU memory through torch only\); pass torch tensors, or pass the "
                                        r"output \(out=\)$"):
        add(cuda, FakeDLPack(device_type=2))


def test_entry_is_name_or_last_function():
    code = "template <typename T> T sq(T a) { return a * a; }\ntemplate <typename T> T cube(T a) { return a * a * a; }"
    assert kjit.elementwise(code).name == "cube"
    sq = kjit.elementwise(code, name="sq")
    assert sq.name == "sq"
    np.testing.assert_array_equal(sq(np.arange(4)), np.arange(4) ** 2)


# ---------------------------------------------------------------------------------
# torch inputs (PyTorch promotion; torch is the oracle)
# ---------------------------------------------------------------------------------


TORCH_CASES = {
    "int32+float32": lambda t: (t.arange(4, dtype=t.int32), t.full((4,), 1.25)),
    "int64+2.5": lambda t: (t.arange(4), 2.5),
    "uint8+1000": lambda t: (t.arange(250, 254, dtype=t.uint8), 1000),
    "uint8+-1": lambda t: (t.arange(4, dtype=t.uint8), -1),
    "int8+uint8": lambda t: (t.tensor([-128, 5, 127], dtype=t.int8), t.tensor([255, 3, 200], dtype=t.uint8)),
    "bool+1": lambda t: (t.tensor([True, False]), 1),
    "bool+bool": lambda t: (t.tensor([True, False, True]), t.tensor([True, False, False])),
    "int64+1j": lambda t: (t.arange(3), 1j),
    "float64+1j": lambda t: (t.arange(3, dtype=t.float64), 1j),
    "float16+0d-float64": lambda t: (t.tensor([1.5, 2.25], dtype=t.float16), t.tensor(0.1, dtype=t.float64)),
    "int32+0d-float64": lambda t: (t.arange(3, dtype=t.int32), t.tensor(1.5, dtype=t.float64)),
    "int8+0d-uint8": lambda t: (t.tensor([1, 2], dtype=t.int8), t.tensor(200, dtype=t.uint8)),
    "0d-int8+1000": lambda t: (t.tensor(1, dtype=t.int8), 1000),
    "0d-int32+0d-float64": lambda t: (t.tensor(1, dtype=t.int32), t.tensor(1.5, dtype=t.float64)),
    "float16+bfloat16": lambda t: (t.tensor([1.5, 3.0], dtype=t.float16), t.tensor([0.1, 2.0], dtype=t.bfloat16)),
    "bfloat16+int32": lambda t: (t.tensor([1.5, 3.0], dtype=t.bfloat16), t.tensor([7, 300], dtype=t.int32)),
    "bfloat16+bfloat16": lambda t: (t.tensor([1.5, 3.0, 0.1], dtype=t.bfloat16),
                                    t.tensor([2.25, 1e3, 0.3], dtype=t.bfloat16)),
    "float16+scalar": lambda t: (t.tensor([2048.0], dtype=t.float16), 1 + 2**-12),
    "complex64+float64": lambda t: (t.tensor([1 + 1j], dtype=t.complex64), t.tensor([0.5], dtype=t.float64)),
    "float32+np.float64": lambda t: (t.ones(3), np.float64(2.0)),
}


@pytest.mark.parametrize("case", list(TORCH_CASES))
def test_torch_promotion_and_values(add, case):
    torch = pytest.importorskip("torch")
    a, b = TORCH_CASES[case](torch)
    expected = a + b
    got = add(a, b)
    assert isinstance(got, torch.Tensor)
    assert got.dtype == expected.dtype
    assert got.shape == expected.shape
    assert torch.equal(got, expected)


@pytest.mark.parametrize("da, db", [("int32", "float32"), ("float16", "float16"), ("bfloat16", "int8"),
                                    ("uint8", "int8"), ("float32", "float64")])
def test_torch_multiply_add(madd, da, db):
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(0)
    a = (torch.rand(6, 5, generator=g) * 8 - 4).to(getattr(torch, da))
    b = (torch.rand(5, generator=g) * 8 - 4).to(getattr(torch, db))
    expected = a * b + a
    got = madd(a, b, a)
    assert got.dtype == expected.dtype == torch.result_type(a, b)
    if expected.dtype.is_floating_point:
        torch.testing.assert_close(got, expected, rtol=1e-2, atol=0.1)
    else:
        assert torch.equal(got, expected)


@pytest.mark.parametrize(
    "view",
    [lambda x, y: (x.t(), 1.0), lambda x, y: (x.t(), y), lambda x, y: (y, x.t())],
    ids=["transposed", "first-decides", "first-decides-c"],
)
def test_torch_output_layout_matches_torch(add, view):
    torch = pytest.importorskip("torch")
    x = torch.arange(12.0).reshape(3, 4)
    y = torch.arange(12.0).reshape(4, 3) * 2  # C order, the shape of x.t()
    a, b = view(x, y)
    got = add(a, b)
    expected = a + b
    assert got.stride() == expected.stride()
    assert torch.equal(got, expected)


def test_torch_permuted_3d_layout(add):
    torch = pytest.importorskip("torch")
    x = torch.ones(2, 3, 4).permute(2, 0, 1)
    assert add(x, 1).stride() == (x + 1).stride()


def test_torch_out_and_in_place(add):
    torch = pytest.importorskip("torch")
    a = torch.arange(4, dtype=torch.float32)
    o = torch.empty(4, dtype=torch.float64)
    assert add(a, a, out=o) is o
    assert torch.equal(o, (a + a).double())
    add(a, 1.5, out=a)
    assert torch.equal(a, torch.arange(4, dtype=torch.float32) + 1.5)
    with pytest.raises(TypeError, match="cannot be cast safely"):
        add(a, 1.5, out=torch.empty(4, dtype=torch.int32))


def test_torch_empty_and_0d(add):
    torch = pytest.importorskip("torch")
    got = add(torch.ones(0, 3), torch.ones(3))
    assert isinstance(got, torch.Tensor) and got.shape == (0, 3)
    got = add(torch.tensor(2.0), 1)
    assert got.shape == () and got.dtype == torch.float32 and got.item() == 3.0


def test_torch_two_outputs_and_extra_scalars(divmod_kernel, axpy):
    torch = pytest.importorskip("torch")
    q, r = divmod_kernel(torch.tensor([7.0, 9.0]), torch.tensor([2.0, 4.0]))
    assert isinstance(q, torch.Tensor) and isinstance(r, torch.Tensor)
    assert torch.equal(q, torch.tensor([3.5, 2.25])) and torch.equal(r, torch.zeros(2))
    got = axpy(torch.arange(3.0), torch.ones(3), alpha=2)
    assert isinstance(got, torch.Tensor) and torch.equal(got, torch.tensor([1.0, 3.0, 5.0]))


def test_torch_out_with_two_outputs_and_extra_scalars(divmod_kernel, axpy):
    torch = pytest.importorskip("torch")
    q, r = torch.empty(2), torch.empty(2, dtype=torch.float64)
    got = divmod_kernel(torch.tensor([7.0, 9.0]), torch.tensor([2.0, 4.0]), out=(q, r))
    assert got[0] is q and got[1] is r
    assert torch.equal(q, torch.tensor([3.5, 2.25])) and torch.equal(r, torch.zeros(2, dtype=torch.float64))
    o = torch.empty(3)
    assert axpy(torch.arange(3.0), torch.ones(3), out=o, alpha=2) is o
    assert torch.equal(o, torch.tensor([1.0, 3.0, 5.0]))
    with pytest.raises(TypeError, match="cannot be cast safely"):
        axpy(torch.arange(3.0), torch.ones(3), out=torch.empty(3, dtype=torch.int64), alpha=2)


def test_torch_unsupported_dtype(add):
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match="which kjit.elementwise does not support"):
        add(torch.ones(2).to(torch.float8_e4m3fn), torch.ones(2))


def test_torch_cuda_with_a_python_scalar(add):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    got = add(torch.ones(3, device="cuda"), 1.5)
    assert got.is_cuda and torch.equal(got.cpu(), torch.full((3,), 2.5))


# ---------------------------------------------------------------------------------
# Other DLPack producers
# ---------------------------------------------------------------------------------


def test_tvm_ffi_tensor_gives_tvm_ffi_tensor(add):
    tvm_ffi = pytest.importorskip("tvm_ffi")
    a = tvm_ffi.from_dlpack(np.arange(5.0))
    b = tvm_ffi.from_dlpack(np.full(5, 0.5))
    got = add(a, b)
    assert isinstance(got, tvm_ffi.Tensor)
    np.testing.assert_array_equal(np.from_dlpack(got), np.arange(5.0) + 0.5)
    got = add(a, 2.0)
    assert isinstance(got, tvm_ffi.Tensor)
    np.testing.assert_array_equal(np.from_dlpack(got), np.arange(5.0) + 2.0)


# ---------------------------------------------------------------------------------
# the tiled layout for tiny inner dims (PyTorch issue 57611)
# ---------------------------------------------------------------------------------


@pytest.mark.parametrize("sa, sb", [((3, 1, 4), (1, 5, 4)), ((7, 1, 3), (1, 9, 3)), ((2, 1, 2), (1, 33, 2)),
                                    ((100, 1, 5), (1, 64, 5)), ((1, 32, 32, 2), (1024, 1, 1, 2))])
@pytest.mark.parametrize("dtypes", [("float32", "float32"), ("float16", "float32"), ("int8", "int64")])
def test_small_inner_dim_broadcasts_match_numpy(add, sa, sb, dtypes):
    a = (np.random.default_rng(1).random(sa) * 50).astype(dtypes[0])
    b = (np.random.default_rng(2).random(sb) * 50).astype(dtypes[1])
    np.testing.assert_array_equal(add(a, b), a + b)
    np.testing.assert_array_equal(add(b, a), b + a)


def test_small_inner_dim_with_three_operands_and_threads(madd):
    x = np.random.default_rng(3).random((1, 64, 64, 3)).astype(np.float64)
    y = np.random.default_rng(4).random((512, 1, 1, 3)).astype(np.float64)
    z = np.random.default_rng(5).random((512, 1, 64, 3)).astype(np.float64)
    np.testing.assert_allclose(madd(x, y, z), x * y + z, rtol=1e-12)


def test_new_outputs_are_fresh_writable_arrays_that_outlive_the_kernel():
    k = kjit.elementwise(ADD)
    a = np.arange(4, dtype=np.float32)
    r1, r2 = k(a, 1), k(a, 1)
    assert type(r1) is np.ndarray and r1.flags.writeable and r1.flags.c_contiguous
    assert not np.shares_memory(r1, r2)
    del k
    gc.collect()
    r1 += 1
    np.testing.assert_array_equal(r1, a + 2)
    np.testing.assert_array_equal(r2, a + 1)


def test_concurrent_calls_with_different_layouts(add):
    # tvm-ffi releases the GIL during calls: threads share the kernel's plan caches.
    import threading

    layouts = [np.arange(12.0).reshape(3, 4), np.arange(12.0).reshape(4, 3).T, np.arange(6, dtype=np.int32),
               np.arange(24, dtype=np.float32).reshape(2, 3, 4)[:, ::2]]
    errors = []

    def work(x):
        try:
            for _ in range(300):
                got = add(x, 1)
                assert got.dtype == (x + 1).dtype and got.strides == (x + 1).strides
                np.testing.assert_array_equal(got, x + 1)
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(x,)) for x in layouts * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_compile_error_of_a_repeated_call_keeps_command_and_log():
    mod = kjit.elementwise("template <typename T> T m(T a, T b) { return a % b; }")  # no % for floats
    x = np.ones(3, np.float32)
    for _ in range(2):  # the second call finds its output plan cached
        with pytest.raises(kjit.CompileError) as info:
            mod(x, x)
        assert info.value.log and "code:1:" in info.value.log and info.value.command


# --- the returned callable and its call functions (tensor-only ones, weak torch scalars) ---


def test_the_kernel_is_a_function_that_describes_itself():
    k = kjit.elementwise(MADD, num_outputs=1)
    assert callable(k) and k.name == "madd" and k.num_outputs == 1 and k.code == MADD
    assert "kjit.elementwise[madd]" in repr(k)
    assert "out=None" in k.__doc__ and "madd" in k.__doc__
    assert not hasattr(kjit, "ElementwiseKernel")


@pytest.mark.parametrize("repeat", range(3))  # the first call plans, the later ones take the hot path
def test_numpy_scalars_in_the_middle_stay_strong(madd, repeat):
    x = np.arange(4, dtype=np.float32)
    got = madd(x, np.float64(2.0), x)
    want = x * np.float64(2.0) + x
    assert got.dtype == want.dtype == np.float64
    np.testing.assert_array_equal(got, want)
    weak = madd(x, 2.0, x)  # a Python float in the middle stays weak
    assert weak.dtype == np.float32


@pytest.mark.parametrize("repeat", range(3))
def test_numpy_hot_path_falls_back_for_read_only_and_bfloat16(add, repeat):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.arange(4, dtype=np.float32)
    ro = x.copy()
    ro.flags.writeable = False
    np.testing.assert_array_equal(add(x, ro), x + ro)
    b = x.astype(ml_dtypes.bfloat16)
    got = add(b, b)
    assert got.dtype == np.dtype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(got.astype(np.float32), (x + x))


@pytest.mark.parametrize("repeat", range(3))
def test_numpy_out_on_the_hot_path(add, repeat):
    x = np.arange(6, dtype=np.float32)
    out = np.empty_like(x)
    assert add(x, x, out=out) is out
    np.testing.assert_array_equal(out, x + x)
    assert add(x, x, out=x) is x  # exact in place
    np.testing.assert_array_equal(x, np.arange(6, dtype=np.float32) * 2)
    ro = np.full_like(x, 7.0)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match=r"add: out\[0\] is a read-only NumPy array \(flags.writeable is False\); "
                       "pass a writable array"):
        add(x, x, out=ro)
    np.testing.assert_array_equal(ro, np.full_like(x, 7.0))  # the user's read-only data is untouched


def test_numpy_out_that_overlaps_an_input_partially_is_rejected_on_every_call(add):
    x = np.arange(8, dtype=np.float32)
    for _ in range(3):
        with pytest.raises(ValueError, match="partially overlaps"):
            add(x[:4], x[:4], out=x[1:5])


@pytest.mark.parametrize("repeat", range(3))
def test_torch_numpy_scalars_are_weak_as_in_torch(add, madd, repeat):
    torch = pytest.importorskip("torch")
    x = torch.arange(4, dtype=torch.int32)
    for s in (np.float64(2.5), np.float32(2.5), np.int64(3), 2.5, 3):
        got, want = add(x, s), x + s
        assert got.dtype == want.dtype, (type(s), got.dtype, want.dtype)
        torch.testing.assert_close(got, want)
    h = torch.ones(3, dtype=torch.float16)
    assert madd(h, np.float64(2.0), h).dtype == (h * np.float64(2.0) + h).dtype == torch.float16


def test_torch_out_on_the_hot_path_and_bad_out(add):
    torch = pytest.importorskip("torch")
    x = torch.arange(5, dtype=torch.float32)
    out = torch.empty(5)
    for _ in range(3):
        assert add(x, 1.0, out=out) is out
        torch.testing.assert_close(out, x + 1)
    with pytest.raises(ValueError, match="partially overlaps"):
        add(x[:3], x[:3], out=x[1:4])
    with pytest.raises(TypeError, match="cannot be cast|safe"):
        add(x, x, out=torch.empty(5, dtype=torch.int32))


def test_non_tensor_arguments_get_kjits_message_on_every_path(add):
    torch = pytest.importorskip("torch")
    for first in (np.ones(2), torch.ones(2)):
        for bad in ("a", [1, 2, 3, 4], [1.0, 2.0], None, object()):
            for _ in range(2):
                with pytest.raises(TypeError, match=r"input #1 must be a tensor .* got "):
                    add(first, bad)


@pytest.mark.parametrize("repeat", range(3))
def test_extra_scalars_on_the_hot_path_match_numpy(axpy, repeat):
    x = np.arange(4, dtype=np.float32)
    y = np.ones(4, dtype=np.float32)
    for alpha in (2, 2.5, True, np.float64(2.5), np.int8(3)):  # cast to the compute type, whatever their type
        got = axpy(x, y, alpha=alpha)
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, np.float32(alpha) * x + y)
    got = axpy(x, 2, alpha=0.5)  # a Python scalar input and an extra
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, 0.5 * x + 2)
    got = axpy(x, np.float64(2), alpha=0.5)  # a NumPy scalar input stays strong
    assert got.dtype == np.float64
    out = np.empty_like(x)
    assert axpy(x, y, out=out, alpha=3.0) is out
    np.testing.assert_allclose(out, 3 * x + y)
    with pytest.raises(TypeError, match="extra argument 'alpha' must be a scalar, got list"):
        axpy(x, y, alpha=[1.0])


def test_torch_extra_scalars_on_the_hot_path(axpy):
    torch = pytest.importorskip("torch")
    x = torch.arange(4, dtype=torch.float32)
    y = torch.ones(4)
    for _ in range(3):
        torch.testing.assert_close(axpy(x, y, alpha=2.0), 2 * x + y)
        torch.testing.assert_close(axpy(x, y, alpha=np.float32(0.5)), 0.5 * x + y)
        out = torch.empty(4)
        assert axpy(x, y, out=out, alpha=3) is out
        torch.testing.assert_close(out, 3 * x + y)
    with pytest.raises(TypeError, match="extra argument 'alpha' must be a scalar, got str"):
        axpy(x, y, alpha="2")
