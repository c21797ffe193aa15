"""examples/packaging end to end: its wheel (kernels built ahead of time by CMake's
kjit_add_module under scikit-build-core) and a kjit wheel of this tree go into a
fresh virtual environment, and its kernels run there with no compiler on PATH,
CXX=/nonexistent and an empty kjit cache. pip fetches kjit's own dependencies
(apache-tvm-ffi, NumPy) as any user's install would, from its cache when it can."""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "packaging"

pytestmark = pytest.mark.skipif(shutil.which("cmake") is None or shutil.which("c++") is None,
                                reason="needs cmake and a C++ compiler")

CHECK = r"""
import numpy as np
import kjit_example_kernels as k

assert k.functions == {"axpy": "x: float32[n], y: float32[n] out, alpha: float32 = 2.0",
                       "rms_norm": "x: float32[m, n], out: float32[m, n] return, eps: float32 = 1e-6"}, k.functions
y = np.zeros(3, np.float32)
k.axpy(np.ones(3, np.float32), y)
assert y.tolist() == [2.0, 2.0, 2.0]
x = np.arange(8, dtype=np.float32).reshape(2, 4)
expected = x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-6)
np.testing.assert_allclose(k.rms_norm(x), expected, rtol=1e-6)
try:
    k.axpy(np.ones(3), y)
except TypeError as err:
    print(err)
"""


def _pip(python, *args, cwd=None):
    proc = subprocess.run([str(python), "-m", "pip", "--disable-pip-version-check", "-q", *args],
                          capture_output=True, text=True, timeout=900, cwd=cwd)
    assert proc.returncode == 0, f"pip {' '.join(args)}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


def test_the_example_wheel_runs_in_a_fresh_venv_without_a_compiler(tmp_path):
    pytest.importorskip("scikit_build_core")
    wheels = tmp_path / "wheels"
    # This environment has scikit-build-core and kjit: both wheels build without isolation.
    _pip(sys.executable, "wheel", "--no-build-isolation", "--no-deps", str(EXAMPLE), "-w", str(wheels))
    _pip(sys.executable, "wheel", "--no-build-isolation", "--no-deps", str(ROOT), "-w", str(wheels))
    example = next(wheels.glob("kjit_example_kernels-*.whl"))
    assert {"kjit_example_kernels/_kernels.so", "kjit_example_kernels/__init__.py"} <= set(
        subprocess.run([sys.executable, "-m", "zipfile", "-l", str(example)], capture_output=True, text=True,
                       check=True).stdout.split())

    venv = tmp_path / "fresh"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    _pip(python, "install", "--find-links", str(wheels), "kjit-example-kernels")

    cache = tmp_path / "empty_cache"
    cache.mkdir()
    env = {"PATH": str(venv / "bin"), "HOME": str(tmp_path), "CXX": "/nonexistent", "KJIT_CACHE_DIR": str(cache)}
    run = subprocess.run([str(python), "-c", CHECK], capture_output=True, text=True, env=env, timeout=300,
                         cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-4000:]
    assert run.stdout.strip() == "axpy: argument #0 'x': dtype must be float32, got float64"
    assert list(cache.iterdir()) == []
