"""One gradient pairing for every front end (docs/torch.md "Autograd", docs/jax.md
"Gradients"): a forward kjit function and the kjit function of the same module
that computes its gradients, matched by parameter names. ``mod.backward`` holds a
module's pairs; kjit.torch builds its autograd formula and kjit.jax its
``jax.custom_vjp`` from the same :class:`Pairing`, so the rule is written once.

The rule: a backward parameter named ``grad_<output>`` is the cotangent of the
forward's returned tensor ``<output>``; one named like a forward argument is that
argument; one named like a returned tensor is that output. The backward's returned
tensors named ``grad_<input>`` are the gradients of those tensor inputs (inputs
without one get none, that is zeros).
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence, Tuple

from .errors import SpecError

_FORM = "a dict {forward function name: backward function name}"


class Pairing:
    """How one backward's parameters come from a forward call, and what its results
    are. ``sources``: per backward argument (in its order) ``("grad", k)`` the
    cotangent of output k, ``("input", k)`` forward argument k, ``("output", k)``
    output k; ``grads``: per returned tensor of the backward, the forward argument
    it is the gradient of. SpecError when a name maps to nothing."""

    def __init__(self, fwd_name: str, fwd_params, bwd_name: str, bwd_params, where: str) -> None:
        self.forward, self.backward = fwd_name, bwd_name
        #: the forward's arguments in call order (tensors and scalars), and its returned tensors
        self.inputs = [p.name for p in fwd_params if not p.returned]
        self.outputs = [p.name for p in fwd_params if p.returned]
        tensors = [p.name for p in fwd_params if not p.returned and p.kind == "tensor"]
        if any(p.written for p in fwd_params if not p.returned):
            raise SpecError(f"{where}: '{fwd_name}' writes an out tensor; a function with a backward must return its "
                            "results ('return' tensors), not mutate its arguments (autograd and jax.custom_vjp "
                            "differentiate results)")
        self.sources: List[Tuple[str, int]] = [self._source(p.name, where) for p in bwd_params if not p.returned]
        self.grads: List[int] = []
        for p in (p for p in bwd_params if p.returned):
            if not (p.name.startswith("grad_") and p.name[5:] in tensors):
                raise SpecError(f"{where}: backward '{bwd_name}' returns '{p.name}'; its returned tensors must be "
                                f"grad_<input> for a tensor input of '{fwd_name}' "
                                f"({', '.join('grad_' + t for t in tensors) or 'none'})")
            self.grads.append(self.inputs.index(p.name[5:]))

    def _source(self, name: str, where: str) -> Tuple[str, int]:
        if name.startswith("grad_") and name[5:] in self.outputs:
            return ("grad", self.outputs.index(name[5:]))
        if name in self.inputs:
            return ("input", self.inputs.index(name))
        if name in self.outputs:
            return ("output", self.outputs.index(name))
        raise SpecError(
            f"{where}: backward '{self.backward}' of '{self.forward}' has parameter '{name}', which is neither "
            f"grad_<output> ({', '.join('grad_' + o for o in self.outputs) or 'no outputs'}), an argument of "
            f"'{self.forward}' ({', '.join(self.inputs)}) nor one of its outputs ({', '.join(self.outputs)})")

    @property
    def saved_inputs(self) -> List[int]:
        """The forward arguments the backward reads (residuals, with saved_outputs)."""
        return sorted({k for kind, k in self.sources if kind == "input"})

    @property
    def saved_outputs(self) -> List[int]:
        return sorted({k for kind, k in self.sources if kind == "output"})

    def arguments(self, inputs: Sequence[Any], outputs: Sequence[Any], cotangents: Sequence[Any]) -> List[Any]:
        """The backward's arguments in its order, from the forward's arguments, its
        outputs and their cotangents (entries the backward does not read may be None)."""
        pick = {"input": inputs, "output": outputs, "grad": cotangents}
        return [pick[kind][k] for kind, k in self.sources]

    def gradients(self, results) -> List[Any]:
        """The backward's result(s) as one gradient per forward argument (None: none)."""
        results = results if isinstance(results, tuple) else (results,)
        out: List[Any] = [None] * len(self.inputs)
        for k, g in zip(self.grads, results):
            out[k] = g
        return out

    def __repr__(self) -> str:
        return f"<kjit pairing {self.forward} -> {self.backward}>"


def checked_form(backward, where: str) -> Dict[str, str]:
    """``backward=`` as a dict of names; TypeError for another form (checked before a
    compile, so a typo costs no build)."""
    if backward is None:
        return {}
    if not isinstance(backward, Mapping):
        raise TypeError(f"{where}: backward= must be {_FORM}, got {type(backward).__name__}")
    for fwd, bwd in backward.items():
        for role, name in (("forward", fwd), ("backward", bwd)):
            if not isinstance(name, str):
                raise TypeError(f"{where}: backward={{{fwd!r}: {bwd!r}}}: the {role} must be a function name (str), "
                                f"got {type(name).__name__}")
    return dict(backward)


def pairings(mod, backward, where: str) -> Dict[str, Pairing]:
    """The pairs of ``backward=`` for module ``mod``, each checked (names the module
    has, a parameter mapping that holds); TypeError/SpecError naming the pair."""
    pairs = checked_form(backward, where)
    for fwd, bwd in pairs.items():
        for name in (fwd, bwd):
            if name not in mod:
                raise SpecError(f"{where}: backward={{{fwd!r}: {bwd!r}}} names {name!r}, which module '{mod.name}' "
                                f"does not have (it has: {', '.join(mod.functions)})")
    return {fwd: Pairing(fwd, mod[fwd].__kjit_params__, bwd, mod[bwd].__kjit_params__, where)
            for fwd, bwd in pairs.items()}


def conflicts(held: Mapping[str, Pairing], new: Mapping[str, Pairing], where: str) -> None:
    """SpecError when ``new`` gives a paired function another backward (one function
    has one backward: torch keeps one autograd formula per op, JAX one custom_vjp)."""
    for fwd, pair in new.items():
        previous = held.get(fwd)
        if previous is not None and previous.backward != pair.backward:
            raise SpecError(f"{where}: '{fwd}' has backward '{previous.backward}' already (mod.backward); a function "
                            f"has one backward, so it cannot also have '{pair.backward}'")
