// WaitEvent's polling schedule and the timers of the threads that poll.
#include "core/gpu/device.h"

#include <sys/prctl.h>

#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd::gpu {
namespace {

using ::testing::HasSubstr;

// An event that never fires and notes when it was polled.
class NeverFires : public Event {
 public:
  absl::StatusOr<bool> Done() override {
    polls_.push_back(absl::Now());
    return false;
  }
  // Polls between `from` and `to`.
  int PollsBetween(absl::Time from, absl::Time to) const {
    int n = 0;
    for (absl::Time t : polls_) n += (t >= from && t < to);
    return n;
  }

 private:
  std::vector<absl::Time> polls_;
};

TEST(WaitEvent, AnOpPastTheSpinIsPolledEveryFewHundredMicroseconds) {
  // Long past the spin, a poll every kLongestEventNap (200 us): ~100 in the
  // 20 ms looked at. Naps growing to 1 ms made it 20 at most.
  NeverFires event;
  const absl::Time start = absl::Now();
  const absl::Status s =
      WaitEvent(event, start + absl::Milliseconds(40), "op", nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_GT(event.PollsBetween(start + absl::Milliseconds(15),
                               start + absl::Milliseconds(35)),
            40);
}

TEST(WaitEvent, ATimeoutNamesTheOp) {
  NeverFires event;
  const absl::Status s = WaitEvent(event, absl::Now() + absl::Milliseconds(1),
                                   "rank 3: allreduce", nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(s.message(), HasSubstr("rank 3: allreduce did not finish"));
}

TEST(UsePreciseTimers, SetsTheCallingThreadsTimerSlackOnly) {
  const int before = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  int inside = -1, after_other = -1;
  std::thread([&] {
    UsePreciseTimers();
    inside = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  }).join();
  after_other = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  EXPECT_EQ(inside, 1);
  EXPECT_EQ(after_other, before);
}

}  // namespace
}  // namespace hvd::gpu
