"""CUDA modules from Python, without a GPU: cuda_sources are compiled by nvcc and
linked with the host stubs; the module loads (libcudart needs no driver to load),
its functions are @cuda, and everything up to the first CUDA call runs here.

Two CUDA builds per session (the module fixture for sm_90, the verbose sm_80 build);
every other test reuses them or fails before nvcc runs.
"""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

import kjit

if shutil.which("nvcc") is None and not os.path.exists("/usr/local/cuda/bin/nvcc"):
    pytest.skip("no CUDA toolkit (nvcc on PATH or /usr/local/cuda)", allow_module_level=True)

np = pytest.importorskip("numpy")

# Device code: one source, three entry points declared three ways (signature
# string, arg_spec tokens, signature string for a function without tensors).
CUDA_SRC = r"""
#include <cuda_runtime.h>
#ifndef SCALE
#error "SCALE is not defined: extra_cuda_cflags did not reach nvcc"
#endif

__global__ void add_kernel(const float* a, const float* b, float* c, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

void vector_add(const kjit::TensorView a, const kjit::TensorView b, kjit::TensorView c, cudaStream_t stream) {
  const int64_t n = a.numel();
  add_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(a.data<float>(), b.data<float>(),
                                                                         c.data<float>(), n);
}

__global__ void scale_kernel(float* x, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) x[i] *= SCALE;
}

void scale(kjit::TensorView x, kjit::Stream stream) {
  const int64_t n = x.numel();
  scale_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(
      x.data<float>(), n);
}

// No tensor: no CUDA call in its stub, so it runs without a GPU.
int64_t scale_factor(int64_t k) { return SCALE * k; }

// A template entry point: kjit has nvcc instantiate fill<float> and fill<double>.
template <typename T> __global__ void fill_kernel(T* x, T v, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) x[i] = v;
}
namespace ops {
template <typename T> void fill(kjit::TensorView x, double v, cudaStream_t stream) {
  const int64_t n = x.numel();
  fill_kernel<T><<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(x.data<T>(), T(v), n);
}
}  // namespace ops
using ops::fill;
"""

# Host code of the same module: the host compiler, @cpu.
CPP_SRC = r"""
#include <kjit/kernel.h>
void ones(kjit::TensorView x) {
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = 1.0f;
}
"""

FUNCTIONS = {
    "vector_add": "a: float32[n], b: float32[n], c: float32[n] out, stream: stream",
    "scale": ["ret", "stream"],
    "scale_factor": "k: int64",
    "ones": ["ret"],
    "fill": "<T: float32|float64> x: T[n] out, v: float64, stream: stream",
}

BUILD = dict(cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC, functions=FUNCTIONS, extra_cuda_cflags=["-DSCALE=3"])

NOT_AN_ARCH = ("is not a CUDA architecture; write sm_80, compute_90 (PTX), sm_90a, 8.0, 9.0+PTX or 80, "
               "separated by commas, semicolons or spaces")


@pytest.fixture(scope="module")
def mod():
    return kjit.load_inline("py_cuda_mixed", cuda_arch="sm_90", **BUILD)


def tensor_params(signature):
    return [p for p in signature.split(", ") if "[" in p]


# ---- what kjit derives -------------------------------------------------------


def test_functions_in_cuda_sources_are_cuda_and_cpp_ones_cpu(mod):
    assert mod.devices == {"vector_add": "cuda", "scale": "cuda", "scale_factor": "none", "ones": "cpu",
                           "fill": "cuda"}


def test_signatures_of_cuda_functions_carry_at_cuda(mod):
    resolved = kjit.resolve(CPP_SRC, FUNCTIONS, cuda_sources=CUDA_SRC)
    for functions in (mod.functions, resolved):
        for fn in ("vector_add", "scale"):
            params = tensor_params(functions[fn])
            assert params and all("@cuda" in p for p in params), functions[fn]
        assert "@cuda" not in functions["ones"]


def test_signatures_without_devices(mod):
    strip = lambda s: s.replace(" @cuda", "").replace(" @cpu", "")  # noqa: E731
    assert {k: strip(v) for k, v in mod.functions.items()} == {
        "vector_add": "a: float32[n], b: float32[n], c: float32[n] out, stream: stream",
        "scale": "x: any[...] out, stream: stream",
        "scale_factor": "k: int64",
        "ones": "x: any[...] out",
        "fill": "<T: float32|float64> x: T[n] out, v: float64, stream: stream",
    }
    assert mod.arg_specs["scale"] == ["ret", "stream"]
    assert mod.arg_specs["vector_add"] == ["arg", "arg", "ret", "stream"]


def test_resolve_gives_the_module_signatures_without_compiling(mod):
    # Without -DSCALE the source hits its #error if anything compiled it.
    assert kjit.resolve(CPP_SRC, FUNCTIONS, cuda_sources=CUDA_SRC) == mod.functions


def test_cuda_stubs_initialise_cuda_and_guard_the_device(mod):
    for fn in ("vector_add", "scale"):
        stub = mod.get_host_source(fn)
        assert "cuda_init_status()" in stub and "kjit_cudaSetDevice(dev_cuda.device_id)" in stub, fn
        assert "kjit_cudaGetLastError()" in stub, fn
    for fn in ("ones", "scale_factor"):
        assert "kjit_cuda" not in mod.get_host_source(fn), fn
    # The host translation unit never includes CUDA headers; the entry points are declared.
    source = mod.get_host_source()
    assert "#include <cuda" not in source
    assert "void vector_add(const kjit::TensorView, const kjit::TensorView, kjit::TensorView, cudaStream_t);" in source


# ---- calls without a GPU -------------------------------------------------------


def test_numpy_arrays_get_the_device_error(mod):
    a = np.ones(4, np.float32)
    with pytest.raises(ValueError, match=r"^vector_add: argument #0 'a': device must be cuda, got cpu$"):
        mod.vector_add(a, a, np.zeros(4, np.float32))
    with pytest.raises(ValueError, match=r"^scale: argument #0 'x': device must be cuda, got cpu$"):
        mod.scale(a)


def test_cpp_function_of_a_cuda_module_runs_on_cpu(mod):
    x = np.zeros(3, np.float32)
    mod.ones(x)
    assert x.tolist() == [1.0, 1.0, 1.0]


def test_extra_cuda_cflags_reach_nvcc(mod):
    assert mod.scale_factor(2) == 6  # SCALE=3, defined on nvcc's command line only


# ---- build: commands, architectures, cache -------------------------------------


def test_verbose_prints_the_nvcc_host_and_link_commands(mod, capfd):
    kjit.load_inline("py_cuda_mixed", cuda_arch="sm_80", verbose=True, force_rebuild=True, **BUILD)
    err = capfd.readouterr().err
    assert "module 'py_cuda_mixed': CUDA architectures sm_80 (given by cuda_arch), nvcc " in err
    commands = [line for line in err.splitlines() if line.startswith("[kjit]   ") and " -o " in line]
    nvcc = [c for c in commands if re.match(r"\[kjit\]\s+(\S*/)?nvcc ", c)]
    assert len(nvcc) == 1, err
    assert " -gencode=arch=compute_80,code=sm_80 " in nvcc[0] and "sm_90" not in nvcc[0]
    assert " -DSCALE=3 " in nvcc[0] and nvcc[0].endswith(".cuda.o")
    host = [c for c in commands if c not in nvcc and " -c " in c]
    assert len(host) == 1 and host[0].endswith(".host.o") and "-DSCALE" not in host[0], err
    link = [c for c in commands if " -shared " in c]
    assert len(link) == 1 and ".host.o" in link[0] and ".cuda.o" in link[0] and " -lcudart " in link[0], err


def test_cuda_arch_is_part_of_the_cache_key(mod):
    sm80 = kjit.load_inline("py_cuda_mixed", cuda_arch="sm_80", **BUILD)  # built by the verbose test, or now
    assert sm80.key != mod.key
    assert sm80.path != mod.path
    assert kjit.load_inline("py_cuda_mixed", cuda_arch="9.0", **BUILD).key == mod.key  # same arch, other spelling


@pytest.mark.parametrize("cuda_arch, entry", [("sm_90,hopper", "hopper"), (["sm_80", "sm_9"], "sm_9"),
                                              ("9.0+PTX;sm_90b", "sm_90b")])
def test_bad_cuda_arch_is_a_spec_error(cuda_arch, entry):
    with pytest.raises(kjit.SpecError) as err:
        kjit.load_inline("py_cuda_bad_arch", cuda_arch=cuda_arch, **BUILD)
    assert str(err.value) == f"cuda_arch: '{entry}' {NOT_AN_ARCH}"


def test_bad_kjit_cuda_arch_is_a_spec_error(monkeypatch):
    monkeypatch.setenv("KJIT_CUDA_ARCH", "sm_80 ampere")
    with pytest.raises(kjit.SpecError) as err:
        kjit.load_inline("py_cuda_bad_arch", **BUILD)
    assert str(err.value) == f"KJIT_CUDA_ARCH: 'ampere' {NOT_AN_ARCH}"


CACHED_LOAD = r"""
import json, sys, time
start = time.perf_counter()
import kjit
imported = time.perf_counter()
mod = kjit.load_inline(**json.load(sys.stdin))
loaded = time.perf_counter()
print(json.dumps({"cache_hit": mod.cache_hit, "key": mod.key, "import_s": imported - start,
                  "load_s": loaded - imported}))
"""


def test_cached_load_in_a_fresh_process_is_a_hit(mod):
    kwargs = dict(BUILD, name="py_cuda_mixed", cuda_arch="sm_90")
    proc = subprocess.run([sys.executable, "-c", CACHED_LOAD], input=json.dumps(kwargs), capture_output=True,
                          text=True, timeout=120, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["cache_hit"] is True and out["key"] == mod.key
    print(f"\ncached CUDA module in a fresh process: load_inline {out['load_s'] * 1e3:.1f} ms "
          f"(import kjit {out['import_s'] * 1e3:.1f} ms)")


# ---- errors in cuda_sources ------------------------------------------------------


def test_compile_error_points_at_the_cuda_source_line():
    good = "__global__ void k(float* x) { x[0] = 1.0f; }\n"
    broken = "#include <cstdint>\nvoid broken(float* x) {\n  x[0] = undefined_name;\n}\n"
    with pytest.raises(kjit.CompileError) as err:
        kjit.load_inline("py_cuda_broken", cuda_sources=[good, broken], functions={"broken": "x: float32[1] out"},
                         cuda_arch="sm_90")
    # nvcc's front end writes file(line); the host compiler file:line.
    assert re.search(r"cuda_sources\[1\](\(3\)|:3:)[^\n]*undefined_name", err.value.log), err.value.log
    assert "/nvcc " in err.value.command or err.value.command.startswith("nvcc ")
    assert "CUDA code" in str(err.value)


def test_a_template_entry_point_is_instantiated_by_nvcc_for_its_dtype_variables(mod):
    stub = mod.get_host_source("fill")
    assert "::ops::fill<float>(" in stub and "::ops::fill<double>(" in stub
    host = mod.get_host_source()
    assert "namespace ops { template <typename T> void fill(kjit::TensorView, double, cudaStream_t);" in host
    # the library defines both instantiations (nvcc compiled them), so the module loaded
    nm = shutil.which("nm")
    if nm is not None:
        symbols = subprocess.run([nm, "-C", "--defined-only", mod.path], capture_output=True, text=True).stdout
        assert "void ops::fill<float>(" in symbols and "void ops::fill<double>(" in symbols, symbols
    with pytest.raises(TypeError, match=r"fill: argument #0 'x': dtype must be one of float32, float64, got int32"):
        mod.fill(np.zeros(3, np.int32), 1.0)


def test_a_template_entry_point_over_no_dtype_variable_is_a_spec_error():
    src = "template <typename T>\nvoid tpl(T* x, int64_t n) {}\n"
    with pytest.raises(kjit.SpecError) as err:
        kjit.load_inline("py_cuda_template", cuda_sources=src, functions={"tpl": "x: float32[n], n: int64"})
    assert str(err.value) == (
        "'tpl' in cuda_sources:2 is a function template over no dtype variable of its signature; kjit instantiates a "
        "template entry point in cuda_sources for the dtypes of its variables (<T: float32|float64> x: T[n] for "
        "template <typename T>), or call the template from a plain function")


HALF_SRC = r"""
#include <cuda_fp16.h>
__global__ void half_fill_kernel(__half* x, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) x[i] = __float2half(1.0f);
}
void half_fill(__half* x, int64_t n, cudaStream_t stream) {
  half_fill_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(x, n);
}
"""


def test_half_pointer_entry_point_builds():
    mod = kjit.load_inline("py_cuda_half", cuda_sources=HALF_SRC, functions=["half_fill"], cuda_arch="sm_90")
    assert mod.functions["half_fill"].startswith("x: float16[...] out")
    with pytest.raises(ValueError, match="device must be cuda, got cpu"):
        mod.half_fill(np.zeros(4, np.float16), 4)
