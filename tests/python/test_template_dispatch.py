"""Template kernels dispatched by the stub (docs/spec.md, Dtype variables): a kernel
written once as `template <typename T>` with `<T: ...>` in its signature is
instantiated for each of T's dtypes, and the stub calls the one for the dtype T is
bound to in the call; several variables give the product, within a limit."""

import numpy as np
import pytest

import kjit
from conftest import build

SRC = r"""
#include <kjit/kernel.h>
#include <cmath>
#include <cstdint>
template <typename T> void rmsnorm(const kjit::TensorView x, const kjit::TensorView w, kjit::TensorView y, double eps) {
  const int64_t n = x.size(-1), rows = n == 0 ? 0 : x.numel() / n;
  for (int64_t i = 0; i < rows; ++i) {
    double ss = 0;
    for (int64_t j = 0; j < n; ++j) ss += double(x.data<T>()[i * n + j]) * x.data<T>()[i * n + j];
    const double r = 1 / std::sqrt(ss / n + eps);
    for (int64_t j = 0; j < n; ++j) y.data<T>()[i * n + j] = T(x.data<T>()[i * n + j] * r * w.data<T>()[j]);
  }
}
template <typename T, typename I> double gather(const kjit::TensorView x, const kjit::TensorView i) {
  return double(x.data<T>()[i.data<I>()[0]]) + (sizeof(T) == 8 ? 0.25 : 0) + (sizeof(I) == 8 ? 0.5 : 0);
}
template <typename T> int64_t width(const kjit::TensorView a, const kjit::TensorView b) { return sizeof(T); }
namespace ns {
template <class T> void fill(kjit::TensorView y, double v) { for (int64_t i = 0; i < y.numel(); ++i) y.data<T>()[i] = T(v); }
}
using ns::fill;
"""
SIGS = {
    "rmsnorm": "<T: float32|float64> x: T[*batch, n], w: T[n], y: T[*batch, n] return, eps: T = 1e-6",
    "gather": "<T: float32|float64|int32, I: int32|int64> x: T[n], i: I[1]",
    "width": "<T: int8|int16|int64> a: T[n] optional, b: T[n] optional",
    "fill": "<T: uint8|float64> y: T[n] out, v: float64",
}


@pytest.fixture(scope="module")
def mod():
    return build("template_dispatch", SRC, SIGS)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_instantiation_for_the_bound_dtype_runs(mod, dtype):
    x = np.random.default_rng(0).random((2, 3, 4)).astype(dtype)
    w = np.linspace(0.5, 1.5, 4).astype(dtype)
    y = mod.rmsnorm(x, w)
    assert y.dtype == dtype
    np.testing.assert_allclose(y, x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-6) * w,
                               rtol=1e-5)


@pytest.mark.parametrize("tdtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("idtype", [np.int32, np.int64])
def test_several_variables_dispatch_over_their_product(mod, tdtype, idtype):
    x = np.arange(5).astype(tdtype)
    want = 3 + (0.25 if np.dtype(tdtype).itemsize == 8 else 0) + (0.5 if np.dtype(idtype).itemsize == 8 else 0)
    assert mod.gather(x, np.array([3], idtype)) == want


def test_optional_carriers_and_the_unbound_case(mod):
    assert mod.width(np.zeros(2, np.int16), None) == 2
    assert mod.width(None, np.zeros(2, np.int64)) == 8
    with pytest.raises(ValueError, match=r"^width: width<\.\.\.> is instantiated per dtype of T, but no tensor bound T "
                                         r"in this call \(a, b: all None\); pass one$"):
        mod.width(None, None)
    with pytest.raises(ValueError, match=r"width<\.\.\.> is instantiated per dtype of T"):
        mod.width.ffi_function(None, None)


def test_a_namespaced_template_and_out_tensors(mod):
    y = np.zeros(3, np.uint8)
    mod.fill(y, 7.9)
    np.testing.assert_array_equal(y, [7, 7, 7])
    z = np.zeros(2)
    mod.fill(z, 0.5)
    np.testing.assert_array_equal(z, [0.5, 0.5])


def test_torch_ops_call_the_same_instantiations(mod):
    torch = pytest.importorskip("torch")
    ops = mod.torch
    for dtype in (torch.float32, torch.float64):
        x = torch.rand(2, 4, dtype=dtype)
        torch.testing.assert_close(torch.compile(ops.rmsnorm, fullgraph=True)(x, torch.ones(4, dtype=dtype)),
                                   mod.rmsnorm(x, torch.ones(4, dtype=dtype)))


@pytest.mark.parametrize("source, sig, message", [
    ("template <typename T, typename A> void f(const kjit::TensorView x) {}", "<T: float32|float64> x: T[n]",
     r"f at .*:2 is a template over dtype variable T, so kjit instantiates it for the bound dtypes; every template "
     r"parameter must then be a dtype variable"),
    ("template <typename T, int N> void f(const kjit::TensorView x) {}", "<T: float32> x: T[n]",
     r"every template parameter must then be a dtype variable of the signature"),
    ("template <typename T> void f(const kjit::TensorView x) {}", "<T: float32|bfloat16> x: T[n]",
     r"f at .*:2 is instantiated for each dtype of T, but bfloat16 has no C\+\+ type in kernels"),
    ("template <typename T> void f(const kjit::TensorView x) {}", "<T: bool|uint8> x: T[n]",
     r"T lists bool with an 8-bit integer type"),
    ("template <typename T, typename U> void f(const kjit::TensorView x, const kjit::TensorView y) {}",
     "<T: int8|int16|int32|int64|uint8, U: int8|int16|int32|float32> x: T[n], y: U[n]",
     r"would be instantiated 20 times \(the product of 2 dtype variables' alternatives\), more than kjit's limit of "
     r"16; list fewer dtypes"),
])
def test_templates_kjit_cannot_dispatch_are_spec_errors(source, sig, message):
    with pytest.raises(kjit.SpecError, match=message):
        build("template_refused", "#include <kjit/kernel.h>\n" + source + "\n", {"f": sig})


def test_the_return_schema_is_the_instantiations_one_type_or_any(mod):
    schema = mod.ffi_module.get_function_metadata
    assert schema("gather")["type_schema"].startswith('{"type":"ffi.Function","named_args":{"return":[{"type":"float"}]')
    assert schema("width")["type_schema"].startswith('{"type":"ffi.Function","named_args":{"return":[{"type":"int"}]')
    m = build("template_return_any", "#include <kjit/kernel.h>\ntemplate <typename T> T first(const kjit::TensorView x) "
              "{ return x.data<T>()[0]; }\n", {"first": "<T: float32|int64> x: T[n]"})
    assert '"return":[{"type":"Any"}]' in m.ffi_module.get_function_metadata("first")["type_schema"]
    assert m.first(np.array([2.5], np.float32)) == 2.5 and m.first(np.array([7], np.int64)) == 7


INFERRED = r"""
#include <cstdint>
// @kjit scale
template <typename T> void scale(const T* x, T* y, T alpha, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = alpha * x[i];
}
// @BE axpy arg arg ret attr.alpha attr.n
template <typename T> void axpy(const T* x, const T* y, T* out, T alpha, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = alpha * x[i] + y[i];
}
"""


@pytest.fixture(scope="module")
def inferred():
    return kjit.load_inline("template_inferred", cpp_sources=INFERRED)


def test_inference_and_tokens_make_a_template_parameter_a_dtype_variable(inferred):
    want = "<T: float32|float64> x: T[...], y: T[...] out, alpha: T, n: int64"
    assert kjit.resolve(INFERRED, ["scale"]) == {"scale": want}
    assert inferred.get_function_metadata("scale")["kjit_signature"] == want
    assert (inferred.get_function_metadata("axpy")["kjit_signature"] ==
            "<T: float32|float64> x: T[...], y: T[...], out: T[...] out, alpha: T, n: int64")
    for dtype in (np.float32, np.float64):
        x = np.arange(4, dtype=dtype)
        y = np.zeros(4, dtype)
        inferred.scale(x, y, 0.5, 4)
        np.testing.assert_array_equal(y, x * dtype(0.5))
        out = np.zeros(4, dtype)
        inferred.axpy(x, y, out, alpha=2.0, n=4)
        np.testing.assert_array_equal(out, 2 * x + y)
    with pytest.raises(TypeError, match=r"^scale: argument #1 'y': dtype must be float32 \(T, bound by x\), got float64$"):
        inferred.scale(np.zeros(4, np.float32), np.zeros(4), 1.0, 4)
    with pytest.raises(TypeError, match=r"^scale: argument #0 'x': dtype must be one of float32, float64, got int32$"):
        inferred.scale(np.zeros(4, np.int32), np.zeros(4, np.int32), 1.0, 4)


def test_a_template_parameter_that_types_no_tensor_is_a_spec_error():
    with pytest.raises(kjit.SpecError, match=r"template parameter U types no tensor parameter \(const U\* x, U\* y\)"):
        kjit.resolve("template <typename T, typename U> void f(const T* x, T* y, U a) {}", ["f"])
