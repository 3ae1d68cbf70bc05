#include "core/transport/tcp/address.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd::transport::tcp_internal {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Endpoint Ep(const char* ip, unsigned short port) {
  return Endpoint(boost::asio::ip::make_address_v4(ip), port);
}

TEST(ResolveInterfaceTest, EmptyMeansEveryInterface) {
  auto resolved = ResolveInterface("");
  ASSERT_TRUE(resolved.ok());
  EXPECT_FALSE(resolved->has_value());
}

TEST(ResolveInterfaceTest, LoopbackByNameAndByAddress) {
  auto by_name = ResolveInterface("lo");
  ASSERT_TRUE(by_name.ok()) << by_name.status();
  EXPECT_EQ(by_name->value().to_string(), "127.0.0.1");
  auto by_address = ResolveInterface("10.1.2.3");
  ASSERT_TRUE(by_address.ok());
  EXPECT_EQ(by_address->value().to_string(), "10.1.2.3");
}

TEST(ResolveInterfaceTest, UnknownNameListsTheAvailableOnes) {
  auto resolved = ResolveInterface("eth99");
  EXPECT_EQ(resolved.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(resolved.status().message()),
              HasSubstr("lo=127.0.0.1"));
}

TEST(UpInterfaceAddressesTest, LoopbackComesLast) {
  const std::vector<Ipv4> addresses = UpInterfaceAddresses();
  ASSERT_FALSE(addresses.empty());
  EXPECT_TRUE(addresses.back().is_loopback());
  bool seen_loopback = false;
  for (const Ipv4& a : addresses) {
    if (seen_loopback) {
      EXPECT_TRUE(a.is_loopback()) << a.to_string();
    }
    seen_loopback |= a.is_loopback();
  }
}

TEST(PeerRecordTest, RoundTrips) {
  PeerRecord record{"host-a", {Ep("10.0.0.1", 1234), Ep("127.0.0.1", 1234)}};
  auto decoded = DecodePeerRecord(EncodePeerRecord(record));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->hostname, "host-a");
  EXPECT_EQ(decoded->endpoints, record.endpoints);
}

TEST(PeerRecordTest, RejectsGarbageQuotingIt) {
  auto decoded = DecodePeerRecord("hvd-tcp-1\nhost\n10.0.0.1:notaport");
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(decoded.status().message()),
              HasSubstr("bad endpoint '10.0.0.1:notaport'"));
  EXPECT_FALSE(DecodePeerRecord("something else").ok());
  EXPECT_FALSE(DecodePeerRecord("hvd-tcp-1\nhost\n").ok());
}

TEST(DialCandidatesTest, SameHostTriesLoopbackFirst) {
  PeerRecord peer{"h",
                  {Ep("10.0.0.1", 1), Ep("10.0.0.2", 1), Ep("127.0.0.1", 1)}};
  EXPECT_THAT(
      DialCandidates(peer, "h"),
      ElementsAre(Ep("127.0.0.1", 1), Ep("10.0.0.1", 1), Ep("10.0.0.2", 1)));
}

TEST(DialCandidatesTest, OtherHostSkipsLoopback) {
  PeerRecord peer{"h", {Ep("10.0.0.1", 1), Ep("127.0.0.1", 1)}};
  EXPECT_THAT(DialCandidates(peer, "other"), ElementsAre(Ep("10.0.0.1", 1)));
  EXPECT_THAT(DialCandidates(peer, ""), ElementsAre(Ep("10.0.0.1", 1)));
}

TEST(DialCandidatesTest, OnlyLoopbackPublishedIsKept) {
  PeerRecord peer{"h", {Ep("127.0.0.1", 7)}};
  EXPECT_THAT(DialCandidates(peer, "other"), ElementsAre(Ep("127.0.0.1", 7)));
}

}  // namespace
}  // namespace hvd::transport::tcp_internal
