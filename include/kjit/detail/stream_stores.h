// Non-temporal stores for the generated elementwise CPU kernels: a kernel whose
// output run is past the caches computes a block into a local buffer, then writes
// it out with these, which skip reading the output lines into the cache first.
// Embedded by kjit::emit_elementwise_cpu().
#ifndef KJIT_DETAIL_STREAM_STORES_H_
#define KJIT_DETAIL_STREAM_STORES_H_

#if defined(__SSE2__)

namespace kjit_stream {
namespace {

// The target's widest vector store past the caches: VEX/EVEX encoded where AVX is
// on (mixing in a legacy SSE encoding would cost a state transition).
#if defined(__AVX512F__)
constexpr int kStoreBytes = 64;
#elif defined(__AVX__)
constexpr int kStoreBytes = 32;
#else
constexpr int kStoreBytes = 16;
#endif
#if defined(__AVX__)
#define KJIT_STREAM_STORE "vmovntdq %1, %0"
#else
#define KJIT_STREAM_STORE "movntdq %1, %0"
#endif
typedef long long StreamVec __attribute__((vector_size(kStoreBytes), may_alias));

/// (Reserved names: generated kernels call these after the user's code, whose
/// macros would rewrite any other.)
/// Writes the 64 bytes at `src` (64-byte aligned) to `dst` (64-byte aligned) past
/// the caches, in the target's widest vectors: the kernel filled `src` with its
/// own vector stores, and narrower loads of them wait on store forwarding (float32
/// add at 2^22 on one thread: 16-byte streams after AVX-512 stores took 1.06-1.08x
/// the time of 64-byte ones). Inline assembly, because the intrinsics' headers
/// cost every kernel's compile: <emmintrin.h> 9 ms (6%), <immintrin.h> 0.2 s.
[[maybe_unused]] inline void __stream64(char* dst, const char* src) {
  for (int q = 0; q < 64; q += kStoreBytes) {
    asm volatile(KJIT_STREAM_STORE
                 : "=m"(*reinterpret_cast<StreamVec*>(dst + q))
                 : "v"(*reinterpret_cast<const StreamVec*>(src + q)));
  }
}
#undef KJIT_STREAM_STORE

/// Orders the streamed stores before the kernel returns.
[[maybe_unused]] inline void __stream_fence() { asm volatile("sfence" ::: "memory"); }

}  // namespace
}  // namespace kjit_stream

#endif  // defined(__SSE2__)
#endif  // KJIT_DETAIL_STREAM_STORES_H_
