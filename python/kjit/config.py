"""``python -m kjit.config``: what a C++ build against kjit needs (as
``tvm-ffi-config``): ``--includedir``, ``--libdir``, ``--cmakedir``, ``--cxxflags``,
``--ldflags``, and ``--docdir`` (kjit's docs); with no option, each on a line of
its own. Exit status 2 for an unknown option."""

from __future__ import annotations

import argparse
import os
import sys

import tvm_ffi.libinfo as _tvm_ffi_libinfo

from . import __version__
from ._lib import LIBRARY_PATH, api

def include_dir() -> str:
    """The folder holding kjit/*.h (kernel.h, iterator.h, runtime.h, ...): the one
    kjit's own JIT builds use (KJIT_INCLUDE_DIR, else beside libkjit)."""
    return str(api.include_dir())


def lib_dir() -> str:
    """The folder holding libkjit.so."""
    return os.path.dirname(os.path.abspath(LIBRARY_PATH))


def cmake_dir() -> str:
    """The folder of kjit's CMake package config (``find_package(kjit)``,
    ``-Dkjit_DIR=``): kjit::kjit and kjit_add_module (docs/cpp.md)."""
    return os.path.join(lib_dir(), "cmake", "kjit")


def doc_dir() -> str:
    """The folder of kjit's docs (README.md and the docs/*.md the docstrings name):
    in the installed package, else the source tree's docs/."""
    here = os.path.dirname(os.path.abspath(__file__))
    installed = os.path.join(here, "docs")
    return installed if os.path.isdir(installed) else os.path.normpath(os.path.join(here, "..", "..", "docs"))


def cxxflags() -> list:
    """C++17 and the include folders of kjit, tvm-ffi and DLPack."""
    flags = ["-std=c++17"]
    for folder in (include_dir(), _tvm_ffi_libinfo.find_include_path(), _tvm_ffi_libinfo.find_dlpack_include_path()):
        if f"-I{folder}" not in flags:
            flags.append(f"-I{folder}")
    return flags


def ldflags() -> list:
    """libkjit and libtvm_ffi, each with its folder as RUNPATH; libtvm_ffi linked
    even when the program calls none of it (--no-as-needed), since libkjit needs it
    and the loader does not search the program's RUNPATH for libkjit's needs."""
    tvm_lib = os.path.dirname(_tvm_ffi_libinfo.find_libtvm_ffi())
    return [f"-L{lib_dir()}", "-lkjit", f"-Wl,-rpath,{lib_dir()}", f"-L{tvm_lib}", "-Wl,--push-state,--no-as-needed",
            "-ltvm_ffi", "-Wl,--pop-state", f"-Wl,-rpath,{tvm_lib}"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kjit.config", description=__doc__.splitlines()[0],
                                     allow_abbrev=False)
    for flag in ("includedir", "libdir", "cmakedir", "docdir", "cxxflags", "ldflags", "version"):
        parser.add_argument(f"--{flag}", action="store_true")
    args = parser.parse_args(argv)
    values = {"includedir": include_dir(), "libdir": lib_dir(), "cmakedir": cmake_dir(), "docdir": doc_dir(), "cxxflags": " ".join(cxxflags()),
              "ldflags": " ".join(ldflags()), "version": __version__}
    chosen = [k for k in values if getattr(args, k)]
    if not chosen:
        for k, v in values.items():
            print(f"{k}: {v}")
        return 0
    print(" ".join(values[k] for k in chosen))
    return 0


if __name__ == "__main__":
    sys.exit(main())
