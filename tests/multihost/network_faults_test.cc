// Network faults during a job of 4 ranks on 2 hosts, each running a loop of
// checked allreduces: a rank that stops reading (SIGSTOP, its socket
// buffers fill) is named and ends the job within the data-plane timeout,
// or, with a stall check and shutdown time, is named by the stall warning
// and ends the job at the shutdown time; a rank whose connections carry
// garbage after the handshake is named by the rank that reads it; and a
// port scanner sending random bytes at every port the job listens on (the
// rendezvous and the agents) does not disturb it. Each case: the exact
// outcome, in time, and nothing left running. Run by netns_hosts.sh with 2
// hosts.
#include <signal.h>
#include <sys/stat.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/common/sanitizers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/multihost/multihost_test_base.h"

namespace hvd {
namespace multihost {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;

class NetworkFaultsTest : public MultiHostTest {
 protected:
  // hvdrun of 4 driver ranks on h1:2,h2:2, each doing `iterations`
  // allreduces of `bytes`; returns once every rank has done one.
  std::unique_ptr<launcher::BackgroundCommand> StartLoop(
      int iterations, size_t bytes, std::vector<std::string> env) {
    const std::string started = absl::StrCat(tmp_, "/started.", mark_.substr(14));
    mkdir(started.c_str(), 0755);
    auto job = std::make_unique<launcher::BackgroundCommand>(
        Hvdrun({"-np", "4", "-H", "h1:2,h2:2", "--kill-grace-seconds", "1",
                Driver(), "--allreduce", "--loop", absl::StrCat(iterations),
                "--bytes", absl::StrCat(bytes), "--started", started}),
        env, tmp_);
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    int ranks = 0;
    while (absl::Now() < deadline && ranks < 4) {
      absl::SleepFor(absl::Milliseconds(20));
      ranks = 0;
      for (int r = 0; r < 4; ++r) {
        ranks += access(absl::StrCat(started, "/rank.", r).c_str(), F_OK) == 0;
      }
    }
    EXPECT_EQ(ranks, 4) << "not every rank started its loop within 30 s";
    return job;
  }

  // SIGSTOPs rank 3 and waits for the job to end; *took: since the stop.
  launcher::CommandResult StopRank3(launcher::BackgroundCommand& job,
                                    absl::Duration* took) {
    std::vector<pid_t> rank3 = Workers("HVD_RANK=3");
    EXPECT_EQ(rank3.size(), 1u);
    const absl::Time stopped = absl::Now();
    if (rank3.size() == 1) kill(rank3[0], SIGSTOP);
    launcher::CommandResult r = job.Wait(absl::Seconds(60));
    *took = absl::Now() - stopped;
    return r;
  }

  // The TCP ports listening in `host`'s namespace as ADDR:PORT, other than
  // sshd's and those on loopback.
  std::vector<std::string> ListeningPorts(const std::string& host) const {
    launcher::CommandResult r = launcher::RunCommand(
        {"/usr/sbin/ip", "netns", "exec", Var("NETNS", host), "/usr/bin/ss",
         "-Hltn"},
        Env(), absl::Seconds(10));
    std::vector<std::string> ports;
    for (absl::string_view line : absl::StrSplit(r.out, '\n')) {
      std::vector<absl::string_view> cols =
          absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (cols.size() < 4) continue;
      const size_t colon = cols[3].rfind(':');
      const absl::string_view addr = cols[3].substr(0, colon);
      const absl::string_view port = cols[3].substr(colon + 1);
      if (port == "22" || addr == "127.0.0.1" || addr == "[::1]") continue;
      const bool any = addr == "0.0.0.0" || addr == "*" || addr == "[::]";
      ports.push_back(absl::StrCat(any ? Addr(host) : std::string(addr), ":",
                                   port));
    }
    return ports;
  }
};

TEST_F(NetworkFaultsTest, ARankThatStopsReadingIsNamedWithinTheTimeout) {
  std::vector<std::string> env = Env();
  env.push_back("HVD_TIMEOUT_SECONDS=3");
  auto job = StartLoop(1000000, 16 << 20, env);
  absl::Duration took;
  launcher::CommandResult r = StopRank3(*job, &took);
  EXPECT_EQ(r.status.ShellCode(), 1);
  EXPECT_THAT(r.err, HasSubstr("hvdrun: rank 3 (host h2) is stopped (SIGSTOP"));
  EXPECT_THAT(r.err, HasSubstr("; rank 3 (host h2) was stopped at the time"));
  // Whether it stopped in negotiation or mid-transfer, whoever waited on it
  // names it, and its address.
  EXPECT_THAT(r.err, ContainsRegex(absl::StrCat(
                         "(from|to) rank 3 \\((", Addr("h2"),
                         ":[0-9]+|shared memory, pid [0-9]+)\\) not complete "
                         "by the deadline")));
  // The 3 s timeout, then 1 s of grace before the stopped rank's SIGKILL.
  EXPECT_LT(took, absl::Seconds(12)) << took;
  EXPECT_TRUE(NothingLeftWithin(absl::Seconds(10)));
}

// Small tensors: the rank stops in negotiation or in a transfer, whichever;
// either way whoever waits on it names it once the stall check time has
// passed, and the stall shutdown time ends the job (not the 120 s timeout).
TEST_F(NetworkFaultsTest, AStoppedRankIsNamedByTheStallCheckAndShutDown) {
  std::vector<std::string> env = Env();
  env.push_back("HVD_STALL_CHECK_TIME_SECONDS=1");
  env.push_back("HVD_STALL_SHUTDOWN_TIME_SECONDS=4");
  auto job = StartLoop(100000000, 4, env);
  absl::Duration took;
  launcher::CommandResult r = StopRank3(*job, &took);
  EXPECT_EQ(r.status.ShellCode(), 1);
  EXPECT_THAT(r.err, ContainsRegex(absl::StrCat(
                         "WARNING\\] Stall detected: (negotiation|a transfer) "
                         "has waited 1s: rank [0-2]: [A-Za-z]+ from rank 3 \\((",
                         Addr("h2"), ":[0-9]+|shared memory, pid [0-9]+)\\) "
                         "not complete by the deadline: .*; it fails after "
                         "4s\n")));
  EXPECT_THAT(r.err, HasSubstr("; rank 3 (host h2) was stopped at the time"));
  EXPECT_LT(took, absl::Seconds(12)) << took;
  EXPECT_TRUE(NothingLeftWithin(absl::Seconds(10)));
}

// Rank 3's own connections to the ranks on h1 get 64 bytes of garbage
// after its hello, between its messages: whichever rank reads them first
// takes them for a message header, names rank 3 and its address, and the
// job ends at once (not at a timeout).
TEST_F(NetworkFaultsTest, GarbageAfterTheHandshakeIsNamedAndEndsTheJob) {
  auto job = StartLoop(100000000, 4, Env());
  std::vector<pid_t> rank3 = Workers("HVD_RANK=3");
  ASSERT_EQ(rank3.size(), 1u);
  // 0x5a repeated: a header claiming about 6.5e18 bytes, without the stop
  // notice's bit.
  std::string garbage;
  for (int i = 0; i < 64; ++i) garbage += "5a";
  const absl::Time injected = absl::Now();
  launcher::CommandResult inject = launcher::RunCommand(
      {"/usr/bin/python3",
       launcher::Runfile("tests/multihost/garbage_injector.py"),
       absl::StrCat(rank3[0]), Addr("h1"), garbage},
      Env(), absl::Seconds(10));
  EXPECT_EQ(inject.status.ShellCode(), 0) << inject.out << inject.err;
  EXPECT_THAT(inject.out, ContainsRegex("injected 64 bytes into [12] "
                                        "connections"));
  launcher::CommandResult r = job->Wait(absl::Seconds(60));
  const absl::Duration took = absl::Now() - injected;
  EXPECT_EQ(r.status.ShellCode(), 1);
  EXPECT_THAT(r.err, ContainsRegex(absl::StrCat(
                         "rank [01]: message header from rank 3 \\(",
                         Addr("h2"), ":[0-9]+\\) claims 6510615555426900570 "
                         "bytes; the stream is corrupt")));
  EXPECT_LT(took, absl::Seconds(10)) << took;
  EXPECT_TRUE(NothingLeftWithin(absl::Seconds(10)));
}

TEST_F(NetworkFaultsTest, APortScannerDuringTheJobDoesNotDisturbIt) {
  if (kSanitizedBuild) {
    // The scanner takes a core of two; with the job slowed several times
    // by a sanitizer, heartbeats and the job's time limit measure that.
    GTEST_SKIP() << "measures the job's speed under load";
  }
  auto job = StartLoop(3000, 256 << 10, Env());
  std::vector<std::string> targets;
  for (const char* host : {"h0", "h1", "h2"}) {
    for (const std::string& t : ListeningPorts(host)) targets.push_back(t);
  }
  // The rendezvous, each host's agent, and each worker's data-plane
  // listener (open for the job: peers connect when they first need to).
  ASSERT_EQ(targets.size(), 7u) << absl::StrJoin(targets, " ");
  const std::string stop = tmp_ + "/stop-scanning";
  std::vector<std::string> scan = {
      "/usr/sbin/ip", "netns", "exec", Var("NETNS", "h0"), "/usr/bin/python3",
      launcher::Runfile("tests/multihost/port_scanner.py"), stop};
  scan.insert(scan.end(), targets.begin(), targets.end());
  launcher::BackgroundCommand scanner(scan, Env(), tmp_);
  launcher::CommandResult r = job->Wait(absl::Seconds(120));
  std::ofstream(stop) << "done\n";
  launcher::CommandResult s = scanner.Wait(absl::Seconds(30));
  EXPECT_EQ(r.status.ShellCode(), 0) << r.err;
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_THAT(r.out, HasSubstr(absl::StrCat(
                           "[", rank, "]<stdout>:loop done iterations=3000 ok")));
  }
  EXPECT_THAT(s.out, ContainsRegex("scanned [0-9]{3,} connections")) << s.err;
  std::printf("port scanner: %s", s.out.c_str());
  // Not a line of warning either, from hvdrun, an agent or a worker.
  EXPECT_EQ(r.err, "");
  EXPECT_TRUE(NothingLeftWithin(absl::Seconds(10)));
}

}  // namespace
}  // namespace multihost
}  // namespace hvd
