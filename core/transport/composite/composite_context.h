// A transport::Context made of others, each peer routed to one of them:
// shared memory to the ranks of this host, TCP to the rest.
//
// Every message to or from a peer goes through the same child, so the
// per-peer ordering of the interface holds. Failure is shared: the first
// error a request of any child reports (other than DeadlineExceeded, which
// leaves the context usable), and any Abort, aborts every child with the
// same status, so waiters on the other transports wake too.
#ifndef HVD_CORE_TRANSPORT_COMPOSITE_COMPOSITE_CONTEXT_H_
#define HVD_CORE_TRANSPORT_COMPOSITE_COMPOSITE_CONTEXT_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "core/transport/transport.h"

namespace hvd::transport {

// `children` all have this context's rank and size; `child_of_peer[p]` is the
// index of the child that reaches peer p (ignored for this rank). When
// every peer routes to the same child, that child alone is returned (the
// others are destroyed). InvalidArgument when sizes, ranks or indices
// disagree.
absl::StatusOr<std::unique_ptr<Context>> NewCompositeContext(
    std::vector<std::unique_ptr<Context>> children,
    std::vector<int> child_of_peer);

}  // namespace hvd::transport

#endif  // HVD_CORE_TRANSPORT_COMPOSITE_COMPOSITE_CONTEXT_H_
