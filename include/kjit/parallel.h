// kjit/parallel.h — kjit::parallel_for for kernels: kjit's thread pool, reached
// from a JIT-compiled or ahead-of-time module without linking kjit.
//
// The pool lives in libkjit, which exports two C functions. A module refers to
// them weakly: where libkjit is loaded (kjit's Python package loads it
// RTLD_GLOBAL; a C++ program links it) they are kjit's pool, with its thread
// count (kjit.set_num_threads, KJIT_NUM_THREADS) and its busy-machine rules;
// where it is not, parallel_for runs on the calling thread.
#ifndef KJIT_PARALLEL_H_
#define KJIT_PARALLEL_H_

#include <atomic>
#include <cstdint>
#include <exception>

extern "C" {
/// Runs body(ctx, b, e) over [begin, end) in chunks of at least `grain`
/// elements on kjit's pool, the caller included; returns when every chunk is
/// done. `body` must not throw.
__attribute__((weak, visibility("default"))) void kjit_parallel_for(int64_t begin, int64_t end, int64_t grain,
                                                                    void (*body)(void* ctx, int64_t b, int64_t e),
                                                                    void* ctx);
/// The threads a parallel region may use.
__attribute__((weak, visibility("default"))) int kjit_get_num_threads(void);
}

namespace kjit {

/// PyTorch's grain: a loop of fewer elements runs on the calling thread.
inline constexpr int64_t kGrainSize = 32768;

namespace detail {
/// The threads kjit's parallel regions use (kjit::get_num_threads in libkjit; 1
/// where libkjit is not loaded).
inline int pool_threads() { return kjit_get_num_threads != nullptr ? kjit_get_num_threads() : 1; }
}  // namespace detail

/// Calls f(b, e) over disjoint ranges covering [begin, end), each of at least
/// `grain_size` elements (but the last), on kjit's pool: as at::parallel_for.
/// Serial for a range of up to one grain, inside another region, or without
/// libkjit. The first exception a chunk throws is rethrown here once all are done.
template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain_size, const F& f) {
  if (begin >= end) return;
  if (grain_size < 1) grain_size = 1;
  if (end - begin <= grain_size || kjit_parallel_for == nullptr) {
    f(begin, end);
    return;
  }
  struct Region {
    const F* f = nullptr;
    std::atomic<bool> failed{false};
    std::exception_ptr error;
  } region;
  region.f = &f;
  auto body = [](void* ctx, int64_t b, int64_t e) {
    auto* r = static_cast<Region*>(ctx);
    if (r->failed.load(std::memory_order_relaxed)) return;  // a chunk failed: skip the rest
    try {
      (*r->f)(b, e);
    } catch (...) {
      if (!r->failed.exchange(true)) r->error = std::current_exception();
    }
  };
  kjit_parallel_for(begin, end, grain_size, body, &region);
  if (region.error) std::rethrow_exception(region.error);
}

}  // namespace kjit

#endif  // KJIT_PARALLEL_H_
