"""A kjit RMSNorm inside jax.jit over host devices: one device, row-sharded with
kjit's rule (no collective), and row-sharded with the rule overridden to replicate
everything (what a custom call without a rule costs: the rows are gathered onto
every device, each computes all of them). XLA_FLAGS is set here, before JAX starts.

Run: /work/main/.venv/bin/python bench/bench_sharding.py [--devices 4] [--rows 16384] [--cols 1024]
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def best_ms(fn, repeat: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", type=int, default=4)
    ap.add_argument("--rows", type=int, default=16384)
    ap.add_argument("--cols", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={args.devices}"
    import jax
    import numpy as np
    from jax.sharding import NamedSharding, PartitionSpec as P

    import kjit

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    mod = kjit.load_inline("bench_sharding_rms", cpp_sources=open(os.path.join(root, "examples", "rmsnorm.cc")).read(),
                           jax=True)
    mesh = jax.make_mesh((args.devices,), ("d",))
    x = np.random.default_rng(0).standard_normal((args.rows, args.cols)).astype(np.float32)
    w = np.linspace(0.5, 1.5, args.cols, dtype=np.float32)
    one = jax.device_put(x, jax.devices()[0])
    rows = jax.device_put(x, NamedSharding(mesh, P("d", None)))
    rule = mod.rmsnorm.sharding_rule

    def timed(arg, rule_now):
        mod.rmsnorm.sharding_rule = rule_now
        f = jax.jit(lambda a, b: mod.jax.rmsnorm(a, b))
        hlo = f.lower(arg, w).compile().as_text()
        ms = best_ms(lambda: f(arg, w).block_until_ready(), args.repeat)
        np.testing.assert_allclose(np.asarray(f(arg, w)), mod.rmsnorm(x, w), rtol=1e-5)
        return ms, hlo.count("all-gather")

    single, _ = timed(one, rule)
    sharded, gathers = timed(rows, rule)
    replicated, gathers_r = timed(rows, rule.replicated("*batch"))
    mod.rmsnorm.sharding_rule = rule
    print(f"RMSNorm ({args.rows}, {args.cols}) float32, jax.jit on {os.cpu_count()} cores, {args.devices} host devices")
    print("| run | ms | all-gathers in the HLO | vs one device |\n| --- | --- | --- | --- |")
    print(f"| one device | {single:.3f} | 0 | 1.00 |")
    print(f"| rows sharded, kjit's rule | {sharded:.3f} | {gathers} | {sharded / single:.2f} |")
    print(f"| rows sharded, everything replicated (no rule) | {replicated:.3f} | {gathers_r} | "
          f"{replicated / single:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
