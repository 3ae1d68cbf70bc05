// The RDMA data-plane transport (libfabric): a transport::Context whose
// ranks are connected pairwise over a fabric's RMA.
//
// Design (docs/rdma.md has the diagram)
// - Provider (fabric.h): FI_EP_RDM endpoints with RMA and remote CQ data:
//   verbs;ofi_rxm on InfiniBand/RoCE, efa on AWS, tcp;ofi_rxm in software.
// - Bootstrap: every rank opens one endpoint and publishes its name under
//   "rdma/<rank>" in the store (callers pass a PrefixStore to scope it). A
//   rank reaches a peer lazily, at its first op with it: it looks the
//   peer's name up, inserts it into its address vector and sends a Hello
//   carrying its rank, the job token (the tcp transport's encoding) and its
//   own name, so the peer need not look it up; each Hello is answered with
//   one byte, and a peer's buffers are advertised only to ranks whose
//   token matched (engine.h). A rank reads the names of the peers it talks
//   to only.
// - Data: the receiver registers its buffer (registration_cache.h) and
//   advertises (address, key, length) in a control message; the sender
//   writes it with fi_write, the last piece with fi_writedata whose remote
//   CQ data (sender rank, sequence) completes the receive. RecvAny of
//   small messages travels inline; larger ones are announced, sized, then
//   advertised. Credits bound each sender's control messages.
// - Progress: one thread per context polls the completion queue
//   (fi_cq_sread); waiters sleep on their request.
// - Failure: the first failure (a peer's abort or goodbye, a failed
//   completion, a length mismatch, Abort) is recorded once, fails every
//   pending and future request naming the peer and its address, and is
//   sent to every peer.
#ifndef HVD_RDMA_RDMA_CONTEXT_H_
#define HVD_RDMA_RDMA_CONTEXT_H_

#include <cstddef>
#include <memory>

#include "absl/status/statusor.h"
#include "core/rendezvous/store.h"
#include "core/transport/transport.h"
#include "rdma/rdma_options.h"
#include "rdma/registration_cache.h"

namespace hvd::rdma {

// Opens the provider and publishes this rank's endpoint under
// "rdma/<rank>" in `store` (callers pass a PrefixStore to scope it); the
// context keeps `store` to look up the peers it talks to (Engine). Errors
// here: NotFound (no provider offers what the transport needs; the message
// names what was looked for), Unavailable. A peer that cannot be reached,
// refuses the token (Unauthenticated) or uses another provider
// (FailedPrecondition) fails the context at the first op with it, naming
// the peer rank and address. `store` may be null when size is 1.
absl::StatusOr<std::unique_ptr<transport::Context>> CreateRdmaContext(
    int rank, int size, std::shared_ptr<Store> store,
    const RdmaOptions& options);

// The registration counters of an RDMA context (zeros for other contexts).
RegistrationStats RdmaRegistrationStats(const transport::Context& context);

// The bytes of control buffers (registered, pre-posted) an RDMA context
// holds: a fixed part for the hellos of peers not known yet, and a part for
// each peer it has reached, so they grow with the peers a rank talks to,
// not with the job (0 for other contexts).
size_t RdmaControlBufferBytes(const transport::Context& context);

}  // namespace hvd::rdma

#endif  // HVD_RDMA_RDMA_CONTEXT_H_
