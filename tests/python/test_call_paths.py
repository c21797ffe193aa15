"""Which path a call takes, and that the C paths answer exactly as the Python binder.

`mod.fn` (kjit._call.Function) sends a positional call with every argument straight
to the stub ("direct"), binds keywords, defaults and returned outputs in C from the
function's call plan ("bound", src/pyext/call_plan.cc), and hands everything else to
the Python binder ("binder", python/kjit/function.py). The debug counters
`_direct_calls`, `_bound_calls`, `_binder_calls` say which path ran; `fn._binder` is the
binder itself, so each case also compares the two answers (value, type, dtype, shape,
device; or exception type and message)."""

import numpy as np
import pytest
import tvm_ffi
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import build

SRC = r"""
#include <kjit/kernel.h>
#include <cstring>
void scale(const kjit::TensorView x, kjit::TensorView y, float alpha, int32_t shift) {
  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] = alpha * x.data<float>()[i] + shift;
}
void copy(const kjit::TensorView x, kjit::TensorView y) {
  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] = x.data<float>()[i];
}
void twice(const kjit::TensorView x, kjit::TensorView y) {
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (x.dtype().bits == 64) {
      y.data<double>()[2 * i] = y.data<double>()[2 * i + 1] = x.data<double>()[i];
    } else {
      y.data<float>()[2 * i] = y.data<float>()[2 * i + 1] = x.data<float>()[i];
    }
  }
}
double split(const kjit::TensorView x, kjit::TensorView lo, kjit::TensorView hi, int64_t k) {
  for (int64_t i = 0; i < k; ++i) lo.data<float>()[i] = x.data<float>()[i];
  for (int64_t i = k; i < x.numel(); ++i) hi.data<float>()[i - k] = x.data<float>()[i];
  return 1.5;
}
void shapes(const kjit::TensorView x, int64_t k, kjit::TensorView y) {
  std::memset(y.data_ptr(), 0, static_cast<size_t>(y.numel()) * 4);
}
void total(const kjit::TensorView x, kjit::TensorView y) {
  float s = 0;
  for (int64_t i = 0; i < x.numel(); ++i) s += x.data<float>()[i];
  y.data<float>()[0] = s;
}
void iota(int64_t k, kjit::TensorView y) {
  for (int64_t i = 0; i < k; ++i) y.data<int32_t>()[i] = static_cast<int32_t>(i);
}
void like(const kjit::TensorView x, int64_t k, kjit::TensorView y) {
  std::memset(y.data_ptr(), 0, static_cast<size_t>(k) * (y.dtype().bits / 8));
}
"""
SIGS = {
    "scale": "x: float32[n], y: float32[n] out, alpha: float32 = 2.0, shift: int32 = 0",
    "copy": "x: float32[n], y: float32[n] out",
    "twice": "x: float32|float64[n], y: dtype(x)[2*n] return",
    "split": "x: float32[n], lo: float32[k] return, hi: float32[n - k] return, k: int64; k <= n",
    "shapes": "x: float32[m, n], k: int64, y: float32[m / 2, n % 3, -m + 2*n, (n - k) / 2, k % 3, 4] return",
    "total": "x: float32[n], y: float32[] return",
    "iota": "k: int64, y: int32[k] return",
    "like": "x: float32|float64[n] optional, k: int64, y: dtype(x)[k] return",
}


@pytest.fixture(scope="module")
def mod():
    return build("call_paths", SRC, SIGS)


def _counts(fn):
    return fn._direct_calls, fn._bound_calls, fn._binder_calls


def _describe(value):
    """What a caller sees of a result: values of writeable results, type/dtype/shape/device."""
    if isinstance(value, tuple):
        return tuple(_describe(v) for v in value)
    if isinstance(value, np.ndarray):
        return ("numpy", value.dtype.name, value.shape, value.tolist(), value.flags.c_contiguous)
    if isinstance(value, tvm_ffi.Tensor):
        return ("tvm_ffi", str(value.dtype), tuple(value.shape), np.from_dlpack(value).tolist())
    torch = pytest.importorskip("torch")
    if isinstance(value, torch.Tensor):
        return ("torch", str(value.dtype), tuple(value.shape), str(value.device), value.tolist(),
                value.is_contiguous(), value.requires_grad)
    return ("value", type(value), value)


def _answer(call):
    try:
        return ("returns", _describe(call()))
    except Exception as err:  # noqa: BLE001 (the exception is the answer compared)
        return ("raises", type(err), str(err))


def _check(fn, path, *args, **kwargs):
    """Calls fn, checks it took `path` exactly once, and that the binder answers the same."""
    before = _counts(fn)
    got = _answer(lambda: fn(*args, **kwargs))
    after = _counts(fn)
    step = {"direct": (1, 0, 0), "bound": (0, 1, 0), "binder": (0, 0, 1)}[path]
    assert tuple(a - b for a, b in zip(after, before)) == step, (path, before, after, got)
    assert got == _answer(lambda: fn._binder(*args, **kwargs))
    return got


def _xy(n=4):
    return np.arange(n, dtype=np.float32), np.zeros(n, dtype=np.float32)


# ---- keywords and defaults, bound in C ----

def test_positional_with_every_argument_is_direct(mod):
    x, y = _xy()
    _check(mod.scale, "direct", x, y, 3.0, 1)
    assert y.tolist() == [1.0, 4.0, 7.0, 10.0]


@pytest.mark.parametrize("args, kwargs, expect", [
    ((), {}, [0.0, 2.0, 4.0, 6.0]),                      # both defaults
    ((1.0,), {}, [0.0, 1.0, 2.0, 3.0]),                   # one default
    ((), {"shift": 5}, [5.0, 7.0, 9.0, 11.0]),            # a keyword after a default
    ((-1.0,), {"shift": 1}, [1.0, 0.0, -1.0, -2.0]),
    ((), {"alpha": 0.5, "shift": 1}, [1.0, 1.5, 2.0, 2.5]),
])
def test_keywords_and_defaults_are_bound_in_c(mod, args, kwargs, expect):
    x, y = _xy()
    _check(mod.scale, "bound", x, y, *args, **kwargs)
    assert y.tolist() == expect


def test_every_argument_by_keyword_in_any_order(mod):
    x, y = _xy()
    _check(mod.scale, "bound", shift=1, y=y, alpha=1.0, x=x)
    assert y.tolist() == [1.0, 2.0, 3.0, 4.0]


def test_keyword_names_built_at_run_time_bind_too(mod):
    x, y = _xy()
    _check(mod.scale, "bound", x, **{"".join(["y"]): y, "sh" + "ift": 2})  # not the interned names
    assert y.tolist() == [2.0, 4.0, 6.0, 8.0]


def test_keywords_on_a_function_without_defaults(mod):
    x, y = _xy()
    _check(mod.copy, "bound", x, y=y)
    assert y.tolist() == x.tolist()


def test_stub_errors_of_a_bound_call_are_the_stub_messages(mod):
    x = np.arange(4, dtype=np.float32)
    got = _check(mod.scale, "bound", x, y=np.zeros(5, dtype=np.float32))
    assert got == ("raises", ValueError, "scale: argument #1 'y': shape[0] must equal n = 4 (bound by x.shape[0]), got 5")
    got = _check(mod.copy, "bound", x, y=np.zeros(4, dtype=np.float64))
    assert got[:2] == ("raises", TypeError) and got[2].startswith("copy: argument #1 'y': dtype must be float32")


# ---- what the binder keeps: every mistake, with its message ----

@pytest.mark.parametrize("args, kwargs, message", [
    ((), {"beta": 2.0}, "scale() got an unexpected keyword argument 'beta' (its parameters: x, y, alpha, shift)"),
    ((1.0,), {"alpha": 2.0}, "scale() got multiple values for argument 'alpha' (#2, also passed by position)"),
    ((1.0, 2, 3), {}, "scale() takes 4 arguments (x, y, alpha, shift) but 5 were given"),
])
def test_mistakes_fall_back_with_unchanged_messages(mod, args, kwargs, message):
    x, y = _xy()
    assert _check(mod.scale, "binder", x, y, *args, **kwargs) == ("raises", TypeError, message)


def test_missing_arguments_fall_back(mod):
    x, _ = _xy()
    assert _check(mod.scale, "binder", x) == ("raises", TypeError, "scale() missing required argument: 'y'")
    assert _check(mod.scale, "binder", alpha=1.0) == ("raises", TypeError,
                                                      "scale() missing required arguments: 'x', 'y'")


def test_read_only_input_by_keyword_falls_back_and_works(mod):
    x, y = _xy()
    x.setflags(write=False)
    _check(mod.scale, "binder", x, y=y, shift=1)
    assert y.tolist() == [1.0, 3.0, 5.0, 7.0]


def test_read_only_output_by_keyword_falls_back_to_the_value_error(mod):
    x, y = _xy()
    y.setflags(write=False)
    got = _check(mod.scale, "binder", x, y=y)
    assert got[:2] == ("raises", ValueError)
    assert got[2].startswith("scale: argument #1 'y' is a read-only NumPy array, but the kernel writes it")


def test_read_only_array_with_another_bad_argument_gets_the_binders_error(mod):
    # The stub fails on the list before it reaches the array; the binder names the array first.
    y = np.zeros(4, dtype=np.float32)
    y.setflags(write=False)
    got = _check(mod.scale, "binder", [1.0], y=y)
    assert got[:2] == ("raises", ValueError) and "'y' is a read-only NumPy array" in got[2]


# ---- returned outputs, allocated in C ----

def test_returned_numpy_with_the_dtype_of_an_input(mod):
    for dtype in (np.float32, np.float64):
        got = _check(mod.twice, "bound", np.array([1.0, 2.0], dtype=dtype))
        assert got == ("returns", ("numpy", np.dtype(dtype).name, (4,), [1.0, 1.0, 2.0, 2.0], True))
    _check(mod.twice, "bound", x=np.array([3.0], dtype=np.float32))


def test_returned_torch_on_the_inputs_device(mod):
    torch = pytest.importorskip("torch")
    for dtype in (torch.float32, torch.float64):
        got = _check(mod.twice, "bound", torch.tensor([1.0, 2.0], dtype=dtype))
        assert got == ("returns", ("torch", str(dtype), (4,), "cpu", [1.0, 1.0, 2.0, 2.0], True, False))
    value, lo, hi = mod.split(torch.arange(5, dtype=torch.float32), k=2)
    assert value == 1.5 and type(lo) is torch.Tensor and lo.tolist() == [0.0, 1.0] and hi.tolist() == [2.0, 3.0, 4.0]
    got = _check(mod.total, "bound", torch.ones(3))
    assert got == ("returns", ("torch", "torch.float32", (), "cpu", 3.0, True, False))


def test_returned_tvm_ffi_tensor(mod):
    x = tvm_ffi.from_dlpack(np.array([1.0, 2.0], dtype=np.float64))
    got = _check(mod.twice, "bound", x)
    assert got == ("returns", ("tvm_ffi", "float64", (4,), [1.0, 1.0, 2.0, 2.0]))


def test_several_returned_and_a_kernel_result(mod):
    x = np.arange(5, dtype=np.float32)
    got = _check(mod.split, "bound", x, 2)
    assert got == ("returns", (("value", float, 1.5), ("numpy", "float32", (2,), [0.0, 1.0], True),
                               ("numpy", "float32", (3,), [2.0, 3.0, 4.0], True)))
    _check(mod.split, "bound", k=3, x=x)


@pytest.mark.parametrize("m, n, k", [(6, 7, 2), (5, 4, -3), (1, 9, 7), (0, 3, 0), (9, 2, -5)])
def test_returned_shape_expressions_floor_as_python(mod, m, n, k):
    shape = (m // 2, n % 3, -m + 2 * n, (n - k) // 2, k % 3, 4)
    negative = any(d < 0 for d in shape)  # the binder names a negative extent
    got = _check(mod.shapes, "binder" if negative else "bound", np.zeros((m, n), dtype=np.float32), k)
    if not negative:
        assert got[1][2] == shape


def test_zero_dim_returned_and_no_tensor_arguments(mod):
    assert _check(mod.total, "bound", np.ones(3, dtype=np.float32)) == ("returns", ("numpy", "float32", (), 3.0, True))
    assert _check(mod.iota, "bound", 4) == ("returns", ("numpy", "int32", (4,), [0, 1, 2, 3], True))
    assert _check(mod.iota, "bound", k=0)[1][2] == (0,)


def test_bfloat16_numpy_input_gets_the_same_buffer_error():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    m = build("call_paths_bf16", "#include <kjit/kernel.h>\nvoid f(const kjit::TensorView x, kjit::TensorView y) {}\n",
              {"f": "x: bfloat16|float32[n], y: dtype(x)[n] return"})
    got = _check(m.f, "binder", np.zeros(3, dtype=ml_dtypes.bfloat16))  # NumPy cannot export bfloat16
    assert got[:2] == ("raises", BufferError)


# ---- returned outputs the binder keeps ----

def test_negative_extent_falls_back_to_its_message(mod):
    got = _check(mod.split, "binder", np.arange(2, dtype=np.float32), 3)
    assert got == ("raises", ValueError,
                   "split: returned tensor 'hi': shape[0] is -1 with n = 2, k = 3; it must not be negative")


def test_numpy_integer_symbol_falls_back(mod):
    got = _check(mod.split, "binder", np.arange(5, dtype=np.float32), np.int64(2))
    assert got[1][0] == ("value", float, 1.5) and got[1][1][3] == [0.0, 1.0]


def test_dtype_of_none_falls_back_to_its_message(mod):
    got = _check(mod.like, "binder", None, 2)
    assert got == ("raises", ValueError, "like: returned tensor 'y' takes the dtype of 'x', which is None")


def test_array_subclass_falls_back(mod):
    class Sub(np.ndarray):
        pass

    got = _check(mod.twice, "binder", np.array([1.0], dtype=np.float32).view(Sub))
    assert got == ("returns", ("numpy", "float32", (2,), [1.0, 1.0], True))


def test_non_tensor_argument_falls_back(mod):
    got = _check(mod.twice, "binder", [1.0, 2.0])
    assert got[:2] == ("raises", AttributeError)


def test_read_only_input_of_a_returning_function_falls_back(mod):
    x = np.array([4.0], dtype=np.float32)
    x.setflags(write=False)
    assert _check(mod.twice, "binder", x) == ("returns", ("numpy", "float32", (2,), [4.0, 4.0], True))


def test_byte_swapped_dtype_of_falls_back(mod):
    got = _check(mod.twice, "binder", np.array([1.0], dtype=">f4"))
    assert got[0] == "raises"


def test_wrong_count_of_a_returning_function_falls_back(mod):
    x = np.arange(5, dtype=np.float32)
    assert _check(mod.split, "binder", x) == ("raises", TypeError, "split() missing required argument: 'k'")
    assert _check(mod.split, "binder", x, 1, 2) == ("raises", TypeError,
                                                    "split() takes 2 arguments (x, k) but 3 were given")


def test_premise_the_stub_refuses_a_read_only_array_before_the_kernel_runs():
    # The bound path hands a failed call with a read-only array to the binder, which
    # calls the kernel again: only right while DLPack export refuses such arrays.
    src = r"""
#include <kjit/kernel.h>
static int64_t g_runs = 0;
void bump(const kjit::TensorView x, kjit::TensorView y, float alpha) { ++g_runs; }
int64_t runs(bool) { return g_runs; }
"""
    m = build("call_paths_premise", src, {"bump": "x: float32[n], y: float32[n] out, alpha: float32 = 1.0",
                                           "runs": "unused: bool = false"})
    x, y = _xy()
    x.setflags(write=False)
    with pytest.raises(BufferError):
        m.bump.ffi_function(x, y, 1.0)
    assert m.runs() == 0
    _check(m.bump, "binder", x, y)  # bound first, then the binder: the kernel runs twice here
    assert m.runs() == 2
    m.bump(x, y=y)
    assert m.runs() == 3


# ---- the bound path against the binder on random calls (hypothesis) ----

_SCALE_VALUES = {"alpha": 0.5, "shift": 3}
_SETTINGS = settings(max_examples=150, derandomize=True, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture])


@_SETTINGS
@given(n_positional=st.integers(0, 4), keywords=st.sets(st.sampled_from(["x", "y", "alpha", "shift", "beta"])),
       extra_positional=st.booleans())
def test_random_bindings_answer_as_the_binder(mod, n_positional, keywords, extra_positional):
    def call(fn):
        x, y = _xy()
        values = {"x": x, "y": y, **_SCALE_VALUES, "beta": 1.0}
        names = ["x", "y", "alpha", "shift"]
        args = [values[k] for k in names[:n_positional]] + ([7] if extra_positional else [])
        return _answer(lambda: fn(*args, **{k: values[k] for k in keywords})), y.tolist()

    assert call(mod.scale) == call(mod.scale._binder)


@_SETTINGS
@given(m=st.integers(0, 12), n=st.integers(0, 12), k=st.integers(-20, 20),
       k_form=st.sampled_from(["int", "keyword", "np.int64", "bool", "float"]),
       framework=st.sampled_from(["numpy", "torch", "tvm_ffi"]))
def test_random_returned_shapes_answer_as_the_binder(mod, m, n, k, k_form, framework):
    x = np.zeros((m, n), dtype=np.float32)
    if framework == "torch":
        x = pytest.importorskip("torch").zeros((m, n), dtype=pytest.importorskip("torch").float32)
    elif framework == "tvm_ffi":
        x = tvm_ffi.from_dlpack(x)
    kwargs = {}
    if k_form == "keyword":
        kwargs, args = {"k": k}, (x,)
    else:
        value = {"int": k, "np.int64": np.int64(k), "bool": k > 0, "float": float(k)}[k_form]
        args = (x, value)
    assert _answer(lambda: mod.shapes(*args, **kwargs)) == _answer(lambda: mod.shapes._binder(*args, **kwargs))
