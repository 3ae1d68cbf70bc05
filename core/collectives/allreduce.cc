// Allreduce: argument checks and the choice between ring and direct.
#include "core/collectives/collectives.h"
#include "core/collectives/internal.h"
#include "core/collectives/reduce.h"

namespace hvd::collectives {

absl::Status Allreduce(transport::Context& context, const Group& group,
                       void* data, size_t count, DataType dtype, ReduceOp op,
                       const CollectiveOptions& options) {
  absl::Status status = internal::CheckGroup(context, group, "Allreduce");
  if (status.ok()) status = internal::CheckReduceOp(op, "Allreduce");
  if (!status.ok()) return status;
  if (count == 0) return absl::OkStatus();
  if (group.size() == 1) {
    if (options.postscale != 1.0) Scale(data, count, dtype, options.postscale);
    return absl::OkStatus();
  }
  const size_t bytes = count * DataTypeSize(dtype);
  if (options.algorithm == AllreduceAlgorithm::kHierarchical ||
      (options.algorithm == AllreduceAlgorithm::kAuto &&
       bytes > internal::SmallMessageBytes(options, group))) {
    const internal::HostLayout layout =
        internal::LayoutOnHosts(group, options.hosts);
    const bool worth_it = layout.num_hosts > 1 && layout.local.size() > 1;
    if (layout.balanced &&
        (options.algorithm == AllreduceAlgorithm::kHierarchical || worth_it)) {
      status = internal::AllreduceHierarchical(context, group, data, count,
                                               dtype, op, options);
      return internal::Annotate(status, "Allreduce (hierarchical)", context,
                                group);
    }
    if (options.algorithm == AllreduceAlgorithm::kHierarchical) {
      status = internal::AllreduceRing(context, group, data, count, dtype, op,
                                       options);
      return internal::Annotate(status, "Allreduce (ring)", context, group);
    }
  }
  if (internal::UseDirect(options, group, bytes)) {
    status = internal::AllreduceDirect(context, group, data, count, dtype, op,
                                       options);
    return internal::Annotate(status, "Allreduce (direct)", context, group);
  }
  status =
      internal::AllreduceRing(context, group, data, count, dtype, op, options);
  return internal::Annotate(status, "Allreduce (ring)", context, group);
}

}  // namespace hvd::collectives
