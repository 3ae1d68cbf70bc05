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
#include "core/collectives/options.h"
#include "core/common/types.h"
#include "core/transport/transport.h"

namespace hvd::collectives {

// In place. `op` is Sum, Min, Max or Product (Average is Sum followed by a
// scale, done by the caller). Every rank ends with bit-identical results.
absl::Status Allreduce(transport::Context& context, const Group& group,
                       void* data, size_t count, DataType dtype, ReduceOp op,
                       const CollectiveOptions& options);

// One buffer of AllreduceMany: `count` elements read from `input`, their
// reduction written to `output`. input == output reduces in place;
// otherwise the two must not overlap, and `input` is only read.
struct AllreducePiece {
  const void* input;
  void* output;
  size_t count;
};

// Allreduce of several buffers as if they were one laid end to end, each
// reduced where it is (the tensors of a fused response, without copying
// them together). Every member passes the same counts, in the same order
// (messages never straddle pieces, so their sizes follow the split); each
// member chooses in place or not for itself. Out of place, the ring reads
// the inputs where they are and writes the outputs, with no copy of the
// whole input first; the other algorithms copy first. Otherwise as
// Allreduce.
absl::Status AllreduceMany(transport::Context& context, const Group& group,
                           const std::vector<AllreducePiece>& pieces,
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
