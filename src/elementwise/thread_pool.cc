// The pool behind parallel_for. A region is a job with an id: the caller publishes
// it, bumps the wake word of each worker it wants (a futex word, one cache line per
// worker) and works itself; each thread runs its own block of chunks, then takes
// what is left of the others'. Workers spin for a while after each region, so
// back-to-back calls find them awake (a futex wake-up costs tens of microseconds
// here, a spinning worker about one), then sleep on their word. In a forked child
// the pool is replaced: the parent's workers do not exist there, and nothing of
// its state is reused.
#include "elementwise/thread_pool.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "elementwise/openmp_runtime.h"
#include "kjit/elementwise.h"
#include "kjit/errors.h"

namespace kjit {
namespace ew {
namespace {

using Clock = std::chrono::steady_clock;

/// How long an idle worker spins before it sleeps, and how long a caller spins for
/// the workers' last chunks before it sleeps (chosen by measurement on bench_elementwise).
constexpr std::chrono::microseconds kWorkerSpin{300};
constexpr std::chrono::microseconds kCallerSpin{200};

thread_local bool t_in_parallel = false;
std::atomic<int> g_requested{0};

/// A thread count from the environment, or 0 when unset or not a count in
/// [1, kMaxThreads] (said once on stderr: atoi would read "99999999999" as 513).
int env_threads(const char* var) {
  const char* v = std::getenv(var);
  if (v == nullptr || *v == '\0') return 0;
  errno = 0;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  if (errno == 0 && end != v && *end == '\0' && n >= 1 && n <= kMaxThreads) return static_cast<int>(n);
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true)) {
    std::fprintf(stderr, "[kjit] %s='%s' is not a thread count in [1, %d]; ignored\n", var, v, kMaxThreads);
  }
  return 0;
}

int hardware_threads() {
  static const int n = [] {
    unsigned hw = std::thread::hardware_concurrency();
    return hw == 0 ? 1 : static_cast<int>(hw);
  }();
  return n;
}

int default_threads() {
  if (int n = env_threads("KJIT_NUM_THREADS")) return n;
  if (int n = env_threads("OMP_NUM_THREADS")) return n;
  return hardware_threads();
}

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

/// Spins until done() or `budget` has passed; whether done() held. No sched_yield
/// between rounds: measured, it handed the CPU to torch's spinning OpenMP workers
/// for whole time slices (2^16 add 0.9x NumPy without it, 1.5x with it).
template <typename Done>
bool spin_until(Done done, std::chrono::microseconds budget) {
  const Clock::time_point deadline = Clock::now() + budget;
  while (true) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      cpu_relax();
    }
    if (Clock::now() >= deadline) return done();
  }
}

/// A region's chunks cut into one block per thread. Thread t runs block t first,
/// so the same thread gets the same part of the data on every call of a loop and
/// what fits in its core's L2 is still there next time, as with OpenMP's static
/// schedule that torch's loops use (float32 add out=, 2^17 to 2^20 on 2 threads:
/// chunks claimed in arrival order took up to 1.2x torch's time). Then it takes
/// the chunks left in the other blocks, so a thread that starts late or is
/// preempted leaves its share to the others.
class ChunkBlocks {
 public:
  /// Cuts `chunks` into `threads` blocks; allocates only when `threads` is the most so far.
  void open(int chunks, int threads) {
    if (static_cast<int>(blocks_.size()) < threads) blocks_ = std::vector<Block>(threads);
    threads_ = threads;
    for (int t = 0; t < threads; ++t) {
      blocks_[t].next.store(static_cast<int>(int64_t{chunks} * t / threads), std::memory_order_relaxed);
      blocks_[t].end = static_cast<int>(int64_t{chunks} * (t + 1) / threads);
    }
  }

  /// Runs run(chunk) for every chunk this thread claims, its own block first; a
  /// thread number outside the team (a runtime that numbers differently) starts at block 0.
  template <typename Run>
  void claim(int thread, Run run) {
    const int first = thread >= 0 && thread < threads_ ? thread : 0;
    for (int i = 0; i < threads_; ++i) {
      Block& block = blocks_[(first + i) % threads_];
      for (int c; (c = block.next.fetch_add(1, std::memory_order_relaxed)) < block.end;) run(c);
    }
  }

 private:
  struct alignas(64) Block {  // one cache line each: claims in one block do not slow the others
    std::atomic<int> next{0};
    int end = 0;
  };
  std::vector<Block> blocks_;
  int threads_ = 0;
};

/// A worker's wake word and sleep flag, alone on a cache line: the caller writes
/// one line per worker it wakes, and a spinning worker reads only its own.
struct alignas(64) WorkerSlot {
  std::atomic<uint32_t> wake{0};      ///< the id of the last job handed to this worker
  std::atomic<uint32_t> sleeping{0};  ///< set while the worker may be in futex_wait
};

class Pool {
 public:
  /// The process's pool: made on first use, and anew in a forked child.
  static Pool& instance() {
    Pool* pool = g_pool.load(std::memory_order_acquire);
    if (pool != nullptr) return *pool;
    static const int registered = pthread_atfork(nullptr, nullptr, [] { g_pool.store(nullptr); });
    (void)registered;
    auto made = std::make_unique<Pool>();
    if (g_pool.compare_exchange_strong(pool, made.get())) return *made.release();  // never destroyed
    return *pool;                                                                  // another thread made it first
  }

  /// Whether the region ran here; false when another thread's region holds the pool.
  bool try_run(int chunks, int threads, ChunkFn fn) {
    std::unique_lock<std::mutex> lock(call_mu_, std::try_to_lock);
    if (!lock.owns_lock()) return false;
    ensure_workers(threads - 1);
    open_job(chunks, threads, &fn);
    for (int w = 0; w < threads - 1; ++w) wake(*slots_[w]);
    claim_chunks(0);
    close_job();
    if (error_) std::rethrow_exception(error_);
    return true;
  }

  int worker_count() {
    std::lock_guard<std::mutex> lock(call_mu_);
    return static_cast<int>(slots_.size());
  }

 private:
  static std::atomic<Pool*> g_pool;

  void ensure_workers(int n) {
    while (static_cast<int>(slots_.size()) < n) {
      slots_.push_back(std::make_unique<WorkerSlot>());
      WorkerSlot* slot = slots_.back().get();
      const int thread = static_cast<int>(slots_.size());                   // the caller is thread 0
      std::thread([this, slot, thread] { work(*slot, thread); }).detach();  // lives as long as the process
    }
  }

  /// Publishes a job; no worker is inside the previous one (close_job waited).
  void open_job(int chunks, int threads, const ChunkFn* fn) {
    fn_ = fn;
    blocks_.open(chunks, threads);
    error_ = nullptr;
    if (++last_id_ == 0) ++last_id_;  // 0 means "no job"
    job_.store(last_id_);             // seq_cst: publishes the fields above
  }

  void wake(WorkerSlot& slot) {
    slot.wake.store(last_id_);
    if (slot.sleeping.load()) futex_wake_all(&slot.wake);
  }

  /// Runs chunks until none is left unclaimed; `thread` is 0 for the caller, w + 1 for worker w.
  void claim_chunks(int thread) {
    t_in_parallel = true;
    blocks_.claim(thread, [this](int c) { run_chunk(c); });
    t_in_parallel = false;
  }

  void run_chunk(int chunk) {
    try {
      (*fn_)(chunk);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mu_);
      if (!error_) error_ = std::current_exception();
    }
  }

  /// Closes the job, then waits until no worker is inside it: every chunk has been
  /// claimed, so the workers inside are finishing theirs. A worker that comes
  /// later sees the job closed and leaves without touching it.
  void close_job() {
    job_.store(0);  // seq_cst, before reading inside_: see join_job
    if (spin_until([&] { return inside_.load() == 0; }, kCallerSpin)) return;
    caller_waiting_.store(1);
    for (uint32_t n; (n = inside_.load()) != 0;) futex_wait(&inside_, n);
    caller_waiting_.store(0);
  }

  /// A worker's part in job `id`, if that job is still open. Entering before
  /// checking (and the caller closing before counting) means either the caller
  /// waits for this worker or this worker sees the job closed.
  void join_job(uint32_t id, int thread) {
    inside_.fetch_add(1);
    if (job_.load() == id) claim_chunks(thread);
    if (inside_.fetch_sub(1) == 1 && caller_waiting_.load()) futex_wake_all(&inside_);
  }

  void work(WorkerSlot& slot, int thread) {
    uint32_t seen = 0;
    while (true) {
      auto woken = [&] { return slot.wake.load(std::memory_order_acquire) != seen; };
      if (!spin_until(woken, kWorkerSpin)) {
        slot.sleeping.store(1);  // seq_cst, before reading wake: see wake()
        for (uint32_t v; (v = slot.wake.load()) == seen;) futex_wait(&slot.wake, v);
        slot.sleeping.store(0, std::memory_order_relaxed);
      }
      seen = slot.wake.load();
      join_job(seen, thread);
    }
  }

  std::mutex call_mu_;  // one region at a time
  std::vector<std::unique_ptr<WorkerSlot>> slots_;
  uint32_t last_id_ = 0;
  // The open job; written only while no worker is inside a job.
  const ChunkFn* fn_ = nullptr;  // the caller's, on its stack for the region
  ChunkBlocks blocks_;
  std::atomic<uint32_t> job_{0};  ///< the open job's id, 0 when none is open
  alignas(64) std::atomic<uint32_t> inside_{0};
  std::atomic<uint32_t> caller_waiting_{0};
  std::mutex error_mu_;
  std::exception_ptr error_;
};

std::atomic<Pool*> Pool::g_pool{nullptr};

/// A region run on a loaded OpenMP runtime: every team thread claims chunks as
/// the pool's threads do, by its OpenMP thread number; an exception stays inside
/// the team and is rethrown by the caller afterwards (it must not cross the
/// runtime's frames).
class OpenMpRegion {
 public:
  OpenMpRegion(const OpenMpRuntime& runtime, int chunks, int threads, const ChunkFn& fn)
      : runtime_(runtime), fn_(fn), threads_(threads) {
    blocks_.open(chunks, threads);
  }

  void run() {
    runtime_.parallel(&OpenMpRegion::team_body, this, static_cast<unsigned>(threads_), 0);
    if (error_) std::rethrow_exception(error_);
  }

 private:
  /// The calling thread's blocks: regions do not nest, so one per caller is enough,
  /// and a region allocates nothing once a thread has run one of its size.
  static ChunkBlocks& blocks() {
    thread_local ChunkBlocks caller_blocks;
    return caller_blocks;
  }

  static void team_body(void* self) { static_cast<OpenMpRegion*>(self)->claim_chunks(); }

  void claim_chunks() {
    const bool outer = t_in_parallel;
    t_in_parallel = true;
    const int thread = runtime_.thread_num != nullptr ? runtime_.thread_num() : 0;
    blocks_.claim(thread, [this](int c) {
      try {
        fn_(c);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu_);
        if (!error_) error_ = std::current_exception();
      }
    });
    t_in_parallel = outer;
  }

  const OpenMpRuntime& runtime_;
  const ChunkFn& fn_;
  const int threads_;
  ChunkBlocks& blocks_ = blocks();
  std::mutex error_mu_;
  std::exception_ptr error_;
};

}  // namespace

void parallel_for(int chunks, int threads, ChunkFn fn) {
  threads = std::min(threads, chunks);
  if (threads > 1 && !t_in_parallel) {
    if (const OpenMpRuntime* runtime = loaded_openmp_runtime()) {
      OpenMpRegion(*runtime, chunks, threads, fn).run();
      return;
    }
    if (Pool::instance().try_run(chunks, threads, fn)) return;
  }
  for (int c = 0; c < chunks; ++c) fn(c);
}

int pool_worker_count() { return Pool::instance().worker_count(); }

}  // namespace ew

int get_num_threads() {
  int n = ew::g_requested.load(std::memory_order_relaxed);
  return n > 0 ? n : ew::default_threads();
}

void set_num_threads(int64_t n) {
  if (n < 0 || n > kMaxThreads) {
    throw ValueError("kjit.set_num_threads: n must be a thread count in [1, " + std::to_string(kMaxThreads) +
                     "], or 0 for the default, got " + std::to_string(n));
  }
  ew::g_requested.store(static_cast<int>(n));
}

}  // namespace kjit
