// float16 blocks for the generated elementwise CPU kernels: where the CPU has F16C, a
// contiguous loop over float16 operands widens a block of each float16 input to
// floats and narrows a block of float results with the conversion instructions. GCC
// vectorises no float16 conversion without AVX-512 FP16, and the bit forms of
// float16_conversions.h take about twice as long as bfloat16's shift. Round to
// nearest even, as those forms; a NaN stays a NaN of its sign (with the payload the
// instructions keep, where those forms make it canonical). Embedded by
// kjit::emit_elementwise_cpu().
#ifndef KJIT_DETAIL_HALF_BLOCKS_H_
#define KJIT_DETAIL_HALF_BLOCKS_H_

#if defined(__F16C__)

#include <cstdint>
#include <cstring>

namespace kjit_half_blocks {
namespace {

// The builtins behind _mm256_cvtph_ps and _mm256_cvtps_ph: the intrinsics' header
// would cost every kernel's compile (<immintrin.h> 0.2 s, stream_stores.h).
typedef short HalfVec __attribute__((vector_size(16)));
typedef float FloatVec __attribute__((vector_size(32)));

/// The floats of the `m` float16 values at `src` (any alignment) into `dst`.
[[maybe_unused]] inline void __widen(float* dst, const char* src, int64_t m) {
  int64_t j = 0;
  for (; j + 8 <= m; j += 8) {
    HalfVec h;
    std::memcpy(&h, src + 2 * j, sizeof(h));
    const FloatVec f = __builtin_ia32_vcvtph2ps256(h);
    std::memcpy(dst + j, &f, sizeof(f));
  }
  if (j < m) {  // the last 1..7, through a padded vector
    HalfVec h = {};
    std::memcpy(&h, src + 2 * j, static_cast<size_t>(m - j) * 2);
    const FloatVec f = __builtin_ia32_vcvtph2ps256(h);
    std::memcpy(dst + j, &f, static_cast<size_t>(m - j) * 4);
  }
}

/// The `m` floats at `src` rounded to float16 (to nearest even) into `dst` (any alignment).
[[maybe_unused]] inline void __narrow(char* dst, const float* src, int64_t m) {
  int64_t j = 0;
  for (; j + 8 <= m; j += 8) {
    FloatVec f;
    std::memcpy(&f, src + j, sizeof(f));
    const HalfVec h = __builtin_ia32_vcvtps2ph256(f, 0);
    std::memcpy(dst + 2 * j, &h, sizeof(h));
  }
  if (j < m) {
    FloatVec f = {};
    std::memcpy(&f, src + j, static_cast<size_t>(m - j) * 4);
    const HalfVec h = __builtin_ia32_vcvtps2ph256(f, 0);
    std::memcpy(dst + 2 * j, &h, static_cast<size_t>(m - j) * 2);
  }
}

}  // namespace
}  // namespace kjit_half_blocks

#endif  // defined(__F16C__)
#endif  // KJIT_DETAIL_HALF_BLOCKS_H_
