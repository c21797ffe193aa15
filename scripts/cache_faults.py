"""Fault injection into the build cache: damage a cached module, load it in a fresh process, count outcomes.

Each trial builds (or reuses) one small module, damages its cache entry one way, with a random size or offset
drawn from a seeded generator, then loads it in a fresh interpreter and records how that process ended:

  rebuilt  exit 0, the right answer, the damage reported on stderr and the entry rebuilt
  refused  exit 1 with a CacheError (the expected outcome of foreign or world-writable entries)
  crash    killed by a signal (SIGSEGV, SIGBUS, SIGILL, ...)
  wrong    anything else (a wrong value, another exception)

The figures in docs/cache.md come from this script. Pass --library to run it against another libkjit.so (for
example the main checkout's, to see what the damage did before the cache verified entries).

Run: /work/main/.venv/bin/python scripts/cache_faults.py [--trials 10] [--seed 1] [--library PATH]
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import textwrap

CHILD = textwrap.dedent("""
    import sys
    sys.modules["torch"] = None  # not needed here; keeps each fresh process fast
    import kjit
    src = "#include <kjit/kernel.h>\\nint64_t twice(int64_t x) { return %s * x; }\\n"
    mod = kjit.load_inline(sys.argv[1], cpp_sources=src, functions={"twice": "x: int64"})
    print("VALUE", mod.twice(21))
    print("PATH", mod.path)
""")


def load(name, cache, env, factor=2):
    code = CHILD % factor
    return subprocess.run([sys.executable, "-c", code, name], env=dict(env, KJIT_CACHE_DIR=cache),
                          capture_output=True, text=True, timeout=300)


def path_of(proc):
    for line in proc.stdout.splitlines():
        if line.startswith("PATH "):
            return line[5:]
    raise RuntimeError(f"no library path (exit status {proc.returncode}):\n{proc.stderr}")


def text_section(data):
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    strtab, = struct.unpack_from("<Q", data, shoff + shstrndx * shentsize + 0x18)
    for i in range(shnum):
        base = shoff + i * shentsize
        name_off, = struct.unpack_from("<I", data, base)
        if data[strtab + name_off:data.index(b"\0", strtab + name_off)] == b".text":
            return struct.unpack_from("<QQ", data, base + 0x18)
    raise RuntimeError("no .text")


def rewrite(path, change):
    with open(path, "rb") as f:
        data = bytearray(f.read())
    data = change(data)
    with open(path, "wb") as f:
        f.write(data)


def truncate(path, rng, ctx):
    os.truncate(path, rng.randrange(1, os.path.getsize(path)))


def zero_tail(path, rng, ctx):
    def change(d):
        start = rng.randrange(len(d) // 4, len(d))
        return d[:start] + bytes(len(d) - start)
    rewrite(path, change)


def flip_text(path, rng, ctx):
    def change(d):
        off, size = text_section(bytes(d))
        for _ in range(rng.randrange(1, 64)):
            d[off + rng.randrange(size)] ^= rng.randrange(1, 256)
        return d
    rewrite(path, change)


def flip_any(path, rng, ctx):
    def change(d):
        d[rng.randrange(len(d))] ^= 1 << rng.randrange(8)
        return d
    rewrite(path, change)


def other_module(path, rng, ctx):
    shutil.copyfile(ctx["other"], path)


def world_writable(path, rng, ctx):
    os.chmod(path, os.stat(path).st_mode | 0o002)


def foreign_owner(path, rng, ctx):
    os.chown(rng.choice([path, os.path.dirname(path)]), 65534, -1)


MODES = {
    "truncate at a random size": (truncate, "rebuilt"),
    "zero from a random offset to the end": (zero_tail, "rebuilt"),
    "flip 1-63 random bytes of .text": (flip_text, "rebuilt"),
    "flip one random bit anywhere": (flip_any, "rebuilt"),
    "replace with another module's .so": (other_module, "rebuilt"),
    "chmod o+w the library": (world_writable, "refused"),
}
if os.geteuid() == 0:
    MODES["chown nobody (library or entry)"] = (foreign_owner, "refused")


def outcome(proc, expected_value):
    if proc.returncode < 0:
        return f"crash ({signal.Signals(-proc.returncode).name})"
    if proc.returncode == 0 and f"VALUE {expected_value}" in proc.stdout:
        return "rebuilt" if "is damaged" in proc.stderr else "loaded unnoticed"
    if proc.returncode == 1 and "kjit.errors.CacheError" in proc.stderr:
        return "refused"
    return "wrong"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--library", help="the libkjit.so to test (default: KJIT_LIBRARY or the installed one)")
    args = parser.parse_args()
    env = dict(os.environ)
    if args.library:
        env["KJIT_LIBRARY"] = args.library
    rng = random.Random(args.seed)
    counts = collections.defaultdict(collections.Counter)
    with tempfile.TemporaryDirectory(prefix="kjit-faults-") as tmp:
        other_cache = os.path.join(tmp, "other")
        other = path_of(load("faults_other", other_cache, env, factor=3))
        for mode, (damage, _) in MODES.items():
            for trial in range(args.trials):
                cache = os.path.join(tmp, f"c{len(counts)}-{trial}")
                path = path_of(load("faults", cache, env))
                damage(path, rng, {"other": other})
                counts[mode][outcome(load("faults", cache, env), 42)] += 1
                shutil.rmtree(cache, ignore_errors=True)
    total = collections.Counter()
    print(f"{'damage':40s} {'expected':9s} outcomes over {args.trials} trials (seed {args.seed})")
    for mode, (_, expected) in MODES.items():
        total.update(counts[mode])
        print(f"{mode:40s} {expected:9s} " + ", ".join(f"{k}: {v}" for k, v in sorted(counts[mode].items())))
    print(f"{'all':40s} {'':9s} " + ", ".join(f"{k}: {v}" for k, v in sorted(total.items())))
    bad = sum(v for k, v in total.items() if k not in ("rebuilt", "refused"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
