"""The spec's Python front doors: signature strings and the ``Spec`` builder.

Both go through the same C++ parser and validator, so they accept and reject the
same things and produce the same canonical signature.
"""

from __future__ import annotations

from typing import Optional, Sequence, Union

from ._lib import api
from .errors import SpecError


def parse_signature(signature: str, *, name: str = "fn", device: str = "cpu") -> str:
    """Validates ``signature`` and returns its canonical text; raises SpecError."""
    if not isinstance(signature, str):
        raise TypeError(f"signature must be a str, got {type(signature).__name__}")
    return str(api.parse_signature(name, signature, device))


def _default_text(value) -> str:
    """A default as the grammar writes it (True -> "true", 1.5 -> "1.5")."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return str(value) if not isinstance(value, float) else repr(value)
    raise TypeError(f"a scalar default must be a bool, int, float or str, got {type(value).__name__}")


def _dtype_text(dtype, where: str) -> str:
    """A dtype as the grammar spells it: a name ("float32", "half", "f4"), a NumPy
    dtype or scalar type (np.float32), a torch dtype (torch.float16), or a list of
    them (any of: "float32|float16")."""
    if isinstance(dtype, str):
        return dtype
    if isinstance(dtype, (list, tuple)):
        return "|".join(_dtype_text(d, where) for d in dtype)
    if dtype in (float, int, complex) or dtype is None:  # np.dtype() would choose for the caller
        raise TypeError(f"{where}: {dtype!r} is not a dtype kjit can choose for you (Python's float is float64 in "
                        "NumPy but torch's default is float32): write e.g. 'float32' or np.float64")
    module = type(dtype).__module__ or ""
    if module.startswith("torch"):
        return str(dtype).removeprefix("torch.")
    try:
        import numpy as np  # noqa: PLC0415
        return np.dtype(dtype).name
    except (ImportError, TypeError):
        raise TypeError(f"{where}: expected a dtype (a name such as 'float32', np.float32 or torch.float32), "
                        f"got {type(dtype).__name__} {dtype!r}") from None


class Spec:
    """Builds a signature in code.

    >>> Spec("axpy").tensor("x", "float32", ["n"]).tensor("y", "float32", ["n"], out=True) \\
    ...     .scalar("alpha", "float32").signature()
    'x: float32[n], y: float32[n] out, alpha: float32'
    """

    def __init__(self, name: str = "fn") -> None:
        self.name = name
        # The spec as named fields, checked by the C++ SpecBuilder in signature().
        self._params: list[dict] = []
        self._constraints: list[str] = []
        self._independent: list[str] = []

    def dtype_var(self, name: str, dtypes) -> "Spec":
        """A dtype variable (the grammar's ``<T: float32|float64>``): tensors added
        after it may take ``name`` as their dtype, and scalars as their type; every
        tensor typed ``name`` has the dtype of the first one present in a call."""
        self._params.append({"kind": "dtype_var", "name": name,
                             "dtypes": _dtype_text(dtypes, f"builder of '{self.name}': dtype_var('{name}', ...)")})
        return self

    def tensor(
        self,
        name: str,
        dtype,
        shape: Sequence[Union[int, str]],
        *,
        out: bool = False,
        returned: bool = False,
        optional: bool = False,
        strided: bool = False,
        strides: Optional[Sequence[Union[int, str]]] = None,
        align: Optional[int] = None,
        device: Optional[str] = None,
    ) -> "Spec":
        dtype = _dtype_text(dtype, f"builder of '{self.name}': tensor('{name}', ...)")
        param = {"kind": "tensor", "name": name, "dtype": dtype, "shape": [str(d) for d in shape],
                 "out": bool(out), "returned": bool(returned), "optional": bool(optional),
                 "strided": bool(strided)}
        if strides is not None:
            param["strides"] = [str(s) for s in strides]
        if align is not None:
            align = int(align)
            if not -2**63 <= align < 2**63:  # tvm-ffi carries ints as int64
                raise SpecError(f"builder of '{self.name}': tensor('{name}', ...): align({align}) does not fit in "
                                "int64; it must be a power of two below 2**63")
            param["align"] = align
        if device is not None:
            param["device"] = device
        self._params.append(param)
        return self

    def scalar(self, name: str, type, *, default=None) -> "Spec":  # noqa: A002 (mirrors the grammar)
        """A scalar; ``default`` (a bool, int, float or its text) is the grammar's ``= value``."""
        param = {"kind": "scalar", "name": name, "type": _dtype_text(type, f"builder of '{self.name}': scalar('{name}', ...)")}
        if default is not None:
            param["default"] = _default_text(default)
        self._params.append(param)
        return self

    def symbol(self, name: str, type: str = "int64") -> "Spec":  # noqa: A002 (mirrors the grammar)
        """A scalar kjit passes to the kernel: the value the shapes bind to symbol ``name``
        (the grammar's ``n: int64 symbol``); callers do not pass it."""
        self._params.append({"kind": "symbol", "name": name, "type": type})
        return self

    def stream(self, name: str = "stream") -> "Spec":
        self._params.append({"kind": "stream", "name": name})
        return self

    def constraint(self, text: str) -> "Spec":
        self._constraints.append(text)
        return self

    def independent(self, *symbols: str) -> "Spec":
        """Shape symbols the kernel computes each index of on its own (the grammar's
        ``independent(m, k)``): partitioners may split them (docs/distributed.md)."""
        self._independent.extend(symbols)
        return self

    def signature(self, name: Optional[str] = None) -> str:
        """The canonical signature string; raises SpecError if the spec is invalid."""
        return str(api.spec_from_builder({"name": name or self.name, "params": self._params,
                                          "constraints": self._constraints, "independent": self._independent}))

    def __repr__(self) -> str:
        return f"Spec({self.name!r}: {self.signature()})"
