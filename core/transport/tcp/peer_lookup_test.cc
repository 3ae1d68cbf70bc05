#include "core/transport/tcp/peer_lookup.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd::transport::tcp_internal {
namespace {

using ::testing::HasSubstr;

Endpoint Ep(const char* ip, unsigned short port) {
  return Endpoint(boost::asio::ip::make_address_v4(ip), port);
}

TEST(StoreLookup, FindsAPublishedRecordOrderedForTheDialersHost) {
  std::shared_ptr<Store> store = NewInMemoryStore();
  ASSERT_TRUE(store
                  ->Set("tcp/3", EncodePeerRecord(PeerRecord{
                                     "a", {Ep("10.0.0.1", 4001),
                                           Ep("127.0.0.1", 4001)}}))
                  .ok());
  ASSERT_TRUE(
      store->Set("tcp/1", EncodePeerRecord(PeerRecord{"c", {Ep("10.0.0.3", 7)}}))
          .ok());
  auto same_host = StoreLookup(store, "a")({3, 1}, absl::Seconds(1));
  ASSERT_TRUE(same_host.ok()) << same_host.status();
  ASSERT_EQ(same_host->size(), 2u);
  EXPECT_EQ((*same_host)[0],
            (std::vector<Endpoint>{Ep("127.0.0.1", 4001), Ep("10.0.0.1", 4001)}));
  EXPECT_EQ((*same_host)[1], std::vector<Endpoint>{Ep("10.0.0.3", 7)});
  auto other_host = StoreLookup(store, "b")({3}, absl::Seconds(1));
  ASSERT_TRUE(other_host.ok()) << other_host.status();
  EXPECT_EQ(other_host->front(), std::vector<Endpoint>{Ep("10.0.0.1", 4001)});
}

TEST(StoreLookup, APeerThatPublishedNothingIsDeadlineExceeded) {
  std::shared_ptr<Store> store = NewInMemoryStore();
  EXPECT_EQ(
      StoreLookup(store, "a")({5}, absl::Milliseconds(20)).status().code(),
      absl::StatusCode::kDeadlineExceeded);
}

TEST(StoreLookup, AnUnreadableRecordIsInvalidArgumentNamingTheRank) {
  std::shared_ptr<Store> store = NewInMemoryStore();
  ASSERT_TRUE(store->Set("tcp/2", "garbage").ok());
  absl::Status status =
      StoreLookup(store, "a")({2}, absl::Seconds(1)).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("rank 2's published TCP address is unusable"));
}

TEST(StoreLookup, TheLookupKeepsItsStore) {
  PeerConnector::Lookup lookup;
  {
    std::shared_ptr<Store> store = NewInMemoryStore();
    ASSERT_TRUE(
        store->Set("tcp/1", EncodePeerRecord(PeerRecord{"a", {Ep("10.0.0.1", 1)}}))
            .ok());
    lookup = StoreLookup(store, "b");
  }
  EXPECT_TRUE(lookup({1}, absl::Seconds(1)).ok());
}

}  // namespace
}  // namespace hvd::transport::tcp_internal
