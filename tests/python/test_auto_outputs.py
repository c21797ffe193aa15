"""Outputs whose type the code decides (docs/elementwise.md "Outputs of their own
type", docs/reductions.md "The code"): an `auto` (or decltype, or alias) entry's
output has the dtype its call returns for the call's compute type, asked of the
compiler, and post_code's return type is a reduction's result type; compared with
NumPy's and torch's dtypes for the same expressions."""

import numpy as np
import pytest

import kjit

MAG = "template <typename T> auto mag(T a) { return std::abs(a); }"
ADD = "template <typename T> T add(T a, T b) { return a + b; }"


@pytest.fixture(scope="module")
def mag():
    return kjit.elementwise(MAG)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128, np.float32, np.float64, np.int16, np.int64])
def test_auto_abs_has_numpys_dtype(mag, dtype):
    z = (np.array([3 + 4j, -1j, 2], np.complex128) if np.issubdtype(dtype, np.complexfloating)
         else np.array([3, -4, 2])).astype(dtype)
    got = mag(z)
    assert got.dtype == np.abs(z).dtype, (dtype, got.dtype)
    assert mag.result_type(z) == got.dtype
    np.testing.assert_allclose(got, np.abs(z), rtol=1e-6)


def test_what_the_expression_returns_is_the_output_dtype():
    x = np.array([1.5, -2.0], np.float32)
    gt = kjit.elementwise("template <typename T> auto gt(T a, T b) { return a > b; }")
    assert gt(x, np.float32(0)).dtype == np.bool_ and gt(x, np.float32(0)).tolist() == [True, False]
    # a parameter declared double makes the product a double, as C++ says
    scale = kjit.elementwise("template <typename T> auto scale(T a, double s) { return a * s; }")
    assert scale(x, s=2.0).dtype == np.float64 and scale(x, s=2.0).tolist() == [3.0, -4.0]
    assert scale.result_type(x) == np.float64  # the extras' declared types, not their values
    half = kjit.elementwise("template <typename T> auto half(T a) { return a / 2.0; }")
    assert half(np.array([3], np.int32)).dtype == np.float64 and half(np.array([3], np.int32)).tolist() == [1.5]
    trailing = kjit.elementwise("template <typename T> auto re(T z) -> decltype(z.real()) { return z.real(); }")
    assert trailing(np.array([2 + 1j], np.complex64)).dtype == np.float32
    alias = kjit.elementwise("using real = double;\ntemplate <typename T> real dbl(T a) { return a; }")
    assert alias(np.array([1], np.int8)).dtype == np.float64


def test_an_auto_entry_of_the_compute_type_keeps_the_result_type():
    twice = kjit.elementwise("template <typename T> auto twice(T a) { return a + a; }")
    for dtype in (np.int8, np.uint16, np.bool_, np.float16, np.float32):  # C++ makes int of int8: kept
        x = np.ones(3, dtype)
        assert twice(x).dtype == (x + x).dtype, dtype
    wide = kjit.elementwise("template <typename T> auto wide(T a) { return a + 1L; }")
    assert wide(np.ones(2, np.int8)).dtype == np.int64  # a long literal: the code asks for int64


def test_complex_results_of_real_inputs():
    cx = kjit.elementwise("#include <complex>\ntemplate <typename T> auto cx(T a) { return std::complex<T>(a, -a); }")
    got = cx(np.array([1.0, 2.0], np.float32))
    assert got.dtype == np.complex64 and got.tolist() == [1 - 1j, 2 - 2j]


def test_out_takes_an_auto_result_that_casts_to_it(mag):
    z = np.array([3 + 4j], np.complex64)
    out = np.zeros(1, np.float64)
    assert mag(z, out=out) is out and out.tolist() == [5.0]
    with pytest.raises(TypeError, match=r"float32.*int32|int32.*float32"):
        mag(z, out=np.zeros(1, np.int32))


def test_auto_post_code_types_the_reduction():
    norm = kjit.reduction(ADD, identity=0, post_code="template <typename T> auto nrm(T acc, int64_t) "
                          "{ return std::abs(acc); }")
    z = np.array([3 + 4j, 0j], np.complex64)
    assert norm(z).dtype == np.float32 and norm(z) == pytest.approx(5.0)
    assert norm.result_type(z) == np.float32
    mean = kjit.reduction(ADD, identity=0, post_code="double mean(double acc, int64_t n) { return acc / n; }")
    x = np.arange(4, dtype=np.float32)
    assert mean(x).dtype == np.float64 and mean(x) == 1.5
    assert mean(x, dtype=np.float32).dtype == np.float32  # dtype= is the result type
    same = kjit.reduction(ADD, identity=0, post_code="template <typename T> T mean(T acc, int64_t n) "
                          "{ return acc / T(n); }")
    assert same(x).dtype == np.float32


def test_code_that_does_not_compile_is_a_compile_error_naming_the_question():
    bad = kjit.elementwise("template <typename T> auto bad(T a) { return a +; }")
    with pytest.raises(kjit.CompileError, match=r"kjit.elementwise 'bad' \(asking the compiler what it returns, "
                                                r"computing in float32\)"):
        bad(np.ones(2, np.float32))
    red = kjit.reduction(ADD, identity=0, name="badpost",
                         post_code="template <typename T> auto bp(T acc, int64_t) { return acc +; }")
    with pytest.raises(kjit.CompileError, match=r"kjit.reduction 'badpost' post_code \(asking the compiler what it "
                                                r"returns, computing in float64\)"):
        red(np.ones(2))


def test_torch_ops_and_results_follow_the_auto_type(mag):
    torch = pytest.importorskip("torch")
    import kjit.torch  # noqa: F401

    z = torch.tensor([3 + 4j, 1j], dtype=torch.complex64)
    assert mag(z).dtype == torch.abs(z).dtype == torch.float32
    op = kjit.torch.op(mag, name="auto_mag")
    got = op(z)
    assert got.dtype == torch.float32 and got.tolist() == [5.0, 1.0]
    result = torch.library.opcheck(op.op, ([z],))
    assert set(result.values()) == {"SUCCESS"}, result
    compiled = torch.compile(op, fullgraph=True)
    assert compiled(z).dtype == torch.float32


def test_jax_callables_follow_the_auto_type(mag):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    import kjit.jax  # noqa: F401

    f = kjit.jax.function(mag)
    z = jnp.array([3 + 4j, 1j], jnp.complex64)
    got = jax.jit(f)(z)
    assert got.dtype == jnp.float32 and got.tolist() == [5.0, 1.0]
