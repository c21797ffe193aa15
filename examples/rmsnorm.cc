// RMSNorm over the last dim of a tensor of any batch shape, forward and backward,
// written once for float and double: the signatures below name a dtype variable T
// (the stub calls rmsnorm<float> or rmsnorm<double>) and a batch group (any
// leading dims), and pair the forward with its backward for torch and JAX
// (docs/torch.md "Autograd", docs/jax.md "Gradients").
#include <kjit/kernel.h>

#include <cmath>
#include <cstdint>

// clang-format off
// @kjit rmsnorm(<T: float32|float64> x: T[*batch, n], w: T[n], y: T[*batch, n] return, eps: float64 = 1e-6) backward=rmsnorm_backward
// clang-format on
template <typename T>
void rmsnorm(const kjit::TensorView x, const kjit::TensorView w, kjit::TensorView y, double eps) {
  const int64_t n = x.size(-1), rows = n == 0 ? 0 : x.numel() / n;
  const T *xs = x.data<T>(), *ws = w.data<T>();
  T* ys = y.data<T>();
  for (int64_t r = 0; r < rows; ++r) {
    double squares = 0;
    for (int64_t j = 0; j < n; ++j) squares += double(xs[r * n + j]) * xs[r * n + j];
    const double inv = 1 / std::sqrt(squares / n + eps);
    for (int64_t j = 0; j < n; ++j) ys[r * n + j] = T(xs[r * n + j] * inv * ws[j]);
  }
}

// grad_x = inv * g - x * inv^3 * mean(g * x), with g = grad_y * w; grad_w sums grad_y * x * inv over rows.
// clang-format off
// @kjit rmsnorm_backward(<T: float32|float64> grad_y: T[*batch, n], x: T[*batch, n], w: T[n], grad_x: T[*batch, n] return, grad_w: T[n] return, eps: float64 = 1e-6)
// clang-format on
template <typename T>
void rmsnorm_backward(const kjit::TensorView grad_y, const kjit::TensorView x, const kjit::TensorView w,
                      kjit::TensorView grad_x, kjit::TensorView grad_w, double eps) {
  const int64_t n = x.size(-1), rows = n == 0 ? 0 : x.numel() / n;
  const T *gy = grad_y.data<T>(), *xs = x.data<T>(), *ws = w.data<T>();
  T *gx = grad_x.data<T>(), *gw = grad_w.data<T>();
  for (int64_t j = 0; j < n; ++j) gw[j] = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double squares = 0, gx_dot = 0;
    for (int64_t j = 0; j < n; ++j) {
      squares += double(xs[r * n + j]) * xs[r * n + j];
      gx_dot += double(gy[r * n + j]) * ws[j] * xs[r * n + j];
    }
    const double inv = 1 / std::sqrt(squares / n + eps);
    for (int64_t j = 0; j < n; ++j) {
      const double g = double(gy[r * n + j]) * ws[j];
      gx[r * n + j] = T(inv * g - xs[r * n + j] * inv * inv * inv * gx_dot / n);
      gw[j] += T(gy[r * n + j] * xs[r * n + j] * inv);
    }
  }
}
