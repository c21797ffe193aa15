"""Sharding rules of kjit functions (docs/distributed.md): which dims of which
tensors a partitioner (JAX's Shardy, PyTorch's DTensor) may split across devices,
derived from what kjit knows of a function rather than written per kernel.

A rule names a *factor* per dim, as einsum does (``x: [m, n], w: [n], y: [m, n]
out`` is ``m n, n, m n -> m n``: an out tensor is read and written); each factor
is one of

- **split**: a partitioner may shard it; every tensor with that factor is sharded
  alike and the kernel runs on the local pieces. Batch groups (``*batch``), the
  dims of an elementwise function and the kept dims of a reduction are split, and
  a checked kernel's symbols the spec declares ``independent(m)``; but a factor
  that some output lacks is replicated (the kernel may combine every index of it
  into that output, as RMSNorm's backward sums grad_w over the batch).
- **replicated**: every device holds all of it. The safe default for a checked
  kernel's symbols, whose kernel may read every index of them (RMSNorm's ``n``):
  kjit cannot prove otherwise, so the spec must say ``independent(...)``. Literal
  dims and expressions (``2*n``) are replicated too, with their symbols.
- **reduced**: a reduction's reduced dim. Split when the reduction's partial
  results combine with the reduction itself (a combine-only reduction: each device
  reduces its piece, the pieces are gathered and reduced again), else replicated.

``mod.fn.sharding_rule`` is a function's rule, printable; assign another to
override it (``mod.fn.sharding_rule = mod.fn.sharding_rule.independent("m")``).
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from ._lib import api
from .errors import SpecError

SPLIT, REPLICATED, REDUCED = "split", "replicated", "reduced"


class ShardingRule:
    """The sharding rule of one function: each tensor's dims as factors, and each
    factor's kind. A batch group appears as one entry ``*batch`` standing for the
    leading dims of any count it covers in a call."""

    __slots__ = ("function", "inputs", "outputs", "dims", "kinds", "why")

    def __init__(self, function: str, inputs: Sequence[str], outputs: Sequence[str],
                 dims: Dict[str, Tuple[str, ...]], kinds: Dict[str, str], why: Dict[str, str]) -> None:
        self.function = function
        #: the tensors a call reads (its inputs and out tensors), in the call's order
        self.inputs: Tuple[str, ...] = tuple(inputs)
        #: the tensors it writes (out tensors and returned ones), in the spec's order
        self.outputs: Tuple[str, ...] = tuple(outputs)
        #: each tensor's dims as factor names ("*batch" for a batch group)
        self.dims: Dict[str, Tuple[str, ...]] = dict(dims)
        #: each factor's kind: "split", "replicated" or "reduced"
        self.kinds: Dict[str, str] = dict(kinds)
        #: why a factor is not split, in words
        self.why: Dict[str, str] = dict(why)

    # ---- reading ------------------------------------------------------------------

    def split_factors(self) -> Tuple[str, ...]:
        return tuple(f for f, k in self.kinds.items() if k == SPLIT)

    def einsum(self) -> str:
        """The rule as einsum writes it: ``*batch n, n -> *batch n``."""
        def side(names):
            return ", ".join(" ".join(self.dims[t]) for t in names)
        return f"{side(self.inputs)} -> {side(self.outputs)}"

    def __str__(self) -> str:
        parts = [self.einsum()]
        for kind in (SPLIT, REDUCED, REPLICATED):
            names = [f for f, k in self.kinds.items() if k == kind]
            if names:
                parts.append(f"{kind}: {', '.join(names)}")
        return "; ".join(parts)

    def __repr__(self) -> str:
        notes = "".join(f"\n  {f}: {w}" for f, w in self.why.items() if self.kinds.get(f) != SPLIT)
        tensors = ", ".join(f"{t}[{', '.join(self.dims[t])}]" for t in self.inputs)
        results = ", ".join(f"{t}[{', '.join(self.dims[t])}]" for t in self.outputs)
        return f"<kjit.ShardingRule {self.function}: {tensors} -> {results}; {str(self).split('; ', 1)[-1]}>{notes}"

    def __eq__(self, other) -> bool:
        return isinstance(other, ShardingRule) and all(getattr(self, s) == getattr(other, s) for s in self.__slots__)

    def __hash__(self) -> int:
        return hash((self.function, self.einsum(), tuple(sorted(self.kinds.items()))))

    # ---- overriding ---------------------------------------------------------------

    def _with(self, factors: Iterable[str], kind: str, why: str, method: str) -> "ShardingRule":
        kinds, reasons = dict(self.kinds), dict(self.why)
        for f in factors:
            if f not in kinds:
                known = ", ".join(kinds) or "none"
                raise SpecError(f"{self.function}: sharding_rule.{method}('{f}'): '{f}' is not a factor of the rule "
                                f"(its factors: {known})")
            if kinds[f] == REDUCED and kind == SPLIT:
                raise SpecError(f"{self.function}: sharding_rule.{method}('{f}'): '{f}' is reduced; a reduced factor "
                                "is split only where its partial results combine (docs/distributed.md)")
            kinds[f] = kind
            if kind == SPLIT:
                reasons.pop(f, None)
            else:
                reasons[f] = why
        return ShardingRule(self.function, self.inputs, self.outputs, self.dims, kinds, reasons)

    def independent(self, *factors: str) -> "ShardingRule":
        """This rule with ``factors`` split: the spec's ``independent(...)`` given
        after the fact (the kernel computes each index of them on its own)."""
        return self._with(factors, SPLIT, "", "independent")

    def replicated(self, *factors: str) -> "ShardingRule":
        """This rule with ``factors`` replicated on every device."""
        return self._with(factors, REPLICATED, "replicated by sharding_rule.replicated()", "replicated")

    # ---- one call's dims ----------------------------------------------------------

    def call_dims(self, ranks: Dict[str, int]) -> Dict[str, Tuple[str, ...]]:
        """Each tensor's factors in a call where tensor t has rank ranks[t]: a batch
        group stands for its leading dims (``batch.0``, ``batch.1``, ...)."""
        out = {}
        for t, rank in ranks.items():
            dims = self.dims[t]
            if dims and dims[0].startswith("*"):
                lead = rank - (len(dims) - 1)
                if lead < 0:
                    raise ValueError(f"{self.function}: tensor '{t}' has rank {rank}, fewer than its declared dims")
                dims = tuple(f"{dims[0][1:]}.{k}" for k in range(lead)) + dims[1:]
            elif len(dims) != rank and dims != ("...",):
                raise ValueError(f"{self.function}: tensor '{t}' has rank {rank}, but the rule gives it {len(dims)} dims")
            elif dims == ("...",):
                dims = tuple(f"{t}.{k}" for k in range(rank))  # a tensor of any rank: its own, replicated
            out[t] = dims
        return out

    def kind_of(self, factor: str) -> str:
        """The kind of a factor of call_dims: a batch group's dims are its kind."""
        if factor in self.kinds:
            return self.kinds[factor]
        head = factor.rsplit(".", 1)[0]
        if "*" + head in self.kinds:
            return self.kinds["*" + head]
        return REPLICATED  # a tensor of any rank ("[...]")

    def shardy(self, operands: Sequence[Tuple[str, int]], results: Sequence[Tuple[str, int]]):
        """The rule as JAX's custom_partitioning takes it, for a call whose operands
        and results are (tensor name, rank) in the call's order: (rule string,
        need_replication_factors). Factors are renamed f0, f1, ... (Shardy's names
        are not the spec's)."""
        dims = self.call_dims(dict(list(operands) + list(results)))
        names: Dict[str, str] = {}
        for t, _ in list(operands) + list(results):
            for f in dims[t]:
                names.setdefault(f, f"f{len(names)}")

        def side(values):
            return ", ".join(" ".join(names[f] for f in dims[t]) for t, _ in values)

        rule = f"{side(operands)} -> {side(results)}"
        replicate = tuple(n for f, n in names.items() if self.kind_of(f) != SPLIT)
        return rule, replicate, {n: f for f, n in names.items()}


# ---- rules derived from what kjit knows ----------------------------------------------


def _batch_factor(group: str) -> str:
    return "*" + group


def of_spec(name: str, signature: str) -> ShardingRule:
    """A checked kernel's rule from its spec: batch groups and ``independent(...)``
    symbols split, every other dim replicated (the kernel may read all of it)."""
    spec = api.spec_tensors(name, signature)
    independent = {str(s) for s in spec["independent"]}
    inputs, outputs, dims = [], [], {}
    kinds: Dict[str, str] = {}
    why: Dict[str, str] = {}
    tied: set = set()  # symbols inside expressions: replicated with the expression

    def add(factor: str, kind: str, reason: str = "") -> None:
        if kinds.get(factor) == REPLICATED:
            return
        kinds[factor] = kind
        if reason:
            why[factor] = reason

    for t in spec["tensors"]:
        tname = str(t["name"])
        if t["any_rank"]:
            dims[tname] = ("...",)
        else:
            factors: List[str] = []
            if str(t["batch"]):
                factors.append(_batch_factor(str(t["batch"])))
                add(factors[-1], SPLIT)
            for k, d in enumerate(t["dims"]):
                kind, text = str(d["kind"]), str(d["text"])
                if kind == "symbol":
                    factors.append(text)
                    if text in independent:
                        add(text, SPLIT)
                    else:
                        add(text, REPLICATED, f"the spec does not say independent({text}): the kernel may read every "
                                              f"index of {text}")
                else:
                    factor = f"{tname}.{k}"
                    factors.append(factor)
                    add(factor, REPLICATED, f"{tname}'s dim {k} is {'the literal ' if kind == 'literal' else ''}"
                                            f"'{text}', which kjit does not split")
                    tied.update(str(s) for s in d["symbols"])
            dims[tname] = tuple(factors)
        if not t["returned"]:
            inputs.append(tname)
        if t["written"]:
            outputs.append(tname)
    for s in tied:
        if s in kinds:
            kinds[s] = REPLICATED
            why[s] = f"{s} appears in an expression dim, which kjit does not split"
    for f, kind in kinds.items():
        # an output without the factor may combine every index of it (RMSNorm's backward sums grad_w over the batch)
        lacking = [t for t in outputs if f not in dims[t]]
        if kind == SPLIT and lacking:
            kinds[f] = REPLICATED
            why[f] = f"output '{lacking[0]}' does not have it: the kernel may combine every index of it into that output"
    return ShardingRule(name, inputs, outputs, dims, kinds, why)


def _broadcast_inputs(shapes: Sequence[Tuple[int, ...]], kinds: Dict[str, str], why: Dict[str, str]):
    """Factors d0, d1, ... of the broadcast shape of ``shapes`` (split), and each
    input's dims: the factor where its size is the broadcast one, else (a size-1
    dim that broadcasts) a factor of its own, replicated."""
    rank = max((len(s) for s in shapes), default=0)
    full = [1] * rank
    for s in shapes:
        for k, size in enumerate(s):
            j = rank - len(s) + k
            full[j] = size if full[j] == 1 else full[j]
    factors = tuple(f"d{j}" for j in range(rank))
    for f in factors:
        kinds[f] = SPLIT
    dims: Dict[str, Tuple[str, ...]] = {}
    for i, s in enumerate(shapes):
        mine = []
        for k, size in enumerate(s):
            j = rank - len(s) + k
            if size == full[j]:
                mine.append(factors[j])
            else:
                mine.append(f"input{i}.{k}")
                kinds[mine[-1]] = REPLICATED
                why[mine[-1]] = "a dim of size 1 that broadcasts"
        dims[f"input{i}"] = tuple(mine)
    return factors, dims


def for_elementwise(name: str, input_shapes: Sequence[Sequence[int]], n_outputs: int) -> ShardingRule:
    """An elementwise call's rule: every dim of the broadcast result is split."""
    kinds: Dict[str, str] = {}
    why: Dict[str, str] = {}
    factors, dims = _broadcast_inputs([tuple(s) for s in input_shapes], kinds, why)
    outputs = [f"output{k}" for k in range(n_outputs)]
    for o in outputs:
        dims[o] = factors
    return ShardingRule(name, list(dims)[:len(input_shapes)], outputs, dims, kinds, why)


def for_reduction(name: str, input_shapes: Sequence[Sequence[int]], reduced: Sequence[int], keepdims: bool,
                  combinable: bool) -> ShardingRule:
    """A reduction's rule: kept dims split, reduced dims reduced (split only when
    ``combinable``: partial results reduce again with the reduction itself)."""
    kinds: Dict[str, str] = {}
    why: Dict[str, str] = {}
    factors, dims = _broadcast_inputs([tuple(s) for s in input_shapes], kinds, why)
    inputs = list(dims)
    out = []
    for j, f in enumerate(factors):
        if j not in reduced:
            out.append(f)
            continue
        kinds[f] = REDUCED if combinable else REPLICATED
        why[f] = ("reduced: each device reduces its piece, the pieces are gathered and reduced again" if combinable
                  else "reduced by a reduction with map_code, post_code, an accumulator or an index result, whose "
                       "partial results kjit cannot combine")
        if keepdims:
            out.append(f"output.{j}")
            kinds[out[-1]] = REPLICATED
            why[out[-1]] = "a reduced dim kept with size 1"
    dims["output"] = tuple(out)
    return ShardingRule(name, inputs, ["output"], dims, kinds, why)


def rule_of(fn) -> Optional[ShardingRule]:
    """``fn.sharding_rule`` checked: a ShardingRule of that function, or None."""
    rule = getattr(fn, "sharding_rule", None)
    if rule is None:
        return None
    if not isinstance(rule, ShardingRule):
        raise TypeError(f"{getattr(fn, '__name__', fn)}.sharding_rule must be a kjit.ShardingRule, got "
                        f"{type(rule).__name__}")
    return rule


def result_ranks(rule: ShardingRule, ranks: Dict[str, int]) -> Dict[str, int]:
    """``ranks`` (the inputs' ranks in a call) with the rank of each output the call
    allocates: its declared dims, and a batch group's length as an input has it."""
    lead: Dict[str, int] = {}
    for t, rank in ranks.items():
        dims = rule.dims[t]
        if dims and dims[0].startswith("*"):
            lead[dims[0]] = rank - (len(dims) - 1)
    out = dict(ranks)
    for t in rule.outputs:
        if t in out:
            continue
        dims = rule.dims[t]
        out[t] = lead.get(dims[0], 0) + len(dims) - 1 if dims and dims[0].startswith("*") else len(dims)
    return out


def strategies(rule: ShardingRule, ranks: Dict[str, int], shard, replicate) -> List[Dict[str, object]]:
    """The placements DTensor may run a call with, one dict {tensor: placement} per
    strategy: every tensor replicated, and per split factor every tensor that has it
    sharded on that dim (``shard(dim)``), the others replicated (``replicate()``).
    A factor that is two dims of one tensor cannot be one mesh dim's: left out."""
    dims = rule.call_dims(result_ranks(rule, ranks))
    out = [{t: replicate() for t in dims}]
    factors = []
    for t in dims:
        for f in dims[t]:
            if f not in factors and rule.kind_of(f) == SPLIT:
                factors.append(f)
    for f in factors:
        if any(dims[t].count(f) > 1 for t in dims):
            continue
        out.append({t: shard(dims[t].index(f)) if f in dims[t] else replicate() for t in dims})
    return out
