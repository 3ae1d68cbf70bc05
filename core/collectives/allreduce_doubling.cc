// Allreduce for small buffers in large groups: recursive doubling. In each
// of log2 N rounds a member exchanges its whole buffer with one partner and
// both combine the two, so a member talks to about log2 N peers, where the
// direct algorithm talks to all N - 1 and sends (N - 1) times the buffer.
//
// N not a power of two: with p the largest power of two below N and
// r = N - p, members 0..2r-1 pair up first; the even one of each pair hands
// its buffer to the odd one, sits the rounds out, and gets the result back.
//
// Every combination is (lower member's partial) op (higher member's
// partial), computed by both partners on the same operands, so every
// member ends with the same bits.
#include <cstring>

#include "core/collectives/internal.h"
#include "core/collectives/reduce.h"

namespace hvd::collectives::internal {
namespace {

// The member at position `v` of the p that double (r pairs folded first).
int MemberAt(int v, int r) { return v < r ? 2 * v + 1 : v + r; }

class Doubling {
 public:
  Doubling(transport::Context& context, const Group& group, char* data,
           size_t count, DataType dtype, ReduceOp op,
           const CollectiveOptions& options)
      : context_(context),
        group_(group),
        data_(data),
        count_(count),
        bytes_(count * DataTypeSize(dtype)),
        dtype_(dtype),
        op_(op),
        limits_(LimitsOf(options)),
        scratch_(bytes_) {}

  // Waits for every request; on failure keeps the scratch they may write.
  absl::Status Finish(std::vector<RequestPtr> requests) {
    absl::Status status = WaitAll(requests, limits_);
    if (!status.ok()) scratch_.AbandonIfPending(requests);
    return status;
  }
  absl::Status SendTo(int member) {
    std::vector<RequestPtr> requests;
    requests.push_back(context_.Send(group_.ranks[member], data_, bytes_));
    return Finish(std::move(requests));
  }
  absl::Status RecvFrom(int member, char* into) {
    std::vector<RequestPtr> requests;
    requests.push_back(context_.Recv(group_.ranks[member], into, bytes_));
    return Finish(std::move(requests));
  }
  // Swaps buffers with `member` and combines, the lower member's first.
  absl::Status ExchangeWith(int member) {
    std::vector<RequestPtr> requests;
    requests.push_back(
        context_.Recv(group_.ranks[member], scratch_.data(), bytes_));
    requests.push_back(context_.Send(group_.ranks[member], data_, bytes_));
    if (absl::Status s = Finish(std::move(requests)); !s.ok()) return s;
    Combine(/*theirs_first=*/member < group_.index);
    return absl::OkStatus();
  }
  // data = theirs op data, or data op theirs.
  void Combine(bool theirs_first) {
    if (theirs_first) {
      Reduce(scratch_.data(), data_, count_, dtype_, op_);
      std::memcpy(data_, scratch_.data(), bytes_);
    } else {
      Reduce(data_, scratch_.data(), count_, dtype_, op_);
    }
  }
  char* scratch() { return scratch_.data(); }

 private:
  transport::Context& context_;
  const Group& group_;
  char* const data_;
  const size_t count_;
  const size_t bytes_;
  const DataType dtype_;
  const ReduceOp op_;
  const transport::WaitLimits limits_;
  Scratch scratch_;
};

}  // namespace

absl::Status AllreduceDoubling(transport::Context& context, const Group& group,
                               void* data, size_t count, DataType dtype,
                               ReduceOp op, const CollectiveOptions& options) {
  const int n = group.size();
  const int me = group.index;
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int r = n - p;
  Doubling doubling(context, group, static_cast<char*>(data), count, dtype, op,
                    options);
  if (me < 2 * r && me % 2 == 0) {
    // Folded out: the odd neighbour stands in, and sends the result back.
    if (absl::Status s = doubling.SendTo(me + 1); !s.ok()) return s;
    return doubling.RecvFrom(me + 1, static_cast<char*>(data));
  }
  if (me < 2 * r) {
    if (absl::Status s = doubling.RecvFrom(me - 1, doubling.scratch());
        !s.ok()) {
      return s;
    }
    doubling.Combine(/*theirs_first=*/true);
  }
  const int v = me < 2 * r ? me / 2 : me - r;
  for (int mask = 1; mask < p; mask <<= 1) {
    if (absl::Status s = doubling.ExchangeWith(MemberAt(v ^ mask, r));
        !s.ok()) {
      return s;
    }
  }
  Postscale(data, count, dtype, options.postscale, options.divisor);
  if (me < 2 * r) return doubling.SendTo(me - 1);
  return absl::OkStatus();
}

}  // namespace hvd::collectives::internal
