"""kjit/iterator.h in load_inline kernels: TensorIterator, cpu_kernel, cpu_reduce,
the accessor, dispatch and parallel_for on kjit's pool, against NumPy."""

import numpy as np
import pytest

import kjit

from conftest import build

SOURCE = r"""
#include <kjit/iterator.h>

void add(const kjit::TensorView a, const kjit::TensorView b, kjit::TensorView c) {
  auto iter = kjit::TensorIteratorConfig().add_output(c).add_input(a).add_input(b).build();
  kjit::cpu_kernel(iter, [](float x, float y) -> float { return x + y; });
}

void scale(const kjit::TensorView x, kjit::TensorView y, double alpha) {
  auto iter = kjit::TensorIteratorConfig().add_output(y).add_input(x).build();
  KJIT_DISPATCH_FLOATING_TYPES(x.dtype(), "scale", [&] {
    kjit::cpu_kernel(iter, [=](scalar_t v) { return static_cast<scalar_t>(v * alpha); });
  });
}

void less(const kjit::TensorView a, const kjit::TensorView b, kjit::TensorView out) {
  auto iter = kjit::TensorIteratorConfig().check_all_same_dtype(false).add_output(out).add_input(a).add_input(b).build();
  kjit::cpu_kernel(iter, [](double x, double y) { return x < y; });
}

void row_sums(const kjit::TensorView x, kjit::TensorView out) {
  auto iter = kjit::TensorIteratorConfig().is_reduction(true).check_all_same_dtype(false)
                  .add_output(out).add_input(x).build();
  kjit::cpu_reduce(iter, 0.0, [](double acc, float v) { return acc + v; },
                   [](double a, double b) { return a + b; });
}

double trace(const kjit::TensorView m) {
  auto a = m.accessor<double, 2>();
  double t = 0;
  for (int64_t i = 0; i < std::min(a.size(0), a.size(1)); ++i) t += a[i][i];
  return t;
}

int64_t pool_threads() { return kjit::detail::pool_threads(); }

int64_t chunks_seen(int64_t n, int64_t grain) {
  std::atomic<int64_t> chunks{0};
  kjit::parallel_for(0, n, grain, [&](int64_t, int64_t) { ++chunks; });
  return chunks.load();
}
"""

FUNCTIONS = {
    "add": "a: float32[...] strided, b: float32[...] strided, c: float32[...] strided out",
    "scale": "x: float32|float64[...] strided, y: float32|float64[...] strided out, alpha: float64",
    "less": "a: float64[...] strided, b: float64[...] strided, out: bool[...] strided out",
    "row_sums": "x: float32[m, n] strided, out: float64[m, 1] out",
    "trace": "m: float64[r, c] strided",
    "pool_threads": "",
    "chunks_seen": "n: int64, grain: int64",
}


@pytest.fixture(scope="module")
def mod():
    return build("iterator_kernels", SOURCE, FUNCTIONS)


def test_the_seed_example_adds_with_broadcasting_and_strides(mod):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((6, 1, 5)).astype(np.float32)
    b = rng.standard_normal((7, 5)).astype(np.float32)[:, ::-1]
    c = np.full((6, 7, 5), np.nan, np.float32)
    mod.add(a, b, c)
    np.testing.assert_array_equal(c, a + b)


@pytest.mark.parametrize("n", [0, 1, 15, 16, 17, 40000, (1 << 20) + 7])
def test_add_over_sizes_and_in_place(mod, n):
    a = np.arange(n, dtype=np.float32)
    b = np.ones(n, np.float32) * 0.5
    c = np.full(n, np.nan, np.float32)
    mod.add(a, b, c)
    np.testing.assert_array_equal(c, a + b)
    mod.add(a, b, a)  # in place: the output is input 0
    np.testing.assert_array_equal(a, c)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dispatch_picks_the_type(mod, dtype):
    x = np.linspace(-3, 3, 101).astype(dtype)
    y = np.empty_like(x)
    mod.scale(x, y, 2.5)
    np.testing.assert_array_equal(y, (x * np.float64(2.5)).astype(dtype))


def test_mismatched_dtypes_are_the_iterators_type_error(mod):
    with pytest.raises(TypeError, match=r"kjit::TensorIterator: input 0 is float32, output 0 is float64: the operands "
                                        r"must have one dtype"):
        mod.scale(np.ones(3, np.float32), np.ones(3, np.float64), 1.0)


def test_comparison_writes_bool(mod):
    a = np.array([1.0, 2.0, 3.0])
    b = np.array([[2.0], [0.0]])
    out = np.zeros((2, 3), bool)
    mod.less(a, b, out)
    np.testing.assert_array_equal(out, a < b)


def test_shape_errors_reach_python_as_value_errors(mod):
    with pytest.raises(ValueError, match=r"the shapes of output 0 \(4,\) and input 0 \(3,\) do not broadcast"):
        mod.add(np.ones(3, np.float32), np.ones(3, np.float32), np.ones(4, np.float32))
    x = np.ones(8, np.float32)
    with pytest.raises(ValueError, match="output 0 partially overlaps input 0"):
        mod.add(x[:6], x[:6], x[2:])


@pytest.mark.parametrize("shape", [(1, 1), (3, 40), (129, 1000), (2, 100000)])
def test_row_sums_match_numpy(mod, shape):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    out = np.full((shape[0], 1), np.nan)
    mod.row_sums(x, out)
    np.testing.assert_allclose(out[:, 0], x.astype(np.float64).sum(axis=1), rtol=1e-12, atol=1e-9)
    t = np.ascontiguousarray(x.T).T  # the same values, column-major
    out2 = np.full((shape[0], 1), np.nan)
    mod.row_sums(t, out2)
    np.testing.assert_allclose(out2, out, rtol=1e-12, atol=1e-9)


def test_accessor_reads_strided_views(mod):
    m = np.arange(20.0).reshape(4, 5)
    assert mod.trace(m) == np.trace(m)
    assert mod.trace(m.T) == np.trace(m.T)
    assert mod.trace(m[::2, ::-1]) == np.trace(m[::2, ::-1])


def test_parallel_for_runs_on_kjits_pool(mod):
    # The module's weak references found libkjit's pool (loaded RTLD_GLOBAL).
    kjit.set_num_threads(2)
    try:
        assert mod.pool_threads() == 2
        assert mod.chunks_seen(1 << 20, 1000) >= 2
        assert mod.chunks_seen(500, 1000) == 1
    finally:
        kjit.set_num_threads(0)
