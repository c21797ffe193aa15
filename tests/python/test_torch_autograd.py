"""Autograd through kjit backward pairs follows torch's rules (docs/torch.md,
Autograd): saved tensors go through ctx.save_for_backward (a tensor modified in
place before the backward is torch's error), create_graph=True differentiates the
backward op through its own pair or fails with torch's "no autograd formula"
error, and a module has one registration (mod.torch), whichever way it was made.
Also: integer scalars are SymInt in schemas, and the eager shortcut hands tensors
without plain storage (meta, vmap, functionalize) to the op."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import kjit  # noqa: E402
import kjit.torch  # noqa: E402
from conftest import build  # noqa: E402

SRC = r"""
#include <kjit/kernel.h>
void mul(const kjit::TensorView x, const kjit::TensorView w, kjit::TensorView y) {
  for (int64_t i = 0; i < x.numel(); ++i) y.data<double>()[i] = x.data<double>()[i] * w.data<double>()[i];
}
void mul_backward(const kjit::TensorView grad_y, const kjit::TensorView x, const kjit::TensorView w,
                  kjit::TensorView grad_x, kjit::TensorView grad_w) {
  for (int64_t i = 0; i < x.numel(); ++i) {
    grad_x.data<double>()[i] = grad_y.data<double>()[i] * w.data<double>()[i];
    grad_w.data<double>()[i] = grad_y.data<double>()[i] * x.data<double>()[i];
  }
}
void add_one(kjit::TensorView w) {
  for (int64_t i = 0; i < w.numel(); ++i) w.data<double>()[i] += 1;
}
void square(const kjit::TensorView x, kjit::TensorView y) {
  for (int64_t i = 0; i < x.numel(); ++i) y.data<double>()[i] = x.data<double>()[i] * x.data<double>()[i];
}
// grad_x = 2 grad_y x
void square_backward(const kjit::TensorView grad_y, const kjit::TensorView x, kjit::TensorView grad_x) {
  for (int64_t i = 0; i < x.numel(); ++i) grad_x.data<double>()[i] = 2 * grad_y.data<double>()[i] * x.data<double>()[i];
}
// the backward of square_backward: its inputs grad_y and x, given grad_grad_x
void square_backward_backward(const kjit::TensorView grad_grad_x, const kjit::TensorView grad_y,
                              const kjit::TensorView x, kjit::TensorView grad_grad_y, kjit::TensorView grad_x) {
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double g = grad_grad_x.data<double>()[i];
    grad_grad_y.data<double>()[i] = 2 * x.data<double>()[i] * g;
    grad_x.data<double>()[i] = 2 * grad_y.data<double>()[i] * g;
  }
}
void cube(const kjit::TensorView x, kjit::TensorView y) {
  for (int64_t i = 0; i < x.numel(); ++i) y.data<double>()[i] = x.data<double>()[i] * x.data<double>()[i] * x.data<double>()[i];
}
// grad_x = 3 grad_y x^2, with no pair of its own
void cube_backward(const kjit::TensorView grad_y, const kjit::TensorView x, kjit::TensorView grad_x) {
  for (int64_t i = 0; i < x.numel(); ++i)
    grad_x.data<double>()[i] = 3 * grad_y.data<double>()[i] * x.data<double>()[i] * x.data<double>()[i];
}
void shift(const kjit::TensorView x, kjit::TensorView y, int64_t k) {
  for (int64_t i = 0; i < x.numel(); ++i) y.data<double>()[i] = x.data<double>()[i] + k;
}
"""
SIGS = {
    "mul": "x: float64[n], w: float64[n], y: float64[n] return",
    "mul_backward": "grad_y: float64[n], x: float64[n], w: float64[n], grad_x: float64[n] return, "
                    "grad_w: float64[n] return",
    "add_one": "w: float64[n] out",
    "square": "x: float64[n], y: float64[n] return",
    "square_backward": "grad_y: float64[n], x: float64[n], grad_x: float64[n] return",
    "square_backward_backward": "grad_grad_x: float64[n], grad_y: float64[n], x: float64[n], "
                                "grad_grad_y: float64[n] return, grad_x: float64[n] return",
    "cube": "x: float64[n], y: float64[n] return",
    "cube_backward": "grad_y: float64[n], x: float64[n], grad_x: float64[n] return",
    "shift": "x: float64[n], y: float64[n] return, k: int64",
}
PAIRS = {"mul": "mul_backward", "square": "square_backward", "square_backward": "square_backward_backward",
         "cube": "cube_backward"}


@pytest.fixture(scope="module")
def mod():
    return build("torch_autograd", SRC, SIGS, torch={"backward": PAIRS})


def _x(*values):
    return torch.tensor(values, dtype=torch.float64, requires_grad=True)


def test_load_inline_torch_backward_is_registered(mod):
    """load_inline(torch={"backward": ...}) registers the pairs: mod.torch is that registration."""
    assert mod.torch.mul.has_backward and mod.torch.square.has_backward
    x = _x(1.0, 2.0)
    mod.torch.square(x).sum().backward()
    assert x.grad.tolist() == [2.0, 4.0]


@pytest.mark.parametrize("modify", ["torch", "kjit"])
def test_a_saved_tensor_modified_in_place_is_torchs_error(mod, modify):
    """A tensor the backward reads, modified after the forward (by torch, or by a kjit
    function writing it), is refused at backward as torch's own x * w is."""
    x, w = _x(1.0, 1.0, 1.0), _x(2.0, 2.0, 2.0)
    y = mod.torch.mul(x, w)
    with torch.no_grad():
        if modify == "torch":
            w.add_(1)
        else:
            mod.add_one(w)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    y2 = x2 * w2
    with torch.no_grad():
        w2.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y2.sum().backward()  # torch's own rule, for comparison


def test_an_untouched_saved_tensor_gives_the_gradient(mod):
    x, w = _x(1.0, 2.0, 3.0), _x(4.0, 5.0, 6.0)
    mod.torch.mul(x, w).sum().backward()
    assert x.grad.tolist() == [4.0, 5.0, 6.0] and w.grad.tolist() == [1.0, 2.0, 3.0]


def test_create_graph_differentiates_through_the_backwards_pair(mod):
    """A gradient penalty over square(x): torch gives 2x + 8x^3 (d/dx of x^2 + (2x)^2 ... as below)."""
    def penalty(square, x):
        y = square(x)
        (g,) = torch.autograd.grad(y.sum(), x, create_graph=True)
        return y.sum() + (g ** 2).sum()

    x = _x(0.5, -1.5, 2.0)
    penalty(mod.torch.square, x).backward()
    ref = x.detach().clone().requires_grad_()
    penalty(lambda t: t * t, ref).backward()
    torch.testing.assert_close(x.grad, ref.grad)
    assert torch.autograd.gradgradcheck(mod.torch.square, (_x(0.3, -0.7),))


def test_create_graph_without_a_pair_for_the_backward_is_torchs_error(mod):
    """cube's backward has no pair of its own: a second derivative is torch's "no
    autograd formula" error, never a graphless (silently wrong) result."""
    x = _x(1.0, 2.0)
    (g,) = torch.autograd.grad(mod.torch.cube(x).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match=r"torch_autograd.cube_backward.*no autograd formula was registered"):
        g.sum().backward()
    (g1,) = torch.autograd.grad(mod.torch.cube(x).sum(), x)  # first order is fine
    assert g1.tolist() == [3.0, 12.0]


def test_register_after_mod_torch_adds_the_pair_to_mod_torch():
    """kjit.torch.register(mod, backward=...) after mod.torch exists updates mod.torch
    itself: one registration per module."""
    m = build("torch_autograd_late", SRC, {k: SIGS[k] for k in ("square", "square_backward")})
    ops = m.torch
    x = _x(3.0)
    with pytest.raises(TypeError, match=r"torch_autograd_late::square: an argument requires grad, but this op has "
                                        r"no backward"):
        ops.square(x)
    again = kjit.torch.register(m, backward={"square": "square_backward"})
    assert again is ops is m.torch and m.torch.square.has_backward
    assert dict(m.backward) == {"square": "square_backward"}  # the alias updates the module's one pairing
    m.torch.square(x).sum().backward()
    assert x.grad.tolist() == [6.0]
    assert kjit.torch.register(m, backward={"square": "square_backward"}) is ops  # the same pair again: a no-op
    with pytest.raises(kjit.SpecError, match=r"module 'torch_autograd_late' is registered already, under namespace "
                                             r"'torch_autograd_late' \(mod.torch\); a module has one registration, so "
                                             r"it cannot also be 'other'"):
        kjit.torch.register(m, "other")


def test_a_second_backward_for_a_paired_op_is_refused(mod):
    """The module's pairing refuses it; so does torch's op when another Module object
    of the same build paired it first (torch keeps one autograd formula per op)."""
    with pytest.raises(kjit.SpecError, match=r"^kjit.torch.register: 'square' has backward 'square_backward' already "
                                             r"\(mod.backward\); a function has one backward, so it cannot also have "
                                             r"'cube_backward'$"):
        kjit.torch.register(mod, backward={"square": "cube_backward"})
    assert mod.backward["square"] == "square_backward"
    again = build("torch_autograd", SRC, SIGS)  # the same build: the same ops
    with pytest.raises(kjit.SpecError, match=r"op 'torch_autograd::square' has backward 'square_backward' already; "
                                             r"torch keeps one autograd formula per op, so it cannot also have "
                                             r"'cube_backward'"):
        kjit.torch.register(again, backward={"square": "cube_backward"})


def test_load_inline_backward_pairs_the_torch_ops():
    """load_inline(..., backward=...) declares the pairing once, on the module
    (mod.backward); mod.torch, made later, uses it. torch={"backward": ...} with the
    same pair is the same pairing; another one is refused before anything registers."""
    sigs = {k: SIGS[k] for k in ("square", "square_backward", "cube_backward")}
    m = build("torch_autograd_module", SRC, sigs, backward={"square": "square_backward"})
    assert dict(m.backward) == {"square": "square_backward"} and "torch" not in m.__dict__
    assert m.torch.square.has_backward
    assert torch.autograd.gradcheck(m.torch.square, (_x(0.5, -1.5, 2.0),))
    same = build("torch_autograd_module", SRC, sigs, backward={"square": "square_backward"},
                 torch={"backward": {"square": "square_backward"}})
    assert same.torch.square.has_backward
    with pytest.raises(kjit.SpecError, match=r"^kjit.torch.register: 'square' has backward 'square_backward' already "
                                             r"\(mod.backward\); a function has one backward, so it cannot also have "
                                             r"'cube_backward'$"):
        build("torch_autograd_module", SRC, sigs, backward={"square": "square_backward"},
              torch={"backward": {"square": "cube_backward"}, "namespace": "torch_autograd_other"})


@pytest.mark.parametrize("option, message", [
    ("yes", r"load_inline\(torch=...\) takes True, False or a dict of kjit.torch.register's options "
            r"\(\{'backward': \{...\}, 'namespace': ...\}\), got str"),
    ({"backwards": {}}, r"load_inline\(torch=...\): unknown option 'backwards' \(kjit.torch.register takes "
                        r"'backward' and 'namespace'\)"),
])
def test_load_inline_torch_option_errors(option, message):
    with pytest.raises(TypeError, match=message):
        build("torch_autograd_opts", SRC, {"square": SIGS["square"]}, torch=option)


def test_integer_scalars_are_symints_so_dynamic_compile_makes_one_graph(mod):
    assert str(mod.torch.shift.op._opoverload._schema) == "torch_autograd::shift(Tensor x, SymInt k) -> Tensor"
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    f = torch.compile(lambda x, k: mod.torch.shift(x, k), backend=backend, dynamic=True, fullgraph=True)
    x = torch.zeros(3, dtype=torch.float64)
    for k in range(1, 5):
        assert f(x, k).tolist() == [float(k)] * 3
    assert len(graphs) == 1


def test_tensors_without_plain_storage_go_through_the_op(mod):
    """meta tensors, torch.func.vmap and functionalize: the eager shortcut defers to
    the op (which works there); mod.fn itself says which argument and what to call."""
    y = mod.torch.mul(torch.empty(4, dtype=torch.float64, device="meta"),
                      torch.empty(4, dtype=torch.float64, device="meta"))
    assert y.device.type == "meta" and y.shape == (4,)
    a = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    with pytest.warns(UserWarning, match="batching rule"):  # torch's fallback loop for ops without one
        batched = torch.func.vmap(mod.torch.square)(a)
    assert batched.tolist() == (a * a).tolist()
    assert torch.func.functionalize(mod.torch.square)(a[0]).tolist() == [0.0, 1.0, 4.0]
    with pytest.raises(TypeError, match=r"^square: argument #0 'x' is a meta tensor \(shape and dtype, no data\), "
                                        r"which has no data a kjit function can read \(torch: .*\); call "
                                        r"mod.torch.square, the torch op"):
        mod.square(torch.empty(2, dtype=torch.float64, device="meta"))
    with pytest.raises(TypeError, match=r"^square: argument #0 'x' is a torch tensor without storage \(one inside "
                                        r"torch.func.vmap, grad or functionalize\)"):
        torch.func.vmap(mod.square)(a)
    with pytest.raises(TypeError, match=r"^square: argument #0 'x' is a sparse_coo tensor, whose layout kjit does "
                                        r"not read; pass x.to_dense\(\)$"):
        mod.square(a[0].to_sparse())


def test_cpu_tensors_still_take_the_eager_shortcut(mod):
    """The deferral costs nothing for plain tensors: the result is kjit's own (no grad
    needed, no dispatcher)."""
    x = torch.arange(3, dtype=torch.float64)
    assert mod.torch.square.fn.eager(x).tolist() == [0.0, 1.0, 4.0]
    assert np.array_equal(mod.torch.square(x).numpy(), [0.0, 1.0, 4.0])
