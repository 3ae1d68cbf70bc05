// Broadcast from any member: a pipelined chain (root -> root+1 -> ...) whose
// members forward each chunk as it arrives, or one direct round for small
// buffers.
#include "absl/strings/str_cat.h"
#include "core/collectives/collectives.h"
#include "core/collectives/internal.h"
#include "core/collectives/ring_pipeline.h"

namespace hvd::collectives {
namespace {

using internal::RequestPtr;
using internal::Span;

absl::Status BroadcastChain(transport::Context& context, const Group& group,
                            char* data, size_t bytes, int root,
                            const CollectiveOptions& options) {
  const int n = group.size();
  const int position = internal::Mod(group.index - root, n);
  const Span whole{0, bytes};
  internal::RingPlan plan;
  if (position == 0) {
    plan = internal::BuildRingPlan(whole, {}, /*forward_last=*/false,
                                   options.chunk_bytes, 1);
  } else {
    plan = internal::BuildRingPlan(Span{}, {{whole, /*reduce=*/false}},
                                   /*forward_last=*/position + 1 < n,
                                   options.chunk_bytes, 1);
  }
  return internal::RunRingPlan(context, internal::RingPeer(group, 1),
                               internal::RingPeer(group, -1), data, plan,
                               DataType::kUint8, ReduceOp::kSum, options);
}

absl::Status BroadcastDirect(transport::Context& context, const Group& group,
                             char* data, size_t bytes, int root,
                             const CollectiveOptions& options) {
  std::vector<RequestPtr> requests;
  if (group.index == root) {
    for (int k = 1; k < group.size(); ++k) {
      requests.push_back(
          context.Send(internal::RingPeer(group, k), data, bytes));
    }
  } else {
    requests.push_back(context.Recv(group.ranks[root], data, bytes));
  }
  return internal::WaitAll(requests, internal::LimitsOf(options));
}

}  // namespace

absl::Status Broadcast(transport::Context& context, const Group& group,
                       void* data, size_t bytes, int root,
                       const CollectiveOptions& options) {
  absl::Status status = internal::CheckGroup(context, group, "Broadcast");
  if (!status.ok()) return status;
  if (root < 0 || root >= group.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Broadcast: root ", root, " is outside a group of ", group.size()));
  }
  if (group.size() == 1 || bytes == 0) return absl::OkStatus();
  char* buffer = static_cast<char*>(data);
  if (internal::UseDirect(options, group, bytes)) {
    status = BroadcastDirect(context, group, buffer, bytes, root, options);
    return internal::Annotate(status, "Broadcast (direct)", context, group);
  }
  status = BroadcastChain(context, group, buffer, bytes, root, options);
  return internal::Annotate(status, "Broadcast (chain)", context, group);
}

}  // namespace hvd::collectives
