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

#include "core/collectives/doubling_layout.h"
#include "core/collectives/internal.h"
#include "core/collectives/reduce.h"

namespace hvd::collectives::internal {
namespace {

// Works on a copy of the caller's buffer in its own scratch, with room for
// the partner's: a failure leaves requests posted on the scratch only
// (kept for good then), never on the caller's memory.
class Doubling {
 public:
  Doubling(transport::Context& context, const Group& group, size_t count,
           DataType dtype, ReduceOp op, const CollectiveOptions& options)
      : context_(context),
        group_(group),
        count_(count),
        bytes_(count * DataTypeSize(dtype)),
        dtype_(dtype),
        op_(op),
        limits_(LimitsOf(options)),
        scratch_(2 * bytes_) {}

  char* work() { return scratch_.data(); }
  char* theirs() { return scratch_.data() + bytes_; }

  absl::Status SendTo(int member) {
    std::vector<RequestPtr> requests;
    requests.push_back(context_.Send(group_.ranks[member], work(), bytes_));
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
    requests.push_back(context_.Recv(group_.ranks[member], theirs(), bytes_));
    requests.push_back(context_.Send(group_.ranks[member], work(), bytes_));
    if (absl::Status s = Finish(std::move(requests)); !s.ok()) return s;
    Combine(/*theirs_first=*/member < group_.index);
    return absl::OkStatus();
  }
  // work = theirs op work, or work op theirs.
  void Combine(bool theirs_first) {
    if (theirs_first) {
      Reduce(theirs(), work(), count_, dtype_, op_);
      std::memcpy(work(), theirs(), bytes_);
    } else {
      Reduce(work(), theirs(), count_, dtype_, op_);
    }
  }

 private:
  // Waits for every request; on failure keeps the scratch they may use.
  absl::Status Finish(std::vector<RequestPtr> requests) {
    absl::Status status = WaitAll(requests, limits_);
    if (!status.ok()) scratch_.AbandonIfPending(requests);
    return status;
  }

  transport::Context& context_;
  const Group& group_;
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
  const int me = group.index;
  const DoublingLayout layout(group.size());
  const size_t bytes = count * DataTypeSize(dtype);
  Doubling doubling(context, group, count, dtype, op, options);
  std::memcpy(doubling.work(), data, bytes);
  absl::Status status;
  if (layout.FoldedOut(me)) {
    // The odd neighbour stands in, and sends the result back.
    status = doubling.SendTo(me + 1);
    if (status.ok()) status = doubling.RecvFrom(me + 1, doubling.work());
  } else {
    if (layout.FoldedIn(me)) {
      status = doubling.RecvFrom(me - 1, doubling.theirs());
      if (status.ok()) doubling.Combine(/*theirs_first=*/true);
    }
    const int v = layout.Position(me);
    for (int mask = 1; status.ok() && mask < layout.p; mask <<= 1) {
      status = doubling.ExchangeWith(layout.Member(v ^ mask));
    }
    if (status.ok()) {
      Postscale(doubling.work(), count, dtype, options.postscale,
                options.divisor);
      if (layout.FoldedIn(me)) status = doubling.SendTo(me - 1);
    }
  }
  if (status.ok()) std::memcpy(data, doubling.work(), bytes);
  return status;
}

}  // namespace hvd::collectives::internal
