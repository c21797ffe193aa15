"""kjit: checked C++ kernels on the Apache TVM-FFI stable C ABI.

Give kjit a kernel and a signature; it generates host code that checks every
argument, JIT-compiles it with a shared cache and returns tvm-ffi functions callable
with NumPy, PyTorch, JAX (DLPack) and tvm_ffi tensors.

The docs that docstrings name as ``docs/<topic>.md`` ship with the package, in
the folder ``python -m kjit.config --docdir`` prints (README.md first).
"""

import os as _os
import sys as _sys


def _version_only() -> bool:
    """Whether this process is ``kjit --version`` (the command, or ``python -m kjit
    --version``): kjit._versions reads the versions without libkjit and tvm_ffi,
    whose import pulls in torch (seconds), so they are not loaded. As tvm_ffi itself
    skips its imports for ``python -m tvm_ffi.config``."""
    argv = list(getattr(_sys, "orig_argv", None) or [])[1:]
    return argv == ["-m", "kjit", "--version"] or (
        len(argv) == 2 and argv[1] == "--version" and _os.path.basename(argv[0]) == "kjit")


if not _version_only():
    from ._lib import api as _api
    from ._frameworks import TensorMeta
    from .errors import CacheError, CompileError, InternalError, SpecError, ToolchainError
    from .elementwise import elementwise
    from .elementwise import get_num_threads, set_num_threads
    from .reduction import arg_reduction, reduction
    from .module import Module, build, load, load_inline, normalize_arg_spec, resolve, resolve_arg_specs
    from .spec import Spec, parse_signature
    from .sharding import ShardingRule

    __version__ = str(_api.version())


def default_cache_dir() -> str:
    """KJIT_CACHE_DIR, else $XDG_CACHE_HOME/kjit, else ~/.cache/kjit."""
    return str(_api.default_cache_dir())


def __getattr__(attr):
    # kjit.jax and kjit.torch import jax and torch (slow, optional): only when first used.
    if attr in ("jax", "torch"):
        import importlib

        return importlib.import_module("." + attr, __name__)
    raise AttributeError(f"module 'kjit' has no attribute {attr!r}")


__all__ = [
    "CacheError",
    "CompileError",
    "InternalError",
    "Module",
    "ShardingRule",
    "Spec",
    "SpecError",
    "arg_reduction",
    "TensorMeta",
    "ToolchainError",
    "default_cache_dir",
    "elementwise",
    "get_num_threads",
    "set_num_threads",
    "build",
    "load",
    "load_inline",
    "normalize_arg_spec",
    "resolve",
    "resolve_arg_specs",
    "parse_signature",
    "reduction",
]
