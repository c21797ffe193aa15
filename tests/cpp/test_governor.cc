// The busy-machine governor's decisions (src/cpu/governor.h), with the times and
// the machine's readings given: nothing here waits on the scheduler, so a loaded
// machine cannot change an answer.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "cpu/governor.h"

namespace {

using kjit::cpu::Clock;
using kjit::cpu::Governor;
using kjit::cpu::kLateWait;
using kjit::cpu::kMaxBackoff;
using kjit::cpu::kMinBackoff;
using kjit::cpu::kSampleInterval;
using kjit::cpu::RegionTiming;
using std::chrono::microseconds;
using std::chrono::milliseconds;

/// A moment `ms` milliseconds after an arbitrary start, to the nanosecond.
Clock::time_point at(double ms) {
  return Clock::time_point(
      std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(std::llround(ms * 1e6))));
}

int g_free = 64;  // what the machine reading says: CPUs nothing else wants
int read_free() { return g_free; }

struct GovernorTest : ::testing::Test {
  void SetUp() override { g_free = 64; }
  Governor g{&read_free};
};

TEST_F(GovernorTest, AQuietMachineGetsTheThreadsAsked) {
  EXPECT_EQ(g.threads(8, at(0)), 8);
  EXPECT_EQ(g.threads(1, at(1)), 1);
  g.report(false, at(2));
  EXPECT_EQ(g.threads(8, at(3)), 8);
}

TEST_F(GovernorTest, ALateRegionMakesTheNextOnesSerialForTheShortestWindow) {
  g.report(true, at(100));
  const double min = std::chrono::duration<double, std::milli>(kMinBackoff).count();
  EXPECT_EQ(g.threads(8, at(100)), 1);
  EXPECT_EQ(g.threads(8, at(100 + min - 0.001)), 1);
  EXPECT_EQ(g.threads(8, at(100 + min)), 8);  // the window is over: the pool again
}

TEST_F(GovernorTest, LateRegionsSoonAfterAWindowDoubleItUpToTheLongest) {
  double now = 1000, window = std::chrono::duration<double, std::milli>(kMinBackoff).count();
  const double max = std::chrono::duration<double, std::milli>(kMaxBackoff).count();
  g.report(true, at(now));
  for (int i = 0; i < 12; ++i) {
    now += window;  // the first region after the window: late again at once
    EXPECT_EQ(g.threads(8, at(now)), 8) << i;
    g.report(true, at(now));
    window = std::min(2 * window, max);
    EXPECT_EQ(g.threads(8, at(now + window - 0.001)), 1) << i;
    EXPECT_EQ(g.threads(8, at(now + window)), 8) << i;
  }
  EXPECT_EQ(window, max);
}

TEST_F(GovernorTest, ALateRegionAfterAQuietSecondStartsFromTheShortestWindowAgain) {
  double now = 0;
  g.report(true, at(now));
  for (int i = 0; i < 5; ++i) g.report(true, at(now += 1));  // a long window
  now += 512 + 1000 + 1;                                     // past it, then a quiet second
  g.report(true, at(now));
  const double min = std::chrono::duration<double, std::milli>(kMinBackoff).count();
  EXPECT_EQ(g.threads(8, at(now + min - 0.001)), 1);
  EXPECT_EQ(g.threads(8, at(now + min)), 8);
}

TEST_F(GovernorTest, RegionsGetNoMoreThreadsThanFreeCpusOnceTwoReadingsSayIt) {
  const double every = std::chrono::duration<double, std::milli>(kSampleInterval).count();
  EXPECT_EQ(g.threads(8, at(0)), 8);  // the first reading: 64 free
  g_free = 1;                         // a competitor takes every CPU but one
  EXPECT_EQ(g.threads(8, at(every - 0.001)), 8) << "read again before the interval";
  EXPECT_EQ(g.threads(8, at(every)), 8) << "one reading is not enough (a short task may have caused it)";
  EXPECT_EQ(g.threads(8, at(2 * every)), 1);
  EXPECT_EQ(g.threads(8, at(2 * every + 1)), 1);
  g_free = 3;
  EXPECT_EQ(g.threads(8, at(3 * every)), 3) << "the larger of the last two readings";
  EXPECT_EQ(g.threads(2, at(3 * every + 1)), 2);
  g_free = 64;
  EXPECT_EQ(g.threads(8, at(4 * every)), 8);
}

TEST(RegionTiming, LateIsAWaitFarLongerThanAChunkAndThanAWakeUp) {
  RegionTiming t;
  t.start = at(0);
  t.claims_end = at(0.4);  // the caller's 4 chunks of 0.1 ms
  t.caller_chunks = 4;
  const double late_wait = std::chrono::duration<double, std::milli>(kLateWait).count();
  EXPECT_FALSE(t.waited_too_long(at(0.4 + late_wait)));
  EXPECT_TRUE(t.waited_too_long(at(0.4 + late_wait + 0.001)));
  t.claims_end = at(20);  // long chunks: 5 ms each; a wait of four of them is not late
  EXPECT_FALSE(t.waited_too_long(at(40)));
  EXPECT_TRUE(t.waited_too_long(at(40.001)));
  t.caller_chunks = 0;  // the caller ran none: its whole claiming time counts as a chunk
  t.claims_end = at(0.1);
  EXPECT_FALSE(t.waited_too_long(at(0.1 + late_wait)));
  EXPECT_TRUE(t.waited_too_long(at(0.1 + late_wait + 0.001)));
}

}  // namespace
