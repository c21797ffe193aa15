// kjit/cpu_kernel.h — typed loops over a TensorIterator, as PyTorch's cpu_kernel:
//
//   kjit::cpu_kernel(iter, [](float a, float b) -> float { return a + b; });
//   kjit::cpu_reduce(iter, 0.0f, [](float acc, float x) { return acc + x; });
//
// cpu_reduce takes an iterator built with is_reduction(true): the output has the
// input's dims, 1 where it reduces.
//
// The lambda's parameter and return types must be the operands' dtypes (checked:
// TypeError). Contiguous runs go through fixed-size blocks the compiler
// vectorises at -O2; threads come from kjit's pool above a grain.
#ifndef KJIT_CPU_KERNEL_H_
#define KJIT_CPU_KERNEL_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "kjit/detail/stream_stores.h"
#include "kjit/tensor_iterator.h"

namespace kjit {
namespace detail {

/// The result and parameter types of a lambda, function object or function pointer.
template <typename F>
struct FunctionTraits : FunctionTraits<decltype(&F::operator())> {};
template <typename R, typename... A>
struct FunctionTraits<R (*)(A...)> {
  using Result = R;
  using Args = std::tuple<std::decay_t<A>...>;
  static constexpr int kArity = sizeof...(A);
};
template <typename R, typename... A>
struct FunctionTraits<R(A...)> : FunctionTraits<R (*)(A...)> {};
template <typename C, typename R, typename... A>
struct FunctionTraits<R (C::*)(A...) const> : FunctionTraits<R (*)(A...)> {};
template <typename C, typename R, typename... A>
struct FunctionTraits<R (C::*)(A...)> : FunctionTraits<R (*)(A...)> {};

template <typename T>
T load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <typename T>
void store(char* p, const T& v) {
  std::memcpy(p, &v, sizeof(T));
}

/// Elements per block of a contiguous run: the block's arrays are the vector
/// lanes (GCC's -O2 vectorises loops of a known multiple of the vector width).
constexpr int64_t kBlock = 16;

[[noreturn]] inline void kernel_error(const char* fn, const std::string& what) {
  throw ValueError(std::string("kjit::") + fn + ": " + what);
}

/// Throws unless the iterator runs on the CPU and operand `arg` is `want`.
inline void check_operand_dtype(const char* fn, const TensorIterator& iter, int arg, DataType want,
                                const std::string& role) {
  if (same_dtype(iter.dtype(arg), want)) return;
  throw TypeError(std::string("kjit::") + fn + ": " + operand_label(arg, iter.noutputs()) + " is " +
                  dtype_name(iter.dtype(arg)) + ", " + role + " is " + dtype_name(want));
}

inline void check_cpu(const char* fn, const TensorIterator& iter) {
  if (iter.device().device_type != kDLCPU && iter.device().device_type != kDLCUDAHost) {
    kernel_error(fn, "it runs on the CPU, the operands are on " + device_text(iter.device()));
  }
}

template <typename T>
struct Block {
  T v[kBlock];
};

/// One row of `n` elements: out = op(in...), each operand at its byte stride.
/// A block of contiguous elements from `p`, or one broadcast (stride 0) value.
template <typename T>
void fill_block(T (&block)[kBlock], const char* p, int64_t stride) {
  if (stride == 0) {
    const T v = load<T>(p);
    for (int64_t j = 0; j < kBlock; ++j) block[j] = v;
  } else {
    std::memcpy(block, p, sizeof(block));
  }
}

/// The first n / kBlock blocks of a contiguous row; returns the elements done.
/// The output is an input only as the same elements (build() refuses partial
/// overlap), and each element is read before it is written, so the pointers may
/// be taken as not aliasing: the block loop vectorises without alias checks.
/// Not inlined: GCC drops __restrict of inlined parameters.
template <typename R, typename F, typename... A>
__attribute__((noinline)) int64_t contiguous_blocks(const F& op, int64_t n, R* __restrict out,
                                                    const A* __restrict... in) {
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    R* __restrict block = out + i;  // a loop of a constant count from 0: what -O2 vectorises
    for (int j = 0; j < kBlock; ++j) block[j] = op(in[i + j]...);
  }
  return i;
}

#if defined(__SSE2__)
/// Bytes of a contiguous output run from which it is written past the caches, and
/// the blocks that are computed locally, then streamed (as kjit.elementwise's
/// kernels: src/cpu/codegen_cpu.cc).
constexpr int64_t kStreamFrom = int64_t{1} << 22;
constexpr int kStreamBlockBytes = 256;

/// A contiguous row whose output is beyond the caches: non-temporal stores skip
/// reading the output lines first.
template <typename R, typename F, typename... A>
__attribute__((noinline)) void streamed_row(const F& op, int64_t n, R* __restrict out, const A* __restrict... in) {
  constexpr int kPer = kStreamBlockBytes / sizeof(R);
  int64_t i = 0;
  for (; i < n && (reinterpret_cast<uintptr_t>(out + i) & 63) != 0; ++i) out[i] = op(in[i]...);
  alignas(64) R buf[kPer];
  for (; i + kPer <= n; i += kPer) {
    for (int j = 0; j < kPer; ++j) buf[j] = op(in[i + j]...);
    for (int q = 0; q < kStreamBlockBytes; q += 64) {
      kjit_stream::__stream64(reinterpret_cast<char*>(out + i) + q, reinterpret_cast<const char*>(buf) + q);
    }
  }
  for (; i < n; ++i) out[i] = op(in[i]...);
  kjit_stream::__stream_fence();
}
#endif

template <typename R, typename Args, typename F, size_t... I>
void kernel_row(char** data, const int64_t* strides, int64_t n, const F& op, std::index_sequence<I...>) {
  bool contiguous = strides[0] == sizeof(R);
  ((contiguous &= strides[I + 1] == sizeof(std::tuple_element_t<I, Args>)), ...);
  bool blockable = strides[0] == sizeof(R);  // output contiguous, inputs contiguous or broadcast
  ((blockable &= strides[I + 1] == 0 || strides[I + 1] == sizeof(std::tuple_element_t<I, Args>)), ...);
  int64_t i = 0;
#if defined(__SSE2__)
  if (contiguous && n * static_cast<int64_t>(sizeof(R)) >= kStreamFrom && kStreamBlockBytes % sizeof(R) == 0) {
    streamed_row(op, n, reinterpret_cast<R*>(data[0]),
                 reinterpret_cast<const std::tuple_element_t<I, Args>*>(data[I + 1])...);
    return;
  }
#endif
  if (contiguous) {
    i = contiguous_blocks(op, n, reinterpret_cast<R*>(data[0]),
                          reinterpret_cast<const std::tuple_element_t<I, Args>*>(data[I + 1])...);
  } else if (blockable) {
    // Copies in and out of local arrays: they cannot alias, so the middle loop
    // vectorises even when the output is an input (in place).
    std::tuple<Block<std::tuple_element_t<I, Args>>...> in;
    Block<R> out;
    for (; i + kBlock <= n; i += kBlock) {
      (fill_block(std::get<I>(in).v, data[I + 1] + i * strides[I + 1], strides[I + 1]), ...);
      for (int64_t j = 0; j < kBlock; ++j) out.v[j] = op(std::get<I>(in).v[j]...);
      std::memcpy(data[0] + i * sizeof(R), out.v, sizeof(out.v));
    }
  }
  for (; i < n; ++i) {
    store<R>(data[0] + i * strides[0], op(load<std::tuple_element_t<I, Args>>(data[I + 1] + i * strides[I + 1])...));
  }
}

template <typename Args, size_t... I>
void check_inputs(const char* fn, const TensorIterator& iter, std::index_sequence<I...>) {
  (void)fn;  // unused without inputs
  (check_operand_dtype(fn, iter, 1 + I, dtype_of<std::tuple_element_t<I, Args>>(),
                       "the lambda's argument " + std::to_string(I)),
   ...);
}

}  // namespace detail

/// Runs `op` over the iterator: its one output gets op(inputs...) at each
/// element. op's return type must be the output's dtype and its parameters the
/// inputs' dtypes, in order. Threads on kjit's pool from `grain` elements.
template <typename F>
void cpu_kernel(const TensorIterator& iter, const F& op, int64_t grain = kGrainSize) {
  using Traits = detail::FunctionTraits<F>;
  using R = std::decay_t<typename Traits::Result>;
  using Args = typename Traits::Args;
  static_assert(has_dtype<R>(), "kjit::cpu_kernel: the lambda must return a type with a dtype (kjit/dtype.h)");
  constexpr int kArity = Traits::kArity;
  if (iter.noutputs() != 1) {
    detail::kernel_error("cpu_kernel", "it writes one output, the iterator has " + std::to_string(iter.noutputs()));
  }
  if (iter.ninputs() != kArity) {
    detail::kernel_error("cpu_kernel", "the lambda takes " + std::to_string(kArity) + " arguments, the iterator has " +
                                           std::to_string(iter.ninputs()) + " inputs");
  }
  detail::check_cpu("cpu_kernel", iter);
  detail::check_operand_dtype("cpu_kernel", iter, 0, dtype_of<R>(), "the lambda returns");
  detail::check_inputs<Args>("cpu_kernel", iter, std::make_index_sequence<kArity>());
  iter.for_each(
      [&](char** data, const int64_t* strides, int64_t n0, int64_t n1) {
        char* row[kArity + 1];
        for (int64_t j = 0; j < n1; ++j) {
          for (int a = 0; a <= kArity; ++a) row[a] = data[a] + j * strides[kArity + 1 + a];
          detail::kernel_row<R, Args>(row, strides, n0, op, std::make_index_sequence<kArity>());
        }
      },
      grain);
}

namespace detail {

/// Lanes of a contiguous reduced run: independent accumulators the compiler keeps
/// in vector registers, combined in order at the end of the run.
constexpr int kReduceLanes = 8;

/// cpu_reduce's split: from this many outputs each output is reduced whole (by one
/// thread); below it each long reduction is split into at most this many parts.
constexpr int64_t kWholeOutputsFrom = 64;

template <typename Acc, typename T, typename Reduce, typename Combine>
Acc reduce_row(Acc acc, const char* p, int64_t stride, int64_t n, const Acc& identity, const Reduce& reduce,
               const Combine& combine) {
  int64_t i = 0;
  if (stride == sizeof(T) && n >= 2 * kBlock) {
    Acc lanes[kReduceLanes];
    for (Acc& l : lanes) l = identity;
    T block[kBlock];
    for (; i + kBlock <= n; i += kBlock) {
      std::memcpy(block, p + i * sizeof(T), sizeof(block));
      for (int64_t j = 0; j < kBlock; j += kReduceLanes) {
        for (int l = 0; l < kReduceLanes; ++l) lanes[l] = reduce(lanes[l], block[j + l]);
      }
    }
    for (const Acc& l : lanes) acc = combine(acc, l);
  }
  for (; i < n; ++i) acc = reduce(acc, load<T>(p + i * stride));
  return acc;
}

/// The layout cpu_reduce walks: reduce dims [0, r) of the loop nest (the
/// output's stride is 0 there; build() put them innermost), keep dims [r, ndim).
struct ReduceShape {
  int r = 0;
  int64_t reduced = 1;  ///< elements per output
  int64_t outputs = 1;
};

inline ReduceShape reduce_shape(const TensorIterator& iter) {
  ReduceShape rs;
  const DimVector& shape = iter.shape();
  while (rs.r < iter.ndim() && iter.strides(0)[rs.r] == 0) rs.reduced *= shape[rs.r++];
  for (int d = rs.r; d < iter.ndim(); ++d) rs.outputs *= shape[d];
  return rs;
}

/// Reduces elements [b, e) of output k's reduced region into `acc`.
template <typename Acc, typename T, typename Reduce, typename Combine>
Acc reduce_range(const TensorIterator& iter, const ReduceShape& rs, const char* in, int64_t b, int64_t e, Acc acc,
                 const Acc& identity, const Reduce& reduce, const Combine& combine) {
  if (b >= e) return acc;
  if (rs.r == 0) return reduce(acc, load<T>(in));
  const DimVector& shape = iter.shape();
  const int64_t* strides = iter.strides(1);
  DimVector index(rs.r);
  int64_t rest = b;
  for (int d = 0; d < rs.r; ++d) {
    index[d] = rest % shape[d];
    rest /= shape[d];
  }
  for (int64_t at = b; at < e;) {
    const char* p = in;
    for (int d = 0; d < rs.r; ++d) p += index[d] * strides[d];
    const int64_t n = std::min(shape[0] - index[0], e - at);
    acc = reduce_row<Acc, T>(acc, p, strides[0], n, identity, reduce, combine);
    at += n;
    index[0] += n;
    for (int d = 0; d + 1 < rs.r && index[d] == shape[d]; ++d) {
      index[d] = 0;
      ++index[d + 1];
    }
  }
  return acc;
}

/// Where output k and its reduced region start.
inline std::pair<char*, const char*> reduce_output_at(const TensorIterator& iter, const ReduceShape& rs, int64_t k) {
  char* out = iter.data_ptr(0);
  const char* in = iter.data_ptr(1);
  for (int d = rs.r; d < iter.ndim(); ++d) {
    const int64_t i = k % iter.shape()[d];
    k /= iter.shape()[d];
    out += i * iter.strides(0)[d];
    in += i * iter.strides(1)[d];
  }
  return {out, in};
}

}  // namespace detail

/// Reduces the input of a reduction iterator into its output: each output
/// element is identity combined with reduce(acc, x) over the elements it
/// reduces, in an order of the iterator's choosing (reduce and combine must be
/// associative and commutative; the order does not depend on the thread count).
/// Acc is the output's dtype, reduce's second parameter the input's. `combine`
/// joins two partial results.
template <typename Acc, typename Reduce, typename Combine>
void cpu_reduce(const TensorIterator& iter, Acc identity, const Reduce& reduce, const Combine& combine,
                int64_t grain = kGrainSize) {
  using Traits = detail::FunctionTraits<Reduce>;
  static_assert(Traits::kArity == 2, "kjit::cpu_reduce: reduce takes (Acc acc, T x)");
  using T = std::tuple_element_t<1, typename Traits::Args>;
  static_assert(has_dtype<Acc>() && has_dtype<T>(), "kjit::cpu_reduce: Acc and T need dtypes (kjit/dtype.h)");
  if (!iter.is_reduction() || iter.ninputs() != 1) {
    detail::kernel_error("cpu_reduce",
                         "it takes an iterator built with is_reduction(true) over one output and one input");
  }
  detail::check_cpu("cpu_reduce", iter);
  detail::check_operand_dtype("cpu_reduce", iter, 0, dtype_of<Acc>(), "the accumulator");
  detail::check_operand_dtype("cpu_reduce", iter, 1, dtype_of<T>(), "reduce's element");
  const detail::ReduceShape rs = detail::reduce_shape(iter);
  auto reduce_all = [&](const char* in, int64_t b, int64_t e) {
    return detail::reduce_range<Acc, T>(iter, rs, in, b, e, identity, identity, reduce, combine);
  };
  // The split is the problem's, never the pool's: the same call gives the same
  // bits on any thread count (the parts are joined in order).
  if (rs.outputs >= detail::kWholeOutputsFrom || rs.reduced < grain) {
    // Enough outputs: each thread reduces whole outputs.
    const int64_t per_output = std::max<int64_t>(rs.reduced, 1);
    parallel_for(0, rs.outputs, std::max<int64_t>(1, grain / per_output), [&](int64_t kb, int64_t ke) {
      for (int64_t k = kb; k < ke; ++k) {
        auto at = detail::reduce_output_at(iter, rs, k);
        detail::store<Acc>(at.first, reduce_all(at.second, 0, rs.reduced));
      }
    });
    return;
  }
  // Few outputs, long reductions: parts of each in parallel, joined in order.
  const int64_t parts = std::min<int64_t>(detail::kWholeOutputsFrom, rs.reduced / grain);
  // One element per part (a std::vector<bool> would pack the parts' bools into
  // shared words, which threads would then write at once).
  std::unique_ptr<Acc[]> partial(new Acc[static_cast<size_t>(parts)]);
  for (int64_t k = 0; k < rs.outputs; ++k) {
    auto at = detail::reduce_output_at(iter, rs, k);
    parallel_for(0, parts, 1, [&](int64_t pb, int64_t pe) {
      for (int64_t p = pb; p < pe; ++p) {
        partial[p] = reduce_all(at.second, rs.reduced * p / parts, rs.reduced * (p + 1) / parts);
      }
    });
    Acc acc = identity;
    for (int64_t p = 0; p < parts; ++p) acc = combine(acc, partial[p]);
    detail::store<Acc>(at.first, acc);
  }
}

/// cpu_reduce whose reduce also joins partial results (sum, max, ...).
template <typename Acc, typename Reduce>
void cpu_reduce(const TensorIterator& iter, Acc identity, const Reduce& reduce) {
  cpu_reduce(iter, identity, reduce, reduce);
}

}  // namespace kjit

#endif  // KJIT_CPU_KERNEL_H_
