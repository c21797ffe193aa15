// Drives a compiled elementwise CPU kernel over a planned loop nest: the lane each
// plan runs in is chosen once, when the plan is made; rows of the inner dim run on
// the thread pool, tiny inner dims through tiles.
#ifndef KJIT_SRC_CPU_LOOP_DRIVER_H_
#define KJIT_SRC_CPU_LOOP_DRIVER_H_

#include <cstdint>
#include <vector>

#include "cpu/trap_guard.h"
#include "iterator/plan.h"

namespace kjit {

/// `void kjit_ew_kernel(char** data, const int64_t* strides, int64_t size0, int64_t size1,
/// const void* extra)`: size1 rows of size0 elements (TensorIterator's loop2d);
/// `strides` holds each operand's inner byte stride, then each one's outer.
using KernelFn = void (*)(char**, const int64_t*, int64_t, int64_t, const void*);

namespace cpu {

/// A compiled CPU kernel and whether its calls run under the integer-trap guard.
struct Kernel {
  KernelFn fn = nullptr;
  bool guard_traps = false;
  void operator()(char** data, const int64_t* strides, int64_t size0, int64_t size1, const void* extra) const {
    if (guard_traps) {
      call_trap_guarded([&] { fn(data, strides, size0, size1, extra); });
    } else {
      fn(data, strides, size0, size1, extra);
    }
  }
};

/// A loop of up to this many elements runs on the calling thread, a larger one on
/// one thread per started grain (PyTorch's grain and count). On this project's
/// 2-core machine two threads won from 2^14 when quiet (BM_AddThreads, when it
/// still split there: 1.9 us on one thread, 1.5 on two), but with other processes
/// running, or the data in one core's L2, they lose up to 2^15 (Python, 2^15: 3.3
/// us against 2.1), while from 2^16 they win either way (2^16: 4.15 us on one
/// thread, 2.43 on two).
constexpr int64_t kGrainSize = 32768;
/// Chunks per thread of a parallel loop: the slack that lets a late thread's share
/// go to the others. Each chunk more costs a little (float32 add on 2 threads,
/// 2^18: 1, 2 and 4 chunks per thread took 21.7, 21.9 and 22.4 us in one process,
/// torch's two halves 21.0), so two: a late thread costs a quarter, not a half.
constexpr int kChunksPerThread = 2;
/// codegen_cpu's kernels write a contiguous run of at least this many output bytes
/// with non-temporal stores; a parallel loop keeps its chunks that large when its
/// output is.
constexpr int64_t kStreamBytes = int64_t{1} << 22;

/// How a plan's loop runs (the part TensorIterator's FastSetupType plays).
enum class Lane {
  kOneRow,  ///< 1-D, non-empty, up to one grain: one kernel call on the calling thread
  kRows,    ///< rows of the inner dim, split across threads from the grain up
  kTiled,   ///< the layout of tiles_small_inner_dim
  kCuda,    ///< a device loop (cuda_launch)
};

/// A laid-out loop nest and how it runs.
struct LoopPlan {
  // What a 1-element call reads first, ahead of the (large) loop nest.
  Lane lane = Lane::kRows;
  std::vector<int64_t> strides;  ///< dims 0 and 1's byte strides per operand, as the kernel takes them
  detail::LoopLayout loop;
};

/// Lays out the loop over `shape` (make_loop, then tiles or a small inner dim moved
/// out) and picks its lane. `operands`: outputs first (n_out of them).
LoopPlan plan_loop(const std::vector<int64_t>& shape, detail::Operands operands, size_t n_out, bool cuda);

/// Lane::kRows and Lane::kTiled.
void execute_loop_nest(const Kernel& kernel, const LoopPlan& plan, char** data, const void* extra);

/// Runs a CPU lane with `data` (one pointer per operand, outputs first).
inline void execute(const Kernel& kernel, const LoopPlan& plan, char** data, const void* extra) {
  if (plan.lane == Lane::kOneRow) {
    kernel(data, plan.strides.data(), plan.loop.shape[0], 1, extra);
    return;
  }
  execute_loop_nest(kernel, plan, data, extra);
}

}  // namespace cpu
}  // namespace kjit

#endif  // KJIT_SRC_CPU_LOOP_DRIVER_H_
