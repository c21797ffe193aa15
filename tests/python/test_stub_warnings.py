"""Every generated stub compiles warning-free under -Wall -Wextra -Werror.

One module holds a kernel per signature (one compile); each kernel has the C++
signature that matches its spec.
"""

import pytest

import kjit

from conftest import build

# name -> (signature, C++ kernel)
CASES = {
    "elementwise": ("a: float32[n], b: float32[n], c: float32[n] out",
                    "void elementwise(const TensorView, const TensorView, TensorView) {}"),
    "typed_ptrs": ("a: float32[n], b: float64[n] out",
                   "void typed_ptrs(const float* a, double* b) { b[0] = a[0]; }"),
    "alternatives": ("a: float16|bfloat16[m, k] align(16), b: any[k] strided",
                     "int64_t alternatives(const TensorView a, const TensorView) { return a.size(0); }"),
    "signed_scalars": ("x: bool, a: int8, b: int16, c: int32, d: int64",
                       "bool signed_scalars(bool x, int8_t, int16_t, int32_t, int64_t) { return x; }"),
    "unsigned_scalars": ("e: uint8, f: uint16, g: uint32, h: uint64, u: float32, v: float64",
                         "double unsigned_scalars(uint8_t, uint16_t, uint32_t, uint64_t h, float u, double v) "
                         "{ return static_cast<double>(h) + u + v; }"),
    "linear": ("a: float32[m], b: float32[n], c: float32[m + n], d: float32[2*m + 1]",
               "void linear(const TensorView, const TensorView, const TensorView, const TensorView) {}"),
    "solve": ("a: float32[2*k + 1], b: float32[k], c: float32[n*k]",
              "void solve(const TensorView, const TensorView, const TensorView) {}"),
    "deferred": ("c: float32[m * n], a: float32[m], b: float32[n]",
                 "void deferred(const TensorView, const TensorView, const TensorView) {}"),
    "matmul": ("a: float32[m, k], b: float32[k, n] strides[ld, 1], c: float32[m, n] out; "
               "k % 8 == 0, n <= 4096, m >= 1, ld != 0",
               "void matmul(const TensorView, const TensorView, TensorView) {}"),
    "optionals": ("x: float32[m] optional, y: float32[m] optional, z: float32[m + 1] optional strided; m <= 4096",
                  "bool optionals(const TensorView x, const TensorView, TensorView) { return x.defined(); }"),
    "symbol_scalars": ("a: float32[n], n: int64, k: int32, b: float32[k / 2]",
                       "int64_t symbol_scalars(const TensorView, int64_t n, int32_t k, const TensorView) "
                       "{ return n + k; }"),
    "with_stream": ("a: bool[n], s: stream", "void with_stream(const TensorView, kjit::Stream) {}"),
    "fp8_complex": ("a: float8_e4m3[n], b: float8_e5m2[n], c: complex64[n], d: float8_e8m0fnu[n]",
                    "void fp8_complex(const TensorView, const TensorView, const TensorView, const TensorView) {}"),
    "ranks": ("a: int64[], b: uint8[0], c: int16[2, 3, 4]",
              "void ranks(const TensorView, const TensorView, const TensorView) {}"),
    "attributes": ("a: float32[n] @cpu, b: float32[n] out optional align(64) @cpu",
                   "void attributes(const TensorView, TensorView) {}"),
    "divisors": ("a: float32[n], b: float32[d]; n % d == 0, n / d < 100",
                 "void divisors(const TensorView, const TensorView) {}"),
    "literal_strides": ("a: float32[4, 4] strides[4, 1], b: float32[8, 2] strides[s, 1]",
                        "void literal_strides(const TensorView, const TensorView) {}"),
    "cuda_stream": ("a: float32[n] @cuda, s: stream", "void cuda_stream(const TensorView, void*) {}"),
}

SOURCE = "#include <kjit/kernel.h>\nusing kjit::TensorView;\n\n" + "\n".join(code for _, code in CASES.values()) + "\n"


@pytest.fixture(scope="module")
def strict_mod():
    return build("strict_stubs", SOURCE, {name: sig for name, (sig, _) in CASES.items()},
                 extra_cflags=["-Wall", "-Wextra", "-Werror"])


@pytest.mark.parametrize("name", sorted(CASES))
def test_stub_compiles_without_warnings(strict_mod, name):
    signature = CASES[name][0]
    assert strict_mod.functions[name] == kjit.parse_signature(signature, name=name)
    assert f"__tvm_ffi_{name}" in strict_mod.get_host_source(name)


def test_strict_module_runs(strict_mod):
    np = pytest.importorskip("numpy")
    assert strict_mod.signed_scalars(True, -1, -2, -3, -4) is True
    assert strict_mod.unsigned_scalars(1, 2, 3, 4, 0.5, 0.25) == 4.75
    assert strict_mod.symbol_scalars(np.zeros(3, np.float32), 3, 8, np.zeros(4, np.float32)) == 11
    assert strict_mod.optionals(None, np.zeros(2, np.float32), None) is False
