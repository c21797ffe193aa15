"""The one call model (src/call): how `mod.fn` binds a call, checks it and shapes
its returned tensors, and how front ends ask it (`fn.bind`, `fn.infer`,
kjit.call_infer). Each case checks values or the exact message; random cases
compare the binding with Python's own (`inspect.Signature.bind`), the returned
shapes with Python's arithmetic, and the model's checks with the stub's."""

import inspect
import os
import re

import numpy as np
import pytest
import tvm_ffi
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kjit
from conftest import build
from kjit._frameworks import TensorMeta

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
void half(const kjit::TensorView x, kjit::TensorView y) {}
void rows(const kjit::TensorView x, kjit::TensorView y) {}
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
    "half": "x: float32[2*n], y: float32[n] out",
    "rows": "x: float32[m, n], y: float32[m, n] return",
}


@pytest.fixture(scope="module")
def mod():
    return build("call_model", SRC, SIGS)


def _xy(n=4):
    return np.arange(n, dtype=np.float32), np.zeros(n, dtype=np.float32)


def _message(call):
    with pytest.raises(Exception) as err:  # noqa: PT011 (each test checks type and text)
        call()
    return type(err.value), str(err.value)


# ---- binding: positions, keywords, defaults ----

@pytest.mark.parametrize("args, kwargs, expect", [
    ((), {}, [0.0, 2.0, 4.0, 6.0]),
    ((1.0,), {}, [0.0, 1.0, 2.0, 3.0]),
    ((), {"shift": 5}, [5.0, 7.0, 9.0, 11.0]),
    ((-1.0,), {"shift": 1}, [1.0, 0.0, -1.0, -2.0]),
    ((), {"alpha": 0.5, "shift": 1}, [1.0, 1.5, 2.0, 2.5]),
])
def test_keywords_and_defaults(mod, args, kwargs, expect):
    x, y = _xy()
    mod.scale(x, y, *args, **kwargs)
    assert y.tolist() == expect


def test_every_argument_by_keyword_with_names_built_at_run_time(mod):
    x, y = _xy()
    mod.scale(shift=1, y=y, alpha=1.0, x=x)
    assert y.tolist() == [1.0, 2.0, 3.0, 4.0]
    mod.scale(x, **{"".join(["y"]): y, "sh" + "ift": 2})  # not the interned names
    assert y.tolist() == [2.0, 4.0, 6.0, 8.0]


@pytest.mark.parametrize("args, kwargs, message", [
    ((), {"beta": 2.0}, "scale() got an unexpected keyword argument 'beta' (its parameters: x, y, alpha, shift)"),
    ((1.0,), {"alpha": 2.0}, "scale() got multiple values for argument 'alpha' (#2, also passed by position)"),
    ((1.0, 2, 3), {}, "scale() takes 4 arguments (x, y, alpha, shift) but 5 were given"),
])
def test_binding_mistakes(mod, args, kwargs, message):
    x, y = _xy()
    assert _message(lambda: mod.scale(x, y, *args, **kwargs)) == (TypeError, message)


def test_missing_arguments_with_and_without_defaults(mod):
    x, _ = _xy()
    assert _message(lambda: mod.scale(x)) == (TypeError, "scale() missing required argument: 'y'")
    assert _message(lambda: mod.scale(alpha=1.0)) == (TypeError, "scale() missing required arguments: 'x', 'y'")
    assert _message(lambda: mod.copy(x)) == (TypeError, "copy() missing required argument: 'y'")
    assert _message(lambda: mod.copy(x, x, x)) == (TypeError, "copy() takes 2 arguments (x, y) but 3 were given")
    assert _message(lambda: mod.iota()) == (TypeError, "iota() missing required argument: 'k'")


def test_stub_messages_of_a_bound_call(mod):
    x = np.arange(4, dtype=np.float32)
    assert _message(lambda: mod.scale(x, y=np.zeros(5, np.float32))) == (
        ValueError, "scale: argument #1 'y': shape[0] must equal n = 4 (bound by x.shape[0]), got 5")


def test_bind_gives_the_values_a_call_binds(mod):
    x, y = _xy()
    assert mod.scale.bind(x, y=y, shift=3)[2:] == (2.0, 3)
    assert mod.scale.bind(x, y)[0] is x
    assert mod.scale.defaults == {"alpha": 2.0, "shift": 0}
    assert mod.split.bind(x, k=2)[1] == 2
    assert _message(lambda: mod.split.bind(x)) == (TypeError, "split() missing required argument: 'k'")


_SETTINGS = settings(max_examples=200, derandomize=True, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture])


@_SETTINGS
@given(n_positional=st.integers(0, 5), keywords=st.sets(st.sampled_from(["x", "y", "alpha", "shift", "beta"])))
def test_random_bindings_agree_with_python(mod, n_positional, keywords):
    """The model binds exactly when Python's own binder (inspect.Signature.bind) does,
    to the same values; on a mistake both raise TypeError."""
    x, y = _xy()
    values = {"x": x, "y": y, "alpha": 0.5, "shift": 3, "beta": 1.0}
    args = [values[k] for k in ["x", "y", "alpha", "shift"]][:n_positional] + ([7] if n_positional == 5 else [])
    kwargs = {k: values[k] for k in keywords}
    try:
        bound = inspect.signature(mod.scale).bind(*args, **kwargs)
    except TypeError:
        with pytest.raises(TypeError):
            mod.scale.bind(*args, **kwargs)
        return
    bound.apply_defaults()
    got = mod.scale.bind(*args, **kwargs)
    assert all(a is b for a, b in zip(got, bound.args)), (got, bound.args)


# ---- read-only arrays and other frameworks ----

def test_read_only_input_is_passed_and_a_written_one_named(mod):
    x, y = _xy()
    x.setflags(write=False)
    mod.scale(x, y=y, shift=1)
    assert y.tolist() == [1.0, 3.0, 5.0, 7.0]
    mod.copy(x, y)  # the positional path takes it too
    assert y.tolist() == x.tolist()
    assert mod.twice(x).tolist() == [0.0, 0.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0]
    y.setflags(write=False)
    kind, text = _message(lambda: mod.scale(x, y=y))
    assert kind is ValueError
    assert text.startswith("scale: argument #1 'y' is a read-only NumPy array, but the kernel writes it")


def test_array_subclass_and_numpy_integer_symbol(mod):
    class Sub(np.ndarray):
        pass

    y = mod.twice(np.array([1.0], dtype=np.float32).view(Sub))
    assert type(y) is np.ndarray and y.tolist() == [1.0, 1.0]
    value, lo, hi = mod.split(np.arange(5, dtype=np.float32), np.int64(2))
    assert value == 1.5 and lo.tolist() == [0.0, 1.0] and hi.tolist() == [2.0, 3.0, 4.0]


def test_jax_tracers_and_written_jax_arrays_name_the_jax_callable(mod):
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    x = jnp.arange(4, dtype=jnp.float32)
    assert np.asarray(mod.twice(x)).tolist() == [0.0, 0.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0]
    assert isinstance(mod.twice(x), jax.Array)
    kind, text = _message(lambda: jax.jit(lambda a: mod.twice(a))(x))
    assert kind is TypeError
    assert text == ("twice: argument #0 'x' is a JAX tracer (inside jax.jit, vmap or grad), which kjit functions "
                    "cannot read; call mod.jax.twice, its JAX-traceable form")
    kind, text = _message(lambda: jax.jit(lambda a: mod.copy(a, np.zeros(4, np.float32)))(x))
    assert kind is TypeError and "'x' is a JAX tracer" in text
    kind, text = _message(lambda: mod.copy(np.ones(4, np.float32), x))
    assert kind is TypeError and text.startswith("copy: argument #1 'y' is a JAX array, which is immutable")


def test_bfloat16_numpy_input_gets_dlpacks_buffer_error():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    m = build("call_model_bf16", "#include <kjit/kernel.h>\nvoid f(const kjit::TensorView x, kjit::TensorView y) {}\n",
              {"f": "x: bfloat16|float32[n], y: dtype(x)[n] return"})
    with pytest.raises(BufferError):
        m.f(np.zeros(3, dtype=ml_dtypes.bfloat16))  # NumPy cannot export bfloat16


# ---- returned tensors ----

def test_returned_numpy_torch_and_tvm_ffi(mod):
    for dtype in (np.float32, np.float64):
        y = mod.twice(np.array([1.0, 2.0], dtype=dtype))
        assert type(y) is np.ndarray and y.dtype == dtype and y.tolist() == [1.0, 1.0, 2.0, 2.0]
    y = mod.twice(tvm_ffi.from_dlpack(np.array([1.0, 2.0], dtype=np.float64)))
    assert isinstance(y, tvm_ffi.Tensor) and np.from_dlpack(y).tolist() == [1.0, 1.0, 2.0, 2.0]
    torch = pytest.importorskip("torch")
    y = mod.twice(torch.tensor([1.0, 2.0], dtype=torch.float64))
    assert type(y) is torch.Tensor and y.dtype == torch.float64 and y.tolist() == [1.0, 1.0, 2.0, 2.0]
    value, lo, hi = mod.split(torch.arange(5, dtype=torch.float32), k=2)
    assert value == 1.5 and type(lo) is torch.Tensor and hi.tolist() == [2.0, 3.0, 4.0]
    t = mod.total(torch.ones(3))
    assert t.shape == () and t.item() == 3.0


def test_zero_dim_returned_and_no_tensor_arguments(mod):
    t = mod.total(np.ones(3, dtype=np.float32))
    assert t.shape == () and t.dtype == np.float32 and float(t) == 3.0
    y = mod.iota(4)
    assert y.dtype == np.int32 and y.tolist() == [0, 1, 2, 3]
    assert mod.iota(k=0).shape == (0,)


@pytest.mark.parametrize("call, message", [
    (lambda m: m.rows(np.ones(3, np.float32)), (TypeError, "rows: argument #0 'x': ndim must be 2 (float32[m, n]), got 1")),
    (lambda m: m.rows(1.0), (TypeError, "rows: argument #0 'x': expected a tensor (float32[m, n]), got float 1")),
    (lambda m: m.rows(None), (TypeError, "rows: argument #0 'x': expected a tensor (float32[m, n]), got None (declare "
                                         "it 'optional' to accept None)")),
    (lambda m: m.rows([[1.0]]), (TypeError, "rows: argument #0 'x': expected a tensor (float32[m, n]), got a list")),
    (lambda m: m.split(np.arange(5, dtype=np.float32), 2.0),
     (TypeError, "split: argument #1 'k': expected an int (int64), got float 2")),
    (lambda m: m.split(np.arange(5, dtype=np.float64), 2),
     (TypeError, "split: argument #0 'x': dtype must be float32, got float64")),
    (lambda m: m.split(np.arange(2, dtype=np.float32), 3),
     (ValueError, "split: constraint 'k <= n' failed with k = 3 (bound by argument 'k'), n = 2 (bound by x.shape[0])")),
    (lambda m: m.iota(-1),
     (ValueError, "iota: returned tensor 'y': shape[0] = k is -1 with k = -1 (bound by argument 'k'); an extent must "
                  "not be negative")),
    (lambda m: m.like(None, 2),
     (ValueError, "like: returned tensor 'y' takes the dtype of 'x' (dtype(x)), which is None")),
])
def test_returned_tensor_messages_name_the_argument(mod, call, message):
    assert _message(lambda: call(mod)) == message


def test_returned_extent_that_overflows(mod):
    kind, text = _message(lambda: mod.shapes(np.zeros((0, 1), np.float32), -2**63))
    assert kind is ValueError
    assert text == ("shapes: returned tensor 'y': shape[3] = (n - k) / 2, which overflows int64 with "
                    "k = -9223372036854775808 (bound by argument 'k'), n = 1 (bound by x.shape[1])")


def _shapes_oracle(m, n, k):
    """The returned shape of `shapes` by Python's own arithmetic (floor division and modulo)."""
    return (m // 2, n % 3, -m + 2 * n, (n - k) // 2, k % 3, 4)


@_SETTINGS
@given(m=st.integers(0, 12), n=st.integers(0, 12), k=st.integers(-20, 20),
       framework=st.sampled_from(["numpy", "torch", "tvm_ffi"]))
def test_random_returned_shapes_agree_with_python(mod, m, n, k, framework):
    x = np.zeros((m, n), dtype=np.float32)
    if framework == "torch":
        x = pytest.importorskip("torch").zeros((m, n))
    elif framework == "tvm_ffi":
        x = tvm_ffi.from_dlpack(x)
    shape = _shapes_oracle(m, n, k)
    if any(d < 0 for d in shape):
        kind, text = _message(lambda: mod.shapes(x, k))
        assert kind is ValueError and "an extent must not be negative" in text
        return
    y = mod.shapes(x, k)
    assert tuple(y.shape) == shape
    assert mod.shapes.infer(TensorMeta((m, n), "float32"), k) == ((shape, "float32", (1, 0)),)


# ---- the model as front ends use it ----

def test_infer_takes_metadata_and_runs_every_check(mod):
    assert mod.twice.infer(TensorMeta((5,), "float64")) == (((10,), "float64", (1, 0)),)
    assert mod.split.infer(TensorMeta((5,), "float32"), k=2) == (((2,), "float32", (1, 0)), ((3,), "float32", (1, 0)))
    assert _message(lambda: mod.rows.infer(TensorMeta((2, 3), "float32", 2, 1))) == (
        ValueError, "rows: argument #0 'x': device must be cpu, got cuda:1")
    assert _message(lambda: mod.twice.infer(TensorMeta((5,), "int32"))) == (
        TypeError, "twice: argument #0 'x': dtype must be one of float32, float64, got int32")
    assert _message(lambda: mod.copy.infer(TensorMeta((4,), "float32"), TensorMeta((4,), "float32", 2, 0))) == (
        ValueError, "copy: argument #1 'y': device must be cpu, got cuda:0")
    assert _message(lambda: mod.copy.infer(TensorMeta((4, 2), "float32", strides=(1, 4)), None))[0] is TypeError
    kind, text = _message(lambda: mod.half.infer(TensorMeta((5,), "float32"), TensorMeta((2,), "float32")))
    assert kind is ValueError and text.startswith("half: argument #0 'x': shape[0] = 5 does not match 2*n")
    assert mod.copy.infer(TensorMeta((4,), "float32"), TensorMeta((4,), "float32")) == ()
    kind, text = _message(lambda: mod.copy(TensorMeta((4,), "float32"), np.zeros(4, np.float32)))
    assert kind is TypeError and "is a kjit.TensorMeta, which only fn.infer() takes" in text


def test_infer_checks_layout_from_strides(mod):
    kind, text = _message(lambda: mod.rows.infer(TensorMeta((2, 3), "float32", strides=(1, 2))))
    assert kind is ValueError and text.startswith("rows: argument #0 'x': strides[1] must be 1 for a compact")


def test_call_infer_is_the_tvm_ffi_form(mod):
    meta = [tvm_ffi.Shape([4]), "float32", tvm_ffi.Device("cpu", 0)]
    (shape, dtype, device), = kjit._lib.api.call_infer(mod.twice.model, [meta])
    assert tuple(shape) == (8,) and str(dtype) == "float32" and str(device) == "cpu:0"
    out = kjit._lib.api.call_infer(mod.split.model, [tvm_ffi.from_dlpack(np.zeros(5, np.float32)), 3])
    assert [tuple(o[0]) for o in out] == [(3,), (2,)]
    with pytest.raises(ValueError, match=re.escape("split: constraint 'k <= n' failed")):
        kjit._lib.api.call_infer(mod.split.model, [meta, 7])
    model = kjit._lib.api.call_model("f", "a: float32[n], b: float32[n + 1] return")
    assert tuple(kjit._lib.api.call_infer(model, [meta])[0][0]) == (5,)


# ---- the model and the stub agree ----

AGREE_SRC = "#include <kjit/kernel.h>\n" + "\n".join(
    f"void {name}(const kjit::TensorView a, kjit::TensorView b{', int64_t k' if 'k:' in sig else ''}) {{}}"
    for name, sig in [("eq", ""), ("lin", ""), ("con", "k:"), ("flg", ""), ("tvar", ""), ("dof", ""), ("bat", "")])
AGREE_SIGS = {
    "eq": "a: float32|int8[n, m], b: float32[m] out",
    "lin": "a: float32[2*n + 1], b: float32[n, m] out strided",
    "con": "a: float32[n] strided, b: float32[n] out, k: int32; n % k == 0",
    "flg": "a: bool[n, m], b: float32[m] out",  # bool's tolerance: uint8/int8 bytes pass too
    "tvar": "<T: float32|int8|float64> a: T[n, m], b: T[m] out",  # a dtype variable bound by a
    "dof": "a: float64|float32[n, m] strided, b: dtype(a)[m] out",
    "bat": "a: float32|int8[*g, m], b: float32[*g] out",  # a batch group bound by a
}


@pytest.fixture(scope="module")
def agree():
    return build("call_model_agree", AGREE_SRC, AGREE_SIGS)


def _stub_answer(fn, args):
    try:
        fn.ffi_function(*args)
        return None
    except Exception as err:  # noqa: BLE001 (the error is the answer)
        return type(err), str(err)


def _model_answer(fn, args):
    try:
        fn.infer(*args)
        return None
    except Exception as err:  # noqa: BLE001
        return type(err), str(err)


@_SETTINGS
@given(fn=st.sampled_from(["eq", "lin", "con", "flg", "tvar", "dof", "bat"]), a_shape=st.lists(st.integers(0, 9), min_size=0, max_size=3),
       b_shape=st.lists(st.integers(0, 9), min_size=0, max_size=3),
       dtype=st.sampled_from(["float32", "int8", "float64", "bool", "uint8", "int16"]),
       transposed=st.booleans(), k=st.integers(-3, 5))
def test_model_and_stub_agree_on_random_calls(agree, fn, a_shape, b_shape, dtype, transposed, k):
    """Every call the stub rejects the model rejects with the same message, and the other way round."""
    a = np.zeros(a_shape, dtype=dtype)
    if transposed and a.ndim == 2:
        a = np.zeros(a_shape[::-1], dtype=dtype).T
    b = np.zeros(b_shape, dtype=np.float32)
    args = (a, b, k) if fn == "con" else (a, b)
    f = getattr(agree, fn)
    assert _model_answer(f, args) == _stub_answer(f, args)


def test_no_python_evaluates_dims():
    """The Python package binds and shapes nothing itself: no eval of dims, no binder."""
    root = os.path.dirname(kjit.__file__)
    for name in os.listdir(root):
        if name.endswith(".py"):
            with open(os.path.join(root, name), encoding="utf-8") as f:
                text = f.read()
            assert "eval(" not in text, name
            assert "_Binder" not in text and "_call_plan" not in text, name


def test_torch_tensors_that_require_grad_are_refused_at_the_call(mod):
    torch = pytest.importorskip("torch")
    x = torch.ones(4, requires_grad=True)
    kind, text = _message(lambda: mod.twice(x))
    assert kind is TypeError
    assert text.startswith("twice: argument #0 'x' requires grad, but kjit functions compute no gradients (the result "
                           "would have no grad_fn); pass x.detach(), call it under torch.no_grad()")
    kind, text = _message(lambda: mod.copy(torch.nn.Parameter(torch.ones(4)), torch.zeros(4)))
    assert kind is TypeError and "'x' requires grad" in text
    with torch.no_grad():
        assert mod.twice(x).tolist() == [1.0] * 8
    assert mod.twice(x.detach()).requires_grad is False


def test_a_repeated_call_still_checks_data():
    """Returned-tensor calls keep the metadata the model last passed: a repeat with the
    same shapes skips the metadata checks but never the data checks."""
    m = build("call_model_align", "#include <kjit/kernel.h>\nvoid f(const kjit::TensorView x, kjit::TensorView y) {}\n",
              {"f": "x: float32[n] align(16), y: float32[n] return"})
    raw = np.zeros(64, np.float32)
    skip = (-raw.ctypes.data % 16) // 4
    aligned, misaligned = raw[skip:skip + 8], raw[skip + 1:skip + 9]
    assert m.f(aligned).shape == (8,)
    kind, text = _message(lambda: m.f(misaligned))
    assert kind is ValueError and "argument #0 'x': data pointer" in text and "must be aligned to 16 bytes" in text
    assert m.f(aligned).shape == (8,)
    assert m.f(np.zeros(5, np.float32)[0:0]).shape == (0,)  # another shape: the model runs again


def test_a_returned_dtype_kjit_cannot_allocate_is_named():
    torch = pytest.importorskip("torch")
    m = build("call_model_c32", "#include <kjit/kernel.h>\nvoid f(const kjit::TensorView b, kjit::TensorView y) {}\n",
              {"f": "b: any[n], y: dtype(b)[n] return"})
    kind, text = _message(lambda: m.f(torch.zeros(3, dtype=torch.complex32)))
    assert (kind, text) == (TypeError, "f: returned tensor 'y' takes the dtype of 'b' (dtype(b)), which is complex32: "
                                       "kjit cannot allocate that dtype; pass 'b' in a dtype kjit knows (docs/spec.md)")


@pytest.mark.parametrize("shape, dtype, kind, message", [
    ([2**62 + 1], "float32", ValueError, "kjit: cannot allocate a tensor of shape (4611686018427387905) and dtype "
                                         "float32: its size in bytes overflows int64"),
    ([3, -1], "float32", ValueError, "kjit: cannot allocate a tensor of shape (3, -1): an extent is negative"),
    ([2], "complex32", TypeError, "kjit: cannot allocate a tensor of dtype 'complex32', which kjit does not know"),
])
def test_every_allocation_checks_its_own_size(shape, dtype, kind, message):
    with pytest.raises(kind) as err:
        kjit._lib.api.ew_empty(shape, dtype)
    assert str(err.value).startswith(message)


def test_packed_value_counts_are_exact_or_refused_by_the_model():
    """The call model counts a byte carrier's packed values exactly (2^61 bytes hold
    2^62 int4 values, which bind n), and refuses a carrier whose count int64 cannot
    hold, as the stub does, before any symbol is bound from it."""
    m = build("packed_counts", """
    #include <kjit/kernel.h>
    void pair(const kjit::TensorView, const kjit::TensorView) {}
    """, {"pair": "x: int4[n], y: int8[n]"})
    assert m.pair.infer(TensorMeta((2**61,), "uint8"), TensorMeta((2**62,), "int8")) == ()
    kind, text = _message(lambda: m.pair.infer(TensorMeta((2**61,), "uint8"), TensorMeta((2**62 - 1,), "int8")))
    assert kind is ValueError and "n = 4611686018427387904" in text, text
    kind, text = _message(lambda: m.pair.infer(TensorMeta((2**62,), "uint8"), TensorMeta((1,), "int8")))
    assert kind is ValueError
    assert text == ("pair: argument #0 'x': its last dim of 4611686018427387904 bytes of uint8 holds more 4-bit "
                    "int4 values than int64 counts (2^63 or more)")


def test_a_returned_tensor_the_framework_cannot_allocate_is_named():
    m = build("alloc_named", """
    #include <kjit/kernel.h>
    void fill_n(kjit::TensorView, int64_t) {}
    """, {"fill_n": "y: float32[n] return, n: int64"})
    kind, text = _message(lambda: m.fill_n(n=2**62))
    assert kind is ValueError  # NumPy's own type, with its message kept
    assert text.startswith("fill_n: returned tensor 'y' of shape (4611686018427387904,) and dtype float32 cannot be "
                           "allocated: "), text
    assert m.fill_n(n=3).shape == (3,)
