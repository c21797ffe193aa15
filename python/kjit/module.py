"""``load_inline`` and ``Module``: a thin layer over the C++ entry point."""

from __future__ import annotations

import os
from typing import Dict, Iterable, Mapping, Optional, Sequence, Union

from ._lib import api
from .errors import CompileError
from .spec import Spec

_RESERVED = {"name", "path", "functions", "get_host_source", "source", "cache_hit", "ffi_module"}


class Module:
    """A loaded kjit module.

    ``mod.fn`` and ``mod["fn"]`` are tvm-ffi functions: call them with NumPy arrays,
    PyTorch tensors, any DLPack object or ``tvm_ffi.Tensor``, and Python or NumPy
    scalars. Each call runs the generated checks before the kernel.
    """

    def __init__(self, name, path, ffi_module, names, signatures, stubs, functions, source, cache_hit):
        self.name: str = name
        self.path: str = path
        self.ffi_module = ffi_module
        self.functions: Dict[str, str] = dict(zip(names, signatures))
        self.source: str = source
        self.cache_hit: bool = cache_hit
        self._stubs = dict(zip(names, stubs))
        self._fns = dict(zip(names, functions))
        for fn_name, fn in self._fns.items():
            if fn_name not in _RESERVED:
                # Plain instance attributes, and no __getattr__ on the class: that
                # keeps mod.fn on CPython's fast attribute path (~15 ns a call).
                self.__dict__[fn_name] = fn

    def __getitem__(self, fn_name: str):
        try:
            return self._fns[fn_name]
        except KeyError:
            raise KeyError(
                f"module '{self.name}' has no function '{fn_name}' (it has: {', '.join(self._fns)})"
            ) from None

    def __contains__(self, fn_name: str) -> bool:
        return fn_name in self._fns

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._fns))

    def get_host_source(self, fn_name: Optional[str] = None) -> str:
        """The generated host stub of ``fn_name``; with no name, the whole translation unit."""
        if fn_name is None:
            return self.source
        if fn_name not in self._stubs:
            raise KeyError(
                f"module '{self.name}' has no function '{fn_name}' (it has: {', '.join(self._fns)})"
            )
        return self._stubs[fn_name]

    def __repr__(self) -> str:
        fns = ", ".join(f"{k}({v})" for k, v in self.functions.items())
        return f"<kjit.Module {self.name} [{fns}] at {self.path}>"


def _string_list(value, what: str) -> list:
    if isinstance(value, str):
        return [value]
    if isinstance(value, os.PathLike):
        return [os.fspath(value)]
    try:
        items = list(value)
    except TypeError:
        raise TypeError(f"{what} must be a str or a list of str, got {type(value).__name__}") from None
    for i, item in enumerate(items):
        if isinstance(item, os.PathLike):
            items[i] = os.fspath(item)
        elif not isinstance(item, str):
            raise TypeError(f"{what}[{i}] must be a str, got {type(item).__name__}")
    return items


def _function_pairs(functions) -> list:
    if not isinstance(functions, Mapping):
        raise TypeError(
            "functions must be a dict {function name: signature string or kjit.Spec}, "
            f"got {type(functions).__name__}"
        )
    pairs = []
    for fn_name, sig in functions.items():
        if not isinstance(fn_name, str):
            raise TypeError(f"functions: a function name must be a str, got {type(fn_name).__name__}")
        if isinstance(sig, Spec):
            sig = sig.signature(fn_name)
        elif not isinstance(sig, str):
            raise TypeError(
                f"functions['{fn_name}'] must be a signature string or a kjit.Spec, got {type(sig).__name__}"
            )
        pairs.append([fn_name, sig])
    return pairs


def load_inline(
    name: str,
    *,
    cpp_sources: Union[str, Sequence[str]],
    functions: Mapping[str, Union[str, Spec]],
    extra_cflags: Iterable[str] = (),
    extra_ldflags: Iterable[str] = (),
    extra_include_paths: Iterable[str] = (),
    build_directory: Optional[str] = None,
    verbose: bool = False,
) -> Module:
    """Compiles C++ kernels with generated, checked host stubs and loads them.

    ``functions`` maps each function name to its signature (docs/spec.md). The build
    is cached by content under ``build_directory`` (default: KJIT_CACHE_DIR or
    ~/.cache/kjit). Raises SpecError, CompileError (with ``.command`` and ``.log``),
    ToolchainError or CacheError.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    sources = _string_list(cpp_sources, "cpp_sources")
    pairs = _function_pairs(functions)
    build_dir = "" if build_directory is None else os.fspath(build_directory)
    try:
        res = api.load_inline(
            name,
            sources,
            pairs,
            _string_list(extra_cflags, "extra_cflags"),
            _string_list(extra_ldflags, "extra_ldflags"),
            _string_list(extra_include_paths, "extra_include_paths"),
            build_dir,
            bool(verbose),
        )
    except CompileError as err:
        command, log = api.take_compile_error()
        err.command, err.log = str(command), str(log)
        raise
    ffi_module, path, names, signatures, stubs, fns, source, cache_hit = res
    return Module(
        name,
        str(path),
        ffi_module,
        [str(n) for n in names],
        [str(s) for s in signatures],
        [str(s) for s in stubs],
        list(fns),
        str(source),
        bool(cache_hit),
    )
