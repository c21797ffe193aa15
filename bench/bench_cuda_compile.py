"""CUDA build and load time: kjit.load_inline(cuda_sources=...) vs tvm_ffi.cpp.load_inline.

Targets:
  * a cold kjit.load_inline of a module with one small .cu kernel takes at most half
    the time of tvm_ffi.cpp.load_inline on the same kernel, measured in the same run;
  * a cached load in a fresh process takes under 20 ms (the load_inline call, after
    `import kjit`).

Both build for the same targets, sm_80 and sm_90 SASS (tvm-ffi:
TVM_FFI_CUDA_ARCH_LIST="8.0 9.0"; kjit: cuda_arch="sm_80,sm_90"); kjit's default,
which adds compute_90 PTX, is timed too. The kernel is the same; the entry point
takes tvm::ffi::TensorView (tvm-ffi, whose .cu includes its C++ headers, as its
load_inline prepends them) or kjit::TensorView (kjit, whose .cu includes only
kjit/kernel.h). Each cold repeat uses fresh cache directories; orders alternate.
No GPU is needed: nothing is called.

Run: /work/main/.venv/bin/python bench/bench_cuda_compile.py [--repeat 3] [--fresh 5]
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

KERNEL = """
#include <cuda_runtime.h>
__global__ void add_kernel(const float* a, const float* b, float* c, int64_t n) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
"""
KJIT_SRC = KERNEL + """
void vector_add(const kjit::TensorView a, const kjit::TensorView b, kjit::TensorView c, cudaStream_t stream) {
  int64_t n = a.numel();
  add_kernel<<<(n + 255) / 256, 256, 0, stream>>>(a.data<float>(), b.data<float>(), c.data<float>(), n);
}
"""
KJIT_SIG = "a: float32[n], b: float32[n], c: float32[n] out, stream: stream"
TVM_FFI_SRC = KERNEL + """
void vector_add(tvm::ffi::TensorView a, tvm::ffi::TensorView b, tvm::ffi::TensorView c) {
  int64_t n = a.size(0);
  cudaStream_t stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(a.device().device_type, a.device().device_id));
  add_kernel<<<(n + 255) / 256, 256, 0, stream>>>(static_cast<const float*>(a.data_ptr()),
      static_cast<const float*>(b.data_ptr()), static_cast<float*>(c.data_ptr()), n);
}
"""
ARCHS = "sm_80,sm_90"

CHILD = r"""
import json, sys, time
cache, src, sig, archs = json.loads(sys.stdin.read())
t0 = time.perf_counter()
import kjit
t_import = time.perf_counter() - t0
t0 = time.perf_counter()
mod = kjit.load_inline("cuadd", cuda_sources=src, functions={"vector_add": sig}, cuda_arch=archs,
                       build_directory=cache)
print("RESULT " + json.dumps({"import_s": t_import, "load_s": time.perf_counter() - t0, "hit": mod.cache_hit}))
"""


def kjit_cold(kjit, cache: str, archs) -> float:
    t0 = time.perf_counter()
    mod = kjit.load_inline("cuadd", cuda_sources=KJIT_SRC, functions={"vector_add": KJIT_SIG}, cuda_arch=archs,
                           build_directory=cache)
    dt = time.perf_counter() - t0
    if mod.cache_hit:
        raise AssertionError("kjit reported a cache hit on a fresh cache dir")
    return dt


def tvm_ffi_cold(tvm_ffi_cpp, cache: str) -> float:
    t0 = time.perf_counter()
    tvm_ffi_cpp.load_inline("cuadd", cuda_sources=TVM_FFI_SRC, functions="vector_add", build_directory=cache)
    return time.perf_counter() - t0


def fresh_load(cache: str) -> dict:
    env = dict(os.environ)
    env.pop("KJIT_CACHE_DIR", None)
    proc = subprocess.run([sys.executable, "-c", CHILD], input=json.dumps([cache, KJIT_SRC, KJIT_SIG, ARCHS]),
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr)
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--fresh", type=int, default=5)
    args = ap.parse_args()
    if shutil.which("nvcc") is None and not os.path.exists("/usr/local/cuda/bin/nvcc"):
        print("skipped: no nvcc (install the CUDA toolkit)")
        return 0
    os.environ["TVM_FFI_CUDA_ARCH_LIST"] = "8.0 9.0"
    work = tempfile.mkdtemp(prefix="kjit-bench-cuda-")
    os.environ["KJIT_CACHE_DIR"] = os.path.join(work, "default")
    try:
        import tvm_ffi.cpp

        import kjit

        cold_k, cold_t, cold_default = [], [], []
        for r in range(args.repeat):
            k_dir, t_dir = os.path.join(work, f"k{r}"), os.path.join(work, f"t{r}")
            if r % 2 == 0:
                dk, dt = kjit_cold(kjit, k_dir, ARCHS), tvm_ffi_cold(tvm_ffi.cpp, t_dir)
            else:
                dt, dk = tvm_ffi_cold(tvm_ffi.cpp, t_dir), kjit_cold(kjit, k_dir, ARCHS)
            dd = kjit_cold(kjit, os.path.join(work, f"d{r}"), None)
            cold_k.append(dk)
            cold_t.append(dt)
            cold_default.append(dd)
            print(f"  cold repeat {r}: kjit {dk:.3f} s (default archs {dd:.3f} s), tvm_ffi.cpp {dt:.3f} s, "
                  f"ratio {dk / dt:.3f}")
        fresh = [fresh_load(os.path.join(work, "k0")) for _ in range(args.fresh)]
        if not all(f["hit"] for f in fresh):
            raise AssertionError("a fresh-process load was not a cache hit")
        mk, mt = statistics.median(cold_k), statistics.median(cold_t)
        loads = [f["load_s"] * 1e3 for f in fresh]
        print(f"cold load_inline, one .cu kernel, sm_80+sm_90: kjit {mk:.3f} s, tvm_ffi.cpp {mt:.3f} s, "
              f"ratio {mk / mt:.3f} (target <= 0.5); kjit with its default archs (+compute_90 PTX) "
              f"{statistics.median(cold_default):.3f} s")
        print(f"cached load_inline in a fresh process: min {min(loads):.1f} ms, median {statistics.median(loads):.1f} "
              f"ms (target < 20 ms); import kjit {statistics.median(f['import_s'] for f in fresh) * 1e3:.0f} ms")
        ok = mk / mt <= 0.5 and statistics.median(loads) < 20
        print("target met" if ok else "target NOT met")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
