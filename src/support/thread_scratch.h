// Per-thread scratch buffers for the per-call hot paths.
#ifndef KJIT_SRC_SUPPORT_THREAD_SCRATCH_H_
#define KJIT_SRC_SUPPORT_THREAD_SCRATCH_H_

#include <memory>

namespace kjit {

/// This thread's T, made on first use and freed when the thread ends. A thread_local
/// object with a constructor costs several TLS lookups per access in a shared
/// library (guard, initialisation, the object); this reaches it through one
/// constant-initialised pointer, so a small call pays one.
template <typename T>
T& thread_scratch() {
  static thread_local T* fast = nullptr;
  if (fast == nullptr) {
    static thread_local std::unique_ptr<T> owner = std::make_unique<T>();  // freed when the thread ends
    fast = owner.get();
  }
  return *fast;
}

}  // namespace kjit

#endif  // KJIT_SRC_SUPPORT_THREAD_SCRATCH_H_
