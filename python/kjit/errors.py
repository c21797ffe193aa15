"""kjit's exception types, registered with tvm-ffi so C++ errors arrive as them."""

from __future__ import annotations

import numpy as _np
import tvm_ffi

# numpy.exceptions from NumPy 1.25; the top-level namespace before.
_numpy_exceptions = getattr(_np, "exceptions", _np)


@tvm_ffi.register_error("SpecError")
class SpecError(ValueError):
    """A signature or spec is wrong; the message points at the offending text."""


@tvm_ffi.register_error("CompileError")
class CompileError(RuntimeError):
    """The compiler rejected a module. ``.command`` is what ran, ``.log`` what it said."""

    @property
    def command(self) -> str:
        return self._field("command")

    @command.setter
    def command(self, value: str) -> None:
        self.__dict__["command"] = value

    @property
    def log(self) -> str:
        return self._field("log")

    @log.setter
    def log(self, value: str) -> None:
        self.__dict__["log"] = value

    def _field(self, name: str) -> str:
        """A value set on this object, else the one the C++ CompileError sent as
        the FFI error's extra context ({"command", "log"}), else ""."""
        if name in self.__dict__:
            return self.__dict__[name]
        ffi_error = getattr(self, "__tvm_ffi_error__", None)
        context = None if ffi_error is None else ffi_error.extra_context
        return "" if context is None else str(context[name])


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
# The elementwise engine raises OverflowError for a Python int outside the result
# type's range, as NumPy 2 does.
tvm_ffi.register_error("OverflowError", OverflowError)
# An integer division trap in a computation string (elementwise/trap_guard.h).
tvm_ffi.register_error("ZeroDivisionError", ZeroDivisionError)
# An axis outside an array's dims: NumPy's AxisError (a ValueError and an
# IndexError, which torch raises for a dim out of range).
AxisError = _numpy_exceptions.AxisError
tvm_ffi.register_error("AxisError", AxisError)
