"""brainevent kernels through kjit against brainevent's own installed headers:
its CPU examples (the kind its kernix tests and tutorial write) run through
load_inline and kjit.jax.register under jit and vmap, BE_CHECK failures arrive as
Python errors, and a representative subset of its real CUDA files builds with nvcc
(all 45: scripts/brainevent_build_all.py)."""

import importlib.util
import os
import shutil

import numpy as np
import pytest

import kjit
from kjit.module import brainevent_include_dir

pytestmark = pytest.mark.skipif(importlib.util.find_spec("brainevent") is None,
                                reason="brainevent is not installed (scripts/run installs it)")

ADD_ONE = r"""
#include "brainevent/common.h"

// @BE be_add_one
void be_add_one(const BE::Tensor x, BE::Tensor y) {
  const float* in = x.data_ptr<const float>();
  float* out = y.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) out[i] = in[i] + 1.0f;
}

// @BE be_axpy arg arg ret attr.alpha
void be_axpy(const BE::Tensor x, const BE::Tensor y, BE::Tensor out, float alpha) {
  BE_CHECK(x.dtype() == BE::DType::Float32) << "be_axpy wants float32, got " << BE::dtype_name(x.dtype());
  BE_CHECK(x.ndim() == out.ndim() && x.shape(0) == out.shape(0)) << "shape mismatch";
  for (int64_t i = 0; i < x.numel(); ++i)
    out.data_ptr<float>()[i] = alpha * x.data_ptr<const float>()[i] + y.data_ptr<const float>()[i];
}

// @BE be_split
void be_split(const BE::Tensor x, BE::Tensor lo, BE::Tensor hi) {
  int64_t half = x.numel() / 2;
  for (int64_t i = 0; i < half; ++i) lo.data_ptr<float>()[i] = x.data_ptr<const float>()[i];
  for (int64_t i = half; i < x.numel(); ++i) hi.data_ptr<float>()[i - half] = x.data_ptr<const float>()[i];
}

// @BE be_never
void be_never(const BE::Tensor x, BE::Tensor y) {
  BE_CHECK(x.numel() < 0) << "be_never: numel=" << x.numel();
}

// @BE be_meta
void be_meta(const BE::Tensor x, BE::Tensor meta) {
  int64_t* m = meta.data_ptr<int64_t>();
  m[0] = x.ndim();
  m[1] = static_cast<int64_t>(x.dtype());
  m[2] = static_cast<int64_t>(x.nbytes());
  m[3] = x.stride(0);
}
"""


@pytest.fixture(scope="module")
def mod():
    return kjit.load_inline("be_cpu_examples", cpp_sources=ADD_ONE, functions=None)


def test_the_real_headers_are_used(mod):
    assert brainevent_include_dir().endswith(os.path.join("brainevent", "include"))
    unit = mod.get_host_source()
    assert "#include <kjit/detail/brainevent_bridge.h>" in unit
    assert "using Tensor = ::kjit::TensorView" not in unit


def test_cpu_kernels_run_through_load_inline(mod):
    x = np.arange(6, dtype=np.float32)
    y = np.empty(6, dtype=np.float32)
    mod.be_add_one(x, y)
    assert y.tolist() == (x + 1).tolist()
    out = np.empty(6, dtype=np.float32)
    mod.be_axpy(x, np.ones(6, dtype=np.float32), out, 2.0)
    assert out.tolist() == (2 * x + 1).tolist()
    lo, hi = np.empty(3, np.float32), np.empty(3, np.float32)
    mod.be_split(x, lo, hi)
    assert lo.tolist() == [0, 1, 2] and hi.tolist() == [3, 4, 5]


def test_be_tensor_is_built_as_brainevent_builds_it(mod):
    # A view with a byte_offset: the data pointer starts after it; strides are
    # C-contiguous element counts; dtype is BE::DType (Float64 = 2).
    base = np.zeros((3, 4), dtype=np.float64)
    meta = np.zeros(4, dtype=np.int64)
    mod.be_meta(base[1:], meta)
    assert meta.tolist() == [2, 2, 2 * 4 * 8, 4]
    y = np.zeros(8, dtype=np.float32)
    x = np.arange(8, dtype=np.float32)
    mod.be_add_one(x[4:], y[4:])
    assert y.tolist() == [0, 0, 0, 0, 5, 6, 7, 8]


def test_what_be_tensor_cannot_hold_is_rejected_as_brainevent_rejects_it(mod):
    # A rank above BE::kMaxDim (8): brainevent's own std::out_of_range -> IndexError.
    with pytest.raises(IndexError) as err:
        mod.be_add_one(np.zeros((1,) * 9, np.float32), np.zeros((1,) * 9, np.float32))
    assert "BE::Tensor: ndim 9 is out of range [0, 8]" in str(err.value)


def test_be_check_failure_is_a_python_error(mod):
    with pytest.raises(RuntimeError) as err:
        mod.be_never(np.zeros(3, np.float32), np.zeros(3, np.float32))
    assert "be_never: numel=3" in str(err.value)
    with pytest.raises(RuntimeError) as err:
        mod.be_axpy(np.zeros(2), np.zeros(2), np.zeros(2), 1.0)
    assert "be_axpy wants float32, got float64" in str(err.value)


def test_cpu_kernels_under_jax_jit_and_vmap(mod):
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    kjit.jax.register(mod)

    def add_one(x):
        return jax.ffi.ffi_call("be_cpu_examples.be_add_one", jax.ShapeDtypeStruct(x.shape, x.dtype),
                                vmap_method="broadcast_all")(x)

    def axpy(x, y):
        return jax.ffi.ffi_call("be_cpu_examples.be_axpy", jax.ShapeDtypeStruct(x.shape, x.dtype),
                                vmap_method="broadcast_all")(x, y, alpha=np.float32(3))

    x = jnp.arange(8, dtype=jnp.float32)
    assert np.asarray(jax.jit(add_one)(x)).tolist() == (np.arange(8) + 1).tolist()
    batch = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
    assert np.asarray(jax.jit(jax.vmap(add_one))(batch)).tolist() == (np.arange(12).reshape(3, 4) + 1).tolist()
    got = jax.jit(jax.vmap(axpy))(batch, jnp.ones((3, 4), jnp.float32))
    np.testing.assert_array_equal(np.asarray(got), 3 * np.arange(12).reshape(3, 4) + 1)

    def never(x):
        return jax.ffi.ffi_call("be_cpu_examples.be_never", jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

    with pytest.raises(Exception) as err:
        jax.block_until_ready(jax.jit(never)(x))
    assert "be_never: numel=8" in str(err.value)


def test_without_brainevent_headers_the_compat_header_is_used(monkeypatch):
    # KJIT_BRAINEVENT_INCLUDE="" : kjit's own BE::Tensor (an alias of kjit::TensorView).
    monkeypatch.setenv("KJIT_BRAINEVENT_INCLUDE", "")
    src = r"""
#include "brainevent/common.h"
// @BE compat_add_one
void compat_add_one(const BE::Tensor x, BE::Tensor y) {
  for (int64_t i = 0; i < x.numel(); ++i) y.data<float>()[i] = x.data<float>()[i] + 1.0f;
}
"""
    m = kjit.load_inline("be_compat_examples", cpp_sources=src, functions=None)
    y = np.empty(3, np.float32)
    m.compat_add_one(np.arange(3, dtype=np.float32), y)
    assert y.tolist() == [1, 2, 3]


HAVE_NVCC = shutil.which("nvcc") is not None or os.path.exists("/usr/local/cuda/bin/nvcc")
# Representative: the cuBLAS caller (extra link flag), a dense file, and a
# macro-heavy CSR file; all 45 are built by scripts/brainevent_build_all.py.
SUBSET = ["_dense/binary_dense_cublas.cu", "_dense/binary_densemv.cu", "_csr/csr_to_csc.cu"]


@pytest.mark.skipif(not HAVE_NVCC, reason="no CUDA toolkit (nvcc)")
@pytest.mark.parametrize("rel", SUBSET)
def test_real_cuda_files_build_and_register(rel):
    jax = pytest.importorskip("jax")  # noqa: F841
    root = os.path.dirname(brainevent_include_dir())
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        text = f.read()
    name = "be" + rel.replace("/", "_")[: -len(".cu")]
    mod = kjit.load_inline(name, cuda_sources=[text], functions=None, cuda_arch="sm_80,sm_90", jax=True,
                           extra_ldflags=["-lcublas"] if "cublas_v2.h" in text else [])
    from brainevent._op.kernix_codegen import parse_annotations

    assert list(mod.functions) == list(parse_annotations(text))
    assert all("@cuda" in sig for sig in mod.functions.values())
    targets = kjit.jax.register(mod, platform="cuda")
    assert targets == [f"{name}.{fn}" for fn in mod.functions]
