"""Loads libkjit (which registers the ``kjit.*`` tvm-ffi global functions)."""

from __future__ import annotations

import ctypes
import os

import tvm_ffi  # noqa: F401  (loads libtvm_ffi RTLD_GLOBAL first)

_HERE = os.path.dirname(os.path.abspath(__file__))
LIBRARY_PATH = os.environ.get("KJIT_LIBRARY") or os.path.join(_HERE, "lib", "libkjit.so")
if not os.path.exists(LIBRARY_PATH):
    raise ImportError(
        f"kjit: the C++ library is missing at {LIBRARY_PATH}; reinstall kjit (pip install .)"
    )
_handle = ctypes.CDLL(LIBRARY_PATH, mode=ctypes.RTLD_GLOBAL)


class _Api:
    """The kjit.* global functions, looked up once."""

    def __init__(self) -> None:
        for name in (
            "version",
            "default_cache_dir",
            "parse_signature",
            "spec_from_builder",
            "emit_stub",
            "emit_stub_prelude",
            "load_inline",
            "resolve_functions",
            "normalize_arg_spec",
            "ew_create",
            "ew_outputs",
            "ew_run",
            "ew_function",
            "ew_empty",
            "ew_free",
            "get_num_threads",
            "set_num_threads",
        ):
            setattr(self, name, tvm_ffi.get_global_func("kjit." + name))


api = _Api()
