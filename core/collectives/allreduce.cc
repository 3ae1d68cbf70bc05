// Allreduce: argument checks and the choice between ring and direct.
#include "core/collectives/collectives.h"
#include "core/collectives/internal.h"
#include "core/collectives/reduce.h"

namespace hvd::collectives {
namespace {

// Chooses and runs the algorithm (arguments checked, group > 1, count > 0).
absl::Status Run(transport::Context& context, const Group& group,
                 const internal::DataView& data, size_t count, DataType dtype,
                 ReduceOp op, const CollectiveOptions& options) {
  absl::Status status;
  const size_t bytes = count * DataTypeSize(dtype);
  if (options.algorithm == AllreduceAlgorithm::kHierarchical ||
      (options.algorithm == AllreduceAlgorithm::kAuto &&
       bytes > internal::SmallMessageBytes(options, group))) {
    const internal::HostLayout layout =
        internal::LayoutOnHosts(group, options.hosts);
    const bool worth_it = options.hierarchical_allreduce &&
                          layout.num_hosts > 1 && layout.local.size() > 1;
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

absl::Status Check(transport::Context& context, const Group& group,
                   ReduceOp op, absl::string_view what) {
  absl::Status status = internal::CheckGroup(context, group, what);
  if (status.ok()) status = internal::CheckReduceOp(op, what);
  return status;
}

}  // namespace

absl::Status Allreduce(transport::Context& context, const Group& group,
                       void* data, size_t count, DataType dtype, ReduceOp op,
                       const CollectiveOptions& options) {
  if (absl::Status s = Check(context, group, op, "Allreduce"); !s.ok()) {
    return s;
  }
  if (count == 0) return absl::OkStatus();
  if (group.size() == 1) {
    Postscale(data, count, dtype, options.postscale, options.divisor);
    return absl::OkStatus();
  }
  return Run(context, group, internal::DataView(static_cast<char*>(data)),
             count, dtype, op, options);
}

absl::Status AllreduceMany(transport::Context& context, const Group& group,
                           const std::vector<std::pair<void*, size_t>>& pieces,
                           DataType dtype, ReduceOp op,
                           const CollectiveOptions& options) {
  if (absl::Status s = Check(context, group, op, "Allreduce"); !s.ok()) {
    return s;
  }
  const size_t elem_size = DataTypeSize(dtype);
  std::vector<std::pair<char*, size_t>> bytes;
  size_t count = 0;
  for (const auto& [p, n] : pieces) {
    bytes.emplace_back(static_cast<char*>(p), n * elem_size);
    count += n;
  }
  if (count == 0) return absl::OkStatus();
  if (group.size() == 1) {
    for (const auto& [p, n] : pieces) {
      Postscale(p, n, dtype, options.postscale, options.divisor);
    }
    return absl::OkStatus();
  }
  return Run(context, group, internal::DataView(bytes), count, dtype, op,
             options);
}

}  // namespace hvd::collectives
