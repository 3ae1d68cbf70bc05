// The chunked, pipelined ring engine behind ring allreduce, reduce-scatter,
// allgather and chain broadcast.
//
// A rank receives one stream of chunks from `prev` and sends one stream to
// `next`. A plan lists the chunks it sends first from its own buffer, then
// every chunk it will receive, in order; a received chunk is either reduced
// into the buffer or written in place, and may be forwarded to `next` as
// soon as it is processed. A reduced chunk is combined straight out of the
// transport's own buffers where it can (Context::ReducesOnReceive: shared
// memory), else received into a scratch slot and reduced from there; either
// way its bytes in the buffer may be written from the moment its receive is
// posted, so no pending send may read them then (true of every ring here). Up to kPipelineDepth
// receives are posted ahead, so chunk k is reduced while chunks k+1.. are in
// flight, and its forward is on the wire before chunk k+1 is touched.
#ifndef HVD_CORE_COLLECTIVES_RING_PIPELINE_H_
#define HVD_CORE_COLLECTIVES_RING_PIPELINE_H_

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "core/collectives/options.h"
#include "core/collectives/internal.h"
#include "core/common/types.h"
#include "core/transport/transport.h"

namespace hvd::collectives::internal {

inline constexpr int kPipelineDepth = 4;

// One step of a ring: receive `recv` from prev and reduce it into the buffer
// (`reduce`) or store it there.
struct RingStep {
  Span recv;
  bool reduce = false;
  bool scale = false;  // Apply options.postscale and divisor after reducing.
  // Stored chunks that no later step reads (not forwarded) are received past
  // the caches (transport::Context::RecvStreaming): the last step of a large
  // allreduce, whose bytes the caller reads only later, if at all soon.
  bool stream = false;
};

struct RingRecv {
  Span span;
  bool reduce = false;
  bool scale = false;
  bool forward = false;  // Send the processed chunk on to next.
  bool stream = false;   // Received with RecvStreaming (a stored chunk).
  int slot = -1;         // Scratch slot of a reduced chunk.
  // Index (in send order) of an earlier send from the same bytes that must
  // complete before this receive may overwrite them; -1 if none.
  int wait_send = -1;
};

struct RingPlan {
  std::vector<Span> initial_sends;
  std::vector<RingRecv> recvs;
  size_t slot_bytes = 0;
  int num_slots = 0;
};

// Chunks `first_send` and the receives of `steps` by `chunk_bytes`. Each
// step's chunks are forwarded after processing, except the last step's when
// `forward_last` is false; a forwarded step must be what next receives in
// its following step (true of every ring built here).
// No chunk crosses an offset in `cuts` (DataView::cuts()).
RingPlan BuildRingPlan(Span first_send, const std::vector<RingStep>& steps,
                       bool forward_last, size_t chunk_bytes, size_t elem_size,
                       const std::vector<size_t>& cuts = {});

// Executes `plan` over `data`, receiving from context rank `prev` and
// sending to `next`; receives marked `scale` are multiplied by
// options.postscale once reduced. Returns the transport's error as is. If `data` is
// scratch memory (`data_scratch`), it is abandoned along with the runner's
// own when an error leaves requests pending.
absl::Status RunRingPlan(transport::Context& context, int next, int prev,
                         char* data, const RingPlan& plan, DataType dtype,
                         ReduceOp op, const CollectiveOptions& options,
                         Scratch* data_scratch = nullptr);
// The same over a view whose cuts the plan was built with. With `source`
// (a view of the same sizes, only read), the plan runs out of place: the
// initial sends come from `source`, and a reduced chunk is `source`'s bytes
// reduced with the received ones, written to `data`; `data` is not read
// before a chunk of it is written. So a plan that writes every byte of
// `data` (an allreduce) needs no copy of the input first. `data_scratch`
// as above.
absl::Status RunRingPlan(transport::Context& context, int next, int prev,
                         const DataView& data, const RingPlan& plan,
                         DataType dtype, ReduceOp op,
                         const CollectiveOptions& options,
                         const DataView* source = nullptr,
                         Scratch* data_scratch = nullptr);

// Ring reduce-scatter over `blocks` as member `index`: it first sends block
// index-1, at step s receives block index-s-2 and reduces it, and after the
// last step holds the reduction of block `index`.
Span ReduceScatterFirstSend(const std::vector<Span>& blocks, int index);
std::vector<RingStep> ReduceScatterSteps(const std::vector<Span>& blocks,
                                         int index);

// Ring allgather over `blocks` as member `index`: it first sends block
// `index` and at step s receives block index-s-1. Continues a reduce-scatter
// seamlessly (its first send is the reduce-scatter's last receive).
Span AllgatherFirstSend(const std::vector<Span>& blocks, int index);
std::vector<RingStep> AllgatherSteps(const std::vector<Span>& blocks,
                                     int index);

}  // namespace hvd::collectives::internal

#endif  // HVD_CORE_COLLECTIVES_RING_PIPELINE_H_
