// A small persistent thread pool for the elementwise CPU loops.
#ifndef KJIT_SRC_ELEMENTWISE_THREAD_POOL_H_
#define KJIT_SRC_ELEMENTWISE_THREAD_POOL_H_

#include <cstdint>
#include <functional>

namespace kjit {
namespace ew {

/// Runs fn(0) .. fn(chunks - 1), chunk 0 on the calling thread, the rest on the
/// pool; returns when all are done and rethrows the first exception. Calls from
/// inside a chunk run serially (no nested parallelism).
void parallel_for(int chunks, const std::function<void(int)>& fn);

}  // namespace ew
}  // namespace kjit

#endif  // KJIT_SRC_ELEMENTWISE_THREAD_POOL_H_
