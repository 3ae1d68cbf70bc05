// Latency-optimal allreduce for small buffers: one round in which every
// member sends its buffer to every other, then each reduces the N
// contributions in group order, so all get bit-identical results; a pair
// out of place over shared memory reduces straight out of the peer's ring.
// Also the choice between it and recursive doubling for a small allreduce.
#include <cstring>
#include <vector>

#include "core/collectives/internal.h"
#include "core/collectives/reduce.h"

namespace hvd::collectives::internal {

absl::Status AllreduceDirect(transport::Context& context, const Group& group,
                             void* data, size_t count, DataType dtype,
                             ReduceOp op, const CollectiveOptions& options) {
  const int n = group.size();
  const int me = group.index;
  const size_t bytes = count * DataTypeSize(dtype);
  // Contribution of member j lives in slot j, shifted past our own.
  Scratch scratch(bytes * (n - 1));
  auto contribution = [&](int j) -> char* {
    if (j == me) return static_cast<char*>(data);
    return scratch.data() + bytes * (j < me ? j : j - 1);
  };
  std::vector<RequestPtr> recvs;
  for (int k = 1; k < n; ++k) {
    const int j = Mod(me - k, n);
    recvs.push_back(context.Recv(group.ranks[j], contribution(j), bytes));
  }
  std::vector<RequestPtr> sends;
  for (int k = 1; k < n; ++k) {
    sends.push_back(context.Send(RingPeer(group, k), data, bytes));
  }
  const transport::WaitLimits limits = LimitsOf(options);
  absl::Status status = WaitAll(recvs, limits);
  if (status.ok()) status = WaitAll(sends, limits);
  if (!status.ok()) {
    scratch.AbandonIfPending(recvs);
    return status;
  }
  // Member 0 may reduce in place (its sends are done); others accumulate in
  // member 0's slot and copy the result out.
  char* acc = contribution(0);
  for (int j = 1; j < n; ++j) Reduce(acc, contribution(j), count, dtype, op);
  Postscale(acc, count, dtype, options.postscale, options.divisor);
  if (acc != data) std::memcpy(data, acc, bytes);
  return absl::OkStatus();
}

bool PairReducesOnReceive(transport::Context& context, const Group& group) {
  return group.size() == 2 &&
         context.ReducesOnReceive(group.ranks[1 - group.index]);
}

absl::Status AllreducePairOnReceive(transport::Context& context,
                                    const Group& group, const void* input,
                                    void* output, size_t count, DataType dtype,
                                    ReduceOp op,
                                    const CollectiveOptions& options) {
  const int peer = group.ranks[1 - group.index];
  const size_t elem_size = DataTypeSize(dtype);
  const size_t bytes = count * elem_size;
  char* const out = static_cast<char*>(output);
  const char* const own = static_cast<const char*>(input);
  const bool own_first = group.index == 0;
  std::vector<RequestPtr> recvs;
  recvs.push_back(context.RecvReduce(
      peer, bytes,
      [=](size_t offset, const char* piece, size_t piece_bytes) {
        const char* mine = own + offset;
        ReduceInto(out + offset, own_first ? mine : piece,
                   own_first ? piece : mine, piece_bytes / elem_size, dtype,
                   op);
      }));
  std::vector<RequestPtr> sends;
  sends.push_back(context.Send(peer, input, bytes));
  const transport::WaitLimits limits = LimitsOf(options);
  absl::Status status = WaitAll(recvs, limits);
  if (status.ok()) status = WaitAll(sends, limits);
  if (!status.ok()) return status;  // `output` is the caller's (it aborts)
  Postscale(out, count, dtype, options.postscale, options.divisor);
  return absl::OkStatus();
}

bool UseDoubling(const CollectiveOptions& options, const Group& group) {
  switch (options.algorithm) {
    case AllreduceAlgorithm::kRecursiveDoubling:
      return true;
    case AllreduceAlgorithm::kAuto:
    case AllreduceAlgorithm::kHierarchical:
      return group.size() > kDirectMaxMembers;
    case AllreduceAlgorithm::kDirect:
    case AllreduceAlgorithm::kRing:
      break;
  }
  return false;
}

absl::Status AllreduceSmall(transport::Context& context, const Group& group,
                            const DataView& data, size_t count, DataType dtype,
                            ReduceOp op, const CollectiveOptions& options) {
  const auto run =
      UseDoubling(options, group) ? AllreduceDoubling : AllreduceDirect;
  const size_t bytes = count * DataTypeSize(dtype);
  if (char* p = data.Contiguous(0, bytes)) {
    return run(context, group, p, count, dtype, op, options);
  }
  Scratch gathered(bytes);
  char* at = gathered.data();
  for (const auto& [p, n] : data.Ranges(0, bytes)) {
    std::memcpy(at, p, n);
    at += n;
  }
  absl::Status status =
      run(context, group, gathered.data(), count, dtype, op, options);
  // Neither leaves anything posted on `gathered` when it returns.
  if (!status.ok()) return status;
  at = gathered.data();
  for (const auto& [p, n] : data.Ranges(0, bytes)) {
    std::memcpy(p, at, n);
    at += n;
  }
  return absl::OkStatus();
}

}  // namespace hvd::collectives::internal
