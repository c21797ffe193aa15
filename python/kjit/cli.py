"""The ``kjit`` command line (docs/cli.md).

Exit codes: 0 success; 1 the work failed (a compile error, a cache that cannot be
read or written, a tool that is missing); 2 a usage error (an unknown option, a
bad value, a missing file, a signature kjit refuses). No traceback for either:
one ``kjit: error: ...`` line (and the compiler's log for a compile error).
"""

from __future__ import annotations

import argparse
import errno
import importlib.util
import json
import os
import sys
import time

USAGE_ERROR = 2
FAILURE = 1


class _UsageError(Exception):
    """A user mistake the command line reports with exit code 2."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kjit", description="kjit: checked kernels on the TVM-FFI ABI",
                                     epilog="exit codes: 0 success, 1 failure, 2 usage error (docs/cli.md)")
    parser.add_argument("--version", action="store_true", help="print kjit's version (and tvm-ffi's) and exit")
    sub = parser.add_subparsers(dest="command")
    stub = sub.add_parser("stub", help="print the generated host stub for a signature")
    stub.add_argument("--name", required=True, help="the kernel function's name")
    stub.add_argument("--prelude", action="store_true", help="also print the helpers every stub uses")
    stub.add_argument("signature", help='e.g. "a: float32[n], b: float32[n] out"')
    check = sub.add_parser("check", help="validate a signature and print its canonical form")
    check.add_argument("--name", default="fn")
    check.add_argument("signature")
    sub.add_parser("cache-dir", help="print the default cache directory")
    stubgen = sub.add_parser("stubgen", help="build a module and write a .pyi typing its functions")
    stubgen.add_argument("--name", required=True, help="the module's name")
    stubgen.add_argument("-f", "--function", action="append", default=None, metavar="FN[=SIGNATURE]",
                         help="a function (inferred from its C++ definition, or with a signature); "
                         "none: read // @kjit annotations")
    stubgen.add_argument("-o", "--output", help="the .pyi to write (default: print it)")
    stubgen.add_argument("sources", nargs="+", help="C++ source files")
    _cache_parser(sub)
    build = sub.add_parser("build", help="build a module ahead of time into a library kjit.load takes")
    build.add_argument("--name", required=True, help="the module's name")
    build.add_argument("-f", "--function", action="append", default=None, metavar="FN[=SIGNATURE]",
                       help="a function to export, with its signature or inferred from its C++ definition "
                            "(repeat; none: the sources' // @kjit annotations)")
    build.add_argument("--functions-file", default=None, metavar="FILE",
                       help="a JSON list of FN[=SIGNATURE] strings, as -f takes them (CMake's kjit_add_module "
                            "writes one)")
    build.add_argument("-o", "--output", required=True, help="the library to write (e.g. mod.so)")
    build.add_argument("--jax", action="store_true", help="also build an XLA FFI handler per function (mod.jax)")
    build.add_argument("-I", "--include-directory", action="append", default=[], metavar="DIR",
                       help="a folder for the sources' #include (repeat)")
    build.add_argument("--cflag", action="append", default=[], metavar="FLAG",
                       help="an extra compiler flag, as --cflag=-O3 (repeat)")
    build.add_argument("--isa", default=None, metavar="LEVEL",
                       help="instruction set: baseline (default: any x86-64), x86-64-v3, x86-64-v4 or native; "
                            "kjit.load refuses the library on a CPU without it")
    build.add_argument("--cuda-arch", default=None, metavar="ARCHS",
                       help='CUDA targets for .cu sources ("sm_80,sm_90" or "8.0;9.0+PTX")')
    build.add_argument("sources", nargs="+", help="source files: C++, and .cu/.cuh device code")
    sub.add_parser("doctor", help="what kjit finds on this machine: compilers, CUDA, tvm-ffi, torch, jax")
    return parser


def _cache_parser(sub) -> None:
    cache = sub.add_parser("cache", help="list, inspect and prune the build cache")
    cache.add_argument("--dir", default=None,
                       help="the cache directory (default: KJIT_CACHE_DIR, else ~/.cache/kjit)")
    actions = cache.add_subparsers(dest="action", required=True)
    actions.add_parser("list", help="every entry: last use, size, kind, name, what made it")
    actions.add_parser("info", help="where the cache is, its size and its size cap")
    actions.add_parser("clear", help="remove every entry (entries being built are left)")
    prune = actions.add_parser("prune", help="remove entries by age and/or until the cache fits a size")
    prune.add_argument("--older-than", type=float, metavar="DAYS", help="entries not used for more than DAYS")
    prune.add_argument("--max-size", metavar="SIZE",
                       help="then the least recently used until the rest fits (500M, 2G, or bytes)")
    prune.add_argument("--dry-run", action="store_true", help="say what would go, remove nothing")


def main(argv=None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.version:
        return _version()
    if args.command is None:
        parser.print_usage(sys.stderr)
        print("kjit: error: name a command (kjit --help lists them)", file=sys.stderr)
        return USAGE_ERROR

    import kjit  # imported late so --help works even if the library is broken

    try:
        return _run(kjit, args) or 0
    except (_UsageError, ValueError, TypeError) as err:
        # A value the user gave that kjit refuses (kjit.SpecError is a ValueError too):
        # kjit's own message names it. A bug in kjit is an InternalError, never here.
        print(f"kjit: error: {err}", file=sys.stderr)
        return USAGE_ERROR
    except (kjit.CompileError, kjit.ToolchainError, kjit.CacheError, OSError) as err:
        print(f"kjit: error: {err}", file=sys.stderr)
        return FAILURE


def _run(kjit, args) -> int:
    if args.command == "stub":
        if args.prelude:
            print(kjit._lib.api.emit_stub_prelude())
        print(kjit._lib.api.emit_stub(args.name, args.signature), end="")
    elif args.command == "check":
        print(kjit.parse_signature(args.signature, name=args.name))
    elif args.command == "stubgen":
        text = _stubgen(kjit, args)
        if args.output is None:
            print(text, end="")
    elif args.command == "build":
        _check_files(args.sources)
        path = kjit.build(args.name, output=args.output, sources=args.sources, functions=_functions(args, "build"),
                          jax=args.jax, extra_include_paths=args.include_directory, extra_cflags=args.cflag,
                          cuda_arch=args.cuda_arch, isa=args.isa)
        mod = kjit.load(path)
        print(f"{path}: {', '.join(f'{k}({v})' for k, v in mod.functions.items())}")
    elif args.command == "cache-dir":
        print(kjit._lib.api.default_cache_dir())
    elif args.command == "cache":
        return _cache(kjit, args)
    elif args.command == "doctor":
        return _doctor(kjit)
    return 0


def _version() -> int:
    from ._versions import version_text  # noqa: PLC0415  (no tvm_ffi, no torch: milliseconds)

    print(version_text())
    return 0


def _check_files(paths) -> None:
    for path in paths:
        if not os.path.isfile(path):
            reason = os.strerror(errno.EISDIR if os.path.isdir(path) else errno.ENOENT)
            raise _UsageError(f"cannot read the source file {path!r}: {reason}")


def _functions(args, command: str):
    """-f FN[=SIGNATURE]... as load_inline's functions: {name: signature, or None
    (inferred from the C++)}, or None for none (the sources' annotations)."""
    entries = list(args.function or [])
    if getattr(args, "functions_file", None) is not None:
        entries += _functions_file(args.functions_file, command)
    if not entries:
        return None
    functions = {}
    for f in entries:
        name, eq, sig = f.partition("=")
        if eq and not sig.strip():
            raise _UsageError(f"kjit {command}: -f {f!r} has an empty signature; write -f {name} to infer it "
                              "from the C++ definition")
        if name in functions:
            raise _UsageError(f"kjit {command}: -f names the function {name!r} twice")
        functions[name] = sig if eq else None
    return functions


def _functions_file(path: str, command: str) -> list:
    """--functions-file: a JSON list of FN[=SIGNATURE] strings (a signature may hold
    any character: kjit_add_module passes its FUNCTIONS so)."""
    try:
        with open(path, encoding="utf-8") as f:
            entries = json.load(f, strict=False)
    except OSError as err:
        raise _UsageError(f"kjit {command}: cannot read the functions file {path!r}: {err.strerror}") from None
    except ValueError as err:
        raise _UsageError(f"kjit {command}: the functions file {path!r} is not JSON: {err}") from None
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        raise _UsageError(f"kjit {command}: the functions file {path!r} must hold a JSON list of "
                          "FN[=SIGNATURE] strings")
    return entries


def _stubgen(kjit, args) -> str:
    _check_files(args.sources)
    mod = kjit.load_inline(args.name, sources=args.sources, functions=_functions(args, "stubgen"))
    return mod.stub(args.output)


# --- kjit cache ---

def _size_text(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _age_text(seconds: float) -> str:
    if seconds < 3600:
        return f"{max(seconds, 0) / 60:.0f} min ago"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.0f} h ago"
    return f"{seconds / 86400:.0f} days ago"


def _cache_dir(kjit, args) -> str:
    return args.dir if args.dir is not None else kjit._lib.api.default_cache_dir()


def _skipped_line(skipped) -> str:
    """What cache maintenance left because kjit did not make it (docs/cache.md)."""
    shown = ", ".join(str(p) for p in list(skipped)[:10]) + (", ..." if len(skipped) > 10 else "")
    return f"skipped {len(skipped)} files kjit did not make: {shown}"


def _cache(kjit, args) -> int:
    import tvm_ffi  # noqa: PLC0415

    from ._versions import version_text  # noqa: PLC0415

    directory = _cache_dir(kjit, args)
    listing = tvm_ffi.get_global_func("kjit.cache_list")(directory)
    entries = [dict(e) for e in listing["entries"]]
    if args.action == "list":
        now = time.time()
        for e in entries:
            made = f"  ({e['made_by']})" if e["made_by"] else ""
            print(f"{_age_text(now - e['last_used']):>13}  {_size_text(e['bytes']):>10}  {e['kind']:<18}  "
                  f"{e['name']}{made}\n{'':>15}{e['path']}")
        print(f"{len(entries)} entries, {_size_text(sum(e['bytes'] for e in entries))} in {directory}; "
              f"this is {version_text()}")
        if listing["skipped"]:
            print(_skipped_line(listing["skipped"]) + " (not listed)")
    elif args.action == "info":
        cap = os.environ.get("KJIT_CACHE_MAX_SIZE")
        print(f"directory:  {directory}")
        print(f"entries:    {len(entries)} ({_size_text(sum(e['bytes'] for e in entries))})")
        for kind in sorted({e["kind"] for e in entries}):
            chosen = [e for e in entries if e["kind"] == kind]
            print(f"  {kind + ':':<20}{len(chosen)} ({_size_text(sum(e['bytes'] for e in chosen))})")
        print(f"size cap:   {cap + ' (KJIT_CACHE_MAX_SIZE)' if cap else 'none (set KJIT_CACHE_MAX_SIZE, e.g. 2G)'}")
    else:
        return _prune(directory, args, tvm_ffi)
    return 0


def _prune(directory: str, args, tvm_ffi) -> int:
    older = max_bytes = -1
    every = args.action == "clear"
    dry_run = getattr(args, "dry_run", False)
    if args.action == "prune":
        if args.older_than is None and args.max_size is None:
            raise _UsageError("kjit cache prune: give --older-than DAYS, --max-size SIZE or both "
                              "(kjit cache clear removes every entry)")
        if args.older_than is not None:
            if not args.older_than >= 0 or args.older_than > 1e6:
                raise _UsageError(f"--older-than: expected a number of days >= 0, got {args.older_than}")
            older = int(args.older_than * 86400)
        if args.max_size is not None:
            max_bytes = tvm_ffi.get_global_func("kjit.parse_byte_size")(args.max_size)
            if max_bytes < 0:
                raise _UsageError(f"--max-size: expected a size such as 500M, 2G or a number of bytes, "
                                  f"got {args.max_size!r}")
    result = tvm_ffi.get_global_func("kjit.cache_prune")(directory, older, max_bytes, every, dry_run)
    removed, busy = list(result["removed"]), list(result["busy"])
    verb = "would remove" if dry_run else "removed"
    for e in removed:
        print(f"{verb} {e['kind']} {e['name']} ({_size_text(e['bytes'])}): {e['path']}")
    for e in busy:
        print(f"left {e['kind']} {e['name']}: another process is building it")
    failed = list(result["failed"])
    for e in failed:
        print(f"kjit: error: could not remove {e['kind']} {e['name']}: {e['reason']}", file=sys.stderr)
    print(f"{verb} {len(removed)} entries ({_size_text(result['freed_bytes'])}) from {directory}"
          + (f"; {len(busy)} busy" if busy else "")
          + (f"; {len(failed)} could not be removed" if failed else "")
          + (f"; {result['lock_files_removed']} stale lock files" if result["lock_files_removed"] else ""))
    if result["skipped"]:
        print(_skipped_line(result["skipped"]))
    return FAILURE if failed else 0


# --- kjit doctor ---

def _package_line(module: str, distribution: str, enables: str, version=None) -> str:
    from ._versions import distribution_version  # noqa: PLC0415

    spec = importlib.util.find_spec(module)  # found, not imported: jax and torch take seconds to import
    if spec is None:
        return f"  {module:<12} not installed: {enables} unavailable (pip install {distribution})"
    where = os.path.dirname(spec.origin) if spec.origin else "?"
    return f"  {module:<12} {version or distribution_version(distribution) or '?'} at {where}: {enables}"


def _doctor(kjit) -> int:
    import tvm_ffi  # noqa: PLC0415

    report = {k: dict(v) for k, v in tvm_ffi.get_global_func("kjit.toolchain_report")().items()}
    enables = {
        "cxx": ("C++ compiler", "load_inline, kjit.elementwise on CPU (CXX picks one)"),
        "nvcc": ("nvcc", "cuda_sources= in load_inline"),
        "nvrtc": ("NVRTC", "kjit.elementwise on CUDA tensors"),
        "cuda_driver": ("CUDA driver", "running CUDA kernels (a GPU)"),
        "cache_dir": ("cache", "where builds are kept (KJIT_CACHE_DIR)"),
        "vector_math": ("vector math", "math functions vectorised in CPU loops (KJIT_VECTOR_MATH)"),
    }
    from ._versions import versions  # noqa: PLC0415

    print(f"kjit {kjit.__version__} at {os.path.dirname(kjit.__file__)}")
    for key, (label, what) in enables.items():
        r = report[key]
        detail = str(r["detail"]).strip().splitlines()[0] if str(r["detail"]).strip() else ""
        # The cache line is the check every build runs (ownership, permissions, a build
        # directory made there): a cache builds refuse is refused here too.
        state = "ok" if r["found"] else ("REFUSED" if key == "cache_dir" else "MISSING")
        print(f"  {label:<12} {state}: {detail}" + ("" if r["found"] else f" -> {what} unavailable")
              + (f" -> {what}" if r["found"] else ""))
    print(_package_line("tvm_ffi", "apache-tvm-ffi", "the ABI every kjit function is called through",
                        versions()["tvm-ffi"]))
    print(_package_line("torch", "torch", "torch tensors, kjit.torch ops"))
    print(_package_line("jax", "jax", "kjit.jax callables and XLA targets"))
    print(_package_line("numpy", "numpy", "NumPy arrays"))
    return 0 if report["cxx"]["found"] and report["cache_dir"]["found"] else FAILURE


if __name__ == "__main__":
    sys.exit(main())
