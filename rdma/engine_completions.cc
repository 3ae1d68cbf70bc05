// The receiving half of the engine: the progress thread, completions,
// control messages and the handshake.
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/transport/tcp/handshake.h"
#include "core/transport/transport.h"
#include "rdma/engine.h"

namespace hvd::rdma {
namespace {

using transport::tcp_internal::HelloReply;

// How long the progress thread sleeps in fi_cq_sread before it looks at
// timers (hello retries) and queued posts again.
constexpr int kPollMs = 2;
constexpr absl::Duration kHelloRetry = absl::Milliseconds(50);

}  // namespace

void Engine::ProgressLoop() {
  fi_cq_data_entry entries[16];
  while (!stopping_.load()) {
    const ssize_t n =
        fabric_->cq_waitable()
            ? fi_cq_sread(fabric_->cq(), entries, 16, nullptr, kPollMs)
            : fi_cq_read(fabric_->cq(), entries, 16);
    {
      absl::MutexLock lock(&mu_);
      if (n > 0) {
        for (ssize_t i = 0; i < n; ++i) OnCompletion(entries[i]);
      } else if (n == -FI_EAVAIL) {
        fi_cq_err_entry err = {};
        if (fi_cq_readerr(fabric_->cq(), &err, 0) == 1) OnError(err);
      }
      retry_ = false;
      Pump();
    }
    if (n <= 0 && !fabric_->cq_waitable()) absl::SleepFor(absl::Microseconds(20));
  }
}

void Engine::RepostReceive(Slot* slot) {
  if (shut_down_ && stopping_.load()) return;
  const ssize_t rc = fi_recv(fabric_->ep(), slot->buf, kControlBytes,
                             slot->desc, FI_ADDR_UNSPEC, &slot->fi);
  if (rc != 0) {
    FailLocked(absl::UnavailableError(
        absl::StrCat("rank ", rank_, ": ", FiError("fi_recv", rc))));
  }
}

void Engine::OnCompletion(const fi_cq_data_entry& entry) {
  auto* slot = static_cast<Slot*>(entry.op_context);
  if (entry.flags & FI_REMOTE_WRITE) {
    if (entry.flags & FI_REMOTE_CQ_DATA) OnRemoteWrite(entry.data);
    // FI_RX_CQ_DATA providers spend a receive buffer on the data.
    if (slot != nullptr && slot->kind == CtxKind::kRecvSlot)
      RepostReceive(slot);
    return;
  }
  if (slot == nullptr) return;
  switch (slot->kind) {
    case CtxKind::kRecvSlot:
      OnControl(slot->buf, entry.len);
      RepostReceive(slot);
      return;
    case CtxKind::kSendSlot:
      free_tx_.push_back(slot);
      if (slot->type == MsgType::kPing) peers_[slot->peer].ping_in_flight = false;
      return;
    case CtxKind::kWrite:
      OnWriteDone(reinterpret_cast<WriteCtx*>(entry.op_context));
      return;
  }
}

void Engine::OnError(const fi_cq_err_entry& err) {
  char prov[256] = {};
  fi_cq_strerror(fabric_->cq(), err.prov_errno, err.err_data, prov,
                 sizeof(prov));
  std::string what = FiErrorText(err.err);
  if (prov[0] != '\0') absl::StrAppend(&what, " (", prov, ")");
  auto* slot = static_cast<Slot*>(err.op_context);
  if (slot == nullptr) {
    return FailLocked(absl::UnavailableError(
        absl::StrCat("rank ", rank_, ": RDMA completion error: ", what)));
  }
  switch (slot->kind) {
    case CtxKind::kRecvSlot:
      if (err.err == FI_ECANCELED) return;
      return FailLocked(absl::UnavailableError(
          absl::StrCat("rank ", rank_, ": RDMA receive failed: ", what)));
    case CtxKind::kSendSlot: {
      free_tx_.push_back(slot);
      Peer& p = peers_[slot->peer];
      if (slot->type == MsgType::kHello) {
        // Tried again until the handshake's deadline (CheckContacts).
        p.hello_in_flight = false;
        p.hello_due = absl::Now() + kHelloRetry;
        p.last_error = what;
        return;
      }
      if (slot->type == MsgType::kAbort || slot->type == MsgType::kBye) return;
      if (slot->type == MsgType::kPing) {
        return FailLocked(absl::UnavailableError(
            absl::StrCat("rank ", rank_, ": connection to ", Who(slot->peer),
                         " lost: ", what)));
      }
      return FailLocked(absl::UnavailableError(absl::StrCat(
          "rank ", rank_, ": RDMA send to ", Who(slot->peer),
          " failed: ", what)));
    }
    case CtxKind::kWrite: {
      auto* ctx = reinterpret_cast<WriteCtx*>(err.op_context);
      const int peer = ctx->op->peer();
      writes_.erase(ctx);
      return FailLocked(absl::UnavailableError(absl::StrCat(
          "rank ", rank_, ": RDMA write to ", Who(peer), " failed: ", what)));
    }
  }
}

void Engine::OnControl(const char* buf, size_t len) {
  if (len < kHeaderBytes) return;
  const Header h = DecodeHeader(buf);
  const int peer = static_cast<int>(h.from);
  if (h.body_len + kHeaderBytes != len || peer >= size_ || peer == rank_)
    return;
  const char* body = buf + kHeaderBytes;
  if (h.type == MsgType::kHello) return OnHello(peer, body, h.body_len);
  if (h.type == MsgType::kHelloReply)
    return OnHelloReply(peer, body, h.body_len);
  Peer& p = peers_[peer];
  // Only a peer that showed the job token may use this rank's buffers. Its
  // Abort or Bye may overtake its Hello, and waits for it.
  if (!p.authenticated) {
    if (h.type == MsgType::kAbort || h.type == MsgType::kBye) {
      p.early_end.emplace(h, std::string(body, h.body_len));
    }
    return;
  }
  p.last_heard = absl::Now();
  p.credits += static_cast<int>(h.credits);
  OnMessage(peer, h, body);
}

void Engine::OnMessage(int peer, const Header& h, const char* body) {
  Peer& p = peers_[peer];
  switch (h.type) {
    case MsgType::kAdvert:
    case MsgType::kAdvertAny: {
      ReceivedCredited(peer);
      Advert advert;
      advert.any = h.type == MsgType::kAdvertAny;
      if (!advert.any &&
          !DecodeAdvert(body, h.body_len, &advert.total, &advert.chunks)) {
        return FailLocked(absl::InternalError(absl::StrCat(
            "rank ", rank_, ": malformed advert from ", Who(peer))));
      }
      p.adverts[h.seq] = std::move(advert);
      return StartSends(peer);
    }
    case MsgType::kEager: {
      ReceivedCredited(peer);
      auto it = p.receiving.find(h.seq);
      if (it == p.receiving.end()) break;
      std::shared_ptr<Op> op = it->second;
      p.receiving.erase(it);
      if (op->kind() == Op::Kind::kRecvAny) op->SetAnyLength(h.body_len);
      if (h.body_len > 0) std::memcpy(op->data(), body, h.body_len);
      op->set_bytes_done(h.body_len);
      return op->Complete(absl::OkStatus());
    }
    case MsgType::kLength:
      ReceivedCredited(peer);
      if (h.body_len != 8) break;
      return OnLength(peer, h.seq, DecodeU64(body));
    case MsgType::kMismatch: {
      ReceivedCredited(peer);
      auto it = p.receiving.find(h.seq);
      if (h.body_len != 8 || it == p.receiving.end()) break;
      return FailLocked(absl::InternalError(absl::StrCat(
          "rank ", rank_, ": message from ", Who(peer), " is ",
          DecodeU64(body), " bytes but the receive posted for it expects ",
          it->second->len(), " bytes")));
    }
    case MsgType::kCredit:
    case MsgType::kPing:
      return;
    case MsgType::kAbort:
      return FailLocked(absl::UnavailableError(
          absl::StrCat("rank ", rank_, ": ", Who(peer), " stopped: ",
                       absl::string_view(body, h.body_len))));
    case MsgType::kBye:
      return FailLocked(absl::UnavailableError(absl::StrCat(
          "rank ", rank_, ": connection to ", Who(peer), " closed by peer")));
    default:
      break;
  }
  FailLocked(absl::InternalError(
      absl::StrCat("rank ", rank_, ": unexpected control message (type ",
                   static_cast<int>(h.type), ", seq ", h.seq, ") from ",
                   Who(peer))));
}

void Engine::OnLength(int peer, uint16_t seq, uint64_t len) {
  Peer& p = peers_[peer];
  auto it = p.receiving.find(seq);
  if (it == p.receiving.end() || it->second->kind() != Op::Kind::kRecvAny) {
    return FailLocked(absl::InternalError(absl::StrCat(
        "rank ", rank_, ": length announced by ", Who(peer),
        " for a message no RecvAny awaits")));
  }
  if (len > transport::kMaxRecvAnyBytes) {
    return FailLocked(absl::InternalError(absl::StrCat(
        "rank ", rank_, ": control message from ", Who(peer), " claims ", len,
        " bytes, more than the ", transport::kMaxRecvAnyBytes, " allowed")));
  }
  Op& op = *it->second;
  op.SetAnyLength(len);
  if (absl::Status s = RegisterOp(op); !s.ok()) return FailLocked(s);
  std::vector<RemoteChunk> chunks;
  const size_t max = cache_->max_entry_bytes();
  for (size_t i = 0; i < op.regs.size(); ++i) {
    chunks.push_back({op.regs[i]->RemoteAddress(0), op.regs[i]->key(),
                      std::min(max, len - i * max)});
  }
  Queue(peer, MsgType::kAdvert, seq, EncodeAdvert(len, chunks));
}

void Engine::OnRemoteWrite(uint64_t data) {
  const int peer = ImmFrom(data);
  if (peer < 0 || peer >= size_ || peer == rank_) return;
  Peer& p = peers_[peer];
  if (!p.authenticated) return;
  p.last_heard = absl::Now();
  ReceivedCredited(peer);
  auto it = p.receiving.find(ImmSeq(data));
  if (it == p.receiving.end()) {
    return FailLocked(absl::InternalError(absl::StrCat(
        "rank ", rank_, ": RDMA write from ", Who(peer),
        " for a receive not posted (seq ", ImmSeq(data), ")")));
  }
  std::shared_ptr<Op> op = it->second;
  p.receiving.erase(it);
  op->set_bytes_done(op->len());
  op->Complete(absl::OkStatus());
}

void Engine::OnWriteDone(WriteCtx* ctx) {
  std::shared_ptr<Op> op = ctx->op;
  const bool last = ctx->last;
  const size_t piece = ctx->piece;
  writes_.erase(ctx);
  peers_[op->peer()].write_bytes_in_flight -= op->pieces[piece].len;
  if (op->done()) return;
  ++op->pieces_done;
  op->set_bytes_done(op->bytes_done() + op->pieces[piece].len);
  if (last) return FinishSend(op->peer(), op.get(), absl::OkStatus());
  PumpPeer(op->peer());
}

void Engine::ReceivedCredited(int peer) {
  Peer& p = peers_[peer];
  ++p.owed;
  const uint32_t threshold =
      static_cast<uint32_t>(std::max(1, options_.tuning.credits / 2));
  const bool queued =
      std::any_of(p.free.begin(), p.free.end(),
                  [](const OutMsg& m) { return m.type == MsgType::kCredit; });
  if (p.owed >= threshold && !queued) Queue(peer, MsgType::kCredit, 0, "");
}

void Engine::OnHello(int peer, const char* body, size_t len) {
  using transport::tcp_internal::kHelloFixedBytes;
  HelloReply reply = HelloReply::kBadProtocol;
  std::string name;
  if (len >= kHelloFixedBytes) {
    auto header = transport::tcp_internal::DecodeHelloHeader(
        reinterpret_cast<const unsigned char*>(body));
    if (header.ok() && header->size == static_cast<uint32_t>(size_) &&
        len > kHelloFixedBytes + header->token_bytes) {
      const size_t token_end = kHelloFixedBytes + header->token_bytes;
      name.assign(body + token_end, len - token_end);
      if (header->rank != static_cast<uint32_t>(peer)) {
        reply = HelloReply::kBadRank;
      } else if (!transport::tcp_internal::TokensEqual(
                     options_.token, absl::string_view(body + kHelloFixedBytes,
                                                       header->token_bytes))) {
        reply = HelloReply::kBadToken;
      } else {
        reply = HelloReply::kAccepted;
      }
    }
  }
  // The reply needs the peer's endpoint, which its hello carries (a name
  // that cannot be inserted is dropped: the hello proved nothing yet).
  if (name.empty() || !Insert(peer, name).ok()) return;
  Queue(peer, MsgType::kHelloReply, 0,
        std::string(1, static_cast<char>(reply)));
  Peer& p = peers_[peer];
  if (reply == HelloReply::kAccepted && !p.authenticated) {
    p.authenticated = true;
    if (Ready(p)) return Handshaken(peer);
  }
  PumpPeer(peer);
}

void Engine::OnHelloReply(int peer, const char* body, size_t len) {
  if (len != 1) return;
  Peer& p = peers_[peer];
  const auto reply = static_cast<HelloReply>(body[0]);
  if (reply == HelloReply::kAccepted) {
    if (p.accepted) return;
    p.accepted = true;
    if (Ready(p)) Handshaken(peer);
    return;
  }
  const std::string who =
      absl::StrCat("rank ", rank_, ": peer rank ", peer, " at ",
                   AddressLocked(peer), " refused ");
  FailLocked(
      reply == HelloReply::kBadToken
          ? absl::UnauthenticatedError(absl::StrCat(who, "the job token"))
          : absl::FailedPreconditionError(
                absl::StrCat(who, "this rank or job size")));
}

absl::Status Engine::HandshakeTimeout(int peer) const {
  const Peer& p = peers_[peer];
  std::string what = !p.authenticated ? "it sent no hello with the job token"
                                      : "it did not answer this rank's hello";
  if (!p.last_error.empty()) {
    absl::StrAppend(&what, " (last error: ", p.last_error, ")");
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "rank ", rank_, ": no RDMA connection to ", Who(peer), " within ",
      absl::FormatDuration(options_.connect_timeout), ": ", what));
}

}  // namespace hvd::rdma
