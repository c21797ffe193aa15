// The GNU OpenMP runtime another library already loaded into this process (in
// practice torch's libgomp), on which parallel_for then runs its regions: one set
// of worker threads per process instead of two sets spinning against each other.
#ifndef KJIT_SRC_CPU_OPENMP_RUNTIME_H_
#define KJIT_SRC_CPU_OPENMP_RUNTIME_H_

namespace kjit {
namespace cpu {

/// GOMP_parallel of libgomp's stable ABI: runs fn(data) on the caller and
/// num_threads - 1 team threads, and returns after all of them finished.
using GompParallelFn = void (*)(void (*fn)(void*), void* data, unsigned num_threads, unsigned flags);

/// The entry points of a loaded libgomp that parallel_for uses.
struct OpenMpRuntime {
  GompParallelFn parallel = nullptr;  ///< never null in a found runtime
  int (*thread_num)() = nullptr;      ///< omp_get_thread_num; null if the library lacks it
};

/// The libgomp already loaded in the process, or null: when none is loaded, in a
/// forked child (the parent's OpenMP threads do not exist there), and when
/// KJIT_OPENMP=0. Looks again only after new objects were loaded.
const OpenMpRuntime* loaded_openmp_runtime();

}  // namespace cpu
}  // namespace kjit

#endif  // KJIT_SRC_CPU_OPENMP_RUNTIME_H_
