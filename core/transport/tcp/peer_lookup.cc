#include "core/transport/tcp/peer_lookup.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace hvd::transport::tcp_internal {

PeerConnector::Lookup StoreLookup(std::shared_ptr<Store> store,
                                  std::string hostname) {
  return [store = std::move(store), hostname = std::move(hostname)](
             const std::vector<int>& peers, absl::Duration timeout)
             -> absl::StatusOr<std::vector<std::vector<Endpoint>>> {
    absl::StatusOr<std::vector<std::string>> texts =
        GetOfRanks(*store, kRecordKey, peers, timeout);
    if (!texts.ok()) return texts.status();
    std::vector<std::vector<Endpoint>> candidates;
    candidates.reserve(peers.size());
    for (size_t i = 0; i < peers.size(); ++i) {
      absl::StatusOr<PeerRecord> record = DecodePeerRecord((*texts)[i]);
      if (!record.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "rank ", peers[i], "'s published TCP address is unusable: ",
            record.status().message()));
      }
      candidates.push_back(DialCandidates(*record, hostname));
    }
    return candidates;
  };
}

}  // namespace hvd::transport::tcp_internal
