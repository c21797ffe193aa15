"""kjit's exception types, registered with tvm-ffi so C++ errors arrive as them."""

from __future__ import annotations

import tvm_ffi


@tvm_ffi.register_error("SpecError")
class SpecError(ValueError):
    """A signature or spec is wrong; the message points at the offending text."""


@tvm_ffi.register_error("CompileError")
class CompileError(RuntimeError):
    """The compiler rejected a module. ``.command`` is what ran, ``.log`` what it said."""

    command: str = ""
    log: str = ""


@tvm_ffi.register_error("ToolchainError")
class ToolchainError(RuntimeError):
    """No usable C++ compiler; the message names what was searched."""


@tvm_ffi.register_error("CacheError")
class CacheError(RuntimeError):
    """The build cache could not be read or written (permissions, disk full)."""


@tvm_ffi.register_error("InternalError")
class InternalError(RuntimeError):
    """A bug in kjit itself; please report it with the message."""


# Kernels may throw kjit::NotImplementedError; tvm-ffi maps only some builtin kinds
# by itself, so name this one too.
tvm_ffi.register_error("NotImplementedError", NotImplementedError)
