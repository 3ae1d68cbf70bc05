#include "launcher/self_test_report.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd {
namespace launcher {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Three hosts, h3's link a fifth of the others'.
SelfTestReport ThreeHostsOneSlow() {
  SelfTestReport r;
  r.hosts = {"h1", "h2", "h3"};
  r.pairs = {{0, 1, 117e6}, {0, 2, 24e6}, {1, 2, 23e6}};
  r.bytes = 16 << 20;
  r.allgather_bytes = 16 << 20;
  r.allreduce_s = 0.5;
  r.allgather_s = 0.25;
  return r;
}

TEST(SelfTestReport, NamesTheSlowPairsAndTheHostAllOfWhosePairsAreSlow) {
  const SelfTestReport r = ThreeHostsOneSlow();
  EXPECT_TRUE(r.AnyBelow(0.7));
  EXPECT_EQ(r.SlowPairs(0.7).size(), 2u);
  EXPECT_THAT(r.SlowHosts(0.7), ::testing::ElementsAre(2));
  const std::string text = FormatReport(r, 0.7);
  EXPECT_THAT(text, HasSubstr("h1 <-> h2"));
  EXPECT_THAT(text, HasSubstr("below 70% of the best pair (h1 <-> h2, 0.117 "
                              "GB/s):\n  h1 <-> h3: 21%\n  h2 <-> h3: 20%\n"
                              "  host h3: every pair through it is slow"));
}

TEST(SelfTestReport, ALowerThresholdPassesThemAll) {
  const SelfTestReport r = ThreeHostsOneSlow();
  EXPECT_FALSE(r.AnyBelow(0.15));
  EXPECT_THAT(FormatReport(r, 0.15),
              HasSubstr("every pair within 15% of the best (h1 <-> h2"));
}

TEST(SelfTestReport, TwoHostsNameThePairButNoHost) {
  SelfTestReport r = ThreeHostsOneSlow();
  r.hosts = {"a", "b"};
  r.pairs = {{0, 1, 50e6}};
  EXPECT_FALSE(r.AnyBelow(0.7));  // the only pair is the best
  EXPECT_TRUE(r.SlowHosts(0.7).empty());
}

TEST(SelfTestReport, TheWholeJobsBusBandwidthIsNcclTestsOne) {
  // 4 hosts: allreduce busbw = bytes/t * 2(n-1)/n, allgather (n-1)/n.
  SelfTestReport r = ThreeHostsOneSlow();
  r.hosts = {"a", "b", "c", "d"};
  r.pairs = {};
  r.bytes = 1000000000;
  r.allreduce_s = 1;
  r.allgather_bytes = 1000000000;
  r.allgather_s = 1;
  const std::string text = FormatReport(r, 0.7);
  EXPECT_THAT(text, ::testing::ContainsRegex("allreduce +1.500\n"));
  EXPECT_THAT(text, ::testing::ContainsRegex("allgather +0.750\n"));
  EXPECT_THAT(text, HasSubstr("no pair of hosts to compare"));
  EXPECT_THAT(text, Not(HasSubstr("SLOW")));
}

TEST(SelfTestReport, MedianOfTimes) {
  EXPECT_EQ(Median({3, 1, 2}), 2);
  EXPECT_EQ(Median({}), 0);
}

}  // namespace
}  // namespace launcher
}  // namespace hvd
