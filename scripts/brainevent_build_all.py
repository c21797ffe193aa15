"""Builds every CUDA source of the installed brainevent wheel through kjit, as a
brainevent user would load it, and prints the count and the time.

Each file goes verbatim through ``kjit.load_inline(cuda_sources=[text],
functions=None, jax=True)`` with nvcc for sm_80 and sm_90, and
``kjit.jax.register(mod, platform="cuda")`` registers its XLA handlers (compiled
only: nothing runs without a GPU). A cold cache is used unless --cache DIR is given.

    python scripts/brainevent_build_all.py [--cache DIR] [--only SUBSTRING]
"""

import argparse
import os
import sys
import tempfile
import time

import kjit
import kjit.jax


def module_name(path):
    folder, file = os.path.split(path)
    return "be" + os.path.basename(folder) + "_" + file[: -len(".cu")]


def build_one(path, cache):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    # brainevent links cuBLAS for the one file that calls it (brainevent/_dense/binary.py).
    ldflags = ["-lcublas"] if "cublas_v2.h" in text else []
    mod = kjit.load_inline(module_name(path), cuda_sources=[text], functions=None, cuda_arch="sm_80,sm_90",
                           extra_ldflags=ldflags, jax=True, build_directory=cache)
    targets = kjit.jax.register(mod, platform="cuda")
    return len(mod.functions), len(targets)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", help="build cache folder (default: a new, empty one)")
    ap.add_argument("--only", default="", help="only files whose path contains this text")
    args = ap.parse_args(argv)
    if not kjit.module.brainevent_include_dir():
        print("brainevent is not installed (pip install brainevent==0.2.1)", file=sys.stderr)
        return 2
    files = [f for f in kjit.module.brainevent_sources() if args.only in f]
    cache = args.cache or tempfile.mkdtemp(prefix="kjit-brainevent-")
    built = functions = 0
    failed = []
    start = time.perf_counter()
    for path in files:
        t0 = time.perf_counter()
        try:
            n_fn, n_targets = build_one(path, cache)
        except Exception as err:  # noqa: BLE001 (report every file, then fail)
            failed.append(path)
            print(f"FAILED {path}: {type(err).__name__}: {str(err)[:2000]}", flush=True)
            continue
        built += 1
        functions += n_fn
        print(f"ok {os.path.relpath(path, os.path.dirname(os.path.dirname(path)))}: {n_fn} functions, "
              f"{n_targets} XLA targets, {time.perf_counter() - t0:.1f} s", flush=True)
    total = time.perf_counter() - start
    print(f"built {built} of {len(files)} files ({functions} functions) in {total:.1f} s; failed: {len(failed)}")
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
