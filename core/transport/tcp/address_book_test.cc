#include "core/transport/tcp/address_book.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd::transport::tcp_internal {
namespace {

using ::testing::HasSubstr;

Endpoint Ep(const char* ip, unsigned short port) {
  return Endpoint(boost::asio::ip::make_address_v4(ip), port);
}

std::string Record(const std::string& host, std::vector<Endpoint> endpoints) {
  return EncodePeerRecord(PeerRecord{host, std::move(endpoints)});
}

TEST(AddressBook, EveryRanksRecordComesBackInOrder) {
  const std::vector<std::string> records = {
      Record("a", {Ep("10.0.0.1", 4001), Ep("127.0.0.1", 4001)}),
      Record("a", {Ep("10.0.0.1", 4002), Ep("127.0.0.1", 4002)}),
      Record("b", {Ep("10.0.0.2", 5001)}),
      Record("a", {Ep("10.0.0.1", 4003), Ep("127.0.0.1", 4003)})};
  absl::StatusOr<AddressBook> book =
      AddressBook::Decode(EncodeAddressBook(records), 4);
  ASSERT_TRUE(book.ok()) << book.status();
  ASSERT_EQ(book->size(), 4);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(EncodePeerRecord(book->Record(r)), records[r]) << "rank " << r;
  }
}

TEST(AddressBook, RanksOfOneHostShareTheirAddressesInTheBook) {
  std::vector<std::string> records;
  for (int r = 0; r < 4096; ++r) {
    const std::string host = absl::StrCat("node", r / 8);
    const std::string ip = absl::StrCat("10.1.", r / 8 / 256, ".", r / 8 % 256);
    records.push_back(Record(
        host, {Ep(ip.c_str(), 30000 + r % 8), Ep("127.0.0.1", 30000 + r % 8)}));
  }
  size_t apart = 0;
  for (const std::string& r : records) apart += r.size();
  const std::string book = EncodeAddressBook(records);
  // 512 hosts once each, and an index and a port per rank.
  EXPECT_LT(book.size(), apart / 3);
  absl::StatusOr<AddressBook> decoded = AddressBook::Decode(book, 4096);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  for (int r : {0, 7, 8, 4095}) {
    EXPECT_EQ(EncodePeerRecord(decoded->Record(r)), records[r]) << r;
  }
}

TEST(AddressBook, AnUnusableRecordFailsEveryRankNamingIt) {
  const std::vector<std::string> records = {
      Record("a", {Ep("10.0.0.1", 4001)}), "garbage",
      Record("c", {Ep("10.0.0.3", 4001)})};
  absl::StatusOr<AddressBook> book =
      AddressBook::Decode(EncodeAddressBook(records), 3);
  EXPECT_EQ(book.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(book.status().message(),
              HasSubstr("rank 1's TCP address is unusable: bad TCP peer "
                        "record"));
  const std::vector<std::string> two_ports = {
      Record("a", {Ep("10.0.0.1", 4001), Ep("127.0.0.1", 4002)})};
  EXPECT_THAT(
      AddressBook::Decode(EncodeAddressBook(two_ports), 1).status().message(),
      HasSubstr("rank 0's TCP address is unusable: its endpoints are "
                "on several ports"));
}

TEST(AddressBook, ABookForAnotherSizeOrMangledIsRefused) {
  const std::string book =
      EncodeAddressBook({Record("a", {Ep("10.0.0.1", 4001)}),
                         Record("a", {Ep("10.0.0.1", 4002)})});
  EXPECT_THAT(AddressBook::Decode(book, 3).status().message(),
              HasSubstr("2 ranks for a job of 3"));
  for (const std::string& bad :
       {std::string("hvd-tcp-book-1\n1\na\n10.0.0.1\n1:4001"),
        std::string("hvd-tcp-book-1\n1\na\n10.0.0.300\n0:4001"),
        std::string("hvd-tcp-book-1\n1\na\n10.0.0.1\n0:0"),
        std::string("hvd-tcp-book-2\n0\n"), std::string("")}) {
    EXPECT_EQ(AddressBook::Decode(bad, 1).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

}  // namespace
}  // namespace hvd::transport::tcp_internal
