// The parameters of the CPU collectives (collectives.h): who takes part
// (Group) and how (CollectiveOptions). Plain data, so that configuration can
// carry it without the algorithms.
#ifndef HVD_CORE_COLLECTIVES_OPTIONS_H_
#define HVD_CORE_COLLECTIVES_OPTIONS_H_

#include <cstddef>
#include <vector>

#include "absl/time/time.h"
#include "core/transport/transport.h"

namespace hvd::collectives {

struct Group {
  std::vector<int> ranks;  // Context ranks of the members, in group order.
  int index = 0;           // This process's position in `ranks`.

  int size() const { return static_cast<int>(ranks.size()); }
  static Group All(const transport::Context& context);
};

// Also chooses the algorithm of Allgather, Broadcast and ReduceScatter (by
// their total bytes); Alltoall has one algorithm.
enum class AllreduceAlgorithm {
  kAuto,    // kDirect up to small_message_bytes (or, across hosts,
            // cross_host_small_message_bytes), kRecursiveDoubling there in
            // groups of more than 64 members; above, kHierarchical when
            // `hosts` shows the group on several hosts with several members
            // on one and as many on each, else kRing.
  kRing,    // Reduce-scatter + allgather, 2(N-1)/N * S bytes sent per rank;
            // chunked by chunk_bytes and pipelined. Broadcast: a chain.
  kDirect,  // Each rank sends all to all and reduces locally: one round.
  // The small-message algorithms whose peers and rounds grow as log2 N:
  // Allreduce and Allgather swap everything they hold with one partner a
  // round (recursive doubling), ReduceScatter is such an Allreduce then
  // keeps its block, Broadcast goes down a binomial tree.
  kRecursiveDoubling,
  kHierarchical,  // Allreduce only (the others take kAuto's choice): with L
                  // members on each host, a ring reduce-scatter among them
                  // (member i of a host then holds the host's sum of block
                  // i of L), an allreduce of block i among the members i of
                  // all hosts (ring or direct by its size), and a ring
                  // allgather within each host. Across hosts each host sends
                  // 2(H-1)/H * S in all instead of the flat ring's
                  // 2(N-1)/N * S per link. Uneven hosts fall back to kRing.
};

struct CollectiveOptions {
  absl::Duration timeout = absl::Seconds(60);  // Per wait on one transfer.
  // A wait on one transfer longer than this logs a warning naming the peer
  // and what is missing, once, and goes on waiting until `timeout`; zero:
  // no warning. (A stopped or stuck peer, named long before the timeout.)
  absl::Duration stall_warning = absl::ZeroDuration();
  size_t chunk_bytes = size_t{1} << 20;        // Pipelining granularity.
  // A ring allreduce of more bytes than this runs as one ring per
  // consecutive segment of this many bytes (at least one chunk per member),
  // so that each segment's reduced blocks are passed on while they are
  // still in the caches; one ring over a 64 MiB buffer reads them back from
  // memory (25-30% slower on the development machine). 0: one ring.
  size_t ring_segment_bytes = size_t{2} << 20;
  // An out-of-place ring allreduce of at least this many bytes receives its
  // last step (the other members' reduced blocks, read by no later step)
  // past the caches (RingStep::stream): those output lines were never
  // touched, and streaming stores save reading each from memory before it
  // is overwritten (64 MiB at 2 ranks: 1.22-1.29x the busbw,
  // tools/bench:ring_receive_bench). In place they were just read by the
  // first sends and are still cached: streaming gained nothing there
  // (0.86-1.02x), so in place never streams. 0: never.
  size_t streaming_store_bytes = size_t{16} << 20;
  // kAuto's switch from kDirect to the ring: within a host, and for groups
  // that span hosts (per options.hosts), where a direct round's (N-1)-fold
  // traffic meets link bandwidth sooner: on 1 Gbit/s links between 4 hosts
  // the ring is faster from ~32 KiB (docs/performance.md).
  size_t small_message_bytes = size_t{64} << 10;
  size_t cross_host_small_message_bytes = size_t{32} << 10;
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::kAuto;
  // Host of every context rank (equal ids: same host), for kHierarchical
  // and hierarchical_allgather; empty when unknown (both are then the ring).
  std::vector<int> hosts;
  // Allgather above the direct threshold, for a group with L members on each
  // of H > 1 hosts (L > 1): a ring among the members at the same position of
  // every host (member i of each host then holds the blocks of all members
  // i), then one ring within each host per host. Each host receives
  // (H-1)/H of the output over its links, where the flat ring brings
  // (N-1)/N of it over the one link into each host (1.5x less at 2 hosts of
  // 2), in H-1 steps across hosts instead of N-1. Otherwise, or when false
  // (HVD_HIERARCHICAL_ALLGATHER=0), the flat ring.
  bool hierarchical_allgather = true;
  // Whether kAuto takes kHierarchical where it is worth it (several hosts,
  // several members on each); false: the flat ring there. The autotuner
  // switches it.
  bool hierarchical_allreduce = true;
  // Allreduce: the result is multiplied by `postscale` and then divided by
  // `divisor` (Postscale, reduce.h). An Average is Sum with divisor N, so
  // that it equals the framework's own sum / N bit for bit; with a factor
  // of its own it is Sum with postscale factor/N, as Horovod does it. Each
  // element is scaled once, by the member that completes its reduction,
  // before it is passed on, instead of in a pass of its own over the whole
  // buffer on every member afterwards.
  double postscale = 1.0;
  int divisor = 1;

  // Whether an allreduce's result is scaled at all.
  bool scales() const { return postscale != 1.0 || divisor != 1; }
};

}  // namespace hvd::collectives

#endif  // HVD_CORE_COLLECTIVES_OPTIONS_H_
