"""What ``mod.fn`` is: a ``kjit._call.Function`` over the generated stub.

A positional call with every argument goes straight to the stub's tvm-ffi function
(C, no Python in between). Any other call is bound by the function's call model
(src/call, C++): keywords, defaults and every binding TypeError; returned tensors
are checked and shaped by the model and allocated in the caller's framework
(src/pyext/frameworks.h). ``fn.bind`` and ``fn.infer`` expose the model to front
ends (torch fake implementations, JAX abstract evaluation). ``repr``, ``__doc__``
and ``inspect.signature`` come from the spec; ``stub_text`` writes a ``.pyi`` of a
module's functions.
"""

from __future__ import annotations

import inspect
from typing import Any, Dict, List, Optional, Protocol, Sequence

from . import _frameworks  # noqa: F401 (configures the framework table of kjit._call)
from . import sharding
from ._lib import api, call_type

_REQUIRED = object()  # a parameter without default


class SupportsDLPack(Protocol):
    """A tensor kjit accepts: NumPy arrays, torch tensors, tvm_ffi.Tensor, any DLPack object."""

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any: ...

    def __dlpack_device__(self) -> Any: ...


class _Param:
    """A parameter as docs, signatures and .pyi stubs describe it."""

    __slots__ = ("name", "kind", "type", "value_type", "written", "optional", "default", "returned", "batch")

    def __init__(self, fields, defaults: dict) -> None:
        self.name: str = str(fields["name"])
        self.kind: str = str(fields["kind"])
        self.type: str = str(fields["type"]).split(" = ")[0]
        #: a scalar's type as its value is read: its type, or for one typed by a dtype
        #: variable ("eps: T") float64 or int64
        self.value_type: str = str(fields.get("value_type", "")) or self.type
        self.written: bool = bool(fields["written"])
        self.optional: bool = bool(fields["optional"])
        self.default = defaults.get(self.name, _REQUIRED)
        self.returned: bool = bool(fields["returned"])
        #: a tensor's batch group ("[*batch, n]"), or ""
        self.batch: str = str(fields.get("batch", ""))


def _python_type(param: _Param) -> str:
    """The annotation of a parameter in a .pyi."""
    if param.kind == "tensor":
        return "Optional[SupportsDLPack]" if param.optional else "SupportsDLPack"
    t = param.value_type
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


def make_function(module_name: str, fields, fast, model, direct_abi: bool) -> Any:
    """The callable ``mod.fn`` of one function's fields (kjit.load_inline's result)
    over ``fast``, the stub's tvm_ffi.Function, and ``model``, its kjit.CallModel.
    ``direct_abi``: the module's stubs take DLTensor* views (no tvm-ffi bridge)."""
    fn_name = str(fields["name"])
    signature = str(fields["signature"])
    fn = call_type.Function(fast, model, f"<kjit function {module_name}.{fn_name}({signature})>", api.raise_pending,
                            direct_abi)
    params = [_Param(p, fn.defaults) for p in fields["params"]]
    fn.__name__ = fn.__qualname__ = fn_name
    fn.__module__ = module_name
    fn.__doc__ = _doc(module_name, fn_name, signature, params, str(fields["location"]))
    fn.__signature__ = _signature_object(params)
    fn.__kjit_params__ = params
    fn.__kjit_return__ = _return_type(str(fields["return_type"]))
    #: which dims partitioners may split (kjit.sharding, docs/distributed.md); assign to override
    fn.sharding_rule = sharding.of_spec(fn_name, signature)
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


__all__: Sequence[str] = ["SupportsDLPack", "make_function", "stub_text"]
