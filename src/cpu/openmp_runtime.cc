// Finding a loaded libgomp. Why: torch runs its CPU loops on libgomp, whose
// workers spin for a while after each region. On a machine with few cores, a
// second pool (kjit's own) then waits for a core those spinners hold, and each
// call alternating between torch and kjit pays for it. Running kjit's regions on
// the same runtime wakes the same, already spinning, threads. kjit never loads an
// OpenMP runtime itself: it only uses one that is there.
#include "cpu/openmp_runtime.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace kjit {
namespace cpu {
namespace {

OpenMpRuntime g_runtime;  // written once, before g_found points at it
std::atomic<const OpenMpRuntime*> g_found{nullptr};
std::atomic<bool> g_forked{false};
std::mutex g_search_mu;
std::atomic<unsigned long long> g_searched_adds{~0ULL};  // dlpi_adds at the last search

bool disabled_by_env() {
  const char* v = std::getenv("KJIT_OPENMP");
  return v != nullptr && std::strcmp(v, "0") == 0;
}

/// dl_iterate_phdr callback: the path of the first object named libgomp*.
int find_libgomp(dl_phdr_info* info, size_t, void* out) {
  const char* name = info->dlpi_name;
  if (name == nullptr) return 0;
  const char* base = std::strrchr(name, '/');
  base = base ? base + 1 : name;
  if (std::strncmp(base, "libgomp", 7) != 0) return 0;
  *static_cast<std::string*>(out) = name;
  return 1;
}

/// dl_iterate_phdr callback: how many objects were ever loaded (a cheap
/// "anything new?" test: it stops at the first object).
int count_adds(dl_phdr_info* info, size_t, void* out) {
  *static_cast<unsigned long long*>(out) = info->dlpi_adds;
  return 1;
}

/// The loaded libgomp's entry points, or null. Called under g_search_mu, and only
/// until one is found.
const OpenMpRuntime* search() {
  std::string path;
  if (dl_iterate_phdr(find_libgomp, &path) == 0) return nullptr;
  // RTLD_NOLOAD: a handle to the object already there, never a new load.
  void* handle = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) return nullptr;
  // The handle stays open: the library is in use.
  void* parallel = dlsym(handle, "GOMP_parallel");
  if (parallel == nullptr) return nullptr;
  g_runtime.parallel = reinterpret_cast<GompParallelFn>(parallel);
  g_runtime.thread_num = reinterpret_cast<int (*)()>(dlsym(handle, "omp_get_thread_num"));
  return &g_runtime;
}

}  // namespace

const OpenMpRuntime* loaded_openmp_runtime() {
  if (g_forked.load(std::memory_order_relaxed)) return nullptr;
  if (const OpenMpRuntime* found = g_found.load(std::memory_order_acquire)) return found;
  static const bool disabled = disabled_by_env();
  if (disabled) return nullptr;
  unsigned long long adds = 0;
  dl_iterate_phdr(count_adds, &adds);
  // Nothing loaded since the last search: no lock on the usual path of a process without libgomp.
  if (adds == g_searched_adds.load(std::memory_order_acquire)) return g_found.load(std::memory_order_acquire);
  std::lock_guard<std::mutex> lock(g_search_mu);
  if (adds == g_searched_adds.load()) return g_found.load();
  static const int registered = pthread_atfork(nullptr, nullptr, [] { g_forked.store(true); });
  (void)registered;
  const OpenMpRuntime* found = search();
  g_found.store(found, std::memory_order_release);
  g_searched_adds.store(adds, std::memory_order_release);  // after g_found: a reader that sees it sees the result
  return found;
}

}  // namespace cpu
}  // namespace kjit
