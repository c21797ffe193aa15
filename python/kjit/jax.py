"""JAX through generated XLA FFI handlers.

``kjit.jax.register(mod)`` registers every function of a kjit module as an XLA FFI
target. The handler is generated from the same spec as the tvm-ffi stub and runs
the same checks: inputs are the ``arg`` tensors in order, results the ``ret``
tensors, attrs are keyword arguments of the callable ``jax.ffi.ffi_call`` returns,
and the stream comes from the call frame::

    mod = kjit.load_inline("ops", cpp_sources=src, functions={"scale": ["arg", "ret", "attr.alpha"]})
    kjit.jax.register(mod)
    y = jax.ffi.ffi_call("ops.scale", jax.ShapeDtypeStruct(x.shape, x.dtype))(x, alpha=np.float32(2))
"""

from __future__ import annotations

import ctypes
import threading
from typing import Dict, List, Optional, Tuple

import jax as _jax
import numpy as np

from .errors import SpecError
from .module import Module, with_xla_handlers

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


def _handler_capsule(lib: Module, fn: str):
    cdll = _libraries.get(lib.path)
    if cdll is None:
        cdll = _libraries[lib.path] = ctypes.CDLL(lib.path)
    return _jax.ffi.pycapsule(getattr(cdll, f"__kjit_xla_{fn}"))


def _check_device(mod: Module, fn: str, platform: str) -> None:
    device = mod.devices[fn]
    wanted = _DEVICE_OF_PLATFORM[platform]
    if device not in ("none", wanted):
        raise SpecError(
            f"module '{mod.name}': function '{fn}' takes @{device} tensors, so it cannot be registered for "
            f"platform '{platform}' (declare its tensors @{wanted}, or register with platform='{device}')"
        )


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
            previous = _registered.get((target, plat))
            if previous is not None and previous != lib.key:
                raise SpecError(
                    f"XLA target '{target}' is already registered for platform '{plat}' by a different build "
                    f"of '{mod.name}' (key {previous[:12]}, now {lib.key[:12]}); XLA keeps the first handler, "
                    f"so register the new code under another prefix= or module name"
                )
            if previous is None:
                _jax.ffi.register_ffi_target(target, _handler_capsule(lib, fn), platform=plat)
                _registered[(target, plat)] = lib.key
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
