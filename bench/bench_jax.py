"""JAX: a jitted call of a kjit XLA target against the anchors, and the compile cost
of XLA handlers.

Targets:
  * a jitted JAX call of a kjit target costs no more than the same kernel called
    through jax-tvm-ffi or a hand-written XLA FFI handler (ffi.h), same run;
  * the cold compile of a module with XLA handlers stays within 1.5x of the same
    module without them.

Call cost: one jitted function holding a single custom call, y = scale * (a + b)
on float32 vectors, timed per call with block_until_ready (JAX's dispatch dominates
at small sizes; the kernel dominates at large ones). Anchors, all on the same kernel
body: kjit's generated handler (kjit.jax.register), jax-tvm-ffi bridging the kjit
tvm-ffi function (its trampoline builds DLTensors and calls the safe call, so the
kjit stub's checks run there too), a hand-written handler against xla/ffi/api/ffi.h
(XLA's documented C++ binding, no checks beyond XLA's own decoding), and jnp for
reference. The order of the variants rotates between rounds.

Compile: kjit.load_inline(force_rebuild=True) of the same two-function module with
jax=False and jax=True, alternating, median of N.

Run: /work/main/.venv/bin/python bench/bench_jax.py [--rounds 5] [--compiles 5]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

KERNEL_BODY = """
  const float* a = static_cast<const float*>(pa);
  const float* b = static_cast<const float*>(pb);
  float* y = static_cast<float*>(py);
  for (int64_t i = 0; i < n; ++i) y[i] = scale * (a[i] + b[i]);
"""

KJIT_SRC = (
    """
#include <kjit/kernel.h>
// @kjit vadd arg arg ret attr.scale:float32
void vadd(const kjit::TensorView x, const kjit::TensorView z, kjit::TensorView out, float scale) {
  const void* pa = x.data_ptr(); const void* pb = z.data_ptr(); void* py = out.data_ptr();
  const int64_t n = x.numel();
"""
    + KERNEL_BODY
    + """}
// @kjit vsub arg arg ret
void vsub(const kjit::TensorView x, const kjit::TensorView z, kjit::TensorView out) {
  const float* a = x.data<float>(); const float* b = z.data<float>(); float* y = out.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) y[i] = a[i] - b[i];
}
"""
)

# XLA's documented C++ binding (ffi.h): the anchor a JAX user would hand-write.
HAND_SRC = (
    """
#include "xla/ffi/api/ffi.h"
namespace ffi = xla::ffi;
static ffi::Error VaddImpl(ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::F32> z, ffi::ResultBuffer<ffi::F32> out,
                           float scale) {
  if (x.element_count() != z.element_count() || x.element_count() != out->element_count())
    return ffi::Error::InvalidArgument("vadd: size mismatch");
  const void* pa = x.typed_data(); const void* pb = z.typed_data(); void* py = out->typed_data();
  const int64_t n = static_cast<int64_t>(x.element_count());
"""
    + KERNEL_BODY
    + """  return ffi::Error::Success();
}
XLA_FFI_DEFINE_HANDLER_SYMBOL(HandVadd, VaddImpl,
                              ffi::Ffi::Bind().Arg<ffi::Buffer<ffi::F32>>().Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>().Attr<float>("scale"));
"""
)


def compile_hand_written(jax_include: str, out_dir: str) -> str:
    src = os.path.join(out_dir, "hand.cc")
    lib = os.path.join(out_dir, "hand.so")
    with open(src, "w") as f:
        f.write(HAND_SRC)
    cmd = ["c++", "-std=c++17", "-O2", "-fPIC", "-shared", "-I", jax_include, src, "-o", lib]
    t = time.perf_counter()
    subprocess.run(cmd, check=True)
    print(f"  hand-written ffi.h handler compiled in {time.perf_counter() - t:.2f} s (for reference)")
    return lib


def time_calls(fn, args, iters: int) -> float:
    fn(*args).block_until_ready()  # compile + warm
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(iters):
            r = fn(*args)
        r.block_until_ready()
        best = min(best, (time.perf_counter() - t) / iters)
    return best


def bench_calls(rounds: int) -> dict:
    import jax
    import jax.numpy as jnp
    import jax_tvm_ffi

    import kjit
    import kjit.jax

    mod = kjit.load_inline("bench_jax", cpp_sources=KJIT_SRC, jax=True)
    kjit.jax.register(mod)
    jax_tvm_ffi.register_ffi_target("bench_tvm.vadd", mod.vadd, ["args", "rets", "attrs.scale"],
                                    platform="cpu")
    tmp = tempfile.mkdtemp(prefix="kjit-bench-jax-")
    hand = ctypes.CDLL(compile_hand_written(jax.ffi.include_dir(), tmp))
    jax.ffi.register_ffi_target("bench_hand.vadd", jax.ffi.pycapsule(hand.HandVadd), platform="cpu")

    def make(target):
        def f(a, b):
            out = jax.ShapeDtypeStruct(a.shape, a.dtype)
            return jax.ffi.ffi_call(target, out)(a, b, scale=np.float32(2.0))

        return jax.jit(f)

    variants = {
        "kjit": make("bench_jax.vadd"),
        "jax-tvm-ffi": make("bench_tvm.vadd"),
        "hand ffi.h": make("bench_hand.vadd"),
        "jnp": jax.jit(lambda a, b: np.float32(2.0) * (a + b)),
    }
    results = {}
    for n in (16, 1 << 12, 1 << 20):
        a = jnp.arange(n, dtype=jnp.float32)
        b = jnp.ones(n, jnp.float32)
        want = 2.0 * (np.asarray(a) + np.asarray(b))
        for name, f in variants.items():
            np.testing.assert_allclose(np.asarray(f(a, b)), want, rtol=1e-6)
        iters = 2000 if n <= 4096 else 100
        times = {name: [] for name in variants}
        names = list(variants)
        for r in range(rounds):
            order = names[r % len(names):] + names[: r % len(names)]
            for name in order:
                times[name].append(time_calls(variants[name], (a, b), iters))
        # The fastest round: on a shared 2-core machine the slow rounds measure the
        # neighbours, not the call.
        results[n] = {k: min(v) for k, v in times.items()}
    return results


def bench_compile(repeats: int) -> tuple:
    import kjit

    with_h, without = [], []
    for r in range(repeats):
        for jx in ((False, True) if r % 2 == 0 else (True, False)):
            t = time.perf_counter()
            kjit.load_inline("bench_jax_compile", cpp_sources=KJIT_SRC, jax=jx, force_rebuild=True)
            (with_h if jx else without).append(time.perf_counter() - t)
    return statistics.median(without), statistics.median(with_h)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--compiles", type=int, default=5)
    args = parser.parse_args()
    os.environ.setdefault("KJIT_CACHE_DIR", tempfile.mkdtemp(prefix="kjit-bench-cache-"))
    try:
        import jax  # noqa: F401
        import jax_tvm_ffi  # noqa: F401
    except ImportError as err:
        print(f"skipped: {err} (pip install 'jax[cpu]' jax-tvm-ffi)")
        return 0

    print("JAX jitted call, y = 2 * (a + b) float32, per call (best round of --rounds, each the best of 3 loops):")
    results = bench_calls(args.rounds)
    print(f"  {'n':>8} {'kjit':>10} {'jax-tvm-ffi':>12} {'hand ffi.h':>11} {'jnp':>10}   kjit/tvm  kjit/hand")
    ok = True
    for n, r in results.items():
        rt, rh = r["kjit"] / r["jax-tvm-ffi"], r["kjit"] / r["hand ffi.h"]
        ok = ok and rt <= 1.0 and rh <= 1.05
        print(f"  {n:>8} {r['kjit'] * 1e6:8.2f}us {r['jax-tvm-ffi'] * 1e6:10.2f}us {r['hand ffi.h'] * 1e6:9.2f}us "
              f"{r['jnp'] * 1e6:8.2f}us   {rt:8.3f}  {rh:9.3f}")

    without, with_h = bench_compile(args.compiles)
    print(f"cold compile of a 2-function module: without handlers {without:.3f} s, with XLA handlers "
          f"{with_h:.3f} s, ratio {with_h / without:.2f} (target <= 1.5)")
    print("target met" if ok and with_h / without <= 1.5 else "target NOT met (see ratios above)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
