#include "core/transport/tcp/peer_lookup.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace hvd::transport::tcp_internal {

PeerConnector::Lookup StoreLookup(std::shared_ptr<Store> store,
                                  std::string hostname) {
  return [store = std::move(store), hostname = std::move(hostname)](
             int peer, absl::Duration timeout)
             -> absl::StatusOr<std::vector<Endpoint>> {
    absl::StatusOr<std::string> text =
        store->Get(absl::StrCat(kRecordKey, peer), timeout);
    if (!text.ok()) return text.status();
    absl::StatusOr<PeerRecord> record = DecodePeerRecord(*text);
    if (!record.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", peer, "'s published TCP address is unusable: ",
                       record.status().message()));
    }
    return DialCandidates(*record, hostname);
  };
}

}  // namespace hvd::transport::tcp_internal
