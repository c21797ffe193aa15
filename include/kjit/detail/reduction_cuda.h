// kjit/detail/reduction_cuda.h — the loops of kjit.reduction's CUDA kernels,
// compiled by NVRTC after elementwise_cuda_prelude.h, the user's code and the
// generated Ops (the CPU loops' Ops, with device functions). Two kernels without
// shared memory or barriers, so a host emulation can run them thread by thread:
//
//   kjit_red_partial: thread g reduces part `part` of output `o`: the reduced
//     elements part, part + parts, part + 2 parts, ... (adjacent threads read
//     adjacent elements of a reduction along memory); with parts == 1 it stores
//     the output, else its accumulator into partials[o][part];
//   kjit_red_finish: thread o combines partials[o][0..parts) in order and stores.
//
// With `outputs_fastest`, adjacent threads take adjacent outputs instead (an outer
// reduction: the outputs lie along the input's memory).
#ifndef KJIT_DETAIL_REDUCTION_CUDA_H_
#define KJIT_DETAIL_REDUCTION_CUDA_H_

#ifndef KJIT_RED_OPS
#define KJIT_RED_OPS 2  // operands: the output, then the inputs (the generated source defines it)
#endif
#define KJIT_RED_CUDA_MAX_DIMS 8
#define KJIT_RED_CUDA_THREADS 256

/// One launch's problem, passed by value (the host packs the same layout,
/// src/cuda/cuda_reduction.h): dims slowest first, strides in bytes.
struct kjit_red_cuda_problem {
  int64_t outputs;          ///< elements of the output
  int64_t count;            ///< elements reduced into each output (post's n)
  int64_t parts;            ///< threads per output; 1: no partials
  int32_t n_kept;           ///< output dims
  int32_t n_reduced;        ///< reduced dims, at least 1
  int32_t outputs_fastest;  ///< adjacent threads take adjacent outputs
  int32_t reserved;
  int64_t kept_shape[KJIT_RED_CUDA_MAX_DIMS];
  int64_t reduced_shape[KJIT_RED_CUDA_MAX_DIMS];
  int64_t kept_strides[KJIT_RED_CUDA_MAX_DIMS][KJIT_RED_OPS];
  int64_t reduced_strides[KJIT_RED_CUDA_MAX_DIMS][KJIT_RED_OPS];
  char* data[KJIT_RED_OPS];                ///< nullptr: the operand is a scalar in `scalars`
  char* partials;                          ///< [output][part] accumulators (parts > 1)
  alignas(16) unsigned char identity[16];  ///< the identity in the accumulator type
  /// A Python scalar input's value in its load type (its strides are 0), as the
  /// CPU kernels read it from the host: no device memory to copy it to first.
  alignas(16) unsigned char scalars[KJIT_RED_OPS][16];
};

/// Moves each operand's pointer to linear index `i` of dims `shape[0..n)`.
__device__ __forceinline__ void kjit_red_cuda_locate(int64_t i, int n, const int64_t* shape,
                                                     const int64_t (*strides)[KJIT_RED_OPS], char** at) {
  for (int d = n - 1; d >= 0; --d) {
    const int64_t q = i / shape[d], r = i - q * shape[d];
    for (int op = 0; op < KJIT_RED_OPS; ++op) at[op] += r * strides[d][op];
    i = q;
  }
}

/// The pointers of output `o`'s first element.
__device__ __forceinline__ void kjit_red_cuda_output(const kjit_red_cuda_problem& p, int64_t o, char** at) {
  for (int op = 0; op < KJIT_RED_OPS; ++op) {
    at[op] = p.data[op] != nullptr ? p.data[op] : const_cast<char*>(reinterpret_cast<const char*>(p.scalars[op]));
  }
  kjit_red_cuda_locate(o, p.n_kept, p.kept_shape, p.kept_strides, at);
}

template <class Ops>
__device__ __forceinline__ void kjit_red_cuda_partial(const kjit_red_cuda_problem& p, int64_t g) {
  if (g >= p.outputs * p.parts) return;
  const int64_t o = p.outputs_fastest ? g % p.outputs : g / p.parts;
  const int64_t part = p.outputs_fastest ? g / p.outputs : g % p.parts;
  char* base[KJIT_RED_OPS];
  kjit_red_cuda_output(p, o, base);
  auto value_at = [&](int64_t r) {
    char* at[KJIT_RED_OPS];
    if (p.n_reduced == 1) {  // the common case: no division per element
      for (int op = 0; op < KJIT_RED_OPS; ++op) at[op] = base[op] + r * p.reduced_strides[0][op];
    } else {
      for (int op = 0; op < KJIT_RED_OPS; ++op) at[op] = base[op];
      kjit_red_cuda_locate(r, p.n_reduced, p.reduced_shape, p.reduced_strides, at);
    }
    return Ops::__map(at, r);
  };
  // From the part's first element: a combine without an identity (max) never sees
  // one; only an empty reduction stores the identity.
  typename Ops::__Acc acc = part < p.count ? value_at(part) : Ops::__identity(p.identity);
  for (int64_t r = part + p.parts; r < p.count; r += p.parts) acc = Ops::__combine(acc, value_at(r));
  if (p.parts == 1) {
    Ops::__store(base[0], acc, p.count);
  } else {
    reinterpret_cast<typename Ops::__Acc*>(p.partials)[o * p.parts + part] = acc;
  }
}

template <class Ops>
__device__ __forceinline__ void kjit_red_cuda_finish(const kjit_red_cuda_problem& p, int64_t o) {
  if (o >= p.outputs) return;
  const typename Ops::__Acc* partial = reinterpret_cast<const typename Ops::__Acc*>(p.partials) + o * p.parts;
  typename Ops::__Acc acc = partial[0];
  for (int64_t k = 1; k < p.parts; ++k) acc = Ops::__combine(acc, partial[k]);
  char* base[KJIT_RED_OPS];
  kjit_red_cuda_output(p, o, base);
  Ops::__store(base[0], acc, p.count);
}

#endif  // KJIT_DETAIL_REDUCTION_CUDA_H_
