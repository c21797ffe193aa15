"""kjit functions in programs that run across processes (docs/distributed.md):
DTensor ops sharded by their rules over gloo (2 ranks started by
torch.multiprocessing, 4 by torchrun), a jax.export of a jitted function with kjit
calls reloaded in a fresh process without a compiler, and an AOTInductor package of
a model with a kjit op loaded in a fresh process. Each run is bounded in time and
its whole process group is killed when it overruns."""

import os
import re
import socket
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

from conftest import run_bounded  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RMSNORM = os.path.join(ROOT, "examples", "rmsnorm.cc")


def run(args, env, timeout, cwd=None):
    proc = run_bounded(args, env, timeout, cwd)
    return proc.returncode, proc.stdout, proc.stderr


def ranks_ok(out: str, world: int) -> bool:
    """Every rank printed its line (the ranks share stdout, so lines may interleave)."""
    return sorted(re.findall(rf"rank (\d+) of {world}: ok", out)) == [str(r) for r in range(world)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# One rank's checks: every kind of kjit op on DTensors, results equal to a
# single-process run, and no communication where the rule lets the op run on the
# local pieces. Every rank builds from the shared cache (one compiles, the others
# wait on its lock).
RANK = textwrap.dedent(r"""
    import os, sys
    import torch, torch.distributed as dist
    import kjit, kjit.torch
    from torch.distributed.tensor import DeviceMesh, Replicate, Shard, distribute_tensor
    from torch.distributed.tensor.debug import CommDebugMode

    AXPY = '''
    #include <kjit/kernel.h>
    void axpy(const kjit::TensorView x, kjit::TensorView y, double a) {
      float* out = y.data<float>();
      for (int64_t i = 0; i < x.numel(); ++i) out[i] += static_cast<float>(a) * x.data<float>()[i];
    }
    '''

    def check(rank, world):
        mesh = DeviceMesh("cpu", list(range(world)))
        mod = kjit.load_inline("dist_rms", cpp_sources=open(sys.argv[1]).read(), torch=True)
        axpy = kjit.load_inline("dist_axpy", cpp_sources=AXPY, torch=True, functions={
            "axpy": "x: float32[m, n], y: float32[m, n] out, a: float64; independent(m)"})
        add = kjit.torch.op(kjit.elementwise("template <typename T> T add(T a, T b) { return a + b; }"),
                            namespace="dist_ops")
        total = kjit.torch.op(kjit.reduction("template <typename T> T add(T a, T b) { return a + b; }", identity=0),
                              namespace="dist_ops", name="total")
        torch.manual_seed(0)
        x, w = torch.randn(4 * world, 16), torch.rand(16)
        xs, xn, wr = (distribute_tensor(x, mesh, [Shard(0)]), distribute_tensor(x, mesh, [Shard(1)]),
                      distribute_tensor(w, mesh, [Replicate()]))

        def run(what, f, want, comms, placement):
            with CommDebugMode() as mode:
                got = f()
            full = got.full_tensor()
            assert torch.allclose(full, want, rtol=1e-5, atol=1e-5), (what, (full - want).abs().max())
            assert mode.get_total_counts() == comms, (what, mode.get_comm_counts())
            assert tuple(got.placements) == (placement,), (what, got.placements)

        run("rmsnorm, rows", lambda: mod.torch.rmsnorm(xs, wr), mod.rmsnorm(x, w), 0, Shard(0))
        run("rmsnorm, n sharded: gathered", lambda: mod.torch.rmsnorm(xn, wr), mod.rmsnorm(x, w), 1, Replicate())
        run("elementwise", lambda: add(xs, wr), x + w, 0, Shard(0))
        run("reduction, kept dim", lambda: total(xs, axis=1), x.sum(1), 0, Shard(0))
        run("reduction, reduced dim", lambda: total(xn, axis=1), x.sum(1), 1, Replicate())
        # an op whose only output is a mutated argument, in place on the local rows
        y = torch.ones(4 * world, 16)
        ys = distribute_tensor(y.clone(), mesh, [Shard(0)])
        with CommDebugMode() as mode:
            axpy.torch.axpy(xs, ys, 2.0)
        want = y.clone()
        axpy.axpy(x, want, 2.0)
        assert mode.get_total_counts() == 0 and tuple(ys.placements) == (Shard(0),)
        assert torch.allclose(ys.full_tensor(), want)
        print(f"rank {rank} of {world}: ok", flush=True)

    def leave():
        # Gloo's threads may still hold tensors when the interpreter finalizes, which
        # aborts the process now and then ("terminate called without an active
        # exception", with or without kjit: pytorch/pytorch#190489): leave before that.
        sys.stdout.flush()
        os._exit(0)
""")

SPAWN = RANK + textwrap.dedent(r"""
    def worker(rank, world, port):
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("gloo", rank=rank, world_size=world)
        try:
            check(rank, world)
        finally:
            dist.destroy_process_group()
        leave()

    if __name__ == "__main__":
        import torch.multiprocessing as mp
        mp.spawn(worker, args=(int(sys.argv[2]), int(sys.argv[3])), nprocs=int(sys.argv[2]))
""")

TORCHRUN = RANK + textwrap.dedent(r"""
    if __name__ == "__main__":
        dist.init_process_group("gloo")
        try:
            check(dist.get_rank(), dist.get_world_size())
        finally:
            dist.destroy_process_group()
        leave()
""")


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("kjit-dist-cache"))


def run_ranks(tmp_path, cache, script_text, launch, world, timeout):
    """``script_text`` as a file started by ``launch(path)`` (argv); every rank of
    ``world`` must report ok."""
    if not torch.distributed.is_available():
        pytest.skip("torch without torch.distributed")
    script = tmp_path / "ranks.py"
    script.write_text(script_text)
    env = dict(os.environ, KJIT_CACHE_DIR=cache, OMP_NUM_THREADS="1")
    rc, out, err = run(launch(str(script)), env, timeout)
    assert rc == 0 and ranks_ok(out, world), out[-2000:] + err[-6000:]


def test_dtensor_ops_over_two_ranks_from_torch_multiprocessing(tmp_path, shared_cache):
    run_ranks(tmp_path, shared_cache, SPAWN, lambda s: [sys.executable, s, RMSNORM, "2", str(free_port())], 2, 300)


def test_dtensor_ops_over_four_ranks_from_torchrun(tmp_path, shared_cache):
    run_ranks(tmp_path, shared_cache, TORCHRUN, lambda s: [sys.executable, "-m", "torch.distributed.run",
                                                           "--standalone", "--nproc-per-node", "4", s, RMSNORM], 4, 400)


EXPORT = textwrap.dedent(r"""
    import os, sys
    import numpy as np, jax, jax.numpy as jnp
    from jax import export
    import kjit, kjit.jax
    work, source = sys.argv[1], sys.argv[2]
    lib = kjit.build("exp_rms", output=os.path.join(work, "exp_rms.so"), cpp_sources=open(source).read(), jax=True)
    mod = kjit.load(lib)
    f = jax.jit(lambda x, w: jnp.tanh(mod.jax.rmsnorm(x, w)) * 2)
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    w = np.linspace(0.5, 1.5, 8, dtype=np.float32)
    exported = export.export(f, disabled_checks=kjit.jax.disabled_checks(mod))(
        jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct(w.shape, w.dtype))
    open(os.path.join(work, "f.jax"), "wb").write(exported.serialize())
    np.savez(os.path.join(work, "io.npz"), x=x, w=w, want=np.asarray(f(x, w)))
    print("exported", [t for t in exported.mlir_module().split() if t.startswith("@exp_rms.")][:1])
""")

RELOAD = textwrap.dedent(r"""
    import os, shutil, sys
    import numpy as np
    from jax import export
    import kjit, kjit.jax
    assert shutil.which("g++") is None and shutil.which("c++") is None, "a compiler is on PATH"
    work = sys.argv[1]
    mod = kjit.load(os.path.join(work, "exp_rms.so"))
    kjit.jax.functions(mod)  # registers the module's XLA targets under the exported names
    exported = export.deserialize(bytearray(open(os.path.join(work, "f.jax"), "rb").read()))
    io = np.load(os.path.join(work, "io.npz"))
    got = np.asarray(exported.call(io["x"], io["w"]))
    assert np.array_equal(got, io["want"]), np.abs(got - io["want"]).max()
    print("ok")
""")


def test_jax_export_reloads_in_a_fresh_process_without_a_compiler(tmp_path):
    pytest.importorskip("jax")
    pytest.importorskip("flatbuffers")  # jax.export's serialization
    env = dict(os.environ, KJIT_CACHE_DIR=str(tmp_path / "cache"))
    rc, out, err = run([sys.executable, "-c", EXPORT, str(tmp_path), RMSNORM], env, 300)
    assert rc == 0 and "exported ['@exp_rms.rmsnorm(" in out, out + err[-4000:]
    bare = dict(env, PATH=str(tmp_path / "no-bin"), KJIT_CACHE_DIR=str(tmp_path / "cache-2"))
    rc, out, err = run([sys.executable, "-c", RELOAD, str(tmp_path)], bare, 300)
    assert rc == 0 and out.strip().endswith("ok"), out + err[-4000:]


def doc_scripts():
    """The ```py scripts of docs/distributed.md, in order: JAX, DTensor, jax.export,
    AOTInductor (they start processes or need devices, so test_docs does not exec
    them: these tests run each the way the doc says)."""
    text = open(os.path.join(ROOT, "docs", "distributed.md")).read()
    return re.findall(r"```py\n(.*?)```", text, re.S)


def test_doc_scripts_are_the_four_engines():
    scripts = doc_scripts()
    assert len(scripts) == 4
    assert "mod.jax.rmsnorm" in scripts[0] and "DTensor" not in scripts[0]
    assert "init_process_group" in scripts[1]
    assert "export.export" in scripts[2] and "aoti_compile_and_package" in scripts[3]


def test_doc_jax_script_on_four_host_devices(tmp_path):
    pytest.importorskip("jax")
    script = tmp_path / "jax_sharded.py"
    script.write_text(doc_scripts()[0])
    env = dict(os.environ, KJIT_CACHE_DIR=str(tmp_path / "cache"), XLA_FLAGS="--xla_force_host_platform_device_count=4")
    rc, out, err = run([sys.executable, str(script)], env, 300, cwd=ROOT)
    assert rc == 0 and out.strip().endswith("ok"), out + err[-4000:]


def test_doc_dtensor_script_from_torchrun(tmp_path, shared_cache):
    if not torch.distributed.is_available():
        pytest.skip("torch without torch.distributed")
    script = tmp_path / "dtensor.py"
    script.write_text(doc_scripts()[1])
    env = dict(os.environ, KJIT_CACHE_DIR=shared_cache, OMP_NUM_THREADS="1")
    rc, out, err = run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                        str(script)], env, 300, cwd=ROOT)
    assert rc == 0 and sorted(re.findall(r"rank (\d): ok", out)) == ["0", "1"], out + err[-4000:]


@pytest.mark.parametrize("k", [2, 3], ids=["jax.export", "aot-inductor"])
def test_doc_round_trip_scripts(tmp_path, k):
    if k == 2:
        pytest.importorskip("jax")
        pytest.importorskip("flatbuffers")
    script = tmp_path / "round_trip.py"
    script.write_text(doc_scripts()[k])
    env = dict(os.environ, KJIT_CACHE_DIR=str(tmp_path / "cache"), TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))
    rc, out, err = run([sys.executable, str(script)], env, 600, cwd=ROOT)
    assert rc == 0 and out.strip().endswith("ok"), out + err[-6000:]
