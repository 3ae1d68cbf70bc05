// Allreduce: argument checks and the choice of algorithm.
#include <cstring>
#include <utility>
#include <vector>

#include "core/collectives/collectives.h"
#include "core/collectives/internal.h"
#include "core/collectives/reduce.h"

namespace hvd::collectives {
namespace {

// Copies `source` into `data` (views of the same pieces) where they differ.
void CopyView(const internal::DataView& source, const internal::DataView& data,
              size_t bytes) {
  size_t offset = 0;
  for (const auto& [to, n] : data.Ranges(0, bytes)) {
    const char* from = source.At(offset);
    if (from != to) std::memcpy(to, from, n);
    offset += n;
  }
}

// Chooses and runs the algorithm (arguments checked, group > 1, count > 0).
// Out of place (`source`), only the ring reads the input where it is; the
// others get it copied into `data` first.
absl::Status Run(transport::Context& context, const Group& group,
                 const internal::DataView& data, size_t count, DataType dtype,
                 ReduceOp op, const CollectiveOptions& options,
                 const internal::DataView* source = nullptr) {
  absl::Status status;
  const size_t bytes = count * DataTypeSize(dtype);
  auto in_place = [&] {
    if (source != nullptr) CopyView(*source, data, bytes);
  };
  if (options.algorithm == AllreduceAlgorithm::kHierarchical ||
      (options.algorithm == AllreduceAlgorithm::kAuto &&
       bytes > internal::SmallMessageBytes(options, group))) {
    const internal::HostLayout layout =
        internal::LayoutOnHosts(group, options.hosts);
    const bool worth_it = options.hierarchical_allreduce &&
                          layout.num_hosts > 1 && layout.local.size() > 1;
    if (layout.balanced &&
        (options.algorithm == AllreduceAlgorithm::kHierarchical || worth_it)) {
      in_place();
      status = internal::AllreduceHierarchical(context, group, data, count,
                                               dtype, op, options);
      return internal::Annotate(status, "Allreduce (hierarchical)", context,
                                group);
    }
    if (options.algorithm == AllreduceAlgorithm::kHierarchical) {
      status = internal::AllreduceRing(context, group, data, count, dtype, op,
                                       options, source);
      return internal::Annotate(status, "Allreduce (ring)", context, group);
    }
  }
  if (internal::UseDirect(options, group, bytes)) {
    const char* input =
        source != nullptr ? source->Contiguous(0, bytes) : nullptr;
    char* output = input != nullptr ? data.Contiguous(0, bytes) : nullptr;
    if (output != nullptr &&
        !internal::UseDoubling(options, group) &&
        internal::PairReducesOnReceive(context, group)) {
      // Out of place, straight into the output: no copy of the input first.
      status = internal::AllreducePairOnReceive(context, group, input, output,
                                                count, dtype, op, options);
      return internal::Annotate(status, "Allreduce (direct)", context, group);
    }
    in_place();
    status = internal::AllreduceSmall(context, group, data, count, dtype, op,
                                      options);
    return internal::Annotate(status,
                              internal::UseDoubling(options, group)
                                  ? "Allreduce (recursive doubling)"
                                  : "Allreduce (direct)",
                              context, group);
  }
  status = internal::AllreduceRing(context, group, data, count, dtype, op,
                                   options, source);
  return internal::Annotate(status, "Allreduce (ring)", context, group);
}

absl::Status Check(transport::Context& context, const Group& group, ReduceOp op,
                   absl::string_view what) {
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
                           const std::vector<AllreducePiece>& pieces,
                           DataType dtype, ReduceOp op,
                           const CollectiveOptions& options) {
  if (absl::Status s = Check(context, group, op, "Allreduce"); !s.ok()) {
    return s;
  }
  const size_t elem_size = DataTypeSize(dtype);
  std::vector<std::pair<char*, size_t>> outputs;
  size_t count = 0;
  bool in_place = true;
  for (const AllreducePiece& p : pieces) {
    outputs.emplace_back(static_cast<char*>(p.output), p.count * elem_size);
    in_place = in_place && p.input == p.output;
    count += p.count;
  }
  if (count == 0) return absl::OkStatus();
  const internal::DataView data(outputs);
  // Out of place only: the inputs, which are only read (RunRingPlan's
  // source); DataView holds writable pointers.
  std::vector<std::pair<char*, size_t>> inputs;
  if (!in_place) {
    for (const AllreducePiece& p : pieces) {
      inputs.emplace_back(static_cast<char*>(const_cast<void*>(p.input)),
                          p.count * elem_size);
    }
  }
  const internal::DataView source(inputs);
  if (group.size() == 1) {
    if (!in_place) CopyView(source, data, count * elem_size);
    for (const AllreducePiece& p : pieces) {
      Postscale(p.output, p.count, dtype, options.postscale, options.divisor);
    }
    return absl::OkStatus();
  }
  return Run(context, group, data, count, dtype, op, options,
             in_place ? nullptr : &source);
}

}  // namespace hvd::collectives
