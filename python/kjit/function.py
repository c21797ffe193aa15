"""What ``mod.fn`` is: a ``kjit._call.Function`` over the generated stub.

A positional call with every argument goes straight to the stub's tvm-ffi function
(C, no Python in between). Keyword arguments, left-out defaults and returned outputs
are bound in C too, from the table ``_call_plan`` computes once per function
(src/pyext/call_plan.h). Whatever that table does not cover takes the binder below,
which owns every message: it binds by the spec's names, fills defaults, passes
read-only inputs through versioned DLPack (which can say "read-only"), refuses them
for tensors the kernel writes, and allocates returned outputs. The C path must
answer exactly as the binder (tests/python/test_call_paths.py compares the two).
``repr``, ``__doc__`` and ``inspect.signature`` come from the spec; ``stub_text``
writes a ``.pyi`` of a module's functions.
"""

from __future__ import annotations

import ast
import functools
import inspect
import sys
from typing import Any, Dict, List, Optional, Protocol, Sequence

import numpy as np
import tvm_ffi

from ._lib import api, call_type

_NDARRAY = np.ndarray
_REQUIRED = object()  # a parameter without default
_NEVER_FAST = 1 << 40  # a positional count no call has


class SupportsDLPack(Protocol):
    """A tensor kjit accepts: NumPy arrays, torch tensors, tvm_ffi.Tensor, any DLPack object."""

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any: ...

    def __dlpack_device__(self) -> Any: ...


def _default_value(scalar_type: str, text: str):
    """The Python value of a canonical default (docs/spec.md, "Defaults")."""
    if not text:
        return _REQUIRED
    if scalar_type == "bool":
        return text == "true"
    if scalar_type.startswith(("int", "uint")):
        return int(text)
    return float(text)


@functools.lru_cache(maxsize=1024)
def _dim_code(text: str):
    """A dim text compiled for eval: Python's // is the grammar's floor division; % is the same in both."""
    return compile(text.replace("/", "//"), "<dim>", "eval")


class _Param:
    __slots__ = ("name", "kind", "type", "written", "optional", "default", "returned", "dims", "shape", "dtype",
                 "dtype_of")

    def __init__(self, fields) -> None:
        self.name: str = str(fields["name"])
        self.kind: str = str(fields["kind"])
        text = str(fields["type"])
        self.type: str = text.split(" = ")[0]
        self.written: bool = bool(fields["written"])
        self.optional: bool = bool(fields["optional"])
        self.default = _default_value(self.type, str(fields["default"])) if self.kind == "scalar" else _REQUIRED
        self.returned: bool = bool(fields["returned"])
        self.dims = [str(d) for d in fields["shape"]]
        self.shape = [_dim_code(d) for d in self.dims]
        self.dtype: str = str(fields["dtype"])
        self.dtype_of: str = str(fields["dtype_of"])


def _python_type(param: _Param) -> str:
    """The annotation of a parameter in a .pyi."""
    if param.kind == "tensor":
        return "Optional[SupportsDLPack]" if param.optional else "SupportsDLPack"
    t = param.type
    if t == "bool":
        return "bool"
    if t.startswith(("int", "uint")):
        return "int"
    if t.startswith("complex"):
        return "complex"
    return "float"


_RETURN_TYPES = {"void": "None", "bool": "bool", "float": "float", "double": "float"}


def _return_type(cpp: str) -> str:
    if cpp in _RETURN_TYPES:
        return _RETURN_TYPES[cpp]
    if cpp.replace("std::", "").replace("unsigned ", "").replace("_t", "") in (
            "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "int", "long", "long long",
            "short", "char", "size", "ptrdiff", "long int"):
        return "int"
    return "Any"


class _Binder:
    """The Python path of a call: the reference behaviour of keywords, defaults,
    read-only arrays and returned outputs, and every mistake's message."""

    def __init__(self, fn_name: str, fast, params: List[_Param]) -> None:
        self.fn_name = fn_name
        self.fast = fast
        self.all_params = params
        self.params = [p for p in params if not p.returned]  # what the caller passes
        self.returned = [p for p in params if p.returned]
        self.index = {p.name: i for i, p in enumerate(self.params)}

    def __call__(self, *args, **kwargs):
        values = self.bind(args, kwargs)
        template = self.template(values) if self.returned else None  # before read-only arrays are converted
        for i, p in enumerate(self.params):
            x = values[i]
            if type(x) is _NDARRAY and not x.flags.writeable and p.kind == "tensor":
                values[i] = self.read_only(i, p, x)
        if not self.returned:
            return self.fast(*values)
        return self.call_returning(values, template)

    def template(self, values: list):
        """The first tensor argument: returned tensors follow its framework and device."""
        return next((x for p, x in zip(self.params, values) if p.kind == "tensor" and x is not None), None)

    def bind(self, args: tuple, kwargs: dict) -> list:
        params, fn = self.params, self.fn_name
        if len(args) > len(params):
            raise TypeError(
                f"{fn}() takes {len(params)} arguments ({', '.join(p.name for p in params)}) "
                f"but {len(args)} were given")
        values = list(args) + [_REQUIRED] * (len(params) - len(args))
        for key, value in kwargs.items():
            i = self.index.get(key)
            if i is None:
                raise TypeError(
                    f"{fn}() got an unexpected keyword argument '{key}' "
                    f"(its parameters: {', '.join(p.name for p in params)})")
            if i < len(args):
                raise TypeError(f"{fn}() got multiple values for argument '{key}' (#{i}, also passed by position)")
            values[i] = value
        for i, p in enumerate(params):
            if values[i] is _REQUIRED:
                if p.default is _REQUIRED:
                    missing = [q.name for j, q in enumerate(params) if values[j] is _REQUIRED and q.default is _REQUIRED]
                    raise TypeError(f"{fn}() missing required argument{'s' if len(missing) > 1 else ''}: "
                                    + ", ".join(f"'{m}'" for m in missing))
                values[i] = p.default
        return values

    def read_only(self, i: int, p: _Param, x: np.ndarray):
        """A read-only array as a tvm_ffi.Tensor (versioned DLPack carries the flag);
        a ValueError for a tensor the kernel writes."""
        if p.written:
            raise ValueError(
                f"{self.fn_name}: argument #{i} '{p.name}' is a read-only NumPy array, but the kernel writes it "
                f"({p.name}: {p.type}); pass a writeable array (np.array(x) copies it)")
        return tvm_ffi.from_dlpack(x.__dlpack__(max_version=(1, 0)))

    def call_returning(self, values: list, template):
        """Allocates the returned tensors, calls the stub with them in their slots, and
        returns them (after the kernel's own result, when it has one)."""
        by_name = dict(zip((p.name for p in self.params), values))
        symbols = self.symbols(by_name)
        outputs = {p.name: _allocate(self.fn_name, p, template, symbols, by_name) for p in self.returned}
        result = self.fast(*[outputs[p.name] if p.returned else by_name[p.name] for p in self.all_params])
        returned = [outputs[p.name] for p in self.returned]
        out = returned[0] if len(returned) == 1 else tuple(returned)
        return out if result is None else (result, *returned) if len(returned) > 1 else (result, out)

    def symbols(self, by_name: dict) -> dict:
        """Symbol values as the caller's arguments give them (whole dims, integer scalars);
        the stub checks the rest after."""
        symbols = {}
        for p in self.params:
            x = by_name[p.name]
            if p.kind == "scalar":
                if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
                    symbols.setdefault(p.name, int(x))
                continue
            if x is None or not p.shape:
                continue
            shape = tuple(x.shape)
            for d, dim in enumerate(p.dims):
                if dim.isidentifier() and d < len(shape):  # a whole dim binds its symbol
                    symbols.setdefault(dim, int(shape[d]))
        return symbols


def _framework(template) -> str:
    if template is None or type(template) is _NDARRAY or isinstance(template, np.ndarray):
        return "numpy"
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(template, torch.Tensor):
        return "torch"
    return "dlpack"


def _dtype_name(x) -> str:
    """'float32' for a NumPy, torch or DLPack tensor's dtype."""
    if isinstance(x, np.ndarray):
        return x.dtype.name
    return str(x.dtype).replace("torch.", "")


def _allocate(fn_name: str, p: _Param, template, symbols: dict, by_name: dict):
    shape = []
    for d, code in enumerate(p.shape):
        try:
            extent = eval(code, {"__builtins__": {}}, symbols)  # noqa: S307 (the spec's own dim, compiled at load)
        except ZeroDivisionError:
            raise ValueError(f"{fn_name}: returned tensor '{p.name}': shape[{d}] divides by zero with "
                             f"{_symbol_text(symbols)}") from None
        except NameError as e:  # its symbol's argument is not an integer (or its tensor is None)
            given = by_name.get(e.name)
            what = "None" if given is None else f"{type(given).__name__} {given!r}"
            raise TypeError(f"{fn_name}: returned tensor '{p.name}': shape[{d}] needs symbol '{e.name}', but "
                            f"argument '{e.name}' is {what}; it must be an integer") from None
        if extent < 0:
            raise ValueError(f"{fn_name}: returned tensor '{p.name}': shape[{d}] is {extent} with "
                             f"{_symbol_text(symbols)}; it must not be negative")
        shape.append(extent)
    if p.dtype_of:
        source = by_name[p.dtype_of]
        if source is None:
            raise ValueError(f"{fn_name}: returned tensor '{p.name}' takes the dtype of '{p.dtype_of}', which is None")
        dtype = _dtype_name(source)
    else:
        dtype = p.dtype
    framework = _framework(template)
    if framework == "numpy":
        return np.empty(shape, dtype=_numpy_dtype(dtype))
    if framework == "torch":
        torch = sys.modules["torch"]
        return torch.empty(shape, dtype=getattr(torch, dtype), device=template.device)
    kind, _ = template.__dlpack_device__()
    if int(kind) != 1:
        raise TypeError(f"{fn_name}: cannot allocate returned tensor '{p.name}' on a non-CPU device for "
                        f"{type(template).__name__} inputs (kjit allocates through torch there); pass torch tensors")
    return api.ew_empty(shape, dtype)


def _symbol_text(symbols: dict) -> str:
    return ", ".join(f"{k} = {v}" for k, v in symbols.items()) or "no symbols"


def _numpy_dtype(name: str):
    if name == "bfloat16":
        import ml_dtypes  # noqa: PLC0415 (only needed for bfloat16)

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


# The C path of non-positional calls (src/pyext/call_plan.h) -------------------------

# Opcodes of a dim program: call_plan.h's DimOp uses the same numbers.
_OP_CONST, _OP_SYMBOL, _OP_NEG = 0, 1, 7
_BIN_OPS = {ast.Add: 2, ast.Sub: 3, ast.Mult: 4, ast.FloorDiv: 5, ast.Mod: 6}
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
# The NumPy dtypes a dtype(x) output copies in C (np.dtype(x.dtype.name) is the same
# dtype for these); any other dtype goes to the binder (bfloat16 arrays do not pass
# DLPack at all). Read by kjit._call.
_NUMPY_DTYPES = {np.dtype(n): np.dtype(n) for n in (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32",
    "float64", "complex64", "complex128")}


def _configure_call_type() -> None:
    call_type.configure(np.ndarray, np.empty, _NUMPY_DTYPES, tvm_ffi.Tensor, api.ew_empty)


def _dim_program(text: str, symbols: Dict[str, int]) -> Optional[tuple]:
    """A dim of the grammar (+ - * / %, unary minus) as the postfix program C evaluates;
    None for what it cannot (a literal outside int64): the binder evaluates that."""
    out: List[int] = []

    def emit(node) -> bool:
        if isinstance(node, ast.BinOp) and type(node.op) in _BIN_OPS:
            if not (emit(node.left) and emit(node.right)):
                return False
            out.append(_BIN_OPS[type(node.op)])
            return True
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            if isinstance(node.operand, ast.Constant):  # "-5" is the literal -5
                return emit(ast.Constant(-node.operand.value))
            if not emit(node.operand):
                return False
            out.append(_OP_NEG)
            return True
        if isinstance(node, ast.Constant) and type(node.value) is int and _INT64_MIN <= node.value <= _INT64_MAX:
            out.extend((_OP_CONST, node.value))
            return True
        if isinstance(node, ast.Name):
            out.extend((_OP_SYMBOL, symbols.setdefault(node.id, len(symbols))))
            return True
        return False

    return tuple(out) if emit(ast.parse(text.replace("/", "//"), mode="eval").body) else None


def _symbol_sources(callers: List[_Param], symbol: str) -> tuple:
    """(param, dim) pairs flattened, in the order the binder's setdefault reads them;
    dim -1 is an integer scalar parameter."""
    sources: List[int] = []
    for i, p in enumerate(callers):
        if p.kind == "scalar":
            if p.name == symbol:
                sources.extend((i, -1))
            continue
        for d, dim in enumerate(p.dims):
            if dim == symbol:
                sources.extend((i, d))
    return tuple(sources)


def _fixed_numpy_dtype(name: str):
    """The NumPy dtype the binder allocates for a fixed dtype; None where it raises (C falls back)."""
    try:
        return _numpy_dtype(name)
    except (TypeError, ImportError):
        return None


def _call_plan(params: List[_Param]) -> Optional[tuple]:
    """The table kjit._call binds keywords and defaults and allocates returned outputs
    by (src/pyext/call_plan.h); None when a returned shape does not fit it."""
    callers = [p for p in params if not p.returned]
    returned = [p for p in params if p.returned]
    index = {p.name: i for i, p in enumerate(callers)}
    symbols: Dict[str, int] = {}
    outputs = []
    for p in returned:
        dims = tuple(_dim_program(d, symbols) for d in p.dims)
        if any(d is None for d in dims):
            return None
        dtype_of = index[p.dtype_of] if p.dtype_of else -1
        outputs.append((dims, dtype_of, None if p.dtype_of else _fixed_numpy_dtype(p.dtype), p.dtype or ""))
    slots, k = [], 0
    for p in params:
        if p.returned:
            slots.append(-1 - k)
            k += 1
        else:
            slots.append(index[p.name])
    return (tuple(sys.intern(p.name) for p in callers), tuple(p.default for p in callers), _REQUIRED, tuple(slots),
            tuple(i for i, p in enumerate(callers) if p.kind == "tensor"),
            tuple(_symbol_sources(callers, s) for s in symbols), tuple(outputs))


def _signature_object(params: List[_Param]) -> inspect.Signature:
    params = [p for p in params if not p.returned]
    return inspect.Signature([
        inspect.Parameter(p.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=p.type,
                          default=inspect.Parameter.empty if p.default is _REQUIRED else p.default)
        for p in params
    ])


def _doc(module_name: str, fn_name: str, signature: str, params: List[_Param], location: str) -> str:
    head, _, constraints = signature.partition("; ")
    returned = [p for p in params if p.returned]
    params = [p for p in params if not p.returned]
    call = ", ".join(p.name if p.default is _REQUIRED else f"{p.name}={p.default!r}" for p in params)
    lines = [f"{fn_name}({call})", "", f"A checked C++ kernel of kjit module '{module_name}'.", "",
             f"Signature: {head}"]
    if constraints:
        lines.append(f"Constraints (checked on every call): {constraints}")
    written = [p.name for p in params if p.written]
    if written:
        lines.append(f"Writes: {', '.join(written)}")
    if returned:
        lines.append("Returns (allocated by kjit): " + ", ".join(f"{p.name}: {p.type}" for p in returned))
    lines.append(f"C++ source: {fn_name} at {location}" if location else f"C++ source: {fn_name} (not found in the sources)")
    return "\n".join(lines) + "\n"


def make_function(module_name: str, fields, fast) -> Any:
    """The callable ``mod.fn`` of one function's fields (kjit.load_inline's result)
    over ``fast``, the stub's tvm_ffi.Function."""
    fn_name = str(fields["name"])
    signature = str(fields["signature"])
    params = [_Param(p) for p in fields["params"]]
    has_defaults = any(p.default is not _REQUIRED for p in params)
    # Without defaults every positional call is the stub's (it names a wrong count);
    # with defaults only the full count is, the call plan fills the rest; returned
    # outputs are always allocated (by the call plan, or the binder).
    fast_arity = len(params) if has_defaults else -1
    if any(p.returned for p in params):
        fast_arity = _NEVER_FAST
    fn = call_type.Function(fast, _Binder(fn_name, fast, params),
                            f"<kjit function {module_name}.{fn_name}({signature})>", fast_arity, _call_plan(params))
    fn.__name__ = fn.__qualname__ = fn_name
    fn.__module__ = module_name
    fn.__doc__ = _doc(module_name, fn_name, signature, params, str(fields["location"]))
    fn.__signature__ = _signature_object(params)
    fn.__kjit_params__ = params
    fn.__kjit_return__ = _return_type(str(fields["return_type"]))
    return fn


def stub_text(module_name: str, functions: Dict[str, Any]) -> str:
    """A .pyi of a module's functions: ``class Module(kjit.Module)`` with one method each."""
    lines = [f'"""Types of kjit module {module_name!r} (written by kjit stubgen)."""', "",
             "from typing import Any, Optional, Tuple", "", "import kjit", "from kjit.function import SupportsDLPack", "",
             "", "class Module(kjit.Module):"]
    if not functions:
        lines.append("    pass")
    for name, fn in functions.items():
        args = ["self"]
        returned = [p for p in fn.__kjit_params__ if p.returned]
        for p in fn.__kjit_params__:
            if p.returned:
                continue
            arg = f"{p.name}: {_python_type(p)}"
            args.append(arg if p.default is _REQUIRED else f"{arg} = {p.default!r}")
        lines.append(f"    def {name}({', '.join(args)}) -> {_stub_return(fn.__kjit_return__, len(returned))}:")
        doc = fn.__doc__.rstrip("\n").replace('"""', "'''")
        lines.append('        """' + doc.replace("\n", "\n        ").replace("\n        \n", "\n\n") + '"""')
        lines.append("        ...")
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def _stub_return(kernel: str, n_returned: int) -> str:
    """What a call returns: the returned tensors, after the kernel's own result if any."""
    if n_returned == 0:
        return kernel
    tensors = ["SupportsDLPack"] * n_returned
    if kernel != "None":
        tensors.insert(0, kernel)
    return tensors[0] if len(tensors) == 1 else f"Tuple[{', '.join(tensors)}]"


def write_stub(module_name: str, functions: Dict[str, Any], path: Optional[str] = None) -> str:
    text = stub_text(module_name, functions)
    if path is not None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    return text


_configure_call_type()

__all__: Sequence[str] = ["SupportsDLPack", "make_function", "stub_text"]
