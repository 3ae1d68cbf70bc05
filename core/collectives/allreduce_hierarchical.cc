// Hierarchical allreduce (see AllreduceAlgorithm::kHierarchical): reduce
// within each host, allreduce across hosts one block per local position,
// gather within each host. With shared memory inside hosts and TCP between
// them, the expensive links carry 2(H-1)/H of the buffer per host instead of
// 2(N-1)/N per link, and every member of a host drives a share of it.
#include <algorithm>
#include <map>

#include "core/collectives/internal.h"
#include "core/collectives/reduce.h"
#include "core/collectives/ring_pipeline.h"

namespace hvd::collectives::internal {

HostLayout LayoutOnHosts(const Group& group, const std::vector<int>& hosts) {
  HostLayout layout;
  for (int r : group.ranks) {
    if (r < 0 || static_cast<size_t>(r) >= hosts.size()) return layout;
  }
  layout.known = true;
  // Hosts in order of their first member; members of each in group order.
  std::vector<int> host_order;
  std::map<int, std::vector<int>> members;
  for (int r : group.ranks) {
    auto [it, fresh] = members.try_emplace(hosts[r]);
    if (fresh) host_order.push_back(hosts[r]);
    it->second.push_back(r);
  }
  layout.num_hosts = static_cast<int>(host_order.size());
  for (int h : host_order) layout.members.push_back(members[h]);
  const int me = group.ranks[group.index];
  const std::vector<int>& mine = members[hosts[me]];
  layout.local.ranks = mine;
  layout.local.index = static_cast<int>(
      std::find(mine.begin(), mine.end(), me) - mine.begin());
  layout.balanced = true;
  for (int h : host_order) {
    const std::vector<int>& m = members[h];
    if (m.size() != mine.size()) {
      layout.balanced = false;
      continue;
    }
    if (h == hosts[me]) layout.cross.index = layout.cross.size();
    layout.cross.ranks.push_back(m[layout.local.index]);
  }
  if (!layout.balanced) layout.cross = Group{};
  return layout;
}

absl::Status AllreduceHierarchical(transport::Context& context,
                                   const Group& group, const DataView& data,
                                   size_t count, DataType dtype, ReduceOp op,
                                   const CollectiveOptions& options) {
  const HostLayout layout = LayoutOnHosts(group, options.hosts);
  const Group& local = layout.local;
  const size_t elem_size = DataTypeSize(dtype);
  const std::vector<Span> blocks = EvenBlocks(count, local.size(), elem_size);
  const int next = RingPeer(local, 1);
  const int prev = RingPeer(local, -1);
  CollectiveOptions unscaled = options;
  unscaled.postscale = 1.0;
  unscaled.divisor = 1;
  if (local.size() > 1) {
    const RingPlan plan = BuildRingPlan(
        ReduceScatterFirstSend(blocks, local.index),
        ReduceScatterSteps(blocks, local.index), /*forward_last=*/false,
        options.chunk_bytes, elem_size, data.cuts());
    absl::Status status =
        RunRingPlan(context, next, prev, data, plan, dtype, op, unscaled);
    if (!status.ok()) return status;
  }
  const Span own = blocks[local.index];
  const size_t own_count = own.bytes / elem_size;
  if (layout.cross.size() > 1 && own.bytes > 0) {
    // Scales the block once its cross-host reduction is complete.
    const DataView block = data.Slice(own.offset);
    absl::Status status =
        UseDirect(options, layout.cross, own.bytes)
            ? AllreduceSmall(context, layout.cross, block, own_count, dtype,
                             op, options)
            : AllreduceRing(context, layout.cross, block, own_count, dtype, op,
                            options);
    if (!status.ok()) return status;
  } else if (options.scales()) {
    for (const auto& [p, n] : data.Ranges(own.offset, own.bytes)) {
      Postscale(p, n / elem_size, dtype, options.postscale, options.divisor);
    }
  }
  if (local.size() > 1) {
    const RingPlan plan = BuildRingPlan(
        AllgatherFirstSend(blocks, local.index),
        AllgatherSteps(blocks, local.index), /*forward_last=*/false,
        options.chunk_bytes, elem_size, data.cuts());
    return RunRingPlan(context, next, prev, data, plan, dtype, op, unscaled);
  }
  return absl::OkStatus();
}

}  // namespace hvd::collectives::internal
