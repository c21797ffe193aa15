"""PyTorch's test/test_jiterator.py, ported to kjit.elementwise on CPU tensors: the
same computation strings, dtypes, layouts and extra arguments, with torch's own
ops as the reference (as the original uses)."""

import itertools

import pytest

import kjit

torch = pytest.importorskip("torch")

CODE = "template <typename T> T my_fused_kernel(T x, T y, T alpha, T beta) { return alpha * x + beta * y; }"

# all_types_and_complex_and(torch.half, torch.bfloat16)
DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float32, torch.float64,
          torch.complex64, torch.complex128, torch.float16, torch.bfloat16]


@pytest.fixture(scope="module")
def jitted_fn():
    return kjit.elementwise(CODE)


def ref_fn(x, y, alpha=1, beta=1):
    return alpha * x + beta * y


def _operands(dtypes, shape_strides):
    gen = torch.Generator().manual_seed(0)
    a_buffer = torch.rand(9, generator=gen).mul(10).type(dtypes[0])
    b_buffer = torch.rand(9, generator=gen).mul(10).type(dtypes[1])
    return a_buffer.as_strided(*shape_strides[0]), b_buffer.as_strided(*shape_strides[1])


def _assert_equal(result, expected):
    # torch's assertEqual: exact dtype, values within the dtype's default tolerance
    assert result.dtype == expected.dtype
    torch.testing.assert_close(result, expected)


@pytest.mark.parametrize("dtypes", list(itertools.product(DTYPES, DTYPES)), ids=str)
@pytest.mark.parametrize("shape_strides", [
    (([3, 3], [3, 1]), ([3, 3], [3, 1])),  # contiguous
    (([3, 3], [1, 3]), ([3, 1], [1, 3])),  # non-contiguous
], ids=["contiguous", "noncontiguous"])
def test_all_dtypes(jitted_fn, dtypes, shape_strides):
    a, b = _operands(dtypes, shape_strides)
    _assert_equal(jitted_fn(a, b, alpha=1, beta=1), ref_fn(a, b))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("alpha", [-1, 2.0, None])
@pytest.mark.parametrize("beta", [3, -4.2, None])
def test_extra_args(jitted_fn, dtype, alpha, beta):
    gen = torch.Generator().manual_seed(1)
    a = torch.rand(3, generator=gen).mul(10).type(dtype)
    b = torch.rand(3, generator=gen).mul(10).type(dtype)
    extra_args = {"alpha": 1 if alpha is None else alpha, "beta": 1 if beta is None else beta}
    expected = ref_fn(a, b, **extra_args)
    result = jitted_fn(a, b, **extra_args)
    # torch rounds alpha * x and beta * y to the 16-bit type before adding; the
    # kernel computes in float and rounds once (the original's tolerance override)
    tol = {torch.float16: {"atol": 1e-2, "rtol": 1e-3}}.get(dtype, {})
    assert result.dtype == expected.dtype
    torch.testing.assert_close(result, expected, **tol)


@pytest.mark.parametrize("is_train", [True, False])
def test_bool_extra_args(is_train):
    code_string = "template <typename T> T conditional(T x, T mask, bool is_train) { return is_train ? x * mask : x; }"
    jitted = kjit.elementwise(code_string)
    a, b = torch.rand(3), torch.rand(3)
    expected = a * b if is_train else a
    _assert_equal(jitted(a, b, is_train=is_train), expected)


def test_multiple_functors():
    code_string = """
    template <typename T> T fn(T x, T mask) { return x * mask; }
    template <typename T> T main_fn(T x, T mask, T y) { return fn(x, mask) + y; }
    """
    jitted = kjit.elementwise(code_string)
    assert jitted.name == "main_fn"
    a, b, c = torch.rand(3), torch.rand(3), torch.rand(3)
    _assert_equal(jitted(a, b, c), a * b + c)


@pytest.mark.parametrize("num_inputs", [1, 5, 8])
def test_various_num_inputs(num_inputs):
    inputs = [torch.rand(3).mul(10) for _ in range(num_inputs)]
    input_string = ",".join(f"T i{i}" for i in range(num_inputs))
    function_body = "+".join(f"i{i}" for i in range(num_inputs))
    jitted = kjit.elementwise(f"template <typename T> T my_kernel({input_string}) {{ return {function_body}; }}")
    expected = inputs[0]
    for x in inputs[1:]:
        expected = expected + x  # the kernel adds left to right, as torch.sum of 3 values may not
    _assert_equal(jitted(*inputs), expected)
    torch.testing.assert_close(jitted(*inputs), torch.sum(torch.stack(inputs), dim=0))


@pytest.mark.parametrize("num_outputs", [1, 4, 8])
def test_various_num_outputs(num_outputs):
    x = torch.rand(3)
    output_string = ", ".join(f"T& out{i}" for i in range(num_outputs))
    function_body = "".join(f"out{i} = input + {i};\n" for i in range(num_outputs))
    code_string = f"template <typename T> void my_kernel(T input, {output_string}) {{ {function_body} }}"
    jitted = kjit.elementwise(code_string, num_outputs=num_outputs)
    result = jitted(x)
    result = (result,) if num_outputs == 1 else result
    for i in range(num_outputs):
        _assert_equal(result[i], x + i)


@pytest.mark.parametrize("code_string", [
    "template <typename T> T my _kernel(T x) { return x; }",
    "template <typename T> Tmy_kernel(T x) { return x; }",
])
def test_invalid_function_name(code_string):
    with pytest.raises((kjit.SpecError, kjit.CompileError)):
        kjit.elementwise(code_string)(torch.ones(2))
