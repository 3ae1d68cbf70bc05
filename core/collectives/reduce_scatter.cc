// ReduceScatter with uneven per-member counts: a pipelined ring
// reduce-scatter that reads the input where it is, or for small inputs one
// direct round in which member j receives everyone's block j and reduces the
// contributions in group order, or in large groups a recursive-doubling
// allreduce of the whole (small) input of which each member keeps its block.
#include <cstring>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "core/collectives/collectives.h"
#include "core/collectives/internal.h"
#include "core/collectives/reduce.h"
#include "core/collectives/ring_pipeline.h"

namespace hvd::collectives {
namespace {

using internal::RequestPtr;
using internal::Scratch;
using internal::Span;

struct Job {
  const char* input;
  char* output;
  std::vector<Span> blocks;  // Bytes of each member's block in `input`.
  DataType dtype;
  ReduceOp op;
};

// Out of place: the first sends come from the input and each reduced chunk
// is the input's chunk reduced with the received one, written to a working
// buffer for the blocks this member passes on and straight to `output` for
// its own block, which is reduced last; no copy of the input or the result.
absl::Status ReduceScatterRing(transport::Context& context, const Group& group,
                               const Job& job,
                               const CollectiveOptions& options) {
  const Span last = job.blocks.back();
  const size_t total = last.offset + last.bytes;
  const Span own = job.blocks[group.index];
  Scratch work(total);
  const internal::DataView data(
      {{work.data(), own.offset},
       {job.output, own.bytes},
       {work.data() + own.offset + own.bytes, total - own.offset - own.bytes}});
  // Only read (RunRingPlan's source); DataView holds writable pointers.
  const internal::DataView input(const_cast<char*>(job.input));
  const internal::RingPlan plan = internal::BuildRingPlan(
      internal::ReduceScatterFirstSend(job.blocks, group.index),
      internal::ReduceScatterSteps(job.blocks, group.index),
      /*forward_last=*/false, options.chunk_bytes, DataTypeSize(job.dtype),
      data.cuts());
  return internal::RunRingPlan(context, internal::RingPeer(group, 1),
                               internal::RingPeer(group, -1), data, plan,
                               job.dtype, job.op, options, &input, &work);
}

absl::Status ReduceScatterDirect(transport::Context& context,
                                 const Group& group, const Job& job,
                                 const CollectiveOptions& options) {
  const int n = group.size();
  const int me = group.index;
  const Span own = job.blocks[me];
  Scratch scratch(own.bytes * (n - 1));
  auto slot = [&](int j) {
    return scratch.data() + own.bytes * (j < me ? j : j - 1);
  };
  auto contribution = [&](int j) -> const char* {
    return j == me ? job.input + own.offset : slot(j);
  };
  std::vector<RequestPtr> recvs;
  for (int k = 1; k < n && own.bytes > 0; ++k) {
    const int j = internal::Mod(me - k, n);
    recvs.push_back(context.Recv(group.ranks[j], slot(j), own.bytes));
  }
  std::vector<RequestPtr> sends;
  for (int k = 1; k < n; ++k) {
    const int j = internal::Mod(me + k, n);
    if (job.blocks[j].bytes == 0) continue;
    sends.push_back(context.Send(
        group.ranks[j], job.input + job.blocks[j].offset, job.blocks[j].bytes));
  }
  const transport::WaitLimits limits = internal::LimitsOf(options);
  absl::Status status = internal::WaitAll(recvs, limits);
  if (status.ok()) status = internal::WaitAll(sends, limits);
  if (!status.ok()) {
    scratch.AbandonIfPending(recvs);
    return status;
  }
  const size_t count = own.bytes / DataTypeSize(job.dtype);
  if (count == 0) return absl::OkStatus();
  std::memcpy(job.output, contribution(0), own.bytes);
  for (int j = 1; j < n; ++j) {
    Reduce(job.output, contribution(j), count, job.dtype, job.op);
  }
  return absl::OkStatus();
}

// Small totals only: the allreduce moves every block log2 N times.
absl::Status ReduceScatterDoubling(transport::Context& context,
                                   const Group& group, const Job& job,
                                   const CollectiveOptions& options) {
  const Span last = job.blocks.back();
  const size_t total = last.offset + last.bytes;
  Scratch work(total);
  std::memcpy(work.data(), job.input, total);
  CollectiveOptions unscaled = options;  // ReduceScatter does not scale
  unscaled.postscale = 1.0;
  unscaled.divisor = 1;
  absl::Status status = internal::AllreduceDoubling(
      context, group, work.data(), total / DataTypeSize(job.dtype), job.dtype,
      job.op, unscaled);
  if (!status.ok()) return status;  // nothing is left posted on `work`
  const Span own = job.blocks[group.index];
  // An empty block may come with no output buffer at all.
  if (own.bytes > 0) {
    std::memcpy(job.output, work.data() + own.offset, own.bytes);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ReduceScatter(transport::Context& context, const Group& group,
                           const void* input, void* output,
                           const std::vector<size_t>& counts, DataType dtype,
                           ReduceOp op, const CollectiveOptions& options) {
  absl::Status status = internal::CheckGroup(context, group, "ReduceScatter");
  if (!status.ok()) return status;
  if (counts.size() != static_cast<size_t>(group.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReduceScatter: ", counts.size(),
                     " counts given for a group of ", group.size()));
  }
  if (status.ok()) status = internal::CheckReduceOp(op, "ReduceScatter");
  if (!status.ok()) return status;
  const size_t elem_size = DataTypeSize(dtype);
  std::vector<size_t> bytes(counts.size());
  for (size_t i = 0; i < counts.size(); ++i) bytes[i] = counts[i] * elem_size;
  Job job{static_cast<const char*>(input), static_cast<char*>(output),
          internal::Layout(bytes), dtype, op};
  const size_t total = std::accumulate(bytes.begin(), bytes.end(), size_t{0});
  if (group.size() == 1) {
    std::memmove(job.output, job.input, total);
    return absl::OkStatus();
  }
  if (total == 0) return absl::OkStatus();
  if (internal::UseDirect(options, group, total)) {
    if (internal::UseDoubling(options, group)) {
      status = ReduceScatterDoubling(context, group, job, options);
      return internal::Annotate(status, "ReduceScatter (recursive doubling)",
                                context, group);
    }
    status = ReduceScatterDirect(context, group, job, options);
    return internal::Annotate(status, "ReduceScatter (direct)", context, group);
  }
  status = ReduceScatterRing(context, group, job, options);
  return internal::Annotate(status, "ReduceScatter (ring)", context, group);
}

}  // namespace hvd::collectives
