// Workers wait on a condition variable for a generation of work; the caller takes
// chunk 0 itself, so a 2-thread pool has one worker.
#include "elementwise/thread_pool.h"

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "kjit/elementwise.h"

namespace kjit {
namespace ew {
namespace {

thread_local bool t_in_parallel = false;
std::atomic<int> g_requested{0};

int env_threads(const char* var) {
  const char* v = std::getenv(var);
  if (v == nullptr || *v == '\0') return 0;
  int n = std::atoi(v);
  return n > 0 ? n : 0;
}

int default_threads() {
  if (int n = env_threads("KJIT_NUM_THREADS")) return n;
  if (int n = env_threads("OMP_NUM_THREADS")) return n;
  unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

class Pool {
 public:
  static Pool& instance() {
    static Pool* pool = new Pool();  // never destroyed: workers may outlive static destruction
    return *pool;
  }

  void run(int chunks, const std::function<void(int)>& fn) {
    std::unique_lock<std::mutex> call(call_mu_);  // one parallel region at a time
    ensure_workers(chunks - 1);
    {
      std::lock_guard<std::mutex> lock(mu_);
      fn_ = &fn;
      chunks_ = chunks;
      next_ = 1;
      pending_ = chunks - 1;
      error_ = nullptr;
      ++generation_;
    }
    wake_.notify_all();
    run_chunk(fn, 0);
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [&] { return pending_ == 0; });
    fn_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void ensure_workers(int n) {
    while (static_cast<int>(workers_.size()) < n) workers_.emplace_back([this] { work(); });
  }

  void run_chunk(const std::function<void(int)>& fn, int chunk) {
    t_in_parallel = true;
    try {
      fn(chunk);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_) error_ = std::current_exception();
    }
    t_in_parallel = false;
  }

  void work() {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      wake_.wait(lock, [&] { return generation_ != seen && next_ < chunks_; });
      seen = generation_;
      while (next_ < chunks_) {
        int chunk = next_++;
        const std::function<void(int)>* fn = fn_;
        lock.unlock();
        run_chunk(*fn, chunk);
        lock.lock();
        if (--pending_ == 0) done_.notify_all();
      }
    }
  }

  std::mutex call_mu_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  const std::function<void(int)>* fn_ = nullptr;
  int chunks_ = 0, next_ = 0, pending_ = 0;
  uint64_t generation_ = 0;
  std::exception_ptr error_;
};

}  // namespace

void parallel_for(int chunks, const std::function<void(int)>& fn) {
  if (chunks <= 1 || t_in_parallel) {
    for (int c = 0; c < chunks; ++c) fn(c);
    return;
  }
  Pool::instance().run(chunks, fn);
}

}  // namespace ew

int get_num_threads() {
  int n = ew::g_requested.load();
  return n > 0 ? n : ew::default_threads();
}

void set_num_threads(int n) { ew::g_requested.store(n > 0 ? n : 0); }

}  // namespace kjit
