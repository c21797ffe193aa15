// The C functions kjit/parallel.h reaches kjit's pool through. This file does not
// include that header: there they are weak references, here the definitions.
#include <algorithm>
#include <cstdint>

#include "cpu/loop_driver.h"
#include "cpu/thread_pool.h"
#include "kjit/elementwise.h"

extern "C" __attribute__((visibility("default"))) void kjit_parallel_for(int64_t begin, int64_t end, int64_t grain,
                                                                         void (*body)(void*, int64_t, int64_t),
                                                                         void* ctx) {
  const int64_t n = end - begin;
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t grains = n / grain + (n % grain != 0);
  const int threads = static_cast<int>(std::min<int64_t>(kjit::get_num_threads(), grains));
  if (threads <= 1) {
    body(ctx, begin, end);
    return;
  }
  // Each chunk at least a grain; a few per thread, so a late thread's share goes to the others.
  const int chunks = static_cast<int>(
      std::max<int64_t>(threads, std::min<int64_t>(int64_t{threads} * kjit::cpu::kChunksPerThread, n / grain)));
  // Chunk c starts at c * n / chunks, without forming c * n.
  auto start = [&](int c) { return begin + n / chunks * c + std::min<int64_t>(c, n % chunks); };
  kjit::cpu::parallel_for(chunks, threads, [&](int c) { body(ctx, start(c), start(c + 1)); });
}

extern "C" __attribute__((visibility("default"))) int kjit_get_num_threads(void) { return kjit::get_num_threads(); }
