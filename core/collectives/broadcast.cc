// Broadcast from any member: a pipelined chain (root -> root+1 -> ...) whose
// members forward each chunk as it arrives, or for small buffers one direct
// round, or in large groups a binomial tree (log2 N rounds and peers).
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

// Position q (counted from the root) receives from q minus its lowest set
// bit, then sends to q + m for every power of two m below that bit.
absl::Status BroadcastTree(transport::Context& context, const Group& group,
                           char* data, size_t bytes, int root,
                           const CollectiveOptions& options) {
  const int n = group.size();
  const int position = internal::Mod(group.index - root, n);
  auto member = [&](int q) { return group.ranks[(q + root) % n]; };
  const transport::WaitLimits limits = internal::LimitsOf(options);
  int mask = 1;
  while (mask < n && (position & mask) == 0) mask <<= 1;
  if (position != 0) {
    std::vector<RequestPtr> from_parent;
    from_parent.push_back(context.Recv(member(position - mask), data, bytes));
    if (absl::Status s = internal::WaitAll(from_parent, limits); !s.ok()) {
      return s;
    }
  }
  std::vector<RequestPtr> to_children;
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (position + mask < n) {
      to_children.push_back(context.Send(member(position + mask), data, bytes));
    }
  }
  return internal::WaitAll(to_children, limits);
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
    if (internal::UseDoubling(options, group)) {
      status = BroadcastTree(context, group, buffer, bytes, root, options);
      return internal::Annotate(status, "Broadcast (tree)", context, group);
    }
    status = BroadcastDirect(context, group, buffer, bytes, root, options);
    return internal::Annotate(status, "Broadcast (direct)", context, group);
  }
  status = BroadcastChain(context, group, buffer, bytes, root, options);
  return internal::Annotate(status, "Broadcast (chain)", context, group);
}

}  // namespace hvd::collectives
