"""Notebook reloads (docs/torch.md "What is not an op", docs/jax.md "Registration
rules"): an edited kernel loaded under the same module name in the same process
gets a torch op namespace and XLA target names of its own (the name suffixed with
its build key), so mod.torch and mod.jax work for it, and the earlier module, and
what was compiled with it, keep running the earlier build. The same build loaded
again reuses its registration."""

import numpy as np
import pytest

import kjit
from conftest import build

V1 = r"""
#include <kjit/kernel.h>
void fn(const kjit::TensorView x, kjit::TensorView y) {
  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] = x.data<float>()[i] + 1;
}
"""
V1_SIGS = {"fn": "x: float32[n], y: float32[n] return"}
# an edited body and another signature (a scalar more, a function more)
V2 = r"""
#include <kjit/kernel.h>
void fn(const kjit::TensorView x, kjit::TensorView y, float alpha) {
  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] = alpha * x.data<float>()[i];
}
void neg(const kjit::TensorView x, kjit::TensorView y) {
  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] = -x.data<float>()[i];
}
"""
V2_SIGS = {"fn": "x: float32[n], y: float32[n] return, alpha: float32 = 3.0", "neg": "x: float32[n], y: float32[n] return"}


def test_torch_ops_of_an_edited_kernel_get_a_namespace_of_their_own():
    torch = pytest.importorskip("torch")
    mod1 = build("tr_nb_torch", V1, V1_SIGS)
    ops1 = mod1.torch  # registers: before compiling, which cannot trace a registration
    f1 = torch.compile(lambda t: ops1.fn(t) * 2, fullgraph=True)
    x = torch.arange(4, dtype=torch.float32)
    torch.testing.assert_close(f1(x), (x + 1) * 2)
    assert mod1.torch.namespace == "tr_nb_torch"

    mod2 = build("tr_nb_torch", V2, V2_SIGS)
    ops2 = mod2.torch
    assert mod2.key != mod1.key
    assert mod2.torch.namespace == f"tr_nb_torch_{mod2.key[:12]}"
    assert str(mod2.torch.fn.op._opoverload._schema) == (
        f"tr_nb_torch_{mod2.key[:12]}::fn(Tensor x, float alpha=3.) -> Tensor")
    torch.testing.assert_close(mod2.torch.fn(x), 3 * x)
    torch.testing.assert_close(mod2.torch.neg(x), -x)
    f2 = torch.compile(lambda t: ops2.fn(t, 0.5) * 2, fullgraph=True, dynamic=True)
    for n in (3, 6):
        t = torch.arange(n, dtype=torch.float32)
        torch.testing.assert_close(f2(t), t)
    assert set(torch.library.opcheck(mod2.torch.fn.op, (x, 2.0)).values()) == {"SUCCESS"}

    class Model(torch.nn.Module):
        def forward(self, t):
            return ops2.neg(t)

    exported = torch.export.export(Model(), (x,))
    assert any(f"tr_nb_torch_{mod2.key[:12]}.neg" in str(node.target) for node in exported.graph.nodes)
    torch.testing.assert_close(exported.module()(x), -x)

    # the earlier module, and the graph compiled with it, still run the earlier build
    torch.testing.assert_close(mod1.torch.fn(x), x + 1)
    torch.testing.assert_close(mod1.torch.fn.op(x), x + 1)
    torch.testing.assert_close(f1(x), (x + 1) * 2)


def test_torch_the_same_build_loaded_again_reuses_its_ops():
    torch = pytest.importorskip("torch")
    first = build("tr_same_torch", V1, V1_SIGS)
    ops = first.torch
    build("tr_same_torch", V2, V2_SIGS).torch  # another build in between  # noqa: B018
    again = build("tr_same_torch", V1, V1_SIGS)
    assert again.key == first.key
    assert again.torch.namespace == "tr_same_torch"
    assert again.torch.fn.op is ops.fn.op  # one registration, no duplicate
    torch.testing.assert_close(again.torch.fn(torch.ones(2)), torch.full((2,), 2.0))


def test_jax_callables_of_an_edited_kernel_get_targets_of_their_own():
    jax = pytest.importorskip("jax")
    import kjit.jax  # noqa: PLC0415

    jnp = jax.numpy
    mod1 = build("tr_nb_jax", V1, V1_SIGS)
    x = jnp.arange(4, dtype=jnp.float32)
    f1 = jax.jit(lambda t: mod1.jax.fn(t) * 2)
    np.testing.assert_array_equal(f1(x), (np.asarray(x) + 1) * 2)
    assert mod1.jax.fn.target == "tr_nb_jax.fn"

    mod2 = build("tr_nb_jax", V2, V2_SIGS)
    fns = mod2.jax
    assert fns.fn.target.startswith("tr_nb_jax_") and fns.fn.target.endswith(".fn")
    assert fns.fn.target != mod1.jax.fn.target
    np.testing.assert_array_equal(jax.jit(fns.fn)(x), 3 * np.asarray(x))
    np.testing.assert_array_equal(jax.jit(lambda t: fns.fn(t, alpha=0.5))(x), 0.5 * np.asarray(x))
    np.testing.assert_array_equal(jax.vmap(fns.neg)(x.reshape(2, 2)), -np.asarray(x).reshape(2, 2))
    assert {(fns.fn.target, "cpu"), (fns.neg.target, "cpu")} <= set(kjit.jax.registered_targets())

    # the earlier module, and the program jitted with it, still run the earlier build
    np.testing.assert_array_equal(mod1.jax.fn(x), np.asarray(x) + 1)
    np.testing.assert_array_equal(f1(x), (np.asarray(x) + 1) * 2)
    np.testing.assert_array_equal(jax.jit(mod1.jax.fn)(x + 1), np.asarray(x) + 2)

    # the same build again: the same targets, registered once
    before = kjit.jax.registered_targets()
    again = build("tr_nb_jax", V2, V2_SIGS)
    assert again.jax.fn.target == fns.fn.target
    assert kjit.jax.registered_targets() == before


def test_an_explicit_name_taken_by_another_build_stays_an_error():
    # the caller named it (torch.ops.<ns>.fn, jax.ffi.ffi_call("<prefix>.fn")): it must mean one build
    pytest.importorskip("torch")
    import kjit.torch  # noqa: PLC0415

    mod1 = build("tr_named", V1, V1_SIGS)
    mod2 = build("tr_named", V2, V2_SIGS)
    kjit.torch.register(mod1, "tr_named_ns")
    with pytest.raises(kjit.SpecError, match=r"op 'tr_named_ns::fn' is already registered by a different build"):
        kjit.torch.register(mod2, "tr_named_ns")
