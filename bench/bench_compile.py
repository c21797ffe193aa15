"""Build and load time: kjit.load_inline vs tvm_ffi.cpp.load_inline, cold and cached.

Targets:
  * a cold kjit.load_inline of a one-function CPU module takes at most half the time
    of tvm_ffi.cpp.load_inline on the same kernel, measured in the same run;
  * a cached kjit.load_inline in a fresh process takes under 20 ms (the call alone,
    after `import kjit`).

Cold: each repeat uses fresh, empty cache directories for both (kjit: its
build_directory, the same as KJIT_CACHE_DIR; tvm-ffi: build_directory, where it
writes main.cpp, build.ninja and the objects, so ninja rebuilds everything; nothing
else is cached, there is no ccache on the compile line). The order of the two
alternates between repeats.

Cached: the warm caches from the cold runs are loaded again in fresh subprocesses.
Inside the subprocess the script times `import kjit` and the load_inline call
alone; the parent times the whole subprocess. `import kjit` imports tvm_ffi, which
imports torch when torch is installed: a variant with torch blocked shows how much
of the import time is torch's.

Run: /work/main/.venv/bin/python bench/bench_compile.py [--repeat 3] [--fresh 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

KJIT_SIG = "a: float32[n], b: float32[n], c: float32[n] out"
KJIT_SRC = """
void vadd(const kjit::TensorView a, const kjit::TensorView b, kjit::TensorView c) {
  const float* x = a.data<float>();
  const float* y = b.data<float>();
  float* z = c.data<float>();
  for (int64_t i = 0, n = a.size(0); i < n; ++i) z[i] = x[i] + y[i];
}
"""
# tvm_ffi.cpp.load_inline prepends the tvm-ffi includes and appends
# TVM_FFI_DLL_EXPORT_TYPED_FUNC(vadd, vadd) for functions="vadd" (its documented use).
TVM_FFI_SRC = """
void vadd(tvm::ffi::TensorView a, tvm::ffi::TensorView b, tvm::ffi::TensorView c) {
  const float* x = static_cast<const float*>(a.data_ptr());
  const float* y = static_cast<const float*>(b.data_ptr());
  float* z = static_cast<float*>(c.data_ptr());
  for (int64_t i = 0, n = a.size(0); i < n; ++i) z[i] = x[i] + y[i];
}
"""

COLD_TARGET = 0.5  # kjit cold / tvm-ffi cold
CACHED_TARGET_MS = 20.0

# Runs in a fresh interpreter. argv: which ("kjit" | "tvm_ffi"), cache dir, block_torch (0/1).
CHILD = r"""
import json, sys, time
t_start = time.perf_counter()
which, cache, block_torch = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
if block_torch:
    sys.modules["torch"] = None  # `import torch` raises ImportError
KJIT_SIG, KJIT_SRC, TVM_FFI_SRC = json.loads(sys.stdin.read())
out = {}
if which == "kjit":
    t0 = time.perf_counter()
    import kjit
    out["import_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    mod = kjit.load_inline("vadd", cpp_sources=KJIT_SRC, functions={"vadd": KJIT_SIG}, build_directory=cache)
    out["load_s"] = time.perf_counter() - t0
    out["cache_hit"] = mod.cache_hit
    fn = mod.vadd
else:
    t0 = time.perf_counter()
    import tvm_ffi, tvm_ffi.cpp
    out["import_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    mod = tvm_ffi.cpp.load_inline("vadd", cpp_sources=TVM_FFI_SRC, functions="vadd", build_directory=cache)
    out["load_s"] = time.perf_counter() - t0
    out["cache_hit"] = None
    fn = mod.vadd
out["torch_imported"] = sys.modules.get("torch") is not None
out["in_process_s"] = time.perf_counter() - t_start
print("RESULT " + json.dumps(out))
"""


def child_run(which: str, cache: str, block_torch: bool = False) -> dict:
    env = dict(os.environ)
    env.pop("KJIT_CACHE_DIR", None)  # the cache dir is passed explicitly
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, which, cache, "1" if block_torch else "0"],
        input=json.dumps([KJIT_SIG, KJIT_SRC, TVM_FFI_SRC]),
        capture_output=True,
        text=True,
        env=env,
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"child {which} failed:\n{proc.stderr}")
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    res = json.loads(line[len("RESULT "):])
    res["wall_s"] = wall
    return res


def check_vadd(fn, np) -> None:
    a = np.arange(1000, dtype=np.float32)
    b = np.full(1000, 2.0, dtype=np.float32)
    c = np.zeros(1000, dtype=np.float32)
    fn(a, b, c)
    if not np.array_equal(c, a + b):
        raise AssertionError("vadd computed a wrong result")


def fmt_ms(xs) -> str:
    return f"{min(xs) * 1e3:8.1f} {statistics.median(xs) * 1e3:8.1f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3, help="cold builds of each (default 3)")
    ap.add_argument("--fresh", type=int, default=5, help="fresh-process cached loads of each (default 5)")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="kjit-bench-compile-")
    os.environ["KJIT_CACHE_DIR"] = os.path.join(work, "kjit-default")  # nothing may land in ~/.cache
    try:
        t0 = time.perf_counter()
        import tvm_ffi
        import tvm_ffi.cpp

        t_tvm_ffi = time.perf_counter() - t0
        t0 = time.perf_counter()
        import kjit

        t_kjit = time.perf_counter() - t0
        import numpy as np

        print(
            f"this process: import tvm_ffi {t_tvm_ffi:.2f} s "
            f"({'includes' if sys.modules.get('torch') is not None else 'without'} torch), "
            f"then import kjit {t_kjit * 1e3:.1f} ms"
        )

        # ---- cold builds, same process, alternating order ----
        cold_k, cold_t = [], []
        last_k_dir = last_t_dir = None
        for r in range(args.repeat):
            k_dir = os.path.join(work, f"cold{r}", "kjit")
            t_dir = os.path.join(work, f"cold{r}", "tvm_ffi")

            def run_kjit():
                t0 = time.perf_counter()
                mod = kjit.load_inline("vadd", cpp_sources=KJIT_SRC, functions={"vadd": KJIT_SIG}, build_directory=k_dir)
                dt = time.perf_counter() - t0
                if mod.cache_hit:
                    raise AssertionError("kjit reported a cache hit on a fresh cache dir")
                check_vadd(mod.vadd, np)
                return dt

            def run_tvm_ffi():
                if os.path.exists(t_dir):
                    raise AssertionError("tvm-ffi build dir is not fresh")
                t0 = time.perf_counter()
                mod = tvm_ffi.cpp.load_inline("vadd", cpp_sources=TVM_FFI_SRC, functions="vadd", build_directory=t_dir)
                dt = time.perf_counter() - t0
                check_vadd(mod.vadd, np)
                return dt

            if r % 2 == 0:
                dk = run_kjit()
                dt = run_tvm_ffi()
            else:
                dt = run_tvm_ffi()
                dk = run_kjit()
            cold_k.append(dk)
            cold_t.append(dt)
            print(f"  cold repeat {r}: kjit {dk:.3f} s, tvm_ffi.cpp {dt:.3f} s, ratio {dk / dt:.3f}")
            last_k_dir, last_t_dir = k_dir, t_dir

        # ---- cached loads, fresh processes, interleaved ----
        fresh = {"kjit": [], "tvm_ffi": [], "kjit_notorch": []}
        for _ in range(args.fresh):
            fresh["kjit"].append(child_run("kjit", last_k_dir))
            fresh["tvm_ffi"].append(child_run("tvm_ffi", last_t_dir))
            fresh["kjit_notorch"].append(child_run("kjit", last_k_dir, block_torch=True))
        for res in fresh["kjit"] + fresh["kjit_notorch"]:
            if not res["cache_hit"]:
                raise AssertionError("a fresh-process kjit load was not a cache hit")
        torch_note = "torch imported" if fresh["kjit"][0]["torch_imported"] else "torch not imported"

        # ---- report ----
        med_k, med_t = statistics.median(cold_k), statistics.median(cold_t)
        min_k, min_t = min(cold_k), min(cold_t)
        cold_ratio_med = med_k / med_t
        cold_ratio_min = min_k / min_t
        per_repeat = [k / t for k, t in zip(cold_k, cold_t)]
        print(f"\n== cold load_inline, one-function CPU module (vadd), {args.repeat} repeats, fresh cache dirs ==")
        print(f"{'':34s} {'min s':>8s} {'median s':>9s}")
        print(f"{'kjit.load_inline':34s} {min_k:8.3f} {med_k:9.3f}")
        print(f"{'tvm_ffi.cpp.load_inline':34s} {min_t:8.3f} {med_t:9.3f}")
        print(
            f"{'ratio kjit / tvm_ffi':34s} {cold_ratio_min:8.3f} {cold_ratio_med:9.3f}"
            f"   per repeat: {', '.join(f'{x:.3f}' for x in per_repeat)}"
        )
        cold_met = cold_ratio_med <= COLD_TARGET and max(per_repeat) <= COLD_TARGET
        print(f"target: cold kjit <= {COLD_TARGET:.2f} x tvm_ffi (median and every repeat): {'MET' if cold_met else 'NOT MET'}")

        def col(key, name):
            return [x[key] for x in fresh[name]]

        print(f"\n== cached load in a fresh process, {args.fresh} processes each, ms (min / median) ==")
        print(f"{'':44s} {'min':>8s} {'median':>8s}")
        print(f"{'kjit: load_inline call alone':44s} {fmt_ms(col('load_s', 'kjit'))}")
        print(f"{'kjit: import kjit (' + torch_note + ')':44s} {fmt_ms(col('import_s', 'kjit'))}")
        print(f"{'kjit: start of script to loaded, in process':44s} {fmt_ms(col('in_process_s', 'kjit'))}")
        print(f"{'kjit: whole subprocess wall':44s} {fmt_ms(col('wall_s', 'kjit'))}")
        print(f"{'kjit, torch blocked: load_inline call':44s} {fmt_ms(col('load_s', 'kjit_notorch'))}")
        print(f"{'kjit, torch blocked: import kjit':44s} {fmt_ms(col('import_s', 'kjit_notorch'))}")
        print(f"{'kjit, torch blocked: subprocess wall':44s} {fmt_ms(col('wall_s', 'kjit_notorch'))}")
        print(f"{'tvm_ffi: cpp.load_inline call alone':44s} {fmt_ms(col('load_s', 'tvm_ffi'))}")
        print(f"{'tvm_ffi: import tvm_ffi, tvm_ffi.cpp':44s} {fmt_ms(col('import_s', 'tvm_ffi'))}")
        print(f"{'tvm_ffi: start of script to loaded':44s} {fmt_ms(col('in_process_s', 'tvm_ffi'))}")
        print(f"{'tvm_ffi: whole subprocess wall':44s} {fmt_ms(col('wall_s', 'tvm_ffi'))}")
        k_load_med = statistics.median(col("load_s", "kjit")) * 1e3
        t_load_med = statistics.median(col("load_s", "tvm_ffi")) * 1e3
        print(f"{'ratio kjit / tvm_ffi, load call (median)':44s} {k_load_med / t_load_med:17.3f}")
        cached_met = k_load_med < CACHED_TARGET_MS
        print(
            f"target: cached kjit.load_inline in a fresh process < {CACHED_TARGET_MS:.0f} ms (median of the call): "
            f"{'MET' if cached_met else 'NOT MET'} ({k_load_med:.1f} ms)"
        )
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
