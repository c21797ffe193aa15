// A region whose run the block schedule of parallel_for makes certain, for the
// tests of kjit's pool and of a loaded OpenMP runtime.
#ifndef KJIT_TESTS_CPP_BLOCK_SCHEDULE_H_
#define KJIT_TESTS_CPP_BLOCK_SCHEDULE_H_

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "cpu/thread_pool.h"

namespace kjit_test {

/// Turns the pool's governor off for a test's lifetime: a test that needs a region
/// on several threads must get them on a machine that other tests load.
struct ThreadsNotAdapted {
  ThreadsNotAdapted() { kjit::cpu::set_adaptive_threads(false); }
  ~ThreadsNotAdapted() { kjit::cpu::set_adaptive_threads(true); }
  ThreadsNotAdapted(const ThreadsNotAdapted&) = delete;
  ThreadsNotAdapted& operator=(const ThreadsNotAdapted&) = delete;
};

/// Spins until `flag` is set or 10 s have passed (a hung test fails instead of hanging).
inline void wait_for(const std::atomic<bool>& flag) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!flag.load() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
}

/// Runs 4 chunks on 2 threads and returns which thread ran each, as numbered by
/// `thread_of` (0 for the caller). Chunk 0 waits until the other thread has
/// started a chunk, and chunk 2 until chunk 3 is done. With one block per
/// thread, the caller runs chunks 0 and 1, the other thread starts its own block
/// at chunk 2, and the caller, done with its block, takes chunk 3 from it:
/// {0, 0, 1, 0}, every time.
template <typename ThreadOf>
std::vector<int> run_block_region(ThreadOf thread_of) {
  std::vector<int> ran_on(4, -1);
  std::atomic<bool> other_started{false}, third_done{false};
  kjit::cpu::parallel_for(4, 2, [&](int c) {
    ran_on[c] = thread_of();
    if (ran_on[c] != 0) other_started.store(true);
    if (c == 0) wait_for(other_started);
    if (c == 2) wait_for(third_done);
    if (c == 3) third_done.store(true);
  });
  return ran_on;
}

}  // namespace kjit_test

#endif  // KJIT_TESTS_CPP_BLOCK_SCHEDULE_H_
