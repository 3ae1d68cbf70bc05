// Start-up failures across hosts (unreachable host, bad ssh key, no agent
// there, an agent that never joins), and orchestrator mode with agents
// started by hand on two hosts, a wrong-token agent refused. Run by
// netns_hosts.sh with 2 hosts.
#include <sys/stat.h>

#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/multihost/multihost_test_base.h"

namespace hvd {
namespace multihost {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::Not;

class StartupTest : public MultiHostTest {};

TEST_F(StartupTest, UnreachableHostIsNamedWithSshsError) {
  const std::string nowhere = getenv("HVD_MH_UNREACHABLE");
  // Nobody answers ARP there: ssh fails with "No route to host" after ~3 s,
  // well before the start timeout.
  launcher::CommandResult r = Run({"--start-timeout", "20", "-np", "2", "-H",
                                   "h1:1," + nowhere + ":1", IdentityDriver()});
  EXPECT_EQ(r.status.ShellCode(), 1);
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat(
                         "hvdrun: host ", nowhere,
                         ": could not start hvd-agent: ssh exited with code "
                         "255: ssh: connect to host ", nowhere, " port 22: ")));
  EXPECT_THAT(r.err, AnyOf(HasSubstr("No route to host"),
                           HasSubstr("Connection timed out")));
  EXPECT_TRUE(NothingLeftWithin(absl::Seconds(10)));
}

TEST_F(StartupTest, BadSshKeyQuotesSsh) {
  launcher::CommandResult r = launcher::RunCommand(
      Hvdrun({"-i", getenv("HVD_MH_BAD_KEY"), "-np", "2", "-H", "h1:1,h2:1",
              IdentityDriver()},
             "h0", /*with_key=*/false),
      Env(), absl::Seconds(30), tmp_);
  EXPECT_EQ(r.status.ShellCode(), 1);
  EXPECT_THAT(r.err, HasSubstr("could not start hvd-agent: ssh exited with "
                               "code 255"));
  EXPECT_THAT(r.err, HasSubstr("Permission denied (publickey)"));
  EXPECT_TRUE(NothingLeftWithin(absl::Seconds(10)));
}

TEST_F(StartupTest, HostWithoutAgent) {
  std::vector<std::string> argv = Hvdrun({"-np", "1", "-H", "h2:1", IdentityDriver()});
  // The harness's --agent-path comes first; a later one would be a repeat.
  argv[6] = "/nonexistent/hvd-agent";
  launcher::CommandResult r =
      launcher::RunCommand(argv, Env(), absl::Seconds(30), tmp_);
  EXPECT_EQ(r.status.ShellCode(), 1);
  EXPECT_THAT(r.err, HasSubstr("hvdrun: host h2: could not start hvd-agent: "
                               "ssh exited with code 127"));
  EXPECT_THAT(r.err, HasSubstr("/nonexistent/hvd-agent"));
}

TEST_F(StartupTest, AgentThatNeverJoinsHitsTheStartTimeout) {
  // Hangs without joining, but ends when its stdin does (when ssh goes), as
  // the real agent does.
  std::string stuck = tmp_ + "/stuck-agent";
  std::ofstream(stuck) << "#!/bin/sh\nexec cat >/dev/null\n";
  chmod(stuck.c_str(), 0755);
  std::vector<std::string> argv = Hvdrun(
      {"--start-timeout", "2", "--kill-grace-seconds", "1", "-np", "2", "-H",
       "h1:1,h2:1", IdentityDriver()});
  argv[6] = stuck;
  launcher::CommandResult r =
      launcher::RunCommand(argv, Env(), absl::Seconds(30), tmp_);
  EXPECT_EQ(r.status.ShellCode(), 1);
  EXPECT_THAT(r.err, HasSubstr("hvdrun: hosts h1, h2: hvd-agent did not "
                               "connect within 2 s (--start-timeout)"));
  EXPECT_TRUE(NothingLeftWithin(absl::Seconds(10)));
}

// The rendezvous alone on h0; agents started by hand on h1 and h2 (as an
// orchestrator would), the token from the file hvdrun wrote.
TEST_F(StartupTest, OrchestratorModeAcrossHosts) {
  std::string file = tmp_ + "/rendezvous";
  unlink(file.c_str());
  launcher::BackgroundCommand server(
      {"/usr/sbin/ip", "netns", "exec", Var("NETNS", "h0"),
       launcher::Runfile("launcher/hvdrun"), "--rendezvous-only", "-np", "4",
       "--rendezvous-file", file, Driver(), "--allreduce"},
      Env(), tmp_);
  std::string addr, token;
  absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (token.empty() && absl::Now() < deadline) {
    std::ifstream in(file);
    std::string line;
    while (std::getline(in, line)) {
      if (absl::StartsWith(line, "HVD_RENDEZVOUS_ADDR=")) addr = line.substr(20);
      if (absl::StartsWith(line, "HVD_JOB_TOKEN=")) token = line.substr(14);
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_FALSE(token.empty());
  auto agent = [&](const std::string& host, std::vector<std::string> env) {
    return std::make_unique<launcher::BackgroundCommand>(
        std::vector<std::string>{"/usr/sbin/ip", "netns", "exec",
                                 Var("NETNS", host), Agent(), "--rendezvous",
                                 addr, "--slots", "2", "--hostname", host},
        env, tmp_);
  };
  std::vector<std::string> good = Env();
  good.push_back("HVD_JOB_TOKEN=" + token);
  std::vector<std::string> wrong = Env();
  wrong.push_back("HVD_JOB_TOKEN=0123456789abcdef");
  auto intruder = agent("h2", wrong);
  launcher::CommandResult refused = intruder->Wait(absl::Seconds(20));
  EXPECT_EQ(refused.status.ShellCode(), 1);
  EXPECT_THAT(refused.err, HasSubstr("refused the job token"));
  auto a1 = agent("h1", good);
  auto a2 = agent("h2", good);
  launcher::CommandResult rs = server.Wait(absl::Seconds(30));
  EXPECT_TRUE(rs.status.ok()) << rs.err;
  EXPECT_TRUE(a1->Wait(absl::Seconds(10)).status.ok());
  EXPECT_TRUE(a2->Wait(absl::Seconds(10)).status.ok());
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_THAT(rs.out, HasSubstr(absl::StrCat(
                            "[", rank, "]<stdout>:allreduce sum=6 expected=6 ok")));
  }
  EXPECT_THAT(rs.out, Not(HasSubstr(token)));
  EXPECT_TRUE(NothingLeftWithin(absl::Seconds(10)));
}

}  // namespace
}  // namespace multihost
}  // namespace hvd
