"""kjit's and tvm-ffi's versions, the one place the command line reads them
(``kjit --version``, ``kjit cache list``, ``kjit doctor``).

It imports neither tvm_ffi nor libkjit: ``import tvm_ffi`` imports torch when it is
installed (seconds). kjit's version is its package metadata; tvm-ffi's is the
version its library reports (``TVMFFIGetVersion``), the ABI kjit records in cache
entries (their ``origin``) and in every module's manifest, and checks at
``kjit.load`` (docs/shipping.md). The apache-tvm-ffi package's own version string
can differ from it (a post release); it is given beside it when it does.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import importlib.util
import os
from typing import Dict, Optional


def distribution_version(name: str) -> Optional[str]:
    """The installed distribution's version from its metadata, or None."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _tvm_ffi_library_version() -> Optional[str]:
    """What libtvm_ffi (next to the tvm_ffi package, found without importing it)
    reports; None when it cannot be loaded."""
    spec = importlib.util.find_spec("tvm_ffi")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = os.path.join(folder, "lib", "libtvm_ffi.so")
        if not os.path.isfile(path):
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            return None
        numbers = (ctypes.c_uint32 * 3)()
        lib.TVMFFIGetVersion(numbers)  # TVMFFIVersion: major, minor, patch (uint32 each)
        return ".".join(str(n) for n in numbers)
    return None


def versions() -> Dict[str, Optional[str]]:
    """{"kjit": ..., "tvm-ffi": the library's version (the ABI), "apache-tvm-ffi":
    the package's version}; a value is None when it cannot be found."""
    package = distribution_version("apache-tvm-ffi")
    return {"kjit": distribution_version("kjit"), "tvm-ffi": _tvm_ffi_library_version() or package,
            "apache-tvm-ffi": package}


def version_text() -> str:
    """``kjit 0.1.0 (tvm-ffi 0.1.16)``: what ``kjit --version`` prints, and how cache
    entries name the versions that made them."""
    v = versions()
    tvm_ffi = v["tvm-ffi"] or "unknown"
    package = v["apache-tvm-ffi"]
    also = f"; package apache-tvm-ffi {package}" if package and package != tvm_ffi else ""
    return f"kjit {v['kjit'] or 'unknown'} (tvm-ffi {tvm_ffi}{also})"
