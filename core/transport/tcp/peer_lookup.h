// Where a rank's peers listen: each rank publishes its PeerRecord (address.h)
// under "tcp/<rank>" in the rendezvous store, and a rank looks a peer's up
// as it first dials it (PeerConnector::Lookup), so that a rank reads the
// addresses of the peers it talks to only, and the store answers a few
// reads a rank, not N.
#ifndef HVD_CORE_TRANSPORT_TCP_PEER_LOOKUP_H_
#define HVD_CORE_TRANSPORT_TCP_PEER_LOOKUP_H_

#include <memory>
#include <string>

#include "core/rendezvous/store.h"
#include "core/transport/tcp/peer_connector.h"

namespace hvd::transport::tcp_internal {

// The key a rank's record is published under is this followed by its rank.
inline constexpr char kRecordKey[] = "tcp/";

// Looks a peer's record up in `store` (kept for as long as the lookup is)
// and orders its endpoints for a dialer on host `hostname`
// (DialCandidates). Errors: the store's (DeadlineExceeded while the peer has
// published nothing), InvalidArgument naming the rank when its record is
// unreadable.
PeerConnector::Lookup StoreLookup(std::shared_ptr<Store> store,
                                  std::string hostname);

}  // namespace hvd::transport::tcp_internal

#endif  // HVD_CORE_TRANSPORT_TCP_PEER_LOOKUP_H_
