"""The gradient pairing declared in the sources (docs/torch.md, Autograd):
`// @kjit f(...) backward=f_backward` pairs f with the module's function computing
its gradients, for mod.torch and mod.jax alike; the library's manifest keeps it, so a
module built with kjit.build and loaded with kjit.load has the same pairing."""

import os

import numpy as np
import pytest

import kjit
from conftest import build

SRC = r"""
#include <kjit/kernel.h>
#include <cmath>
// @kjit sin_(x: float32[n], y: float32[n] return) backward=sin_backward
void sin_(const kjit::TensorView x, kjit::TensorView y) {
  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] = std::sin(x.data<float>()[i]);
}
// @kjit sin_backward(x: float32[n], grad_y: float32[n], grad_x: float32[n] return)
void sin_backward(const kjit::TensorView x, const kjit::TensorView g, kjit::TensorView gx) {
  for (int64_t i = 0; i < x.numel(); ++i) gx.data<float>()[i] = std::cos(x.data<float>()[i]) * g.data<float>()[i];
}
"""


@pytest.fixture(scope="module")
def mod():
    return build("pairing_annotations", SRC, None, jax=True)


def test_the_annotation_pairs_the_module(mod):
    assert dict(mod.backward) == {"sin_": "sin_backward"}


def test_torch_and_jax_differentiate_through_it(mod):
    torch = pytest.importorskip("torch")
    x = torch.rand(5, requires_grad=True)
    mod.torch.sin_(x).sum().backward()
    torch.testing.assert_close(x.grad, torch.cos(x.detach()))
    jax = pytest.importorskip("jax")
    g = jax.grad(lambda v: mod.jax.sin_(v).sum())(jax.numpy.linspace(0, 1, 5, dtype=jax.numpy.float32))
    np.testing.assert_allclose(g, np.cos(np.linspace(0, 1, 5, dtype=np.float32)), rtol=1e-6)


def test_a_built_library_keeps_the_pairing(tmp_path):
    path = kjit.build("pairing_built", output=os.fspath(tmp_path / "pairing_built.so"), cpp_sources=SRC,
                      functions=None)
    assert dict(kjit.load(path).backward) == {"sin_": "sin_backward"}


def test_another_pairing_at_load_is_a_conflict():
    with pytest.raises(kjit.SpecError, match=r"'sin_' has backward 'sin_backward' already \(mod.backward\)"):
        build("pairing_conflict", SRC + "// @kjit other(x: float32[n], grad_y: float32[n], grad_x: float32[n] "
              "return)\nvoid other(const kjit::TensorView, const kjit::TensorView, kjit::TensorView) {}\n", None,
              backward={"sin_": "other"})


@pytest.mark.parametrize("line, message", [
    ("// @kjit f(x: float32[n]) backward=g", r"^cpp_sources:2 \(// @kjit annotation\): backward=g names no declared "
                                            r"function of the module; declare g \(the function computing the "
                                            r"gradients of 'f'\) with its own // @kjit line$"),
    ("// @kjit f(x: float32[n]) backward=f", r"backward=f names 'f' itself"),
    ("// @kjit f(x: float32[n]) backward=1x", r"backward='1x' must name a function of the module \(a C identifier\)"),
])
def test_bad_annotations_are_spec_errors(line, message):
    with pytest.raises(kjit.SpecError, match=message):
        build("pairing_bad", "#include <kjit/kernel.h>\n" + line + "\nvoid f(const kjit::TensorView x) {}\n", None)
