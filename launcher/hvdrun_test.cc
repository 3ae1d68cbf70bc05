// hvdrun end to end on this machine: the real binaries (hvdrun, hvd-agent),
// local fork/exec agents, real workers (sh). Multi-host cases over ssh and
// network namespaces are in tests/multihost/.
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/common/random_hex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "launcher/test_command.h"

namespace hvd {
namespace launcher {
namespace {

using ::testing::AllOf;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

class HvdrunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    mark_ = absl::StrCat("HVD_TEST_MARK=",
                         RandomHex(32).value().substr(0, 12));
    tmp_ = getenv("TEST_TMPDIR");
  }

  std::vector<std::string> Env(std::vector<std::string> extra = {}) {
    std::vector<std::string> env = {"PATH=/usr/bin:/bin", mark_};
    env.insert(env.end(), extra.begin(), extra.end());
    return env;
  }

  std::vector<std::string> Hvdrun(std::vector<std::string> args) {
    std::vector<std::string> argv = {Runfile("launcher/hvdrun"),
                                     "--agent-path",
                                     Runfile("agent/hvd-agent")};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }

  CommandResult Run(std::vector<std::string> args,
                    std::vector<std::string> extra_env = {}) {
    return RunCommand(Hvdrun(std::move(args)), Env(std::move(extra_env)),
                      absl::Seconds(30), tmp_);
  }

  // Waits (up to 10 s) until `n` processes carry this test's mark.
  void WaitForMarkedProcesses(size_t n) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (LiveProcessesWithEnv(mark_).size() < n && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(20));
    }
  }

  // The address and token `hvdrun --rendezvous-only --rendezvous-file F`
  // wrote to F, once both are there (empty after 10 s without them).
  struct RendezvousFile {
    std::string addr;
    std::string token;
  };
  static RendezvousFile WaitForRendezvousFile(const std::string& file) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    RendezvousFile found;
    while (absl::Now() < deadline) {
      std::ifstream in(file);
      for (std::string line; std::getline(in, line);) {
        absl::string_view rest = line;
        if (absl::ConsumePrefix(&rest, "HVD_RENDEZVOUS_ADDR=")) {
          found.addr = std::string(rest);
        }
        if (absl::ConsumePrefix(&rest, "HVD_JOB_TOKEN=")) {
          found.token = std::string(rest);
        }
      }
      if (!found.addr.empty() && !found.token.empty()) return found;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return {};
  }

  void ExpectNothingLeft() {
    EXPECT_THAT(WaitForNoProcessesWithEnv(mark_, absl::Seconds(10)),
                ::testing::IsEmpty());
  }

  std::string mark_;
  std::string tmp_;
};

TEST_F(HvdrunTest, EveryRankGetsItsIdentityAndOutputIsPrefixed) {
  CommandResult r = Run(
      {"-np", "3", "sh", "-c",
       "echo rank=$HVD_RANK size=$HVD_SIZE local=$HVD_LOCAL_RANK/"
       "$HVD_LOCAL_SIZE cross=$HVD_CROSS_RANK/$HVD_CROSS_SIZE "
       "host=$HVD_HOSTNAME iface=$HVD_IFACE alias=$HOROVOD_RANK "
       "token=${#HVD_JOB_TOKEN} rdv=$HVD_RENDEZVOUS_ADDR; echo oops >&2"});
  ASSERT_FALSE(r.timed_out);
  EXPECT_TRUE(r.status.ok()) << r.err;
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_THAT(r.out,
                HasSubstr(absl::StrCat("[", rank, "]<stdout>:rank=", rank,
                                       " size=3 local=", rank,
                                       "/3 cross=0/1 host=localhost "
                                       "iface=127.0.0.1 alias=",
                                       rank, " token=64 rdv=127.0.0.1:")));
    EXPECT_THAT(r.err, HasSubstr(absl::StrCat("[", rank, "]<stderr>:oops\n")));
  }
  ExpectNothingLeft();
}

TEST_F(HvdrunTest, AnIfaceVariableThatNamesNoInterfaceFailsTheJob) {
  CommandResult r = Run({"-np", "2", "touch", tmp_ + "/iface_started"},
                        {"HVD_IFACE=nosuchif"});
  EXPECT_EQ(r.status.ShellCode(), 1);
  EXPECT_THAT(r.err, HasSubstr("has none of the interfaces nosuchif"));
  EXPECT_NE(access((tmp_ + "/iface_started").c_str(), F_OK), 0);
  ExpectNothingLeft();
}

TEST_F(HvdrunTest, AOneHostJobsAgentListensOnNoPort) {
  // The worker's parent is the agent: list the TCP sockets it listens on
  // (state 0A in /proc/net/tcp) among its open files.
  CommandResult r = Run(
      {"-np", "1", "sh", "-c",
       "for f in /proc/$PPID/fd/*; do readlink $f; done | "
       "sed -n 's/^socket:\\[\\([0-9]*\\)\\]$/\\1/p' > inodes; "
       "echo agent=$PPID; "
       "awk 'NR>1 && $4==\"0A\" {print $10}' /proc/net/tcp /proc/net/tcp6 | "
       "grep -c -x -F -f inodes || true"});
  ASSERT_TRUE(r.status.ok()) << r.err;
  EXPECT_THAT(r.out, HasSubstr("[0]<stdout>:0\n")) << r.out;
}

TEST_F(HvdrunTest, AStoppedRankIsSaidAndNamedWhenTheJobFails) {
  // Rank 1 stops itself; rank 0 waits until hvdrun has had time to see it,
  // then fails, as a rank waiting on a stopped peer would at its timeout.
  CommandResult r = Run(
      {"--kill-grace-seconds", "1", "-np", "2", "sh", "-c",
       "if [ $HVD_RANK = 1 ]; then kill -STOP $$; exit 0; fi; "
       "sleep 3; exit 5"});
  EXPECT_EQ(r.status.ShellCode(), 5);
  EXPECT_THAT(r.err, HasSubstr("hvdrun: rank 1 (host localhost) is stopped "
                               "(SIGSTOP, SIGTSTP or a debugger)"));
  EXPECT_THAT(r.err, HasSubstr("hvdrun: rank 0 (host localhost) exited with "
                               "code 5; rank 1 (host localhost) was stopped "
                               "at the time, which may be why"));
  ExpectNothingLeft();
}

TEST_F(HvdrunTest, HostListWithLocalhostFillsSlotsInOrder) {
  CommandResult r = Run({"-np", "2", "-H", "localhost:4", "sh", "-c",
                         "echo $HVD_RANK:$HVD_LOCAL_SIZE"});
  EXPECT_TRUE(r.status.ok()) << r.err;
  EXPECT_THAT(r.out, HasSubstr("[1]<stdout>:1:2\n"));
}

TEST_F(HvdrunTest, HostfileGivesSlotsAndNp) {
  std::string hostfile = tmp_ + "/hostfile";
  std::ofstream(hostfile) << "# this machine\nlocalhost slots=3\n";
  CommandResult r = Run({"--hostfile", hostfile, "sh", "-c",
                         "echo $HVD_RANK/$HVD_SIZE"});
  EXPECT_TRUE(r.status.ok()) << r.err;
  EXPECT_THAT(r.out, HasSubstr("[2]<stdout>:2/3\n"));
}

TEST_F(HvdrunTest, FirstFailingWorkerEndsTheJobWithItsCode) {
  CommandResult r = Run({"-np", "3", "sh", "-c",
                         "if [ $HVD_RANK = 1 ]; then echo bye; exit 3; fi; "
                         "exec sleep 30"});
  EXPECT_EQ(r.status.ShellCode(), 3);
  EXPECT_THAT(r.out, HasSubstr("[1]<stdout>:bye\n"));
  EXPECT_THAT(r.err, HasSubstr("rank 1 (host localhost) exited with code 3"));
  ExpectNothingLeft();
}

TEST_F(HvdrunTest, WorkerKilledBySignalGives128PlusSignal) {
  CommandResult r = Run({"-np", "2", "--kill-grace-seconds", "1", "sh", "-c",
                         "if [ $HVD_RANK = 0 ]; then kill -9 $$; fi; "
                         "trap '' TERM; sleep 30"});
  EXPECT_EQ(r.status.ShellCode(), 137);
  EXPECT_THAT(r.err, HasSubstr("rank 0 (host localhost) killed by signal 9"));
  ExpectNothingLeft();
}

TEST_F(HvdrunTest, OutputOfADyingWorkerIsKeptIncludingPartialLine) {
  CommandResult r = Run({"-np", "1", "sh", "-c",
                         "echo full; printf 'partial'; kill -9 $$"});
  EXPECT_EQ(r.status.ShellCode(), 137);
  EXPECT_THAT(r.out, HasSubstr("[0]<stdout>:full\n[0]<stdout>:partial\n"));
}

TEST_F(HvdrunTest, OutputFilenameKeepsRawPerRankFiles) {
  std::string dir = tmp_ + "/out/dir";  // created, parents too
  CommandResult r = Run({"--output-filename", dir, "-np", "2", "sh", "-c",
                         "echo out$HVD_RANK; echo err$HVD_RANK >&2"});
  ASSERT_TRUE(r.status.ok()) << r.err;
  for (int rank = 0; rank < 2; ++rank) {
    std::ifstream o(absl::StrCat(dir, "/rank.", rank, "/stdout"));
    std::ifstream e(absl::StrCat(dir, "/rank.", rank, "/stderr"));
    std::stringstream so, se;
    so << o.rdbuf();
    se << e.rdbuf();
    EXPECT_EQ(so.str(), absl::StrCat("out", rank, "\n"));
    EXPECT_EQ(se.str(), absl::StrCat("err", rank, "\n"));
  }
}

TEST_F(HvdrunTest, EnvironmentForwardingRulesAndTunables) {
  CommandResult r = Run(
      {"-np", "1", "-x", "DISPLAY", "-x", "SET_HERE=v1", "--fusion-threshold-mb",
       "2", "--cycle-time-ms", "7", "--log-level", "debug", "sh", "-c",
       "echo fwd=$MY_VAR ssh=${SSH_CONNECTION:-none} host=${HOSTNAME:-none} "
       "display=$DISPLAY set=$SET_HERE fusion=$HVD_FUSION_THRESHOLD "
       "hfusion=$HOROVOD_FUSION_THRESHOLD cycle=$HVD_CYCLE_TIME "
       "log=$HVD_LOG_LEVEL pwd=$(pwd)"},
      {"MY_VAR=forwarded", "SSH_CONNECTION=1.2.3.4 5 6.7.8.9 22",
       "HOSTNAME=submitter", "DISPLAY=:7"});
  ASSERT_TRUE(r.status.ok()) << r.err;
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat(
                         "fwd=forwarded ssh=none host=none display=:7 set=v1 "
                         "fusion=2097152 hfusion=2097152 cycle=7 log=debug pwd=",
                         tmp_, "\n")));
}

// A horovodrun job script's flags: a config file, a --no- form, timestamped
// output, and a note (not an error) for the controller selector.
TEST_F(HvdrunTest, HorovodrunFlagsAndConfigFileCarryOver) {
  std::string config = tmp_ + "/horovod.yaml";
  std::ofstream(config) << "params:\n  cycle_time_ms: 2\n"
                           "timeline:\n  mark_cycles: true\n";
  CommandResult r = Run({"-np", "2", "--gloo", "--config-file", config,
                         "--no-hierarchical-allreduce",
                         "--prefix-output-with-timestamp", "sh", "-c",
                         "echo cycle=$HVD_CYCLE_TIME "
                         "marks=$HOROVOD_TIMELINE_MARK_CYCLES "
                         "hier=$HVD_HIERARCHICAL_ALLREDUCE"});
  ASSERT_TRUE(r.status.ok()) << r.err;
  EXPECT_THAT(r.out, ContainsRegex("(^|\n)[A-Z][a-z]{2} [A-Z][a-z]{2} [ 0-9]{2} "
                                   "[0-9]{2}:[0-9]{2}:[0-9]{2} [0-9]{4}"
                                   "\\[1\\]<stdout>:cycle=2 marks=1 hier=0\n"));
  EXPECT_THAT(r.err, HasSubstr("hvdrun: note: --gloo: hvd has one controller"));
}

TEST_F(HvdrunTest, SigtermToHvdrunEndsEveryWorker) {
  BackgroundCommand c(Hvdrun({"-np", "2", "sh", "-c", "echo up; exec sleep 60"}),
                      Env(), tmp_);
  // Both workers up: hvdrun, agent, reaper and two sleeps carry the mark.
  WaitForMarkedProcesses(5);
  kill(c.pid(), SIGTERM);
  CommandResult r = c.Wait(absl::Seconds(20));
  EXPECT_EQ(r.status.ShellCode(), 128 + SIGTERM);
  EXPECT_THAT(r.err, HasSubstr("got signal 15"));
  ExpectNothingLeft();
}

TEST_F(HvdrunTest, Sigkill9OfHvdrunLeavesNothingBehind) {
  BackgroundCommand c(Hvdrun({"-np", "2", "sh", "-c", "exec sleep 60"}), Env(),
                      tmp_);
  WaitForMarkedProcesses(5);
  kill(c.pid(), SIGKILL);
  c.Wait(absl::Seconds(10));
  ExpectNothingLeft();
}

TEST_F(HvdrunTest, MissingProgramIsReportedPerRank) {
  CommandResult r = Run({"-np", "1", "no-such-program-hvd-test"});
  EXPECT_EQ(r.status.ShellCode(), 127);
  EXPECT_THAT(r.err, HasSubstr("rank 0 (host localhost) could not start: "
                               "'no-such-program-hvd-test': command not found"));
}

// Each bad command line: one line on stderr, exit 2, nothing started.
TEST_F(HvdrunTest, BadCommandLines) {
  std::string marker = tmp_ + "/started";
  std::string hostfile = tmp_ + "/bad_hostfile";
  std::ofstream(hostfile) << "node1 slots=two\n";
  std::vector<std::string> cmd = {"touch", marker};
  struct Case {
    std::vector<std::string> args;
    std::string error;
  };
  std::vector<Case> cases = {
      {{"-np", "0"}, "invalid value '0' for -np"},
      {{"-np", "-1"}, "invalid value '-1' for -np"},
      {{"-np", "5", "-H", "localhost:4"}, "-np 5 is more than the 4 slots"},
      {{"-np", "2", "-H", "a:2:x"}, "bad slot count"},
      {{"-np", "2", "-H", "a:,b"}, "bad slot count in 'a:'"},
      {{"-np", "2", "--hostfile", "/nonexistent/hf"},
       "cannot read hostfile '/nonexistent/hf'"},
      {{"-np", "2", "--hostfile", hostfile}, "bad_hostfile:1: bad slot count"},
      {{"-np", "2", "-H", "a:2", "--hostfile", hostfile},
       "-H/--hosts and --hostfile cannot be used together"},
      {{"--bogus-flag", "-np", "2"}, "unknown flag '--bogus-flag'"},
      {{"--min-np", "3", "-np", "2", "-H", "localhost:4"},
       "--min-np 3 is larger than -np 2"},
      {{"--host-discovery-script", "/nonexistent/d.sh"}, "no such file"},
      {{"--self-test"}, "--self-test runs its own workers: give no command"},
      {{"--self-test-threshold", "2"},
       "invalid value '2' for --self-test-threshold"},
      {{"-np", "1", "--config-file", "/nonexistent/c.yaml"},
       "--config-file /nonexistent/c.yaml: cannot read the file"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = c.args;
    args.insert(args.end(), cmd.begin(), cmd.end());
    CommandResult r = Run(args);
    EXPECT_EQ(r.status.ShellCode(), 2) << c.error;
    EXPECT_THAT(r.err, HasSubstr(c.error));
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(access(marker.c_str(), F_OK), -1) << "started for " << c.error;
  }
  CommandResult none = Run({"-np", "2"});
  EXPECT_EQ(none.status.ShellCode(), 2);
  EXPECT_THAT(none.err, HasSubstr("no command given"));
}

// In a Slurm allocation (its variables faked here): an -np beyond its task
// slots, or a malformed variable, is one line and exit 2 with nothing
// started; with -H the allocation is not read at all.
TEST_F(HvdrunTest, SlurmAllocationUsageErrors) {
  std::string marker = tmp_ + "/slurm_started";
  const std::vector<std::string> alloc = {"SLURM_JOB_ID=7",
                                          "SLURM_JOB_NODELIST=h[1-2]",
                                          "SLURM_TASKS_PER_NODE=2(x2)"};
  struct Case {
    std::vector<std::string> env;
    std::string error;
  };
  std::vector<Case> cases = {
      {alloc, "-np 5 is more than the 4 task slots of Slurm job 7 "
              "(SLURM_JOB_NODELIST=h[1-2], SLURM_TASKS_PER_NODE=2(x2))"},
      {{"SLURM_JOB_ID=7", "SLURM_JOB_NODELIST=h[1",
        "SLURM_TASKS_PER_NODE=2"},
       "SLURM_JOB_NODELIST: bad Slurm host list 'h[1': '[' without ']'"},
      {{"SLURM_JOB_ID=7", "SLURM_JOB_NODELIST=h[1-2]",
        "SLURM_TASKS_PER_NODE=2(x3)"},
       "Slurm's variables disagree: 2 nodes but 3 slot counts"},
  };
  for (const Case& c : cases) {
    CommandResult r = Run({"-np", "5", "touch", marker}, c.env);
    EXPECT_EQ(r.status.ShellCode(), 2) << c.error;
    EXPECT_THAT(r.err, HasSubstr(c.error));
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(access(marker.c_str(), F_OK), -1) << "started for " << c.error;
  }
  CommandResult local = Run({"-H", "localhost:1", "touch", marker},
                            {"SLURM_JOB_ID=7", "SLURM_JOB_NODELIST=h[1"});
  EXPECT_EQ(local.status.ShellCode(), 0) << local.err;
  EXPECT_EQ(access(marker.c_str(), F_OK), 0);
}

// hvd-agent as an orchestrator starts it: each bad command line is one line
// on stderr and exit 2, before any connection is tried.
TEST_F(HvdrunTest, AgentBadCommandLines) {
  std::string marker = tmp_ + "/agent_started";
  struct Case {
    std::vector<std::string> args;
    std::string error;
  };
  const std::vector<Case> cases = {
      {{"--rendezvous", "nohostport", "--slots", "1"},
       "--rendezvous 'nohostport': expected HOST:PORT"},
      {{"--rendezvous", "10.0.0.1:99999", "--slots", "1"},
       "--rendezvous '10.0.0.1:99999': expected HOST:PORT"},
      {{"--rendezvous", "10.0.0.1:5,", "--slots", "1"},
       "--rendezvous '10.0.0.1:5,': expected HOST:PORT"},
      {{"--rendezvous", "10.0.0.1:5", "--slots", "0"},
       "--slots needs a positive integer"},
      {{"--rendezvous", "10.0.0.1:5", "--slots", "1", "--hostname",
        "--verbose"},
       "--hostname needs a value"},
      {{"--rendezvous", "10.0.0.1:5", "--slots", "1", "--connect-timeout",
        "-1"},
       "--connect-timeout needs a positive number of seconds"},
      {{"--rendezvous", "10.0.0.1:5"}, "--rendezvous needs --slots"},
      {{"--slots", "1"}, "give exactly one of --launcher-stdin and"},
      {{"--bogus"}, "unknown flag '--bogus'"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = {Runfile("agent/hvd-agent")};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    argv.insert(argv.end(), {"touch", marker});
    CommandResult r = RunCommand(
        argv, Env({"HVD_JOB_TOKEN=0123456789abcdef0123456789abcdef"}),
        absl::Seconds(10), tmp_);
    EXPECT_EQ(r.status.ShellCode(), 2) << c.error << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.error));
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  EXPECT_NE(access(marker.c_str(), F_OK), 0);
}

TEST_F(HvdrunTest, HelpAndVersion) {
  CommandResult h = Run({"--help"});
  EXPECT_TRUE(h.status.ok());
  EXPECT_THAT(h.out, AllOf(HasSubstr("--network-interfaces"), HasSubstr("SSH_*")));
  CommandResult v = Run({"--version"});
  EXPECT_THAT(v.out, ContainsRegex("^hvdrun [0-9.]+\n$"));
}

// Orchestrator mode on one machine: the rendezvous alone, two agents
// started by hand, the token from a file.
TEST_F(HvdrunTest, OrchestratorModeWithTwoAgentsStartedByHand) {
  std::string file = tmp_ + "/rdv";
  unlink(file.c_str());
  BackgroundCommand server(
      {Runfile("launcher/hvdrun"), "--rendezvous-only", "--np", "3",
       "--rendezvous-file", file},
      Env(), tmp_);
  const auto [addr, token] = WaitForRendezvousFile(file);
  ASSERT_FALSE(token.empty());
  std::string script =
      "echo $HVD_HOSTNAME rank=$HVD_RANK/$HVD_SIZE local=$HVD_LOCAL_RANK/"
      "$HVD_LOCAL_SIZE cross=$HVD_CROSS_RANK/$HVD_CROSS_SIZE";
  BackgroundCommand a({Runfile("agent/hvd-agent"), "--rendezvous", addr,
                       "--slots", "2", "--token-file", file, "--hostname",
                       "nodeA", "sh", "-c", script},
                      Env(), tmp_);
  // Wrong token: refused, and the job is not disturbed.
  CommandResult bad = RunCommand(
      {Runfile("agent/hvd-agent"), "--rendezvous", addr, "--slots", "1", "sh",
       "-c", "true"},
      Env({"HVD_JOB_TOKEN=not-the-token"}), absl::Seconds(20), tmp_);
  EXPECT_EQ(bad.status.ShellCode(), 1);
  EXPECT_THAT(bad.err, HasSubstr("refused the job token"));
  BackgroundCommand b({Runfile("agent/hvd-agent"), "--rendezvous", addr,
                       "--slots", "2", "--hostname", "nodeB", "sh", "-c",
                       script},
                      Env({"HVD_JOB_TOKEN=" + token}), tmp_);
  CommandResult rs = server.Wait(absl::Seconds(30));
  CommandResult ra = a.Wait(absl::Seconds(10));
  CommandResult rb = b.Wait(absl::Seconds(10));
  EXPECT_TRUE(rs.status.ok()) << rs.err;
  EXPECT_TRUE(ra.status.ok()) << ra.err;
  EXPECT_TRUE(rb.status.ok()) << rb.err;
  EXPECT_THAT(rs.out, HasSubstr("[0]<stdout>:nodeA rank=0/3 local=0/2 cross=0/2"));
  EXPECT_THAT(rs.out, HasSubstr("[1]<stdout>:nodeA rank=1/3 local=1/2 cross=0/1"));
  EXPECT_THAT(rs.out, HasSubstr("[2]<stdout>:nodeB rank=2/3 local=0/1 cross=1/2"));
  EXPECT_THAT(rs.out, Not(HasSubstr(token)));
  ExpectNothingLeft();
}

TEST_F(HvdrunTest, OrchestratorModeFailureEndsEveryAgentWithTheCode) {
  std::string file = tmp_ + "/rdv2";
  unlink(file.c_str());
  BackgroundCommand server(
      {Runfile("launcher/hvdrun"), "--rendezvous-only", "-np", "2",
       "--rendezvous-file", file, "--kill-grace-seconds", "1", "sh", "-c",
       "if [ $HVD_RANK = 1 ]; then exit 9; fi; exec sleep 60"},
      Env(), tmp_);
  const std::string addr = WaitForRendezvousFile(file).addr;
  ASSERT_FALSE(addr.empty());
  std::vector<std::string> agent = {Runfile("agent/hvd-agent"), "--rendezvous",
                                    addr, "--slots", "1", "--token-file", file};
  BackgroundCommand a(agent, Env(), tmp_);
  BackgroundCommand b(agent, Env(), tmp_);
  CommandResult rs = server.Wait(absl::Seconds(30));
  EXPECT_EQ(rs.status.ShellCode(), 9);
  EXPECT_THAT(rs.err, ContainsRegex("rank 1 \\(host [^)]*\\) exited with code 9"));
  EXPECT_EQ(a.Wait(absl::Seconds(10)).status.ShellCode(), 9);
  EXPECT_EQ(b.Wait(absl::Seconds(10)).status.ShellCode(), 9);
  ExpectNothingLeft();
}

TEST_F(HvdrunTest, OrchestratorModeRefusesAnAgentAfterTheStart) {
  std::string file = tmp_ + "/rdv3";
  unlink(file.c_str());
  BackgroundCommand server({Runfile("launcher/hvdrun"), "--rendezvous-only",
                            "-np", "1", "--rendezvous-file", file, "sleep",
                            "30"},
                           Env(), tmp_);
  const std::string addr = WaitForRendezvousFile(file).addr;
  ASSERT_FALSE(addr.empty());
  std::vector<std::string> agent = {Runfile("agent/hvd-agent"), "--rendezvous",
                                    addr, "--slots", "1", "--token-file", file};
  BackgroundCommand first(agent, Env(), tmp_);
  // Its worker (sleep) running means the job has started.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline) {
    bool worker = false;
    for (pid_t p : LiveProcessesWithEnv("HVD_RANK=0")) {
      for (pid_t q : LiveProcessesWithEnv(mark_)) worker = worker || p == q;
    }
    if (worker) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  CommandResult late = RunCommand(agent, Env(), absl::Seconds(20), tmp_);
  EXPECT_EQ(late.status.ShellCode(), 1);
  EXPECT_THAT(late.err, HasSubstr("could not join the job"));
  EXPECT_THAT(late.err, HasSubstr("the job has already started with its 1 slots"));
  kill(server.pid(), SIGTERM);
  EXPECT_EQ(server.Wait(absl::Seconds(20)).status.ShellCode(), 143);
  EXPECT_EQ(first.Wait(absl::Seconds(20)).status.ShellCode(), 143);
  ExpectNothingLeft();
}

}  // namespace
}  // namespace launcher
}  // namespace hvd
