// The shared side of the plan cache: a map under a lock, cleared when it grows
// past kMaxPlans (a process that keeps making new layouts does not grow without
// bound; threads keep the plans they hold).
#include "elementwise/plan_cache.h"

#include <atomic>

namespace kjit {
namespace ew {
namespace {

constexpr size_t kMaxPlans = 1024;

uint64_t next_serial() {
  static std::atomic<uint64_t> counter{0};
  return ++counter;
}

}  // namespace

PlanCache::PlanCache() : serial_(next_serial()) {}

std::shared_ptr<const CallPlan> PlanCache::find(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = plans_.find(key);
  return it == plans_.end() ? nullptr : it->second;
}

std::shared_ptr<const CallPlan> PlanCache::keep(const std::string& key, std::shared_ptr<const CallPlan> plan) {
  std::lock_guard<std::mutex> lock(mu_);
  if (plans_.size() >= kMaxPlans) plans_.clear();
  return plans_.emplace(key, std::move(plan)).first->second;
}

}  // namespace ew
}  // namespace kjit
