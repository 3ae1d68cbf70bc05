// A host cut off mid-job (its link taken down: no FIN, no RST, just
// silence): heartbeats stop, hvdrun ends the job naming the host, and the
// cut-off agent ends its own workers. Its own harness run: the cut-off sshd
// session lingers until TCP gives up.
#include <signal.h>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/multihost/multihost_test_base.h"

namespace hvd {
namespace multihost {
namespace {

using ::testing::HasSubstr;

class PartitionTest : public MultiHostTest {};

TEST_F(PartitionTest, HostCutOffMidJobEndsTheJobAndItsWorkers) {
  std::vector<std::string> env = Env();
  env.push_back("HVD_HEARTBEAT_TIMEOUT_MS=3000");
  launcher::BackgroundCommand job(
      Hvdrun({"-np", "4", "-H", "h1:2,h2:2", "--kill-grace-seconds", "1",
              IdentityDriver(), "--sleep", "60"}),
      env, tmp_);
  ASSERT_TRUE(WaitForWorkers("HVD_SIZE=4", 4, absl::Seconds(20)));
  const std::string h2 = Var("NETNS", "h2");
  ASSERT_TRUE(launcher::RunCommand({"/usr/sbin/ip", "-n", h2, "link", "set",
                                    "eth0", "down"},
                                   Env(), absl::Seconds(10))
                  .status.ok());
  launcher::CommandResult r = job.Wait(absl::Seconds(30));
  EXPECT_EQ(r.status.ShellCode(), 1);
  EXPECT_THAT(r.err, HasSubstr("hvdrun: host h2: no heartbeat from hvd-agent "
                               "for "));
  // The agent on h2 heard nothing either, and ended its workers itself.
  EXPECT_TRUE(NothingLeftWithin(absl::Seconds(10), /*ignore_sshd=*/true));
  launcher::RunCommand({"/usr/sbin/ip", "-n", h2, "link", "set", "eth0", "up"},
                       Env(), absl::Seconds(10));
}

}  // namespace
}  // namespace multihost
}  // namespace hvd
