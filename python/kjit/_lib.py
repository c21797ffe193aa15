"""Loads libkjit (which registers the ``kjit.*`` tvm-ffi global functions)."""

from __future__ import annotations

import ctypes
import importlib.machinery
import importlib.util
import os

import tvm_ffi  # noqa: F401  (loads libtvm_ffi RTLD_GLOBAL first)

_HERE = os.path.dirname(os.path.abspath(__file__))
LIBRARY_PATH = os.environ.get("KJIT_LIBRARY") or os.path.join(_HERE, "lib", "libkjit.so")
if not os.path.exists(LIBRARY_PATH):
    raise ImportError(
        f"kjit: the C++ library is missing at {LIBRARY_PATH}; reinstall kjit (pip install .)"
    )
_handle = ctypes.CDLL(LIBRARY_PATH, mode=ctypes.RTLD_GLOBAL)




def _load_call_type():
    """kjit._call (src/pyext), built next to libkjit: the type of ``mod.fn``."""
    folder = os.path.dirname(LIBRARY_PATH)
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = os.path.join(folder, "_call" + suffix)
        if os.path.exists(path):
            loader = importlib.machinery.ExtensionFileLoader("kjit._call", path)
            spec = importlib.util.spec_from_file_location("kjit._call", path, loader=loader)
            module = importlib.util.module_from_spec(spec)
            loader.exec_module(module)
            return module
    raise ImportError(f"kjit: the extension kjit._call is missing next to {LIBRARY_PATH}; reinstall kjit (pip install .)")


call_type = _load_call_type()


class _Api:
    """The kjit.* global functions, looked up once."""

    def __init__(self) -> None:
        for name in (
            "version",
            "default_cache_dir",
            "include_dir",
            "parse_signature",
            "spec_from_builder",
            "emit_stub",
            "emit_stub_prelude",
            "spec_tensors",
            "load_inline",
            "load_module",
            "resolve_functions",
            "normalize_arg_spec",
            "ew_create",
            "ew_outputs",
            "ew_run",
            "ew_function",
            "ew_empty",
            "ew_xla_library",
            "ew_free",
            "red_create",
            "red_output",
            "red_run",
            "red_function",
            "red_free",
            "raise_pending",
            "call_model",
            "call_infer",
            "get_num_threads",
            "set_num_threads",
        ):
            setattr(self, name, tvm_ffi.get_global_func("kjit." + name))


api = _Api()
