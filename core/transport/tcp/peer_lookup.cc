#include "core/transport/tcp/peer_lookup.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/transport/lookup_thread.h"

namespace hvd::transport::tcp_internal {

PeerConnector::Lookup StoreLookup(std::shared_ptr<Store> store,
                                  std::string hostname) {
  return StoreRecords<std::vector<Endpoint>>(
      std::move(store), kRecordKey,
      [hostname = std::move(hostname)](int peer, const std::string& text)
          -> absl::StatusOr<std::vector<Endpoint>> {
        absl::StatusOr<PeerRecord> record = DecodePeerRecord(text);
        if (!record.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat("rank ", peer,
                           "'s published TCP address is "
                           "unusable: ",
                           record.status().message()));
        }
        return DialCandidates(*record, hostname);
      });
}

}  // namespace hvd::transport::tcp_internal
