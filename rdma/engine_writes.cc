// The sending half of the engine: matching a send with its advert, cutting
// it into writes, and posting them within the peer's write window.
//
// Why a window: on one connection to a peer, a control message queues behind
// every byte already handed to the provider (the tcp provider's socket holds
// megabytes; a hardware queue pair runs its work requests in order too). An
// advert this rank owes a peer that is also receiving its writes then waits
// for all of them, and the peer's data to this rank stalls meanwhile. Writes
// are therefore posted with FI_DELIVERY_COMPLETE, and no more than
// RdmaTuning::write_window_bytes of them are undelivered per peer.
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "rdma/engine.h"

namespace hvd::rdma {

void Engine::StartSend(int peer, const std::shared_ptr<Op>& op,
                       Advert advert) {
  if (advert.any) {
    if (op->len() <= options_.tuning.eager_bytes) {
      Queue(peer, MsgType::kEager, op->seq, std::string(op->data(), op->len()));
      op->set_bytes_done(op->len());
      return FinishSend(peer, op.get(), absl::OkStatus());
    }
    // The receiver sizes its string, then advertises it under this seq.
    return Queue(peer, MsgType::kLength, op->seq, EncodeU64(op->len()));
  }
  op->started = true;
  if (advert.total != op->len()) {
    Queue(peer, MsgType::kMismatch, op->seq, EncodeU64(op->len()));
    return FinishSend(
        peer, op.get(),
        absl::InternalError(absl::StrCat(
            "rank ", rank_, ": message to ", Who(peer), " is ", op->len(),
            " bytes but the receive posted for it expects ", advert.total,
            " bytes")));
  }
  if (op->len() == 0) {
    Queue(peer, MsgType::kEager, op->seq, "");
    return FinishSend(peer, op.get(), absl::OkStatus());
  }
  if (absl::Status s = CutPieces(peer, *op, advert); !s.ok()) {
    return FailLocked(s);
  }
  PostWrites(peer, op);
}

absl::Status Engine::CutPieces(int peer, Op& op, const Advert& advert) {
  // Split at both sides' registration boundaries and at the piece size.
  const size_t max = cache_->max_entry_bytes();
  const size_t piece_max = std::max<size_t>(1, options_.tuning.write_piece_bytes);
  size_t off = 0, chunk = 0, chunk_off = 0;
  while (off < op.len() && chunk < advert.chunks.size()) {
    const RemoteChunk& rc = advert.chunks[chunk];
    const size_t local = off / max;
    const size_t n = std::min({max - off % max, op.len() - off,
                               rc.len - chunk_off, piece_max});
    op.pieces.push_back(
        {off, n, op.regs[local]->desc(), rc.addr + chunk_off, rc.key});
    off += n;
    chunk_off += n;
    if (chunk_off == rc.len) ++chunk, chunk_off = 0;
  }
  if (off == op.len()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("rank ", rank_, ": advert from ",
                                          Who(peer), " covers ", off, " of ",
                                          op.len(), " bytes"));
}

bool Engine::WindowAllows(const Peer& p, size_t len) const {
  const size_t window = options_.tuning.write_window_bytes;
  return window == 0 || p.write_bytes_in_flight == 0 ||
         p.write_bytes_in_flight + len <= window;
}

bool Engine::PostWrites(int peer, const std::shared_ptr<Op>& op) {
  Peer& p = peers_[peer];
  const size_t n = op->pieces.size();
  while (op->pieces_posted < n) {
    const bool last = op->pieces_posted + 1 == n;
    // The last write completes the receive: every earlier one must have
    // landed first (posting order suffices where the provider keeps it),
    // and it takes a credit.
    const bool earlier_pending = !ordered_writes_ && op->pieces_done + 1 < n;
    if (last && (earlier_pending || p.credits == 0)) return true;
    const Piece& piece = op->pieces[op->pieces_posted];
    // A full window holds back this peer's later sends too.
    if (!WindowAllows(p, piece.len)) return false;
    auto ctx = std::make_unique<WriteCtx>();
    ctx->op = op;
    ctx->piece = op->pieces_posted;
    ctx->last = last;
    const ssize_t rc = PostWrite(peer, *op, piece, last, &ctx->fi);
    if (rc == -FI_EAGAIN) {
      retry_ = true;
      return false;
    }
    if (rc != 0) {
      FailLocked(absl::UnavailableError(absl::StrCat(
          "rank ", rank_, ": writing to ", Who(peer), ": ",
          FiError(last ? "fi_writemsg (with data)" : "fi_writemsg", rc))));
      return false;
    }
    if (last) --p.credits;
    p.write_bytes_in_flight += piece.len;
    WriteCtx* raw = ctx.get();
    writes_[raw] = std::move(ctx);
    ++op->pieces_posted;
  }
  return true;
}

ssize_t Engine::PostWrite(int peer, const Op& op, const Piece& piece,
                          bool last, void* context) {
  iovec iov = {op.data() + piece.offset, piece.len};
  void* desc = piece.desc;
  fi_rma_iov rma = {piece.remote_addr, piece.len, piece.key};
  fi_msg_rma msg = {};
  msg.msg_iov = &iov;
  msg.desc = &desc;
  msg.iov_count = 1;
  msg.addr = peers_[peer].fi_addr;
  msg.rma_iov = &rma;
  msg.rma_iov_count = 1;
  msg.context = context;
  uint64_t flags = FI_COMPLETION | FI_DELIVERY_COMPLETE;
  if (last) {
    msg.data = ImmData(rank_, op.seq);
    flags |= FI_REMOTE_CQ_DATA;
  }
  return fi_writemsg(fabric_->ep(), &msg, flags);
}

}  // namespace hvd::rdma
