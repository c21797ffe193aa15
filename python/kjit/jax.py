"""JAX through generated XLA FFI handlers.

``mod.jax.fn`` (``kjit.jax.function(mod, "fn")``) is a JAX-traceable callable: it
takes the arguments ``mod.fn`` takes (bound by the function's call model), checks
them and computes every result's shape and dtype while tracing (the call model
again: kjit's messages as ``TypeError``/``ValueError`` at trace time, not XLA
runtime errors), and calls the function's XLA FFI handler through
``jax.ffi.ffi_call`` with those results, ``out`` tensors aliased to their inputs,
and a batching rule derived from the spec. ``kjit.jax.function(f)`` does the same
for a ``kjit.elementwise`` function (broadcasting and promotion at trace time).

Underneath, ``kjit.jax.register(mod)`` registers every function of a kjit module as
an XLA FFI target. The handler is generated from the same spec as the tvm-ffi stub
and runs the same checks: inputs are the ``arg`` tensors in order, results the
``ret`` tensors, attrs are keyword arguments of the callable ``jax.ffi.ffi_call``
returns, and the stream comes from the call frame::

    mod = kjit.load_inline("ops", cpp_sources=src, functions={"scale": ["arg", "ret", "attr.alpha"]})
    kjit.jax.register(mod)
    y = jax.ffi.ffi_call("ops.scale", jax.ShapeDtypeStruct(x.shape, x.dtype))(x, alpha=np.float32(2))
"""

from __future__ import annotations

import ctypes
import threading
from typing import Dict, List, Optional, Tuple

import numpy as np

from ._frameworks import TensorMeta, numpy_dtype
from .elementwise import _extra
from ._lib import api
from ._optional import import_optional
from .errors import SpecError
from .module import FrontEndFunctions, Module, with_xla_handlers
from . import sharding as _sharding

_jax = import_optional("jax", "jax", "kjit.jax")

# (target, platform) -> key of the build registered under it. XLA keeps the first
# handler for a name (its CUDA registry silently), so a different build under a
# registered name must be an error here, on every platform.
_registered: Dict[Tuple[str, str], str] = {}
_libraries: Dict[str, ctypes.CDLL] = {}  # keep handlers' libraries loaded
_lock = threading.Lock()

_PLATFORMS = {"cpu": "cpu", "host": "cpu", "cuda": "CUDA", "gpu": "CUDA"}
_DEVICE_OF_PLATFORM = {"cpu": "cpu", "CUDA": "cuda"}


def _platform(platform: str) -> str:
    if not isinstance(platform, str) or platform.lower() not in _PLATFORMS:
        raise ValueError(f"platform must be 'cpu' or 'cuda' (alias 'gpu'), got {platform!r}")
    return _PLATFORMS[platform.lower()]


def _handler_capsule(lib, symbol: str):
    """The handler `symbol` of the library `lib` (a kjit.Module, or a path)."""
    path = lib if isinstance(lib, str) else lib.path
    cdll = _libraries.get(path)
    if cdll is None:
        cdll = _libraries[path] = ctypes.CDLL(path)
    return _jax.ffi.pycapsule(getattr(cdll, symbol))


def _check_device(mod: Module, fn: str, platform: str) -> None:
    device = mod.devices[fn]
    wanted = _DEVICE_OF_PLATFORM[platform]
    if device not in ("none", wanted):
        raise SpecError(
            f"module '{mod.name}': function '{fn}' takes @{device} tensors, so it cannot be registered for "
            f"platform '{platform}' (declare its tensors @{wanted}, or register with platform='{device}')"
        )


def _register_target(target: str, plat: str, lib, symbol: str, key: str) -> None:
    """Registers `symbol` of `lib` (a kjit.Module, or a library path) as XLA target
    `target` once per build (under _lock)."""
    previous = _registered.get((target, plat))
    if previous is not None and previous != key:
        raise SpecError(
            f"XLA target '{target}' is already registered for platform '{plat}' by a different build "
            f"of '{getattr(lib, 'name', target)}' (key {previous[:12]}, now {key[:12]}); XLA keeps the first "
            f"handler, so register the new code under another prefix= or module name"
        )
    if previous is None:
        _jax.ffi.register_ffi_target(target, _handler_capsule(lib, symbol), platform=plat)
        _registered[(target, plat)] = key


def register(mod: Module, *, platform: str = "cpu", prefix: Optional[str] = None) -> List[str]:
    """Registers every function of ``mod`` as the XLA FFI target ``f"{prefix or mod.name}.{fn}"``.

    A module loaded without ``jax=True`` is rebuilt once with handlers (cached).
    Registering a name again with the same build is a no-op; with a different build
    it raises SpecError (XLA would otherwise keep running the old handler).
    Returns the target names.
    """
    if not isinstance(mod, Module):
        raise TypeError(f"register() takes a kjit.Module, got {type(mod).__name__}")
    if prefix is not None and not isinstance(prefix, str):
        raise TypeError(f"prefix must be a str or None, got {type(prefix).__name__}")
    plat = _platform(platform)
    for fn in mod.functions:
        _check_device(mod, fn, plat)
    lib = with_xla_handlers(mod)
    base = mod.name if prefix is None else prefix
    targets = []
    with _lock:
        for fn in lib.functions:
            target = f"{base}.{fn}"
            _register_target(target, plat, lib, f"__kjit_xla_{fn}", lib.key)
            targets.append(target)
    return targets


def _encodable(value):
    # XLA rejects 16-bit float attrs at compile time; float32 holds every float16
    # and bfloat16 value exactly, and the handler rounds it back to the same bits.
    dtype = getattr(value, "dtype", None)
    if isinstance(value, np.generic) and dtype is not None and dtype.name in ("float16", "bfloat16"):
        return np.float32(value)
    if isinstance(value, (complex, np.complexfloating)):
        raise TypeError(
            f"kjit.jax: JAX cannot pass the complex attr value {value!r} (jax.ffi.ffi_call rejects complex "
            "scalars when lowering); pass the real and imaginary parts as two float attrs"
        )
    return value


def ffi_call(target: str, result_shape_dtypes, **ffi_call_kwargs):
    """``jax.ffi.ffi_call`` for kjit targets: the same arguments, and attrs that XLA
    cannot encode (``np.float16``, ``ml_dtypes.bfloat16``) are passed losslessly as
    float32 for kjit's handler to round back to the declared 16-bit type."""
    call = _jax.ffi.ffi_call(target, result_shape_dtypes, **ffi_call_kwargs)

    def kjit_ffi_call(*args, **attrs):
        return call(*args, **{k: _encodable(v) for k, v in attrs.items()})

    return kjit_ffi_call


def registered_targets() -> Dict[Tuple[str, str], str]:
    """{(target, platform): build key} of everything kjit registered in this process."""
    with _lock:
        return dict(_registered)


def disabled_checks(*modules) -> list:
    """What ``jax.export.export(..., disabled_checks=...)`` needs for a function
    calling kjit functions of ``modules`` (kjit modules, or ``mod.jax``): one
    ``DisabledSafetyCheck.custom_call`` per XLA target. JAX refuses to serialize
    custom calls outside its allow-list; the process that loads the export must
    register the same targets first (``kjit.load(path)``, then ``mod.jax`` or
    ``kjit.jax.functions(mod)``; docs/distributed.md)."""
    from jax import export

    checks = []
    for m in modules:
        fns = functions(m) if isinstance(m, Module) else m
        if not isinstance(fns, Functions):
            raise TypeError(f"kjit.jax.disabled_checks() takes kjit modules (or mod.jax), got {type(m).__name__}")
        checks += [export.DisabledSafetyCheck.custom_call(f.target) for f in fns._items.values()]
    return checks


# ---- JAX-traceable callables ----------------------------------------------------

# How a scalar reaches the handler as an XLA attribute, by its spec type. XLA rejects
# 16-bit float attrs, so float16/bfloat16 travel as float32 (exact) and the handler
# rounds them back; complex attrs JAX cannot lower.
_ATTR_TYPES = {
    "bool": np.bool_, "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
    "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64,
    "float16": np.float32, "bfloat16": np.float32, "float32": np.float32, "float64": np.float64,
}
_VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all")


def _is_traced(x) -> bool:
    return isinstance(x, _jax.core.Tracer)


def _as_array(x, what: str, abstract: bool = False):
    """A JAX operand: JAX arrays and tracers as they are, NumPy arrays (and other
    array-likes) through jnp.asarray; Python scalars are refused by name.
    ``abstract`` also takes a jax.ShapeDtypeStruct (shape and dtype only)."""
    if isinstance(x, (_jax.Array, _jax.core.Tracer)) or (abstract and isinstance(x, _jax.ShapeDtypeStruct)):
        return x
    if isinstance(x, (bool, int, float, complex)) or x is None:
        raise TypeError(f"{what} must be an array, got {type(x).__name__} {x!r} (pass jnp.asarray(value, dtype))")
    return _jax.numpy.asarray(x)


def _vmap_method(params, vmap: Optional[str]) -> str:
    """The batching rule of a kjit function under jax.vmap: `vmap` if given; else a
    leading batch dim ("broadcast_all") when every tensor of the spec takes any rank
    ([...]) or has one same batch group ([*batch, n]), so the kernel accepts the
    batched tensors as they are; a loop ("sequential") otherwise, right for any
    kernel."""
    if vmap is not None:
        if vmap not in _VMAP_METHODS:
            raise ValueError(f"vmap must be one of {', '.join(_VMAP_METHODS)}, got {vmap!r}")
        return vmap
    tensors = [p for p in params if p.kind == "tensor"]
    groups = {p.batch for p in tensors if p.batch}
    leading = all("[...]" in p.type or p.batch for p in tensors) and len(groups) <= 1
    return "broadcast_all" if tensors and leading else "sequential"


def _factor_axes(rule, operand_dims, specs) -> dict:
    """factor -> the mesh axes (a PartitionSpec entry) it is split on: those of the
    first operand dim that has the factor sharded, an axis used once per call; only
    split and reduced factors (kjit.sharding) are split."""
    axes_of, used = {}, set()
    for names, spec in zip(operand_dims, specs):
        for f, entry in zip(names, tuple(spec) + (None,) * (len(names) - len(spec))):
            if entry is None or f in axes_of or rule.kind_of(f) == _sharding.REPLICATED:
                continue
            axes = set(entry) if isinstance(entry, tuple) else {entry}
            if axes & used:
                continue
            used |= axes
            axes_of[f] = entry
    return axes_of


def _sharded(rule, operand_names, result_names, operands, results, call, local_call, combine=None):
    """``call`` (operands -> tuple of results) as JAX's partitioner sees it under
    jax.jit: a custom_partitioning whose Shardy rule is ``rule`` (kjit.sharding), so
    operands sharded on split factors stay sharded and each device runs
    ``local_call`` on its pieces (then ``combine(shardings, results)`` where a reduced
    factor is split); inside a custom_vmap whose batching is ``call``'s own (the
    partitioner has no batching rule). Unchanged when nothing can be split."""
    if not any(rule.kind_of(f) in (_sharding.SPLIT, _sharding.REDUCED) for f in rule.kinds):
        return call
    operand_ranks = list(zip(operand_names, (o.ndim for o in operands)))
    result_ranks = list(zip(result_names, (len(r.shape) for r in results)))
    text, replicate, _ = rule.shardy(operand_ranks, result_ranks)
    dims = rule.call_dims(dict(operand_ranks + result_ranks))
    from jax.experimental.custom_partitioning import custom_partitioning

    partitioned = custom_partitioning(lambda *ops: call(*ops))

    def partition(mesh, arg_shapes, result_shape):
        # The partitioner hands the operands as they are sharded; the rule decides
        # what the kernel gets: each split factor on the mesh axes of its first
        # operand that shards it, every other dim whole (JAX reshards to match).
        axes_of = _factor_axes(rule, [dims[n] for n in operand_names], [a.sharding.spec for a in arg_shapes])

        def sharding(names):
            spec = _jax.sharding.PartitionSpec(*(axes_of.get(f) for f in names))
            return _jax.sharding.NamedSharding(mesh, spec)

        arg_shardings = tuple(sharding(dims[n]) for n in operand_names)
        result_shardings = tuple(sharding(dims[n]) for n in result_names)

        def lower(*ops):
            out = local_call(*ops)
            return combine(axes_of, out) if combine is not None else out

        return mesh, lower, result_shardings, arg_shardings

    partitioned.def_partition(partition, sharding_rule=text, need_replication_factors=replicate)
    batched = _jax.custom_batching.custom_vmap(partitioned)

    @batched.def_vmap
    def _(axis_size, in_batched, *ops):
        del axis_size
        out = _jax.vmap(call, in_axes=tuple(0 if b else None for b in in_batched))(*ops)
        return out, tuple(True for _ in out)

    return batched


class Function:
    """``mod.jax.fn``: a kjit function as a JAX-traceable callable (docs/jax.md).
    Differentiable through the module's pairing (``mod.backward``) as a
    ``jax.custom_vjp``; without a pair, differentiating it is kjit's error."""

    def __init__(self, mod: Module, fn_name: str, target: str, device: str, vmap: Optional[str],
                 owner: Optional["Functions"] = None) -> None:
        self.fn = mod[fn_name]
        self._owner = owner  # its mod.jax: the module's pairing, and the backward's callable
        self.name = fn_name
        self.target = target
        self._device_type = 2 if device == "cuda" else 1
        params = self.fn.__kjit_params__
        self._callers = [p for p in params if not p.returned]
        self._results = [p for p in params if p.kind == "tensor" and p.written]
        inputs = [p for p in self._callers if p.kind == "tensor" and not p.written]
        outs = [p for p in self._callers if p.kind == "tensor" and p.written]
        self._operands = inputs + outs
        #: each operand's position among the call's arguments (the pairing's forward inputs)
        self._operand_slots = [self._callers.index(p) for p in self._operands]
        result_index = {p.name: k for k, p in enumerate(self._results)}
        #: each out tensor's operand is aliased to its result: the kernel reads what it was given
        self.input_output_aliases = {len(inputs) + j: result_index[p.name] for j, p in enumerate(outs)}
        self.vmap_method = _vmap_method(params, vmap)
        self.__name__ = fn_name
        self.__doc__ = self.fn.__doc__
        self.__signature__ = self.fn.__signature__

    def _meta(self, x, name: str) -> TensorMeta:
        if not all(isinstance(d, (int, np.integer)) for d in x.shape):
            # jax.export's shape polymorphism: a kjit call checks concrete sizes
            raise TypeError(f"{self.name}: argument '{name}' has the symbolic shape {tuple(x.shape)}, but kjit "
                            "functions check concrete sizes while tracing: export with concrete shapes (jax.export's "
                            "shape polymorphism is not supported)")
        return TensorMeta(tuple(int(d) for d in x.shape), np.dtype(x.dtype).name, self._device_type, 0)

    def result_shape_dtypes(self, *args, **kwargs) -> list:
        """The ShapeDtypeStruct of each result of a call (its out tensors and returned
        tensors, in spec order), after the call's checks (the call model). Tensors
        may be given as jax.ShapeDtypeStruct."""
        return self._plan(args, kwargs, abstract=True)[0]

    def _plan(self, args, kwargs, abstract: bool = False):
        values = self.fn.bind(*args, **kwargs)
        arrays, metas, attrs, converted = {}, [], {}, []
        for p, v in zip(self._callers, values):
            if p.kind == "tensor":
                if v is None:
                    raise TypeError(f"{self.name}: argument '{p.name}' is None, but an XLA call's operands are arrays: "
                                    "pass the optional tensor under JAX")
                a = _as_array(v, f"{self.name}: argument '{p.name}'", abstract)
                given = getattr(v, "dtype", None)
                if given is not None and np.dtype(given) != np.dtype(a.dtype):
                    converted.append(f"'{p.name}' was {np.dtype(given).name}, which JAX converted to "
                                     f"{np.dtype(a.dtype).name}")
                arrays[p.name] = a
                metas.append(self._meta(a, p.name))
                continue
            if _is_traced(v):
                raise TypeError(f"{self.name}: argument '{p.name}' is traced, but scalars reach the kernel as XLA "
                                "attributes, fixed when the program compiles: pass a Python or NumPy number (mark "
                                "it static in jax.jit)")
            metas.append(v)
            attrs[p.name] = v
        try:
            returned = iter(self.fn.infer(*metas))  # every check of the call, kjit's messages, while tracing
        except (TypeError, ValueError) as err:
            if not converted:
                raise
            raise type(err)(f"{err} ({'; '.join(converted)}: jax_enable_x64 is off, JAX's default; set "
                            "jax.config.update('jax_enable_x64', True))") from None
        results = []
        for p in self._results:
            if p.returned:
                shape, dtype, _ = next(returned)
                results.append(_jax.ShapeDtypeStruct(shape, self._result_dtype(p, numpy_dtype(dtype))))
            else:
                results.append(_jax.ShapeDtypeStruct(arrays[p.name].shape, arrays[p.name].dtype))
        for p in self._callers:
            if p.name in attrs:
                attrs[p.name] = self._attr(p, attrs[p.name])
        return results, [arrays[p.name] for p in self._operands], attrs, values

    def _result_dtype(self, p, dtype):
        """A returned tensor's dtype, refused where JAX would not hold it as written:
        with jax_enable_x64 off JAX has no 64-bit arrays, and the kernel writes 64-bit
        values the next JAX op would read as 32-bit ones."""
        if _jax.dtypes.canonicalize_dtype(dtype) != np.dtype(dtype):
            raise TypeError(f"{self.name}: returned tensor '{p.name}' is {np.dtype(dtype).name}, which JAX holds only "
                            "with jax_enable_x64 (off, JAX's default): set jax.config.update('jax_enable_x64', True), "
                            "or return a 32-bit dtype")
        return dtype

    def _attr(self, p, value):
        kind = _ATTR_TYPES.get(p.value_type)
        if kind is None:
            raise TypeError(f"{self.name}: argument '{p.name}: {p.type}' cannot be an XLA attribute (JAX lowers no "
                            "complex attrs): pass its real and imaginary parts as two float parameters")
        return kind(value)

    def _ffi(self, results, attrs):
        ffi = _jax.ffi.ffi_call(self.target, results, vmap_method=self.vmap_method,
                                input_output_aliases=self.input_output_aliases)

        def call(*ops):
            return tuple(ffi(*ops, **attrs))

        call.__name__ = self.name  # how jaxprs name the custom_vjp/custom_jvp call
        return call

    @property
    def sharding_rule(self) -> "_sharding.ShardingRule":
        """The function's sharding rule: ``mod.fn.sharding_rule`` of the module it came
        from (an assignment there overrides it here too)."""
        source = self._owner.module[self.name] if self._owner is not None else self.fn
        return _sharding.rule_of(source) or _sharding.rule_of(self.fn)

    def _local_call(self, values):
        """The call on each device's pieces: planned again for their shapes (the
        call model's checks and returned shapes for the local sizes)."""
        slots = self._operand_slots

        def local(*ops):
            local_values = list(values)
            for slot, op in zip(slots, ops):
                local_values[slot] = op
            results, operands, attrs, _ = self._plan(local_values, {})
            return self._ffi(results, attrs)(*operands)

        return local

    def __call__(self, *args, **kwargs):
        results, operands, attrs, values = self._plan(args, kwargs)
        call = self._ffi(results, attrs)

        if any(_is_traced(o) for o in operands):
            # under jax.jit: the partitioner's rule (kjit.sharding)
            call = _sharded(self.sharding_rule, [p.name for p in self._operands], [p.name for p in self._results],
                            operands, results, call, self._local_call(values))
            # only a traced call can be differentiated (jax.grad, or jax.jit's jaxpr that
            # jax.grad may differentiate later); a concrete call stays a plain ffi_call
            call = self._differentiable(call, operands, values)
        out = call(*operands)
        return out[0] if len(out) == 1 else out

    # ---- gradients ----------------------------------------------------------------

    def _differentiable(self, call, operands, values):
        """``call`` (operands -> results) as JAX differentiates it: a jax.custom_vjp
        from the module's pair, or without one a jax.custom_jvp whose rule is kjit's
        error. Either lowers to the same program as ``call`` itself."""
        pair = None if self._owner is None else self._owner.module._pairings.get(self.name)
        if pair is None:
            return self._undifferentiable(call)
        return self._with_vjp(call, pair, operands, values)

    def _undifferentiable(self, call):
        f = _jax.custom_jvp(call)

        def refuse(primals, tangents):
            raise TypeError(f"{self.name}: has no backward, so JAX cannot differentiate it (jax.grad, jax.vjp, "
                            f"jax.jvp); pair it with a kjit function of its module that computes its gradients: "
                            f"kjit.load_inline(..., backward={{'{self.name}': '{self.name}_backward'}}) (docs/jax.md, "
                            "\"Gradients\")")

        f.defjvp(refuse)
        return f

    def _with_vjp(self, call, pair, operands, values):
        """The pair as a jax.custom_vjp (kjit._pairing's rule, as torch's autograd
        formula): residuals are the tensors the backward reads; scalars stay Python
        values (XLA attributes), closed over; inputs without a gradient get zeros."""
        slots = self._operand_slots
        scalars = [None if p.kind == "tensor" else v for p, v in zip(self._callers, values)]
        saved_in = [k for k in pair.saved_inputs if k in slots]  # tensors only: scalars are in `scalars`
        saved_out = pair.saved_outputs
        avals = [(tuple(o.shape), np.dtype(o.dtype)) for o in operands]

        f = _jax.custom_vjp(call)

        def fwd(*ops):
            self._backward_function(pair)  # checked here: its absence is an error only when differentiating
            outs = f(*ops)  # f, not call: a grad of this grad differentiates the forward through the pair again
            by_slot = dict(zip(slots, ops))
            return outs, (tuple(by_slot[k] for k in saved_in), tuple(outs[k] for k in saved_out))

        def bwd(res, cotangents):
            ins, outs = res
            backward = self._backward_function(pair)
            inputs, outputs = list(scalars), [None] * len(pair.outputs)
            for k, v in zip(saved_in, ins):
                inputs[k] = v
            for k, v in zip(saved_out, outs):
                outputs[k] = v
            grads = pair.gradients(backward(*pair.arguments(inputs, outputs, cotangents)))
            return tuple(self._cotangent(pair, grads[k], k, aval) for k, aval in zip(slots, avals))

        f.defvjp(fwd, bwd)
        return f

    def _backward_function(self, pair) -> "Function":
        fns = self._owner
        if pair.backward not in fns._items:
            raise TypeError(f"{self.name}: its backward '{pair.backward}' has no JAX callable, so JAX cannot "
                            f"differentiate it: {fns._skipped.get(pair.backward, '')}")
        return fns._items[pair.backward]

    def _cotangent(self, pair, grad, slot: int, aval):
        """The backward's gradient of argument ``slot`` as custom_vjp takes it: None
        (a zero cotangent) when it returns none; kjit's error when its shape or dtype
        is not the argument's (a spec mistake JAX would name less clearly)."""
        if grad is None:
            return None
        got = (tuple(grad.shape), np.dtype(grad.dtype))
        if got != aval:
            name = self._callers[slot].name
            raise TypeError(f"{self.name}: backward '{pair.backward}' returns grad_{name} as {got[1].name}"
                            f"{list(got[0])}, but '{name}' is {aval[1].name}{list(aval[0])}: a gradient has its "
                            "argument's shape and dtype")
        return grad

    def __repr__(self) -> str:
        return f"<kjit JAX function {self.target} (vmap: {self.vmap_method})>"


class Functions(FrontEndFunctions):
    """The JAX callables of one module (``mod.jax``): ``fns.fn(...)``."""

    _front_end = "kjit.jax"
    _skipped_text = "has no JAX callable"

    def __init__(self, mod: Module) -> None:
        super().__init__()
        self.module = mod

    def __repr__(self) -> str:
        return f"<kjit.jax functions of {self.module.name}: {', '.join(self._items)}>"


def _target_platform(mod: Module, fn_name: str) -> str:
    return _platform("cuda" if mod.devices[fn_name] == "cuda" else "cpu")


def _build_prefix(mod: Module, lib: Module) -> str:
    """mod.jax's target prefix: the module's name, unless another build of that name
    holds one of its targets (an edited kernel loaded again, as in a notebook); then
    its name suffixed with the handlers' build key, targets of its own. XLA keeps a
    target's first handler, and programs already traced with it, or the earlier
    module's callables, must keep running it."""
    with _lock:
        taken = any(_registered.get((f"{mod.name}.{fn}", _target_platform(mod, fn)), lib.key) != lib.key
                    for fn in mod.functions)
    return f"{mod.name}_{lib.key[:12]}" if taken else mod.name


def functions(mod: Module, *, prefix: Optional[str] = None, vmap: Optional[Dict[str, str]] = None) -> Functions:
    """Every function of ``mod`` as a JAX-traceable callable (``mod.jax``), registering
    their XLA targets ``f"{prefix or mod.name}.{fn}"`` on their spec's platform (a
    module loaded without ``jax=True`` is rebuilt once with handlers). ``vmap``
    overrides the batching rule per function ({"fn": "sequential"}). Without
    ``prefix``, a different build of a module whose name already holds its targets
    (an edited kernel loaded again) registers ``f"{mod.name}_{key[:12]}.{fn}"``
    (``mod.jax.fn.target``); with it, that is a SpecError."""
    if not isinstance(mod, Module):
        raise TypeError(f"kjit.jax.functions() takes a kjit.Module, got {type(mod).__name__}")
    cached = mod.__dict__.get("_jax_functions")
    if cached is not None and prefix is None and not vmap:
        return cached
    lib = with_xla_handlers(mod)
    base = _build_prefix(mod, lib) if prefix is None else prefix
    out = Functions(mod)
    for fn_name in mod.functions:
        returns = mod[fn_name].__kjit_return__
        if returns != "None":
            out._skip(fn_name, f"its kernel returns a {returns}, which an XLA call cannot return; return it in a "
                               "tensor ('return' in the spec)")
            continue
        device = mod.devices[fn_name]
        plat = _target_platform(mod, fn_name)
        target = f"{base}.{fn_name}"
        with _lock:
            _register_target(target, plat, lib, f"__kjit_xla_{fn_name}", lib.key)
        out._add(fn_name, Function(lib, fn_name, target, device, (vmap or {}).get(fn_name), out))
    if prefix is None and not vmap:
        mod.__dict__["_jax_functions"] = out
    return out


def function(f, fn_name: Optional[str] = None, *, vmap: Optional[str] = None):
    """A JAX-traceable callable: ``function(mod, "fn")`` for a kjit function (as
    ``mod.jax.fn``, with its own batching rule when ``vmap`` is given), or
    ``function(f)`` for a ``kjit.elementwise``, ``kjit.reduction`` or
    ``kjit.arg_reduction`` function."""
    if isinstance(f, Module):
        if fn_name is None:
            raise TypeError("kjit.jax.function(mod, fn_name): name the function")
        if vmap is None:
            return getattr(functions(f), fn_name)
        fns = functions(f, vmap={fn_name: vmap})
        return getattr(fns, fn_name)
    if fn_name is not None:
        raise TypeError("kjit.jax.function(f) of a kjit.elementwise or kjit.reduction function takes no function "
                        "name")
    if getattr(f, "_reduction", None) is not None:
        return ReductionFunction(f)
    return ElementwiseFunction(f)


_ELEMENTWISE_TARGET = "kjit.elementwise"
_REDUCTION_TARGET = "kjit.reduction"


def _shared_target(target: str, symbol: str) -> str:
    """An XLA target every elementwise function (or every reduction) shares
    (kjit/detail/xla_elementwise.h), built once per cache and registered once per
    process."""
    with _lock:
        if (target, "cpu") not in _registered:
            path = str(api.ew_xla_library(_jax.ffi.include_dir(), "", False))
            _register_target(target, "cpu", path, symbol, path)
    return target


def _elementwise_target() -> str:
    return _shared_target(_ELEMENTWISE_TARGET, "__kjit_xla_elementwise")


_MAX_EXTRAS = 16  # kMaxElementwiseExtras of kjit/detail/xla_elementwise.h


class ElementwiseFunction:
    """A ``kjit.elementwise`` function as a JAX-traceable callable: broadcasting and
    every output's dtype (NumPy's promotion rules, as for NumPy inputs, then JAX's
    canonical dtype: float32 for float64 unless jax_enable_x64) at trace time,
    the engine's checks and loops at run time through one shared XLA handler. CPU;
    inputs are arrays (Python scalars: pass jnp.asarray(value, dtype)). A function
    of several outputs returns a tuple; extra scalars are XLA attrs (_extra_attrs)."""

    def __init__(self, f) -> None:
        engine = getattr(f, "_engine", None)
        if engine is None:
            raise TypeError(f"kjit.jax.function() takes a kjit.Module or a kjit.elementwise function, got "
                            f"{type(f).__name__}")
        self.f = f
        self._engine = engine
        self.target = _elementwise_target()
        self.__name__ = f.name

    def result_shape_dtypes(self, *inputs) -> list:
        """The ShapeDtypeStruct of each output of a call with these inputs."""
        return self._plan(inputs)[0]

    def _plan(self, inputs):
        """(each output's ShapeDtypeStruct, the inputs as JAX operands)."""
        arrays = [_as_array(x, f"{self.f.name}: input #{i}") for i, x in enumerate(inputs)]
        try:
            shape = np.broadcast_shapes(*[a.shape for a in arrays])
        except ValueError:
            raise ValueError(f"{self.f.name}: the input shapes {', '.join(str(tuple(a.shape)) for a in arrays)} do "
                             "not broadcast") from None
        probes = [np.empty(() if a.ndim == 0 else (0,), dtype=a.dtype) for a in arrays]
        # JAX's own canonical dtype (float32 for float64 unless jax_enable_x64): the
        # engine casts into the output as it does into any out=.
        dtypes = [_jax.dtypes.canonicalize_dtype(d) for d in self.f.result_types(*probes)]
        # every operand at the result's rank: under jax.vmap ("expand_dims") each gets a
        # leading batch dim, which lines up only when the ranks are equal (broadcasting
        # aligns dims from the right)
        arrays = [a if a.ndim == len(shape) else a.reshape((1,) * (len(shape) - a.ndim) + tuple(a.shape))
                  for a in arrays]
        return [_jax.ShapeDtypeStruct(shape, d) for d in dtypes], arrays

    def _extra_attrs(self, extras) -> dict:
        """The call's extra scalars as XLA attrs extra_00, extra_01, ... in the order
        given (as kjit.elementwise passes them), each a bool, int64 or float64 the
        shared handler hands the engine after the results. Fixed when the program
        compiles, as any attr: a traced value is refused by name."""
        if len(extras) > _MAX_EXTRAS:
            raise TypeError(f"{self.f.name}: at most {_MAX_EXTRAS} extra arguments under JAX, got {len(extras)}")
        attrs = {}
        for k, (name, value) in enumerate(extras.items()):
            if _is_traced(value):
                raise TypeError(f"{self.f.name}: extra argument '{name}' is traced; extras are fixed when XLA "
                                "compiles the call: pass a Python number (static_argnums in jax.jit)")
            value = _extra(value, name)
            if isinstance(value, list):
                raise TypeError(f"{self.f.name}: extra argument '{name}' is complex, which the shared XLA handler "
                                "cannot carry; pass it as an input (a 0-d array)")
            kind = np.bool_ if isinstance(value, bool) else np.int64 if isinstance(value, int) else np.float64
            attrs[f"extra_{k:02d}"] = kind(value)
        return attrs

    def _ffi(self, results, attrs):
        ffi = _jax.ffi.ffi_call(self.target, results, vmap_method="expand_dims")
        return lambda *ops: tuple(ffi(*ops, **attrs))

    def sharding_rule(self, *inputs) -> "_sharding.ShardingRule":
        """The sharding rule of a call with these inputs (arrays or
        jax.ShapeDtypeStruct): every dim of the broadcast result split."""
        results, arrays = self._plan(inputs)
        return _sharding.for_elementwise(self.f.name, [a.shape for a in arrays], len(results))

    def __call__(self, *inputs, **extras):
        if not inputs:
            raise TypeError(f"{self.f.name}: expected at least one input")
        results, arrays = self._plan(inputs)
        attrs = dict(engine=np.int64(self._engine.id), promotion=np.int64(0), **self._extra_attrs(extras))
        call = self._ffi(results, attrs)
        if any(_is_traced(a) for a in arrays):
            rule = _sharding.for_elementwise(self.f.name, [a.shape for a in arrays], len(results))

            def local(*ops):
                return self._ffi(self._plan(ops)[0], attrs)(*ops)

            call = _sharded(rule, rule.inputs, rule.outputs, arrays, results, call, local)
        out = call(*arrays)
        return out[0] if len(results) == 1 else tuple(out)

    def __repr__(self) -> str:
        return f"<kjit JAX elementwise function {self.f.name}>"


class ReductionFunction:
    """A ``kjit.reduction`` or ``kjit.arg_reduction`` function as a JAX-traceable
    callable ``f(*inputs, axis=None, keepdims=False)``: the result's shape and dtype
    (the reduction's rules for NumPy inputs, then JAX's canonical dtype) and the
    axis errors at trace time, the reduction's loops at run time through one shared
    XLA handler. CPU; inputs are arrays. Under ``jax.vmap`` it runs once per batch
    element (``vmap_method="sequential"``): a batch dim would shift the axes."""

    def __init__(self, f) -> None:
        self.f = f
        self._red = f._reduction
        self._arg = hasattr(f, "better_code")
        self.target = _shared_target(_REDUCTION_TARGET, "__kjit_xla_reduction")
        self.__name__ = f.name

    def _plan(self, arrays, axis, keepdims):
        """(result ShapeDtypeStruct, axes mask) of a call: red_output on zero-stride
        views of the inputs' shapes, so nothing is allocated or read."""
        from .reduction import _axes
        probes = [np.lib.stride_tricks.as_strided(np.empty(1, dtype=a.dtype), a.shape, (0,) * len(a.shape))
                  for a in arrays]
        axes = _axes(axis, self.f.name)
        shape, name = api.red_output(self._red.id, 0, axes, bool(keepdims), "", *probes)
        ndim = len(np.broadcast_shapes(*[a.shape for a in arrays]))
        if ndim > 62:
            raise ValueError(f"{self.f.name}: kjit.jax reductions take up to 62 dims, got {ndim}")
        reduced = range(ndim) if axes is None else [a % ndim if ndim else 0 for a in axes]
        mask = 0
        for a in reduced:
            mask |= 1 << a
        dtype = _jax.dtypes.canonicalize_dtype(numpy_dtype(str(name)))
        return _jax.ShapeDtypeStruct(tuple(int(s) for s in shape), dtype), mask

    def __call__(self, *inputs, axis=None, keepdims=False):
        if not inputs:
            raise TypeError(f"{self.f.name}: expected at least one input")
        arrays = [_as_array(x, f"{self.f.name}: input #{i}") for i, x in enumerate(inputs)]
        if self._arg:
            if len(arrays) != 1:
                raise TypeError(f"{self.f.name}: an arg reduction takes one input, got {len(arrays)}")
            if isinstance(axis, (tuple, list)):
                raise TypeError(f"{self.f.name}: axis must be None or an int, got {type(axis).__name__}")
            if axis is None:  # the index into the flattened input, as np.argmax
                x = arrays[0]
                result = self(x.reshape(-1) if x.ndim != 1 else x, axis=0)
                return result.reshape((1,) * x.ndim) if keepdims else result
        return self._call(arrays, axis, keepdims, sharded=any(_is_traced(a) for a in arrays))

    def _ffi(self, arrays, axis, keepdims):
        result, mask = self._plan(arrays, axis, keepdims)
        ffi = _jax.ffi.ffi_call(self.target, result, vmap_method="sequential")
        attrs = dict(engine=np.int64(self._red.id), promotion=np.int64(0), axes=np.int64(mask),
                     keepdims=np.int64(bool(keepdims)))
        return result, mask, lambda *ops: (ffi(*ops, **attrs),)

    def sharding_rule(self, *inputs, axis=None, keepdims=False) -> "_sharding.ShardingRule":
        """The sharding rule of a call with these inputs (arrays or
        jax.ShapeDtypeStruct) and axis: kept dims split; reduced dims split only for
        a combine-only reduction (no map_code, post_code or accumulator), whose
        partial results are gathered and reduced again."""
        arrays = [_as_array(x, f"{self.f.name}: input #{i}", True) for i, x in enumerate(inputs)]
        _, mask = self._plan(arrays, axis, keepdims)
        return self._rule(arrays, mask, keepdims)

    def _rule(self, arrays, mask, keepdims):
        rank = max(a.ndim for a in arrays)
        reduced = [j for j in range(rank) if mask >> j & 1]
        return _sharding.for_reduction(self.f.name, [(1,) * (rank - a.ndim) + tuple(a.shape) for a in arrays],
                                       reduced, keepdims, self._red.combine_only and not self._arg)

    def _call(self, arrays, axis, keepdims, sharded: bool):
        result, mask, call = self._ffi(arrays, axis, keepdims)
        if sharded:
            rule = self._rule(arrays, mask, keepdims)
            rank = max(a.ndim for a in arrays)  # the rule's dims are the broadcast shape's
            arrays = [a if a.ndim == rank else a.reshape((1,) * (rank - a.ndim) + tuple(a.shape)) for a in arrays]
            reduced = [f for f, k in rule.kinds.items() if k == _sharding.REDUCED]

            def local(*ops):
                return self._ffi(list(ops), axis, keepdims)[2](*ops)

            def combine(axes_of, out):
                names = tuple(a for f in reduced if f in axes_of
                              for a in (axes_of[f] if isinstance(axes_of[f], tuple) else (axes_of[f],)))
                if not names:
                    return out
                pieces = _jax.lax.all_gather(out[0], names, axis=0)  # one partial result per device
                return (self._call([pieces], 0, False, sharded=False),)

            call = _sharded(rule, rule.inputs, rule.outputs, arrays, [result], call, local, combine)
        return call(*arrays)[0]

    def __repr__(self) -> str:
        return f"<kjit JAX reduction {self.f.name}>"
