#include "host/netif.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd {
namespace host {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ListInterfaces, HasLoopback) {
  bool found = false;
  for (const InterfaceAddress& a : ListInterfaces()) {
    if (a.loopback && a.address == "127.0.0.1") found = true;
  }
  EXPECT_TRUE(found);
}

TEST(IsLocalHost, LoopbackNamesAndOwnAddresses) {
  EXPECT_TRUE(IsLocalHost("localhost"));
  EXPECT_TRUE(IsLocalHost("127.0.0.1"));
  EXPECT_TRUE(IsLocalHost("127.1.2.3"));
  char name[256] = {0};
  gethostname(name, sizeof(name) - 1);
  EXPECT_TRUE(IsLocalHost(name));
  for (const InterfaceAddress& a : ListInterfaces()) {
    EXPECT_TRUE(IsLocalHost(a.address)) << a.address;
  }
  EXPECT_FALSE(IsLocalHost("192.0.2.77"));  // TEST-NET-1
  EXPECT_FALSE(IsLocalHost("some-other-node"));
}

TEST(SplitHostPort, ParsesAndRejects) {
  std::string host;
  int port;
  ASSERT_TRUE(SplitHostPort("10.0.0.1:4000", &host, &port));
  EXPECT_EQ(host, "10.0.0.1");
  EXPECT_EQ(port, 4000);
  EXPECT_FALSE(SplitHostPort("10.0.0.1", &host, &port));
  EXPECT_FALSE(SplitHostPort("10.0.0.1:0", &host, &port));
  EXPECT_FALSE(SplitHostPort(":80", &host, &port));
}

TEST(ProbeListener, AnswersWithItsNonce) {
  auto l = ProbeListener::Start("abc123");
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_TRUE(ProbeAddress("127.0.0.1", (*l)->port(), "abc123",
                           absl::Seconds(5)).ok());
  absl::Status other =
      ProbeAddress("127.0.0.1", (*l)->port(), "zzz", absl::Seconds(5));
  EXPECT_EQ(other.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(other.message(), HasSubstr("answered as another host"));
}

TEST(ProbeAddress, RefusedPortSaysSo) {
  int port;
  {
    auto l = ProbeListener::Start("x");
    ASSERT_TRUE(l.ok());
    port = (*l)->port();
  }  // closed: nothing listens there now
  absl::Status s = ProbeAddress("127.0.0.1", port, "", absl::Seconds(5));
  EXPECT_THAT(s.message(), HasSubstr("Connection refused"));
  EXPECT_THAT(s.message(), HasSubstr("127.0.0.1:"));
}

TEST(FirstReachable, PrefersEarlierCandidateThatAnswers) {
  auto a = ProbeListener::Start("a");
  auto b = ProbeListener::Start("b");
  ASSERT_TRUE(a.ok() && b.ok());
  std::string dead = "127.0.0.1:1";
  std::string first = "127.0.0.1:" + std::to_string((*a)->port());
  std::string second = "127.0.0.1:" + std::to_string((*b)->port());
  auto r = FirstReachable({dead, first, second}, absl::Seconds(5));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, first);
  auto none = FirstReachable({dead}, absl::Seconds(5));
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(none.status().message(), HasSubstr("127.0.0.1:1"));
}

TEST(FirstReachable, DoesNotWaitForASlowLaterCandidate) {
  auto a = ProbeListener::Start("a");
  ASSERT_TRUE(a.ok());
  // 192.0.2.1 (TEST-NET-1) never answers; the first candidate does.
  absl::Time start = absl::Now();
  auto r = FirstReachable(
      {"127.0.0.1:" + std::to_string((*a)->port()), "192.0.2.1:9"},
      absl::Seconds(20));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

}  // namespace
}  // namespace host
}  // namespace hvd
