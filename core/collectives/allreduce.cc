// Allreduce: argument checks and the choice between ring and direct.
#include "core/collectives/collectives.h"
#include "core/collectives/internal.h"

namespace hvd::collectives {

absl::Status Allreduce(transport::Context& context, const Group& group,
                       void* data, size_t count, DataType dtype, ReduceOp op,
                       const CollectiveOptions& options) {
  absl::Status status = internal::CheckGroup(context, group, "Allreduce");
  if (status.ok()) status = internal::CheckReduceOp(op, "Allreduce");
  if (!status.ok()) return status;
  if (group.size() == 1 || count == 0) return absl::OkStatus();
  if (internal::UseDirect(options, count * DataTypeSize(dtype))) {
    status = internal::AllreduceDirect(context, group, data, count, dtype, op,
                                       options);
    return internal::Annotate(status, "Allreduce (direct)", context, group);
  }
  status =
      internal::AllreduceRing(context, group, data, count, dtype, op, options);
  return internal::Annotate(status, "Allreduce (ring)", context, group);
}

}  // namespace hvd::collectives
