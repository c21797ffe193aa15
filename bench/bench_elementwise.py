"""kjit.elementwise on CPU against NumPy, PyTorch and a plain C OpenMP loop.

Targets, every comparison in the same run:
  * float32 add, 2^24 elements, contiguous: at least NumPy's and torch's speed, and
    at least 85% of the bandwidth of a plain C OpenMP loop compiled here;
  * float32 add at every fourth power of two from 1 element to 2^8, every second
    one to 2^14 and every one to 2^26, with new outputs and with out=: NumPy inputs no slower
    than NumPy from 2^16 up, torch inputs no slower than torch at every size (the
    smaller NumPy sizes are shown: there a call is mostly its fixed cost);
  * broadcast (1,32,32,2) + (1024,1,1,2): at least 3x torch;
  * a transposed input (a.T + b, 4096x4096 float32): at least torch's speed;
  * 1-element call overhead: no more than torch's;
  * first call: at most 1.5 s cold; at most 10 ms from the disk cache in a fresh process.

Apart from the size sweep's new-output columns and the 1-element case, the
variants write into preallocated outputs (out=), so the comparison is the loop,
not the allocator. Each case is timed as the best of
several rounds of a fixed number of calls, the variants in a new seeded order
each round; the size sweep also prints, and judges its targets on, the median
over the rounds of each round's kjit/anchor ratio (size_sweep says why).

Run: /work/main/.venv/bin/python bench/bench_elementwise.py [--rounds 7] [--sizes]
     (--sizes: only the size sweep; --paired: kjit and its anchor alone, alternating)
     (--smoke: tiny sizes and one round, for the test suite: checks that every
     case runs and computes the right values; its timings mean nothing)
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import tvm_ffi

ADD = "template <typename T> T add(T a, T b) { return a + b; }"

C_LOOP = r"""
#include <stdint.h>
void c_add(const float* a, const float* b, float* c, int64_t n) {
  #pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
}
"""

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import kjit
t_import = time.perf_counter() - t0
a = np.ones(4, np.float32)
t0 = time.perf_counter()
f = kjit.elementwise(sys.argv[1])
r = f(a, a)
print("RESULT " + json.dumps({"first_call_s": time.perf_counter() - t0, "import_s": t_import}))
"""


def best_time(fn, calls: int, rounds: int) -> float:
    fn()
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls)
    return best


def compile_c_loop(work: str):
    src, lib = os.path.join(work, "c_add.c"), os.path.join(work, "c_add.so")
    with open(src, "w") as f:
        f.write(C_LOOP)
    subprocess.run(["cc", "-O3", "-fopenmp", "-fPIC", "-shared", src, "-o", lib], check=True)
    dll = ctypes.CDLL(lib)
    dll.c_add.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    return dll.c_add


def rotate_rounds(variants: dict, rounds: int, calls: int) -> dict:
    """Each variant's time per call in each of `rounds` rounds, in a new seeded order
    each round. A fixed order (even rotated) lets the same variant always follow the
    same one, and the call after a single-threaded NumPy block pays for waking
    the sleeping OpenMP workers: 4-10% of a 2^18-2^20 call, measured here."""
    times = {k: [] for k in variants}
    names = list(variants)
    order = random.Random(len(names))
    for _ in range(rounds):
        order.shuffle(names)
        for name in names:
            times[name].append(best_time(variants[name], calls, 1))
    return times


def rotate(variants: dict, rounds: int, calls: int) -> dict:
    """Best time of each variant over rotate_rounds' rounds."""
    return {k: min(v) for k, v in rotate_rounds(variants, rounds, calls).items()}


def child_first_call(cache: str) -> dict:
    env = dict(os.environ, KJIT_CACHE_DIR=cache)
    proc = subprocess.run([sys.executable, "-c", CHILD, ADD], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr)
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def report_speedup(title: str, t: dict, target: float, with_torch: bool) -> bool:
    """Prints one case's times in ms and kjit's speed-up over torch; whether it meets `target`."""
    print(title)
    for k in t:
        print(f"  {k:>9}: {t[k] * 1e3:7.2f} ms")
    if not with_torch:
        return True
    r = t["torch"] / t["kjit"]
    print(f"  kjit vs torch {r:.2f}x (target >= {target})")
    return r >= target


# log2 sizes of the size sweep: 1 element to 2^26, every power from 2^15 (odd ones too:
# 2^21's operands fit a 32 MiB L3 and 2^22's do not, which decides streaming stores)
SWEEP = (0, 4, 8, 10, 12, 14) + tuple(range(15, 27))
SWEEP_TARGET_FROM = 16  # NumPy inputs: kjit/NumPy <= 1 from this size up


def sweep_variants(add, n: int, torch) -> dict:
    """The size sweep's variants at n elements: NumPy and torch inputs, new outputs and out=."""
    a = np.random.rand(n).astype(np.float32)
    b = np.random.rand(n).astype(np.float32)
    c = np.empty_like(a)
    v = {
        "kjit np": lambda: add(a, b),
        "numpy": lambda: np.add(a, b),
        "kjit np out=": lambda: add(a, b, out=c),
        "numpy out=": lambda: np.add(a, b, out=c),
    }
    assert np.array_equal(add(a, b), a + b)
    if torch is not None:
        ta, tb, tc = torch.from_numpy(a), torch.from_numpy(b), torch.empty(n)
        v["kjit torch"] = lambda: add(ta, tb)
        v["torch"] = lambda: torch.add(ta, tb)
        v["kjit torch out="] = lambda: add(ta, tb, out=tc)
        v["torch out="] = lambda: torch.add(ta, tb, out=tc)
        assert torch.equal(add(ta, tb), ta + tb)
    return v


def size_sweep(add, torch, rounds: int, smoke: bool) -> bool:
    """float32 add at each SWEEP size, every variant of a size interleaved; prints
    us per call and kjit's ratios; whether the targets are met.

    Two ratios per pair: "best", of the best times over the rounds, and "paired",
    the median over the rounds of kjit's time over the anchor's in the same round,
    which the targets judge. Where kjit and its anchor run the same loop at the
    memory's speed (torch, 2^16 to 2^21 out=) the best times tie within a few
    percent, and which side had the luckier round decides the best ratio; the
    paired median compares them under the same conditions, round by round."""
    pairs = [("kjit np", "numpy"), ("kjit np out=", "numpy out=")]
    if torch is not None:
        pairs += [("kjit torch", "torch"), ("kjit torch out=", "torch out=")]
    print(f"float32 add by size, us per call (best of {rounds} rounds; ratios kjit / anchor: of the best times, "
          "and the median of the same round's ratios, which the targets judge):")
    print("  " + f"{'n':>5}" + "".join(f" | {k:>15} {a:>10}  best paired" for k, a in pairs))
    ok = True
    for log2 in (4, 8, 12) if smoke else SWEEP:
        n = 1 << log2
        calls = 1 if smoke else max(5, min(20000, (1 << 22) // n))  # a timing covers a few ms
        t = rotate_rounds(sweep_variants(add, n, torch), rounds, calls)
        row, ratios = f"  2^{log2:<3}", []
        for k, a in pairs:
            ratios.append(statistics.median(x / y for x, y in zip(t[k], t[a])))
            row += f" | {min(t[k]) * 1e6:15.2f} {min(t[a]) * 1e6:10.2f} {min(t[k]) / min(t[a]):5.2f} {ratios[-1]:6.2f}"
        print(row)
        numpy_ok = log2 < SWEEP_TARGET_FROM or max(ratios[:2]) <= 1
        torch_ok = torch is None or max(ratios[2:]) <= 1
        ok = ok and numpy_ok and torch_ok
    print(f"  targets (paired ratios): kjit/NumPy <= 1 from 2^{SWEEP_TARGET_FROM} up; kjit/torch <= 1 at every size: "
          + ("met" if ok else "NOT met"))
    return ok


def paired(add, torch, rounds: int) -> None:
    """kjit against its anchor alone, out=, at 2^16, 2^18 and 2^20: the two alternate
    call block by call block for `rounds` rounds (no other variant between them, so
    no third library's threads interfere); prints min and median ratios."""
    print(f"paired out= calls, {rounds} alternating rounds (ratio = kjit / anchor, min and median):")
    for log2 in (16, 18, 20):
        n = 1 << log2
        a, b = np.random.rand(n).astype(np.float32), np.random.rand(n).astype(np.float32)
        c = np.empty_like(a)
        pairs = {"numpy": (lambda: add(a, b, out=c), lambda: np.add(a, b, out=c))}
        if torch is not None:
            ta, tb, tc = torch.from_numpy(a), torch.from_numpy(b), torch.empty(n)
            pairs["torch"] = (lambda: add(ta, tb, out=tc), lambda: torch.add(ta, tb, out=tc))
        calls = max(5, (1 << 24) // n)
        row = f"  2^{log2:<3}"
        for anchor, (k, t) in pairs.items():
            rk, rt = [], []
            for r in range(rounds):
                first, second = ((k, rk), (t, rt)) if r % 2 else ((t, rt), (k, rk))
                for fn, acc in (first, second):
                    acc.append(best_time(fn, calls, 1))
            row += (f" | vs {anchor}: kjit {statistics.median(rk) * 1e6:8.2f} us, {anchor} "
                    f"{statistics.median(rt) * 1e6:8.2f} us, ratio min {min(rk) / min(rt):.3f} "
                    f"median {statistics.median(rk) / statistics.median(rt):.3f}")
        print(row)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, one round: a test that every case runs")
    ap.add_argument("--sizes", action="store_true", help="only the size sweep")
    ap.add_argument("--paired", action="store_true",
                    help="only kjit against NumPy / torch alone, alternating, out=, 2^16 to 2^20 (21 rounds)")
    args = ap.parse_args()
    if args.smoke:
        args.rounds = 1
    calls = 1 if args.smoke else 10  # per timing of the large cases
    small_calls = 50 if args.smoke else 20000
    work = tempfile.mkdtemp(prefix="kjit-bench-ew-")
    os.environ.setdefault("KJIT_CACHE_DIR", os.path.join(work, "cache"))
    import kjit

    try:
        import torch
    except ImportError:
        torch = None
    add = kjit.elementwise(ADD)
    with open("/proc/self/maps") as maps:
        gomp = "libgomp" in maps.read() and os.environ.get("KJIT_OPENMP") != "0"
    print(f"threads: kjit {kjit.get_num_threads()}, torch {torch.get_num_threads() if torch else '-'}, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}; kjit's parallel loops run on "
          + ("the libgomp torch loaded" if gomp else "kjit's own pool") + " (docs/elementwise.md)")
    if args.paired:
        paired(add, torch, 3 if args.smoke else 21)
        return 0
    ok = size_sweep(add, torch, args.rounds, args.smoke)
    if args.sizes:
        return 0

    # ---- 1. float32 add, 2^24, contiguous ----
    n = 1 << (12 if args.smoke else 24)
    a = np.random.rand(n).astype(np.float32)
    b = np.random.rand(n).astype(np.float32)
    c = np.empty_like(a)
    c_add = compile_c_loop(work)
    variants = {
        "kjit": lambda: add(a, b, out=c),
        "numpy": lambda: np.add(a, b, out=c),
        "C OpenMP": lambda: c_add(a.ctypes.data, b.ctypes.data, c.ctypes.data, n),
    }
    if torch is not None:
        ta, tb, tc = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(c)
        variants["torch"] = lambda: torch.add(ta, tb, out=tc)
    t = rotate(variants, args.rounds, calls)
    add(a, b, out=c)
    assert np.array_equal(c, a + b)
    gbps = {k: 3 * 4 * n / v / 1e9 for k, v in t.items()}
    print("float32 add, 2^24 contiguous:")
    for k in t:
        print(f"  {k:>9}: {t[k] * 1e3:7.2f} ms  {gbps[k]:6.1f} GB/s")
    r_c = gbps["kjit"] / gbps["C OpenMP"]
    r_np = t["numpy"] / t["kjit"]
    r_t = (t["torch"] / t["kjit"]) if torch is not None else float("nan")
    print(f"  kjit bandwidth / C OpenMP {r_c:.2f} (target >= 0.85); speed vs numpy {r_np:.2f}x, vs torch "
          f"{r_t:.2f}x (targets >= 1)")
    ok = ok and r_c >= 0.85 and r_np >= 1 and (torch is None or r_t >= 1)

    # ---- 2. broadcast (1,32,32,2) + (1024,1,1,2) ----
    x = np.random.rand(1, 32, 32, 2).astype(np.float32)
    rows = 16 if args.smoke else 1024
    y = np.random.rand(rows, 1, 1, 2).astype(np.float32)
    z = np.empty((rows, 32, 32, 2), np.float32)
    variants = {"kjit": lambda: add(x, y, out=z), "numpy": lambda: np.add(x, y, out=z)}
    if torch is not None:
        tx, ty, tz = torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(z)
        variants["torch"] = lambda: torch.add(tx, ty, out=tz)
    t = rotate(variants, args.rounds, calls)
    add(x, y, out=z)
    assert np.array_equal(z, x + y)
    ok = report_speedup("broadcast (1,32,32,2) + (1024,1,1,2), float32:", t, 3, torch is not None) and ok

    # ---- 3. transposed input ----
    m = 64 if args.smoke else 4096
    p = np.random.rand(m, m).astype(np.float32)
    q = np.random.rand(m, m).astype(np.float32)
    s = np.empty((m, m), np.float32)
    variants = {"kjit": lambda: add(p.T, q, out=s), "numpy": lambda: np.add(p.T, q, out=s)}
    if torch is not None:
        tp, tq, ts = torch.from_numpy(p), torch.from_numpy(q), torch.from_numpy(s)
        variants["torch"] = lambda: torch.add(tp.T, tq, out=ts)
    t = rotate(variants, args.rounds, 1 if args.smoke else 3)
    add(p.T, q, out=s)
    assert np.array_equal(s, p.T + q)
    ok = report_speedup("transposed input a.T + b, 4096x4096 float32:", t, 1, torch is not None) and ok

    # ---- 4. 1-element call overhead ----
    e = np.ones(1, np.float32)
    variants = {"kjit": lambda: add(e, e), "kjit out=": lambda: add(e, e, out=e), "numpy": lambda: np.add(e, e)}
    # The floor under any tvm-ffi binding: the same crossing with a no-op callee,
    # and a callee that returns its (torch) argument, which tvm-ffi converts back.
    nop, echo = tvm_ffi.get_global_func("testing.nop"), tvm_ffi.get_global_func("testing.echo")
    variants["tvm-ffi nop(a, b)"] = lambda: nop(e, e)
    if torch is not None:
        te = torch.ones(1)
        to = torch.empty(1)
        variants["torch"] = lambda: torch.add(te, te)
        variants["kjit torch"] = lambda: add(te, te)
        variants["torch out="] = lambda: torch.add(te, te, out=to)
        variants["kjit torch out="] = lambda: add(te, te, out=to)
        variants["tvm-ffi nop(ta, tb)"] = lambda: nop(te, te)
        variants["tvm-ffi echo(ta)"] = lambda: echo(te)
    t = rotate(variants, args.rounds, small_calls)
    assert np.array_equal(add(e, e), e + e)
    if torch is not None:
        assert torch.equal(add(te, te), te + te) and type(add(te, te)) is torch.Tensor
    print("1-element call, float32 (new output unless out=):")
    for k in t:
        print(f"  {k:>19}: {t[k] * 1e6:7.3f} us")
    if torch is not None:
        r = t["kjit"] / t["torch"]
        rt = t["kjit torch"] / t["torch"]
        ro = t["kjit torch out="] / t["torch out="]
        print(f"  kjit (NumPy) / torch {r:.2f}, kjit (torch) / torch {rt:.2f} (target <= 1); "
              f"with out=: kjit (torch) / torch {ro:.2f}")
        ok = ok and r <= 1 and rt <= 1

    # ---- 5. first call: cold, then from the disk cache in a fresh process ----
    cache = os.path.join(work, "first-call")
    cold = child_first_call(cache)
    warm = [child_first_call(cache) for _ in range(1 if args.smoke else 3)]
    w = min(x["first_call_s"] for x in warm)
    print(f"first call: cold {cold['first_call_s']:.3f} s (target <= 1.5), from the disk cache in a fresh process "
          f"{w * 1e3:.1f} ms (target <= 10); import kjit {cold['import_s'] * 1e3:.0f} ms")
    ok = ok and cold["first_call_s"] <= 1.5 and w <= 0.010
    if args.smoke:
        print("smoke run: every case ran and computed the right values (timings mean nothing)")
    else:
        print("targets met" if ok else "targets NOT all met (see above)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
