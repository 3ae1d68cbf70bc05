// The address book: every rank's PeerRecord (address.h) in one value, as
// rank 0 gathers and publishes it at start-up, so that the store answers
// one read of N records and N - 1 reads of one value instead of each rank
// reading every lower rank's record (N²/2 records, about 400 MB of answers
// at 4096 ranks).
//
// Compact: ranks on one host publish the same host name and addresses and
// differ only in their listener's port, so each distinct (host name,
// addresses) appears once and each rank as its index and port, about 8
// bytes a rank against 48 for a record of its own.
#ifndef HVD_CORE_TRANSPORT_TCP_ADDRESS_BOOK_H_
#define HVD_CORE_TRANSPORT_TCP_ADDRESS_BOOK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/rendezvous/store.h"
#include "core/transport/tcp/address.h"

namespace hvd::transport::tcp_internal {

// The book of `records` (encoded PeerRecords, by rank), or, when one cannot
// be read or its endpoints do not share one port, an error value naming
// the rank, which AddressBook::Decode returns as InvalidArgument: rank 0
// publishes it in place of the book so that every rank fails alike.
std::string EncodeAddressBook(const std::vector<std::string>& records);

// Every rank's PeerRecord, held as the book holds them: each distinct (host
// name, addresses) once, and a shape index and a port per rank, so that
// reading a book of N ranks costs N small entries, not N records.
class AddressBook {
 public:
  // InvalidArgument when `text` is unreadable, holds another number of ranks
  // than `size`, or is the error value above.
  static absl::StatusOr<AddressBook> Decode(absl::string_view text, int size);

  int size() const { return static_cast<int>(ranks_.size()); }
  // Rank `rank`'s record (0 <= rank < size()).
  PeerRecord Record(int rank) const;

 private:
  struct Entry {
    uint32_t shape;
    unsigned short port;
  };
  std::vector<PeerRecord> shapes_;  // with port 0
  std::vector<Entry> ranks_;
};

// Publishes `mine` as rank `rank` of `size` under "tcp/<rank>" and returns
// every rank's record, from the book rank 0 gathers and publishes under
// "tcp/all" (GatherThroughRoot). Errors name `rank`: the store's, or
// InvalidArgument as AddressBook::Decode.
absl::StatusOr<AddressBook> ExchangeAddressBook(int rank, int size,
                                                const PeerRecord& mine,
                                                Store& store,
                                                absl::Duration timeout);

}  // namespace hvd::transport::tcp_internal

#endif  // HVD_CORE_TRANSPORT_TCP_ADDRESS_BOOK_H_
