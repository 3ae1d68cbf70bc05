// kill -9 of a worker, of an agent, of hvdrun; Ctrl-C: the job ends with the
// right message and nothing of it is left on any host within 10 s. Run by
// netns_hosts.sh with 2 hosts.
#include <signal.h>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/multihost/multihost_test_base.h"

namespace hvd {
namespace multihost {
namespace {

using ::testing::HasSubstr;

class FaultsTest : public MultiHostTest {
 protected:
  // A job of 4 sleeping workers on h1 and h2, all started.
  std::unique_ptr<launcher::BackgroundCommand> StartSleepingJob() {
    auto c = std::make_unique<launcher::BackgroundCommand>(
        Hvdrun({"-np", "4", "-H", "h1:2,h2:2", "--kill-grace-seconds", "2",
                IdentityDriver(), "--sleep", "60"}),
        Env(), tmp_);
    EXPECT_TRUE(WaitForWorkers("HVD_SIZE=4", 4, absl::Seconds(20)));
    return c;
  }
};

TEST_F(FaultsTest, KillNineOfAWorker) {
  auto job = StartSleepingJob();
  std::vector<pid_t> rank1 = Workers("HVD_RANK=1");
  ASSERT_EQ(rank1.size(), 1u);
  kill(rank1[0], SIGKILL);
  launcher::CommandResult r = job->Wait(absl::Seconds(30));
  EXPECT_EQ(r.status.ShellCode(), 137);
  EXPECT_THAT(r.err, HasSubstr("hvdrun: rank 1 (host h1) killed by signal 9"));
  EXPECT_TRUE(NothingLeftWithin(absl::Seconds(10)));
}

TEST_F(FaultsTest, KillNineOfAnAgent) {
  auto job = StartSleepingJob();
  pid_t agent = AgentPid("h2");
  ASSERT_GT(agent, 0);
  kill(agent, SIGKILL);
  launcher::CommandResult r = job->Wait(absl::Seconds(30));
  EXPECT_EQ(r.status.ShellCode(), 1);
  EXPECT_THAT(r.err, HasSubstr("hvdrun: host h2: "));
  EXPECT_TRUE(NothingLeftWithin(absl::Seconds(10)));
}

TEST_F(FaultsTest, KillNineOfHvdrun) {
  auto job = StartSleepingJob();
  kill(job->pid(), SIGKILL);  // `ip netns exec` has exec'd hvdrun
  job->Wait(absl::Seconds(10));
  EXPECT_TRUE(NothingLeftWithin(absl::Seconds(10)));
}

TEST_F(FaultsTest, CtrlCEndsTheJob) {
  auto job = StartSleepingJob();
  kill(job->pid(), SIGINT);
  launcher::CommandResult r = job->Wait(absl::Seconds(30));
  EXPECT_EQ(r.status.ShellCode(), 130);
  EXPECT_THAT(r.err, HasSubstr("hvdrun: got signal 2"));
  EXPECT_TRUE(NothingLeftWithin(absl::Seconds(10)));
}

}  // namespace
}  // namespace multihost
}  // namespace hvd
