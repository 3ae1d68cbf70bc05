// Bandwidth-optimal allreduce: a ring reduce-scatter (member i ends up owning
// block i) followed by a ring allgather, run as one pipelined chunk stream so
// that the allgather's first chunks leave while the reduce-scatter's last
// ones are still arriving. Each member sends 2(N-1)/N of the buffer.
#include "core/collectives/internal.h"
#include "core/collectives/ring_pipeline.h"

namespace hvd::collectives::internal {

absl::Status AllreduceRing(transport::Context& context, const Group& group,
                           void* data, size_t count, DataType dtype,
                           ReduceOp op, const CollectiveOptions& options) {
  return AllreduceRing(context, group, DataView(static_cast<char*>(data)),
                       count, dtype, op, options);
}

absl::Status AllreduceRing(transport::Context& context, const Group& group,
                           const DataView& data, size_t count, DataType dtype,
                           ReduceOp op, const CollectiveOptions& options,
                           const DataView* source) {
  const size_t elem_size = DataTypeSize(dtype);
  const std::vector<Span> blocks = EvenBlocks(count, group.size(), elem_size);
  std::vector<RingStep> steps = ReduceScatterSteps(blocks, group.index);
  // The last reduce-scatter step completes this member's block: scale it
  // there, before the allgather passes it on.
  steps.back().scale = true;
  for (const RingStep& step : AllgatherSteps(blocks, group.index)) {
    steps.push_back(step);
  }
  const RingPlan plan =
      BuildRingPlan(ReduceScatterFirstSend(blocks, group.index), steps,
                    /*forward_last=*/false, options.chunk_bytes, elem_size,
                    data.cuts());
  return RunRingPlan(context, RingPeer(group, 1), RingPeer(group, -1), data,
                     plan, dtype, op, options, source);
}

}  // namespace hvd::collectives::internal
