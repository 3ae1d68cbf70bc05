// A launch tree (hvdrun --launch-fanout): agents that start the agents of
// the hosts below them over ssh. The job runs as launched flat, a host
// below that cannot be reached is named with ssh's error and the agent that
// tried, and a lost agent in the middle ends the job with nothing left on
// any host. Run by netns_hosts.sh with 4 hosts.
#include <signal.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/multihost/multihost_test_base.h"

namespace hvd {
namespace multihost {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

class LaunchTreeTest : public MultiHostTest {};

TEST_F(LaunchTreeTest, AChainOfFourHostsRunsTheJobAsLaunchedFlat) {
  // Fanout 1: hvdrun starts h1's agent, h1's starts h2's, and so on.
  launcher::CommandResult r =
      Run({"--launch-fanout", "1", "--verbose", "-np", "4", "-H",
           "h1:1,h2:1,h3:1,h4:1", Driver(), "--allreduce"});
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_TRUE(r.status.ok()) << r.status.ToString() << "\n" << r.err;
  for (int rank = 0; rank < 4; ++rank) {
    const std::string host = absl::StrCat("h", rank + 1);
    EXPECT_THAT(r.out, HasSubstr(absl::StrCat(
                           "[", rank, "]<stdout>:identity rank=", rank,
                           " size=4 local_rank=0 local_size=1 cross_rank=",
                           rank, " cross_size=4 hostname=", host)));
    EXPECT_THAT(r.out,
                HasSubstr(absl::StrCat("[", rank,
                                       "]<stdout>:allreduce sum=6 expected=6 "
                                       "ok")));
  }
  // Who started whom, as each agent logs it (a child's lines reach hvdrun
  // through its parent's stderr).
  EXPECT_THAT(r.err, HasSubstr("hvd-agent h1: starting the agent of h2 (2 "
                               "hosts below it)"));
  EXPECT_THAT(r.err, HasSubstr("hvd-agent h2: starting the agent of h3 (1 "
                               "hosts below it)"));
  EXPECT_THAT(r.err, HasSubstr("hvd-agent h3: starting the agent of h4 (0 "
                               "hosts below it)"));
  EXPECT_TRUE(NothingLeftWithin(absl::Seconds(10)));
}

TEST_F(LaunchTreeTest, AHostBelowThatCannotBeReachedIsNamedWithItsStarter) {
  const std::string nowhere = getenv("HVD_MH_UNREACHABLE");
  launcher::CommandResult r =
      Run({"--launch-fanout", "1", "--start-timeout", "20", "-np", "2", "-H",
           "h1:1," + nowhere + ":1", IdentityDriver()});
  EXPECT_EQ(r.status.ShellCode(), 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat(
                         "hvdrun: host ", nowhere,
                         ": could not start hvd-agent: ssh exited with code "
                         "255: ssh: connect to host ",
                         nowhere, " port 22: ")));
  EXPECT_THAT(r.err, AnyOf(HasSubstr("No route to host (started by the "
                                     "agent of h1)"),
                           HasSubstr("Connection timed out (started by the "
                                     "agent of h1)")));
  EXPECT_TRUE(NothingLeftWithin(absl::Seconds(10)));
}

TEST_F(LaunchTreeTest, AnAgentLostInTheMiddleEndsTheJobAndLeavesNothing) {
  launcher::BackgroundCommand job(
      Hvdrun({"--launch-fanout", "1", "-np", "4", "-H", "h1:1,h2:1,h3:1,h4:1",
              "--kill-grace-seconds", "2", IdentityDriver(), "--sleep", "60"}),
      Env(), tmp_);
  ASSERT_TRUE(WaitForWorkers("HVD_SIZE=4", 4, absl::Seconds(30)));
  const pid_t agent = AgentPid("h2");
  ASSERT_GT(agent, 0);
  kill(agent, SIGKILL);
  launcher::CommandResult r = job.Wait(absl::Seconds(30));
  EXPECT_EQ(r.status.ShellCode(), 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("hvdrun: host h2: "));
  // h3's and h4's agents and workers went with the agent that started them.
  EXPECT_TRUE(NothingLeftWithin(absl::Seconds(15), /*ignore_sshd=*/true));
}

}  // namespace
}  // namespace multihost
}  // namespace hvd
