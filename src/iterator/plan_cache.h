// An engine's plan cache (elementwise and reductions): call metadata -> plan, in a bounded map its threads
// share, with each thread's last plan matched in place against a call (no key
// written, no lock) so a repeated call costs a comparison of ~15 words.
#ifndef KJIT_SRC_ITERATOR_PLAN_CACHE_H_
#define KJIT_SRC_ITERATOR_PLAN_CACHE_H_

#include <dlpack/dlpack.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kjit/elementwise.h"
#include "support/compiler_hints.h"
#include "support/thread_scratch.h"

namespace kjit {
namespace iterator {

/// Plan keys are 64-bit words kept in a std::string (for the map's hashing). One
/// encoder feeds either sink: KeyWriter appends the words, KeyMatcher compares
/// them with a stored key in place.
struct KeyWriter {
  std::string* key;
  void word(uint64_t v) { key->append(reinterpret_cast<const char*>(&v), sizeof(v)); }
};

struct KeyMatcher {
  const char* at;
  const char* end;
  bool ok = true;
  explicit KeyMatcher(const std::string& key) : at(key.data()), end(key.data() + key.size()) {}
  KJIT_INLINE void word(uint64_t v) {
    if (KJIT_UNLIKELY(at == end)) {  // the call has more words than the key: a mismatch
      ok = false;
      return;
    }
    uint64_t stored;
    std::memcpy(&stored, at, sizeof(v));
    ok &= stored == v;  // no branch per word
    at += sizeof(v);
  }
  bool matched() const { return ok && at == end; }
};

template <class Sink>
KJIT_INLINE void encode_tensor(Sink* sink, const DLTensor* t) {
  // Unsigned: ndim and the device fields are int32s a caller could set negative.
  sink->word(t->dtype.code | uint64_t{t->dtype.bits} << 8 | uint64_t{t->dtype.lanes} << 16 |
             uint64_t{t->strides != nullptr} << 32);
  sink->word(uint64_t{static_cast<uint32_t>(t->device.device_type)} |
             uint64_t{static_cast<uint32_t>(t->device.device_id)} << 32);
  sink->word(static_cast<uint32_t>(t->ndim));
  for (int d = 0; d < t->ndim; ++d) sink->word(static_cast<uint64_t>(t->shape[d]));
  if (t->strides != nullptr) {
    for (int d = 0; d < t->ndim; ++d) sink->word(static_cast<uint64_t>(t->strides[d]));
  }
}

/// What a call's plan depends on: the rules, the counts, each extra scalar's kind
/// (the type it travels in), each input (a scalar by its kind only: a top-bit word
/// no tensor's first word has) and each given output (none for an allocating call,
/// whose plan lays its outputs out itself).
template <class Sink>
KJIT_INLINE void encode_call(Sink* sink, const std::vector<EwOperand>& inputs, const DLTensor* const* outputs,
                             size_t n_out, const std::vector<EwOperand>& extra, Promotion p) {
  sink->word(uint64_t{inputs.size()} << 32 | uint64_t{n_out});
  sink->word(uint64_t{extra.size()} << 1 | uint64_t{p == Promotion::kTorch});
  for (const EwOperand& e : extra) sink->word(static_cast<uint64_t>(e.scalar));
  for (const EwOperand& in : inputs) {
    if (in.tensor != nullptr) {
      encode_tensor(sink, in.tensor);
    } else {
      sink->word(uint64_t{1} << 63 | static_cast<uint64_t>(in.scalar));
    }
  }
  for (size_t k = 0; k < n_out; ++k) encode_tensor(sink, outputs[k]);
}

/// A thread's last plan: its engine (by serial, unlike an address never reused),
/// its key and the plan, which a call on this thread may be running with.
template <class Plan>
struct LastPlan {
  uint64_t engine = 0;
  std::string key;
  std::shared_ptr<const Plan> plan;
  bool in_use = false;
};

/// The plan one call runs with, held until the call ends. A hit runs with the
/// thread's last plan, marked in use meanwhile: a call made from inside this one
/// on the same thread (an allocator that runs elementwise calls) neither matches
/// nor replaces it. A miss runs with the plan found or made, which then becomes
/// the thread's last unless a call further out is using that.
template <class Plan>
class PlanLease {
 public:
  explicit PlanLease(LastPlan<Plan>* slot) : slot_(slot), plan_(slot->plan.get()) { slot->in_use = true; }
  PlanLease(LastPlan<Plan>* slot, std::unique_ptr<LastPlan<Plan>> found)
      : slot_(slot), plan_(found->plan.get()), found_(std::move(found)) {}
  ~PlanLease() {
    if (!found_) {
      slot_->in_use = false;
    } else if (!slot_->in_use) {
      *slot_ = std::move(*found_);
    }
  }
  PlanLease(const PlanLease&) = delete;
  PlanLease& operator=(const PlanLease&) = delete;

  const Plan& operator*() const { return *plan_; }
  const Plan* operator->() const { return plan_; }

 private:
  LastPlan<Plan>* slot_;
  const Plan* plan_;
  std::unique_ptr<LastPlan<Plan>> found_;  // a miss's plan; null on a hit
};

/// A serial no two plan caches share (plan_cache.cc).
uint64_t next_plan_cache_serial();
/// The shared map's bound: past it, it is cleared (a process that keeps making new
/// layouts does not grow without bound; threads keep the plans they hold).
constexpr size_t kMaxPlans = 1024;

/// Plan caches of the elementwise engine (CallPlan) and of reductions.
template <class Plan>
class PlanCache {
 public:
  PlanCache() : serial_(next_plan_cache_serial()) {}
  PlanCache(const PlanCache&) = delete;
  PlanCache& operator=(const PlanCache&) = delete;

  /// The plan for the call that encode(&sink) describes (encode_call): this
  /// thread's last plan when it matches, else the shared map's, else make()'s
  /// (a std::shared_ptr<const Plan>), which the map keeps.
  template <class Encode, class Make>
  KJIT_INLINE PlanLease<Plan> lease(const Encode& encode, const Make& make) {
    LastPlan<Plan>& slot = thread_scratch<LastPlan<Plan>>();
    if (slot.engine == serial_ && !slot.in_use) {
      KeyMatcher m(slot.key);
      encode(&m);
      if (m.matched()) return PlanLease<Plan>(&slot);
    }
    return PlanLease<Plan>(&slot, find_or_make(encode, make));
  }

 private:
  template <class Encode, class Make>
  KJIT_NOINLINE std::unique_ptr<LastPlan<Plan>> find_or_make(const Encode& encode, const Make& make) {
    auto found = std::make_unique<LastPlan<Plan>>();
    found->engine = serial_;
    KeyWriter w{&found->key};
    encode(&w);
    found->plan = find(found->key);
    if (!found->plan) found->plan = keep(found->key, make());
    return found;
  }
  std::shared_ptr<const Plan> find(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = plans_.find(key);
    return it == plans_.end() ? nullptr : it->second;
  }
  /// Keeps `plan` under `key` unless another thread kept one first; returns the kept one.
  std::shared_ptr<const Plan> keep(const std::string& key, std::shared_ptr<const Plan> plan) {
    std::lock_guard<std::mutex> lock(mu_);
    if (plans_.size() >= kMaxPlans) plans_.clear();
    return plans_.emplace(key, std::move(plan)).first->second;
  }

  const uint64_t serial_;
  std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const Plan>> plans_;
};

}  // namespace iterator
}  // namespace kjit

#endif  // KJIT_SRC_ITERATOR_PLAN_CACHE_H_
