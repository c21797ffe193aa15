"""kjit.elementwise dtype rules against NumPy 2 and PyTorch: promotion of any number
of inputs, rounding of 16-bit float results, casts of inputs to the common dtype,
the compute= option, NumPy's conventions (scalars for 0-d results, out=
broadcasting, OverflowError), and NumPy's NEP 50 promotion tests ported to kjit.

Promotion is checked through f.result_type, which compiles nothing, so the tables
are exhaustive; values run on a few kernels.
"""

import itertools
import warnings

import numpy as np
import pytest

import kjit

if int(np.__version__.split(".")[0]) < 2:
    pytest.skip("the NumPy oracle needs NumPy 2 promotion (NEP 50)", allow_module_level=True)

try:
    import ml_dtypes
except ImportError:
    ml_dtypes = None

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")
needs_ml_dtypes = pytest.mark.skipif(ml_dtypes is None, reason="ml_dtypes is not installed")

ADD = "template <typename T> T add(T a, T b) { return a + b; }"
ADD3 = "template <typename T> T add3(T a, T b, T c) { return a + b + c; }"
SIN = "template <typename T> T sine(T x) { return std::sin(x); }"

NAMES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "bfloat16",
         "float32", "float64", "complex64", "complex128"]
if ml_dtypes is None:
    NAMES.remove("bfloat16")


def np_dtype(name):
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


@pytest.fixture(scope="module")
def add():
    return kjit.elementwise(ADD)


@pytest.fixture(scope="module")
def add3():
    return kjit.elementwise(ADD3)


def numpy_result(*inputs):
    """np.result_type, or the exception type NumPy raises."""
    try:
        return np.result_type(*inputs)
    except TypeError:
        return TypeError


def kjit_result(f, *inputs):
    try:
        return f.result_type(*inputs)
    except TypeError:
        return TypeError


# ---------------------------------------------------------------------------------
# Class 3: promotion of any number of inputs, whatever their order
# ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtypes, expected", [
    (("uint8", "int8", "float16"), "float16"),
    (("float16", "uint8", "int8"), "float16"),
    (("int8", "float16", "uint8"), "float16"),
    (("int16", "uint16", "float16"), "float32"),
    (("uint16", "float16", "int16"), "float32"),
])
def test_three_inputs_promote_as_np_result_type(add3, dtypes, expected):
    arrays = [np.ones(2, d) for d in dtypes]
    assert np.result_type(*arrays) == expected
    got = add3(*arrays)
    assert got.dtype == expected
    np.testing.assert_array_equal(got, np.full(2, 3, expected))


def _numpy_resolves(names):
    """Whether np.result_type gives one dtype for every order (with ml_dtypes'
    bfloat16 it may raise, for some orders or all)."""
    arrays = [np.ones(1, np_dtype(n)) for n in names]
    answers = {numpy_result(*p) for p in itertools.permutations(arrays)}
    return len(answers) == 1 and TypeError not in answers


def test_numpy_promotion_of_every_pair_and_triple_matches_result_type(add3):
    checked = 0
    for names in itertools.chain(itertools.product(NAMES, repeat=2), itertools.combinations_with_replacement(NAMES, 3)):
        arrays = [np.ones(1, np_dtype(n)) for n in names]
        if not _numpy_resolves(names):
            continue  # bfloat16 with float16 or wide integers: see test_bfloat16_promotes_as_ml_dtypes_ufuncs
        for perm in set(itertools.permutations(range(len(names)))):
            ordered = [arrays[i] for i in perm]
            assert kjit_result(add3, *ordered) == numpy_result(*ordered), [names[i] for i in perm]
            checked += 1
    assert checked > 3000


@needs_ml_dtypes
@pytest.mark.parametrize("other", [n for n in NAMES if n != "bfloat16"])
def test_bfloat16_promotes_as_ml_dtypes_ufuncs(add, other):
    # np.result_type raises for bfloat16 with float16 or integers wider than 8 bits,
    # but ml_dtypes' ufunc loops run: kjit gives the dtype np.add gives.
    x, y = np.ones(2, ml_dtypes.bfloat16), np.ones(2, other)
    assert add.result_type(x, y) == np.add(x, y).dtype == add.result_type(y, x)


@pytest.mark.parametrize("scalar", [True, 3, 2.5, 1j])
def test_numpy_promotion_with_a_python_scalar_matches_result_type(add3, scalar):
    for a, b in itertools.product([n for n in NAMES if n != "bfloat16"], repeat=2):
        x, y = np.ones(1, a), np.ones(1, b)
        for args in ((x, y, scalar), (scalar, x, y), (x, scalar, y)):
            assert kjit_result(add3, *args) == numpy_result(*args), (a, b, scalar)


TORCH_NAMES = [n for n in NAMES]


@needs_torch
def test_torch_promotion_of_every_pair_matches_promote_types(add):
    for a, b in itertools.product(TORCH_NAMES, repeat=2):
        ta, tb = getattr(torch, a), getattr(torch, b)
        try:
            expected = torch.promote_types(ta, tb)
        except RuntimeError:
            expected = TypeError
        got = kjit_result(add, torch.ones(1, dtype=ta), torch.ones(1, dtype=tb))
        assert got == expected, (a, b)


def _torch_operand(kind, name):
    """A torch operand of a ResultTypeState category: dims, a 0-d tensor, a Python scalar."""
    dt = getattr(torch, name)
    if kind == "dim":
        return torch.ones(2, dtype=dt)
    if kind == "zero":
        return torch.ones((), dtype=dt)
    return {"bool": True, "int64": 2, "float64": 2.5, "complex128": 1j}[name]


def _torch_expected(x, z, w):
    """TensorIterator's ResultTypeState over a dims tensor x, a 0-d tensor z and a
    Python scalar w: combine(x, combine(z, w)), each step torch.result_type of two
    operands of those categories. TypeError where torch raises or gives complex32,
    which kjit lacks."""
    try:
        lower = torch.result_type(z, w)
        with warnings.catch_warnings():  # torch warns that complex32 is experimental
            warnings.simplefilter("ignore")
            result = torch.result_type(x, torch.ones((), dtype=lower))
    except RuntimeError:
        return TypeError
    return TypeError if result in (torch.complex32, getattr(torch, "bcomplex32", None)) else result


@needs_torch
def test_torch_promotion_of_three_categories_matches_torch(add3):
    for a, b, s in itertools.product(TORCH_NAMES, TORCH_NAMES, ["bool", "int64", "float64", "complex128"]):
        x, z, w = _torch_operand("dim", a), _torch_operand("zero", b), _torch_operand("py", s)
        expected = _torch_expected(x, z, w)
        for args in ((x, z, w), (w, x, z), (z, w, x)):
            assert kjit_result(add3, *args) == expected, (a, b, s)


@needs_torch
def test_torch_refusals_name_the_inputs(add):
    with pytest.raises(TypeError, match=r"add: PyTorch's rules do not promote input #1 \(int8\) with uint16 .*torch "
                                        r"promotes uint16, uint32 and uint64 only with themselves and floating types"):
        add(torch.ones(2, dtype=torch.uint16), torch.ones(2, dtype=torch.int8))
    with pytest.raises(RuntimeError):  # the oracle agrees
        torch.ones(2, dtype=torch.uint16) + torch.ones(2, dtype=torch.int8)
    with pytest.raises(TypeError, match=r"add: under PyTorch's rules the result type is complex32 \(a float16 or "
                                        r"bfloat16 input with a complex one\), which kjit.elementwise does not support"):
        add(torch.ones(2, dtype=torch.float16), 1j)
    with warnings.catch_warnings():  # torch warns that complex32 is experimental
        warnings.simplefilter("ignore")
        assert (torch.ones(2, dtype=torch.float16) + 1j).dtype == torch.complex32


# ---------------------------------------------------------------------------------
# Class 4: 16-bit float results round before a wider out=
# ---------------------------------------------------------------------------------


@pytest.mark.parametrize("half", ["float16", "bfloat16"])
@pytest.mark.parametrize("wide", ["float32", "float64", "complex64"])
def test_half_result_rounds_before_a_wider_out_numpy(add, half, wide):
    if half == "bfloat16" and ml_dtypes is None:
        pytest.skip("ml_dtypes is not installed")
    big = 2048 if half == "float16" else 256  # the last integer step of 1 is below it
    x, y = np.full(3, big, np_dtype(half)), np.ones(3, np_dtype(half))
    expected = np.add(x, y, out=np.empty(3, wide))
    got = add(x, y, out=np.empty(3, wide))
    np.testing.assert_array_equal(got, expected)
    assert got[0] == big  # rounded to the 16-bit type first, as NumPy does


@needs_torch
@pytest.mark.parametrize("half", ["float16", "bfloat16"])
def test_half_result_rounds_before_a_wider_out_torch(add, half):
    dt = getattr(torch, half)
    big = 2048 if half == "float16" else 256
    x, y = torch.full((3,), big, dtype=dt), torch.ones(3, dtype=dt)
    expected = torch.add(x, y, out=torch.empty(3, dtype=torch.float32))
    got = add(x, y, out=torch.empty(3, dtype=torch.float32))
    assert torch.equal(got, expected) and got[0].item() == big


# ---------------------------------------------------------------------------------
# Class 5: inputs are cast to the common dtype before the computation
# ---------------------------------------------------------------------------------


@needs_torch
@pytest.mark.parametrize("half", ["float16", "bfloat16"])
@pytest.mark.parametrize("other", ["int32", "int64", "float64"])
def test_inputs_cast_to_a_half_common_dtype_torch(add, half, other):
    dt, ot = getattr(torch, half), getattr(torch, other)
    big = 2049 if half == "float16" else 257  # not representable: rounds to 2048 / 256
    x = torch.full((4,), big, dtype=ot)
    y = torch.ones((), dtype=ot) if other == "float64" else torch.ones(4, dtype=dt)
    x, y = (x, y) if other != "float64" else (torch.ones(4, dtype=dt), torch.full((), big, dtype=ot))
    expected = x + y
    got = add(x, y)
    assert got.dtype == expected.dtype == dt
    assert torch.equal(got, expected)


@needs_ml_dtypes
def test_inputs_cast_to_the_loop_dtype_numpy(add):
    # bfloat16 + uint8 is a bfloat16 loop: 255 rounds to 256 before the add.
    x = np.full(3, 255, np.uint8)
    y = np.ones(3, ml_dtypes.bfloat16)
    expected = x + y
    got = add(x, y)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got.astype(np.float32), expected.astype(np.float32))


# ---------------------------------------------------------------------------------
# Class 9: integer inputs to floating computations (compute=)
# ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int16", "int32", "int64", "uint64", "float32"])
def test_compute_float_promotes_integers_as_np_sin(dtype):
    sine = kjit.elementwise(SIN, compute="float")
    x = np.arange(5).astype(dtype)
    expected = np.sin(x)
    got = sine(x)
    assert got.dtype == expected.dtype
    np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64), rtol=1e-3)


@needs_torch
@pytest.mark.parametrize("dtype", ["bool", "int8", "int32", "int64", "float64"])
def test_compute_float_promotes_integers_as_torch_sin(dtype):
    sine = kjit.elementwise(SIN, compute="float")
    x = torch.arange(5).to(getattr(torch, dtype))
    expected = torch.sin(x)
    got = sine(x)
    assert got.dtype == expected.dtype
    torch.testing.assert_close(got, expected)


def test_integer_sine_without_compute_truncates_and_with_it_does_not():
    x = np.arange(1, 4, dtype=np.int32)
    assert kjit.elementwise(SIN)(x).tolist() == [0, 0, 0]  # the promoted type is int32: C++ truncates
    np.testing.assert_allclose(kjit.elementwise(SIN, compute="float")(x), np.sin(x))


def test_declared_float_return_promotes_integer_inputs():
    sine = kjit.elementwise("double sine(double x) { return std::sin(x); }")
    x = np.arange(1, 4, dtype=np.int32)
    got = sine(x)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, np.sin(x))


def test_binary_compute_float_picks_numpy_loop():
    # np.arctan2(int8, uint8) runs the float16 loop (both cast to it safely).
    atan2 = kjit.elementwise("template <typename T> T at2(T y, T x) { return std::atan2(y, x); }", compute="float")
    y, x = np.arange(1, 4, dtype=np.int8), np.arange(1, 4, dtype=np.uint8)
    assert atan2(y, x).dtype == np.arctan2(y, x).dtype == np.float16


@pytest.mark.parametrize("compute", ["float64", np.float64, np.dtype("float64")])
def test_compute_dtype_casts_every_input(compute):
    add = kjit.elementwise(ADD, compute=compute)
    got = add(np.arange(3, dtype=np.int8), np.float32(0.5))
    expected = np.add(np.arange(3, dtype=np.int8), np.float32(0.5), dtype=np.float64)
    assert got.dtype == expected.dtype == np.float64
    np.testing.assert_array_equal(got, expected)


@needs_torch
def test_compute_accepts_a_torch_dtype():
    add = kjit.elementwise(ADD, compute=torch.float64)
    assert add(torch.ones(2, dtype=torch.int32), 1).dtype == torch.float64


def test_compute_dtype_refuses_an_input_that_does_not_cast():
    add = kjit.elementwise(ADD, compute="int32")
    with pytest.raises(TypeError, match=r"add: input #1 has dtype float64, which cannot be cast safely to the compute "
                                        r"type int32"):
        add(np.ones(2, np.int32), np.ones(2))
    with pytest.raises(TypeError):  # the oracle agrees
        np.add(np.ones(2, np.int32), np.ones(2), dtype=np.int32)


def test_compute_option_rejects_unknown_names():
    with pytest.raises(kjit.SpecError, match="compute='quad' is neither 'float' nor a dtype"):
        kjit.elementwise(ADD, compute="quad")
    # a spelling of one dtype in NumPy, torch and C++ alike names it
    assert kjit.elementwise(ADD, compute="double")(np.ones(2, np.float32), np.ones(2, np.float32)).dtype == np.float64
    with pytest.raises(TypeError, match="compute must be None, 'float', a dtype name"):
        kjit.elementwise(ADD, compute=object())


# ---------------------------------------------------------------------------------
# Class 11: NumPy's conventions
# ---------------------------------------------------------------------------------


def test_zero_dim_numpy_results_are_numpy_scalars(add):
    for args in ((np.array(1.5), np.array(2, np.int32)), (np.float32(1), 2), (np.array(1, np.uint8), 3)):
        got, expected = add(*args), np.add(*args)
        assert type(got) is type(expected) and got == expected
    o = np.empty((), np.float64)
    assert add(np.array(1.0), 2.0, out=o) is o  # out= is returned as given


def test_zero_dim_results_of_several_outputs_are_scalars():
    dm = kjit.elementwise("template <typename T> void dm(T a, T b, T& q, T& r) { q = a / b; r = a - q * b; }",
                          num_outputs=2)
    q, r = dm(np.array(7), np.array(2))
    assert type(q) is np.int64 and (q, r) == (3, 1)


@needs_torch
def test_zero_dim_torch_results_stay_tensors(add):
    got = add(torch.tensor(1.0), 2.0)
    assert isinstance(got, torch.Tensor) and got.shape == ()


@pytest.mark.parametrize("shapes, out_shape", [
    (((3,), ()), (2, 3)), (((1, 3), (3,)), (4, 2, 3)), (((), ()), (5,)), (((2, 1), (1, 3)), (2, 3)),
])
def test_numpy_out_may_be_larger_than_the_broadcast_shape(add, shapes, out_shape):
    x, y = np.arange(np.prod(shapes[0])).reshape(shapes[0]) + 1.0, np.full(shapes[1], 0.5)
    expected = np.add(x, y, out=np.empty(out_shape))
    out = np.empty(out_shape)
    assert add(x, y, out=out) is out
    np.testing.assert_array_equal(out, expected)


def test_numpy_out_smaller_than_the_inputs_raises(add):
    with pytest.raises(ValueError, match=r"add: out\[0\] has shape \(3,\) but the inputs broadcast to \(2, 3\); "
                                         r"kjit.elementwise does not resize outputs \(under NumPy's rules the inputs "
                                         r"may broadcast to a larger out=\)"):
        add(np.ones((2, 3)), 1.0, out=np.empty(3))
    with pytest.raises(ValueError):  # the oracle agrees
        np.add(np.ones((2, 3)), 1.0, out=np.empty(3))


@needs_torch
def test_torch_out_must_have_the_broadcast_shape(add):
    with pytest.raises(ValueError, match=r"add: out\[0\] has shape \(2, 3\) but the inputs broadcast to \(3,\); "
                                         r"kjit.elementwise does not resize outputs$"):
        add(torch.ones(3), 1.0, out=torch.empty(2, 3))


@pytest.mark.parametrize("dtype, scalar", [("uint8", 256), ("int8", -129), ("uint64", -1), ("int64", 2**63)])
def test_out_of_range_python_int_raises_overflow_error(add, dtype, scalar):
    with pytest.raises(OverflowError, match=f"add: Python integer {scalar} out of bounds for {dtype}"):
        add(np.ones(2, dtype), scalar)
    with pytest.raises(OverflowError):  # the oracle agrees
        np.ones(2, dtype) + scalar


def test_python_ints_beyond_int64_go_where_numpy_puts_them(add):
    got = add(np.ones(2, np.uint64), 2**63)  # fits uint64
    assert got.dtype == np.uint64 and got.tolist() == [2**63 + 1] * 2
    got = add(np.ones(2, np.float32), 2**70)  # a float result takes it as a float
    np.testing.assert_array_equal(got, np.ones(2, np.float32) + 2**70)
    with pytest.raises(OverflowError, match=f"add: Python integer {2**64} out of bounds for uint64"):
        add(np.ones(2, np.uint64), 2**64)


# ---------------------------------------------------------------------------------
# NumPy's test_nep50_promotions.py, ported to kjit.elementwise (add for the ufuncs)
# ---------------------------------------------------------------------------------


def test_nep50_examples(add):
    res = add(np.uint8(1), 2)
    assert res.dtype == np.uint8 and type(res) is np.uint8
    assert add(np.array([1], np.uint8), np.int64(1)).dtype == np.int64
    assert add(np.array([1], np.uint8), np.array(1, dtype=np.int64)).dtype == np.int64
    res = add(np.uint8(100), 200)  # wraps, as NumPy's (which also warns)
    assert res.dtype == np.uint8 and res == 44
    res = add(np.float32(1), 3e100)
    assert np.isinf(res) and res.dtype == np.float32
    assert add(np.array([0.1], np.float32), np.float64(0.1)).dtype == np.float64
    assert add(np.array([1.0], np.float32), np.int64(3)).dtype == np.float64


@pytest.mark.parametrize("dtype", np.typecodes["AllInteger"])
def test_nep50_weak_integers(add, dtype):
    maxint = int(np.iinfo(dtype).max)
    res = add(np.dtype(dtype).type(100), maxint)
    assert res.dtype == dtype
    res = add(np.array(100, dtype=dtype), maxint)
    assert res.dtype == dtype and res == np.array(100, dtype=dtype) + maxint


@pytest.mark.parametrize("dtype", [c for c in np.typecodes["AllFloat"] if c not in "gG"])
def test_nep50_weak_integers_with_inexact(add, dtype):
    too_big_int = int(np.finfo(dtype).max) * 2
    if dtype in "dD":
        with pytest.raises(OverflowError):
            add(np.dtype(dtype).type(1), too_big_int)
        with pytest.raises(OverflowError):
            add(np.array(1, dtype=dtype), too_big_int)
    else:
        res = add(np.dtype(dtype).type(1), too_big_int)
        assert res.dtype == dtype and res == np.inf
        res = add(np.array(1, dtype=dtype), too_big_int)
        assert res.dtype == dtype and res == np.inf


def test_weak_promotion_scalar_path(add):
    res = add(np.uint8(3), 5)
    assert res == 8 and res.dtype == np.uint8
    with pytest.raises(OverflowError):
        add(np.uint8(3), 1000)
    res = add(np.float32(3), 5.0)
    assert res == 8.0 and res.dtype == np.float32


def test_nep50_complex_promotion(add):
    res = add(np.complex64(3), complex(2**300))
    assert type(res) is np.complex64


def test_nep50_integer_conversion_errors(add):
    with pytest.raises(OverflowError, match=".*uint8"):
        add(np.array([1], np.uint8), 300)
    with pytest.raises(OverflowError, match=".*uint8"):
        add(np.uint8(1), 300)
    with pytest.raises(OverflowError, match="Python integer -1 out of bounds for uint8"):
        add(np.uint8(1), -1)


def test_nep50_huge_integers(add):
    with pytest.raises(OverflowError):
        add(np.int64(0), 2**63)
    with pytest.raises(OverflowError):
        add(np.uint64(0), 2**64)
    res = add(np.uint64(1), 2**63)
    assert res.dtype == np.uint64 and res == 2**63 + 1
    with pytest.raises(OverflowError):
        add(np.int64(1), 2**63)
    with pytest.raises(OverflowError):
        add(np.int64(1), 2**100)
    res = add(1.0, 2**100)
    assert isinstance(res, np.float64)


@pytest.mark.parametrize("scalar, expected", [(1, "float32"), (1.0, "float32"), (1j, "complex64")])
def test_nep50_python_scalars_with_an_array(add, scalar, expected):
    arr = np.arange(6, dtype="float32").reshape(3, 2)
    for args in ((scalar, arr), (arr, scalar)):
        res = add(*args)
        assert res.dtype == expected
        np.testing.assert_array_equal(res, np.add(*args))


def test_nep50_strong_operands(add):
    arr = np.arange(6, dtype="float32").reshape(3, 2)
    assert add(np.float64(1), arr).dtype == "float64"
    assert add(np.array(1.0), arr).dtype == "float64"


EXPECTED_PROMOTION = [
    (np.float32, [np.float32], [np.float16, 0.0, np.uint16, np.int16, np.int8, 0]),
    (np.complex64, [np.float32, 0j], [np.float16, 0.0, np.uint16, np.int16, np.int8, 0]),
    (np.float32, [np.int16, np.uint16, np.float16], [np.int8, np.uint8, np.float32, 0.0, 0]),
    (np.int32, [np.int16, np.uint16], [np.int8, np.uint8, 0, np.bool]),
]


def _operand(t):
    return t if not isinstance(t, type) else np.ones(1, t)


@pytest.mark.parametrize("expected, dtypes, optional", EXPECTED_PROMOTION)
def test_expected_promotion(add3, expected, dtypes, optional):
    hypothesis = pytest.importorskip("hypothesis")
    st = hypothesis.strategies

    @hypothesis.settings(max_examples=60, deadline=None, derandomize=True)
    @hypothesis.given(data=st.data())
    def check(data):
        extra = data.draw(st.lists(st.sampled_from(dtypes + optional)))
        sample = data.draw(st.permutations(dtypes + extra))
        assert kjit_result(add3, *[_operand(t) for t in sample]) == expected

    check()


# ---------------------------------------------------------------------------------
# Outputs of their own type (issue 28): the entry's declared return type, or a
# `T&` output's, is the output's dtype when it is not the template parameter.
# ---------------------------------------------------------------------------------

LESS = "template <typename T> bool lt(T a, T b) { return a < b; }"
COMPARE_DTYPES = ["bool", "int8", "uint8", "int16", "int32", "int64", "uint64", "float16", "float32", "float64"]


@pytest.fixture(scope="module")
def less():
    return kjit.elementwise(LESS)


@pytest.mark.parametrize(("a", "b"), [(a, b) for a in COMPARE_DTYPES for b in ("int8", "float32", "float64")])
def test_comparisons_give_bool_as_numpy_does(less, a, b):
    rng = np.random.default_rng(3)
    x = (rng.integers(0, 5, 16) if a != "bool" else rng.integers(0, 2, 16)).astype(a)
    y = rng.integers(0, 5, 16).astype(b)
    got, want = less(x, y), np.less(x, y)
    assert got.dtype == want.dtype == np.bool_, (a, b)
    np.testing.assert_array_equal(got, want)
    assert less.result_type(x, y) == np.bool_


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "int64", "float16", "bfloat16", "float32", "float64"])
def test_comparisons_give_bool_as_torch_does(less, dtype):
    torch = pytest.importorskip("torch")
    t = getattr(torch, dtype)
    x, y = torch.arange(8).to(t), torch.full((8,), 3).to(t)
    got, want = less(x, y), torch.lt(x, y)
    assert got.dtype == want.dtype == torch.bool and torch.equal(got, want)
    assert torch.equal(less(x, 3), torch.lt(x, 3))  # a Python scalar stays weak


def test_a_bool_output_casts_safely_into_wider_outs_and_is_refused_nowhere_else(less):
    x, y = np.arange(4.0), np.full(4, 2.0)
    for dtype in (np.bool_, np.int8, np.float32):
        out = np.empty(4, dtype)
        assert less(x, y, out=out) is out
        np.testing.assert_array_equal(out, np.less(x, y).astype(dtype))


def test_a_declared_real_result_of_complex_inputs_is_real():
    mag = kjit.elementwise("template <typename T> float mag(T z) { return std::abs(z); }")
    z = np.array([3 + 4j, 1j, -2], np.complex64)
    got = mag(z)
    assert got.dtype == np.float32 and mag.result_type(z) == np.float32
    np.testing.assert_allclose(got, np.abs(z))
    with pytest.raises(TypeError, match="the result type float32 cannot be cast safely to the output type int32"):
        mag(z, out=np.empty(3, np.int32))


def test_outputs_by_reference_take_their_declared_types():
    sgn = kjit.elementwise("template <typename T> void sgn(T a, bool& pos, T& twice) { pos = a > 0; twice = a + a; }",
                           num_outputs=2)
    pos, twice = sgn(np.array([-1.0, 2.0], np.float32))
    assert pos.dtype == np.bool_ and pos.tolist() == [False, True]
    assert twice.dtype == np.float32 and twice.tolist() == [-2.0, 4.0]


def test_the_template_parameter_and_an_auto_identity_keep_the_computed_type():
    same = kjit.elementwise("template <typename T> auto idn(T a) { return a; }")
    assert same(np.ones(2, np.int16)).dtype == np.int16
    declared = kjit.elementwise("float half_of(double x) { return x / 2; }")
    assert declared(np.array([3], np.int64)).dtype == np.float32  # its declared float, computed in float64


def test_many_operands_and_dims_outgrow_the_inline_operand_records():
    """Plans keep four operands and six dims inline (OperandInfo, DimVector):
    eight operands over nine reversed and transposed dims, a 30-d broadcast, and a
    five-input reduction spill to the heap and still agree with NumPy."""
    rng = np.random.default_rng(0)
    f = kjit.elementwise("template <typename T> void f(T a, T b, T c, T d, T e, T g, T& x, T& y) "
                         "{ x = a + b * c - d; y = e * g + a; }", num_outputs=2)
    shape = (2, 3, 1, 2, 3, 2, 1, 2, 3)
    a, b, c = (rng.random(shape)[..., ::-1].transpose(8, 1, 2, 3, 4, 5, 6, 7, 0) for _ in range(3))
    d, e, g = rng.random(a.shape[1:]), np.ones((1,) * 9), rng.random(a.shape).astype(np.float32)
    x, y = f(a, b, c, d, e, g)
    np.testing.assert_allclose(x, a + b * c - d)
    np.testing.assert_allclose(y, e * g + a)
    xo, yo = np.empty(x.shape), np.empty(x.shape[::-1]).T
    f(a, b, c, d, e, g, out=(xo, yo))
    np.testing.assert_allclose(xo, x)
    np.testing.assert_allclose(yo, y)
    v = a.copy()
    f(v, b, c, d, e, g, out=(v, yo))  # in place
    np.testing.assert_allclose(v, x)
    big = rng.random((1,) * 20 + (2,) * 10)
    add = kjit.elementwise("template <typename T> T add(T a, T b) { return a + b; }")
    np.testing.assert_allclose(add(big, big.T), big + big.T)
    r = kjit.reduction("template <typename T> T add(T a, T b) { return a + b; }", identity=0,
                       map_code="template <typename T> T m(T a, T b, T c, T d, T e) { return a * b + c - d * e; }")
    ins = [rng.random(shape)[::-1, :, :, ::-1] for _ in range(5)]
    want = ins[0] * ins[1] + ins[2] - ins[3] * ins[4]
    for axis in (None, 0, (1, 4, 8), (0, 2, 3, 5, 6, 7)):
        np.testing.assert_allclose(r(*ins, axis=axis), want.sum(axis=axis), err_msg=f"axis={axis}")
