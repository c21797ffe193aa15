// The plan caches' serials: a thread's last plan names its cache by serial, which,
// unlike the cache's address, no later cache reuses.
#include "iterator/plan_cache.h"

#include <atomic>

namespace kjit {
namespace iterator {

uint64_t next_plan_cache_serial() {
  static std::atomic<uint64_t> counter{0};
  return ++counter;
}

}  // namespace iterator
}  // namespace kjit
