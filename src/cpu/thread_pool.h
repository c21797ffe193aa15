// A small persistent thread pool for the elementwise CPU loops: wakes in about a
// microsecond while its workers spin after a region, allocates nothing per region,
// never waits for a thread the scheduler has not run unless that thread holds a
// chunk, runs regions on the caller alone while the machine is oversubscribed,
// and starts afresh in the child of a fork.
#ifndef KJIT_SRC_CPU_THREAD_POOL_H_
#define KJIT_SRC_CPU_THREAD_POOL_H_

namespace kjit {
namespace cpu {

/// A borrowed callable taking a chunk index: what a parallel region runs, without
/// std::function's heap allocation for captures. The callable must outlive it.
class ChunkFn {
 public:
  template <typename F>
  ChunkFn(const F& f)  // NOLINT(google-explicit-constructor): built at the call
      : ctx_(&f), call_([](const void* ctx, int chunk) { (*static_cast<const F*>(ctx))(chunk); }) {}
  void operator()(int chunk) const { call_(ctx_, chunk); }

 private:
  const void* ctx_;
  void (*call_)(const void*, int);
};

/// Runs fn(0) .. fn(chunks - 1) on up to `threads` threads: the caller and
/// threads - 1 pool workers (or the team of a loaded OpenMP runtime). The chunks
/// are cut into one block per thread; each thread runs its own block first, so a
/// loop called again finds its part of the data in the same core's cache, then
/// takes the chunks left in the others, so a worker that wakes late leaves its
/// share to the others; the caller waits only for chunks another thread claimed.
/// Returns when all chunks are done and rethrows the first exception. Runs
/// serially on the calling thread when threads or chunks is 1, from inside a chunk
/// (no nested parallelism), when another thread's region holds the pool
/// (concurrent callers do not queue), and for a back-off after a region whose
/// threads were not run in time (a busy machine: see thread_pool.cc's Governor).
void parallel_for(int chunks, int threads, ChunkFn fn);

/// Whether regions run on fewer threads while the machine is oversubscribed
/// (default on; KJIT_ADAPTIVE_THREADS=0 turns it off). Tests that need regions on
/// several threads on a loaded machine turn it off.
void set_adaptive_threads(bool on);

/// Replaces how the governor reads the machine's runnable threads (-1: unknown,
/// every CPU counts as free); nullptr restores /proc/loadavg. For tests.
void set_runnable_reader(int (*reader)());

/// The pool's worker threads in this process (0 before the first parallel region
/// and in a forked child until its first one): for tests.
int pool_worker_count();

}  // namespace cpu
}  // namespace kjit

#endif  // KJIT_SRC_CPU_THREAD_POOL_H_
