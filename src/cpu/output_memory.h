// Host memory for the CPU outputs kjit.elementwise allocates itself (results of
// calls without out=), and the few large blocks it keeps after they are freed.
#ifndef KJIT_SRC_CPU_OUTPUT_MEMORY_H_
#define KJIT_SRC_CPU_OUTPUT_MEMORY_H_

#include <cstddef>

namespace kjit {
namespace cpu {

/// A block of host memory and the size it was allocated with, which release()
/// needs back.
struct OutputBlock {
  void* data = nullptr;
  size_t capacity = 0;
};

/// At least `bytes` (>= 1) bytes for a new output, its pages faulted in when
/// large (docs/elementwise.md, "New outputs"); data is null when the system has
/// no memory for it.
OutputBlock acquire_output_memory(size_t bytes);

/// Gives a block from acquire_output_memory back: freed, or kept for the next
/// output of its size class.
void release_output_memory(OutputBlock block);

/// Blocks from this size up are kept when freed: glibc maps each such block
/// afresh, so every page of a new one faults and is zeroed by the kernel, and
/// it is unmapped when freed.
constexpr size_t kKeepFrom = size_t{1} << 25;
/// Blocks above this size are never kept.
constexpr size_t kKeepUpTo = size_t{1} << 30;
/// How many freed blocks are kept at once.
constexpr int kKeptBlocks = 2;

}  // namespace cpu
}  // namespace kjit

#endif  // KJIT_SRC_CPU_OUTPUT_MEMORY_H_
