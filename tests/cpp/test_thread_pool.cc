// The elementwise thread pool: every chunk runs once, errors come back to the
// caller, nested and concurrent regions, and a forked child that gets a new pool.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "block_schedule.h"
#include "cpu/own_threads.h"
#include "cpu/thread_pool.h"
#include "kjit/elementwise.h"

namespace {

using kjit::cpu::parallel_for;

/// How many times each chunk ran in one region of `chunks` on `threads` threads.
std::vector<int> chunk_runs(int chunks, int threads) {
  std::vector<std::atomic<int>> runs(chunks);
  parallel_for(chunks, threads, [&](int c) { runs[c].fetch_add(1); });
  std::vector<int> out;
  for (auto& r : runs) out.push_back(r.load());
  return out;
}

TEST(ThreadPool, EveryChunkRunsOnce) {
  kjit_test::ThreadsNotAdapted threads_not_adapted;
  for (int threads : {1, 2, 3, 5}) {
    for (int chunks : {1, 2, 7, 64}) {
      EXPECT_EQ(chunk_runs(chunks, threads), std::vector<int>(chunks, 1)) << chunks << " chunks, " << threads;
    }
  }
}

TEST(ThreadPool, ChunksRunOnSeveralThreads) {
  kjit_test::ThreadsNotAdapted threads_not_adapted;
  std::vector<std::thread::id> ids(64);
  parallel_for(64, 2, [&](int c) {
    ids[c] = std::this_thread::get_id();
    std::this_thread::sleep_for(std::chrono::microseconds(500));  // long enough for the worker to take some
  });
  bool other = false;
  for (const auto& id : ids) other = other || id != std::this_thread::get_id();
  EXPECT_TRUE(other) << "no chunk of 64 ran on a pool worker";
}

TEST(ThreadPool, EachThreadRunsItsOwnBlockFirstThenTakesWhatIsLeft) {
  kjit_test::ThreadsNotAdapted threads_not_adapted;
  const std::thread::id caller = std::this_thread::get_id();
  auto thread_of = [caller] { return std::this_thread::get_id() == caller ? 0 : 1; };
  for (int region = 0; region < 3; ++region) {  // the same split on every call
    EXPECT_EQ(kjit_test::run_block_region(thread_of), (std::vector<int>{0, 0, 1, 0})) << "region " << region;
  }
}

TEST(ThreadPool, FirstErrorReachesTheCaller) {
  kjit_test::ThreadsNotAdapted threads_not_adapted;
  try {
    parallel_for(16, 2, [](int c) {
      if (c == 11) throw std::invalid_argument("chunk 11 failed");
    });
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "chunk 11 failed");
  }
  EXPECT_THROW(parallel_for(4, 2,
                            [](int c) {
                              if (c == 3) throw 42;
                            }),
               int);                                    // not a std::exception
  EXPECT_EQ(chunk_runs(8, 2), std::vector<int>(8, 1));  // the pool still works
}

TEST(ThreadPool, NestedRegionsRunSerially) {
  kjit_test::ThreadsNotAdapted threads_not_adapted;
  std::atomic<int> inner{0};
  parallel_for(4, 2, [&](int) { parallel_for(3, 2, [&](int) { inner.fetch_add(1); }); });
  EXPECT_EQ(inner.load(), 12);
}

TEST(ThreadPool, ConcurrentCallersEachGetTheirChunks) {
  kjit_test::ThreadsNotAdapted threads_not_adapted;
  std::atomic<int> wrong{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&, t] {
      for (int round = 0; round < 300; ++round) {
        const int chunks = 1 + (t + round) % 9;
        if (chunk_runs(chunks, 2) != std::vector<int>(chunks, 1)) wrong.fetch_add(1);
      }
    });
  }
  for (auto& c : callers) c.join();
  EXPECT_EQ(wrong.load(), 0);
}

/// Runs `child` in a forked child; whether it exited 0 within 20 s (a hang is
/// killed and reported as a failure rather than hanging the test).
bool child_succeeds(bool (*child)()) {
  pid_t pid = fork();
  if (pid == 0) _exit(child() ? 0 : 1);
  for (int waited_ms = 0; waited_ms < 20000; waited_ms += 10) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) && WEXITSTATUS(status) == 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return false;
}

/// Whether a chunk of a 2-thread region ran on a pool worker within 5 s. Once it
/// has, the worker is past its start-up: ASan's runtime (GCC 12) allocates while a
/// thread starts and does not hold its allocator locks across fork(), so a fork
/// during that start-up hands the child a lock that is never released. glibc's
/// malloc is fork-safe; the tests fork only once the parent is quiet in this sense.
bool worker_took_a_chunk() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  std::atomic<bool> other{false};
  const std::thread::id caller = std::this_thread::get_id();
  while (!other.load() && std::chrono::steady_clock::now() < deadline) {
    parallel_for(8, 2, [&](int) {
      if (std::this_thread::get_id() != caller) other.store(true);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    });
  }
  return other.load();
}

TEST(ThreadPool, ForkedChildStartsANewPool) {
  kjit_test::ThreadsNotAdapted threads_not_adapted;
  ASSERT_TRUE(worker_took_a_chunk());  // the parent's pool has a running worker
  ASSERT_GE(kjit::cpu::pool_worker_count(), 1);
  EXPECT_TRUE(child_succeeds([] {
    if (kjit::cpu::pool_worker_count() != 0) return false;  // the parent's workers do not exist here
    std::vector<std::thread::id> ids(64);
    kjit::cpu::parallel_for(64, 2, [&](int c) {
      ids[c] = std::this_thread::get_id();
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    });
    bool other = false;
    for (const auto& id : ids) other = other || id != std::this_thread::get_id();
    return other && kjit::cpu::pool_worker_count() == 1;
  }));
  EXPECT_EQ(chunk_runs(8, 2), std::vector<int>(8, 1));  // and the parent's is untouched
}

TEST(ThreadPool, ForkDuringAnotherThreadsRegion) {
  kjit_test::ThreadsNotAdapted threads_not_adapted;
  ASSERT_TRUE(worker_took_a_chunk());
  std::atomic<bool> stop{false};
  std::atomic<long> runs{0};
  std::thread busy([&] {  // regions that do not allocate (see worker_took_a_chunk)
    while (!stop.load()) parallel_for(16, 2, [&](int) { runs.fetch_add(1); });
  });
  while (runs.load() == 0) std::this_thread::yield();  // the busy thread is past its start-up
  bool ok = true;
  for (int i = 0; i < 5 && ok; ++i) ok = child_succeeds([] { return chunk_runs(16, 2) == std::vector<int>(16, 1); });
  stop.store(true);
  busy.join();
  EXPECT_TRUE(ok) << "a child forked while the parent's pool was busy did not finish a region";
}

/// Sets the governor's runnable count for a test's lifetime.
struct RunnableCount {
  explicit RunnableCount(int (*reader)()) { kjit::cpu::set_runnable_reader(reader); }
  ~RunnableCount() { kjit::cpu::set_runnable_reader(nullptr); }
  RunnableCount(const RunnableCount&) = delete;
  RunnableCount& operator=(const RunnableCount&) = delete;
};

// The governor's decisions are tested with given times in test_governor.cc; this
// is the one test here with the real clock and the real scheduler: beside threads
// that keep every CPU busy, regions (parallel or made serial by the governor,
// whichever it decides) still run every chunk exactly once and return.
TEST(ThreadPool, RegionsBesideBusyThreadsRunEveryChunkOnce) {
  RunnableCount full([] { return 1000; });  // whatever the machine says: the governor sees it full
  std::atomic<bool> stop{false};
  std::vector<std::thread> busy;
  for (unsigned i = 0; i < std::max(2u, std::thread::hardware_concurrency()); ++i) {
    busy.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  }
  bool ok = true;
  for (int region = 0; region < 200 && ok; ++region)
    ok = chunk_runs(16 + region % 7, 2) == std::vector<int>(16 + region % 7, 1);
  stop.store(true);
  for (auto& t : busy) t.join();
  EXPECT_TRUE(ok);
  EXPECT_EQ(chunk_runs(32, 2), std::vector<int>(32, 1));
}

// The governor subtracts our threads from the machine's runnable count by their
// scheduler state: a spinning one counts, a sleeping one does not.
TEST(OwnThreads, CountsOnlyThoseTheSchedulerCanRun) {
  EXPECT_EQ(kjit::cpu::runnable_own_threads(), 0);  // a fresh process (one per test)
  std::atomic<int> phase{0};
  std::thread t([&] {
    kjit::cpu::note_own_thread();
    kjit::cpu::note_own_thread();  // once per thread
    phase.store(1);
    while (phase.load() == 1) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  });
  while (phase.load() == 0) std::this_thread::yield();
  EXPECT_EQ(kjit::cpu::runnable_own_threads(), 1) << "a spinning thread of ours is not counted";
  phase.store(2);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // it sleeps now
  EXPECT_EQ(kjit::cpu::runnable_own_threads(), 0) << "a sleeping thread of ours is counted";
  t.join();
  EXPECT_EQ(kjit::cpu::runnable_own_threads(), 0) << "an exited thread is counted";
}

TEST(ThreadPool, AWorkerThatCannotStartLeavesTheRegionToTheCaller) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "ASan's shadow memory needs more address space than the limit leaves";
#else
  kjit_test::ThreadsNotAdapted threads_not_adapted;
  EXPECT_TRUE(child_succeeds([] {
    // Little address space beyond what is mapped, and threads started until one
    // fails (they take the stacks glibc kept from the parent's threads too): no
    // worker can start after that.
    rlimit limit{};
    getrlimit(RLIMIT_AS, &limit);
    long pages = 0, rss = 0;
    if (FILE* f = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(f, "%ld %ld", &pages, &rss) != 2) pages = 0;
      std::fclose(f);
    }
    limit.rlim_cur = static_cast<rlim_t>(pages) * sysconf(_SC_PAGESIZE) + (4 << 20);
    if (pages == 0 || setrlimit(RLIMIT_AS, &limit) != 0) return false;
    std::atomic<bool> release{false};
    std::vector<std::thread> holders;
    holders.reserve(4096);
    try {
      while (holders.size() < 4096) holders.emplace_back([&] { kjit_test::wait_for(release); });
    } catch (const std::exception&) {
    }
    const bool ok = holders.size() < 4096 && chunk_runs(64, 4) == std::vector<int>(64, 1) &&
                    kjit::cpu::pool_worker_count() == 0 && chunk_runs(16, 2) == std::vector<int>(16, 1);
    release.store(true);
    for (auto& t : holders) t.join();
    return ok;
  }));
#endif
}

}  // namespace
