"""Every CUDA path of kjit on a real GPU, against CPU references; timings against
torch and CuPy (issue 29, docs/gpu.md). Run through scripts/gpu_check, which sets
up the GPU machine first; this is the check program it then runs:

    python scripts/gpu_check.py --out DIR [--dry-run] [--sections a,b] [--deadline EPOCH]

Each section runs in its own process, with a time budget; each check in it is
independent (an exception is that check's FAIL; a crash or a lost CUDA context
restarts the section in a new process without the checks already done). Rows go
to DIR/results.json, every section's output to DIR/checks.log, and a short
table (name | result | figure) is printed last. Results: PASS, FAIL (a wrong
value, a crash, an error), MISS (a timing under its target), SKIP (with why),
INFO (a figure without a target). The exit status is 1 when any row FAILs.

--dry-run (no GPU): what needs no GPU runs for real (imports, the nvcc builds of
the checked kernels and their XLA handlers, the harness against kjit's CPU path
and torch, the no-driver CUDA path, the C++ CUDA simulation tests with
--build-dir); each GPU check reports SKIP.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Callable, Dict, List, Optional, Sequence, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESTART_CODE = 75  # a child whose CUDA context is lost exits with this: the section restarts
STATUSES = ("PASS", "FAIL", "MISS", "SKIP", "INFO")

# Targets (issue 29), printed beside the figures.
TARGET_COPY_FRACTION = 0.90   # elementwise add float32 at 2^24 and up: of the measured copy bandwidth
TARGET_COLD_S = 1.5           # first NVRTC call, cold cache
TARGET_CACHED_S = 0.010       # first call in a new process, kernel cached on disk

# (name, GPU budget in seconds, what --dry-run does: "run" the section, "skip" it, "only" in dry runs)
SECTIONS: List[Tuple[str, int, str]] = [
    ("env", 40, "run"),
    ("checked", 90, "run"),
    ("elementwise", 120, "run"),
    ("reduction", 60, "run"),
    ("jax", 90, "run"),
    ("first_call", 45, "skip"),
    ("timing", 100, "skip"),
    ("sanitizer", 160, "skip"),
    ("brainevent", 150, "run"),
    ("simulation", 240, "only"),
]
MIN_SECTION_S = 15  # a section gets at least this, else it is skipped as out of time


# ---- rows -------------------------------------------------------------------------


class Skip(Exception):
    """A check that cannot run here: SKIP with this text."""


class CheckFailed(AssertionError):
    """A wrong value: FAIL with this text."""


def fail(msg: str):
    raise CheckFailed(msg)


def clip(text: str, n: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 3] + "..."


def format_table(rows: Sequence[dict], title: str = "") -> str:
    """The table printed last: name | result | figure, then a summary line."""
    name_w = min(46, max([len("name")] + [len(r["name"]) for r in rows]))
    lines = []
    if title:
        lines.append(title)
    lines.append(f"{'name':<{name_w}} | result | figure")
    lines.append(f"{'-' * name_w}-+--------+-{'-' * 60}")
    for r in rows:
        lines.append(f"{clip(r['name'], name_w):<{name_w}} | {r['status']:<6} | {clip(r.get('figure', ''), 150)}")
    counts = {s: sum(1 for r in rows if r["status"] == s) for s in STATUSES}
    lines.append("summary: " + ", ".join(f"{counts[s]} {s}" for s in STATUSES) +
                 (" -- FAILED" if counts["FAIL"] else " -- no failures"))
    return "\n".join(lines)


class Recorder:
    """A child's records, one JSON object a line, flushed as they happen (a crash
    keeps what came before): {"kind": "start"|"row", ...}."""

    def __init__(self, path: Optional[str]):
        self.f = open(path, "a", encoding="utf-8") if path else None
        self.rows: List[dict] = []

    def write(self, rec: dict) -> None:
        if rec["kind"] == "row":
            self.rows.append(rec)
            print(f"[{rec['status']}] {rec['name']}: {rec.get('figure', '')}", flush=True)
            if rec.get("detail"):
                print(textwrap_indent(rec["detail"]), flush=True)
        if self.f:
            self.f.write(json.dumps(rec) + "\n")
            self.f.flush()
            os.fsync(self.f.fileno())


def textwrap_indent(text: str) -> str:
    return "\n".join("    " + line for line in str(text).splitlines())


def read_records(path: str) -> List[dict]:
    out = []
    if not os.path.exists(path):
        return out
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass  # a line cut by a crash
    return out


# ---- a section's checks (child process) -------------------------------------------


class Section:
    """Runs one section's checks in this process: each one independent, timed, its
    rows recorded; a failed GPU check is followed by a probe of the CUDA context."""

    def __init__(self, name: str, args, rec: Recorder):
        self.name = name
        self.args = args
        self.rec = rec
        self.dry = args.dry_run
        self.small = args.small
        self.skip = set(filter(None, (args.skip or "").split("|")))
        self.deadline = args.deadline or (time.time() + 3600)
        self.gpu = False
        self.no_gpu = "no GPU (dry run)" if self.dry else "no GPU visible"
        self.torch = None

    def remaining(self) -> float:
        return self.deadline - time.time()

    def row(self, check: str, status: str, figure: str = "", detail: str = "") -> None:
        assert status in STATUSES, status
        self.rec.write({"kind": "row", "section": self.name, "check": check, "name": f"{self.name}: {check}",
                        "status": status, "figure": figure, "detail": detail})

    def check(self, check: str, fn: Callable, *, gpu: bool = True, planted: bool = False, min_s: float = 3.0):
        """Runs fn(); it returns None (PASS), a figure (PASS), (status, figure) or
        (status, figure, detail); or it records its own rows and returns "rows"."""
        if check in self.skip:
            return
        if planted and self.small:
            return  # errors planted on purpose: not under the sanitizer
        if gpu and not self.gpu:
            self.row(check, "SKIP", self.no_gpu)
            return
        if self.remaining() < min_s:
            self.row(check, "SKIP", f"out of time (the section's budget; {self.remaining():.0f} s left)")
            return
        self.rec.write({"kind": "start", "section": self.name, "check": check})
        print(f"--- {self.name}: {check}", flush=True)
        t0 = time.perf_counter()
        ok = True
        try:
            result = fn()
        except Skip as s:
            self.row(check, "SKIP", str(s))
        except CheckFailed as err:
            ok = False
            self.row(check, "FAIL", str(err).splitlines()[0] if str(err) else "assertion failed", str(err))
        except Exception as err:  # noqa: BLE001 (every check reports; none hides the others)
            ok = False
            tb = traceback.format_exc()
            self.row(check, "FAIL", f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err) else ''}",
                     tb)
        else:
            took = time.perf_counter() - t0
            if result == "rows":
                pass
            elif result is None:
                self.row(check, "PASS", f"{took:.1f} s")
            elif isinstance(result, str):
                self.row(check, "PASS", result)
            else:
                self.row(check, *result)
                ok = result[0] != "FAIL"
        if gpu and self.gpu:
            self._after_gpu_check(check, ok)

    def _after_gpu_check(self, check: str, ok: bool) -> None:
        torch = self.torch
        if torch is None:
            return
        try:
            torch.cuda.synchronize()
            healthy = True
        except Exception as err:  # noqa: BLE001
            print(f"torch.cuda.synchronize() after {check}: {err}", flush=True)
            healthy = False
        if healthy and not ok:
            try:
                x = torch.ones(4, device="cuda")
                x.add_(1)
                healthy = bool((x == 2).all().item())
            except Exception:  # noqa: BLE001
                healthy = False
        if not healthy:
            self.row(check + " (CUDA context)", "FAIL", "the CUDA context is unusable after this check: the section "
                     "restarts in a new process without it")
            sys.stdout.flush()
            os._exit(RESTART_CODE)

    def init_torch_cuda(self) -> None:
        """torch, and whether a GPU is there to use (never in a dry run)."""
        import torch
        self.torch = torch
        if self.dry:
            return
        if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
            self.no_gpu = "no GPU visible to torch (torch.cuda.is_available() is False)"
            return
        torch.cuda.init()
        self.gpu = True


# ---- tensors: values, poison, comparison -------------------------------------------

DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "int32", "int64", "bool",
          "complex64", "complex128"]
UNIT_ROUNDOFF = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8, "float32": 2.0 ** -24, "float64": 2.0 ** -53,
                 "complex64": 2.0 ** -24, "complex128": 2.0 ** -53}


def tname(dtype) -> str:
    return str(dtype).replace("torch.", "")


def make_values(torch, shape, dtype: str, gen, device="cpu"):
    """Fresh random values (as tests/python/test_elementwise.py draws them): 8/16-bit
    integers over their whole range, 32/64-bit in [-1000, 1000] (no C++ overflow),
    floats uniform in [-50, 50], bools, complex parts uniform."""
    td = getattr(torch, dtype)
    if dtype == "bool":
        return torch.randint(0, 2, shape, generator=gen, device=device).to(torch.bool)
    if dtype in ("int8", "uint8", "int16"):
        info = torch.iinfo(td)
        return torch.randint(info.min, info.max + 1, shape, generator=gen, device=device, dtype=torch.int64).to(td)
    if dtype in ("int32", "int64"):
        return torch.randint(-1000, 1001, shape, generator=gen, device=device, dtype=torch.int64).to(td)
    if dtype.startswith("complex"):
        real = torch.float32 if dtype == "complex64" else torch.float64
        re_ = (torch.rand(shape, generator=gen, device=device, dtype=real) - 0.5) * 100
        im_ = (torch.rand(shape, generator=gen, device=device, dtype=real) - 0.5) * 100
        return torch.complex(re_, im_)
    x = (torch.rand(shape, generator=gen, device=device, dtype=torch.float64) - 0.5) * 100
    return x.to(td)


def raw_bytes(torch, t):
    """(numel, itemsize) uint8 view of a tensor's values, in row-major order (CPU).
    A bool tensor is read as uint8 before any copy: torch's copies write bools as
    0/1, which would hide a poisoned (0xFF) element."""
    if t.dtype == torch.bool:
        t = t.view(torch.uint8)
    t = t.detach().cpu().contiguous().reshape(-1)
    if t.is_complex():
        t = torch.view_as_real(t).reshape(-1)
        return t.view(torch.uint8).reshape(-1, t.element_size() * 2)
    return t.view(torch.uint8).reshape(-1, max(1, t.element_size()))


def poison_fill(torch, t, byte: int) -> None:
    """Every byte of t (a contiguous buffer) set to `byte`: NaN for 0xFF floats."""
    t.reshape(-1).view(torch.uint8).fill_(byte)


def poison_allocator(torch, nbytes: int) -> None:
    """Leaves blocks of torch's CUDA caching allocator holding 0xFF, so a new output
    that reuses one and is not fully written shows NaN or -1 (not zeros)."""
    if nbytes <= 0:
        return
    blocks = [torch.empty(nbytes, dtype=torch.uint8, device="cuda") for _ in range(3)]
    for b in blocks:
        b.fill_(0xFF)
    torch.cuda.synchronize()
    del blocks


def describe_value(torch, t, flat_index: int) -> str:
    v = t.detach().cpu().contiguous().reshape(-1)[flat_index]
    b = raw_bytes(torch, v.reshape(1))[0]
    return f"{v.item()!r} (0x{bytes(b.tolist()[::-1]).hex()})"


def mismatch(torch, got, ref, inputs=(), tolerance=None) -> Optional[str]:
    """None when got equals ref element for element (bit for bit; NaN equals NaN; or
    within tolerance(got, ref) -> bool mask), else what differs and where, with the
    inputs at the first differing element."""
    if tuple(got.shape) != tuple(ref.shape):
        return f"shape {tuple(got.shape)}, expected {tuple(ref.shape)}"
    if got.dtype != ref.dtype:
        return f"dtype {tname(got.dtype)}, expected {tname(ref.dtype)}"
    if ref.numel() == 0:
        return None
    g = got.detach().cpu()
    diff = (raw_bytes(torch, g) != raw_bytes(torch, ref)).any(dim=1)
    if g.is_floating_point() or g.is_complex():
        diff &= ~(torch.isnan(g).reshape(-1) & torch.isnan(ref).reshape(-1))
    if tolerance is not None and bool(diff.any()):
        diff &= ~tolerance(g, ref).reshape(-1)
    if not bool(diff.any()):
        return None
    count = int(diff.sum())
    first = int(diff.nonzero()[0, 0])
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(first), tuple(ref.shape))) if ref.dim() else ()
    parts = [f"{count} of {ref.numel()} elements differ; first at index {index}: got {describe_value(torch, g, first)}"
             f", expected {describe_value(torch, ref, first)}"]
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    if tensors:
        try:
            shown = []
            for k, x in enumerate(inputs):
                if isinstance(x, torch.Tensor):
                    xb = torch.broadcast_to(x.detach().cpu(), tuple(ref.shape)).contiguous().reshape(-1)
                    shown.append(f"input #{k} = {describe_value(torch, xb, first)}")
                else:
                    shown.append(f"input #{k} = {x!r} (Python scalar)")
            parts.append("; ".join(shown))
        except Exception as err:  # noqa: BLE001 (the inputs are context only)
            parts.append(f"(inputs not shown: {err})")
    return "; ".join(parts)


def fused_tolerance(torch, dtype: str, products: Callable, addends: Callable, exact: Callable):
    """Tolerance for a result computed with products that the GPU may contract into
    FMAs (a*b+c, complex products): |got - exact| <= 4 u_c (|products| + |addends|)
    + u_out |exact| + the smallest normal, in float64 (u: unit roundoff; float16 and
    bfloat16 compute in float32)."""
    u_out = UNIT_ROUNDOFF[dtype]
    u_c = UNIT_ROUNDOFF["float64" if dtype in ("float64", "complex128") else "float32"]
    tiny = 2.0 ** -14 if dtype == "float16" else 2.0 ** -126 if dtype in ("float32", "bfloat16", "complex64") else \
        2.0 ** -1022

    def within(got, ref):
        wide = torch.complex128 if got.is_complex() else torch.float64
        g = got.to(wide)
        e = exact().to(wide).reshape(g.shape)
        bound = 4 * u_c * (products().abs() + addends().abs()).reshape(g.shape) + u_out * e.abs() + tiny
        return (g - e).abs() <= bound

    return within


# ---- the checked kernels (cuda_sources) ---------------------------------------------

CHECKED_SRC = r"""
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cstdint>
#include <stdexcept>

static inline unsigned gc_blocks(int64_t n) { return static_cast<unsigned>((n + 255) / 256); }

__global__ void gc_add_kernel(const float* a, const float* b, float* c, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) c[i] = __fadd_rn(a[i], b[i]);
}

// alpha * x + y rounded twice (no contraction into an FMA): NumPy's float32 result.
__global__ void gc_axpy_kernel(float alpha, const float* x, float* y, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = __fadd_rn(__fmul_rn(alpha, x[i]), y[i]);
}

__global__ void gc_half_kernel(const __half* x, __half* y, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = __float2half_rn(__fadd_rn(__fmul_rn(__half2float(x[i]), 3.0f), 1.0f));
}

__global__ void gc_record_i64(int64_t* out, int64_t value) { out[0] = value; }
__global__ void gc_record_i32(int32_t* out, int32_t value) { out[0] = value; }

void vector_add(const kjit::TensorView a, const kjit::TensorView b, kjit::TensorView c, cudaStream_t stream) {
  const int64_t n = a.numel();
  if (n == 0) return;
  gc_add_kernel<<<gc_blocks(n), 256, 0, stream>>>(a.data<float>(), b.data<float>(), c.data<float>(), n);
}

void vector_add_ret(const kjit::TensorView a, const kjit::TensorView b, kjit::TensorView c, cudaStream_t stream) {
  const int64_t n = a.numel();
  if (n == 0) return;
  gc_add_kernel<<<gc_blocks(n), 256, 0, stream>>>(a.data<float>(), b.data<float>(), c.data<float>(), n);
}

void axpy(const kjit::TensorView x, kjit::TensorView y, float alpha, kjit::Stream stream) {
  const int64_t n = x.numel();
  if (n == 0) return;
  gc_axpy_kernel<<<gc_blocks(n), 256, 0, static_cast<cudaStream_t>(stream)>>>(alpha, x.data<float>(),
                                                                                y.data<float>(), n);
}

void half_affine(const kjit::TensorView x, kjit::TensorView y, cudaStream_t stream) {
  const int64_t n = x.numel();
  if (n == 0) return;
  gc_half_kernel<<<gc_blocks(n), 256, 0, stream>>>(x.data<__half>(), y.data<__half>(), n);
}

// The stream this call was handed, written on that stream.
void stream_of_call(kjit::TensorView out, cudaStream_t stream) {
  gc_record_i64<<<1, 1, 0, stream>>>(out.data<int64_t>(), reinterpret_cast<int64_t>(stream));
}

// The device current inside this call.
void device_of_call(kjit::TensorView out, cudaStream_t stream) {
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) device = -2;
  gc_record_i32<<<1, 1, 0, stream>>>(out.data<int32_t>(), device);
}

// 4096 threads per block is over every GPU's limit: the launch fails.
void bad_launch(kjit::TensorView x, cudaStream_t stream) {
  gc_add_kernel<<<1, 4096, 0, stream>>>(x.data<float>(), x.data<float>(), x.data<float>(), x.numel());
}

void throws(kjit::TensorView x, cudaStream_t stream) {
  (void)x;
  (void)stream;
  throw std::invalid_argument("throws: planted by gpu_check");
}

// A template entry point: nvcc instantiates twice<float> and twice<double> for the stub.
template <typename T> __global__ void gc_twice_kernel(const T* x, T* y, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = x[i] + x[i];
}
template <typename T> void twice(const kjit::TensorView x, kjit::TensorView y, cudaStream_t stream) {
  const int64_t n = x.numel();
  if (n > 0) gc_twice_kernel<T><<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(x.data<T>(), y.data<T>(), n);
}
"""

CHECKED_FUNCTIONS = {
    "vector_add": "a: float32[n], b: float32[n], c: float32[n] out, stream: stream",
    "vector_add_ret": "a: float32[n], b: float32[n], c: float32[n] return, stream: stream",
    "axpy": "x: float32[n], y: float32[n] out, alpha: float32, stream: stream",
    "half_affine": "x: float16[n], y: float16[n] out, stream: stream",
    "stream_of_call": "out: int64[1] out, stream: stream",
    "device_of_call": "out: int32[1] out, stream: stream",
    "bad_launch": "x: float32[n] out, stream: stream",
    "throws": "x: float32[n] out, stream: stream",
    "twice": "<T: float32|float64> x: T[n], y: T[n] return, stream: stream",
}


def have_nvcc() -> bool:
    return shutil.which("nvcc") is not None or os.path.exists("/usr/local/cuda/bin/nvcc") or any(
        os.path.exists(os.path.join(os.environ.get(v, ""), "bin", "nvcc")) for v in ("CUDA_HOME", "CUDA_PATH")
        if os.environ.get(v))


def load_checked(dry: bool, jax: bool, name: str = "gpu_check_kernels"):
    import kjit
    kwargs = dict(cuda_sources=CHECKED_SRC, functions=CHECKED_FUNCTIONS, jax=jax)
    if dry:
        kwargs["cuda_arch"] = "sm_90"  # no device to ask; the GPU run lets kjit read the device's
    return kjit.load_inline(name + ("_jax" if jax else ""), **kwargs)


def guarded(torch, n: int, dtype, device: str, byte: int, pad: int = 67):
    """A poisoned buffer with `pad` elements either side of an n-element output."""
    buf = torch.empty(n + 2 * pad, dtype=dtype, device=device)
    poison_fill(torch, buf, byte)
    return buf, buf[pad:pad + n], pad


def guards_intact(torch, buf, pad: int, n: int, byte: int) -> Optional[str]:
    bb = raw_bytes(torch, buf)
    for lo, hi in ((0, pad), (pad + n, pad + n + pad)):
        bad = (bb[lo:hi] != byte).any(dim=1)
        if bool(bad.any()):
            return f"wrote outside the output: element {lo + int(bad.nonzero()[0, 0]) - pad} relative to its start"
    return None


def section_checked(sec: Section) -> None:
    sec.init_torch_cuda()
    torch = sec.torch
    import numpy as np
    state = {}

    def build():
        if sec.dry and not have_nvcc():
            raise Skip("no CUDA toolkit (nvcc) here")
        t0 = time.perf_counter()
        mod = load_checked(sec.dry, jax=False)
        took = time.perf_counter() - t0
        state["mod"] = mod
        bad = {fn: d for fn, d in mod.devices.items() if d != "cuda"}
        if bad:
            fail(f"functions not @cuda: {bad}")
        return f"load_inline {took:.1f} s ({'hit' if mod.cache_hit else 'built'}), {len(mod.functions)} functions"

    sec.check("build (nvcc)", build, gpu=False, min_s=1)
    mod = state.get("mod")
    if mod is None:
        return

    def cpu_rejected():
        a = torch.ones(4)
        try:
            mod.vector_add(a, a, torch.empty(4))
        except ValueError as err:
            if "device must be cuda, got cpu" not in str(err):
                fail(f"wrong message: {err}")
            return "ValueError: " + str(err)
        fail("a CPU tensor was accepted by a @cuda function")

    sec.check("CPU tensor rejected", cpu_rejected, gpu=False)
    if not sec.gpu:
        for c in ("current stream", "side stream", "returned output on the device",
                  "template entry point (T: float32|float64)", "device guard", "kjit::Stream + scalar", "float16", "launch error", "kernel exception", "strided rejected",
                  "kjit.torch op"):
            sec.check(c, lambda: None)
        return

    gen = torch.Generator().manual_seed(2901)
    sizes = [1, 255, 256, 257, 4099] if sec.small else [1, 255, 256, 257, 100003, (1 << 22) + 5]

    def add_case(n: int, byte: int) -> Optional[str]:
        a_h = make_values(torch, (n,), "float32", gen)
        b_h = make_values(torch, (n,), "float32", gen)
        a, b = a_h.cuda(), b_h.cuda()
        buf, c, pad = guarded(torch, n, torch.float32, "cuda", byte)
        mod.vector_add(a, b, c)
        torch.cuda.synchronize()
        ref = torch.from_numpy(a_h.numpy() + b_h.numpy())
        return (mismatch(torch, c, ref, (a_h, b_h)) or guards_intact(torch, buf, pad, n, byte) or
                mismatch(torch, a, a_h) or mismatch(torch, b, b_h))

    def current_stream():
        if torch.cuda.current_stream().cuda_stream != 0:
            fail("torch's current stream is not the default one at the start")
        for n in sizes:
            for byte in (0xFF, 0xA5):
                err = add_case(n, byte)
                if err:
                    fail(f"vector_add n={n} (poison 0x{byte:02X}): {err}")
        out = torch.full((1,), -7, dtype=torch.int64, device="cuda")
        mod.stream_of_call(out)
        torch.cuda.synchronize()
        if int(out.item()) != 0:
            fail(f"the kernel got stream 0x{int(out.item()):x}, torch's current stream is the default (0)")
        return f"sizes {sizes}, two poisons each, guards intact; stream 0 reached the kernel"

    sec.check("current stream", current_stream)

    def side_stream():
        s = torch.cuda.Stream()
        n = 1 << 20
        a_h, b_h = make_values(torch, (n,), "float32", gen), make_values(torch, (n,), "float32", gen)
        src, b = a_h.cuda(), b_h.cuda()
        a = torch.full((n,), float("nan"), device="cuda")
        c = torch.full((n,), float("nan"), device="cuda")
        rec = torch.full((1,), -7, dtype=torch.int64, device="cuda")
        torch.cuda.synchronize()
        with torch.cuda.stream(s):
            if hasattr(torch.cuda, "_sleep"):
                torch.cuda._sleep(20_000_000)  # keeps s busy: a kernel on another stream would read NaN
            a.copy_(src)
            mod.vector_add(a, b, c)
            mod.stream_of_call(rec)
        s.synchronize()
        torch.cuda.synchronize()
        if int(rec.item()) != s.cuda_stream:
            fail(f"the kernel got stream 0x{int(rec.item()):x}, the side stream is 0x{s.cuda_stream:x}")
        err = mismatch(torch, c, torch.from_numpy(a_h.numpy() + b_h.numpy()), (a_h, b_h))
        if err:
            fail(f"vector_add on the side stream: {err}")
        return f"stream 0x{s.cuda_stream:x} reached the kernel; ordered after the stream's copy; n={n} exact"

    sec.check("side stream", side_stream)

    def returned():
        for n in (1, 257, 100003):
            a_h, b_h = make_values(torch, (n,), "float32", gen), make_values(torch, (n,), "float32", gen)
            poison_allocator(torch, 4 * n)
            c = mod.vector_add_ret(a_h.cuda(), b_h.cuda())
            torch.cuda.synchronize()
            if not isinstance(c, torch.Tensor) or c.device.type != "cuda" or c.device.index != 0:
                fail(f"the returned output is {type(c).__name__} on {getattr(c, 'device', '?')}, expected cuda:0")
            err = mismatch(torch, c, torch.from_numpy(a_h.numpy() + b_h.numpy()), (a_h, b_h))
            if err:
                fail(f"vector_add_ret n={n}: {err}")
        return "torch tensors on cuda:0, every element right (n = 1, 257, 100003)"

    sec.check("returned output on the device", returned)

    def template_entry():
        for dtype in ("float32", "float64"):
            x_h = make_values(torch, (1003,), dtype, gen)
            y = mod.twice(x_h.cuda())
            torch.cuda.synchronize()
            err = mismatch(torch, y, x_h + x_h, (x_h,))
            if err:
                fail(f"twice<{dtype}>: {err}")
        return "twice<float> and twice<double> (a template in cuda_sources), every element right"

    sec.check("template entry point (T: float32|float64)", template_entry)

    def device_guard():
        count = torch.cuda.device_count()
        inside = torch.full((1,), -7, dtype=torch.int32, device="cuda:0")
        if count < 2:
            torch.cuda.set_device(0)
            mod.device_of_call(inside)
            torch.cuda.synchronize()
            if int(inside.item()) != 0 or torch.cuda.current_device() != 0:
                fail(f"device {int(inside.item())} inside the call, {torch.cuda.current_device()} after; expected 0")
            return "one GPU: no switch needed; device 0 inside the call and after (a switch needs two GPUs)"
        torch.cuda.set_device(1)
        try:
            mod.device_of_call(inside)
            torch.cuda.synchronize(0)
            after = torch.cuda.current_device()
        finally:
            torch.cuda.set_device(0)
        if int(inside.item()) != 0 or after != 1:
            fail(f"current device 1, tensors on 0: device {int(inside.item())} inside the call (expected 0), "
                 f"{after} after (expected 1)")
        return f"{count} GPUs: switched to 0 for the call, 1 restored after"

    sec.check("device guard", device_guard)

    def stream_scalar():
        n = 100003
        x_h, y_h = make_values(torch, (n,), "float32", gen), make_values(torch, (n,), "float32", gen)
        y = y_h.cuda()
        mod.axpy(x_h.cuda(), y, 2.5)
        torch.cuda.synchronize()
        ref = torch.from_numpy(np.float32(2.5) * x_h.numpy() + y_h.numpy())
        err = mismatch(torch, y, ref, (x_h, y_h))
        if err:
            fail(f"axpy: {err}")
        return f"y = 2.5 x + y in place, n={n}, bit for bit"

    sec.check("kjit::Stream + scalar", stream_scalar)

    def half():
        n = 4099
        x_h = make_values(torch, (n,), "float16", gen)
        buf, y, pad = guarded(torch, n, torch.float16, "cuda", 0xFF)
        mod.half_affine(x_h.cuda(), y)
        torch.cuda.synchronize()
        ref = torch.from_numpy((x_h.numpy().astype(np.float32) * np.float32(3) + np.float32(1)).astype(np.float16))
        err = mismatch(torch, y, ref, (x_h,)) or guards_intact(torch, buf, pad, n, 0xFF)
        if err:
            fail(f"half_affine: {err}")
        return f"__half pointers, n={n}, bit for bit"

    sec.check("float16", half)

    def follow_up_call_works() -> Optional[str]:
        return add_case(257, 0xFF)

    def launch_error():
        x = torch.zeros(8, device="cuda")
        try:
            mod.bad_launch(x)
            torch.cuda.synchronize()
        except RuntimeError as err:
            text = str(err)
            if "cudaErrorInvalidConfiguration" not in text or "bad_launch" not in text:
                fail(f"wrong error: {text}")
        else:
            fail("a launch with 4096 threads per block raised nothing")
        err = follow_up_call_works()
        if err:
            fail(f"the call after the failed launch: {err}")
        return "RuntimeError naming cudaErrorInvalidConfiguration; the next call is right"

    sec.check("launch error", launch_error, planted=True)

    def kernel_exception():
        x = torch.zeros(8, device="cuda")
        try:
            mod.throws(x)
        except ValueError as err:
            if "throws: planted by gpu_check" not in str(err):
                fail(f"wrong message: {err}")
        else:
            fail("an entry that throws std::invalid_argument raised nothing")
        if torch.cuda.current_device() != 0:
            fail(f"current device {torch.cuda.current_device()} after the exception")
        err = follow_up_call_works()
        if err:
            fail(f"the call after the exception: {err}")
        return "ValueError with the message; the next call is right"

    sec.check("kernel exception", kernel_exception, planted=True)

    def strided_rejected():
        x = torch.zeros(64, device="cuda")
        try:
            mod.vector_add(x[::2], x[::2], torch.zeros(64, device="cuda")[::2])
        except ValueError as err:
            return "ValueError: " + str(err)
        fail("a non-contiguous tensor reached a compact float32[n] parameter")

    sec.check("strided rejected", strided_rejected, planted=True)

    def torch_op():
        ops = mod.torch
        n = 4099
        a_h, b_h = make_values(torch, (n,), "float32", gen), make_values(torch, (n,), "float32", gen)
        poison_allocator(torch, 4 * n)
        c = ops.vector_add_ret(a_h.cuda(), b_h.cuda())
        torch.cuda.synchronize()
        if c.device.type != "cuda":
            fail(f"torch.ops result on {c.device}")
        err = mismatch(torch, c, torch.from_numpy(a_h.numpy() + b_h.numpy()), (a_h, b_h))
        if err:
            fail(f"torch.ops.{mod.name}.vector_add_ret: {err}")
        return "torch.ops eager call on CUDA tensors (CUDA dispatch key), exact"

    sec.check("kjit.torch op", torch_op)


# ---- elementwise --------------------------------------------------------------------

EW_CODES = {
    "add": "template <typename T> T add(T a, T b) { return a + b; }",
    "mul": "template <typename T> T mul(T a, T b) { return a * b; }",
    "madd": "template <typename T> T madd(T a, T b, T c) { return a * b + c; }",
    "lt": "template <typename T> bool lt(T a, T b) { return a < b; }",
    "agt": "template <typename T> auto agt(T a, T b) { return b < a; }",  # bool: the type the code returns
    "axpy": "template <typename T> T axpy(T x, T y, T alpha) { return alpha * x + y; }",
    "divmod": "template <typename T> void dm(T a, T b, T& q, T& r) { q = a / b; r = a - q * b; }",
}


class EwCase:
    """One call: inputs made for size n on a device, an optional out= form, extras."""

    def __init__(self, label: str, make: Callable, out: str = "new", extras: Optional[dict] = None,
                 shrink: bool = True, n: int = 1003):
        self.label, self.make, self.out, self.extras, self.shrink, self.n = label, make, out, extras or {}, shrink, n

    def with_extras(self, extras: dict) -> "EwCase":
        return EwCase(self.label, self.make, self.out, extras, self.shrink, self.n)


def ew_layouts(torch, dtype: str, nin: int, small: bool) -> List[EwCase]:
    """The layouts of the CPU tests, for inputs of one dtype."""
    def v(shape, gen):
        return make_values(torch, shape, dtype, gen)

    def contiguous(n, gen):
        return [v((n,), gen) for _ in range(nin)]

    def misaligned(n, gen):
        return [v((n + 1,), gen)[1:] for _ in range(nin)]

    def strided(n, gen):
        return [v((2 * n,), gen)[::2] for _ in range(nin)]

    def broadcast(n, gen):
        r = max(1, int(math.sqrt(n)))
        c = max(1, n // r)
        shapes = [(r, 1), (1, c), (r, c)]
        return [v(shapes[k % 3], gen) for k in range(nin)]

    def transposed(n, gen):
        r = max(1, int(math.sqrt(n)))
        c = max(1, n // r)
        return [v((c, r), gen).t() for _ in range(nin)]

    def zero_d(n, gen):
        return [v((), gen) for _ in range(nin)]

    def empty(n, gen):
        return [v((0,), gen) for _ in range(nin)]

    def empty_2d(n, gen):
        return [v((4, 0), gen) for _ in range(nin)]

    def scalar(n, gen):
        s = True if dtype == "bool" else (3 if dtype[0] in "iu" else (1.5 - 2j if dtype.startswith("complex") else 1.5))
        return [v((n,), gen)] + [s] * (nin - 1)

    sizes = [1, 7, 1003] if small else [1, 7, 1003, 262147]
    cases = [EwCase(f"contiguous n={n}", contiguous, shrink=n > 1, n=n) for n in sizes]
    cases += [EwCase("misaligned n=1003", lambda n, gen: misaligned(n, gen)),
              EwCase("strided x[::2] n=1003", lambda n, gen: strided(n, gen)),
              EwCase("broadcast (r,1)+(1,c)", lambda n, gen: broadcast(n, gen)),
              EwCase("0-d", lambda n, gen: zero_d(n, gen), shrink=False),
              EwCase("empty (0,)", lambda n, gen: empty(n, gen), shrink=False),
              EwCase("out= contiguous", lambda n, gen: contiguous(n, gen), out="guard"),
              EwCase("out= misaligned", lambda n, gen: misaligned(n, gen), out="guard-misaligned")]
    if not small:
        cases += [EwCase("transposed", lambda n, gen: transposed(n, gen)),
                  EwCase("empty (4,0)", lambda n, gen: empty_2d(n, gen), shrink=False),
                  EwCase("Python scalar", lambda n, gen: scalar(n, gen)),
                  EwCase("out= strided", lambda n, gen: contiguous(n, gen), out="guard-strided"),
                  EwCase("out= broadcast shape", lambda n, gen: broadcast(n, gen), out="guard"),
                  EwCase("in place (out=input 0)", lambda n, gen: contiguous(n, gen), out="inplace")]
    return cases


SHRINK_SIZES = [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 1023, 1024,
                1025, 4095, 4096, 4097]


class EwRunner:
    """Runs elementwise cases on `device` against kjit's CPU path (the reference)
    and, where torch has the operation, torch on the same device."""

    def __init__(self, sec: Section, device: str):
        import torch
        self.sec, self.torch, self.device = sec, torch, device
        self.gen = torch.Generator().manual_seed(2902)
        self.cases_run = 0
        self.shrinks_left = 12  # a broken backend fails every case: shrink the first few only

    def torch_oracle(self, op: str, inputs, extras):
        torch = self.torch
        if op == "add":
            return inputs[0] + inputs[1] if len(inputs) == 2 else None
        if op == "mul" and not any(isinstance(x, torch.Tensor) and x.is_complex() for x in inputs):
            return inputs[0] * inputs[1]
        if op == "lt":
            return inputs[0] < inputs[1]
        if op == "agt":
            return inputs[0] > inputs[1]
        return None

    def tolerance(self, op: str, dtype: str, inputs_cpu, extras):
        """A tolerance where contraction into FMAs may change the rounding (float madd,
        axpy, complex mul); None where results must be bit for bit."""
        torch = self.torch
        if dtype not in UNIT_ROUNDOFF:
            return None
        wide = torch.complex128 if dtype.startswith("complex") else torch.float64

        def w(x):
            return x.to(wide) if isinstance(x, torch.Tensor) else torch.tensor(x, dtype=wide)

        if op == "madd":
            a, b, c = inputs_cpu
            return fused_tolerance(torch, dtype, lambda: w(a) * w(b) + 0 * w(c), lambda: w(c) + 0 * w(a) * w(b),
                                   lambda: w(a) * w(b) + w(c))
        if op == "axpy":
            x, y = inputs_cpu
            alpha = extras["alpha"]
            return fused_tolerance(torch, dtype, lambda: w(alpha) * w(x) + 0 * w(y), lambda: w(y) + 0 * w(x),
                                   lambda: w(alpha) * w(x) + w(y))
        if op == "mul" and dtype.startswith("complex"):
            a, b = inputs_cpu
            return fused_tolerance(torch, dtype, lambda: w(a).abs() * w(b).abs() * 2, lambda: 0 * w(a) * w(b),
                                   lambda: w(a) * w(b))
        return None

    def run(self, f, op: str, dtype: str, case: EwCase, n: int) -> Optional[str]:
        """None when right, else what went wrong (one call, fresh inputs)."""
        torch, dev = self.torch, self.device
        self.cases_run += 1
        inputs_cpu = case.make(n, self.gen)
        # .to keeps neither x[::2] nor an offset view's layout: remake them on the device
        inputs = [self._same_layout(x) if isinstance(x, torch.Tensor) else x for x in inputs_cpu]
        before = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        values = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs_cpu]  # for messages, tolerances
        ref = f(*inputs_cpu, **case.extras)
        refs = list(ref) if isinstance(ref, tuple) else [ref]
        tol = self.tolerance(op, dtype, values, case.extras)
        problems = []
        if case.out == "new":
            if dev == "cuda":
                poison_allocator(torch, max(r.numel() * r.element_size() for r in refs))
            got = f(*inputs, **case.extras)
            gots = list(got) if isinstance(got, tuple) else [got]
            self._sync()
            for k, (g, r) in enumerate(zip(gots, refs)):
                if not isinstance(g, torch.Tensor):
                    problems.append(f"output #{k} is {type(g).__name__}, expected a torch tensor")
                    continue
                if g.device.type != dev:
                    problems.append(f"output #{k} on {g.device}, expected {dev}")
                err = mismatch(torch, g, r, values, tol)
                if err:
                    problems.append(f"output #{k}: {err}" if len(refs) > 1 else err)
            oracle = self.torch_oracle(op, inputs, case.extras)
            if oracle is not None and not problems:
                err = mismatch(torch, gots[0], oracle.cpu(), values)
                if err:
                    problems.append(f"vs torch on {dev}: {err}")
        elif case.out == "inplace":
            target = inputs[0]
            if refs[0].dtype != target.dtype or tuple(refs[0].shape) != tuple(target.shape):
                return None  # not an in-place case for these dtypes
            r = f(*inputs, out=target, **case.extras)
            self._sync()
            err = mismatch(torch, target, refs[0], values, tol)
            if err:
                problems.append(err)
            if isinstance(r, torch.Tensor) and r.data_ptr() != target.data_ptr():
                problems.append("the result is not the out= tensor")
            before = before[1:]
            inputs = inputs[1:]
        else:
            for byte in (0xFF, 0xA5):
                outs, bufs = [], []
                for r in refs:
                    shape = tuple(r.shape)
                    numel = r.numel()
                    if case.out == "guard-strided":
                        buf, o, pad = guarded(torch, 2 * numel, r.dtype, dev, byte)
                        o = o[::2].reshape(shape) if numel else o[:0].reshape(shape)
                        bufs.append((buf, pad, 2 * numel))
                    else:
                        extra = 1 if case.out == "guard-misaligned" else 0
                        buf, o, pad = guarded(torch, numel + extra, r.dtype, dev, byte)
                        o = o[extra:].reshape(shape)
                        bufs.append((buf, pad + extra, numel))
                    outs.append(o)
                res = f(*inputs, out=tuple(outs) if len(outs) > 1 else outs[0], **case.extras)
                self._sync()
                res = list(res) if isinstance(res, tuple) else [res]
                for k, (o, r) in enumerate(zip(outs, refs)):
                    err = mismatch(torch, o, r, values, tol)
                    if err:
                        problems.append(f"out #{k} (poison 0x{byte:02X}): {err}")
                    if k < len(res) and isinstance(res[k], torch.Tensor) and res[k].data_ptr() != o.data_ptr():
                        problems.append(f"result #{k} is not the out= tensor")
                for k, (buf, pad, span) in enumerate(bufs):
                    if case.out == "guard-strided":
                        gaps = buf[pad + 1:pad + span:2]
                        bad = (raw_bytes(torch, gaps) != byte).any(dim=1)
                        if bool(bad.any()):
                            problems.append(f"out #{k}: wrote into the gap after element {int(bad.nonzero()[0, 0])}")
                    err = guards_intact(torch, buf, pad, span, byte)
                    if err:
                        problems.append(f"out #{k}: {err}")
                if problems:
                    break
        for k, (x, b) in enumerate(zip(inputs, before)):
            if isinstance(x, torch.Tensor):
                err = mismatch(torch, x, b.cpu())
                if err:
                    problems.append(f"input #{k} was changed: {err}")
        return "; ".join(problems) or None

    def _same_layout(self, xc):
        """xc on the runner's device with xc's strides and storage offset."""
        torch = self.torch
        if self.device == "cpu":
            return xc
        if xc.dim() == 0 or xc.numel() == 0 or (xc.is_contiguous() and xc.storage_offset() == 0):
            return xc.to(self.device)
        base = torch.empty(xc.untyped_storage().nbytes() // xc.element_size(), dtype=xc.dtype, device=self.device)
        view = base.as_strided(tuple(xc.shape), tuple(xc.stride()), xc.storage_offset())
        view.copy_(xc)
        return view

    def _sync(self):
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    def group(self, f, op: str, dtype: str, cases: List[EwCase]) -> Tuple[int, List[str]]:
        """Runs every case; returns (cases run, failures with their minimal size)."""
        failures = []
        count = 0
        for case in cases:
            count += 1
            raised = False
            try:
                err = self.run(f, op, dtype, case, case.n)
            except Exception as e:  # noqa: BLE001 (a raising case is a failure, the others still run)
                err = f"{type(e).__name__}: {str(e).strip()[:500]}"
                raised = True
            if err is None:
                continue
            smallest = ""
            if not raised and self.shrinks_left > 0:
                self.shrinks_left -= 1
                smallest = self.shrink(f, op, dtype, case, case.n)
            failures.append(f"{op} {dtype} {case.label}: {err}{smallest}")
        return count, failures

    def shrink(self, f, op, dtype, case: EwCase, n: int) -> str:
        """The smallest size at which the case still fails (fresh inputs each)."""
        if not case.shrink:
            return ""
        for m in SHRINK_SIZES:
            if m >= n:
                break
            try:
                err = self.run(f, op, dtype, case, m)
            except Exception as e:  # noqa: BLE001
                err = f"{type(e).__name__}: {e}"
            if err:
                return f" [minimal failing size n={m}: {err}]"
        return " [fails only at the full size]"


def ew_groups(torch, small: bool, trim: bool = False):
    """(row label, op, [(dtype, cases)]) of the elementwise matrix; `trim` (the dry
    run) keeps every code path with fewer dtype sets, each a CPU kernel to compile."""
    dtypes = ["float32", "float16", "int8", "bool", "complex64"] if small else DTYPES
    groups = [("add: dtypes x layouts", "add", [(d, ew_layouts(torch, d, 2, small)) for d in dtypes])]
    groups.append(("madd a*b+c (fused)", "madd", [(d, ew_layouts(torch, d, 3, True)) for d in
                                                  (["float32"] if small else
                                                   ["float32", "float64", "float16", "bfloat16", "complex64"])]))
    if small:
        return groups
    groups.append(("mul", "mul", [(d, ew_layouts(torch, d, 2, True)) for d in
                                  ["float32", "float16", "bfloat16", "int8", "int32", "bool", "complex64"]]))
    groups.append(("lt (bool output)", "lt", [(d, ew_layouts(torch, d, 2, True)) for d in
                                              ["float32", "int32", "float16", "uint8"]]))
    groups.append(("auto agt (output type from the code)", "agt", [(d, ew_layouts(torch, d, 2, True)) for d in
                                                                   ["float32", "int8"]]))
    axpy_cases = {}
    for d in ["float32", "float16", "int32"]:
        alpha = 3 if d == "int32" else 2.5
        axpy_cases[d] = [c.with_extras({"alpha": alpha}) for c in ew_layouts(torch, d, 2, True)]
    groups.append(("axpy (extra scalar alpha)", "axpy", list(axpy_cases.items())))

    def nonzero_divisor(dtype):
        def make(n, gen):
            a = make_values(torch, (n,), dtype, gen)
            b = make_values(torch, (n,), dtype, gen)
            b = torch.where(b == 0, torch.ones_like(b), b)
            return [a, b]
        return make

    groups.append(("divmod (2 outputs)", "divmod", [(d, [EwCase("contiguous", nonzero_divisor(d)),
                                                          EwCase("out= pair", nonzero_divisor(d), out="guard")])
                                                     for d in ["int32", "int64", "int8"]]))

    def mixed(da, db, strided=False):
        def make(n, gen):
            a = make_values(torch, (2 * n if strided else n,), da, gen)
            b = make_values(torch, (n,), db, gen)
            return [a[::2] if strided else a, b]
        return make

    mixed_cases = [EwCase(f"{a}+{b}{' strided' if s else ''}", mixed(a, b, s))
                   for a, b in [("int32", "float32"), ("float16", "float32"), ("bool", "int8"), ("int8", "uint8"),
                                ("bfloat16", "float16"), ("float32", "complex64")] for s in (False, True)]
    mixed_cases.append(EwCase("float32 result into float64 out=", mixed("float32", "float32"), out="cast-out"))
    groups.append(("mixed dtypes (dynamic casting)", "add", [("mixed", mixed_cases)]))
    if trim:
        trimmed = []
        for label, op, per in groups:
            if label.startswith("add"):
                per = [(d, c) for d, c in per if d in ("float32", "bfloat16", "int8", "bool", "complex64")]
            elif label.startswith("mixed"):
                per = [(d, c[:4] + c[-1:]) for d, c in per]
            else:
                per = per[:2]
            trimmed.append((label, op, per))
        groups = trimmed
    return groups


def run_groups(sec: Section, runner: "EwRunner", fns: dict, small: bool = False, groups=None):
    """Every case of the groups through runner: (cases run, failures)."""
    count, failures = 0, []
    for label, op, per_dtype in groups if groups is not None else ew_groups(runner.torch, small):
        for dtype, cases in per_dtype:
            for case in cases:
                if case.out == "cast-out":
                    c, fl = cast_out_case(runner, fns["add"])
                else:
                    c, fl = runner.group(fns[op], op, dtype, [case])
                count += c
                failures += fl
            if sec.remaining() < 5:
                failures.append(f"{label}: out of time after {dtype}")
                return count, failures
    return count, failures


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]
_KEEP_ALIVE = []


class FakeDLPack:
    """A 4-element float32 DLPack tensor claiming a device (tests/python/test_elementwise.py's):
    takes kjit's CUDA path as far as it goes without a driver; its data is never read."""

    def __init__(self, device_type=1):
        self._buf = (ctypes.c_double * 8)()
        self._shape = (ctypes.c_int64 * 1)(4)
        self._deleter = _DELETER(lambda p: None)
        self._device = (device_type, 0)
        self._mt = _DLManagedTensor()
        self._mt.dl_tensor = _DLTensor(ctypes.addressof(self._buf), _DLDevice(device_type, 0), 1,
                                       _DLDataType(2, 32, 1), self._shape, None, 0)
        self._mt.deleter = self._deleter
        _KEEP_ALIVE.append(self)

    def __dlpack_device__(self):
        return self._device

    def __dlpack__(self, stream=None, **kwargs):
        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(self._mt), b"dltensor", None)


def reaches_the_launch(call) -> str:
    """A CUDA call of fake tensors on a machine without a driver: it must get as far
    as the launch and fail there, saying so."""
    try:
        call()
    except RuntimeError as err:
        if "CUDA driver not available" not in str(err):
            fail(f"unexpected error: {err}")
        return "reaches the launch, then: " + clip(str(err), 100)
    fail("a CUDA call without a driver raised nothing")


def section_elementwise(sec: Section) -> None:
    sec.init_torch_cuda()
    torch = sec.torch
    import kjit
    fns = {}

    def make_functions():
        for op, code in EW_CODES.items():
            fns[op] = kjit.elementwise(code, num_outputs=2 if op == "divmod" else 1)
        return f"{len(fns)} functions"

    sec.check("kjit.elementwise functions", make_functions, gpu=False, min_s=1)
    if not fns:
        return
    device = "cuda" if sec.gpu else "cpu"

    if sec.dry:
        def no_driver():
            a, b, out = FakeDLPack(device_type=2), FakeDLPack(device_type=2), FakeDLPack(device_type=2)
            return reaches_the_launch(lambda: fns["add"](a, b, out=out))

        sec.check("CUDA path without a driver", no_driver, gpu=False)

        def harness():
            runner = EwRunner(sec, "cpu")
            count, failures = run_groups(sec, runner, fns, groups=ew_groups(torch, small=False, trim=True))
            if failures:
                fail(f"{len(failures)} of {count} CPU cases: {failures[0]}\n" + "\n".join(failures))
            return f"{count} cases on CPU: kjit's CPU path vs torch, poison, guards (the GPU run's harness)"

        sec.check("harness self-test on CPU", harness, gpu=False, min_s=5)

    runner = EwRunner(sec, device) if sec.gpu else None
    for label, op, per_dtype in ew_groups(torch, sec.small):
        def group(label=label, op=op, per_dtype=per_dtype):
            count, failures = run_groups(sec, runner, fns, groups=[(label, op, per_dtype)])
            if failures:
                return "FAIL", f"{len(failures)} of {count} cases wrong; first: {failures[0]}", "\n".join(failures)
            return "PASS", (f"{count} cases, {len(per_dtype)} dtype set(s), every element vs kjit's CPU path "
                            f"(and torch on the GPU where it has the op)")

        sec.check(label, group)

    def large():
        free, _ = torch.cuda.mem_get_info()
        n = (1 << 31) + (1 << 20) + 3
        if free < 5 * n + (2 << 30):
            raise Skip(f"{free / 2**30:.0f} GiB free: needs {(5 * n + (2 << 30)) / 2**30:.0f} GiB")
        if sec.remaining() < 25:
            raise Skip(f"{sec.remaining():.0f} s left in the section")
        problems = big_add_case(torch, fns["add"], "cuda", n)
        if problems:
            fail("; ".join(problems))
        return f"n = 2^31+2^20+3 int8: out=, new output, broadcast operand; all equal to torch ({free / 2**30:.0f} " \
               f"GiB free)"

    def offsets_split():
        free, _ = torch.cuda.mem_get_info()
        rows, cols = 40000, 60001  # 2.4 GB: element offsets past 2^31 with only 400k elements
        if free < 3 * rows * cols + (1 << 30):
            raise Skip(f"{free / 2**30:.0f} GiB free")
        problems = strided_offsets_case(torch, fns["add"], "cuda", rows, cols, 6000)
        if problems:
            fail("; ".join(problems))
        return f"strided views of a {rows}x{cols} int8 tensor (offsets past 2^31): new output and out= exact"

    if not sec.small:
        sec.check("more than 2^31 elements", large, min_s=25)
        sec.check("32-bit offset split (strided, 2.4 GB base)", offsets_split, min_s=10)


def _sync(torch, device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def big_add_case(torch, add, device: str, n: int) -> List[str]:
    """int8 add of n elements (the GPU run: n > 2^31, the 32-bit index split): out=
    (poisoned), a new output, a broadcast operand; each against torch on the device."""
    g = torch.Generator(device=device).manual_seed(2903)
    a = torch.randint(-128, 128, (n,), dtype=torch.int8, device=device, generator=g)
    b = torch.randint(-128, 128, (n,), dtype=torch.int8, device=device, generator=g)
    out = torch.empty_like(a)
    out.view(torch.uint8).fill_(0xA5)
    ref = a + b
    add(a, b, out=out)
    _sync(torch, device)
    problems: List[str] = []

    def compare(got, want, what):
        if torch.equal(got, want):
            return
        bad = got != want
        first = int(torch.argmax(bad.to(torch.uint8)))
        problems.append(f"{what}: {int(bad.sum())} elements differ, first at {first} (got {int(got[first])}, "
                        f"expected {int(want[first])})")

    compare(out, ref, f"int8 add out=, n={n}")
    del out
    if device == "cuda":
        torch.cuda.empty_cache()
    got = add(a, b)
    _sync(torch, device)
    compare(got, ref, f"int8 add, new output, n={n}")
    del got
    b1 = b[:1].clone()
    got = add(a, b1)  # a broadcast (stride-0) operand: the strided variant
    _sync(torch, device)
    compare(got, a + b1, f"int8 add of a broadcast operand, n={n}")
    del got, a, b, ref
    if device == "cuda":
        torch.cuda.empty_cache()
    return problems


def strided_offsets_case(torch, add, device: str, rows: int, cols: int, step: int) -> List[str]:
    """Column views (every `step`-th column) of a rows x cols int8 tensor: few elements,
    offsets as far as the whole tensor (past 2^31 in the GPU run). A new output, and
    out= into such a view of a poisoned tensor, which must keep the rest of it."""
    g = torch.Generator(device=device).manual_seed(2904)
    base = torch.randint(-128, 128, (rows, cols), dtype=torch.int8, device=device, generator=g)
    v, w = base[:, 5::step], base[:, 7::step]
    want = v + w
    got = add(v, w)
    _sync(torch, device)
    problems = []
    if not torch.equal(got, want):
        problems.append(f"new output: {int((got != want).sum())} of {got.numel()} differ")
    out_base = torch.empty((rows, cols), dtype=torch.int8, device=device)
    out_base.view(torch.uint8).fill_(0x5A)
    o = out_base[:, 3::step]
    add(v, w, out=o)
    _sync(torch, device)
    if not torch.equal(o, want):
        problems.append(f"out= strided view: {int((o != want).sum())} of {o.numel()} differ")
    o.view(torch.uint8).fill_(0x5A)
    if not bool((out_base.view(torch.uint8) == 0x5A).all()):
        problems.append("out= wrote outside its strided view")
    del base, out_base, got
    if device == "cuda":
        torch.cuda.empty_cache()
    return problems


def cast_out_case(runner: EwRunner, add) -> Tuple[int, List[str]]:
    """float32 + float32 into a float64 out= (cast on store), against kjit's CPU path."""
    torch = runner.torch
    failures = []
    for n in (1003, 262147):
        a_h = make_values(torch, (n,), "float32", runner.gen)
        b_h = make_values(torch, (n,), "float32", runner.gen)
        ref = torch.empty(n, dtype=torch.float64)
        add(a_h, b_h, out=ref)
        buf, o, pad = guarded(torch, n, torch.float64, runner.device, 0xFF)
        add(a_h.to(runner.device), b_h.to(runner.device), out=o)
        runner._sync()
        err = mismatch(torch, o, ref, (a_h, b_h)) or guards_intact(torch, buf, pad, n, 0xFF)
        if err:
            failures.append(f"add float32 into float64 out= n={n}: {err}")
    return 2, failures


# ---- JAX ------------------------------------------------------------------------------


def section_reduction(sec: Section) -> None:
    """kjit.reduction and kjit.arg_reduction on CUDA tensors against torch on the
    same data on the CPU (float64 sums for the float inputs), and one timing row."""
    sec.init_torch_cuda()
    torch = sec.torch
    import kjit
    fns = {}

    def make_functions():
        add = "template <typename T> T add(T a, T b) { return a + b; }"
        fns["sum"] = kjit.reduction(add, identity=0)
        fns["max"] = kjit.reduction("template <typename T> T mx(T a, T b) { return a > b ? a : b; }", identity=None,
                                    upcast_integers=False)
        fns["mean"] = kjit.reduction(add, identity=0, post_code="template <typename T> T mean(T s, int64_t n) "
                                     "{ return s / static_cast<T>(n); }", name="mean")
        fns["sqmean"] = kjit.reduction(add, identity=0, map_code="template <typename T> T sq(T x, T c) "
                                       "{ return (x - c) * (x - c); }", post_code="template <typename T> T "
                                       "mean(T s, int64_t n) { return s / static_cast<T>(n); }", name="sqmean")
        fns["argmax"] = kjit.arg_reduction("template <typename T> bool gt(T a, T b) { return a > b || (a != a && "
                                           "b == b); }")
        fns["var"] = kjit.reduction(
            "template <typename T> struct Welford { T mean, m2; int64_t n; };\n"
            "template <typename T> Welford<T> merge(Welford<T> a, Welford<T> b) {\n"
            "  if (a.n == 0) return b;\n  if (b.n == 0) return a;\n  const int64_t n = a.n + b.n;\n"
            "  const T d = b.mean - a.mean;\n"
            "  return {a.mean + d * T(b.n) / T(n), a.m2 + b.m2 + d * d * T(a.n) * T(b.n) / T(n), n};\n}\n",
            accumulator="Welford<T>", identity="Welford<T>{T(0), T(0), 0}",
            map_code="template <typename T> Welford<T> one(T x) { return {x, T(0), 1}; }",
            post_code="template <typename T> T variance(Welford<T> a, int64_t) { return a.m2 / T(a.n); }",
            name="welford_var")
        return f"{len(fns)} functions"

    sec.check("kjit.reduction functions", make_functions, gpu=False, min_s=1)
    if not fns:
        return

    if sec.dry:
        def no_driver():
            a, out = FakeDLPack(device_type=2), FakeDLPack(device_type=2)
            out._shape[0] = 1
            return reaches_the_launch(lambda: fns["sum"](a, axis=0, keepdims=True, out=out))

        sec.check("CUDA path without a driver", no_driver, gpu=False)

    def values(device):
        gen = torch.Generator().manual_seed(7)
        failures, count = [], 0

        def case(label, got, want, rtol):
            nonlocal count
            count += 1
            got = got.cpu()
            if got.dtype != want.dtype or got.shape != want.shape:
                failures.append(f"{label}: {got.dtype} {tuple(got.shape)} vs {want.dtype} {tuple(want.shape)}")
                return
            wide = torch.complex128 if got.is_complex() else torch.float64
            g, w = got.to(wide), want.to(wide)
            if not torch.allclose(g, w, rtol=rtol, atol=rtol):
                failures.append(f"{label}: max error {(g - w).abs().max().item():.3g}")

        for n in (1, 31, 1024, (1 << 20) + 3, 1 << 24):
            x = torch.rand(n, generator=gen)
            case(f"sum float32 n={n}", fns["sum"](x.to(device)), x.double().sum().float(), 1e-5)
            case(f"argmax float32 n={n}", fns["argmax"](x.to(device)), x.argmax(), 0)
        m = torch.rand(513, 1025, generator=gen)
        for axis in (0, 1):
            case(f"sum (513, 1025) axis={axis}", fns["sum"](m.to(device), axis=axis), m.double().sum(axis).float(), 1e-5)
            case(f"max of negatives (513, 1025) axis={axis}", fns["max"]((-m).to(device), axis=axis),
                 (-m).amax(axis), 0)
            case(f"mean (513, 1025).T axis={axis}", fns["mean"](m.to(device).T, axis=axis),
                 m.T.double().mean(axis).float(), 1e-5)
            case(f"argmax (513, 1025) axis={axis}", fns["argmax"](m.to(device), axis=axis), m.argmax(axis), 0)
        case("mean of (x - 0.25)^2, 0.25 a Python scalar", fns["sqmean"](m.to(device), 0.25, axis=1),
             ((m.double() - 0.25) ** 2).mean(1).float(), 1e-5)
        for axis in (0, 1):  # a user accumulator (Welford's mean and M2) through the partials
            case(f"Welford variance (513, 1025) float64 axis={axis}", fns["var"](m.double().to(device), axis=axis),
                 m.double().var(axis, correction=0), 1e-10)
        i8 = torch.randint(-128, 127, (100003,), dtype=torch.int8, generator=gen)
        case("sum int8 -> int64", fns["sum"](i8.to(device)), i8.sum(), 0)
        h = torch.rand(4099, generator=gen).half()
        case("sum float16 (float32 accumulator)", fns["sum"](h.to(device)), h.float().sum().half(), 2e-3)
        z = torch.randn(3001, dtype=torch.complex64, generator=gen)
        case("sum complex64", fns["sum"](z.to(device)), z.cdouble().sum().to(torch.complex64), 1e-5)
        out = torch.empty(1025, device=device)
        fns["sum"](m.to(device), axis=0, out=out)
        case("sum into out=", out, m.double().sum(0).float(), 1e-5)
        t = torch.tensor([1.0, 3.0, 3.0, float("nan"), float("nan")])
        case("argmax ties and NaN (NumPy's rule)", fns["argmax"](t.to(device)), torch.tensor(3), 0)
        if device == "cuda":
            torch.cuda.synchronize()
        if failures:
            fail(f"{len(failures)} of {count} cases: {failures[0]}\n" + "\n".join(failures))
        return f"{count} cases on {device} against torch on the CPU"

    if sec.dry:
        sec.check("harness self-test on CPU", lambda: values("cpu"), gpu=False, min_s=5)
    sec.check("values against torch", lambda: values("cuda"), min_s=10)

    def timing():
        x = torch.rand(1 << 24, device="cuda")
        fns["sum"](x)
        torch.sum(x)

        def best(fn):
            times = []
            for _ in range(5):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(20):
                    fn()
                torch.cuda.synchronize()
                times.append((time.perf_counter() - t0) / 20)
            return min(times)

        k, t = best(lambda: fns["sum"](x)), best(lambda: torch.sum(x))
        return "INFO", f"sum of 2^24 float32: kjit {k * 1e3:.3f} ms, torch.sum {t * 1e3:.3f} ms ({t / k:.2f}x)"

    sec.check("sum 2^24 float32 time", timing, min_s=5)


def section_jax(sec: Section) -> None:
    import numpy as np
    state = {}

    def imports():
        try:
            import jax
        except ImportError as err:
            if sec.dry:
                raise Skip(f"no jax here ({err})")
            raise
        jax.config.update("jax_enable_x64", True)  # int64 operands stay int64 (stream_of_call)
        import kjit.jax  # noqa: F401
        state["jax"] = jax
        try:
            gpus = jax.devices("gpu")
        except RuntimeError as err:
            gpus = []
            state["why"] = f"JAX has no GPU backend: {clip(str(err), 100)}"
        if gpus and not sec.dry:
            sec.gpu = True
            state["dev"] = gpus[0]
        return f"jax {jax.__version__}; GPU devices: {[str(d) for d in gpus] or 'none'}"

    sec.check("import jax, kjit.jax", imports, gpu=False, min_s=1)
    jax = state.get("jax")
    if jax is None:
        return
    if not sec.gpu:
        sec.no_gpu = "no GPU (dry run)" if sec.dry else state.get("why", "no GPU")

    def build():
        import kjit
        if sec.dry and not have_nvcc():
            raise Skip("no CUDA toolkit (nvcc) here")
        t0 = time.perf_counter()
        mod = load_checked(sec.dry, jax=True)
        targets = kjit.jax.register(mod, platform="cuda")
        state["mod"] = mod
        return f"nvcc with XLA handlers {time.perf_counter() - t0:.1f} s; {len(targets)} CUDA targets registered"

    sec.check("build + register for CUDA", build, gpu=False, min_s=1)
    mod = state.get("mod")
    if mod is None:
        return
    rng = np.random.default_rng(2905)

    def on_gpu(x):
        return jax.device_put(x, state["dev"])

    def jit_add():
        f = jax.jit(mod.jax.vector_add)
        for n in (1, 1000, (1 << 20) + 3):
            a = rng.uniform(-50, 50, n).astype(np.float32)
            b = rng.uniform(-50, 50, n).astype(np.float32)
            c = np.full(n, np.nan, np.float32)
            r = f(on_gpu(a), on_gpu(b), on_gpu(c))
            got = np.asarray(r)
            if list(r.devices())[0].platform != "gpu":
                fail(f"result on {r.devices()}")
            bad = np.nonzero(got.view(np.uint32) != (a + b).view(np.uint32))[0]
            if bad.size:
                i = bad[0]
                fail(f"n={n}: {bad.size} differ; first at {i}: got {got[i]!r}, expected {(a + b)[i]!r} "
                     f"(a={a[i]!r}, b={b[i]!r})")
        return "out tensor aliased to the result (NaN-filled): n = 1, 1000, 2^20+3, bit for bit"

    sec.check("jax.jit vector_add (out)", jit_add)

    def jit_ret():
        n = 100003
        a = rng.uniform(-50, 50, n).astype(np.float32)
        b = rng.uniform(-50, 50, n).astype(np.float32)
        got = np.asarray(jax.jit(mod.jax.vector_add_ret)(on_gpu(a), on_gpu(b)))
        if not np.array_equal(got.view(np.uint32), (a + b).view(np.uint32)):
            fail(f"{int((got != a + b).sum())} of {n} differ")
        return f"XLA-allocated result, n={n}, bit for bit"

    sec.check("jax.jit vector_add_ret (returned)", jit_ret)

    def stream_order():
        n = 1 << 24
        a = rng.uniform(-50, 50, n).astype(np.float32)
        b = rng.uniform(-50, 50, n).astype(np.float32)
        c = np.full(n, np.nan, np.float32)

        def prog(a, b, c):
            return mod.jax.vector_add(a * 3, b, c) * 2 + 1  # XLA -> kjit -> XLA, one stream
        got = np.asarray(jax.jit(prog)(on_gpu(a), on_gpu(b), on_gpu(c)))
        want = (a * np.float32(3) + b) * np.float32(2) + np.float32(1)
        bad = np.nonzero(got.view(np.uint32) != want.view(np.uint32))[0]
        if bad.size:
            fail(f"{bad.size} of {n} differ (a kernel on another stream than XLA's?); first at {bad[0]}: got "
                 f"{got[bad[0]]!r}, expected {want[bad[0]]!r}")
        rec = np.asarray(jax.jit(mod.jax.stream_of_call)(on_gpu(np.full(1, -7, np.int64))))
        return f"XLA op -> kjit -> XLA op in one jit, n=2^24 exact; the handler's stream 0x{int(rec[0]):x}"

    sec.check("stream of the call frame (ordering)", stream_order)

    def attr_and_vmap():
        n = 4099
        x = rng.uniform(-50, 50, n).astype(np.float32)
        y = rng.uniform(-50, 50, n).astype(np.float32)
        got = np.asarray(jax.jit(lambda x, y: mod.jax.axpy(x, y, alpha=2.5))(on_gpu(x), on_gpu(y)))
        want = np.float32(2.5) * x + y
        if not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
            fail(f"axpy alpha=2.5: {int((got != want).sum())} of {n} differ")
        xs = rng.uniform(-50, 50, (3, 257)).astype(np.float32)
        ys = rng.uniform(-50, 50, (3, 257)).astype(np.float32)
        cs = np.full((3, 257), np.nan, np.float32)
        got = np.asarray(jax.jit(jax.vmap(mod.jax.vector_add))(on_gpu(xs), on_gpu(ys), on_gpu(cs)))
        if not np.array_equal(got, xs + ys):
            fail(f"vmap vector_add: {int((got != xs + ys).sum())} differ")
        return f"attr alpha (float32) n={n}; vmap ({mod.jax.vector_add.vmap_method}) over 3 rows; exact"

    sec.check("attr + vmap", attr_and_vmap)

    def raises_through_xla(fn: str, needle: str) -> str:
        x = on_gpu(np.zeros(8, np.float32))
        try:
            jax.block_until_ready(jax.jit(getattr(mod.jax, fn))(x))
        except Exception as err:  # noqa: BLE001 (JaxRuntimeError)
            if needle not in str(err):
                fail(f"{fn}: an error without '{needle}': {clip(str(err), 300)}")
            name = type(err).__name__
        else:
            fail(f"{fn} raised nothing through XLA (the handler does not report it)")
        a = rng.uniform(-50, 50, 1000).astype(np.float32)
        got = np.asarray(jax.jit(mod.jax.vector_add_ret)(on_gpu(a), on_gpu(a)))
        if not np.array_equal(got, a + a):
            fail(f"{fn}: the call after the error is wrong")
        return f"{name} with kjit's message; the next call is right"

    sec.check("kernel exception through XLA", lambda: raises_through_xla("throws", "throws: planted by gpu_check"),
              planted=True)

    def elementwise():
        import kjit
        f = kjit.jax.function(kjit.elementwise(EW_CODES["add"]))
        a = rng.uniform(-50, 50, 1000).astype(np.float32)
        try:
            got = np.asarray(jax.jit(f)(on_gpu(a), on_gpu(a)))
        except Exception as err:  # noqa: BLE001
            raise Skip("not supported: kjit.jax.function(elementwise) is CPU-only (docs/jax.md); JAX on GPU says: " +
                       clip(str(err), 120))
        if not np.array_equal(got, a + a):
            fail(f"{int((got != a + a).sum())} of 1000 differ")
        return "ran on GPU arrays, exact"

    sec.check("elementwise through JAX on GPU", elementwise)
    # Last: a launch error the handler misses stays in the CUDA runtime's last-error state.
    sec.check("failed launch through XLA", lambda: raises_through_xla("bad_launch", "cudaErrorInvalidConfiguration"),
              planted=True)


# ---- brainevent ---------------------------------------------------------------------

BE_FILES = {"densemv": "_dense/binary_densemv.cu", "csrmv": "_csr/binary_csrmv.cu"}


def section_brainevent(sec: Section) -> None:
    import numpy as np
    state = {}

    def imports():
        try:
            import jax
            import brainevent
        except ImportError as err:
            raise Skip(f"brainevent is not importable here ({err}); scripts/gpu_pack.py bundles it")
        from kjit.module import brainevent_include_dir
        state["jax"] = jax
        state["root"] = os.path.dirname(brainevent_include_dir())
        try:
            gpus = jax.devices("gpu")
        except RuntimeError:
            gpus = []
        if gpus and not sec.dry:
            sec.gpu = True
            state["dev"] = gpus[0]
        return f"brainevent {brainevent.__version__}, headers at {state['root']}"

    sec.check("import brainevent", imports, gpu=False, min_s=1)
    if "jax" not in state:
        return
    jax = state["jax"]
    if not sec.gpu and sec.dry and not sec.args.full:
        for c in ("build densemv + csrmv (nvcc)", "densemv vs NumPy", "densemv vs brainevent's own CUDA",
                  "csrmv vs NumPy"):
            sec.row(c, "SKIP", "no GPU (dry run); --full builds the two files here (tests/python/"
                               "test_brainevent_kernels.py builds brainevent files in CI)")
        return

    def build():
        import kjit
        import kjit.jax  # noqa: F401
        if sec.dry and not have_nvcc():
            raise Skip("no CUDA toolkit (nvcc) here")
        mods = {}
        t0 = time.perf_counter()
        for key, rel in BE_FILES.items():
            with open(os.path.join(state["root"], rel), encoding="utf-8") as f:
                text = f.read()
            kwargs = dict(cuda_sources=[text], functions=None, jax=True)
            if sec.dry:
                kwargs["cuda_arch"] = "sm_90"
            mod = kjit.load_inline(f"gpu_check_be_{key}", **kwargs)
            kjit.jax.register(mod, platform="cuda")
            mods[key] = mod
        state["mods"] = mods
        return f"{sum(len(m.functions) for m in mods.values())} functions in {time.perf_counter() - t0:.1f} s"

    sec.check("build densemv + csrmv (nvcc)", build, gpu=False, min_s=10)
    if "mods" not in state:
        return
    rng = np.random.default_rng(2906)

    def call(target, shape, *args):
        out = jax.ShapeDtypeStruct(shape, np.float32)
        return np.asarray(jax.jit(lambda *xs: jax.ffi.ffi_call(target, out)(*xs))(
            *[jax.device_put(a, state["dev"]) for a in args]))

    def dense_inputs(transpose, spikes):
        rows, cols = (517, 300) if transpose else (300, 517)
        w = rng.uniform(-1, 1, (rows, cols)).astype(np.float32)
        k = rows if transpose else cols
        s = rng.random(k) < 0.3 if spikes == "bool" else rng.uniform(-1, 1, k).astype(np.float32)
        active = (s != 0) if spikes == "bool" else (s > 0)
        ref = active.astype(np.float64) @ w.astype(np.float64) if transpose else \
            w.astype(np.float64) @ active.astype(np.float64)
        scale = (np.abs(w).astype(np.float64) * (active[:, None] if transpose else active[None, :])).sum(
            axis=0 if transpose else 1)
        return w, s, ref, scale

    def close(got, ref, scale):
        err = np.abs(got.astype(np.float64) - ref)
        bound = 1e-5 * scale + 1e-6
        bad = np.nonzero(~(err <= bound))[0]
        return None if not bad.size else f"{bad.size} of {ref.size} off; first at {bad[0]}: got {got[bad[0]]!r}, " \
                                         f"expected {ref[bad[0]]!r}"

    dense_results = {}

    def densemv():
        problems = []
        for transpose in (False, True):
            for spikes in ("bool", "float"):
                w, s, ref, scale = dense_inputs(transpose, spikes)
                name = f"binary_densemv_{'transpose' if transpose else 'no_transpose'}_f32_{spikes}"
                got = call(f"gpu_check_be_densemv.{name}", ref.shape, w, s)
                dense_results[(transpose, spikes)] = (w, s, got, ref, scale)
                err = close(got, ref, scale)
                if err:
                    problems.append(f"{name}: {err}")
        if problems:
            fail("; ".join(problems))
        return "4 entry points (transpose x bool/float spikes) through kjit's XLA handlers, within 1e-5 of float64"

    sec.check("densemv vs NumPy", densemv)

    def densemv_own():
        if not dense_results:
            raise Skip("the kjit densemv results are missing")
        try:
            from brainevent._dense.binary import binary_densemv_p_call
        except Exception as err:  # noqa: BLE001
            raise Skip(f"brainevent's primitive is not importable: {err}")
        problems = []
        for (transpose, spikes), (w, s, got, ref, scale) in dense_results.items():
            try:
                own = binary_densemv_p_call(jax.device_put(w, state["dev"]), jax.device_put(s, state["dev"]),
                                            transpose=transpose, backend="cuda_raw")
                own = np.asarray(own[0] if isinstance(own, (list, tuple)) else own)
            except Exception as err:  # noqa: BLE001
                raise Skip(f"brainevent's own CUDA backend did not run here: {clip(str(err), 150)}")
            err = close(got, own.astype(np.float64), scale)
            if err:
                problems.append(f"transpose={transpose} {spikes}: kjit vs brainevent: {err}")
        if problems:
            fail("; ".join(problems))
        return "kjit's build of the file and brainevent's own (cuda_raw) agree, 4 entry points"

    sec.check("densemv vs brainevent's own CUDA", densemv_own, min_s=20)

    def csrmv():
        problems = []
        for avg in (4, 64, 1024):  # the thread, warp and block kernels
            m, k = 257, 2048
            counts = rng.poisson(avg, m).astype(np.int64)
            indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
            nnz = int(indptr[-1])
            indices = rng.integers(0, k, nnz).astype(np.int32)
            v_bool = rng.random(k) < 0.3
            v_float = rng.uniform(-1, 1, k).astype(np.float32)
            for homo, spikes in ((True, "bool"), (False, "float")):
                w = np.array([0.75], np.float32) if homo else rng.uniform(-1, 1, nnz).astype(np.float32)
                v = v_bool if spikes == "bool" else v_float
                active = (v != 0) if spikes == "bool" else (v > 0)
                contrib = (np.full(nnz, w[0], np.float64) if homo else w.astype(np.float64)) * active[indices]
                rows = np.repeat(np.arange(m), counts)
                ref = np.zeros(m)
                np.add.at(ref, rows, contrib)
                scale = np.zeros(m)
                np.add.at(scale, rows, np.abs(contrib))
                name = f"binary_csrmv_nt_auto_{'homo' if homo else 'hetero'}_f32_{spikes}"
                got = call(f"gpu_check_be_csrmv.{name}", (m,), w, indices, indptr, v)
                err = close(got, ref, scale)
                if err:
                    problems.append(f"{name} avg nnz {avg}: {err}")
        if problems:
            fail("; ".join(problems))
        return "homo bool / hetero float, ~4, 64, 1024 nonzeros a row (thread, warp, block kernels), vs float64"

    sec.check("csrmv vs NumPy", csrmv)


# ---- sanitizer ----------------------------------------------------------------------


def find_compute_sanitizer() -> Optional[str]:
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for pattern in ("/usr/local/cuda/bin/compute-sanitizer", "/usr/local/cuda/compute-sanitizer/compute-sanitizer",
                    "/usr/local/cuda-*/bin/compute-sanitizer", "/opt/nvidia/*/compute-sanitizer"):
        import glob
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[-1]
    return None


def section_sanitizer(sec: Section) -> None:
    tool = find_compute_sanitizer()
    for target in ("checked", "elementwise"):
        def run(target=target):
            if tool is None:
                raise Skip("compute-sanitizer not found (PATH, /usr/local/cuda)")
            budget = sec.remaining() / (2 if target == "checked" else 1) - 5
            if budget < 20:
                raise Skip(f"{sec.remaining():.0f} s left")
            rows_file = os.path.join(sec.args.work, f"sanitizer-{target}.jsonl")
            if os.path.exists(rows_file):
                os.remove(rows_file)
            cmd = [tool, "--tool", "memcheck", "--report-api-errors", "no", "--error-exitcode", "86",
                   "--print-limit", "20", sys.executable, os.path.abspath(__file__), "--section", target, "--small",
                   "--rows", rows_file, "--deadline", str(time.time() + budget - 5), "--work", sec.args.work]
            env = dict(os.environ, PYTORCH_NO_CUDA_MEMORY_CACHING="1", CUDA_MODULE_LOADING="LAZY")
            t0 = time.perf_counter()
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=budget, env=env)
            except subprocess.TimeoutExpired as err:
                out = (err.stdout or b"").decode("utf-8", "replace") if isinstance(err.stdout, bytes) else (
                    err.stdout or "")
                print(out[-20000:])
                raise Skip(f"memcheck of the {target} checks did not finish in the {budget:.0f} s left (slow under "
                           f"the sanitizer; rerun: --sections sanitizer); its output is in checks.log")
            took = time.perf_counter() - t0
            text = proc.stdout + proc.stderr
            print(text[-60000:])
            summary = re.search(r"ERROR SUMMARY: (\d+) error", text)
            child = [r for r in read_records(rows_file) if r["kind"] == "row"]
            passed = sum(r["status"] == "PASS" for r in child)
            failed = [r for r in child if r["status"] == "FAIL"]
            if "Device not supported" in text or "not supported" in text.lower() and summary is None:
                raise Skip("compute-sanitizer refused the device: " + clip(text[-300:], 150))
            if summary is None:
                return "FAIL", f"no ERROR SUMMARY (exit {proc.returncode}): {clip(text[-300:], 150)}"
            errors = int(summary.group(1))
            if errors:
                first = next((line for line in text.splitlines() if "Invalid" in line or "Error" in line), "")
                return "FAIL", f"{errors} memcheck errors; first: {clip(first, 120)}"
            if failed:
                return "FAIL", f"0 memcheck errors, but {len(failed)} checks failed under it: {failed[0]['name']}: " \
                               f"{failed[0]['figure']}"
            if proc.returncode not in (0,):
                return "FAIL", f"exit {proc.returncode} with 0 memcheck errors"
            return "PASS", f"0 errors; {passed} checks passed under memcheck ({took:.0f} s)"

        sec.check(f"memcheck {target} (small)", run, gpu=False, min_s=20)


# ---- timings ------------------------------------------------------------------------


def section_timing(sec: Section) -> None:
    sec.init_torch_cuda()
    if not sec.gpu:
        sec.row("timings", "SKIP", sec.no_gpu)
        return
    torch = sec.torch
    import kjit
    props = torch.cuda.get_device_properties(0)
    l2 = int(getattr(props, "L2_cache_size", 50 << 20) or (50 << 20))
    try:
        import cupy
        cp_kernels = {"add": cupy.ElementwiseKernel("T x, T y", "T z", "z = x + y", "gc_add"),
                      "mul": cupy.ElementwiseKernel("T x, T y", "T z", "z = x * y", "gc_mul"),
                      "madd": cupy.ElementwiseKernel("T x, T y, T w", "T z", "z = x * y + w", "gc_madd")}
        cupy_note = f"cupy {cupy.__version__}"
    except Exception as err:  # noqa: BLE001
        cupy, cp_kernels = None, {}
        cupy_note = f"no CuPy ({type(err).__name__})"
    fns = {op: kjit.elementwise(EW_CODES[op]) for op in ("add", "mul", "madd")}
    torch_ops = {"add": lambda a, b, o: torch.add(a, b, out=o), "mul": lambda a, b, o: torch.mul(a, b, out=o),
                 "madd": lambda a, b, c, o: torch.addcmul(c, a, b, out=o)}
    nin = {"add": 2, "mul": 2, "madd": 3}

    def sets_for(n, es, tensors):
        per_set = n * es * tensors
        return max(1, min(512, math.ceil(4 * l2 / per_set)))

    def measure(calls: Dict[str, Callable], sets: int, reps: int = 15) -> Dict[str, float]:
        """Median ms per call of each, interleaved, each batch rotating through `sets` input sets."""
        per_batch = max(sets, 20)
        for fn in calls.values():
            for i in range(min(per_batch, 3 * sets)):
                fn(i % sets)
        torch.cuda.synchronize()
        times = {k: [] for k in calls}
        for _ in range(reps):
            for name, fn in calls.items():
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                for i in range(per_batch):
                    fn(i % sets)
                e1.record()
                e1.synchronize()
                times[name].append(e0.elapsed_time(e1) / per_batch)
        return {k: statistics.median(v) for k, v in times.items()}

    def case(op, dtype, log2n):
        def run():
            n = 1 << log2n
            td = getattr(torch, dtype)
            es = torch.empty((), dtype=td).element_size()
            need = (nin[op] + 1) * n * es
            free, _ = torch.cuda.mem_get_info()
            if need * 2 > free:
                raise Skip(f"needs {need * 2 / 2**30:.1f} GiB, {free / 2**30:.1f} free")
            sets = sets_for(n, es, nin[op] + 1)
            g = torch.Generator(device="cuda").manual_seed(log2n)
            ins = [[(torch.rand(n, device="cuda", generator=g) - 0.5).to(td) for _ in range(nin[op])]
                   for _ in range(sets)]
            outs = [torch.empty(n, dtype=td, device="cuda") for _ in range(sets)]
            f = fns[op]
            calls = {"kjit": lambda i: f(*ins[i], out=outs[i]),
                     "torch": lambda i: torch_ops[op](*ins[i], outs[i])}
            cins, couts = [], []
            if cp_kernels and dtype != "bfloat16":
                cins += [[cupy.from_dlpack(x) for x in s] for s in ins]
                couts += [cupy.from_dlpack(o) for o in outs]
                k = cp_kernels[op]
                calls["cupy"] = lambda i: k(*cins[i], couts[i])
            calls["copy"] = lambda i: outs[i].copy_(ins[i][0])
            f(*ins[0], out=outs[0])
            torch.cuda.synchronize()
            check = outs[0].clone()
            torch_ops[op](*ins[0], outs[0])
            torch.cuda.synchronize()
            if op != "madd" and not torch.equal(check, outs[0]):
                fail(f"kjit and torch disagree on the timed {op} {dtype} n=2^{log2n}")
            ms = measure(calls, sets, reps=15 if log2n < 28 else 9)
            moved = (nin[op] + 1) * n * es
            bw = {k: (moved if k != "copy" else 2 * n * es) / (v * 1e-3) / 1e9 for k, v in ms.items()}
            frac = bw["kjit"] / bw["copy"]
            fig = (f"kjit {ms['kjit'] * 1e3:.1f} us = {bw['kjit']:.0f} GB/s = {frac * 100:.0f}% of copy "
                   f"({bw['copy']:.0f} GB/s); torch {ms['torch'] * 1e3:.1f} us (kjit/torch time "
                   f"{ms['kjit'] / ms['torch']:.2f}x)")
            if "cupy" in ms:
                fig += f"; cupy {ms['cupy'] * 1e3:.1f} us ({ms['kjit'] / ms['cupy']:.2f}x)"
            for held in (ins, outs, cins, couts, calls):
                held.clear()  # the memory goes back before the next size
            torch.cuda.empty_cache()
            if op == "add" and dtype == "float32" and log2n >= 24:
                ok = frac >= TARGET_COPY_FRACTION and ms["kjit"] <= ms["torch"] * 1.01
                return ("PASS" if ok else "MISS", fig + f" [target >= {TARGET_COPY_FRACTION * 100:.0f}% of copy and "
                        f">= torch]")
            return "INFO", fig
        return run

    sec.row("setup of the timings", "INFO", f"L2 {l2 / 2**20:.0f} MiB: input sets rotated past 4x L2; CUDA events, "
                                             f"median of 15 batches (9 at 2^28); {cupy_note}")
    plan = [("add", "float32", k) for k in (16, 20, 24, 28)] + [("mul", "float32", k) for k in (16, 20, 24, 28)] + \
        [("madd", "float32", k) for k in (16, 20, 24, 28)] + \
        [(op, d, 24) for op in ("add", "madd") for d in ("float16", "bfloat16")]
    for op, dtype, log2n in plan:
        sec.check(f"{op} {dtype} 2^{log2n}", case(op, dtype, log2n), min_s=6)

    def overhead():
        mod = load_checked(False, jax=False)
        a = torch.rand(1, device="cuda")
        b = torch.rand(1, device="cuda")
        c = torch.empty(1, device="cuda")
        x = torch.zeros(1, device="cuda")
        f = fns["add"]

        def host_us(fn, calls=2000, batches=7):
            for _ in range(200):
                fn()
            torch.cuda.synchronize()
            out = []
            for _ in range(batches):
                t0 = time.perf_counter()
                for _ in range(calls):
                    fn()
                torch.cuda.synchronize()
                out.append((time.perf_counter() - t0) / calls * 1e6)
            return statistics.median(out)

        k = host_us(lambda: mod.vector_add(a, b, c))
        e = host_us(lambda: f(a, b, out=c))
        t = host_us(lambda: x.add_(1))
        t2 = host_us(lambda: torch.add(a, b, out=c))
        return "INFO", (f"1-element calls, median us per call: checked kernel {k:.2f}, elementwise out= {e:.2f}; "
                        f"torch x.add_(1) {t:.2f}, torch.add out= {t2:.2f} (checked/torch {k / t:.2f}x)")

    sec.check("launch overhead (1 element)", overhead)


FIRST_CALL = r"""
import json, os, sys, time
t0 = time.perf_counter()
import torch
x = torch.ones(1 << 20, device="cuda")
torch.cuda.synchronize()
t_torch = time.perf_counter() - t0
t0 = time.perf_counter()
import kjit
t_import = time.perf_counter() - t0
add = kjit.elementwise("template <typename T> T add(T a, T b) { return a + b; }")
g = torch.Generator(device="cuda").manual_seed(int(sys.argv[1]))
a = torch.rand(1 << 20, device="cuda", generator=g)
b = torch.rand(1 << 20, device="cuda", generator=g)
out = torch.full((1 << 20,), float("nan"), device="cuda")
torch.cuda.synchronize()
t0 = time.perf_counter()
add(a, b, out=out)
torch.cuda.synchronize()
first = time.perf_counter() - t0
ok = bool(torch.equal(out, a + b))
t0 = time.perf_counter()
add(a, b, out=out)
torch.cuda.synchronize()
second = time.perf_counter() - t0
files = sum(len(f) for _, _, f in os.walk(os.path.join(os.environ["KJIT_CACHE_DIR"], "cuda-kernels")))
print(json.dumps({"torch_init_s": t_torch, "import_kjit_s": t_import, "first_s": first, "second_s": second,
                  "ok": ok, "cuda_kernel_files": files}))
"""


def section_first_call(sec: Section) -> None:
    sec.init_torch_cuda()
    if not sec.gpu:
        sec.row("NVRTC first call", "SKIP", sec.no_gpu)
        return
    cache = tempfile.mkdtemp(prefix="kjit-first-call-", dir=sec.args.work)
    results = {}

    def run(which):
        def go():
            env = dict(os.environ, KJIT_CACHE_DIR=cache)
            proc = subprocess.run([sys.executable, "-c", FIRST_CALL, "7"], capture_output=True, text=True,
                                  timeout=max(10, sec.remaining() - 5), env=env)
            print(proc.stdout[-4000:], proc.stderr[-4000:])
            if proc.returncode != 0:
                fail(f"exit {proc.returncode}: {clip(proc.stderr[-400:], 200)}")
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            results[which] = r
            if not r["ok"]:
                fail(f"{which}: the first call's result is wrong")
            target = TARGET_COLD_S if which == "cold" else TARGET_CACHED_S
            status = "PASS" if r["first_s"] <= target else "MISS"
            return status, (f"first call {r['first_s'] * 1e3:.1f} ms (target <= {target * 1e3:.0f} ms), then "
                            f"{r['second_s'] * 1e3:.2f} ms; import kjit {r['import_kjit_s'] * 1e3:.0f} ms; "
                            f"{r['cuda_kernel_files']} files in cuda-kernels/")
        return go

    sec.check("NVRTC first call, cold cache (new process)", run("cold"))
    sec.check("first call, kernel cached on disk (new process)", run("cached"))


# ---- env and simulation --------------------------------------------------------------


def section_env(sec: Section) -> None:
    def software():
        parts = [f"python {sys.version.split()[0]}"]
        for mod in ("kjit", "tvm_ffi", "torch", "jax", "cupy", "numpy", "brainevent"):
            try:
                m = __import__(mod)
                parts.append(f"{mod} {getattr(m, '__version__', '?')}")
            except Exception as err:  # noqa: BLE001
                parts.append(f"{mod}: {type(err).__name__}")
        nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc")
                                        else None)
        if nvcc:
            out = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
            m = re.search(r"release ([\d.]+)", out)
            parts.append(f"nvcc {m.group(1) if m else '?'}")
        else:
            parts.append("no nvcc")
        import kjit
        print("kjit at", kjit.__file__)
        return "INFO", ", ".join(parts)

    sec.check("software", software, gpu=False, min_s=1)

    def gpu():
        import torch
        smi = shutil.which("nvidia-smi")
        driver = ""
        if smi:
            proc = subprocess.run([smi, "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
                                   "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
            driver = proc.stdout.strip()
            print(subprocess.run([smi], capture_output=True, text=True, timeout=30).stdout)
        if sec.dry:
            return "INFO", "no GPU (dry run)"
        if not torch.cuda.is_available():
            return "FAIL", f"no GPU visible to torch on the GPU run; nvidia-smi: {driver or 'absent'}"
        p = torch.cuda.get_device_properties(0)
        return "INFO", (f"{p.name}, sm_{p.major}{p.minor}, {p.multi_processor_count} SMs, "
                        f"{p.total_memory / 2**30:.0f} GiB, L2 {getattr(p, 'L2_cache_size', 0) / 2**20:.0f} MiB; "
                        f"{torch.cuda.device_count()} device(s); nvidia-smi: {driver}")

    sec.check("GPU", gpu, gpu=False, min_s=1)

    def doctor():
        proc = subprocess.run([sys.executable, "-m", "kjit", "doctor"], capture_output=True, text=True, timeout=60)
        print(proc.stdout, proc.stderr)
        lines = [ln.strip() for ln in proc.stdout.splitlines() if re.search(r"nvrtc|driver|nvcc", ln, re.I)]
        return "INFO", f"exit {proc.returncode}; " + clip(" | ".join(lines), 120)

    sec.check("kjit doctor", doctor, gpu=False, min_s=1)

    def exchange_api():
        import torch
        import tvm_ffi  # noqa: F401 (sets the attribute, or builds its addon)
        has = hasattr(torch.Tensor, "__dlpack_c_exchange_api__")
        return ("INFO" if has else "FAIL",
                "torch.Tensor.__dlpack_c_exchange_api__ " + ("present (CUDA outputs from torch's allocator)" if has else
                                                            "missing: tvm-ffi could not build its torch addon"))

    sec.check("tvm-ffi torch exchange API", exchange_api, gpu=False, min_s=1)


def section_simulation(sec: Section) -> None:
    build = sec.args.build_dir
    if build in (None, ""):
        build = os.path.join(ROOT, "build", "cpp")
    if build == "none":
        sec.row("C++ CUDA simulation tests", "SKIP", "--build-dir none")
        return
    tests = os.path.join(build, "tests", "cpp")
    cache = os.path.join(tests, "kjit-cache")
    for binary, gfilter in (("kjit_cuda_sim_tests", "*"),
                            ("kjit_tests", "CudaCompile*:CudaNoDriver*:ElementwiseCuda*")):
        def run(binary=binary, gfilter=gfilter):
            path = os.path.join(tests, binary)
            if not os.path.exists(path):
                raise Skip(f"no {path} (build the C++ tests: scripts/run test, or pass --build-dir)")
            timeout = max(10, sec.remaining() / (2 if binary == "kjit_cuda_sim_tests" else 1) - 5)
            proc = subprocess.run([path, f"--gtest_filter={gfilter}", "--gtest_brief=1"], capture_output=True,
                                  text=True, timeout=timeout, env=dict(os.environ, KJIT_CACHE_DIR=cache))
            print(proc.stdout[-20000:], proc.stderr[-5000:])
            passed = re.search(r"\[  PASSED  \] (\d+) test", proc.stdout)
            if proc.returncode != 0:
                failed = re.findall(r"\[  FAILED  \] (\S+)", proc.stdout)
                return "FAIL", f"exit {proc.returncode}; failed: {', '.join(sorted(set(failed))[:5]) or '?'}"
            return "PASS", f"{passed.group(1) if passed else '?'} tests ({gfilter}) in {build}"

        sec.check(f"{binary}", run, gpu=False, min_s=10)


def section_selftest(sec: Section) -> None:
    """For tests/python/test_gpu_check.py: a PASS, a FAIL, a crash, then a PASS."""
    sec.check("passes", lambda: "ok", gpu=False)
    sec.check("fails", lambda: fail("planted failure"), gpu=False)
    sec.check("crashes", lambda: os.abort() if os.environ.get("GPU_CHECK_SELFTEST_CRASH") == "1" else "no crash",
              gpu=False)
    sec.check("after the crash", lambda: "ran", gpu=False)


SECTION_FUNCTIONS = {
    "env": section_env, "checked": section_checked, "elementwise": section_elementwise,
    "reduction": section_reduction, "jax": section_jax,
    "first_call": section_first_call, "timing": section_timing, "sanitizer": section_sanitizer,
    "brainevent": section_brainevent, "simulation": section_simulation, "selftest": section_selftest,
}


def child_main(args) -> int:
    rec = Recorder(args.rows)
    sec = Section(args.section, args, rec)
    try:
        SECTION_FUNCTIONS[args.section](sec)
    except Exception as err:  # noqa: BLE001 (a section that cannot even start reports it)
        traceback.print_exc()
        sec.row("section", "FAIL", f"{type(err).__name__}: {clip(str(err), 200)}", traceback.format_exc())
    sys.stdout.flush()
    return 0


# ---- the orchestrator -----------------------------------------------------------------


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def run_section(name: str, budget: float, args, log, env) -> List[dict]:
    """Runs a section in child processes until it completes: a crash FAILs the check
    that was running and restarts the section without the checks already done."""
    rows: List[dict] = []
    done: List[str] = []
    started_at = time.time()
    for attempt in range(4):
        remaining = budget - (time.time() - started_at)
        if remaining < 5:
            rows.append(row(name, "(rest of the section)", "FAIL", f"no time left to restart after attempt {attempt}"))
            break
        rows_file = os.path.join(args.work, f"rows-{name}-{attempt}.jsonl")
        if os.path.exists(rows_file):
            os.remove(rows_file)
        cmd = [sys.executable, os.path.abspath(__file__), "--section", name, "--rows", rows_file, "--work", args.work,
               "--deadline", str(time.time() + remaining - 3), "--skip=" + "|".join(done)]
        if args.dry_run:
            cmd.append("--dry-run")
        if args.full:
            cmd.append("--full")
        if args.build_dir is not None:
            cmd += ["--build-dir", args.build_dir]
        log.write(f"\n===== section {name} (attempt {attempt + 1}, {remaining:.0f} s) =====\n")
        log.flush()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        timed_out = False
        try:
            code = proc.wait(timeout=remaining)
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            code = proc.wait()
        records = read_records(rows_file)
        finished = {r["check"] for r in records if r["kind"] == "row"}
        rows += [r for r in records if r["kind"] == "row"]
        started = [r["check"] for r in records if r["kind"] == "start"]
        unfinished = [c for c in started if c not in finished]
        for c in started + sorted(finished):
            if c not in done:
                done.append(c)
        if timed_out:
            what = f"unfinished when the section's {budget:.0f} s ran out"
            for c in unfinished:
                rows.append(row(name, c, "FAIL", what))
            rows.append(row(name, "(rest of the section)", "SKIP" if unfinished else "FAIL",
                            f"timed out after {budget:.0f} s; checks after it did not run"))
            break
        if code == 0:
            break
        why = describe_exit(code)
        for c in unfinished:
            rows.append(row(name, c, "FAIL", f"crashed the process ({why})"))
        if code != RESTART_CODE and not unfinished:
            rows.append(row(name, "(section)", "FAIL", f"the process ended with {why} between checks"))
        log.write(f"\n===== section {name}: {why}; restarting without {done} =====\n")
    return rows


def row(section: str, check: str, status: str, figure: str) -> dict:
    return {"kind": "row", "section": section, "check": check, "name": f"{section}: {check}", "status": status,
            "figure": figure, "detail": ""}


def read_setup_rows(path: Optional[str]) -> List[dict]:
    out = []
    if path and os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) >= 2 and parts[1] in STATUSES:
                    out.append(row("setup", parts[0], parts[1], parts[2] if len(parts) > 2 else ""))
    return out


def orchestrate(args) -> int:
    start = time.time()
    deadline = args.deadline or (start + (420 if not args.dry_run else 900))
    os.makedirs(args.out, exist_ok=True)
    own_work = not args.work
    if own_work:
        args.work = tempfile.mkdtemp(prefix="kjit-gpu-check-")
    os.makedirs(args.work, exist_ok=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1", XLA_PYTHON_CLIENT_PREALLOCATE="false")
    env.setdefault("KJIT_CACHE_DIR", os.path.join(args.work, "kjit-cache"))
    env.setdefault("TVM_FFI_CACHE_DIR", os.path.join(args.work, "tvm-ffi-cache"))
    wanted = [s for s in args.sections.split(",") if s] if args.sections else None
    sections = [(n, b, m) for n, b, m in SECTIONS + [("selftest", 60, "run")]
                if (n in wanted if wanted else n != "selftest")]
    rows = read_setup_rows(args.setup_rows)
    timings: Dict[str, float] = {}
    results: Dict[str, List[dict]] = {}
    runnable = []
    for name, budget, mode in sections:
        if args.dry_run and mode == "skip":
            extra = ""
            if name == "sanitizer":
                tool = find_compute_sanitizer()
                extra = f"; compute-sanitizer {'at ' + tool if tool else 'not found here'}"
            results[name] = [row(name, "(all)", "SKIP", f"no GPU (dry run){extra}")]
        elif args.dry_run or mode != "only":
            runnable.append((name, max(budget, 240) if args.dry_run else budget))

    def one(k: int, name: str, budget: float) -> None:
        # GPU run: one section at a time (the timings must have the GPU alone), each
        # leaving the later ones at least MIN_SECTION_S. Dry run: all at once.
        later = 0 if args.dry_run else sum(min(MIN_SECTION_S, b) for _, b in runnable[k + 1:])
        allowed = min(budget, deadline - time.time() - later)
        if allowed < MIN_SECTION_S:
            results[name] = [row(name, "(all)", "SKIP", f"out of time: {deadline - time.time():.0f} s left of the "
                                                        f"run's budget")]
            return
        t0 = time.time()
        # Dry run: a log per section, joined below; GPU run: straight into checks.log, so
        # that a run cut short still brings back what it did.
        log_path = os.path.join(args.work, f"log-{name}.txt") if args.dry_run else checks_log
        with open(log_path, "a", encoding="utf-8") as log:
            results[name] = run_section(name, allowed, args, log, env)
        timings[name] = time.time() - t0
        counts = {s: sum(r["status"] == s for r in results[name]) for s in STATUSES}
        print(f"[gpu_check] {name}: " + ", ".join(f"{v} {s}" for s, v in counts.items() if v) +
              f" ({timings[name]:.0f} s)", flush=True)
        if not args.dry_run:
            write_results(args, rows + [r for n, _, _ in sections for r in results.get(n, [])], timings, "?",
                          partial=True)

    checks_log = os.path.join(args.out, "checks.log")
    with open(checks_log, "a", encoding="utf-8") as log:
        log.write(f"\n##### gpu_check.py {'--dry-run ' if args.dry_run else ''}{time.strftime('%Y-%m-%d %H:%M:%S')}; "
                  f"KJIT_CACHE_DIR={env['KJIT_CACHE_DIR']}\n")
    if args.dry_run:
        import concurrent.futures
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(runnable))) as pool:
            for f in [pool.submit(one, k, n, b) for k, (n, b) in enumerate(runnable)]:
                f.result()
    else:
        for k, (name, budget) in enumerate(runnable):
            one(k, name, budget)
    with open(checks_log, "a", encoding="utf-8") as log:
        for name, _, _ in sections:
            rows += results.get(name, [])
            part = os.path.join(args.work, f"log-{name}.txt")
            if args.dry_run and os.path.exists(part):
                with open(part, encoding="utf-8", errors="replace") as f:
                    shutil.copyfileobj(f, log)
    device = next((r["figure"] for r in rows if r["name"] == "env: GPU"), "?")
    title = (f"kjit gpu_check {'(dry run) ' if args.dry_run else ''}{time.strftime('%Y-%m-%d %H:%M %Z')} -- "
             f"{clip(device, 70)} -- {time.time() - start:.0f} s -- logs: {args.out}")
    table = format_table(rows, title)
    write_results(args, rows, timings, device, partial=False)
    with open(os.path.join(args.out, "table.txt"), "w", encoding="utf-8") as f:
        f.write(table + "\n")
    if own_work:
        shutil.rmtree(args.work, ignore_errors=True)
    print(table, flush=True)
    return 1 if any(r["status"] == "FAIL" for r in rows) else 0


def write_results(args, rows, timings, device, partial: bool) -> None:
    path = os.path.join(args.out, "results.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump({"date": time.strftime("%Y-%m-%d %H:%M:%S %z"), "dry_run": args.dry_run, "device": device,
                   "partial": partial, "section_seconds": timings, "rows": rows}, f, indent=1)
    os.replace(path + ".tmp", path)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "kjit-gpu-check-out"),
                    help="results.json, table.txt and checks.log go here")
    ap.add_argument("--dry-run", action="store_true", help="no GPU: run what needs none, SKIP the rest")
    ap.add_argument("--full", action="store_true", help="dry run: also build the brainevent files (slow here)")
    ap.add_argument("--sections", help="comma-separated subset, in the usual order")
    ap.add_argument("--deadline", type=float, help="epoch seconds by which everything must be done")
    ap.add_argument("--setup-rows", help="TSV rows (name, result, figure) of the set-up, shown first")
    ap.add_argument("--build-dir", help="dry run: a C++ build with the CUDA simulation tests (default build/cpp; "
                                        "'none' skips them)")
    ap.add_argument("--work", help="scratch folder (caches, row files)")
    # a section's own process
    ap.add_argument("--section", choices=sorted(SECTION_FUNCTIONS), help=argparse.SUPPRESS)
    ap.add_argument("--rows", help=argparse.SUPPRESS)
    ap.add_argument("--skip", help=argparse.SUPPRESS)
    ap.add_argument("--small", action="store_true", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    if args.section:
        if not args.work:
            args.work = tempfile.mkdtemp(prefix="kjit-gpu-check-")
        return child_main(args)
    return orchestrate(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
