#include "core/runtime/config.h"

#include <stdlib.h>

#include "gtest/gtest.h"

namespace hvd::runtime {
namespace {

Config Cycles(double cycle_ms, double idle_ms) {
  Config c;
  c.cycle_time = absl::Microseconds(static_cast<int64_t>(cycle_ms * 1000));
  c.idle_cycle_time = absl::Microseconds(static_cast<int64_t>(idle_ms * 1000));
  return c;
}

TEST(CycleTimeAfterTest, DoublesPerIdleCycleUpToTheIdleCycleTime) {
  const Config c = Cycles(1, 20);
  EXPECT_EQ(CycleTimeAfter(c, 0), absl::Milliseconds(1));
  EXPECT_EQ(CycleTimeAfter(c, 1), absl::Milliseconds(2));
  EXPECT_EQ(CycleTimeAfter(c, 4), absl::Milliseconds(16));
  EXPECT_EQ(CycleTimeAfter(c, 5), absl::Milliseconds(20));
  EXPECT_EQ(CycleTimeAfter(c, 1000000), absl::Milliseconds(20));
}

TEST(CycleTimeAfterTest, NoBackOffWhenTheIdleCycleTimeIsNotLonger) {
  EXPECT_EQ(CycleTimeAfter(Cycles(5, 0), 10), absl::Milliseconds(5));
  EXPECT_EQ(CycleTimeAfter(Cycles(5, 5), 10), absl::Milliseconds(5));
}

TEST(CycleTimeAfterTest, ZeroCycleTimeStaysZero) {
  EXPECT_EQ(CycleTimeAfter(Cycles(0, 20), 10), absl::ZeroDuration());
}

TEST(ConfigFromEnvTest, ReadsIdleCycleTimeInMilliseconds) {
  setenv("HVD_IDLE_CYCLE_TIME", "7.5", 1);
  absl::StatusOr<Config> c = ConfigFromEnv();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->idle_cycle_time, absl::Microseconds(7500));
  setenv("HVD_IDLE_CYCLE_TIME", "-1", 1);
  EXPECT_EQ(ConfigFromEnv().status().message(),
            "HVD_FUSION_THRESHOLD, HVD_CACHE_CAPACITY, HVD_CYCLE_TIME and "
            "HVD_IDLE_CYCLE_TIME must not be negative");
  unsetenv("HVD_IDLE_CYCLE_TIME");
  EXPECT_EQ(ConfigFromEnv()->idle_cycle_time, absl::Milliseconds(20));
}

}  // namespace
}  // namespace hvd::runtime
