"""``kjit.reduction``: computation strings become reductions, as CuPy's
ReductionKernel: a map of the broadcast inputs, an associative and commutative
combine, a finishing post step, over any axes, with keepdims, dtype= and out=.
Planning and loops are C++ (libkjit, src/reduction). The function a reduction
returns is a kjit._call.Computation, as kjit.elementwise's: a call of NumPy arrays
or torch tensors with an int axis (or none) goes to a call function in C; every
other call comes here (_Reduction.checked_call), which converts the arguments and
allocates the result in the inputs' framework.
"""

from __future__ import annotations

import inspect
import operator
import os
from typing import Optional

import numpy as np

from . import _frameworks
from ._lib import api, call_type
from .errors import AxisError
from .elementwise import (_INT64_MAX, _INT64_MIN, _NUMPY, _TORCH, _argument, _compute_name, _first_tensor,
                          _framework, _is_torch_tensor, _numpy_dtype, _refuse_grad, _torch, _torch_results,
                          _without_lazy_bits)


def _identity(value):
    """The identity as the C++ side takes it: None, a bool/int/float, or [re, im]."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, (bool, float)):
        return value
    if isinstance(value, int):
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise OverflowError(f"kjit.reduction: identity {value} is outside the int64 range kjit carries")
        return value
    if isinstance(value, complex):
        return [value.real, value.imag]
    raise TypeError(f"kjit.reduction: identity must be None or a bool, int, float or complex, "
                    f"got {type(value).__name__}")


def _axes(axis, name: str):
    """axis as the C++ side takes it: None, or a list of ints (NumPy accepts an int
    or a tuple of ints; anything else is a TypeError as NumPy's)."""
    if axis is None:
        return None
    items = axis if isinstance(axis, (tuple, list)) else (axis,)
    out = []
    for a in items:
        try:
            if isinstance(a, (bool, np.bool_)):  # an int to operator.index, not to NumPy or torch
                raise TypeError
            a = operator.index(a)
        except TypeError:
            raise TypeError(f"{name}: axis must be None, an int or a tuple of ints, got "
                            f"{type(a).__name__} ({a!r})") from None
        if not _INT64_MIN <= a <= _INT64_MAX:
            raise AxisError(f"{name}: axis {a} is out of bounds")
        out.append(a)
    return out


class _Reduction:
    """One kjit::Reduction (by id); frees it when collected."""

    def __init__(self, reduce_code: str, identity, map_code: str, post_code: str, name: str,
                 upcast_integers: bool, build_dir: str, verbose: bool, arg: bool = False, accumulator: str = ""):
        # A user accumulator takes its identity as code (a C++ expression of T).
        identity_code = identity if accumulator and isinstance(identity, str) else ""
        self.id, entry = api.red_create(reduce_code, map_code, post_code, name,
                                        None if identity_code else _identity(identity), bool(upcast_integers),
                                        build_dir, bool(verbose), arg, accumulator, identity_code)
        self.name: str = str(entry)
        #: partial results reduce again with the reduction itself (kjit.sharding)
        self.combine_only = not map_code and not post_code and not accumulator

    def make_function(self, torch: bool, scalar_inputs: bool, into: bool, keywords: int):
        """The call function of one call class (kjit.red_function): the framework,
        out= or not, and which of axis (bit 0) and keepdims (bit 1) are given."""
        del scalar_inputs  # a reduction's call functions take tensors only; the rest comes here
        return api.red_function(self.id, _TORCH if torch else _NUMPY, into, keywords)

    def checked_call(self, inputs, out, extras):
        """Any call the call type does not run in C: each argument converted and
        checked here."""
        for k in extras:
            if k not in ("axis", "keepdims", "dtype"):
                raise TypeError(f"{self.name}() got an unexpected keyword argument '{k}'")
        return self(*inputs, out=out, **extras)

    def _arguments(self, inputs, keep: list):
        framework = _framework(inputs)
        if framework == "torch":
            _refuse_grad(self.name, inputs, "input", "kjit.reduction")
        args = [_argument(_without_lazy_bits(x), i, keep, framework == "torch", "kjit.reduction")
                for i, x in enumerate(inputs)]
        for a in args:
            if type(a) is int and not _INT64_MIN <= a <= _INT64_MAX:
                raise OverflowError(f"{self.name}: Python integer {a} is outside the int64 range kjit carries; pass "
                                    "a NumPy scalar or array of the type you mean")
        return framework, (_TORCH if framework == "torch" else _NUMPY), args

    def result_type(self, *inputs, axis=None, keepdims=False, dtype=None):
        """The result dtype of a call with these inputs, in their framework's terms."""
        keep: list = []
        framework, promotion, args = self._arguments(inputs, keep)
        _, name = api.red_output(self.id, promotion, _axes(axis, self.name), _keepdims(keepdims, self.name),
                                 _dtype_name(dtype), *args)
        return getattr(_torch(), str(name)) if framework == "torch" else _frameworks.numpy_dtype(str(name))

    def __call__(self, *inputs, axis=None, keepdims=False, dtype=None, out=None):
        if not inputs:
            raise TypeError(f"{self.name}: expected at least one input")
        keep: list = []  # arrays passed by address: alive until red_run returns
        framework, promotion, args = self._arguments(inputs, keep)
        axes, dtype_name, keepdims = _axes(axis, self.name), _dtype_name(dtype), _keepdims(keepdims, self.name)
        if out is None:
            shape, result = api.red_output(self.id, promotion, axes, keepdims, dtype_name, *args)
            shape = [int(s) for s in shape]
            like = _first_tensor(inputs) if framework != "jax" else None
            target = call_type.empty(like, shape, str(result), list(range(len(shape))))
        else:
            _check_out(self.name, out, framework)
            target = out
        try:
            api.red_run(self.id, promotion, axes, keepdims, dtype_name, _argument(target, 0, keep, api="kjit.reduction"),
                        *args)
        finally:
            if out is not None and framework == "torch":  # as torch's in-place ops do for what they write
                call_type.bump_versions([out])
        del keep
        if out is not None:
            return out
        if framework == "numpy":  # a 0-d result is a NumPy scalar, as np.sum returns
            return target if target.ndim else target[()]
        if framework == "jax":
            return _frameworks.jax_result(target)
        return target

    def __del__(self):
        free = getattr(api, "red_free", None)
        if free is not None and getattr(self, "id", None) is not None:
            try:
                free(self.id)
            except Exception:  # noqa: BLE001 (interpreter shutdown: nothing to free into)
                pass


def _keepdims(keepdims, name: str) -> bool:
    """keepdims as NumPy takes it: a bool, or an int as its truth; anything else
    (a string, a float, None) is a TypeError, as NumPy's and torch's."""
    if isinstance(keepdims, (bool, np.bool_)):
        return bool(keepdims)
    try:
        return bool(operator.index(keepdims))
    except TypeError:
        raise TypeError(f"{name}: keepdims must be a bool, got {type(keepdims).__name__} ({keepdims!r})") from None


def _dtype_name(dtype) -> str:
    return "" if dtype is None else _compute_name(dtype)


def _check_out(name: str, out, framework: str):
    if isinstance(out, (tuple, list)):
        raise TypeError(f"{name}: out must be one tensor, got a {type(out).__name__}")
    if isinstance(out, np.ndarray) and not out.flags.writeable:
        raise ValueError(f"{name}: out is a read-only NumPy array (flags.writeable is False); pass a writable array")
    if _is_torch_tensor(out):
        if framework == "torch":
            _refuse_grad(name, [out], "out", "kjit.reduction")
        if out.is_conj() or out.is_neg():
            raise ValueError(f"{name}: out is a conjugate or negative view of a torch tensor; DLPack cannot carry "
                             "that bit; pass a tensor without it and copy")


def reduction(reduce_code: str, *, identity, map_code: Optional[str] = None, post_code: Optional[str] = None,
              name: Optional[str] = None, upcast_integers: bool = True, build_directory: Optional[str] = None,
              verbose: bool = False, accumulator: Optional[str] = None):
    """Compiles a reduction from C++ computation strings (each defines its function;
    the last definition of each is the one called, with the accumulator type as T
    when it is a template):

    - ``reduce_code``: ``T f(T a, T b)``, the combine: associative and commutative
      (the loops regroup it, pairwise);
    - ``identity``: the combine's identity, what an empty reduction gives; None for
      a reduction without one (max, min), whose empty reductions are a ValueError;
    - ``map_code``: ``T f(T x, ...)``, one value per element of the broadcast inputs
      (default: the single input);
    - ``post_code``: ``U f(T acc, int64_t n)``, the finished value from the
      accumulator and the count of elements reduced (mean: ``acc / n``);
    - ``accumulator``: a type of the code as the accumulator (``"Welford<T>"``),
      for reductions carrying several values: ``map_code`` makes one from each
      element, ``reduce_code`` combines two, ``post_code`` gives the result from one,
      and ``identity`` is a C++ expression of T (``"Welford<T>{}"``) or None;
    - ``upcast_integers``: bool and integers narrower than 64 bits accumulate and
      return in int64 (NumPy: uint64 for unsigned), as sum and prod do; False keeps
      their type, as max and min do. float16/bfloat16 accumulate in float32 and
      return their own type.

    Returns ``f(*inputs, axis=None, keepdims=False, dtype=None, out=None)``: inputs
    broadcast and promote as ``kjit.elementwise``'s; ``axis`` None (all), an int or
    a tuple of ints; ``dtype`` sets the accumulator and result type; ``out`` a
    tensor of the result's shape. ``f.result_type(*inputs, ...)`` gives the result
    dtype without compiling.
    """
    for arg, what in ((reduce_code, "reduce_code"), (map_code, "map_code"), (post_code, "post_code"),
                      (name, "name"), (accumulator, "accumulator")):
        if arg is not None and not isinstance(arg, str):
            raise TypeError(f"kjit.reduction: {what} must be a str, got {type(arg).__name__}")
    build_dir = "" if build_directory is None else os.fspath(build_directory)
    if accumulator is None and isinstance(identity, str):
        raise TypeError("kjit.reduction: identity must be None or a bool, int, float or complex, got str (a C++ "
                        "expression is the identity of an accumulator= type of the code only)")
    if accumulator is not None and not (identity is None or isinstance(identity, str)):
        raise TypeError(f"kjit.reduction: with accumulator={accumulator!r}, identity is a C++ expression of T "
                        f"(\"{accumulator}{{...}}\") or None, got {type(identity).__name__}")
    red = _Reduction(reduce_code, identity, map_code or "", post_code or "", name or "", upcast_integers, build_dir,
                     verbose, accumulator=accumulator or "")
    call = _call_object(red)
    call.name = red.name
    call.identity = identity
    call.reduce_code, call.map_code, call.post_code = reduce_code, map_code, post_code
    call.result_type = red.result_type
    call._reduction = red
    call.__name__ = red.name
    call.__qualname__ = f"kjit.reduction[{red.name}]"
    call.__doc__ = (f"kjit.reduction '{red.name}': f(*inputs, axis=None, keepdims=False, dtype=None, out=None); "
                    "see kjit.reduction.")
    call.__signature__ = inspect.signature(_Reduction.__call__).replace(
        parameters=list(inspect.signature(_Reduction.__call__).parameters.values())[1:])
    return call


def arg_reduction(better_code: str, *, name: Optional[str] = None, build_directory: Optional[str] = None,
                  verbose: bool = False):
    """Compiles a value-and-index reduction (argmax, argmin) from ``better_code``:
    C++ defining ``bool f(T a, T b)``, whether ``a`` is strictly better than ``b``
    (called with the input's type as T, float32 for float16/bfloat16).

    Returns ``f(x, axis=None, keepdims=False, out=None)``: the int64 index of the
    best element along ``axis`` (an int), or in the flattened input (``axis=None``,
    as ``np.argmax``); of equal elements the first, as NumPy's argmax/argmin. An
    empty axis is a ValueError. A NaN is better than any number whatever
    ``better_code`` says, and the first NaN wins (NumPy's and torch's rule).
    """
    if not isinstance(better_code, str):
        raise TypeError(f"kjit.arg_reduction: better_code must be a str, got {type(better_code).__name__}")
    if name is not None and not isinstance(name, str):
        raise TypeError(f"kjit.arg_reduction: name must be a str, got {type(name).__name__}")
    build_dir = "" if build_directory is None else os.fspath(build_directory)
    red = _Reduction(better_code, None, "", "", name or "", False, build_dir, verbose, arg=True)
    reduce = _call_object(red)

    def call(x, *, axis=None, keepdims=False, out=None):
        keepdims = _keepdims(keepdims, red.name)
        if axis is None and not keepdims and getattr(x, "ndim", None) == 1:  # flat already
            return reduce(x, axis=0, out=out)
        if axis is not None:
            if isinstance(axis, (tuple, list)):
                raise TypeError(f"{red.name}: axis must be None or an int, got {type(axis).__name__}")
            return reduce(x, axis=axis, keepdims=keepdims, out=out)
        flat = _flattened(x)
        if not keepdims:
            return reduce(flat, axis=0 if np.ndim(flat) else None, out=out)
        shape = np.shape(x) if not _is_torch_tensor(x) else tuple(x.shape)
        kept_shape = (1,) * len(shape)
        if out is not None:
            if tuple(getattr(out, "shape", ())) != kept_shape:
                raise ValueError(f"{red.name}: out has shape {tuple(getattr(out, 'shape', ()))} but the reduction "
                                 f"gives {kept_shape} (kjit.reduction does not resize outputs)")
            reduce(flat, axis=0 if np.ndim(flat) else None, out=out.reshape(()))  # a view: one element
            return out
        result = reduce(flat, axis=0 if np.ndim(flat) else None)
        return (result.reshape(kept_shape) if hasattr(result, "reshape")
                else np.asarray(result).reshape(kept_shape))

    call.name = red.name
    call.better_code = better_code
    call.result_type = red.result_type
    call._reduction = red
    call.__name__ = red.name
    call.__qualname__ = f"kjit.arg_reduction[{red.name}]"
    call.__doc__ = f"kjit.arg_reduction '{red.name}': f(x, axis=None, keepdims=False, out=None); see kjit.arg_reduction."
    return call


def _call_object(red: _Reduction):
    """The function kjit.reduction returns: a kjit._call.Computation (src/pyext), as
    kjit.elementwise's, which runs calls of NumPy arrays (read-only ones too) and
    torch tensors with an int axis, a tuple of ints or none, keepdims and dtype=
    through a call function in C (dtype objects named by _dtype_name, once per
    object) and sends the rest to red.checked_call."""
    return call_type.Computation(red.make_function, red.checked_call, api.raise_pending, _numpy_dtype,
                                 _torch_results, 1, "kjit.reduction", ("axis", "keepdims", "dtype"), True,
                                 _dtype_name)


def _flattened(x):
    """x in C order as one dimension (a copy when it is not C-contiguous), as np.argmax flattens."""
    if _is_torch_tensor(x):
        return x.reshape(-1)
    if isinstance(x, np.ndarray):
        return x.reshape(-1) if x.ndim != 1 else x
    return x  # a scalar or another framework's tensor: the C++ side reduces it as it is
