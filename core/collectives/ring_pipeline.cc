#include "core/collectives/ring_pipeline.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "core/collectives/reduce.h"

namespace hvd::collectives::internal {
namespace {

// at[i] = own[i] op received[i] (own == at in place), then the postscale
// and divisor if `scale`: one received chunk, or a piece of one.
void CombineChunk(char* at, const char* own, const char* received,
                  size_t count, DataType dtype, ReduceOp op, bool scale,
                  double postscale, int divisor) {
  if (own != at) {
    ReduceInto(at, own, received, count, dtype, op);
    if (scale) Postscale(at, count, dtype, postscale, divisor);
  } else if (scale) {
    ReduceAndScale(at, received, count, dtype, op, postscale, divisor);
  } else {
    Reduce(at, received, count, dtype, op);
  }
}

// Runs one RingPlan; see the header. Deadlock freedom: the only blocking
// calls are waits on the oldest unprocessed receive, the final waits on
// sends, and a wait on a send whose bytes a store-in-place receive will
// overwrite. The last happens only when no receive is outstanding, i.e. after
// every earlier chunk was processed and forwarded; in an allreduce that means
// the whole reduce-scatter stream went out, and next consumes it without
// waiting for anything of ours.
class RingRunner {
 public:
  RingRunner(transport::Context& context, int next, int prev,
             const DataView& data, const RingPlan& plan, DataType dtype,
             ReduceOp op, const CollectiveOptions& options,
             Scratch* data_scratch, const DataView* source = nullptr)
      : context_(context),
        next_(next),
        prev_(prev),
        data_(data),
        source_(source != nullptr ? *source : data),
        plan_(plan),
        dtype_(dtype),
        op_(op),
        elem_size_(DataTypeSize(dtype)),
        limits_(LimitsOf(options)),
        postscale_(options.postscale),
        divisor_(options.divisor),
        scales_(options.scales()),
        data_scratch_(data_scratch),
        reduce_on_receive_(context.ReducesOnReceive(prev)),
        scratch_(reduce_on_receive_ ? 0 : plan.slot_bytes * plan.num_slots),
        recvs_(plan.recvs.size()) {}

  absl::Status Run() {
    absl::Status status = RunSteps();
    if (!status.ok()) {
      scratch_.AbandonIfPending(recvs_);
      if (data_scratch_ != nullptr) {
        data_scratch_->AbandonIfPending(recvs_);
        data_scratch_->AbandonIfPending(sends_);
      }
    }
    return status;
  }

 private:
  absl::Status RunSteps() {
    // Receives first: a transport that tells the sender where to write (RDMA)
    // then has its adverts on the wire ahead of this rank's own data.
    absl::Status posted = PostAhead();
    if (!posted.ok()) return posted;
    for (const Span& chunk : plan_.initial_sends) {
      sends_.push_back(context_.Send(next_, source_.At(chunk.offset),
                                     chunk.bytes));
    }
    while (done_ < plan_.recvs.size()) {
      absl::Status status = PostAhead();
      if (!status.ok()) return status;
      if (recvs_[done_] == nullptr) {  // A plan whose dependencies loop.
        return absl::InternalError(absl::StrCat(
            "ring plan cannot post receive ", done_, " of ", plan_.recvs.size(),
            ": it waits for send ", plan_.recvs[done_].wait_send, " of ",
            sends_.size(), " posted"));
      }
      status = Wait(*recvs_[done_], limits_);
      if (!status.ok()) return status;
      Process(plan_.recvs[done_]);
      ++done_;
    }
    return WaitAll(sends_, limits_);
  }

  void Send(const Span& chunk) {
    sends_.push_back(context_.Send(next_, data_.At(chunk.offset), chunk.bytes));
  }

  char* SlotAddress(int slot) {
    return scratch_.data() + static_cast<size_t>(slot) * plan_.slot_bytes;
  }

  // Posts receives up to kPipelineDepth ahead of the oldest unprocessed one.
  absl::Status PostAhead() {
    while (posted_ < plan_.recvs.size() && posted_ < done_ + kPipelineDepth) {
      const RingRecv& recv = plan_.recvs[posted_];
      if (recv.wait_send >= 0) {
        if (static_cast<size_t>(recv.wait_send) >= sends_.size()) break;
        transport::Request& send = *sends_[recv.wait_send];
        if (!send.Done()) {
          if (posted_ > done_) break;  // Retry once more has been processed.
          absl::Status status = Wait(send, limits_);
          if (!status.ok()) return status;
        }
      }
      const size_t bytes = recv.span.bytes;
      if (recv.reduce && reduce_on_receive_) {
        recvs_[posted_] = context_.RecvReduce(prev_, bytes, ReducerFor(recv));
      } else if (recv.reduce) {
        recvs_[posted_] = context_.Recv(prev_, SlotAddress(recv.slot), bytes);
      } else if (recv.stream) {
        recvs_[posted_] = context_.RecvStreaming(
            prev_, data_.At(recv.span.offset), bytes);
      } else {
        recvs_[posted_] =
            context_.Recv(prev_, data_.At(recv.span.offset), bytes);
      }
      ++posted_;
    }
    return absl::OkStatus();
  }

  // The reduction of a `recv.reduce` chunk, as the transport hands its
  // received bytes over (in pieces at the chunk's `offset`).
  transport::ReceiveReducer ReducerFor(const RingRecv& recv) {
    return [at = data_.At(recv.span.offset),
            own = source_.At(recv.span.offset), dtype = dtype_, op = op_,
            elem_size = elem_size_, scale = Scales(recv),
            postscale = postscale_, divisor = divisor_](
               size_t offset, const char* piece, size_t bytes) {
      CombineChunk(at + offset, own + offset, piece, bytes / elem_size,
                   dtype, op, scale, postscale, divisor);
    };
  }

  bool Scales(const RingRecv& recv) const { return recv.scale && scales_; }

  void Process(const RingRecv& recv) {
    const bool scale = Scales(recv);
    char* at = data_.At(recv.span.offset);
    const size_t count = recv.span.bytes / elem_size_;
    if (recv.reduce && !reduce_on_receive_) {
      // Out of place, this rank's own operand is still in the source.
      CombineChunk(at, source_.At(recv.span.offset), SlotAddress(recv.slot),
                   count, dtype_, op_, scale, postscale_, divisor_);
    } else if (!recv.reduce && scale) {
      Postscale(at, count, dtype_, postscale_, divisor_);
    }
    if (recv.forward) Send(recv.span);
  }

  transport::Context& context_;
  const int next_;
  const int prev_;
  const DataView& data_;  // Chunks never cross its cuts.
  const DataView& source_;  // data_ itself when in place; only read.
  const RingPlan& plan_;
  const DataType dtype_;
  const ReduceOp op_;
  const size_t elem_size_;
  const transport::WaitLimits limits_;
  const double postscale_;
  const int divisor_;
  const bool scales_;  // options.scales()
  Scratch* const data_scratch_;
  // Reduced chunks are combined straight out of the transport's buffers
  // (RecvReduce) instead of received into scratch slots first.
  const bool reduce_on_receive_;
  Scratch scratch_;  // kPipelineDepth slots for chunks to be reduced.
  std::vector<RequestPtr> sends_;  // In posting order.
  std::vector<RequestPtr> recvs_;  // Indexed like plan_.recvs.
  size_t posted_ = 0;
  size_t done_ = 0;
};

}  // namespace

RingPlan BuildRingPlan(Span first_send, const std::vector<RingStep>& steps,
                       bool forward_last, size_t chunk_bytes, size_t elem_size,
                       const std::vector<size_t>& cuts) {
  RingPlan plan;
  std::map<size_t, int> send_at_offset;  // Latest send from each offset.
  int num_sends = 0;
  for (const Span& chunk :
       ChunksBetween(first_send, chunk_bytes, elem_size, cuts)) {
    plan.initial_sends.push_back(chunk);
    send_at_offset[chunk.offset] = num_sends++;
  }
  int num_reduced = 0;
  for (size_t s = 0; s < steps.size(); ++s) {
    const bool forward = forward_last || s + 1 < steps.size();
    for (const Span& chunk :
         ChunksBetween(steps[s].recv, chunk_bytes, elem_size, cuts)) {
      RingRecv recv{chunk, steps[s].reduce, steps[s].scale, forward};
      recv.stream = steps[s].stream && !recv.reduce && !forward;
      if (recv.reduce) {
        recv.slot = num_reduced++ % kPipelineDepth;
        plan.slot_bytes = std::max(plan.slot_bytes, chunk.bytes);
      } else if (auto it = send_at_offset.find(chunk.offset);
                 it != send_at_offset.end()) {
        recv.wait_send = it->second;
      }
      plan.recvs.push_back(recv);
      if (forward) send_at_offset[chunk.offset] = num_sends++;
    }
  }
  plan.num_slots = std::min(num_reduced, kPipelineDepth);
  return plan;
}

absl::Status RunRingPlan(transport::Context& context, int next, int prev,
                         char* data, const RingPlan& plan, DataType dtype,
                         ReduceOp op, const CollectiveOptions& options,
                         Scratch* data_scratch) {
  const DataView view(data);
  return RingRunner(context, next, prev, view, plan, dtype, op, options,
                    data_scratch)
      .Run();
}

absl::Status RunRingPlan(transport::Context& context, int next, int prev,
                         const DataView& data, const RingPlan& plan,
                         DataType dtype, ReduceOp op,
                         const CollectiveOptions& options,
                         const DataView* source, Scratch* data_scratch) {
  return RingRunner(context, next, prev, data, plan, dtype, op, options,
                    data_scratch, source)
      .Run();
}

Span ReduceScatterFirstSend(const std::vector<Span>& blocks, int index) {
  const int n = static_cast<int>(blocks.size());
  return blocks[Mod(index - 1, n)];
}

std::vector<RingStep> ReduceScatterSteps(const std::vector<Span>& blocks,
                                         int index) {
  const int n = static_cast<int>(blocks.size());
  std::vector<RingStep> steps;
  for (int s = 0; s + 1 < n; ++s) {
    steps.push_back({blocks[Mod(index - s - 2, n)], /*reduce=*/true});
  }
  return steps;
}

Span AllgatherFirstSend(const std::vector<Span>& blocks, int index) {
  return blocks[index];
}

std::vector<RingStep> AllgatherSteps(const std::vector<Span>& blocks,
                                     int index) {
  const int n = static_cast<int>(blocks.size());
  std::vector<RingStep> steps;
  for (int s = 0; s + 1 < n; ++s) {
    steps.push_back({blocks[Mod(index - s - 1, n)], /*reduce=*/false});
  }
  return steps;
}

}  // namespace hvd::collectives::internal
