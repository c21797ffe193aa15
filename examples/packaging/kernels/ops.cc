#include "ops.h"

#include <kjit/kernel.h>

// @kjit axpy(x: float32[n], y: float32[n] out, alpha: float32 = 2.0)
void axpy(const kjit::TensorView x, kjit::TensorView y, float alpha) {
  const float* xs = x.data<float>();
  float* ys = y.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) ys[i] += alpha * xs[i];
}

// @kjit rms_norm(x: float32[m, n], out: float32[m, n] return, eps: float32 = 1e-6)
void rms_norm(const kjit::TensorView x, kjit::TensorView out, float eps) {
  const int64_t rows = x.size(0), cols = x.size(1);
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x.data<float>() + r * cols;
    float* o = out.data<float>() + r * cols;
    float sum = 0;
    for (int64_t c = 0; c < cols; ++c) sum += squared(in[c]);
    const float scale = 1.0f / std::sqrt(sum / static_cast<float>(cols) + eps);
    for (int64_t c = 0; c < cols; ++c) o[c] = in[c] * scale;
  }
}
