"""kjit functions as torch custom ops (kjit.torch, docs/torch.md): schemas from the
spec, fake implementations from the call model, autograd pairs, torch.compile
(static and dynamic shapes, no graph break), torch.export and torch.library.opcheck
on every op of the test modules."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import kjit  # noqa: E402
import kjit.torch  # noqa: E402
from conftest import build  # noqa: E402

SRC = r"""
#include <kjit/kernel.h>
#include <cstring>
template <typename T> void scale_t(const kjit::TensorView x, kjit::TensorView y, double alpha) {
  const T* a = x.data<T>();
  T* b = y.data<T>();
  for (int64_t i = 0; i < x.numel(); ++i) b[i] = static_cast<T>(alpha) * a[i];
}
void scale(const kjit::TensorView x, kjit::TensorView y, double alpha) {
  if (x.dtype().bits == 64) scale_t<double>(x, y, alpha); else scale_t<float>(x, y, alpha);
}
void scale_backward(const kjit::TensorView grad_y, kjit::TensorView grad_x, double alpha) {
  scale(grad_y, grad_x, alpha);
}
// y = x * w (rows of x scaled by w): two inputs, both with gradients
void mul(const kjit::TensorView x, const kjit::TensorView w, kjit::TensorView y) {
  const int64_t m = x.size(0), n = x.size(1);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) y.data<double>()[i * n + j] = x.data<double>()[i * n + j] * w.data<double>()[j];
}
void mul_backward(const kjit::TensorView grad_y, const kjit::TensorView x, const kjit::TensorView w,
                  kjit::TensorView grad_x, kjit::TensorView grad_w) {
  const int64_t m = x.size(0), n = x.size(1);
  std::memset(grad_w.data_ptr(), 0, sizeof(double) * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      grad_x.data<double>()[i * n + j] = grad_y.data<double>()[i * n + j] * w.data<double>()[j];
      grad_w.data<double>()[j] += grad_y.data<double>()[i * n + j] * x.data<double>()[i * n + j];
    }
}
void axpy(const kjit::TensorView x, kjit::TensorView y, float alpha) {
  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] += alpha * x.data<float>()[i];
}
void twice(const kjit::TensorView x, kjit::TensorView y) {
  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[2 * i] = y.data<float>()[2 * i + 1] = x.data<float>()[i];
}
void head(const kjit::TensorView x, kjit::TensorView y, int64_t k) {
  std::memcpy(y.data_ptr(), x.data_ptr(), sizeof(float) * k * x.size(1));
}
void bias(const kjit::TensorView x, const kjit::TensorView b, kjit::TensorView y) {
  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] = x.data<float>()[i] + (b.defined() ? b.data<float>()[i] : 0.f);
}
double total(const kjit::TensorView x) { return 1.0; }
void label(const kjit::TensorView x, kjit::TensorView y, std::string tag) {
  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] = static_cast<float>(tag.size());
}
"""
SIGS = {
    "scale": "x: float32|float64[n], y: dtype(x)[n] return, alpha: float64 = 2.0",
    "scale_backward": "grad_y: float32|float64[n], grad_x: dtype(grad_y)[n] return, alpha: float64 = 2.0",
    "mul": "x: float64[m, n], w: float64[n], y: float64[m, n] return",
    "mul_backward": "grad_y: float64[m, n], x: float64[m, n], w: float64[n], grad_x: float64[m, n] return, "
                    "grad_w: float64[n] return",
    "axpy": "x: float32[n], y: float32[n] out, alpha: float32 = 1.0",
    "twice": "x: float32[n], y: float32[2*n] return",
    "head": "x: float32[m, n], y: float32[k, n] return, k: int64; k <= m",
    "bias": "x: float32[n], b: float32[n] optional, y: float32[n] return",
    "total": "x: float32[n]",
    "label": "x: float32[n], y: float32[n] return, tag: str",
}


@pytest.fixture(scope="module")
def mod():
    return build("torch_ops", SRC, SIGS)


@pytest.fixture(scope="module")
def ops(mod):
    return kjit.torch.register(mod, backward={"scale": "scale_backward", "mul": "mul_backward"})


def _count_compiles():
    """A torch.compile backend that counts the graphs it is given."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    return backend, graphs


def test_schema_comes_from_the_spec(ops):
    schema = lambda name: str(getattr(ops, name).op._opoverload._schema)  # noqa: E731
    assert schema("scale") == "torch_ops::scale(Tensor x, float alpha=2.) -> Tensor"
    assert schema("axpy") == "torch_ops::axpy(Tensor(a!) x, Tensor(b!) y, float alpha=1.) -> ()" or \
        schema("axpy") == "torch_ops::axpy(Tensor x, Tensor(a!) y, float alpha=1.) -> ()"
    assert schema("head") == "torch_ops::head(Tensor x, SymInt k) -> Tensor"
    assert schema("bias") == "torch_ops::bias(Tensor x, Tensor? b) -> Tensor"
    assert schema("label") == "torch_ops::label(Tensor x, str tag) -> Tensor"


def test_functions_a_torch_op_cannot_express_are_skipped_with_a_reason(ops):
    assert "total" in ops.skipped and "returns a float from its kernel" in ops.skipped["total"]
    with pytest.raises(AttributeError, match=r"kjit.torch: 'total' is not a torch op: 'total' returns a float"):
        ops.total  # noqa: B018


def test_eager_calls_equal_the_kjit_functions(mod, ops):
    x = torch.arange(4.0)
    assert ops.scale(x).tolist() == [0.0, 2.0, 4.0, 6.0]
    assert ops.scale(x, alpha=3.0).tolist() == mod.scale(x, 3.0).tolist()
    assert ops.twice(x).tolist() == [0.0, 0.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0]
    y = torch.ones(4)
    assert ops.axpy(x, y, alpha=2.0) is None and y.tolist() == [1.0, 3.0, 5.0, 7.0]
    assert ops.bias(x, None).tolist() == x.tolist()
    assert ops.label(x, "abc").tolist() == [3.0] * 4
    assert ops.twice.op(x).tolist() == ops.twice(x).tolist()  # through the dispatcher too


@pytest.mark.parametrize("name, args", [
    ("scale", lambda: (torch.randn(5), 1.5)),
    ("scale", lambda: (torch.randn(5, dtype=torch.float64), 0.5)),
    ("mul", lambda: (torch.randn(3, 4, dtype=torch.float64), torch.randn(4, dtype=torch.float64))),
    ("axpy", lambda: (torch.randn(6), torch.zeros(6), 2.0)),
    ("twice", lambda: (torch.randn(3),)),
    ("head", lambda: (torch.randn(5, 2), 3)),
    ("bias", lambda: (torch.randn(4), torch.randn(4))),
    ("bias", lambda: (torch.randn(4), None)),
    ("label", lambda: (torch.randn(4), "tag")),
])
def test_opcheck_passes_for_every_op(ops, name, args):
    result = torch.library.opcheck(getattr(ops, name).op, args())
    assert set(result.values()) == {"SUCCESS"}, result


def test_compile_fullgraph_equals_eager(ops):
    backend, graphs = _count_compiles()

    def f(a, w):
        return ops.twice(ops.scale(a, 3.0)) + ops.mul(a.double().reshape(2, 2), w).sum()

    compiled = torch.compile(f, fullgraph=True, backend=backend)
    a, w = torch.arange(4.0), torch.ones(2, dtype=torch.float64)
    torch.testing.assert_close(compiled(a, w), f(a, w))
    assert len(graphs) == 1
    inductor = torch.compile(f, fullgraph=True)
    torch.testing.assert_close(inductor(a, w), f(a, w))


def test_compile_dynamic_compiles_once_for_several_sizes(ops):
    backend, graphs = _count_compiles()

    @torch.compile(fullgraph=True, dynamic=True, backend=backend)
    def f(a):
        return ops.twice(a) * 2 + 1

    for n in (3, 5, 9, 17):
        out = f(torch.ones(n))
        assert out.shape == (2 * n,) and out.tolist() == [3.0] * (2 * n)
    assert len(graphs) == 1

    @torch.compile(fullgraph=True, dynamic=True)
    def g(a, k: int):
        return ops.head(a, k)

    assert g(torch.ones(6, 2), 4).shape == (4, 2)
    assert g(torch.ones(7, 3), 2).shape == (2, 3)


def test_a_wrong_shape_raises_kjits_message_while_tracing(ops):
    @torch.compile(fullgraph=True)
    def f(a, b):
        return ops.mul(a, b)

    with pytest.raises(Exception, match=r"mul: argument #1 'w': shape\[0\] must equal n = 3 \(bound by x\.shape\[1\]\), "
                                        r"got 4"):
        f(torch.ones(2, 3, dtype=torch.float64), torch.ones(4, dtype=torch.float64))


def test_gradcheck_with_a_backward_pair(ops):
    x = torch.randn(5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: ops.scale(t, 1.5), (x,))
    a = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    w = torch.randn(4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(ops.mul, (a, w))
    loss = ops.mul(a, w).sum()
    loss.backward()
    torch.testing.assert_close(w.grad, a.detach().sum(0))


def test_grad_through_torch_compile(ops):
    x = torch.randn(4, dtype=torch.float64, requires_grad=True)
    f = torch.compile(lambda t: (ops.scale(t, 2.0) ** 2).sum(), fullgraph=True)
    f(x).backward()
    torch.testing.assert_close(x.grad, 8 * x.detach())


@pytest.fixture(params=["native", "python"])
def torch_access(request):
    """Both ways a call reads requires_grad and bumps versions: torch's C++ functions
    (on this torch) and its Python API (another torch, or one whose layout the probe
    did not recognise)."""
    from kjit import _call

    assert _call.torch_access(request.param) == request.param
    yield request.param
    _call.torch_access("native")


def test_torch_flags_are_read_without_python_on_this_torch():
    from kjit import _call

    assert _call.torch_access(None) == "native"
    with pytest.raises(ValueError, match=r"^kjit._call.torch_access: mode must be None, 'native' or 'python', got "
                                         r"'fast'$"):
        _call.torch_access("fast")


def test_every_way_a_tensor_requires_grad_is_refused(mod, torch_access):
    leaf = torch.ones(3, requires_grad=True)
    views = {"leaf": leaf, "view": leaf[:2], "result": leaf * 2, "parameter": torch.nn.Parameter(torch.ones(3))}
    for what, x in views.items():
        with pytest.raises(TypeError, match=r"^twice: argument #0 'x' requires grad"):
            mod.twice(x)
        with torch.no_grad():
            assert mod.twice(x).shape == (2 * x.shape[0],), what
    assert mod.twice(leaf.detach()).tolist() == [1.0] * 6


def test_no_backward_is_an_error_at_the_call_never_a_silent_drop(mod, ops, torch_access):
    x = torch.ones(3, requires_grad=True)
    with pytest.raises(TypeError, match=r"^torch_ops::twice: an argument requires grad, but this op has no backward"):
        ops.twice(x)
    with pytest.raises(TypeError, match=r"^twice: argument #0 'x' requires grad"):
        mod.twice(x)
    with pytest.raises(RuntimeError, match=r"no autograd formula was registered"):
        ops.twice.op(x).sum().backward()  # the op itself: torch's own error, at backward
    with torch.no_grad():
        assert ops.twice(x).shape == (6,)


def test_bad_backward_pairs_are_spec_errors(mod):
    with pytest.raises(kjit.SpecError, match=r"backward=\{'twice': 'nope'\} names 'nope'"):
        kjit.torch.register(mod, "torch_ops_bad1", backward={"twice": "nope"})
    with pytest.raises(kjit.SpecError, match=r"'axpy' writes an out tensor; a function with a backward must return "
                                             r"its results"):
        kjit.torch.register(mod, "torch_ops_bad2", backward={"axpy": "scale_backward"})
    with pytest.raises(kjit.SpecError, match=r"backward 'head' of 'scale' has parameter 'k', which is neither "
                                             r"grad_<output> \(grad_y\), an argument of 'scale' \(x, alpha\) nor one "
                                             r"of its outputs \(y\)"):
        kjit.torch.register(mod, "torch_ops_bad3", backward={"scale": "head"})
    with pytest.raises(kjit.SpecError, match=r"backward 'twice' returns 'y'; its returned tensors must be "
                                             r"grad_<input> for a tensor input of 'scale' \(grad_x\)"):
        kjit.torch.register(mod, "torch_ops_bad4", backward={"scale": "twice"})


def test_export_a_module_with_a_kjit_op(ops):
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            return ops.twice(self.lin(x).flatten())

    model = Model()
    x = torch.randn(2, 4)
    exported = torch.export.export(model, (x,))
    assert any("torch_ops.twice" in str(node.target) for node in exported.graph.nodes)
    with torch.no_grad():  # the Linear's output requires grad, and twice has no backward
        torch.testing.assert_close(exported.module()(x), model(x))


def test_mod_torch_and_load_inline_torch(mod):
    assert mod.torch.namespace == "torch_ops"
    m = kjit.load_inline("torch_ops_loaded", cpp_sources=SRC, functions={"twice": SIGS["twice"]}, torch=True)
    assert torch.ops.torch_ops_loaded.twice(torch.ones(2)).tolist() == [1.0] * 4
    assert m.torch.twice(torch.ones(1)).tolist() == [1.0, 1.0]


def test_a_different_build_under_a_registered_name_is_refused():
    first = build("torch_ops_clash", SRC, {"twice": SIGS["twice"]})
    kjit.torch.register(first, "torch_ops_clash_ns")
    kjit.torch.register(first, "torch_ops_clash_ns")  # the same build again: fine
    other = build("torch_ops_clash", SRC + "\n// another build\n", {"twice": SIGS["twice"]})
    with pytest.raises(kjit.SpecError, match=r"op 'torch_ops_clash_ns::twice' is already registered by a different "
                                             r"build"):
        kjit.torch.register(other, "torch_ops_clash_ns")


# ---- elementwise functions as ops ----

@pytest.fixture(scope="module")
def add_op():
    add = kjit.elementwise("template <typename T> T add(T a, T b) { return a + b; }", name="add")
    return kjit.torch.op(add, name="ew_add")


def test_elementwise_op_broadcasts_and_promotes(add_op):
    a = torch.arange(3, dtype=torch.int32).reshape(3, 1)
    b = torch.ones(4, dtype=torch.float32)
    out = add_op(a, b)
    assert out.shape == (3, 4) and out.dtype == torch.float32
    torch.testing.assert_close(out, a + b)
    result = torch.library.opcheck(add_op.op, ([a, b],))
    assert set(result.values()) == {"SUCCESS"}, result


def test_elementwise_op_under_compile(add_op):
    backend, graphs = _count_compiles()
    f = torch.compile(lambda x, y: add_op(x, y) * 2, fullgraph=True, dynamic=True, backend=backend)
    for n in (2, 5, 8):
        x, y = torch.randn(n, 3), torch.randn(3, dtype=torch.float64)
        out = f(x, y)
        assert out.dtype == torch.float64
        torch.testing.assert_close(out, (x + y) * 2)
    assert len(graphs) == 1


def test_functions_without_tensor_inputs_are_not_ops():
    m = build("torch_ops_iota", "#include <kjit/kernel.h>\nvoid iota(int64_t k, kjit::TensorView y) {\n"
              "  for (int64_t i = 0; i < k; ++i) y.data<int32_t>()[i] = static_cast<int32_t>(i);\n}\n",
              {"iota": "k: int64, y: int32[k] return"})
    assert "takes no tensor" in m.torch.skipped["iota"]
    assert np.array_equal(m.iota(3), [0, 1, 2])


# ---- torch semantics kjit calls keep: lazy bits, version counters ----

LAZY_SRC = r"""
#include <kjit/kernel.h>
#include <complex>
void copyc(const kjit::TensorView x, kjit::TensorView y) {
  for (int64_t i = 0; i < x.numel(); ++i) y.data<std::complex<float>>()[i] = x.data<std::complex<float>>()[i];
}
void copyf(const kjit::TensorView x, kjit::TensorView y) {
  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] = x.data<float>()[i];
}
void axpy(const kjit::TensorView x, kjit::TensorView y) {
  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] += x.data<float>()[i];
}
"""


@pytest.fixture(scope="module")
def lazy():
    return build("torch_ops_lazy", LAZY_SRC, {"copyc": "x: complex64[n], y: complex64[n] out",
                                              "copyf": "x: float32[n], y: float32[n] out",
                                              "axpy": "x: float32[n], y: float32[n] out"})


def test_conjugate_and_negative_inputs_are_materialised(lazy):
    z = torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64)
    y = torch.zeros(2, dtype=torch.complex64)
    lazy.copyc(z.conj(), y)
    assert y.tolist() == [1 - 2j, 3 + 4j]
    x = torch.tensor([1.0, -2.0])
    out = torch.zeros(2)
    lazy.copyf(torch._neg_view(x), out)
    assert out.tolist() == [-1.0, 2.0]
    lazy.copyf(x, out)  # a plain tensor after a lazy one: read as it is
    assert out.tolist() == [1.0, -2.0]


def test_plain_tensors_are_asked_for_lazy_bits_once_and_swap_after(lazy, monkeypatch):
    """A checked call asks a plain CPU tensor is_neg() once (one view answers the
    rest), asks again after torch.utils.swap_tensors gave it a negative view's
    contents, and leaves the tensor swappable (no weak reference)."""
    asked = []
    original = torch.Tensor.is_neg
    monkeypatch.setattr(torch.Tensor, "is_neg", lambda self: asked.append(id(self)) or original(self))
    x, out = torch.tensor([1.0, -2.0]), torch.zeros(2)
    for _ in range(3):
        lazy.copyf(x, out)
    assert sorted(asked) == sorted([id(x), id(out)])
    torch.utils.swap_tensors(x, torch._neg_view(torch.tensor([5.0, 6.0])))
    asked.clear()
    lazy.copyf(x, out)
    assert id(x) in asked and id(out) not in asked and out.tolist() == [-5.0, -6.0]


def test_a_written_conjugate_or_negative_view_is_refused(lazy):
    z = torch.zeros(2, dtype=torch.complex64)
    with pytest.raises(ValueError, match=r"^copyc: argument #1 'y' is a conjugate \(is_conj\(\)\) view of a torch "
                                         r"tensor, whose bit DLPack cannot carry: the kernel would write it without "
                                         r"the bit; pass a tensor without it \(y.resolve_conj\(\) makes one\)"):
        lazy.copyc(z, z.conj())
    with pytest.raises(ValueError, match=r"argument #1 'y' is a negative \(is_neg\(\)\) view"):
        lazy.copyf(torch.ones(2), torch._neg_view(torch.zeros(2)))


def test_writes_bump_autograd_version_counters(lazy, torch_access):
    w = torch.ones(3, requires_grad=True)
    b = torch.full((3,), 2.0)
    loss = (w * b).sum()
    version = b._version
    lazy.axpy(torch.ones(3), b)
    assert b._version == version + 1 and b.tolist() == [3.0] * 3
    with torch.inference_mode():  # torch's rule: no version to bump, and no error
        c = torch.full((3,), 2.0)
    lazy.axpy(torch.ones(3), c)
    assert c.tolist() == [3.0] * 3
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation"):
        loss.backward()


def test_elementwise_out_bumps_versions_and_refuses_inputs_that_require_grad(torch_access):
    add = kjit.elementwise("template <typename T> T add(T a, T b) { return a + b; }", name="add")
    w = torch.ones(3, requires_grad=True)
    b = torch.full((3,), 2.0)
    loss = (w * b).sum()
    add(b, 1.0, out=b)
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation"):
        loss.backward()
    with pytest.raises(TypeError, match=r"^add: input #0 requires grad, but kjit.elementwise functions compute no "
                                        r"gradients"):
        add(w, 1.0)
    with torch.no_grad():
        assert add(w, 1.0).tolist() == [2.0] * 3
