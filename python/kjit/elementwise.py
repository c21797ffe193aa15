"""``kjit.elementwise``: a computation string becomes an elementwise function with
PyTorch TensorIterator semantics (broadcasting, type promotion, casts inside the
kernel, out= checks, overlap checks), its kernels JIT-compiled per dtype
combination and cached in memory and on disk. The planning and the loops are C++
(libkjit); a call's class and its common forms are C (kjit._call.Elementwise);
this module is the checked path, which converts and checks any argument, picks the
framework of the result and allocates it.
"""

from __future__ import annotations

import inspect
import os
import sys
from typing import Optional

import numpy as np

from . import _frameworks
from ._lib import api, call_type

def _torch():
    return sys.modules.get("torch")


def _is_torch_tensor(x) -> bool:
    torch = _torch()
    return torch is not None and isinstance(x, torch.Tensor)


def _as_torch(result):
    """A result of torch inputs: tvm-ffi already made it a torch tensor, unless torch
    passed no DLPack exchange API."""
    torch = _torch()
    return result if type(result) is torch.Tensor else torch.from_dlpack(result)


_numpy_dtype = _frameworks.numpy_dtype


def _first_tensor(inputs):
    """The first input that is a tensor (the framework table's view), or None."""
    return next((x for x in inputs if _frameworks.framework_of(x) != _frameworks.NONE), None)


def _described(x: np.ndarray, keep: list):
    """[address, shape, byte strides, dtype] of `x`, which `keep` holds until the call
    has run: the C++ side sees only the address."""
    keep.append(x)
    return [x.ctypes.data, list(x.shape), list(x.strides), x.dtype.name]


def _numpy_array(x: np.ndarray, i: int, keep: list, api: str = "kjit.elementwise"):
    """A NumPy array as DLPack takes it, or described by address (_described) when
    DLPack cannot carry it (read-only arrays, ml_dtypes types such as bfloat16, byte
    strides that are not whole elements, which the C++ side rejects by name)."""
    kind = x.dtype.kind
    builtin = x.dtype.isbuiltin == 1  # 2: a user-defined type such as ml_dtypes' bfloat16
    if builtin and kind in "biufc" and x.dtype.char not in "gG":  # longdouble has no DLPack type
        whole = all(s % x.itemsize == 0 for s in x.strides)  # DLPack strides count elements
        return x if x.flags.writeable and whole else _described(x, keep)
    if x.dtype.isbuiltin == 2:
        return _described(x, keep)
    if x.dtype.byteorder not in "=|" and kind in "biufc":
        raise TypeError(
            f"{api}: input #{i} has dtype {x.dtype.str}, a non-native byte order, which {api} "
            "does not read; pass x.astype(x.dtype.newbyteorder('='))"
        )
    raise TypeError(
        f"{api}: input #{i} has dtype {x.dtype}, which {api} does not support (bool, "
        "int8..int64, uint8..uint64, float16, bfloat16, float32, float64, complex64, complex128)"
    )


def _argument(x, i: int, keep: list, weak_numpy_scalars: bool = False, api: str = "kjit.elementwise"):
    """What the C++ side takes: tensors as they are, Python scalars as weak scalars,
    NumPy scalars as 0-d arrays (strong, as in NumPy 2) or, among torch tensors, as
    Python scalars (weak, as PyTorch treats them), complex as [re, im]. Whatever
    the C++ side gets by address only stays in `keep` until the call has run."""
    if isinstance(x, np.generic):  # before float/complex: np.float64 subclasses float
        if weak_numpy_scalars and x.dtype.kind in "biufc":
            x = x.item()
        else:
            return _numpy_array(np.asarray(x), i, keep, api)
    if isinstance(x, (bool, int, float)):
        return x
    if isinstance(x, complex):
        return [x.real, x.imag]
    if isinstance(x, np.ndarray):
        return _numpy_array(x, i, keep, api)
    if _is_torch_tensor(x):
        return _torch_readable(x, i, api)
    if hasattr(x, "__dlpack__"):
        return x
    import tvm_ffi  # noqa: PLC0415

    if isinstance(x, tvm_ffi.Tensor):
        return x
    raise TypeError(
        f"{api}: input #{i} must be a tensor (NumPy, torch, DLPack) or a Python/NumPy scalar, "
        f"got {type(x).__name__}"
    )


def _torch_readable(x, i: int, api: str):
    """A torch tensor with strided data kjit can read; a sparse or meta tensor, or
    one without storage (inside torch.func's transforms), is a TypeError naming it."""
    torch = _torch()
    if x.layout != torch.strided:
        what = f"a {str(x.layout).replace('torch.', '')} tensor, whose layout kjit does not read; pass x.to_dense()"
    elif x.is_meta:
        what = "a meta tensor (shape and dtype, no data); call the function on real tensors, or kjit.torch.op(f)"
    elif not _has_storage(x):
        what = ("a tensor without storage (inside torch.func's vmap, grad or functionalize), which has no data kjit "
                "can read; use kjit.torch.op(f)")
    else:
        return x
    raise TypeError(f"{api}: input #{i} is {what}")


def _has_storage(x) -> bool:
    try:
        return x.data_ptr() != 0 or x.numel() == 0
    except RuntimeError:  # "Cannot access data pointer of Tensor that doesn't have storage"
        return False


def _without_lazy_bits(x):
    """A torch input that is a conjugate or negative view (is_conj(), is_neg()),
    materialised: DLPack cannot carry those bits, and torch's exchange API drops
    them, so the kernel would read the data without them."""
    if _is_torch_tensor(x) and (x.is_conj() or x.is_neg()):
        return x.resolve_conj().resolve_neg()
    return x


def _refuse_grad(name: str, tensors, what: str, api: str):
    """A torch tensor that requires grad with grad mode on: the result would have no
    grad_fn (the same TypeError as the call type's, src/pyext/computation_type.cc)."""
    torch = _torch()
    if not torch.is_grad_enabled():
        return
    for i, x in enumerate(tensors):
        if isinstance(x, torch.Tensor) and x.requires_grad:
            raise TypeError(f"{name}: {what} #{i} requires grad, but {api} functions compute no gradients (the "
                            "result would have no grad_fn); pass a detached tensor (.detach()) or call it under "
                            "torch.no_grad()")


def _extra(value, name: str):
    """An extra scalar argument: a Python scalar (NumPy scalars become theirs)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, complex):
        return [value.real, value.imag]
    raise TypeError(f"kjit.elementwise: extra argument '{name}' must be a scalar, got {type(value).__name__}")


def _framework(inputs) -> str:
    """"numpy", "torch", "jax" or "dlpack": the first tensor input's framework (the
    framework table's), NumPy for calls of scalars only."""
    kind = _frameworks.framework_of(_first_tensor(inputs))
    if kind == _frameworks.TORCH:
        return "torch"
    if kind == _frameworks.JAX:
        return "jax"
    return "numpy" if kind in (_frameworks.NUMPY, _frameworks.NONE) else "dlpack"


_NUMPY, _TORCH = 0, 1  # the promotion rules the C++ side takes: NumPy's, PyTorch's
_INT64_MIN, _INT64_MAX, _UINT64_MAX = -(2**63), 2**63 - 1, 2**64 - 1


def _torch_results(results):
    """A multi-output torch call's new outputs as torch tensors."""
    return tuple(_as_torch(r) for r in results)


class _Engine:
    """One kjit::Elementwise (by id): the maker of its call functions, which
    kjit._call.Computation keeps by call class, and the checked path; frees the
    engine when collected."""

    def __init__(self, code: str, name: str, num_outputs: int, build_dir: str, verbose: bool, compute: str):
        self.id, entry_name = api.ew_create(code, name, num_outputs, build_dir, verbose, compute)
        self.name: str = str(entry_name)
        self.num_outputs: int = num_outputs
        self.compute: str = compute  # compute= as the C++ side took it: part of what a torch op's key names

    def make_function(self, torch: bool, scalar_inputs: bool, into: bool, n_extra: int):
        """The call function of one call class (kjit.ew_function), which kjit._call
        makes on a class's first call."""
        return api.ew_function(self.id, _TORCH if torch else _NUMPY, scalar_inputs, into, n_extra)

    def checked_call(self, inputs, out, extras):
        """Any call, each argument converted and checked here: other frameworks,
        NumPy scalars among NumPy inputs, read-only or bfloat16 arrays, complex
        scalars, and the errors."""
        if not inputs:
            raise TypeError(f"{self.name}: expected at least one input")
        return self._checked_call(inputs, out, extras)

    def _arguments(self, inputs, keep: list):
        """(framework, promotion, arguments) of a checked call; arrays passed by
        address go into `keep`, which the caller holds until the call has run."""
        framework = _framework(inputs)
        if framework == "torch":
            self._refuse_grad(inputs, "input")
        args = [_argument(_without_lazy_bits(x), i, keep, framework == "torch") for i, x in enumerate(inputs)]
        promotion = _TORCH if framework == "torch" else _NUMPY
        if any(type(a) is int and not _INT64_MIN <= a <= _INT64_MAX for a in args):
            args = self._big_ints(args, promotion, keep)
        return framework, promotion, args

    def _refuse_grad(self, tensors, what: str):
        _refuse_grad(self.name, tensors, what, "kjit.elementwise")

    def _big_ints(self, args, promotion, keep: list):
        """Python ints outside int64, which tvm-ffi cannot carry: as NumPy 2 takes
        them, a uint64 (NumPy's rules, when the result is uint64 and it fits) or a
        float (float and complex results); otherwise OverflowError."""
        big = [type(a) is int and not _INT64_MIN <= a <= _INT64_MAX for a in args]
        probe = [0 if b else a for a, b in zip(args, big)]  # the same weak kind
        result = str(api.ew_outputs(self.id, promotion, *probe)[0][1])
        out = []
        for a, b in zip(args, big):
            if not b:
                out.append(a)
            elif promotion == _NUMPY and result == "uint64" and 0 <= a <= _UINT64_MAX:
                out.append(_numpy_array(np.asarray(a, np.uint64), len(out), keep))
            elif result.startswith(("float", "bfloat", "complex")):
                out.append(float(a))  # OverflowError beyond float64, as NumPy's
            else:
                where = "int64 (PyTorch carries Python ints as int64)" if promotion == _TORCH else result
                raise OverflowError(f"{self.name}: Python integer {a} out of bounds for {where}")
        return out

    def result_types(self, *inputs) -> tuple:
        """The dtype of each output of a call with these inputs (the engine's rules:
        promotion, compute=, declared output types), in their framework's terms."""
        if not inputs:
            raise TypeError(f"{self.name}: expected at least one input")
        keep: list = []
        framework, promotion, args = self._arguments(inputs, keep)
        names = [str(dtype) for _, dtype, _ in api.ew_outputs(self.id, promotion, *args)]
        del keep
        return tuple(getattr(_torch(), n) if framework == "torch" else _numpy_dtype(n) for n in names)

    def result_type(self, *inputs):
        """The result dtype of a call with these inputs (its first output's)."""
        return self.result_types(*inputs)[0]

    def _checked_call(self, inputs, out, extras):
        keep: list = []  # arrays passed by address: alive until ew_run returns
        framework, promotion, args = self._arguments(inputs, keep)
        if out is None:
            layouts = api.ew_outputs(self.id, promotion, *args)
            like = _first_tensor(inputs) if framework != "jax" else None
            outs = [call_type.empty(like, [int(s) for s in shape], str(dtype), [int(d) for d in order])
                    for shape, dtype, order in layouts]
        else:
            outs = list(out) if isinstance(out, (tuple, list)) else [out]
            if framework == "torch":
                self._refuse_grad(outs, "out")
            if len(outs) != self.num_outputs:
                raise TypeError(f"{self.name}: out must hold {self.num_outputs} tensor(s), got {len(outs)}")
            for k, o in enumerate(outs):
                if isinstance(o, np.ndarray) and not o.flags.writeable:
                    raise ValueError(f"{self.name}: out[{k}] is a read-only NumPy array (flags.writeable is False); "
                                     "pass a writable array")
                if _is_torch_tensor(o) and (o.is_conj() or o.is_neg()):
                    bit = "conjugate (is_conj())" if o.is_conj() else "negative (is_neg())"
                    raise ValueError(f"{self.name}: out[{k}] is a {bit} view of a torch tensor; DLPack cannot carry "
                                     "that bit, so kjit.elementwise would write without it; pass a tensor without "
                                     "it (torch.empty_like(out[k]).resolve_conj()) and copy")
        extra = [_extra(v, k) for k, v in extras.items()]
        if any(isinstance(v, list) for v in extra):
            self._check_complex_extras(promotion, args, extras)
        out_args = [_argument(o, k, keep) for k, o in enumerate(outs)]
        try:
            api.ew_run(self.id, promotion, len(args), len(outs), *args, *out_args, *extra)
        finally:
            if out is not None and framework == "torch":  # as torch's in-place ops do for what they write
                call_type.bump_versions(outs)
        del keep
        if out is not None:
            return out
        if framework == "numpy":  # 0-d results are NumPy scalars, as ufuncs return
            outs = [o if o.ndim else o[()] for o in outs]
        elif framework == "jax":  # NumPy arrays were written: JAX arrays over them, zero-copy
            outs = [_frameworks.jax_result(o) for o in outs]
        return outs[0] if self.num_outputs == 1 else tuple(outs)

    def _check_complex_extras(self, promotion, args, extras):
        """A complex extra scalar needs a complex compute type (the result type's):
        a real kernel would drop its imaginary part. Names the keyword."""
        result = str(api.ew_outputs(self.id, promotion, *args)[0][1])
        if result.startswith("complex"):
            return
        for name, value in extras.items():
            if isinstance(value, (complex, np.complexfloating)):
                raise TypeError(
                    f"{self.name}: extra argument '{name}' is complex ({value!r}) but the kernel computes in "
                    f"{result if result not in ('float16', 'bfloat16') else 'float32'}, a real type: its imaginary "
                    "part would be lost; pass a real value, or complex inputs")

    def __del__(self):
        free = getattr(api, "ew_free", None)
        if free is not None and getattr(self, "id", None) is not None:
            try:
                free(self.id)
            except Exception:  # noqa: BLE001 (interpreter shutdown: nothing to free into)
                pass


def _compute_name(compute) -> str:
    """compute= as the C++ side takes it: "" (the promoted type), "float", or a dtype
    name (from a str, a NumPy dtype or scalar type, or a torch dtype)."""
    if compute is None:
        return ""
    if isinstance(compute, str):
        return compute
    torch = _torch()
    if torch is not None and isinstance(compute, torch.dtype):
        return str(compute).removeprefix("torch.")
    try:
        return np.dtype(compute).name
    except TypeError:
        raise TypeError(f"compute must be None, 'float', a dtype name, a NumPy dtype or a torch dtype, "
                        f"got {type(compute).__name__}") from None


def elementwise(code: str, *, name: Optional[str] = None, num_outputs: int = 1, compute=None,
                build_directory: Optional[str] = None, verbose: bool = False):
    """Compiles ``code`` (a C++ computation string; the entry function is ``name`` or
    the last function defined) into an elementwise function, its kernels compiled
    per input dtypes on first use.

    Returns ``f(*inputs, out=None, **extras)``: tensors of any dtype and strides
    (NumPy, torch, DLPack), Python scalars (weak) and NumPy scalars (strong); extra
    keyword scalars are passed to the entry function after the tensor arguments,
    in keyword order, as bool, int64_t or double (a complex in the complex compute
    type) and converted to the entry's parameter types. It returns new outputs of the inputs'
    framework, or writes into ``out`` (a tensor, or a tuple with one per output) and
    returns it. ``f.name`` (the entry function's), ``f.num_outputs`` and ``f.code``
    describe it; ``f.result_type(*inputs)`` is the result dtype of a call (the first
    output's; ``f.result_types(*inputs)`` every output's), without compiling anything.

    ``compute`` sets the type the entry computes in: None (the inputs' promoted
    type; "float" when the entry is declared to return float or double), "float"
    (integer and bool inputs promote to a floating type, as np.sin and torch.sin
    do), or a dtype (every input is cast to it, as NumPy's ``dtype=``).
    """
    if not isinstance(code, str):
        raise TypeError(f"code must be a str, got {type(code).__name__}")
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be a str or None, got {type(name).__name__}")
    if not isinstance(num_outputs, int) or isinstance(num_outputs, bool):
        raise TypeError(f"num_outputs must be an int, got {type(num_outputs).__name__}")
    build_dir = "" if build_directory is None else os.fspath(build_directory)
    engine = _Engine(code, name or "", num_outputs, build_dir, bool(verbose), _compute_name(compute))
    call = _call_object(engine)
    call.name, call.num_outputs, call.code = engine.name, num_outputs, code
    call.result_type = engine.result_type
    call.result_types = engine.result_types
    call._engine = engine  # kjit.jax.function(f) reads its id
    call.__name__ = engine.name
    call.__qualname__ = f"kjit.elementwise[{engine.name}]"
    call.__doc__ = (f"kjit.elementwise function '{engine.name}' ({num_outputs} output(s)): "
                    "f(*inputs, out=None, **extras); see kjit.elementwise.")
    call.__signature__ = _SIGNATURE  # for inspect.signature and help(), which cannot read a C type's
    return call


_SIGNATURE = inspect.Signature([
    inspect.Parameter("inputs", inspect.Parameter.VAR_POSITIONAL),
    inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, default=None),
    inspect.Parameter("extras", inspect.Parameter.VAR_KEYWORD),
])


def _call_object(engine: _Engine):
    """The function kjit.elementwise returns: a kjit._call.Computation (src/pyext),
    which classifies each call in C (framework, Python scalars, out=, count of extra
    scalars), calls the call function of that class, made on first use, and sends
    what a call function declines, and calls of no class, to engine.checked_call."""
    return call_type.Computation(engine.make_function, engine.checked_call, api.raise_pending, _numpy_dtype,
                                 _torch_results, engine.num_outputs, "kjit.elementwise")


def get_num_threads() -> int:
    """Threads of the CPU loops: KJIT_NUM_THREADS, else OMP_NUM_THREADS, else all cores."""
    return int(api.get_num_threads())


def set_num_threads(n: int) -> None:
    """Overrides the thread count (0 restores the default); an int, as torch's."""
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"kjit.set_num_threads: n must be an int (0 restores the default), got "
                        f"{type(n).__name__} ({n!r})")
    api.set_num_threads(int(n))


# kjit.elementwise is the factory function; the thread API hangs off it too, so
# kjit.elementwise.get_num_threads() works as well as kjit.get_num_threads().
elementwise.get_num_threads = get_num_threads
elementwise.set_num_threads = set_num_threads
