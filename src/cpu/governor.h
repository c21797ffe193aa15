// How many threads a parallel region gets on a busy machine, decided from times
// and a reading of the machine, both given: the pool passes the clock and
// /proc/loadavg, tests pass their own and check every decision without waiting on
// the scheduler (tests/cpp/test_governor.cc).
#ifndef KJIT_SRC_CPU_GOVERNOR_H_
#define KJIT_SRC_CPU_GOVERNOR_H_

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>

namespace kjit {
namespace cpu {

using Clock = std::chrono::steady_clock;

/// A caller's wait for chunks other threads hold that marks a region late, when it
/// is also more than four of the caller's own chunks: far above a sleeping
/// worker's (or OpenMP team thread's) wake-up, below a scheduler's time slice.
constexpr std::chrono::microseconds kLateWait{1000};
/// The governor's serial windows after late regions: from a few time slices to half
/// a second, so a probe of a still-busy machine is rare among calls.
constexpr std::chrono::milliseconds kMinBackoff{4};
constexpr std::chrono::milliseconds kMaxBackoff{512};
/// A late region this soon after the last window's end doubles the next window.
constexpr std::chrono::seconds kRecentLate{1};
/// How often the governor reads the machine's free CPUs.
constexpr std::chrono::milliseconds kSampleInterval{16};

/// Whether a region found the machine too busy for its threads, from what its
/// caller saw: a worker that was spinning when woken (so it needed no wake-up,
/// only a CPU) but claimed nothing, or a wait for other threads' chunks far
/// longer than a chunk takes (a thread was descheduled holding one).
struct RegionTiming {
  Clock::time_point start;       ///< when the region was opened
  Clock::time_point claims_end;  ///< when the caller found no chunk left to claim
  int caller_chunks = 0;         ///< chunks the caller ran

  bool waited_too_long(Clock::time_point end) const {
    const auto work = claims_end - start;
    const auto per_chunk = caller_chunks > 0 ? work / caller_chunks : work;
    return end - claims_end > std::max<Clock::duration>(kLateWait, 4 * per_chunk);
  }
};

/// How many threads regions get while the machine is oversubscribed: after a late
/// region, one (the caller alone) for a window. A region late again within
/// kRecentLate of the last window's end doubles the next one (a machine that stays
/// busy is probed, with a full region, about twice a second); one after a quiet
/// second starts from the shortest. A region on one thread depends on no other
/// thread being run; a late one costs a time slice, so parallel regions between
/// late ones pay only when late ones are rare. Between windows, a region gets no
/// more threads than there are CPUs nothing else wants (`free_cpus()`, read every
/// kSampleInterval, two readings in a row): that sees a competitor before any
/// region is late. Thread-safe; times are the caller's.
class Governor {
 public:
  /// `free_cpus`: the CPUs nothing else wants now (the pool: online CPUs less the
  /// runnable threads that are not its own).
  explicit Governor(int (*free_cpus)()) : free_cpus_reader_(free_cpus) {}

  /// Threads for a region that asks for `requested`, at `now`.
  int threads(int requested, Clock::time_point now) {
    if (requested <= 1) return requested;
    const int64_t t = ns(now);
    const int64_t until = serial_until_.load(std::memory_order_relaxed);
    if (until != 0 && t < until) return 1;
    int64_t last = last_sample_.load(std::memory_order_relaxed);
    const int64_t interval = std::chrono::nanoseconds(kSampleInterval).count();
    if ((last == kNever || t - last >= interval) &&
        last_sample_.compare_exchange_strong(last, t, std::memory_order_relaxed)) {
      // Two readings in a row must see a competitor: a kernel thread or another
      // short task caught by one reading would cost a whole interval of serial loops.
      const int reading = free_cpus_reader_();
      free_cpus_.store(std::max(reading, last_reading_.exchange(reading, std::memory_order_relaxed)),
                       std::memory_order_relaxed);
    }
    return std::max(1, std::min(requested, free_cpus_.load(std::memory_order_relaxed)));
  }

  /// What a region that ended at `now` saw: `late` starts (or lengthens) a window.
  void report(bool late, Clock::time_point now) {
    if (!late) return;
    const int64_t min = std::chrono::nanoseconds(kMinBackoff).count();
    const int64_t max = std::chrono::nanoseconds(kMaxBackoff).count();
    const int64_t recent = std::chrono::nanoseconds(kRecentLate).count();
    const int64_t t = ns(now);
    const int64_t last_end = serial_until_.load(std::memory_order_relaxed);
    int64_t window = window_ns_.load(std::memory_order_relaxed);
    window = last_end != 0 && t - last_end < recent ? std::min(std::max(2 * window, min), max) : min;
    window_ns_.store(window, std::memory_order_relaxed);
    serial_until_.store(t + window, std::memory_order_relaxed);
  }

 private:
  static constexpr int64_t kNever = INT64_MIN;
  static int64_t ns(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  }

  int (*free_cpus_reader_)();
  std::atomic<int64_t> serial_until_{0};  ///< the end of the last serial window, 0 before any
  std::atomic<int64_t> window_ns_{0};
  std::atomic<int64_t> last_sample_{kNever};
  std::atomic<int> free_cpus_{INT_MAX};
  std::atomic<int> last_reading_{INT_MAX};
};

}  // namespace cpu
}  // namespace kjit

#endif  // KJIT_SRC_CPU_GOVERNOR_H_
