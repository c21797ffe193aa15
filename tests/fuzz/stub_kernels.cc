// Kernels of the stub fuzzer (kjit_fuzz_stub). This file is not compiled alone:
// kjit_fuzz_stubgen reads its `// @kjit` annotations, generates each function's
// stub with kjit's own codegen and writes the module's translation unit.
//
// Each kernel is an oracle: it re-checks, with 128-bit arithmetic, everything its
// spec promises (ranks, extents, dtypes, strides, alignment, constraints, a
// well-formed DLTensor). A stub that lets a violating call through reaches the
// kernel, which traps; a rejected call never gets here. Kernels never touch the
// tensors' data: the fuzzer passes arbitrary data pointers.
#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace fuzz_oracle {

using i128 = __int128;

[[noreturn]] void violated(const char* fn, const char* what) {
  std::fprintf(stderr, "kjit fuzz: BUG: the stub of '%s' let a call through that breaks its spec: %s\n", fn, what);
  std::fflush(stderr);
  std::abort();
}

#define FUZZ_REQUIRE(cond) \
  if (!(cond)) ::fuzz_oracle::violated(__func__, #cond)

i128 floordiv(i128 a, i128 b) {
  i128 q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
i128 floormod(i128 a, i128 b) { return a - floordiv(a, b) * b; }

/// A well-formed CPU tensor of `rank` dims: sane metadata a kernel can index with.
/// Says which field is wrong, so a crash report names the hole in the checks.
bool well_formed(const kjit::TensorView& t, int rank) {
  const DLTensor* d = t.dltensor();
  char what[160];
  if (d->ndim != rank || d->ndim < 0) {
    std::snprintf(what, sizeof(what), "ndim %d (spec rank %d)", d->ndim, rank);
  } else if (d->dtype.bits == 0) {
    std::snprintf(what, sizeof(what), "dtype code %d with 0 bits", d->dtype.code);
  } else if (d->device.device_type != kDLCPU) {
    std::snprintf(what, sizeof(what), "device type %d on a CPU function", d->device.device_type);
  } else {
    for (int i = 0; i < d->ndim; ++i) {
      if (d->shape[i] < 0) std::snprintf(what, sizeof(what), "shape[%d] = %lld", i, (long long)d->shape[i]);
      if (d->shape[i] < 0) break;
    }
    if (std::all_of(d->shape, d->shape + d->ndim, [](int64_t e) { return e >= 0; })) return true;
  }
  std::fprintf(stderr, "kjit fuzz: malformed tensor reached the kernel: %s\n", what);
  return false;
}

bool has_dtype(const kjit::TensorView& t, uint8_t code, uint8_t bits) {
  return t.dtype().code == code && t.dtype().bits == bits && t.dtype().lanes == 1;
}

/// Compact row-major in elements; extents of 1 may have any stride, and an empty
/// tensor (an extent 0 anywhere) has no layout to break, as in PyTorch's is_contiguous.
bool compact(const kjit::TensorView& t) {
  const DLTensor* d = t.dltensor();
  if (d->strides == nullptr) return true;
  for (int i = 0; i < d->ndim; ++i) {
    if (d->shape[i] == 0) return true;
  }
  i128 expected = 1;
  for (int i = d->ndim - 1; i >= 0; --i) {
    if (d->shape[i] != 1 && d->strides[i] != expected) return false;
    expected *= d->shape[i];
  }
  return true;
}

/// The stride of dim `i` in elements (NULL strides mean compact).
i128 stride(const kjit::TensorView& t, int i) {
  const DLTensor* d = t.dltensor();
  if (d->strides != nullptr) return d->strides[i];
  i128 s = 1;
  for (int j = d->ndim - 1; j > i; --j) s *= d->shape[j];
  return s;
}

/// The stride of dim `i` equals `expected`, unless its extent is 0 or 1.
bool stride_is(const kjit::TensorView& t, int i, i128 expected) {
  return t.dltensor()->shape[i] <= 1 || stride(t, i) == expected;
}

}  // namespace fuzz_oracle

// @kjit fz_basic(x: float32[n], y: float32[n] out, alpha: float32)
void fz_basic(const kjit::TensorView x, kjit::TensorView y, float alpha) {
  (void)alpha;
  FUZZ_REQUIRE(fuzz_oracle::well_formed(x, 1) && fuzz_oracle::well_formed(y, 1));
  FUZZ_REQUIRE(fuzz_oracle::has_dtype(x, kDLFloat, 32) && fuzz_oracle::has_dtype(y, kDLFloat, 32));
  FUZZ_REQUIRE(x.size(0) == y.size(0));
  FUZZ_REQUIRE(fuzz_oracle::compact(x) && fuzz_oracle::compact(y));
}

// @kjit fz_divide(n: int64, d: int64, a: float32[n / d])
void fz_divide(int64_t n, int64_t d, const kjit::TensorView a) {
  FUZZ_REQUIRE(d != 0);
  FUZZ_REQUIRE(fuzz_oracle::well_formed(a, 1));
  FUZZ_REQUIRE(a.size(0) == fuzz_oracle::floordiv(n, d));
}

// @kjit fz_modulo(n: int64, d: int64, a: int32[n % d + 1]; n % d >= 0)
void fz_modulo(int64_t n, int64_t d, const kjit::TensorView a) {
  FUZZ_REQUIRE(d != 0);
  FUZZ_REQUIRE(fuzz_oracle::well_formed(a, 1));
  FUZZ_REQUIRE(a.size(0) == fuzz_oracle::floormod(n, d) + 1);
}

// @kjit fz_scaled(n: int64, a: float32[4*n]; n*4 < 100)
int64_t fz_scaled(int64_t n, const kjit::TensorView a) {
  FUZZ_REQUIRE(fuzz_oracle::well_formed(a, 1));
  FUZZ_REQUIRE(a.size(0) == 4 * static_cast<fuzz_oracle::i128>(n));
  FUZZ_REQUIRE(static_cast<fuzz_oracle::i128>(n) * 4 < 100);
  return n;
}

// An annotation is one line, however long.
// clang-format off
// @kjit fz_mm(a: float16|bfloat16[m, k] strided, b: bfloat16[k, n] strides[n, 1], c: float32[m, n] out align(16); k % 8 == 0)
// clang-format on
void fz_mm(const kjit::TensorView a, const kjit::TensorView b, kjit::TensorView c) {
  using fuzz_oracle::i128;
  FUZZ_REQUIRE(fuzz_oracle::well_formed(a, 2) && fuzz_oracle::well_formed(b, 2) && fuzz_oracle::well_formed(c, 2));
  FUZZ_REQUIRE(fuzz_oracle::has_dtype(a, kDLFloat, 16) || fuzz_oracle::has_dtype(a, kDLBfloat, 16));
  FUZZ_REQUIRE(fuzz_oracle::has_dtype(b, kDLBfloat, 16));
  FUZZ_REQUIRE(fuzz_oracle::has_dtype(c, kDLFloat, 32));
  FUZZ_REQUIRE(a.size(1) == b.size(0) && a.size(0) == c.size(0) && b.size(1) == c.size(1));
  FUZZ_REQUIRE(fuzz_oracle::stride_is(b, 0, b.size(1)) && fuzz_oracle::stride_is(b, 1, 1));
  FUZZ_REQUIRE(fuzz_oracle::compact(c));
  FUZZ_REQUIRE((reinterpret_cast<uintptr_t>(c.dltensor()->data) + c.dltensor()->byte_offset) % 16 == 0);
  FUZZ_REQUIRE(fuzz_oracle::floormod(a.size(1), 8) == 0);
}

// @kjit fz_linear(k: int64, y: int32[2*k + 1, k], z: uint8[k, k*k] optional, w: any[...] optional strided)
bool fz_linear(int64_t k, const kjit::TensorView y, const kjit::TensorView z, const kjit::TensorView w) {
  using fuzz_oracle::i128;
  FUZZ_REQUIRE(fuzz_oracle::well_formed(y, 2));
  FUZZ_REQUIRE(y.size(0) == 2 * static_cast<i128>(k) + 1 && y.size(1) == k);
  if (z.defined()) {
    FUZZ_REQUIRE(fuzz_oracle::well_formed(z, 2));
    FUZZ_REQUIRE(z.size(0) == k && z.size(1) == static_cast<i128>(k) * k);
  }
  if (w.defined()) FUZZ_REQUIRE(fuzz_oracle::well_formed(w, w.ndim()) && w.ndim() >= 0);
  return k > 0;
}

// @kjit fz_scalars(flag: bool, i: int8, u: uint64, h: float16, bf: bfloat16, z: complex64, f: float64, v: float32[...])
double fz_scalars(bool flag, int8_t i, uint64_t u, uint16_t h, uint16_t bf, std::complex<float> z, double f,
                  const kjit::TensorView v) {
  (void)u, (void)h, (void)bf, (void)z;
  FUZZ_REQUIRE(fuzz_oracle::well_formed(v, v.ndim()) && v.ndim() >= 0);
  FUZZ_REQUIRE(fuzz_oracle::has_dtype(v, kDLFloat, 32) && fuzz_oracle::compact(v));
  return flag ? f : static_cast<double>(i);
}

// @kjit fz_expr(a: float32[(m - 1) % 3 + 2, m], b: float32[m + p, p - 1], n: int64; m * p != 7, p >= 1)
void fz_expr(const kjit::TensorView a, const kjit::TensorView b, int64_t n) {
  using fuzz_oracle::i128;
  FUZZ_REQUIRE(fuzz_oracle::well_formed(a, 2) && fuzz_oracle::well_formed(b, 2));
  const i128 m = a.size(1);
  FUZZ_REQUIRE(a.size(0) == fuzz_oracle::floormod(m - 1, 3) + 2);
  const i128 p = b.size(1) + static_cast<i128>(1);
  FUZZ_REQUIRE(b.size(0) == m + p && p >= 1);
  FUZZ_REQUIRE(m * p != 7);
  (void)n;
}

// Dtype variables: T and U each one dtype per call, bound by the first tensor present
// that carries it; y takes x's; eps is rounded to T's dtype, k fits U's.
// clang-format off
// @kjit fz_dtype_vars(<T: float32|float64|bfloat16, U: int32|int8> x: T[n], w: T[n] optional, y: dtype(x)[n] out, i: U[m] optional, j: U[m], eps: T, k: U)
// clang-format on
double fz_dtype_vars(const kjit::TensorView x, const kjit::TensorView w, kjit::TensorView y, const kjit::TensorView i,
                     const kjit::TensorView j, double eps, int64_t k) {
  using fuzz_oracle::has_dtype;
  FUZZ_REQUIRE(fuzz_oracle::well_formed(x, 1) && fuzz_oracle::well_formed(y, 1) && fuzz_oracle::well_formed(j, 1));
  const bool f32 = has_dtype(x, kDLFloat, 32), f64 = has_dtype(x, kDLFloat, 64), bf16 = has_dtype(x, kDLBfloat, 16);
  FUZZ_REQUIRE(f32 || f64 || bf16);
  auto same = [](const kjit::TensorView& a, const kjit::TensorView& b) {
    return a.dtype().code == b.dtype().code && a.dtype().bits == b.dtype().bits && a.dtype().lanes == b.dtype().lanes;
  };
  if (w.defined()) FUZZ_REQUIRE(fuzz_oracle::well_formed(w, 1) && same(w, x) && w.size(0) == x.size(0));
  FUZZ_REQUIRE(same(y, x) && y.size(0) == x.size(0));
  const bool i32 = has_dtype(j, kDLInt, 32);
  FUZZ_REQUIRE(i32 || has_dtype(j, kDLInt, 8));
  if (i.defined()) FUZZ_REQUIRE(fuzz_oracle::well_formed(i, 1) && same(i, j) && i.size(0) == j.size(0));
  FUZZ_REQUIRE(i32 ? k >= INT32_MIN && k <= INT32_MAX : k >= -128 && k <= 127);
  FUZZ_REQUIRE(!f32 || eps != eps || static_cast<double>(static_cast<float>(eps)) == eps);
  return eps;
}

// Batch groups: a, c and d share their leading dims (*b), bound by a; c may be None.
// clang-format off
// @kjit fz_batch(a: float32[*b, n], c: float32[*b] optional, d: float32[*b, 2, n] out)
// clang-format on
void fz_batch(const kjit::TensorView a, const kjit::TensorView c, kjit::TensorView d) {
  using fuzz_oracle::compact;
  FUZZ_REQUIRE(a.ndim() >= 1 && fuzz_oracle::well_formed(a, a.ndim()) && compact(a));
  FUZZ_REQUIRE(fuzz_oracle::has_dtype(a, kDLFloat, 32) && fuzz_oracle::has_dtype(d, kDLFloat, 32));
  const int lead = a.ndim() - 1;
  FUZZ_REQUIRE(d.ndim() == lead + 2 && fuzz_oracle::well_formed(d, d.ndim()) && compact(d));
  for (int i = 0; i < lead; ++i) FUZZ_REQUIRE(d.size(i) == a.size(i));
  FUZZ_REQUIRE(d.size(lead) == 2 && d.size(lead + 1) == a.size(lead));
  if (c.defined()) {
    FUZZ_REQUIRE(c.ndim() == lead && fuzz_oracle::well_formed(c, lead) && compact(c));
    FUZZ_REQUIRE(fuzz_oracle::has_dtype(c, kDLFloat, 32));
    for (int i = 0; i < lead; ++i) FUZZ_REQUIRE(c.size(i) == a.size(i));
  }
}
