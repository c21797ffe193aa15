"""``kjit.elementwise``: a computation string becomes an elementwise kernel with
PyTorch TensorIterator semantics (broadcasting, type promotion, casts inside the
kernel, out= checks, overlap checks), JIT-compiled per dtype combination and
cached in memory and on disk. The planning and the loops are C++ (libkjit); this
module only picks the framework of the result and allocates it.
"""

from __future__ import annotations

import os
import sys
from typing import Optional

import numpy as np

from ._lib import api

_NUMPY, _TORCH = 0, 1  # promotion rules passed to the C++ side
_NO_INPUTS = object()  # the hot path's first-input type when there is none
_PY_SCALARS = (float, int, bool)
_NDARRAY = np.ndarray


def _torch():
    return sys.modules.get("torch")


def _is_torch_tensor(x) -> bool:
    torch = _torch()
    return torch is not None and isinstance(x, torch.Tensor)


_TORCH_TENSOR = None


def _torch_tensor_type():
    """torch.Tensor once torch is imported (kjit never imports it), else None."""
    global _TORCH_TENSOR  # noqa: PLW0603 (a cache: torch cannot be unloaded)
    if _TORCH_TENSOR is None:
        torch = _torch()
        if torch is not None:
            _TORCH_TENSOR = torch.Tensor
    return _TORCH_TENSOR


_from_dlpack = np.from_dlpack  # kjit's own results (tvm_ffi.Tensor) as NumPy arrays


def _as_torch(result):
    """A result of torch inputs: tvm-ffi already made it a torch tensor, unless torch
    passed no DLPack exchange API."""
    return result if type(result) is _TORCH_TENSOR else _torch().from_dlpack(result)


_NUMPY_DTYPES: dict = {}


def _numpy_dtype(name: str):
    dt = _NUMPY_DTYPES.get(name)
    if dt is None:
        if name == "bfloat16":
            import ml_dtypes  # noqa: PLC0415 (only needed for bfloat16)

            dt = np.dtype(ml_dtypes.bfloat16)
        else:
            dt = np.dtype(name)
        _NUMPY_DTYPES[name] = dt
    return dt


def _inverse(order):
    inv = [0] * len(order)
    for i, d in enumerate(order):
        inv[d] = i
    return inv


_KDLCUDA = 2


def _device_of(inputs):
    """(DLPack device type, id) of the first tensor input; CPU for NumPy and scalars."""
    for x in inputs:
        if _is_torch_tensor(x):
            return (_KDLCUDA, x.device.index or 0) if x.is_cuda else (1, 0)
        if hasattr(x, "__dlpack_device__") and not isinstance(x, (np.ndarray, np.generic)):
            kind, index = x.__dlpack_device__()
            return int(kind), int(index)
    return (1, 0)


def _allocate(framework: str, shape, dtype: str, order, device=(1, 0)):
    identity = all(d == i for i, d in enumerate(order))
    if framework == "numpy" and identity:
        return np.empty(shape, _numpy_dtype(dtype))
    permuted = [shape[d] for d in order]
    if framework == "torch":
        torch = _torch()
        where = f"cuda:{device[1]}" if device[0] == _KDLCUDA else "cpu"
        t = torch.empty(permuted, dtype=getattr(torch, dtype), device=where)
        return t if identity else t.permute(_inverse(order))
    if framework != "numpy":  # other DLPack inputs: a C-contiguous tvm_ffi.Tensor
        if device[0] == _KDLCUDA:
            raise TypeError(
                "kjit.elementwise: cannot allocate the output for CUDA tensors that are not torch tensors; pass out="
            )
        return api.ew_empty(shape, dtype)
    a = np.empty(permuted, dtype=_numpy_dtype(dtype))
    return a if identity else a.transpose(_inverse(order))


def _numpy_array(x: np.ndarray, i: int):
    """A NumPy array as DLPack takes it, or as [address, shape, byte strides, dtype]
    when DLPack cannot carry it (read-only arrays, ml_dtypes types such as bfloat16)."""
    kind = x.dtype.kind
    builtin = x.dtype.isbuiltin == 1  # 2: a user-defined type such as ml_dtypes' bfloat16
    if builtin and kind in "biufc":
        return x if x.flags.writeable else [x.ctypes.data, list(x.shape), list(x.strides), x.dtype.name]
    if x.dtype.isbuiltin == 2:
        return [x.ctypes.data, list(x.shape), list(x.strides), x.dtype.name]
    if x.dtype.byteorder not in "=|" and kind in "biufc":
        raise TypeError(
            f"kjit.elementwise: input #{i} has dtype {x.dtype.str}, a non-native byte order, which kjit.elementwise "
            "does not read; pass x.astype(x.dtype.newbyteorder('='))"
        )
    raise TypeError(
        f"kjit.elementwise: input #{i} has dtype {x.dtype}, which kjit.elementwise does not support (bool, "
        "int8..int64, uint8..uint64, float16, bfloat16, float32, float64, complex64, complex128)"
    )


def _argument(x, i: int, weak_numpy_scalars: bool = False):
    """What the C++ side takes: tensors as they are, Python scalars as weak scalars,
    NumPy scalars as 0-d arrays (strong, as in NumPy 2) or, among torch tensors, as
    Python scalars (weak, as PyTorch treats them), complex as [re, im]."""
    if isinstance(x, np.generic):  # before float/complex: np.float64 subclasses float
        if weak_numpy_scalars and x.dtype.kind in "biufc":
            x = x.item()
        else:
            return _numpy_array(np.asarray(x), i)
    if isinstance(x, (bool, int, float)):
        return x
    if isinstance(x, complex):
        return [x.real, x.imag]
    if isinstance(x, np.ndarray):
        return _numpy_array(x, i)
    if _is_torch_tensor(x) or hasattr(x, "__dlpack__"):
        return x
    import tvm_ffi  # noqa: PLC0415

    if isinstance(x, tvm_ffi.Tensor):
        return x
    raise TypeError(
        f"kjit.elementwise: input #{i} must be a tensor (NumPy, torch, DLPack) or a Python/NumPy scalar, "
        f"got {type(x).__name__}"
    )


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
    for x in inputs:
        if isinstance(x, np.ndarray):
            return "numpy"
        if _is_torch_tensor(x):
            return "torch"
        if hasattr(x, "__dlpack__") and not isinstance(x, np.generic):
            return "dlpack"
    return "numpy"  # only scalars: NumPy results


class _Engine:
    """One kjit::Elementwise (by id) and the tvm-ffi functions that call it; frees the
    engine when collected. Every call that is not the hot path comes through `call`."""

    def __init__(self, code: str, name: str, num_outputs: int, build_dir: str, verbose: bool):
        self.id, entry = api.ew_create(code, name, num_outputs, build_dir, verbose)
        self.name: str = str(entry)
        self.num_outputs: int = num_outputs
        self._entries: dict = {}
        self._numpy_new, self._torch_new = self.entry(False, True, False, 0), self.entry(True, True, False, 0)

    def entry(self, torch_in: bool, scalars_in: bool, into: bool, n_extra: int):
        """The kjit.ew_function for a call's rules (PyTorch's or NumPy's), whether its
        inputs may include scalars, whether it writes into outputs, and its count of
        extra scalars: made once, then kept."""
        key = (torch_in, scalars_in, into, n_extra)
        fn = self._entries.get(key)
        if fn is None:
            fn = self._entries[key] = api.ew_function(self.id, _TORCH if torch_in else _NUMPY, scalars_in, into,
                                                      n_extra)
        return fn

    def call(self, inputs, out, scalars):
        """Any call. NumPy arrays or torch tensors (one framework) and Python scalars,
        with out= of the same framework or none, take one crossing into C++ (which
        plans, cached by the operands' metadata, allocates if needed and runs);
        anything else, and whatever that entry declines, takes the general path."""
        tensor_type = _torch_tensor_type()
        numpy_in = torch_in = False
        for x in inputs:
            tx = type(x)
            if tx is _NDARRAY:
                numpy_in = True
            elif tx is tensor_type:
                torch_in = True
            elif tx not in _PY_SCALARS:
                break
        else:
            if numpy_in != torch_in:
                try:
                    if out is None:
                        return self._new_outputs(inputs, torch_in, scalars)
                    if self._into_outputs(inputs, out, tensor_type if torch_in else _NDARRAY, torch_in,
                                          scalars):
                        return out
                except BufferError:
                    pass  # a read-only or bfloat16 array: the general path passes it by description
        if not inputs:
            raise TypeError(f"{self.name}: expected at least one input")
        return self._general_call(inputs, out, scalars)

    def _new_outputs(self, inputs, torch_in, scalars):
        if scalars:
            result = self.entry(torch_in, True, False, len(scalars))(*inputs, *scalars.values())
        else:  # the common case, without building a key
            result = (self._torch_new if torch_in else self._numpy_new)(*inputs)
        if result is None:  # declined: an extra that is not a number
            return self._general_call(inputs, None, scalars)
        convert = _as_torch if torch_in else _from_dlpack
        if self.num_outputs == 1:
            return convert(result)
        return tuple(convert(r) for r in result)

    def _into_outputs(self, inputs, out, tensor_type, torch_in, scalars) -> bool:
        """Runs into `out` when it holds num_outputs tensors of the inputs' framework;
        False leaves the call (and its error messages) to the general path."""
        outs = out if type(out) is tuple else (out,)
        if len(outs) != self.num_outputs:
            return False
        for o in outs:
            if type(o) is not tensor_type:
                return False
        return self.entry(torch_in, True, True, len(scalars))(*inputs, *outs, *scalars.values()) is not None

    def _general_call(self, inputs, out, scalars):
        framework = _framework(inputs)
        args = [_argument(x, i, framework == "torch") for i, x in enumerate(inputs)]
        promotion = _TORCH if framework == "torch" else _NUMPY
        if out is None:
            specs = api.ew_outputs(self.id, promotion, *args)
            device = _device_of(inputs)
            outs = [_allocate(framework, [int(s) for s in shape], str(dtype), [int(d) for d in order], device)
                    for shape, dtype, order in specs]
        else:
            outs = list(out) if isinstance(out, (tuple, list)) else [out]
            if len(outs) != self.num_outputs:
                raise TypeError(f"{self.name}: out must hold {self.num_outputs} tensor(s), got {len(outs)}")
            for k, o in enumerate(outs):
                if isinstance(o, np.ndarray) and not o.flags.writeable:
                    raise ValueError(f"{self.name}: out[{k}] is a read-only NumPy array (flags.writeable is False); "
                                     "pass a writable array")
        extra = [_extra(v, k) for k, v in scalars.items()]
        out_args = [_argument(o, k) for k, o in enumerate(outs)]
        api.ew_run(self.id, promotion, len(args), len(outs), *args, *out_args, *extra)
        if out is not None:
            return out
        return outs[0] if self.num_outputs == 1 else tuple(outs)

    def __del__(self):
        free = getattr(api, "ew_free", None)
        if free is not None and getattr(self, "id", None) is not None:
            try:
                free(self.id)
            except Exception:  # noqa: BLE001 (interpreter shutdown: nothing to free into)
                pass


def elementwise(code: str, *, name: Optional[str] = None, num_outputs: int = 1,
                build_directory: Optional[str] = None, verbose: bool = False):
    """Compiles ``code`` (a C++ computation string; the entry is ``name`` or the last
    function defined) into an elementwise kernel, per input dtypes on first use.

    Returns ``f(*inputs, out=None, **scalars)``: tensors of any dtype and strides
    (NumPy, torch, DLPack), Python scalars (weak) and NumPy scalars (strong); extra
    keyword scalars are passed to the entry after the tensor arguments (in the
    compute type, in keyword order). It returns new outputs of the inputs'
    framework, or writes into ``out`` (a tensor, or a tuple with one per output) and
    returns it. ``f.name``, ``f.num_outputs`` and ``f.code`` describe the kernel.
    """
    if not isinstance(code, str):
        raise TypeError(f"code must be a str, got {type(code).__name__}")
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be a str or None, got {type(name).__name__}")
    if not isinstance(num_outputs, int) or isinstance(num_outputs, bool):
        raise TypeError(f"num_outputs must be an int, got {type(num_outputs).__name__}")
    build_dir = "" if build_directory is None else os.fspath(build_directory)
    engine = _Engine(code, name or "", num_outputs, build_dir, bool(verbose))
    call = _hot_call(engine)
    call.name, call.num_outputs, call.code = engine.name, num_outputs, code
    call.__name__ = engine.name
    call.__qualname__ = f"kjit.elementwise[{engine.name}]"
    call.__doc__ = (f"kjit.elementwise kernel '{engine.name}' ({num_outputs} output(s)): "
                    "f(*inputs, out=None, **scalars); see kjit.elementwise.")
    return call


def _hot_call(engine: _Engine):
    """The callable kjit.elementwise returns: a plain function (Python calls one
    faster than an object's __call__).

    Calls whose first input is a torch tensor or a NumPy array, with `out` absent or
    a tensor of the same type, go to tvm-ffi entries made for the kernel
    (kjit.ew_function) that run when every argument is one they take and return
    None otherwise, so Python checks few types. tvm-ffi passes NumPy scalars as
    plain numbers, weak, as PyTorch treats them, so torch calls go straight through.
    NumPy's rules make them strong: NumPy calls whose first and last inputs are
    arrays go to an entry that takes tensors only, the others after a check that
    every input is an array or an exact Python scalar. Extra scalars are cast to
    the compute type, so any number will do. The rest, and whatever an entry
    declines, goes to engine.call."""
    general = engine.call
    if engine.num_outputs != 1:
        def call_general(*inputs, out=None, **scalars):
            return general(inputs, out, scalars)

        return call_general

    def entries(n_extra: int):
        """(new, into) pairs: NumPy tensors only, NumPy with Python scalars, torch."""
        kinds = ((False, False), (False, True), (True, True))  # (torch_in, scalars_in)
        return tuple((engine.entry(t, s, False, n_extra), engine.entry(t, s, True, n_extra)) for t, s in kinds)

    (numpy_new, numpy_into), (numpy_scalars_new, numpy_scalars_into), (torch_new, torch_into) = entries(0)
    with_extra: dict = {}  # count of extra scalars -> entries(count)

    def only_arrays_and_python_scalars(inputs) -> bool:
        for x in inputs:  # NumPy scalars would arrive as weak numbers
            tx = type(x)
            if tx is not _NDARRAY and tx is not float and tx is not int and tx is not bool:
                return False
        return True

    def call_with_extra(inputs, out, scalars, first):
        made = with_extra.get(len(scalars))
        if made is None:
            made = with_extra[len(scalars)] = entries(len(scalars))
        new, into = made[2] if first is _TORCH_TENSOR else made[1]
        if (out is None or type(out) is first) and (first is _TORCH_TENSOR or only_arrays_and_python_scalars(inputs)):
            if out is None:
                result = new(*inputs, *scalars.values())
                if result is not None:
                    return result if first is _TORCH_TENSOR else _from_dlpack(result)
            elif into(*inputs, out, *scalars.values()) is not None:
                return out
        return general(inputs, out, scalars)

    def call(*inputs, out=None, **scalars):
        try:
            first = type(inputs[0]) if inputs else _NO_INPUTS  # not None: _TORCH_TENSOR may be
            if scalars:
                if first is _NDARRAY or first is _TORCH_TENSOR:
                    return call_with_extra(inputs, out, scalars, first)
            elif first is _NDARRAY:
                if type(inputs[-1]) is _NDARRAY:
                    new, into = numpy_new, numpy_into
                elif only_arrays_and_python_scalars(inputs):
                    new, into = numpy_scalars_new, numpy_scalars_into
                else:
                    return general(inputs, out, scalars)
                if out is None:
                    result = new(*inputs)
                    if result is not None:
                        return _from_dlpack(result)
                elif type(out) is first and into(*inputs, out) is not None:
                    return out
            elif first is _TORCH_TENSOR:  # None until engine.call has seen torch imported
                if out is None:
                    result = torch_new(*inputs)  # tvm-ffi returns torch tensors for torch inputs
                    if result is not None:
                        return result
                elif type(out) is first and torch_into(*inputs, out) is not None:
                    return out
            return general(inputs, out, scalars)
        except BufferError:  # a read-only or bfloat16 array: engine.call passes it by description
            return general(inputs, out, scalars)

    return call


def num_threads() -> int:
    """Threads of the CPU loops: KJIT_NUM_THREADS, else OMP_NUM_THREADS, else all cores."""
    return int(api.ew_num_threads())


def set_num_threads(n: int) -> None:
    """Overrides the thread count (0 restores the default)."""
    api.set_ew_num_threads(int(n))


# kjit.elementwise is the factory function; its helpers hang off it too, so
# kjit.elementwise.num_threads() works as well as kjit.get_num_threads().
elementwise.num_threads = num_threads
elementwise.set_num_threads = set_num_threads
