// hvdrun --self-test on 3 hosts whose links are shaped to 1 Gbit/s: with
// every link equal it passes; with h3's link cut to 200 Mbit/s it names the
// two pairs through h3, and h3 itself, and exits 1. Run by netns_hosts.sh
// with 3 hosts and --rate 1gbit.
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/multihost/multihost_test_base.h"

namespace hvd {
namespace multihost {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

class SelfTestTest : public MultiHostTest {
 protected:
  // h3's egress at `rate` (the harness made every link's tbf qdisc).
  void ShapeH3(const std::string& rate) {
    launcher::CommandResult r = launcher::RunCommand(
        {"/usr/sbin/ip", "netns", "exec", Var("NETNS", "h3"), "/usr/sbin/tc",
         "qdisc", "change", "dev", "eth0", "root", "tbf", "rate", rate,
         "burst", "512kb", "latency", "50ms"},
        Env(), absl::Seconds(10));
    ASSERT_TRUE(r.status.ok()) << r.err;
  }

  launcher::CommandResult SelfTest() {
    return Run({"--self-test", "--self-test-mb", "4", "-H", "h1,h2,h3"});
  }
};

TEST_F(SelfTestTest, EqualLinksPass) {
  launcher::CommandResult r = SelfTest();
  EXPECT_EQ(r.status.ShellCode(), 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("hvd self-test: 3 hosts, 4.0 MiB per"));
  for (const char* pair : {"h1 <-> h2", "h1 <-> h3", "h2 <-> h3"}) {
    EXPECT_THAT(r.out, ContainsRegex(absl::StrCat(pair, " +0\\.1[0-9]{2} ")))
        << "a pair at 1 Gbit/s moves about 0.12 GB/s";
  }
  EXPECT_THAT(r.out, HasSubstr("every pair within 70% of the best"));
  EXPECT_TRUE(NothingLeftWithin(absl::Seconds(10)));
}

TEST_F(SelfTestTest, ASlowLinkIsNamedWithItsHost) {
  ShapeH3("200mbit");
  launcher::CommandResult r = SelfTest();
  ShapeH3("1gbit");
  EXPECT_EQ(r.status.ShellCode(), 1) << r.out << r.err;
  EXPECT_THAT(r.out, ContainsRegex("h1 <-> h3 +0\\.0[0-9]+ +[0-9]+%  SLOW"));
  EXPECT_THAT(r.out, ContainsRegex("h2 <-> h3 +0\\.0[0-9]+ +[0-9]+%  SLOW"));
  EXPECT_THAT(r.out, ContainsRegex("below 70% of the best pair \\(h1 <-> h2"));
  EXPECT_THAT(r.out, HasSubstr("host h3: every pair through it is slow"));
  EXPECT_THAT(r.out, Not(HasSubstr("host h1:")));
  EXPECT_THAT(r.out, Not(HasSubstr("host h2:")));
  EXPECT_TRUE(NothingLeftWithin(absl::Seconds(10)));
}

}  // namespace
}  // namespace multihost
}  // namespace hvd
