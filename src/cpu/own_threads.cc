// The threads that run kjit's chunks and their scheduler state (own_threads.h).
#include "cpu/own_threads.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>

namespace kjit {
namespace cpu {
namespace {

constexpr int kMaxOwnThreads = 64;
std::atomic<int> g_tids[kMaxOwnThreads];
std::atomic<int> g_count{0};
thread_local bool t_noted = false;

/// Whether thread `tid` of this process is running or runnable: the state letter
/// after the command name's closing parenthesis (the name may hold one itself).
bool runnable(int tid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char text[512];
  const ssize_t n = read(fd, text, sizeof(text) - 1);
  close(fd);
  if (n <= 0) return false;
  text[n] = '\0';
  const char* close_paren = std::strrchr(text, ')');
  return close_paren != nullptr && close_paren[1] == ' ' && close_paren[2] == 'R';
}

}  // namespace

void note_own_thread() {
  if (t_noted) return;
  t_noted = true;
  static const int registered = pthread_atfork(nullptr, nullptr, [] {
    for (std::atomic<int>& tid : g_tids) tid.store(0);  // the child has none of the parent's threads
    g_count.store(0);
    t_noted = false;
  });
  (void)registered;
  const int slot = g_count.fetch_add(1);
  if (slot < kMaxOwnThreads) g_tids[slot].store(static_cast<int>(syscall(SYS_gettid)), std::memory_order_release);
}

int runnable_own_threads() {
  const int count = std::min(g_count.load(), kMaxOwnThreads);
  int n = 0;
  for (int i = 0; i < count; ++i) {
    const int tid = g_tids[i].load(std::memory_order_acquire);
    n += tid > 0 && runnable(tid) ? 1 : 0;
  }
  return n;
}

}  // namespace cpu
}  // namespace kjit
