"""kjit functions as PyTorch custom ops (torch.library), so that ``torch.compile``,
``torch.export`` and autograd see them as first-class operators.

``kjit.torch.register(mod)`` (or ``mod.torch``, or ``load_inline(..., torch=True)``)
makes every function of a module an op ``<namespace>::<fn>``: its schema comes
from the spec (scalars with their types and defaults, ``out`` tensors mutated,
``return`` tensors returned, ``optional`` tensors ``Tensor?``), its fake
implementation asks the function's call model (src/call) for the returned tensors'
shapes and dtypes and raises the spec's errors while tracing, and its dispatch keys
are the devices the spec allows. Each pair of the module's gradient pairing
(``mod.backward``: ``load_inline(..., backward={"fn": "fn_backward"})``, kjit._pairing)
is its forward op's autograd formula (torch.library.register_autograd).
``kjit.torch.op(f)`` does the same for a ``kjit.elementwise`` function.

``mod.torch.fn(...)`` calls the op under ``torch.compile`` and ``torch.export``, on
fake or subclassed tensors and when autograd needs it, and calls ``mod.fn`` directly
otherwise: the dispatcher costs microseconds a call in eager mode (docs/torch.md,
bench/bench_frontends.py). Register before compiling (``mod.torch`` registers on
first use, which torch.compile cannot trace; ``load_inline(..., torch=True)``
registers at load).
"""

from __future__ import annotations

import hashlib
import keyword
import operator
import re
import threading
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from . import function as _function
from ._frameworks import TensorMeta
from ._optional import import_optional
from . import sharding as _sharding
from .errors import SpecError
from .module import FrontEndFunctions, Module

torch = import_optional("torch", "torch", "kjit.torch")

__all__ = ["Ops", "register", "op"]

_SCALAR_SCHEMA = {
    "bool": "bool",
    "str": "str",
    # SymInt: torch.compile(dynamic=True) keeps them symbolic (one graph for every value)
    **{t: "SymInt" for t in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")},
    # tvm-ffi carries complex scalars as real numbers (docs/spec.md)
    **{t: "float" for t in ("float16", "bfloat16", "float32", "float64", "complex64", "complex128")},
}
_DEVICE_TYPES = {"cpu": ("cpu",), "cuda": ("cuda",), "none": None}

_lock = threading.Lock()
_registered: Dict[str, str] = {}  # "namespace::name" -> key of the build (or code) registered under it
_defined: Dict[str, Any] = {}  # "namespace::name" -> the op torch.library.custom_op made for it
_paired: Dict[str, str] = {}  # "namespace::fwd" -> the name of the backward registered for it


# ---- schemas --------------------------------------------------------------------

def _default_text(value) -> Optional[str]:
    """A default as torch's schema writes it; None for what it cannot (inf, nan)."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and value == value and value not in (float("inf"), float("-inf")):
        return repr(value)
    return None


def _schema(fn_name: str, params, kernel_return: str) -> Tuple[str, List[str]]:
    """(schema, mutated argument names) of a kjit function; SpecError for what a
    torch op cannot express."""
    args, mutated, n_returned = [], [], 0
    alias = iter("abcdefghijklmnopqrstuvwxyz")
    for p in params:
        if p.returned:
            n_returned += 1
            continue
        if p.kind == "tensor":
            kind = f"Tensor({next(alias)}!)" if p.written else "Tensor"
            args.append(f"{kind}{'?' if p.optional else ''} {p.name}")
            if p.written:
                mutated.append(p.name)
            continue
        scalar = _SCALAR_SCHEMA.get(p.value_type)
        if scalar is None:
            raise SpecError(f"kjit.torch: '{fn_name}' takes '{p.name}: {p.type}', which a torch op schema cannot "
                            "carry (bytes); declare it str")
        default = "" if p.default is _function._REQUIRED else _default_text(p.default)
        args.append(f"{scalar} {p.name}" + (f"={default}" if default else ""))
    if not any(p.kind == "tensor" and not p.returned for p in params):
        raise SpecError(f"kjit.torch: '{fn_name}' takes no tensor, and a torch op without tensor inputs needs a "
                        "device argument to dispatch on; call the kjit function itself")
    if kernel_return != "None":
        raise SpecError(f"kjit.torch: '{fn_name}' returns a {kernel_return} from its kernel, which a torch op cannot "
                        "return under torch.compile (the fake implementation cannot know a computed value); return "
                        "it in a tensor ('return' in the spec)")
    return f"({', '.join(args)}) -> {_returns(n_returned)}", mutated


def _returns(n: int) -> str:
    """A schema's returns: n new tensors."""
    return "()" if n == 0 else "Tensor" if n == 1 else f"({', '.join(['Tensor'] * n)})"


def _namespace(name: str) -> str:
    text = re.sub(r"\W", "_", name)
    return text if text and not text[0].isdigit() else f"kjit_{text}"


def _build_namespace(mod: Module) -> str:
    """A module's default namespace: its name, unless another build of that name
    holds one of its ops there (an edited kernel loaded again, as in a notebook);
    then its name suffixed with this build's key, a namespace of its own. torch
    keeps an op's first definition, and ops already compiled into graphs or held
    by the earlier module must keep working."""
    base = _namespace(mod.name)
    with _lock:
        taken = any(_registered.get(f"{base}::{fn}", mod.key) != mod.key for fn in mod.functions)
    return f"{base}_{mod.key[:12]}" if taken else base


# ---- fake tensors and symbolic sizes ---------------------------------------------

def _hint(value):
    """A concrete int for a SymInt (its hint), the value itself otherwise."""
    if isinstance(value, torch.SymInt):
        hint = value.node.hint
        if hint is None:
            raise NotImplementedError("kjit.torch: a size without a hint (data-dependent) reached a kjit op")
        return int(hint)
    return value


def _meta(x):
    """A fake (or real) tensor as the call model reads it (sizes by their hints)."""
    if not isinstance(x, torch.Tensor):
        return _hint(x)
    device = x.device
    return TensorMeta(tuple(_hint(s) for s in x.shape), str(x.dtype).replace("torch.", ""),
                      2 if device.type == "cuda" else 1, device.index or 0,
                      tuple(_hint(s) for s in x.stride()))


_FOLD = {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv, "%": operator.mod}


def _fold(tree, args):
    """A returned dim (fn.returned_shapes()) with the caller's own integers, SymInts
    included: the model says what the dim is, torch's integers keep it symbolic."""
    if isinstance(tree, int):
        return tree
    if tree[0] == "dim":
        return args[tree[1]].shape[tree[2]]
    if tree[0] == "arg":
        return args[tree[1]]
    if tree[0] == "neg":
        return -_fold(tree[1], args)
    return _FOLD[tree[0]](_fold(tree[1], args), _fold(tree[2], args))


def _fold_shape(dims, args) -> tuple:
    """A returned shape (fn.returned_shapes()) with the caller's own integers: a
    ("batch", ((i, k), ...)) entry is the leading dims of the first tensor i present
    that names the group, all but its k declared dims."""
    out = []
    for d in dims:
        if isinstance(d, tuple) and d[0] == "batch":
            i, k = next((i, k) for i, k in d[1] if args[i] is not None)
            shape = tuple(args[i].shape)
            out.extend(shape[:len(shape) - k])
        else:
            out.append(_fold(d, args))
    return tuple(out)


def _symbolic(args) -> bool:
    for a in args:
        if isinstance(a, torch.SymInt):
            return True
        if isinstance(a, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in (*a.shape, *a.stride())):
            return True
    return False


def _fake_outputs(fn, args):
    """The returned tensors of a call on fake tensors: shapes and dtypes from the call
    model (every check runs, with the spec's messages); symbolic sizes stay symbolic."""
    outs = fn.infer(*[_meta(a) for a in args])
    shapes = [o[0] for o in outs]
    if _symbolic(args):
        shapes = [_fold_shape(dims, args) for dims in fn.returned_shapes()]
    device = next((a.device for a in args if isinstance(a, torch.Tensor)), None)
    tensors = [torch.empty(shape, dtype=getattr(torch, dtype),
                           device=device if device is not None else ("cuda" if dev[0] == 2 else "cpu"))
               for shape, (_, dtype, dev) in zip(shapes, outs)]
    return None if not tensors else tensors[0] if len(tensors) == 1 else tuple(tensors)


# ---- autograd ---------------------------------------------------------------------

class _Backward:
    """A module's pairing (kjit._pairing.Pairing: which forward values and gradients
    the backward reads, by name) as torch's autograd formula over the backward's op."""

    def __init__(self, pairing, bwd_op) -> None:
        self.pairing = pairing
        self.op = bwd_op  # the backward's own op: traceable when torch.compile compiles the backward

    def setup_context(self, ctx, inputs, output) -> None:
        """Tensors the backward reads go through ``ctx.save_for_backward``, so that
        autograd's checks apply (a saved tensor modified in place before the
        backward is torch's "modified by an inplace operation" error); other
        values, and the returned tensors' metadata (zeros for a missing gradient),
        stay on ``ctx``."""
        outputs = output if isinstance(output, tuple) else (output,)
        saved: List[Any] = []
        slots: List[Tuple[str, Any]] = []
        no_grads = [None] * len(outputs)  # cotangents come in backward()
        for value in self.pairing.arguments(inputs, outputs, no_grads):
            if isinstance(value, torch.Tensor):
                slots.append(("saved", len(saved)))
                saved.append(value)
            else:
                slots.append(("value", value))
        ctx.save_for_backward(*saved)
        ctx.kjit_slots = slots
        ctx.kjit_outputs = [(o.shape, o.dtype, o.device) for o in outputs]

    def backward(self, ctx, *grads):
        """The backward op over the saved tensors, not detached: under
        ``create_graph=True`` the result is differentiable through the backward's
        own pair, or torch's error that the backward op has no autograd formula."""
        saved = ctx.saved_tensors
        args = []
        for (kind, k), (slot, value) in zip(self.pairing.sources, ctx.kjit_slots):
            if kind == "grad":
                g = grads[k]
                if g is None:
                    shape, dtype, device = ctx.kjit_outputs[k]
                    g = torch.zeros(shape, dtype=dtype, device=device)
                args.append(g.contiguous())
            elif slot == "saved":
                args.append(saved[value].contiguous())
            else:
                args.append(value)
        return tuple(self.pairing.gradients(self.op(*args)))


# ---- ops ----------------------------------------------------------------------------

def _requires_grad(values) -> bool:
    return torch.is_grad_enabled() and any(isinstance(v, torch.Tensor) and v.requires_grad for v in values)


def _eager_op(fn, op, qualname: str, has_backward: bool) -> Callable:
    """``mod.torch.fn``: the op under torch.compile and torch.export, on fake, functional
    or subclassed tensors and when autograd needs it; ``mod.fn`` itself otherwise, in
    one C call (``fn.eager``), since the dispatcher costs microseconds in eager mode."""
    eager = fn.eager
    is_compiling = torch.compiler.is_compiling

    def dispatch(args, kwargs):
        values = fn.bind(*args, **kwargs)
        if not call.has_backward and _requires_grad(values):
            raise TypeError(
                f"{qualname}: an argument requires grad, but this op has no backward; pair one "
                f"(kjit.load_inline(..., backward={{'{fn.__name__}': ...}}) or kjit.torch.register(mod, "
                f"backward={{'{fn.__name__}': ...}}), docs/torch.md), or call it under torch.no_grad() or with "
                "detached tensors")
        return op(*values)

    def call(*args, **kwargs):
        if is_compiling():
            return op(*args, **kwargs)
        result = eager(*args, **kwargs)
        return dispatch(args, kwargs) if result is NotImplemented else result

    call.op = op
    call.fn = fn
    call.has_backward = has_backward
    call.__name__ = fn.__name__
    call.__qualname__ = qualname
    call.__doc__ = fn.__doc__
    call.__signature__ = fn.__signature__
    return call


class Ops(FrontEndFunctions):
    """The ops of one module (``mod.torch``): ``ops.fn`` calls the op (_eager_op),
    ``ops.fn.op`` is the torch.library op itself (``torch.ops.<namespace>.<fn>``)."""

    _front_end = "kjit.torch"
    _skipped_text = "is not a torch op"
    _noun = "op"

    def __init__(self, namespace: str) -> None:
        super().__init__()
        self.namespace = namespace

    def __repr__(self) -> str:
        return f"<kjit.torch ops {self.namespace}: {', '.join(self._items)}>"


def _register_sharding(custom, strategies: Callable, static_from: Optional[int] = None) -> None:
    """The op's DTensor sharding rule (torch.distributed.tensor.experimental.
    register_sharding): ``strategies(args, kwargs, Shard, Replicate)`` lists the
    (output placements, input placements) a call may run with (kjit.sharding).
    ``static_from``: the first argument that changes the rule (a reduction's axis),
    which DTensor must key its cache of strategies on; register_sharding keys only
    int arguments, so kjit tells DTensor itself, and where it cannot, offers only
    the replicated strategy (never one cached for another axis). Nothing where
    torch has no distributed package."""
    if not torch.distributed.is_available():
        return
    from torch.distributed.tensor import DTensor, Replicate, Shard
    from torch.distributed.tensor.experimental import register_sharding

    keyed = static_from is None

    def rule(*args, **kwargs):
        found = strategies(args, kwargs, Shard, Replicate)
        return found if keyed else found[:1]

    overload = custom._opoverload
    register_sharding(overload)(rule)
    if static_from is not None:
        try:
            from torch.distributed.tensor._op_schema import RuntimeSchemaInfo

            propagator = DTensor._op_dispatcher.sharding_propagator
            propagator.op_to_schema_info[overload] = RuntimeSchemaInfo(static_from, needs_pytree=True)
            keyed = True
        except (ImportError, AttributeError):  # another torch: the replicated strategy alone stays right
            pass


def _checked_strategies(fn, params) -> Callable:
    """A checked kernel op's DTensor strategies, from ``fn.sharding_rule`` as it is
    when a call is propagated (an override assigned to ``mod.fn.sharding_rule``
    applies): the schema's arguments are the callers in order, its returns the
    returned tensors; out tensors are arguments, sharded as they are written."""
    callers = [p for p in params if not p.returned]
    tensors = {p.name for p in callers if p.kind == "tensor"}
    returned = [p.name for p in params if p.returned]

    def strategies(args, kwargs, shard, replicate):
        values = dict(zip((p.name for p in callers), args), **kwargs)
        ranks = {n: len(v.shape) for n, v in values.items() if n in tensors and v is not None}
        out = []
        for placements in _sharding.strategies(_sharding.rule_of(fn), ranks, shard, replicate):
            ins = [placements[p.name] if p.name in ranks else None for p in callers[:len(args)]]
            out.append(([placements[n] for n in returned], ins))
        return out

    return strategies


def _define(qualname: str, key: str, impl: Callable, fake: Callable, schema: str, mutated: Sequence[str],
            device_types, strategies: Optional[Callable] = None, static_from: Optional[int] = None) -> Any:
    """The op ``qualname`` of the build (or code) ``key``: defined now (with its DTensor
    ``strategies``, _register_sharding), or the one the same key defined before;
    SpecError when a different key holds the name (torch keeps the first definition)."""
    with _lock:  # held while defining: a concurrent caller of the same key gets the op, never a half-made one
        previous = _registered.get(qualname)
        if previous is None:
            custom = torch.library.custom_op(qualname, impl, mutates_args=tuple(mutated),
                                             device_types=device_types, schema=schema)
            custom.register_fake(fake)
            if strategies is not None:
                _register_sharding(custom, strategies, static_from)
            _registered[qualname], _defined[qualname] = key, custom
            return custom
    if previous != key:
        raise SpecError(f"kjit.torch: op '{qualname}' is already registered by a different build (key "
                        f"{previous[:12]}, now {key[:12]}); torch keeps the first definition, so register this one "
                        "under another namespace=")
    return _defined[qualname]


def register(mod: Module, namespace: Optional[str] = None, *, backward: Optional[Mapping[str, str]] = None) -> Ops:
    """Registers every function of ``mod`` as the torch op ``<namespace>::<fn>``
    (namespace: the module's name) and returns them: ``mod.torch``, the module's one
    registration.

    Each pair of the module's gradient pairing (``mod.backward``, declared at
    ``load_inline(..., backward=...)``) is the autograd formula of its forward op.
    ``backward={"fn": "fn_backward"}`` here adds pairs to ``mod.backward`` (the same
    pair again is a no-op, another backward for a paired function a SpecError):
    parameters ``grad_<output>``, the forward's arguments and outputs by name;
    returned tensors ``grad_<input>`` (kjit._pairing). Functions a torch op cannot
    express (a value returned by the kernel, a bytes parameter) are left out:
    ``ops.skipped`` says why. Registering a module again returns ``mod.torch``, with
    any new pairs added to it; another namespace for a registered module is a
    SpecError. A different build of a module whose name already holds its ops (an
    edited kernel loaded again) gets the namespace ``<name>_<mod.key[:12]>``
    (``ops.namespace``); under an explicit ``namespace=`` it is a SpecError.
    """
    if not isinstance(mod, Module):
        raise TypeError(f"kjit.torch.register() takes a kjit.Module, got {type(mod).__name__}")
    new = mod._new_pairings(backward, "kjit.torch.register")
    ops = mod.__dict__.get("torch")
    if namespace is not None:
        ns = _namespace(namespace)
    else:
        ns = ops.namespace if ops is not None else _build_namespace(mod)
    if ops is not None and ops.namespace != ns:
        raise SpecError(f"kjit.torch: module '{mod.name}' is registered already, under namespace '{ops.namespace}' "
                        f"(mod.torch); a module has one registration, so it cannot also be '{ns}'")
    if ops is None:
        ops = _register_ops(mod, ns)
    for pair in new.values():  # torch's own refusals before the module's pairing changes
        _check_ops(ops, pair)
    mod._add_pairings(new)
    for pair in mod._pairings.values():
        _pair(mod, ops, pair)
    mod.__dict__["torch"] = ops
    return ops


def _register_ops(mod: Module, ns: str) -> Ops:
    ops = Ops(ns)
    for fn_name in mod.functions:
        fn = mod[fn_name]
        try:
            schema, mutated = _schema(fn_name, fn.__kjit_params__, fn.__kjit_return__)
        except SpecError as err:
            ops._skip(fn_name, str(err).removeprefix("kjit.torch: "))
            continue
        qualname = f"{ns}::{fn_name}"

        def impl(*args, _fn=fn):
            return _fn(*args)

        def fake(*args, _fn=fn):
            return _fake_outputs(_fn, args)

        custom = _define(qualname, mod.key, impl, fake, schema, mutated, _DEVICE_TYPES[mod.devices[fn_name]],
                         _checked_strategies(fn, fn.__kjit_params__))
        ops._add(fn_name, _eager_op(fn, custom, qualname, _paired.get(qualname) is not None))
    return ops


def _check_ops(ops: Ops, pair) -> None:
    """SpecError when a function of the pair is not a torch op (ops.skipped says why)."""
    for name in (pair.forward, pair.backward):
        if name not in ops._items:
            raise SpecError(f"kjit.torch: backward={{'{pair.forward}': '{pair.backward}'}}: '{name}' is not a torch "
                            f"op: {ops._skipped[name]}")


def _pair(mod: Module, ops: Ops, pair) -> None:
    """Registers the pair's backward as the autograd formula of its forward op (once
    per op: torch keeps one formula; the same pair again is a no-op)."""
    _check_ops(ops, pair)
    qualname = f"{ops.namespace}::{pair.forward}"
    with _lock:
        previous = _paired.get(qualname)
        if previous is None:
            formula = _Backward(pair, ops._items[pair.backward].op)
            torch.library.register_autograd(qualname, formula.backward, setup_context=formula.setup_context)
            _paired[qualname] = pair.backward
    if previous is not None and previous != pair.backward:
        # another Module object of the same build, paired otherwise, registered this op first
        raise SpecError(f"kjit.torch: op '{qualname}' has backward '{previous}' already; torch keeps one autograd "
                        f"formula per op, so it cannot also have '{pair.backward}'")
    ops._items[pair.forward].has_backward = True


# ---- elementwise functions ----------------------------------------------------------

_RESULT_DTYPES: Dict[Tuple[Any, ...], Any] = {}


def _probed(ask, probes):
    """``ask`` (a function's result_type or result_types) on real tensors of the
    (shape, dtype) ``probes``, made outside any fake mode so that it works while
    tracing: promotion reads dtypes and which inputs are 0-d, never sizes or values."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily  # noqa: PLC0415

    with unset_fake_temporarily(), torch._C._DisableTorchDispatch():
        return ask(*[torch.empty(shape, dtype=dtype) for shape, dtype in probes])


def _reduction_dtype(f, inputs):
    """A reduction's result dtype, asked with 1-element probes (an empty probe would
    be an empty reduction, which one without an identity refuses)."""
    key = ("reduction", f.name, id(f), *(x.dtype for x in inputs))
    dtype = _RESULT_DTYPES.get(key)
    if dtype is None:
        dtype = _RESULT_DTYPES[key] = _probed(f.result_type, [((1,), x.dtype) for x in inputs])
    return dtype


def _reduced_shape(shape, axis, keepdims: bool):
    """The shape a reduction over `axis` (None: all; a list of ints) leaves."""
    nd = len(shape)
    axes = set(range(nd)) if axis is None else {a + nd if a < 0 else a for a in axis}
    return [1 if d in axes else n for d, n in enumerate(shape) if keepdims or d not in axes]


def _reduction_op(f, qualname: str) -> Callable:
    """A kjit.reduction or kjit.arg_reduction function as a torch op with axis and keepdims."""
    arg = hasattr(f, "better_code")

    def impl(inputs, axis=None, keepdims=False):
        if arg:
            out = f(inputs[0], axis=None if axis is None else axis[0], keepdims=keepdims)
        else:
            out = f(*inputs, axis=None if axis is None else tuple(axis), keepdims=keepdims)
        return out if isinstance(out, torch.Tensor) else torch.as_tensor(out)

    def fake(inputs, axis=None, keepdims=False):
        shape = torch.broadcast_shapes(*[x.shape for x in inputs])
        dtype = torch.int64 if arg else _reduction_dtype(f, inputs)
        return torch.empty(_reduced_shape(shape, axis, keepdims), dtype=dtype, device=inputs[0].device)

    def strategies(args, kwargs, shard, replicate):
        shapes = [tuple(x.shape) for x in args[0]]
        axis = args[1] if len(args) > 1 else kwargs.get("axis")
        keepdims = bool(args[2] if len(args) > 2 else kwargs.get("keepdims", False))
        rank = max(len(s) for s in shapes)
        reduced = range(rank) if axis is None else sorted({a % rank for a in axis}) if rank else []
        # DTensor's partial results combine only by its own ops (sum, max, ...): a reduced dim is whole
        rule = _sharding.for_reduction(f.name, shapes, list(reduced), keepdims, False)
        ranks = {t: len(shape) for t, shape in zip(rule.inputs, shapes)}
        return [([p["output"]], [p[t] for t in rule.inputs] + [None] * (len(args) - 1))
                for p in _sharding.strategies(rule, ranks, shard, replicate)]

    code = f.better_code if arg else f"{f.reduce_code}|{f.map_code}|{f.post_code}|{f.identity}"
    custom = _define(qualname, _code_key("reduction", code), impl, fake,
                     "(Tensor[] inputs, int[]? axis=None, bool keepdims=False) -> Tensor", (), None, strategies,
                     static_from=1)

    def call(*inputs, axis=None, keepdims=False):
        axes = None if axis is None else ([axis] if isinstance(axis, int) else list(axis))
        return custom(list(inputs), axes, keepdims)

    call.op = custom
    call.__name__ = f.name
    call.__doc__ = (f"The torch op {qualname} of kjit reduction '{f.name}': call(*inputs, axis=None, "
                    "keepdims=False) -> Tensor.")
    return call


_EXTRA_SCHEMA = {bool: "bool", int: "SymInt", float: "float"}  # SymInt: one graph for every value


def _extras(f, extras) -> List[Tuple[str, type, Any]]:
    """kjit.torch.op's ``extras``: (name, kind, default) of each extra scalar, in the
    order the entry function takes them. A kind (bool, int, float) declares a
    required extra, a bool, int or float value an extra with that default."""
    if extras is None:
        return []
    if not isinstance(extras, Mapping):
        raise TypeError(f"kjit.torch.op: extras of '{f.name}' must be a mapping of name to bool, int or float (or a "
                        f"default value of one), got {type(extras).__name__}")
    out = []
    for name, kind in extras.items():
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name) or name in ("inputs", "out"):
            raise TypeError(f"kjit.torch.op: extra {name!r} of '{f.name}' must be a Python identifier other than "
                            "'inputs' and 'out' (the op's own arguments)")
        if kind in _EXTRA_SCHEMA:
            out.append((name, kind, _function._REQUIRED))
        elif type(kind) in _EXTRA_SCHEMA and _default_text(kind) is not None:
            out.append((name, type(kind), kind))
        else:
            raise TypeError(f"kjit.torch.op: extras['{name}'] of '{f.name}' must be bool, int or float (a required "
                            f"extra) or a finite bool, int or float value (its default), got {kind!r}")
    return out


def _extras_schema(declared) -> str:
    """The extras as keyword-only schema arguments (after ``Tensor[] inputs``)."""
    args = [f"{_EXTRA_SCHEMA[kind]} {name}" + ("" if default is _function._REQUIRED else f"={_default_text(default)}")
            for name, kind, default in declared]
    return "".join(f", {a}" for a in (["*", *args] if args else []))


def _code_key(*parts) -> str:
    """The key an op made from a computation string is registered under (_define):
    a hash of everything that makes the op what it is."""
    return hashlib.sha256("\0".join(map(str, parts)).encode()).hexdigest()


def _elementwise_op(f, qualname: str, extras) -> Callable:
    """A kjit.elementwise function of any number of outputs, with its extra scalars,
    as a torch op ``(Tensor[] inputs, *, <extras>) -> Tensor`` (or a tuple)."""
    declared = _extras(f, extras)
    n_out = f.num_outputs
    dtypes: Dict[Tuple[Any, ...], tuple] = {}

    def result_dtypes(inputs) -> tuple:
        """Every output's dtype (the function's own result_types), by the inputs' dtypes
        and 0-d-ness (all that torch's promotion reads)."""
        key = tuple((x.dtype, x.dim() == 0) for x in inputs)
        got = dtypes.get(key)
        if got is None:
            got = dtypes[key] = _probed(f.result_types, [(() if zero_d else (0,), dt) for dt, zero_d in key])
        return got

    def new_outputs(inputs) -> List[Any]:
        shape = torch.broadcast_shapes(*[x.shape for x in inputs])
        return [torch.empty(shape, dtype=dt, device=inputs[0].device) for dt in result_dtypes(inputs)]

    def returned(outs):
        return outs[0] if n_out == 1 else tuple(outs)

    def impl(inputs, **kwargs):
        outs = new_outputs(inputs)
        # torch leaves out keyword arguments at their defaults; the kind declared, whatever number torch passes,
        # picks the entry's argument type (bool, int64_t, double)
        f(*inputs, out=returned(outs), **{name: kind(kwargs.get(name, default)) for name, kind, default in declared})
        return returned(outs)

    def fake(inputs, **kwargs):
        return returned(new_outputs(inputs))

    def strategies(args, kwargs, shard, replicate):
        shapes = [tuple(x.shape) for x in args[0]]
        rule = _sharding.for_elementwise(f.name, shapes, n_out)
        ranks = {t: len(shape) for t, shape in zip(rule.inputs, shapes)}
        # the list's tensors count as arguments of their own (DTensor flattens the list)
        return [([p[o] for o in rule.outputs], [p[t] for t in rule.inputs] + [None] * (len(args) - 1))
                for p in _sharding.strategies(rule, ranks, shard, replicate)]

    schema = f"(Tensor[] inputs{_extras_schema(declared)}) -> {_returns(n_out)}"
    custom = _define(qualname, _code_key("elementwise", schema, f.name, f._engine.compute, f.code), impl, fake,
                     schema, (), None, strategies)
    names = [name for name, _, _ in declared]

    def call(*inputs, **kwargs):
        if not inputs:
            raise TypeError(f"{f.name}: expected at least one input")
        unknown = [k for k in kwargs if k not in names]
        if unknown:
            raise TypeError(f"{qualname}: unexpected extra argument '{unknown[0]}'; the op takes "
                            f"{', '.join(repr(n) for n in names) or 'no extras'} (kjit.torch.op(f, extras=...))")
        return custom(list(inputs), **kwargs)

    call.op = custom
    call.__name__ = f.name
    extra_text = "".join(f", {name}" + ("" if d is _function._REQUIRED else f"={d!r}") for name, _, d in declared)
    call.__doc__ = (f"The torch op {qualname} of kjit.elementwise function '{f.name}': call(*inputs{extra_text}) -> "
                    f"{'Tensor' if n_out == 1 else f'a tuple of {n_out} tensors'}.")
    return call


def op(f, *, name: Optional[str] = None, namespace: str = "kjit", extras: Optional[Mapping[str, Any]] = None) -> Callable:
    """A ``kjit.elementwise`` function as the torch op ``<namespace>::<name>``
    (name: the entry function's): ``(Tensor[] inputs, *, <extras>) -> Tensor``, or
    ``-> (Tensor, ...)`` with one tensor per output; broadcasting and every output's
    dtype (the function's own result_types) in its fake implementation. ``extras``
    declares the extra scalars the entry function takes after the inputs, in its
    order: ``{"alpha": float}`` (required) or ``{"alpha": 1.0}`` (default 1.0), of
    kind bool, int or float. Returns a callable ``call(*inputs, **extras)`` (``.op``
    is the op); outputs are new, contiguous tensors.

    A ``kjit.reduction`` or ``kjit.arg_reduction`` function becomes
    ``(Tensor[] inputs, int[]? axis=None, bool keepdims=False) -> Tensor``, called as
    ``call(*inputs, axis=None, keepdims=False)``."""
    reduction = hasattr(f, "_reduction")
    if not reduction and getattr(f, "_engine", None) is None:
        raise TypeError(f"kjit.torch.op takes a kjit.elementwise, kjit.reduction or kjit.arg_reduction function, got "
                        f"{type(f).__name__}")
    qualname = f"{_namespace(namespace)}::{_namespace(name or f.name)}"
    if not reduction:
        return _elementwise_op(f, qualname, extras)
    if extras is not None:
        raise TypeError(f"kjit.torch.op: extras are for kjit.elementwise functions; reduction '{f.name}' takes none")
    return _reduction_op(f, qualname)
