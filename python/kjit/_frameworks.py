"""The Python half of kjit's framework table (src/pyext/frameworks.h).

C recognises NumPy arrays, torch tensors and ``tvm_ffi.Tensor`` by exact type;
everything else a call passes as a tensor is classified here, once per call:
subclasses, JAX arrays and tracers, other DLPack objects and ``kjit.TensorMeta``.
The table also passes read-only NumPy arrays through versioned DLPack and turns
kjit's tensors into JAX arrays for JAX callers.
"""

from __future__ import annotations

import sys
from typing import NamedTuple, Optional, Tuple

import numpy as np
import tvm_ffi

from ._lib import api, call_type

# Framework values of frameworks.h's enum (same order).
NUMPY, TORCH, JAX, JAX_TRACER, TVM_FFI, DLPACK, META, NONE = range(8)

_KDLCPU, _KDLCUDA = 1, 2


class TensorMeta(NamedTuple):
    """A tensor's metadata without data: what ``fn.infer`` checks for a fake tensor
    (torch.compile) or an abstract value (JAX). ``dtype`` is a name ("float32"),
    ``device_type``/``device_id`` DLPack's (1 CPU, 2 CUDA), ``strides`` in elements
    (None: compact row-major)."""

    shape: Tuple[int, ...]
    dtype: str
    device_type: int = _KDLCPU
    device_id: int = 0
    strides: Optional[Tuple[int, ...]] = None


def _jax_kind(x) -> Optional[int]:
    jax = sys.modules.get("jax")
    if jax is None:
        return None
    if isinstance(x, jax.core.Tracer):
        return JAX_TRACER
    if isinstance(x, jax.Array):
        return JAX
    return None


def classify(x) -> int:
    """The framework of an object C does not know by its exact type."""
    if type(x) is TensorMeta:
        return META
    if isinstance(x, np.ndarray):
        return NUMPY
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return TORCH
    if isinstance(x, tvm_ffi.Tensor):
        return TVM_FFI
    kind = _jax_kind(x)
    if kind is not None:
        return kind
    if hasattr(x, "__dlpack__") and not isinstance(x, np.generic):
        return DLPACK
    return NONE


def readable(x: np.ndarray):
    """A read-only NumPy array as a tvm_ffi.Tensor: versioned DLPack carries the flag."""
    return tvm_ffi.from_dlpack(x.__dlpack__(max_version=(1, 0)))


def jax_result(tensor):
    """A JAX array over a tensor kjit allocated (zero-copy on the CPU)."""
    import jax.dlpack  # noqa: PLC0415 (JAX callers imported it already)

    return jax.dlpack.from_dlpack(tensor)


_DTYPES: dict = {}


def numpy_dtype(name: str):
    """The numpy.dtype of a dtype name (bfloat16 through ml_dtypes)."""
    dt = _DTYPES.get(name)
    if dt is None:
        if name == "bfloat16":
            import ml_dtypes  # noqa: PLC0415 (only needed for bfloat16)

            dt = np.dtype(ml_dtypes.bfloat16)
        else:
            dt = np.dtype(name)
        _DTYPES[name] = dt
    return dt


def framework_of(x) -> int:
    """The table's framework of one object, as frameworks.h decides it."""
    return call_type.framework_of(x)


call_type.configure(np.ndarray, tvm_ffi.Tensor, api.ew_empty, numpy_dtype, classify, readable, jax_result,
                    tvm_ffi.from_dlpack(np.zeros(1, np.float32)))  # a probe of where tvm_ffi keeps its handle
