"""kjit quickstart: a checked C++ kernel from a string, called with NumPy arrays.

Run with: scripts/run quickstart
"""

import numpy as np

import kjit

SOURCE = r"""
#include <kjit/kernel.h>

// y = alpha * x + y over a batch of rows. Tensors arrive already checked.
void axpy(const kjit::TensorView x, kjit::TensorView y, float alpha) {
  const float* xs = x.data<float>();
  float* ys = y.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) ys[i] += alpha * xs[i];
}
"""

# One signature: shapes share symbols, y is written, and a constraint is checked
# on every call.
mod = kjit.load_inline(
    "quickstart",
    cpp_sources=SOURCE,
    functions={"axpy": "x: float32[m, n], y: float32[m, n] out, alpha: float32; n % 4 == 0"},
)
print(f"built {mod.name} -> {mod.path} (cache hit: {mod.cache_hit})")

x = np.arange(8, dtype=np.float32).reshape(2, 4)
y = np.ones((2, 4), dtype=np.float32)
mod.axpy(x, y, 2.0)
print("y = 2*x + 1 =\n", y)
assert np.allclose(y, 2 * x + 1)

# A rejected call: y's second dimension disagrees with x's.
try:
    mod.axpy(x, np.ones((2, 3), dtype=np.float32), 2.0)
except ValueError as err:
    print("\nrejected call:", type(err).__name__ + ":", err)

# Another: a transposed (non-contiguous) view.
try:
    mod.axpy(x, np.ones((4, 2), dtype=np.float32).T, 2.0)
except ValueError as err:
    print("rejected call:", type(err).__name__ + ":", err)

# The same kernel declared the brainevent way: the spec is read off the C++ definition.
print("\ninferred from the C++ definition:", kjit.resolve(SOURCE, ["axpy"]))

# An elementwise kernel from a computation string, with TensorIterator semantics:
# broadcasting, NumPy 2 promotion, casts inside the kernel, threaded loops.
hypot = kjit.elementwise("template <typename T> T hypot2(T a, T b) { return std::sqrt(a * a + b * b); }")
a = np.arange(3, dtype=np.float32).reshape(3, 1)
b = np.full(4, 4.0, dtype=np.float64)
r = hypot(a, b)
print(f"elementwise hypot: shape {r.shape}, dtype {r.dtype}\n", r)
assert r.dtype == np.float64 and np.allclose(r, np.hypot(a, b))

print("\ngenerated host stub for axpy:\n")
print(mod.get_host_source("axpy"))
