// Allgather of variable-sized blocks: a pipelined ring that forwards each
// chunk as soon as it arrives, one direct round for small totals (recursive
// doubling in large groups), or (asked for) the hierarchical form: rings
// across hosts, then within them.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "core/collectives/collectives.h"
#include "core/collectives/doubling_layout.h"
#include "core/collectives/internal.h"
#include "core/collectives/ring_pipeline.h"

namespace hvd::collectives {
namespace {

using internal::RequestPtr;
using internal::Span;

absl::Status AllgatherRing(transport::Context& context, const Group& group,
                           char* output, const std::vector<Span>& blocks,
                           const CollectiveOptions& options) {
  const internal::RingPlan plan = internal::BuildRingPlan(
      internal::AllgatherFirstSend(blocks, group.index),
      internal::AllgatherSteps(blocks, group.index), /*forward_last=*/false,
      options.chunk_bytes, /*elem_size=*/1);
  return internal::RunRingPlan(context, internal::RingPeer(group, 1),
                               internal::RingPeer(group, -1), output, plan,
                               DataType::kUint8, ReduceOp::kSum, options);
}

// A ring among `ring` (context ranks, this member among them) in which
// member i brings the block of `owners[i]`; nothing if all are empty.
absl::Status SubRing(transport::Context& context, const Group& group,
                     const std::vector<int>& ring,
                     const std::vector<int>& owners, char* output,
                     const std::vector<Span>& blocks,
                     const CollectiveOptions& options) {
  std::vector<Span> ring_blocks;
  size_t total = 0;
  for (int owner : owners) {
    const auto at = std::find(group.ranks.begin(), group.ranks.end(), owner);
    ring_blocks.push_back(blocks[at - group.ranks.begin()]);
    total += ring_blocks.back().bytes;
  }
  if (total == 0) return absl::OkStatus();
  const auto me = std::find(ring.begin(), ring.end(), group.ranks[group.index]);
  const Group sub{ring, static_cast<int>(me - ring.begin())};
  return AllgatherRing(context, sub, output, ring_blocks, options);
}

// See CollectiveOptions::hierarchical_allgather. `layout`: balanced, with
// several hosts of several members each.
absl::Status AllgatherHierarchical(transport::Context& context,
                                   const Group& group,
                                   const internal::HostLayout& layout,
                                   char* output,
                                   const std::vector<Span>& blocks,
                                   const CollectiveOptions& options) {
  // Member i of every host gathers the blocks of the members i.
  absl::Status status = SubRing(context, group, layout.cross.ranks,
                                layout.cross.ranks, output, blocks, options);
  // Then, within this host, member i brings host h's member i's block.
  for (size_t h = 0; status.ok() && h < layout.members.size(); ++h) {
    status = SubRing(context, group, layout.local.ranks, layout.members[h],
                     output, blocks, options);
  }
  return status;
}

absl::Status AllgatherDirect(transport::Context& context, const Group& group,
                             char* output, const std::vector<Span>& blocks,
                             const CollectiveOptions& options) {
  const int n = group.size();
  const int me = group.index;
  std::vector<RequestPtr> requests;
  internal::PostRecvsFromOthers(context, group, output, blocks, &requests);
  if (blocks[me].bytes > 0) {
    for (int k = 1; k < n; ++k) {
      requests.push_back(context.Send(internal::RingPeer(group, k),
                                      output + blocks[me].offset,
                                      blocks[me].bytes));
    }
  }
  return internal::WaitAll(requests, internal::LimitsOf(options));
}

// Recursive doubling: each round a member swaps all the blocks it holds
// with one partner, whose blocks are the neighbouring range of members, so
// every transfer is one contiguous range of `output`. N not a power of two:
// as AllreduceDoubling, the first 2r members fold in pairs (the even one
// hands its block to the odd one, and gets the whole output back).
class AllgatherDoubling {
 public:
  AllgatherDoubling(transport::Context& context, const Group& group,
                    char* output, const std::vector<Span>& blocks,
                    const CollectiveOptions& options)
      : context_(context),
        group_(group),
        output_(output),
        blocks_(blocks),
        limits_(internal::LimitsOf(options)),
        layout_(group.size()) {}

  absl::Status Run() {
    const int me = group_.index;
    const Span all = Bytes(0, group_.size());
    if (layout_.FoldedOut(me)) {
      absl::Status s = Swap(me + 1, Bytes(me, me + 1), Span{});
      return s.ok() ? Swap(me + 1, Span{}, all) : s;
    }
    if (layout_.FoldedIn(me)) {
      if (absl::Status s = Swap(me - 1, Span{}, Bytes(me - 1, me)); !s.ok()) {
        return s;
      }
    }
    const int v = layout_.Position(me);
    for (int mask = 1; mask < layout_.p; mask <<= 1) {
      const int w = v ^ mask;
      absl::Status s = Swap(layout_.Member(w), Held(v, mask), Held(w, mask));
      if (!s.ok()) return s;
    }
    return layout_.FoldedIn(me) ? Swap(me - 1, all, Span{}) : absl::OkStatus();
  }

 private:
  // The members of positions [v & ~(mask - 1), + mask), as bytes of output.
  Span Held(int v, int mask) const {
    const int lo = v & ~(mask - 1);
    const int hi = lo + mask;  // exclusive, in positions
    return Bytes(layout_.FirstMember(lo),
                 hi == layout_.p ? group_.size() : layout_.FirstMember(hi));
  }
  // Members [a, b) as bytes of output.
  Span Bytes(int a, int b) const {
    if (a >= b) return Span{};
    const size_t start = blocks_[a].offset;
    return Span{start, blocks_[b - 1].offset + blocks_[b - 1].bytes - start};
  }
  // Sends `out` of output to `member` and receives `in` from it; empty
  // ranges move nothing (both sides know every block's size).
  absl::Status Swap(int member, Span out, Span in) {
    std::vector<RequestPtr> requests;
    const int rank = group_.ranks[member];
    if (in.bytes > 0) {
      requests.push_back(context_.Recv(rank, output_ + in.offset, in.bytes));
    }
    if (out.bytes > 0) {
      requests.push_back(context_.Send(rank, output_ + out.offset, out.bytes));
    }
    return internal::WaitAll(requests, limits_);
  }

  transport::Context& context_;
  const Group& group_;
  char* const output_;
  const std::vector<Span>& blocks_;
  const transport::WaitLimits limits_;
  const DoublingLayout layout_;
};

}  // namespace

absl::Status Allgather(transport::Context& context, const Group& group,
                       const void* input, void* output,
                       const std::vector<size_t>& bytes_per_member,
                       const CollectiveOptions& options) {
  absl::Status status = internal::CheckGroup(context, group, "Allgather");
  if (!status.ok()) return status;
  if (bytes_per_member.size() != static_cast<size_t>(group.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("Allgather: ", bytes_per_member.size(),
                     " block sizes given for a group of ", group.size()));
  }
  const std::vector<Span> blocks = internal::Layout(bytes_per_member);
  char* out = static_cast<char*>(output);
  const Span own = blocks[group.index];
  if (own.bytes > 0 && input != out + own.offset) {
    std::memmove(out + own.offset, input, own.bytes);
  }
  const size_t total = std::accumulate(bytes_per_member.begin(),
                                       bytes_per_member.end(), size_t{0});
  if (group.size() == 1 || total == 0) return absl::OkStatus();
  if (internal::UseDirect(options, group, total)) {
    if (internal::UseDoubling(options, group)) {
      status = AllgatherDoubling(context, group, out, blocks, options).Run();
      return internal::Annotate(status, "Allgather (recursive doubling)",
                                context, group);
    }
    status = AllgatherDirect(context, group, out, blocks, options);
    return internal::Annotate(status, "Allgather (direct)", context, group);
  }
  if (options.hierarchical_allgather) {
    const internal::HostLayout layout =
        internal::LayoutOnHosts(group, options.hosts);
    if (layout.balanced && layout.num_hosts > 1 && layout.local.size() > 1) {
      status =
          AllgatherHierarchical(context, group, layout, out, blocks, options);
      return internal::Annotate(status, "Allgather (hierarchical)", context,
                                group);
    }
  }
  status = AllgatherRing(context, group, out, blocks, options);
  return internal::Annotate(status, "Allgather (ring)", context, group);
}

}  // namespace hvd::collectives
