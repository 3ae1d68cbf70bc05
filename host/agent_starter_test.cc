#include "host/agent_starter.h"

#include <signal.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "host/fake_os.h"

namespace hvd {
namespace host {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// An executable shell script `name` in the test's directory; its path.
std::string Script(const std::string& name, const std::string& text) {
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/" + name;
  {
    std::ofstream f(path);
    f << "#!/bin/sh\n" << text;
  }
  chmod(path.c_str(), 0755);
  return path;
}

// The least an agent's bootstrap holds.
host::Bootstrap Minimal(const std::string& token = "t") {
  host::Bootstrap b;
  b.token = token;
  b.rendezvous = {"127.0.0.1:1"};
  return b;
}

TEST(AgentCommand, LocalIsTheBinaryItself) {
  AgentStarterOptions o;
  o.local_agent = "/opt/hvd/hvd-agent";
  EXPECT_THAT(AgentCommand(o, "localhost", true),
              ElementsAre("/opt/hvd/hvd-agent", "--launcher-stdin"));
}

TEST(AgentCommand, RemoteGoesThroughBatchModeSsh) {
  AgentStarterOptions o;
  o.remote_agent = "/path with space/hvd-agent";
  o.ssh_port = 2222;
  o.ssh_identity_file = "/k/id";
  o.ssh_config_file = "/k/cfg";
  o.connect_timeout = absl::Seconds(7);
  EXPECT_THAT(AgentCommand(o, "node2", false),
              ElementsAre("ssh", "-F", "/k/cfg", "-o", "BatchMode=yes", "-o",
                          "ConnectTimeout=7", "-T", "-x", "-a", "-p", "2222",
                          "-i", "/k/id", "node2",
                          "exec '/path with space/hvd-agent' --launcher-stdin"));
}

// Inside a Slurm allocation: one single-task step on the node, overlapping
// the job's other steps, with the node's whole share of the job; the agent
// path is one argument (no remote shell), ssh's options play no part.
TEST(AgentCommand, SlurmNodeGoesThroughSrun) {
  AgentStarterOptions o;
  o.launch = AgentLaunch::kSrun;
  o.slurm_job_id = "42";
  o.remote_agent = "/path with space/hvd-agent";
  o.ssh_port = 2222;
  o.ssh_config_file = "/k/cfg";
  EXPECT_THAT(AgentCommand(o, "node07", false),
              ElementsAre("srun", "--jobid=42", "--nodes=1", "--ntasks=1",
                          "--ntasks-per-node=1", "--nodelist=node07",
                          "--overlap", "--mem=0", "--job-name=hvd-agent",
                          "/path with space/hvd-agent", "--launcher-stdin"));
}

TEST(ShellQuote, QuotesOnlyWhatNeedsIt) {
  EXPECT_EQ(ShellQuote("/usr/local/bin/hvd-agent"), "/usr/local/bin/hvd-agent");
  EXPECT_EQ(ShellQuote("a b"), "'a b'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellQuote(""), "''");
}

// An "agent" that reads its bootstrap, complains on stderr and exits: the
// report names how it ended and quotes the complaint; the token it was
// given never shows.
TEST(AgentStarter, ReportsExitWithStderrTail) {
  AgentStarterOptions o;
  o.local_agent = Script("fake-agent",
                         "head -c 21 >/dev/null\necho line one >&2\n"
                         "echo 'fatal: it broke' >&2\nexit 5\n");
  absl::Notification done;
  std::string why;
  int host = -1;
  AgentStarter starter(
      o, host::RealOs(),
      [&](int h, std::string w) {
        host = h;
        why = w;
        done.Notify();
      },
      nullptr);
  ASSERT_TRUE(
      starter.Start(3, "localhost", true, Minimal("secret-token-value")).ok());
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(host, 3);
  EXPECT_THAT(why, HasSubstr("exited with code 5"));
  EXPECT_THAT(why, HasSubstr("line one / fatal: it broke"));
  EXPECT_THAT(why, ::testing::Not(HasSubstr("secret-token-value")));
  starter.KillAll(absl::Seconds(1));
}

// Under Slurm the agent's srun runs in srun_env (PATH included) and its end
// is reported as srun's, with srun's complaint quoted.
TEST(AgentStarter, SrunRunsInItsOwnEnvironmentAndIsNamed) {
  const std::string dir = getenv("TEST_TMPDIR");
  Script("srun",
         "head -c 21 >/dev/null\necho \"$MARK $4 $5\" >&2\n"
         "echo 'srun: error: node2: task 0: Exited with exit code 3' >&2\n"
         "exit 3\n");
  AgentStarterOptions o;
  o.launch = AgentLaunch::kSrun;
  o.slurm_job_id = "9";
  o.remote_agent = "hvd-agent";
  o.srun_env = {"PATH=" + dir + ":/usr/bin:/bin", "MARK=from-srun-env"};
  absl::Notification done;
  std::string why;
  AgentStarter starter(
      o, host::RealOs(),
      [&](int, std::string w) {
        why = w;
        done.Notify();
      },
      nullptr);
  ASSERT_TRUE(starter.Start(1, "node2", false, Minimal()).ok());
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(why,
            "srun exited with code 3: from-srun-env --ntasks-per-node=1 "
            "--nodelist=node2 / srun: error: node2: task 0: Exited with exit "
            "code 3");
  starter.KillAll(absl::Seconds(1));
}

TEST(AgentStarter, KillAllEndsAHangingAgent) {
  AgentStarterOptions o2;
  o2.local_agent = Script("hang", "exec sleep 60\n");
  absl::Notification done;
  std::string why;
  AgentStarter hanging(
      o2, host::RealOs(),
      [&](int, std::string w) {
        why = w;
        done.Notify();
      },
      nullptr);
  ASSERT_TRUE(hanging.Start(0, "localhost", true, Minimal()).ok());
  hanging.KillAll(absl::Milliseconds(100));
  EXPECT_TRUE(done.HasBeenNotified());
  EXPECT_THAT(why, HasSubstr("killed by signal 15"));
}

// A launch tree's top agent is told of every host below it; its ssh reads
// nothing until connected. Start must not wait for that.
TEST(AgentStarter, ABootstrapLargerThanAPipeDoesNotHoldUpStart) {
  AgentStarterOptions o;
  o.local_agent = Script("slow-reader", "sleep 5\nexec cat >/dev/null\n");
  AgentStarter starter(o, host::RealOs(), [](int, std::string) {}, nullptr);
  host::Bootstrap b = Minimal();
  for (int h = 1; h <= 10000; ++h) {
    b.below.push_back({h, h / 64 - 1, absl::StrCat("node", h, ".example")});
  }
  ASSERT_GT(host::SerializeBootstrap(b).size(), size_t{200000});
  const absl::Time start = absl::Now();
  ASSERT_TRUE(starter.Start(0, "localhost", true, b).ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  starter.KillAll(absl::Milliseconds(100));
}

// By the fake clock: an agent that outlasts both the closing of its stdin
// and SIGTERM gets SIGKILL one grace after the SIGTERM.
TEST(AgentStarter, KillAllSigkillsAnAgentOneGraceAfterSigterm) {
  host::FakeOs os;
  os.IgnoreSignal(SIGTERM);
  AgentStarterOptions o;
  o.local_agent = "/opt/hvd/hvd-agent";
  std::string why;
  AgentStarter starter(
      o, &os, [&](int, std::string w) { why = w; }, nullptr);
  ASSERT_TRUE(starter.Start(0, "localhost", true, Minimal()).ok());
  const absl::Time t0 = os.Now();
  starter.KillAll(absl::Seconds(3));
  const std::vector<host::FakeOs::SentSignal> sent = os.signals();
  ASSERT_EQ(sent.size(), 2u);
  const pid_t agent = sent[0].target;
  EXPECT_THAT(sent,
              ElementsAre(host::FakeOs::SentSignal{t0 + absl::Seconds(3), agent,
                                                   true, SIGTERM},
                          host::FakeOs::SentSignal{t0 + absl::Seconds(6), agent,
                                                   true, SIGKILL}));
  // Reported before KillAll returns.
  EXPECT_EQ(why, "killed by signal 9 (Killed)");
}

// The OS seam: a spawn that fails (fork refused) is an error of Start, and no
// exit is reported for an agent that never existed.
TEST(AgentStarter, SpawnFailureIsReturnedNotReported) {
  host::FakeOs os;
  os.FailSpawns(
      absl::ResourceExhaustedError("fork: Resource temporarily unavailable"));
  AgentStarterOptions o;
  o.remote_agent = "hvd-agent";
  int reports = 0;
  AgentStarter starter(o, &os, [&](int, std::string) { ++reports; }, nullptr);
  absl::Status s = starter.Start(0, "node1", false, Minimal());
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("fork"));
  starter.KillAll(absl::Milliseconds(10));
  EXPECT_EQ(reports, 0);
}

}  // namespace
}  // namespace host
}  // namespace hvd
