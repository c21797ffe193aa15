// parallel_for on an OpenMP runtime another library loaded (as torch loads its
// libgomp): regions run on the runtime's team, errors and nesting behave as on
// kjit's own pool, and a forked child goes back to kjit's pool. Each test runs in
// its own process (gtest_discover_tests), so loading libgomp here affects no other.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "block_schedule.h"
#include "cpu/openmp_runtime.h"
#include "cpu/thread_pool.h"

namespace {

using kjit::cpu::loaded_openmp_runtime;
using kjit::cpu::parallel_for;

/// Loads the system's libgomp as a Python extension would (RTLD_LOCAL); the
/// omp_get_thread_num it exports.
int (*load_libgomp())() {
  void* h = dlopen("libgomp.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) return nullptr;
  return reinterpret_cast<int (*)()>(dlsym(h, "omp_get_thread_num"));
}

TEST(OpenMpRuntime, NoneUntilOneIsLoaded) {
  kjit_test::ThreadsNotAdapted threads_not_adapted;
  EXPECT_EQ(loaded_openmp_runtime(), nullptr) << "libgomp was loaded before the test loaded it";
  auto thread_num = load_libgomp();
  if (thread_num == nullptr) GTEST_SKIP() << "no libgomp.so.1 on this machine";
  EXPECT_NE(loaded_openmp_runtime(), nullptr) << "a libgomp loaded after the first look was not found";
}

TEST(OpenMpRuntime, RegionsRunOnTheRuntimesTeam) {
  kjit_test::ThreadsNotAdapted threads_not_adapted;
  auto thread_num = load_libgomp();
  if (thread_num == nullptr) GTEST_SKIP() << "no libgomp.so.1 on this machine";
  // A loaded machine may not run team thread 1 within one region: up to 5 s of them.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  bool second = false;
  while (!second && std::chrono::steady_clock::now() < deadline) {
    std::vector<int> team_ids(64, -1);
    std::vector<std::atomic<int>> runs(64);
    parallel_for(64, 2, [&](int c) {
      runs[c].fetch_add(1);
      team_ids[c] = thread_num();
      std::this_thread::sleep_for(std::chrono::microseconds(300));  // long enough for the team thread to take some
    });
    for (int c = 0; c < 64; ++c) {
      ASSERT_EQ(runs[c].load(), 1) << "chunk " << c;
      second = second || team_ids[c] == 1;
    }
  }
  EXPECT_TRUE(second) << "no chunk ran on OpenMP team thread 1 in 5 s of regions";
  EXPECT_EQ(kjit::cpu::pool_worker_count(), 0) << "kjit's own pool started although OpenMP ran the region";
}

TEST(OpenMpRuntime, EachTeamThreadRunsItsOwnBlockFirst) {
  kjit_test::ThreadsNotAdapted threads_not_adapted;
  auto thread_num = load_libgomp();
  if (thread_num == nullptr) GTEST_SKIP() << "no libgomp.so.1 on this machine";
  ASSERT_NE(loaded_openmp_runtime(), nullptr);
  ASSERT_NE(loaded_openmp_runtime()->thread_num, nullptr) << "omp_get_thread_num was not found";
  for (int region = 0; region < 3; ++region) {  // OpenMP thread t gets block t on every call
    EXPECT_EQ(kjit_test::run_block_region(thread_num), (std::vector<int>{0, 0, 1, 0})) << "region " << region;
  }
}

TEST(OpenMpRuntime, FirstErrorReachesTheCaller) {
  kjit_test::ThreadsNotAdapted threads_not_adapted;
  if (load_libgomp() == nullptr) GTEST_SKIP() << "no libgomp.so.1 on this machine";
  try {
    parallel_for(16, 2, [](int c) {
      if (c == 11) throw std::invalid_argument("chunk 11 failed");
    });
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "chunk 11 failed");
  }
}

TEST(OpenMpRuntime, NestedRegionRunsOnTheChunksThread) {
  kjit_test::ThreadsNotAdapted threads_not_adapted;
  if (load_libgomp() == nullptr) GTEST_SKIP() << "no libgomp.so.1 on this machine";
  std::atomic<int> foreign{0}, inner_runs{0};
  parallel_for(4, 2, [&](int) {
    const std::thread::id outer = std::this_thread::get_id();
    parallel_for(8, 2, [&](int) {
      inner_runs.fetch_add(1);
      if (std::this_thread::get_id() != outer) foreign.fetch_add(1);
    });
  });
  EXPECT_EQ(inner_runs.load(), 32);
  EXPECT_EQ(foreign.load(), 0) << "a nested region left its chunk's thread";
}

TEST(OpenMpRuntime, ForkedChildUsesKjitsPool) {
  kjit_test::ThreadsNotAdapted threads_not_adapted;
  if (load_libgomp() == nullptr) GTEST_SKIP() << "no libgomp.so.1 on this machine";
  parallel_for(8, 2, [](int) {});  // the parent's OpenMP team exists now
  pid_t pid = fork();
  if (pid == 0) {
    // The parent's team threads do not exist here: using them would hang.
    if (loaded_openmp_runtime() != nullptr) _exit(2);
    std::atomic<int> runs{0};
    parallel_for(64, 2, [&](int) {
      runs.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    });
    _exit(runs.load() == 64 && kjit::cpu::pool_worker_count() == 1 ? 0 : 1);
  }
  int status = -1;
  for (int waited_ms = 0; waited_ms < 20000 && waitpid(pid, &status, WNOHANG) != pid; waited_ms += 10) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (status == -1) kill(pid, SIGKILL), waitpid(pid, nullptr, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
}

TEST(OpenMpRuntime, EnvironmentTurnsItOff) {
  kjit_test::ThreadsNotAdapted threads_not_adapted;
  setenv("KJIT_OPENMP", "0", 1);  // before the first look, which reads it once
  if (load_libgomp() == nullptr) GTEST_SKIP() << "no libgomp.so.1 on this machine";
  EXPECT_EQ(loaded_openmp_runtime(), nullptr);
  std::atomic<int> runs{0};
  parallel_for(64, 2, [&](int) {
    runs.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  });
  EXPECT_EQ(runs.load(), 64);
  EXPECT_EQ(kjit::cpu::pool_worker_count(), 1) << "kjit's own pool did not run the region";
}

}  // namespace

/// Runnable threads the governor reads in the test below: the caller and one
/// competitor per CPU but one, so exactly one CPU is free.
int one_cpu_free() { return static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)); }

// The team of a loaded OpenMP runtime sleeps some milliseconds after a region;
// the governor must not count it as awake (and subtract it from the runnable
// count) then, or a competitor stays hidden and regions stay parallel beside it.
TEST(OpenMpRuntime, ACompetitorSeenAfterTheTeamSleptMakesRegionsSerial) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "needs 2 CPUs";
  auto thread_num = load_libgomp();
  if (thread_num == nullptr) GTEST_SKIP() << "no libgomp.so.1 on this machine";
  kjit::cpu::set_runnable_reader([] { return 1; });  // the caller alone
  std::vector<int> team_ids(8, -1);
  auto region = [&] {
    parallel_for(8, 2, [&](int c) {
      team_ids[c] = thread_num();
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    });
    bool second = false;
    for (int id : team_ids) second = second || id == 1;
    return second;
  };
  // A loaded machine can make a region late (a serial window follows): up to 5 s.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  bool used_team = region();
  while (!used_team && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(600));  // past the longest window
    used_team = region();
  }
  ASSERT_TRUE(used_team) << "the quiet machine's regions did not use the team in 5 s";
  kjit::cpu::set_runnable_reader(&one_cpu_free);
  for (int reading = 0; reading < 2; ++reading) {                // two readings in a row must see it
    std::this_thread::sleep_for(std::chrono::milliseconds(40));  // past the team's spin and the last reading
    region();                                                    // reads the count
  }
  EXPECT_FALSE(region()) << "a region used the OpenMP team beside a competitor";
  kjit::cpu::set_runnable_reader(nullptr);
}
