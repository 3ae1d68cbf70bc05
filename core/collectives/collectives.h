// CPU collective algorithms over a transport::Context. Written against the
// transport interface only. All functions block the calling thread; every
// wait is bounded by CollectiveOptions::timeout.
//
// A Group is the subset of the context's ranks taking part (a process set);
// only its members call the function, all with equal arguments (options
// included: chunk_bytes fixes the message sizes) except where noted. Buffers
// are raw bytes; counts are elements of `dtype`. Calls on one context must be
// issued in the same order by every member; groups with no member in common
// may run concurrently.
//
// Errors: InvalidArgument for bad arguments (nothing sent). Otherwise the
// transport's error, code kept, message prefixed with the collective, its
// algorithm and who failed: "Allreduce (ring) on rank 3 (member 1 of 4): ...".
// Requests may then still be posted: the caller must Abort the context (these
// functions never do) before reusing or freeing the buffers.
#ifndef HVD_CORE_COLLECTIVES_COLLECTIVES_H_
#define HVD_CORE_COLLECTIVES_COLLECTIVES_H_

#include <cstddef>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/common/types.h"
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
            // cross_host_small_message_bytes); above, kHierarchical when
            // `hosts` shows the group on several hosts with several members
            // on one and as many on each, else kRing.
  kRing,    // Reduce-scatter + allgather, 2(N-1)/N * S bytes sent per rank;
            // chunked by chunk_bytes and pipelined. Broadcast: a chain.
  kDirect,  // Each rank sends all to all and reduces locally: one round.
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
  size_t chunk_bytes = size_t{1} << 20;        // Pipelining granularity.
  // kAuto's switch from kDirect to the ring: within a host, and for groups
  // that span hosts (per options.hosts), where a direct round's (N-1)-fold
  // traffic meets link bandwidth sooner: on 1 Gbit/s links between 4 hosts
  // the ring is faster from ~32 KiB (docs/performance.md).
  size_t small_message_bytes = size_t{64} << 10;
  size_t cross_host_small_message_bytes = size_t{32} << 10;
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::kAuto;
  // Host of every context rank (equal ids: same host), for kHierarchical;
  // empty when unknown (kHierarchical is then kRing).
  std::vector<int> hosts;
  // Allreduce: the result is multiplied by this (Scale, reduce.h), which is
  // how Average is done (Sum, then 1/N). Each element is scaled once, by the
  // member that completes its reduction, before it is passed on, instead of
  // in a pass of its own over the whole buffer on every member afterwards.
  double postscale = 1.0;
};

// In place. `op` is Sum, Min, Max or Product (Average is Sum followed by a
// scale, done by the caller). Every rank ends with bit-identical results.
absl::Status Allreduce(transport::Context& context, const Group& group,
                       void* data, size_t count, DataType dtype, ReduceOp op,
                       const CollectiveOptions& options);

// Allreduce of several buffers as if they were one laid end to end, each
// reduced where it is (the tensors of a fused response, without copying
// them together): pieces[i] = (pointer, element count). Every member passes
// the same counts, in the same order (messages never straddle pieces, so
// their sizes follow the split). Otherwise as Allreduce.
absl::Status AllreduceMany(transport::Context& context, const Group& group,
                           const std::vector<std::pair<void*, size_t>>& pieces,
                           DataType dtype, ReduceOp op,
                           const CollectiveOptions& options);

// Member i contributes `bytes_per_member[i]` bytes (`input`); every member
// receives the concatenation in group order into `output`. `input` may be
// `output` plus this member's offset (in place); sizes may be 0.
absl::Status Allgather(transport::Context& context, const Group& group,
                       const void* input, void* output,
                       const std::vector<size_t>& bytes_per_member,
                       const CollectiveOptions& options);

// In place: member `root` sends `bytes` bytes of `data` to all.
absl::Status Broadcast(transport::Context& context, const Group& group,
                       void* data, size_t bytes, int root,
                       const CollectiveOptions& options);

// `send_bytes[j]`: bytes this member sends to member j, taken from `input` in
// order; `recv_bytes[j]`: bytes it receives from member j, written to
// `output` in order. Differs per member.
absl::Status Alltoall(transport::Context& context, const Group& group,
                      const void* input, const std::vector<size_t>& send_bytes,
                      void* output, const std::vector<size_t>& recv_bytes,
                      const CollectiveOptions& options);

// `input` holds sum(counts) elements on every member; member i receives the
// reduction of block i (counts[i] elements, may be 0) into `output`, which
// must not overlap `input`. `op` as for Allreduce.
absl::Status ReduceScatter(transport::Context& context, const Group& group,
                           const void* input, void* output,
                           const std::vector<size_t>& counts, DataType dtype,
                           ReduceOp op, const CollectiveOptions& options);

}  // namespace hvd::collectives

#endif  // HVD_CORE_COLLECTIVES_COLLECTIVES_H_
