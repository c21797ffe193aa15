"""kjit: checked C++ kernels on the Apache TVM-FFI stable C ABI.

Give kjit a kernel and a signature; it generates host code that checks every
argument, JIT-compiles it with a shared cache and returns tvm-ffi functions callable
with NumPy, PyTorch, JAX (DLPack) and tvm_ffi tensors.

The docs that docstrings name as ``docs/<topic>.md`` ship with the package, in
the folder ``python -m kjit.config --docdir`` prints (README.md first).
"""

from ._lib import api as _api
from ._frameworks import TensorMeta
from .errors import CacheError, CompileError, InternalError, SpecError, ToolchainError
from .elementwise import elementwise
from .elementwise import get_num_threads, set_num_threads
from .reduction import arg_reduction, reduction
from .module import Module, build, load, load_inline, normalize_arg_spec, resolve, resolve_arg_specs
from .spec import Spec, parse_signature

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
