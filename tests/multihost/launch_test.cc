// hvdrun across network-namespace hosts over ssh: ranks, output, exit codes,
// and the choice of data-plane interface (each host's first interface,
// dead0, goes nowhere). Run by netns_hosts.sh with 2 hosts.
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/multihost/multihost_test_base.h"

namespace hvd {
namespace multihost {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class LaunchTest : public MultiHostTest {};

TEST_F(LaunchTest, FourRanksOnTwoHostsSeeTheirIdentityAndAllreduce) {
  launcher::CommandResult r =
      Run({"-np", "4", "-H", "h1:2,h2:2", Driver(), "--allreduce"});
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_TRUE(r.status.ok()) << r.status.ToString() << "\n" << r.err;
  for (int rank = 0; rank < 4; ++rank) {
    std::string host = rank < 2 ? "h1" : "h2";
    EXPECT_THAT(r.out,
                HasSubstr(absl::StrCat(
                    "[", rank, "]<stdout>:identity rank=", rank,
                    " size=4 local_rank=", rank % 2,
                    " local_size=2 cross_rank=", rank / 2,
                    " cross_size=2 hostname=", host, " iface=", Addr(host),
                    " rendezvous=", Addr("h0"), ":")));
    EXPECT_THAT(r.out, HasSubstr(absl::StrCat(
                           "[", rank, "]<stdout>:allreduce sum=6 expected=6 ok")));
  }
  EXPECT_TRUE(NothingLeftWithin(absl::Seconds(10)));
}

TEST_F(LaunchTest, ExitCodeAndStderrOfTheFailingRank) {
  launcher::CommandResult r = Run({"-np", "4", "-H", "h1:2,h2:2",
                                   "--kill-grace-seconds", "2", IdentityDriver(),
                                   "--exit", "3:7", "--sleep", "0.2"});
  EXPECT_EQ(r.status.ShellCode(), 7) << r.err;
  EXPECT_THAT(r.err, HasSubstr("[3]<stderr>:driver: rank 3 exits with code 7 "
                               "as asked\n"));
  EXPECT_THAT(r.err, HasSubstr("hvdrun: rank 3 (host h2) exited with code 7"));
  EXPECT_TRUE(NothingLeftWithin(absl::Seconds(10)));
}

TEST_F(LaunchTest, UnevenHostsFillInOrder) {
  launcher::CommandResult r = Run({"-np", "3", "-H", "h2:1,h1:4", IdentityDriver()});
  ASSERT_TRUE(r.status.ok()) << r.err;
  EXPECT_THAT(r.out, HasSubstr("[0]<stdout>:identity rank=0 size=3 local_rank=0 "
                               "local_size=1 cross_rank=0 cross_size=2 "
                               "hostname=h2"));
  EXPECT_THAT(r.out, HasSubstr("[2]<stdout>:identity rank=2 size=3 local_rank=1 "
                               "local_size=2 cross_rank=0 cross_size=1 "
                               "hostname=h1"));
}

// hvdrun on h1 itself: h1 is local (fork/exec, rendezvous over loopback),
// h2 remote. No address preference is known for the local host, so its
// dead0 is probed, found unreachable from h2, and skipped.
TEST_F(LaunchTest, DataPlaneAvoidsAnInterfaceThatGoesNowhere) {
  launcher::CommandResult r =
      Run({"--verbose", "-np", "4", "-H", Addr("h1") + ":2,h2:2", Driver(),
           "--allreduce"},
          "h1");
  ASSERT_TRUE(r.status.ok()) << r.err;
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat("host h2 cannot reach ", Addr("h1"),
                                            " at ", Var("DEAD", "h1"))));
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("hostname=", Addr("h1"),
                                            " iface=", Addr("h1"), " ")));
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("hostname=h2 iface=", Addr("h2"),
                                            " ")));
  EXPECT_THAT(r.out, Not(HasSubstr("iface=" + Var("DEAD", "h1"))));
  EXPECT_THAT(r.out, HasSubstr("[0]<stdout>:allreduce sum=6 expected=6 ok"));
  EXPECT_THAT(r.out, HasSubstr("[3]<stdout>:allreduce sum=6 expected=6 ok"));
  EXPECT_TRUE(NothingLeftWithin(absl::Seconds(10)));
}

TEST_F(LaunchTest, NetworkInterfacesFlagNamesTheDataPlane) {
  launcher::CommandResult r = Run({"--network-interfaces", "eth0", "-np", "2",
                                   "-H", "h1:1,h2:1", IdentityDriver()});
  ASSERT_TRUE(r.status.ok()) << r.err;
  EXPECT_THAT(r.out, HasSubstr("hostname=h1 iface=" + Addr("h1") + " "));
  EXPECT_THAT(r.out, HasSubstr("hostname=h2 iface=" + Addr("h2") + " "));
  launcher::CommandResult bad = Run({"--network-interfaces", "ib7", "-np", "2",
                                     "-H", "h1:1,h2:1", IdentityDriver()});
  EXPECT_EQ(bad.status.ShellCode(), 1);
  EXPECT_THAT(bad.err, HasSubstr("has none of the interfaces ib7 (it has: "));
  EXPECT_TRUE(NothingLeftWithin(absl::Seconds(10)));
}

// --transport rdma between the hosts (libfabric's tcp provider over the
// hosts' links), shared memory within each: a loop of 4 MiB allreduces, so
// that ring chunks of 1 MiB cross between hosts as one-sided writes.
TEST_F(LaunchTest, RdmaTransportCarriesTheJobBetweenHosts) {
  launcher::CommandResult r =
      Run({"--transport", "rdma", "-x", "HVD_RDMA_PROVIDER=tcp", "-x",
           "HVD_LOG_LEVEL=info", "-np", "4", "-H", "h1:2,h2:2", Driver(),
           "--allreduce", "--loop", "20", "--bytes", "4194304"});
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_TRUE(r.status.ok()) << r.status.ToString() << "\n" << r.err;
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_THAT(r.err, HasSubstr(absl::StrCat(
                           "rank ", rank, ": ranks on other hosts over rdma")));
    EXPECT_THAT(r.out, HasSubstr(absl::StrCat("[", rank,
                                              "]<stdout>:loop done")));
  }
  EXPECT_TRUE(NothingLeftWithin(absl::Seconds(10)));
}

// Over ssh the rendezvous speaks TLS with the job's own CA, which the
// workers get (the job running at all shows the handshakes succeed: the
// server speaks nothing else); --no-tls is plaintext, with a warning.
TEST_F(LaunchTest, RemoteJobsUseTlsUnlessNoTlsIsAskedFor) {
  const std::string show =
      "echo tls ca=${HVD_RENDEZVOUS_CA:+set} name=$HVD_RENDEZVOUS_TLS_NAME";
  launcher::CommandResult tls =
      Run({"-np", "2", "-H", "h1:1,h2:1", Driver(), "--allreduce"});
  ASSERT_TRUE(tls.status.ok()) << tls.err;
  EXPECT_THAT(tls.out, HasSubstr("[1]<stdout>:allreduce sum=1 expected=1 ok"));
  EXPECT_THAT(tls.err, Not(HasSubstr("warning")));
  launcher::CommandResult env =
      Run({"-np", "2", "-H", "h1:1,h2:1", "sh", "-c", show});
  ASSERT_TRUE(env.status.ok()) << env.err;
  EXPECT_THAT(env.out, HasSubstr("[1]<stdout>:tls ca=set name=hvd-rendezvous"));
  launcher::CommandResult plain =
      Run({"--no-tls", "-np", "2", "-H", "h1:1,h2:1", "sh", "-c", show});
  ASSERT_TRUE(plain.status.ok()) << plain.err;
  EXPECT_THAT(plain.out, HasSubstr("[1]<stdout>:tls ca= name=\n"));
  EXPECT_THAT(plain.err, HasSubstr("hvdrun: warning: --no-tls: the job token "
                                   "crosses the network in clear"));
  EXPECT_TRUE(NothingLeftWithin(absl::Seconds(10)));
}

}  // namespace
}  // namespace multihost
}  // namespace hvd
