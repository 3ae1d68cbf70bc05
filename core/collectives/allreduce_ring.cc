// Bandwidth-optimal allreduce: a ring reduce-scatter (member i ends up owning
// block i) followed by a ring allgather, run as one pipelined chunk stream so
// that the allgather's first chunks leave while the reduce-scatter's last
// ones are still arriving. Each member sends 2(N-1)/N of the buffer. Large
// buffers go segment by segment (CollectiveOptions::ring_segment_bytes).
#include <algorithm>
#include <optional>

#include "core/collectives/internal.h"
#include "core/collectives/ring_pipeline.h"

namespace hvd::collectives::internal {

absl::Status AllreduceRing(transport::Context& context, const Group& group,
                           void* data, size_t count, DataType dtype,
                           ReduceOp op, const CollectiveOptions& options) {
  return AllreduceRing(context, group, DataView(static_cast<char*>(data)),
                       count, dtype, op, options);
}

namespace {

// One ring over `count` elements: reduce-scatter then allgather, pipelined;
// the allgather's last step streamed (RingStep::stream) if `stream`.
absl::Status OneRing(transport::Context& context, const Group& group,
                     const DataView& data, size_t count, DataType dtype,
                     ReduceOp op, const CollectiveOptions& options,
                     const DataView* source, bool stream) {
  const size_t elem_size = DataTypeSize(dtype);
  const std::vector<Span> blocks = EvenBlocks(count, group.size(), elem_size);
  std::vector<RingStep> steps = ReduceScatterSteps(blocks, group.index);
  // The last reduce-scatter step completes this member's block: scale it
  // there, before the allgather passes it on.
  steps.back().scale = true;
  for (const RingStep& step : AllgatherSteps(blocks, group.index)) {
    steps.push_back(step);
  }
  steps.back().stream = stream;
  const RingPlan plan =
      BuildRingPlan(ReduceScatterFirstSend(blocks, group.index), steps,
                    /*forward_last=*/false, options.chunk_bytes, elem_size,
                    data.cuts());
  return RunRingPlan(context, RingPeer(group, 1), RingPeer(group, -1), data,
                     plan, dtype, op, options, source);
}

}  // namespace

absl::Status AllreduceRing(transport::Context& context, const Group& group,
                           const DataView& data, size_t count, DataType dtype,
                           ReduceOp op, const CollectiveOptions& options,
                           const DataView* source) {
  const size_t elem_size = DataTypeSize(dtype);
  const bool stream = source != nullptr && options.streaming_store_bytes != 0 &&
                      count * elem_size >= options.streaming_store_bytes;
  const size_t segment_count =
      std::max(options.ring_segment_bytes,
               static_cast<size_t>(group.size()) * options.chunk_bytes) /
      elem_size;
  if (options.ring_segment_bytes == 0 || count <= segment_count) {
    return OneRing(context, group, data, count, dtype, op, options, source,
                   stream);
  }
  // Every member cuts the same segments from the same count.
  for (size_t at = 0; at < count; at += segment_count) {
    const size_t n = std::min(segment_count, count - at);
    std::optional<DataView> segment_source;
    if (source != nullptr) {
      segment_source.emplace(source->Slice(at * elem_size));
    }
    if (absl::Status s = OneRing(
            context, group, data.Slice(at * elem_size), n, dtype, op, options,
            segment_source ? &*segment_source : nullptr, stream);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace hvd::collectives::internal
