// The shared-memory data-plane transport: a transport::Context connecting
// the ranks of one host through POSIX shared memory.
//
// Design
// - Segments (layout.h): each rank creates one segment ("/hvd-<pid>-...",
//   mode 0600, unlinked again as soon as every local peer has mapped it, so
//   nothing outlives the job in /dev/shm) holding a doorbell, its failure
//   state, and one inbound byte ring per local peer. A rank writes into the
//   rings it owns in its peers' segments and reads the rings in its own.
// - Memory: a segment's headers are reserved in /dev/shm when it is
//   created; a ring's pages are reserved (posix_fallocate) by the rank that
//   writes it, as its sends first reach them (in doubling steps), since a
//   rank sends bulk data to few of its local peers: a ring that carries
//   only small messages holds a page or a few. A /dev/shm too full for the
//   next step fails that send, and the context, with ResourceExhausted
//   naming both ranks and what to change, where writing unreserved pages
//   would have raised SIGBUS.
// - Messages (channel.h): a 64-byte header and the payload, copied into the
//   ring by the sender and out of it by the receiver in pieces of
//   ShmTuning::piece_bytes, each published at once, so a large message
//   streams through a ring of ShmTuning::ring_bytes (small enough to stay in
//   cache) with both sides copying at the same time. A send completes
//   once its bytes are in the ring.
// - Progress: any thread that posts, polls or waits moves the bytes of every
//   pending op of the context (an MPI-style progress rule), so two ranks
//   each waiting on their own receive still drain each other's sends. When
//   no thread of the context polls (its owner waits on another transport,
//   or computes) and a peer waits on it, the peer wakes the context's helper
//   thread ("hvd-shm-helper"), which moves the bytes instead. The helper
//   stands by under SCHED_BATCH: in a large collective most nudges come
//   between two waits of the owner's thread, and a helper that preempted
//   that thread would only find it polling again.
// - Waiting: poll for ShmTuning::spin after the last byte moved,
//   then sleep on the process's futex doorbell, which every peer rings (only
//   when somebody sleeps) after it moves bytes this process may wait for.
// - Failure: the first error (Abort, a length mismatch, a local peer that
//   aborted, closed with requests pending, or whose process is gone) is
//   recorded once, fails every pending and future request, and is published
//   in this rank's segment with its reason, so every local peer fails with
//   it at once ("rank 2: rank 1 on this host failed: <reason>"). A sleeping
//   waiter checks that its peers' processes still exist every 100 ms.
// - Lifetime: destroying the context fails pending requests with Cancelled
//   and shows the rank as closed; requests keep the mappings alive, so a late
//   Wait() is safe.
#ifndef HVD_CORE_TRANSPORT_SHM_SHM_CONTEXT_H_
#define HVD_CORE_TRANSPORT_SHM_SHM_CONTEXT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/rendezvous/store.h"
#include "core/transport/shm/shm_options.h"
#include "core/transport/transport.h"

namespace hvd::transport {

struct ShmMesh {
  // A context of the whole job's size in which only `peers` can be reached;
  // a request to any other rank fails with InvalidArgument. Null when this
  // rank could not create its segment (logged; `peers` is then empty).
  std::unique_ptr<Context> context;
  // The local ranks both this rank and they could map each other's segments
  // (ascending). A pair that could not (another /dev/shm, another PID
  // namespace) is left out on both sides and logged, so the caller can route
  // it elsewhere.
  std::vector<int> peers;
};

// `local_ranks`: the ranks on this host, this one included, the same list
// on each of them. Creates this rank's segment, publishes its name under
// "shm/<rank>" in `store` (callers pass a PrefixStore), maps every local
// peer's, and agrees with each on whether the pair works.
//
// A rank whose own segment cannot be created (/dev/shm full or missing)
// still completes the agreement, with no peers. The rings are reserved
// later, at first use (see Memory above). Errors: InvalidArgument for
// bad arguments; the store's error naming the peer when a peer does not
// publish in time.
absl::StatusOr<ShmMesh> CreateShmContext(int rank, int size,
                                         const std::vector<int>& local_ranks,
                                         Store* store,
                                         const ShmOptions& options);

}  // namespace hvd::transport

#endif  // HVD_CORE_TRANSPORT_SHM_SHM_CONTEXT_H_
