"""The ``kjit`` command line: ``kjit stub --name NAME "<signature>"`` and friends."""

from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="kjit", description="kjit: checked kernels on the TVM-FFI ABI")
    sub = parser.add_subparsers(dest="command", required=True)
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
    args = parser.parse_args(argv)

    import kjit  # imported late so --help works even if the library is broken

    try:
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
        elif args.command == "cache-dir":
            print(kjit._lib.api.default_cache_dir())
    except kjit.SpecError as err:
        print(f"kjit: error: {err}", file=sys.stderr)
        return 2
    return 0


def _stubgen(kjit, args) -> str:
    sources = []
    for path in args.sources:
        with open(path, encoding="utf-8") as f:
            sources.append(f.read())
    functions = None
    if args.function:
        if all("=" not in f for f in args.function):
            functions = list(args.function)
        else:
            functions = {}
            for f in args.function:
                name, _, sig = f.partition("=")
                functions[name] = sig if sig else None
            if any(sig is None for sig in functions.values()):
                raise kjit.SpecError("kjit stubgen: give every -f a signature (FN=SIGNATURE) or none of them")
    mod = kjit.load_inline(args.name, cpp_sources=sources, functions=functions)
    return mod.stub(args.output)


if __name__ == "__main__":
    sys.exit(main())
