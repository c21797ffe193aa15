// The pool behind parallel_for. A region is a job with an id: the caller publishes
// it, bumps the wake word of each worker it wants (a futex word, one cache line per
// worker) and works itself; each thread runs its own block of chunks, then takes
// what is left of the others'. The caller then waits only for the chunks other
// threads claimed, never for a worker to arrive: on a busy machine a woken worker
// may not run for a whole time slice. Workers spin for a while after each region,
// so back-to-back calls find them awake (a futex wake-up costs tens of
// microseconds here, a spinning worker about one), then sleep on their word. A
// region whose workers were not run in time makes the next ones serial for a
// while (Governor): two threads taking turns on one core are slower than one.
// In a forked child the pool is replaced: the parent's workers do not exist
// there, and nothing of its state is reused.
#include "cpu/thread_pool.h"

#include <fcntl.h>
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
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "cpu/governor.h"
#include "cpu/openmp_runtime.h"
#include "cpu/own_threads.h"
#include "kjit/elementwise.h"
#include "kjit/errors.h"

namespace kjit {
namespace cpu {
namespace {

/// How long an idle worker spins before it sleeps, and how long a caller spins for
/// the workers' last chunks before it sleeps (chosen by measurement on bench_elementwise).
constexpr std::chrono::microseconds kWorkerSpin{300};
constexpr std::chrono::microseconds kCallerSpin{200};

thread_local bool t_in_parallel = false;
std::atomic<int> g_requested{0};
std::atomic<int> g_adaptive{-1};  ///< -1 until read from the environment

/// Whether the governor adapts thread counts: set_adaptive_threads, else
/// KJIT_ADAPTIVE_THREADS ("0" turns it off; anything else or unset leaves it on).
bool adaptive() {
  int on = g_adaptive.load(std::memory_order_relaxed);
  if (on < 0) {
    const char* v = std::getenv("KJIT_ADAPTIVE_THREADS");
    on = v != nullptr && std::strcmp(v, "0") == 0 ? 0 : 1;
    g_adaptive.store(on, std::memory_order_relaxed);
  }
  return on == 1;
}

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
///
/// Every claim names its job: a block's next chunk and the job that owns it share
/// one atomic word. The caller of a region does not wait for workers that claimed
/// nothing, so a worker may arrive after its job ended, even during the next one;
/// it then finds no block of its job and claims nothing.
class ChunkBlocks {
 public:
  /// Cuts `chunks` into `threads` blocks of job `job`; no thread holds a chunk of
  /// an earlier job. Allocates only when `threads` is the most so far.
  void open(uint32_t job, int chunks, int threads) {
    Array* array = array_.load(std::memory_order_relaxed);
    if (array == nullptr || array->size < threads) array = grow(threads);
    for (int t = 0; t < threads; ++t) {
      Block& block = array->blocks[t];
      block.end.store(static_cast<int>(int64_t{chunks} * (t + 1) / threads), std::memory_order_relaxed);
      block.next.store(pack(job, static_cast<int>(int64_t{chunks} * t / threads)), std::memory_order_release);
    }
    threads_.store(threads, std::memory_order_release);
  }

  /// Runs run(chunk) for every chunk of job `job` this thread claims, its own block
  /// first; a thread number outside the team (a runtime that numbers differently)
  /// starts at block 0.
  template <typename Run>
  void claim(uint32_t job, int thread, Run run) {
    const Array* array = array_.load(std::memory_order_acquire);
    if (array == nullptr) return;
    const int threads = std::min(threads_.load(std::memory_order_acquire), array->size);
    const int first = thread >= 0 && thread < threads ? thread : 0;
    for (int i = 0; i < threads; ++i) {
      Block& block = array->blocks[(first + i) % threads];
      uint64_t word = block.next.load(std::memory_order_acquire);
      while (static_cast<uint32_t>(word >> 32) == job) {
        const int chunk = static_cast<int>(static_cast<uint32_t>(word));
        if (chunk >= block.end.load(std::memory_order_relaxed)) break;  // an end of another job fails the exchange
        if (block.next.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel)) {
          run(chunk);
          word = block.next.load(std::memory_order_acquire);
        }
      }
    }
  }

 private:
  struct alignas(64) Block {        // one cache line each: claims in one block do not slow the others
    std::atomic<uint64_t> next{0};  ///< job << 32 | the next unclaimed chunk
    std::atomic<int> end{0};
  };
  struct Array {
    explicit Array(int n) : size(n), blocks(new Block[n]) {}
    int size;
    std::unique_ptr<Block[]> blocks;
  };

  static uint64_t pack(uint32_t job, int chunk) { return uint64_t{job} << 32 | static_cast<uint32_t>(chunk); }

  /// A larger array; the old ones are kept, as a late worker may still read one.
  Array* grow(int threads) {
    arrays_.push_back(std::make_unique<Array>(threads));
    array_.store(arrays_.back().get(), std::memory_order_release);
    return arrays_.back().get();
  }

  std::atomic<Array*> array_{nullptr};
  std::atomic<int> threads_{0};
  std::vector<std::unique_ptr<Array>> arrays_;
};

/// The machine's runnable threads now: /proc/loadavg's fourth field ("2/79"), or -1.
int runnable_threads_from_proc() {
  const int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char text[128];
  const ssize_t n = read(fd, text, sizeof(text) - 1);
  close(fd);
  if (n <= 0) return -1;
  text[n] = '\0';
  const char* field = text;
  for (int i = 0; i < 3 && field != nullptr; ++i) {
    field = std::strchr(field, ' ');
    if (field != nullptr) ++field;
  }
  if (field == nullptr) return -1;
  char* end = nullptr;
  const long runnable = std::strtol(field, &end, 10);
  return end != field && *end == '/' ? static_cast<int>(std::min<long>(runnable, INT_MAX)) : -1;
}

/// How the governor reads the runnable count: runnable_threads_from_proc, or a
/// test's reader.
std::atomic<int (*)()> g_runnable_reader{&runnable_threads_from_proc};

/// CPUs that nothing else wants now: online CPUs less the runnable threads that
/// are neither the caller nor ours; every CPU when /proc/loadavg cannot be read.
/// Ours are counted by their scheduler state, not by whether they are in a region
/// or spinning after one: torch's own regions keep a shared OpenMP team spinning,
/// and a spinning thread that was counted as awake after it went to sleep hid a
/// competitor and kept regions parallel beside it.
int free_cpus() {
  static const int online = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  const int runnable = g_runnable_reader.load(std::memory_order_relaxed)();
  if (runnable < 0) return online;
  return online - std::max(0, runnable - 1 - runnable_own_threads());
}

Governor g_governor(&free_cpus);

/// The governor's threads for a region, unless it is off (set_adaptive_threads).
int governed_threads(int requested) { return adaptive() ? g_governor.threads(requested, Clock::now()) : requested; }

/// Tells the governor how a region that just ended went.
void report_region(bool late) {
  if (adaptive()) g_governor.report(late, Clock::now());
}

/// A worker's wake word and state, alone on a cache line: the caller writes one
/// line per worker it wakes, and a spinning worker reads only its own.
struct alignas(64) WorkerSlot {
  std::atomic<uint32_t> wake{0};      ///< the id of the last job handed to this worker
  std::atomic<uint32_t> sleeping{1};  ///< set while the worker may be in futex_wait, or has not started
  std::atomic<uint32_t> joined{0};    ///< the last job in which this worker claimed a chunk
  bool spinning_at_wake = false;      ///< the caller's: whether it found the worker awake
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
    const int workers = std::min(threads - 1, ensure_workers(threads - 1));
    RegionTiming timing;
    timing.start = Clock::now();
    open_job(chunks, workers + 1, &fn);
    for (int w = 0; w < workers; ++w) wake(*slots_[w]);
    t_in_parallel = true;
    blocks_.claim(job_id_, 0, [&](int c) {
      run_chunk(c);
      ++timing.caller_chunks;
    });
    t_in_parallel = false;
    timing.claims_end = Clock::now();
    wait_for_chunks(chunks);
    bool late = timing.waited_too_long(Clock::now());
    for (int w = 0; w < workers && !late; ++w) {
      late = slots_[w]->spinning_at_wake && slots_[w]->joined.load(std::memory_order_relaxed) != job_id_;
    }
    report_region(late);
    if (error_) std::rethrow_exception(error_);
    return true;
  }

  int worker_count() {
    std::lock_guard<std::mutex> lock(call_mu_);
    return static_cast<int>(slots_.size());
  }

 private:
  static std::atomic<Pool*> g_pool;

  /// Starts workers until there are `n`; the number there is. A thread that cannot
  /// be started (the process's limit, no memory for its stack) leaves the regions
  /// to the workers that exist; starting more is tried again a second later.
  int ensure_workers(int n) {
    if (static_cast<int>(slots_.size()) >= n || Clock::now() < retry_spawn_at_) return static_cast<int>(slots_.size());
    while (static_cast<int>(slots_.size()) < n) {
      try {
        auto slot = std::make_unique<WorkerSlot>();
        slots_.reserve(slots_.size() + 1);
        WorkerSlot* s = slot.get();
        const int thread = static_cast<int>(slots_.size()) + 1;         // the caller is thread 0
        std::thread([this, s, thread] { work(*s, thread); }).detach();  // lives as long as the process
        slots_.push_back(std::move(slot));                              // reserved: cannot throw
      } catch (const std::exception& e) {  // std::system_error from the thread, std::bad_alloc
        retry_spawn_at_ = Clock::now() + std::chrono::seconds(1);
        static std::atomic<bool> warned{false};
        if (!warned.exchange(true)) {
          std::fprintf(stderr,
                       "[kjit] could not start a worker thread (%s); loops run on the %zu thread(s) there are\n",
                       e.what(), slots_.size() + 1);
        }
        break;
      }
    }
    return static_cast<int>(slots_.size());
  }

  /// Publishes a job; every chunk of the previous one is done.
  void open_job(int chunks, int threads, const ChunkFn* fn) {
    fn_.store(fn, std::memory_order_relaxed);
    error_ = nullptr;
    done_.store(0, std::memory_order_relaxed);
    if (++job_id_ == 0) ++job_id_;           // 0 means "no job"
    blocks_.open(job_id_, chunks, threads);  // releases the fields above to whoever claims a chunk
  }

  void wake(WorkerSlot& slot) {
    slot.spinning_at_wake = slot.sleeping.load() == 0;
    slot.wake.store(job_id_);  // seq_cst, before reading sleeping: see work()
    if (slot.sleeping.load()) futex_wake_all(&slot.wake);
  }

  /// Runs a claimed chunk and counts it done; the last one wakes a sleeping caller.
  void run_chunk(int chunk) {
    try {
      (*fn_.load(std::memory_order_relaxed))(chunk);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mu_);
      if (!error_) error_ = std::current_exception();
    }
    done_.fetch_add(1);  // seq_cst, before reading caller_waiting_: see wait_for_chunks
    if (caller_waiting_.load()) futex_wake_all(&done_);
  }

  /// Waits until every chunk is done. Only chunks that other threads claimed are
  /// left: their work, not their scheduling, is what the caller waits for.
  void wait_for_chunks(int chunks) {
    const auto all_done = [&] { return done_.load(std::memory_order_acquire) == static_cast<uint32_t>(chunks); };
    if (spin_until(all_done, kCallerSpin)) return;
    caller_waiting_.store(1);
    for (uint32_t d; (d = done_.load()) != static_cast<uint32_t>(chunks);) futex_wait(&done_, d);
    caller_waiting_.store(0);
  }

  void work(WorkerSlot& slot, int thread) {
    uint32_t seen = 0;
    slot.sleeping.store(0);
    note_own_thread();
    while (true) {
      auto woken = [&] { return slot.wake.load(std::memory_order_acquire) != seen; };
      if (!spin_until(woken, kWorkerSpin)) {
        slot.sleeping.store(1);  // seq_cst, before reading wake: see wake()
        for (uint32_t v; (v = slot.wake.load()) == seen;) futex_wait(&slot.wake, v);
        slot.sleeping.store(0, std::memory_order_relaxed);
      }
      seen = slot.wake.load();
      t_in_parallel = true;
      bool joined = false;
      blocks_.claim(seen, thread, [&](int c) {
        if (!joined) slot.joined.store(seen, std::memory_order_relaxed);  // published by run_chunk's count
        joined = true;
        run_chunk(c);
      });
      t_in_parallel = false;
    }
  }

  std::mutex call_mu_;  // one region at a time
  std::vector<std::unique_ptr<WorkerSlot>> slots_;
  Clock::time_point retry_spawn_at_{};
  uint32_t job_id_ = 0;
  ChunkBlocks blocks_;
  std::atomic<const ChunkFn*> fn_{nullptr};  // the caller's, on its stack for the region
  alignas(64) std::atomic<uint32_t> done_{0};
  std::atomic<uint32_t> caller_waiting_{0};
  std::mutex error_mu_;
  std::exception_ptr error_;
};

std::atomic<Pool*> Pool::g_pool{nullptr};

/// A region run on a loaded OpenMP runtime: every team thread claims chunks as
/// the pool's threads do, by its OpenMP thread number; an exception stays inside
/// the team and is rethrown by the caller afterwards (it must not cross the
/// runtime's frames). The runtime's join waits for every team thread, late or
/// not; that wait, measured, tells the governor.
class OpenMpRegion {
 public:
  OpenMpRegion(const OpenMpRuntime& runtime, int chunks, int threads, const ChunkFn& fn)
      : runtime_(runtime), fn_(fn), threads_(threads), caller_(std::this_thread::get_id()), job_(next_job()) {
    blocks_.open(job_, chunks, threads);
  }

  void run() {
    timing_.start = Clock::now();
    runtime_.parallel(&OpenMpRegion::team_body, this, static_cast<unsigned>(threads_), 0);
    report_region(timing_.waited_too_long(Clock::now()));
    if (error_) std::rethrow_exception(error_);
  }

 private:
  /// The calling thread's blocks and job count: regions do not nest, so one per
  /// caller is enough, and a region allocates nothing once a thread has run one of its size.
  static ChunkBlocks& caller_blocks() {
    thread_local ChunkBlocks blocks;
    return blocks;
  }
  static uint32_t next_job() {
    thread_local uint32_t id = 0;
    if (++id == 0) ++id;  // 0 means "no job"
    return id;
  }

  static void team_body(void* self) { static_cast<OpenMpRegion*>(self)->claim_chunks(); }

  void claim_chunks() {
    const bool outer = t_in_parallel;
    t_in_parallel = true;
    const bool caller = std::this_thread::get_id() == caller_;
    const int thread = runtime_.thread_num != nullptr ? runtime_.thread_num() : 0;
    blocks_.claim(job_, thread, [&](int c) {
      try {
        fn_(c);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu_);
        if (!error_) error_ = std::current_exception();
      }
      if (caller) ++timing_.caller_chunks;
    });
    if (caller) timing_.claims_end = Clock::now();
    t_in_parallel = outer;
  }

  const OpenMpRuntime& runtime_;
  const ChunkFn& fn_;
  const int threads_;
  const std::thread::id caller_;
  const uint32_t job_;
  ChunkBlocks& blocks_ = caller_blocks();
  RegionTiming timing_;
  std::mutex error_mu_;
  std::exception_ptr error_;
};

/// Records the threads of a loaded OpenMP runtime's team of `threads` as ours,
/// once per team size: the governor must know them by their thread ids before
/// any of our regions runs on them, as another library's regions (torch's) keep
/// the same team spinning.
void note_openmp_team(const OpenMpRuntime& runtime, int threads) {
  static std::atomic<int> noted{0};
  if (threads <= noted.load(std::memory_order_relaxed)) return;
  static const int registered = pthread_atfork(nullptr, nullptr, [] { noted.store(0); });
  (void)registered;
  struct Team {
    std::thread::id caller = std::this_thread::get_id();
    static void body(void* self) {
      if (std::this_thread::get_id() != static_cast<Team*>(self)->caller) note_own_thread();
    }
  } team;
  runtime.parallel(&Team::body, &team, static_cast<unsigned>(threads), 0);
  noted.store(threads, std::memory_order_relaxed);
}

}  // namespace

void parallel_for(int chunks, int threads, ChunkFn fn) {
  threads = std::min(threads, chunks);
  if (threads > 1 && !t_in_parallel) {
    const OpenMpRuntime* runtime = loaded_openmp_runtime();
    if (runtime != nullptr) note_openmp_team(*runtime, threads);
    threads = governed_threads(threads);
    if (threads > 1 && runtime != nullptr) {
      OpenMpRegion(*runtime, chunks, threads, fn).run();
      return;
    }
    if (threads > 1 && Pool::instance().try_run(chunks, threads, fn)) return;
  }
  for (int c = 0; c < chunks; ++c) fn(c);
}

int pool_worker_count() { return Pool::instance().worker_count(); }

void set_adaptive_threads(bool on) { g_adaptive.store(on ? 1 : 0); }

void set_runnable_reader(int (*reader)()) {
  g_runnable_reader.store(reader != nullptr ? reader : &runnable_threads_from_proc);
}

}  // namespace cpu

int get_num_threads() {
  int n = cpu::g_requested.load(std::memory_order_relaxed);
  return n > 0 ? n : cpu::default_threads();
}

void set_num_threads(int64_t n) {
  if (n < 0 || n > kMaxThreads) {
    throw ValueError("kjit.set_num_threads: n must be a thread count in [1, " + std::to_string(kMaxThreads) +
                     "], or 0 for the default, got " + std::to_string(n));
  }
  cpu::g_requested.store(static_cast<int>(n));
}

}  // namespace kjit
