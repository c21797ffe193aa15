// The threads that run kjit's parallel chunks besides the caller (the pool's
// workers, or the team of a loaded OpenMP runtime), by thread id, and how many of
// them the scheduler counts as runnable now: what the governor subtracts from the
// machine's runnable count, as a worker spinning after a region is in that count
// and a sleeping one is not.
#ifndef KJIT_SRC_CPU_OWN_THREADS_H_
#define KJIT_SRC_CPU_OWN_THREADS_H_

namespace kjit {
namespace cpu {

/// Records the calling thread as one of ours (once per thread; at most 64 are
/// kept, the rest are not counted). Cheap after the first call on a thread.
void note_own_thread();

/// How many of our recorded threads are running or runnable now (state R in
/// /proc/self/task/<tid>/stat); threads that exited count as none.
int runnable_own_threads();

}  // namespace cpu
}  // namespace kjit

#endif  // KJIT_SRC_CPU_OWN_THREADS_H_
