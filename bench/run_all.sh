#!/usr/bin/env bash
# Runs kjit's three benchmarks: C++ stub call cost, Python call overhead, build/load time.
# Usage: bench/run_all.sh            (from anywhere; PYTHON overrides the interpreter)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
BUILD="$ROOT/build/bench"
JOBS="${JOBS:-2}"

# Every benchmark uses its own temp cache dirs; this keeps anything stray out of ~/.cache.
KJIT_CACHE_DIR="$(mktemp -d -t kjit-bench-cache-XXXXXX)"
export KJIT_CACHE_DIR
trap 'rm -rf "$KJIT_CACHE_DIR"' EXIT

# Anchors only the benchmarks need: jax-tvm-ffi (JAX through tvm-ffi).
"$PY" -m pip install -q --disable-pip-version-check "jax[cpu]>=0.5" jax-tvm-ffi

echo "== [1/7] C++: generated stub vs tvm-ffi typed export (Google Benchmark) =="
TVM_FFI_CMAKEDIR="$("$PY" -m tvm_ffi.config --cmakedir)"
cmake -S "$ROOT" -B "$BUILD" \
  -DCMAKE_BUILD_TYPE=Release \
  -DKJIT_BUILD_BENCH=ON \
  -DPython_EXECUTABLE="$PY" \
  -Dtvm_ffi_ROOT="$TVM_FFI_CMAKEDIR" >/dev/null
cmake --build "$BUILD" -j"$JOBS" --target kjit kjit_call bench_stub_call bench_elementwise_call
# The Python benchmarks measure this tree's build, not whatever kjit the venv holds.
export KJIT_LIBRARY="${KJIT_LIBRARY:-$BUILD/libkjit.so}"
export PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}"
"$BUILD/bench/cpp/bench_stub_call" --benchmark_color=false
echo "-- the C++ side of a 1-element kjit.elementwise call --"
"$BUILD/bench/cpp/bench_elementwise_call" --benchmark_color=false

echo
echo "== [2/7] Python: per-call overhead, kjit vs tvm_ffi.cpp.load_inline export =="
"$PY" "$ROOT/bench/bench_call_overhead.py"

echo
echo "== [3/7] Python: cold and cached load_inline, kjit vs tvm_ffi.cpp.load_inline =="
"$PY" "$ROOT/bench/bench_compile.py"

echo
echo "== [4/7] JAX: jitted call of a kjit XLA target vs jax-tvm-ffi and a hand-written ffi.h handler =="
"$PY" "$ROOT/bench/bench_jax.py"

echo
echo "== [5/7] CUDA: cold and cached load_inline(cuda_sources=...), kjit vs tvm_ffi.cpp.load_inline =="
"$PY" "$ROOT/bench/bench_cuda_compile.py"

echo
echo "== [6/7] Elementwise (CPU): kjit.elementwise vs NumPy, PyTorch and a C OpenMP loop =="
"$PY" "$ROOT/bench/bench_elementwise.py"

echo
echo "== [7/7] Math functions (CPU): kjit.elementwise vs PyTorch and NumPy, time and ULP error =="
"$PY" "$ROOT/bench/bench_expressions.py"
