#include "core/transport/tcp/pair.h"

#include <algorithm>
#include <array>
#include <span>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/transport/tcp/address.h"
#include "core/transport/transport.h"

namespace hvd::transport::tcp_internal {
namespace {

namespace asio = boost::asio;
using boost::system::error_code;

// Asio gathers at most this many buffers per sendmsg.
constexpr size_t kMaxIov = 64;

bool WouldBlock(const error_code& ec) {
  return ec == asio::error::would_block || ec == asio::error::try_again;
}

bool PeerGone(const error_code& ec) {
  return ec == asio::error::eof || ec == asio::error::connection_reset ||
         ec == asio::error::broken_pipe;
}

}  // namespace

Pair::Pair(int rank, int peer, asio::io_context& io, PairObserver* observer)
    : rank_(rank), peer_(peer), observer_(observer), socket_(io) {}

std::string Pair::address() const {
  absl::MutexLock lock(&address_mu_);
  return address_;
}

Pair::~Pair() { Close(absl::CancelledError("pair destroyed")); }

void Pair::Attach(asio::ip::tcp::socket socket) {
  absl::Status failure;
  {
    absl::MutexLock send_lock(&send_.mu);
    absl::MutexLock recv_lock(&recv_.mu);
    error_code ignored;
    if (connected_.load() || send_.closed) {
      socket.close(ignored);
      return;
    }
    {
      absl::MutexLock lock(&address_mu_);
      const asio::ip::tcp::endpoint far = socket.remote_endpoint(ignored);
      address_ = ignored ? std::string("unknown address") : EndpointString(far);
    }
    socket_ = std::move(socket);
    socket_.non_blocking(true, ignored);
    connected_.store(true);
    if (!send_.error.ok()) {
      // Failed before the peer connected: tell it why.
      SendStopNotice(send_.error.message());
      socket_.shutdown(asio::socket_base::shutdown_both, ignored);
      return;
    }
    // Waiters may be asleep on what was posted: the io thread takes over.
    failure = DoSend();
    if (failure.ok()) WatchSend();
    if (failure.ok()) failure = DoRecv();
    if (failure.ok()) WatchRecv();
  }
  if (!failure.ok()) observer_->OnPairFailure(failure);
}

void Pair::NoteFirstPost() {
  if (connected_.load() || first_post_seen_.exchange(true)) return;
  observer_->OnFirstPost(peer_);
}

absl::Status Pair::IoError(absl::string_view what, const error_code& ec) const {
  if (PeerGone(ec)) {
    return absl::UnavailableError(absl::StrCat(
        "rank ", rank_, ": connection to rank ", peer_, " (", address(),
        ") closed by peer",
        ec == asio::error::eof ? "" : absl::StrCat(" (", ec.message(), ")")));
  }
  return absl::UnavailableError(absl::StrCat("rank ", rank_, ": ", what,
                                             " rank ", peer_, " (", address(),
                                             ") failed: ", ec.message()));
}

void Pair::FailLocked(Direction& d, const absl::Status& status) {
  if (d.error.ok()) d.error = status;
  for (auto& op : d.queue) op->Complete(d.error);
  d.queue.clear();
}

// ---- sending --------------------------------------------------------------

void Pair::PostSend(std::shared_ptr<Op> op) {
  absl::Status failure;
  {
    absl::MutexLock lock(&send_.mu);
    if (!send_.error.ok()) {
      op->Complete(send_.error);
      return;
    }
    send_.queue.push_back(std::move(op));
    // Ops queued behind a blocked one are written by whoever unblocks it.
    if (send_.queue.size() == 1) failure = DoSend();
    if (failure.ok()) WatchSend();
  }
  if (!failure.ok()) observer_->OnPairFailure(failure);
  NoteFirstPost();
}

absl::Status Pair::DoSend() {
  if (!connected_.load()) return absl::OkStatus();
  while (!send_.queue.empty() && !send_.closed) {
    std::array<asio::const_buffer, kMaxIov> bufs;
    size_t n = 0;
    for (const auto& op : send_.queue) {
      if (n + 2 > kMaxIov) break;
      if (op->header_done < kHeaderBytes) {
        bufs[n++] = asio::buffer(op->header + op->header_done,
                                 kHeaderBytes - op->header_done);
      }
      if (op->payload_done() < op->len()) {
        bufs[n++] = asio::buffer(op->payload() + op->payload_done(),
                                 op->len() - op->payload_done());
      }
    }
    error_code ec;
    const std::span<asio::const_buffer> iov(bufs.data(), n);
    size_t wrote = socket_.write_some(iov, ec);
    if (WouldBlock(ec)) return absl::OkStatus();
    if (ec) {
      absl::Status failure = IoError("sending to", ec);
      observer_->OnPairFailing(failure);
      FailLocked(send_, failure);
      return failure;
    }
    // A short write means the socket buffer is full: stop after accounting
    // instead of paying for a write that would block.
    const bool full = wrote < asio::buffer_size(iov);
    while (!send_.queue.empty()) {
      Op& op = *send_.queue.front();
      const size_t h = std::min(wrote, kHeaderBytes - op.header_done);
      op.header_done += h;
      wrote -= h;
      const size_t p = std::min(wrote, op.len() - op.payload_done());
      op.AddPayloadDone(p);
      wrote -= p;
      if (op.header_done < kHeaderBytes || op.payload_done() < op.len()) break;
      op.Complete(absl::OkStatus());
      send_.queue.pop_front();
    }
    if (full) break;
  }
  return absl::OkStatus();
}

void Pair::WatchSend() {
  if (send_.watched || send_.closed || send_.queue.empty() ||
      !connected_.load()) {
    return;
  }
  send_.watched = true;
  socket_.async_wait(asio::socket_base::wait_write,
                     [this](const error_code& ec) { OnWritable(ec); });
}

void Pair::OnWritable(const error_code& ec) {
  absl::Status failure;
  {
    absl::MutexLock lock(&send_.mu);
    send_.watched = false;
    if (send_.closed || ec == asio::error::operation_aborted) return;
    failure = DoSend();
    if (failure.ok()) WatchSend();
  }
  if (!failure.ok()) observer_->OnPairFailure(failure);
}

// ---- receiving ------------------------------------------------------------

void Pair::PostRecv(std::shared_ptr<Op> op, bool watch) {
  absl::Status failure;
  {
    absl::MutexLock lock(&recv_.mu);
    if (!recv_.error.ok()) {
      op->Complete(recv_.error);
      return;
    }
    recv_.queue.push_back(std::move(op));
    // Data may already be waiting; a lazy receive is read by its waiter.
    if (watch && recv_.queue.size() == 1) failure = DoRecv();
    if (failure.ok()) {
      if (watch) {
        WatchRecv();
      } else if (!recv_.watched && !recv_.queue.empty()) {
        needs_watch_.store(true);
        observer_->OnUnwatchedRecv();
      }
    }
  }
  if (!failure.ok()) observer_->OnPairFailure(failure);
  NoteFirstPost();
}

absl::Status Pair::CheckHeader(Op& op, size_t payload_got) {
  const uint64_t len = LoadLE64(op.header);
  if (len & kStopNoticeFlag) {
    return ReadStopNotice(op, len & ~kStopNoticeFlag, payload_got);
  }
  if (len > kMaxMessageBytes) {
    return absl::InternalError(absl::StrCat(
        "rank ", rank_, ": message header from rank ", peer_, " (", address(),
        ") claims ", len, " bytes; the stream is corrupt"));
  }
  if (op.kind() == Op::Kind::kRecvAny) {
    if (len > kMaxRecvAnyBytes) {
      return absl::InternalError(absl::StrCat(
          "rank ", rank_, ": control message header from rank ", peer_, " (",
          address(), ") claims ", len, " bytes, more than the ",
          kMaxRecvAnyBytes, " allowed; the stream is corrupt"));
    }
    op.SetAnyLength(len);
    return absl::OkStatus();
  }
  if (len == op.len()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(
      "rank ", rank_, ": message from rank ", peer_, " (", address(), ") is ",
      len, " bytes but the receive posted for it expects ", op.len(),
      " bytes"));
}

namespace {

// A reason as it may be printed: what a corrupt stream passes off as one
// must not put control bytes (terminal escapes) into the job's output.
std::string Printable(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
      absl::StrAppend(&out, "\\x", absl::Hex(c, absl::kZeroPad2));
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

}  // namespace

// The peer wrote the reason in one go right behind the header, so it is
// (nearly always) all in the socket already; a part that is not is left out.
absl::Status Pair::ReadStopNotice(const Op& op, size_t len,
                                  size_t payload_got) {
  len = std::min(len, kMaxNoticeBytes);
  std::string reason;
  if (payload_got > 0) reason.assign(op.payload(), std::min(payload_got, len));
  while (reason.size() < len) {
    char buf[kMaxNoticeBytes];
    error_code ec;
    const size_t n =
        socket_.read_some(asio::buffer(buf, len - reason.size()), ec);
    if (ec) break;
    reason.append(buf, n);
  }
  return absl::UnavailableError(absl::StrCat("rank ", rank_, ": rank ", peer_,
                                             " (", address(),
                                             ") stopped: ", Printable(reason)));
}

absl::Status Pair::DoRecv() {
  if (!connected_.load()) return absl::OkStatus();
  while (!recv_.queue.empty() && !recv_.closed) {
    Op& op = *recv_.queue.front();
    std::array<asio::mutable_buffer, 2> bufs;
    size_t n = 0;
    const bool header_pending = op.header_done < kHeaderBytes;
    if (header_pending) {
      bufs[n++] = asio::buffer(op.header + op.header_done,
                               kHeaderBytes - op.header_done);
      // Read the payload in the same call, trusting it has the posted
      // length; if not, the header check fails the pair anyway.
      if (op.kind() == Op::Kind::kRecv && op.len() > 0) {
        bufs[n++] = asio::buffer(op.payload(), op.len());
      }
    } else {
      bufs[n++] = asio::buffer(op.payload() + op.payload_done(),
                               op.len() - op.payload_done());
    }
    error_code ec;
    const std::span<asio::mutable_buffer> iov(bufs.data(), n);
    size_t got = socket_.read_some(iov, ec);
    if (WouldBlock(ec)) return absl::OkStatus();
    // A short read means the socket is drained (for now).
    const bool drained = got < asio::buffer_size(iov);
    absl::Status failure;
    if (ec) failure = IoError("receiving from", ec);
    if (failure.ok() && header_pending) {
      const size_t h = std::min(got, kHeaderBytes - op.header_done);
      op.header_done += h;
      got -= h;
      if (op.header_done == kHeaderBytes) failure = CheckHeader(op, got);
    }
    if (!failure.ok()) {
      observer_->OnPairFailing(failure);
      FailLocked(recv_, failure);
      return failure;
    }
    op.AddPayloadDone(got);
    if (op.header_done == kHeaderBytes && op.payload_done() == op.len()) {
      op.Complete(absl::OkStatus());
      recv_.queue.pop_front();
    }
    if (drained) break;
  }
  return absl::OkStatus();
}

void Pair::WatchRecv() {
  if (recv_.watched || recv_.closed || recv_.queue.empty() ||
      !connected_.load()) {
    return;
  }
  recv_.watched = true;
  socket_.async_wait(asio::socket_base::wait_read,
                     [this](const error_code& ec) { OnReadable(ec); });
}

void Pair::OnReadable(const error_code& ec) {
  absl::Status failure;
  {
    absl::MutexLock lock(&recv_.mu);
    recv_.watched = false;
    if (recv_.closed || ec == asio::error::operation_aborted) return;
    failure = DoRecv();
    if (failure.ok()) WatchRecv();
  }
  if (!failure.ok()) observer_->OnPairFailure(failure);
}

// ---- shared ---------------------------------------------------------------

void Pair::Poll(const Op& op) {
  absl::Status failure;
  if (op.is_send()) {
    if (!send_.mu.TryLock()) return;
    failure = DoSend();
    send_.mu.Unlock();
  } else {
    if (!recv_.mu.TryLock()) return;
    failure = DoRecv();
    recv_.mu.Unlock();
  }
  if (!failure.ok()) observer_->OnPairFailure(failure);
}

void Pair::Watch() {
  {
    absl::MutexLock lock(&send_.mu);
    WatchSend();
  }
  absl::MutexLock lock(&recv_.mu);
  WatchRecv();
}

void Pair::Fail(const absl::Status& status) {
  absl::MutexLock send_lock(&send_.mu);
  absl::MutexLock recv_lock(&recv_.mu);
  // Within a half-written message a notice would corrupt the stream; then
  // the peer learns only that the connection closed.
  const bool between_messages =
      send_.error.ok() &&
      (send_.queue.empty() || send_.queue.front()->header_done == 0);
  FailLocked(send_, status);
  FailLocked(recv_, status);
  if (!send_.closed && connected_.load()) {
    if (between_messages) SendStopNotice(status.message());
    error_code ignored;
    socket_.shutdown(asio::socket_base::shutdown_both, ignored);
  }
}

void Pair::SendStopNotice(absl::string_view reason) {
  reason = reason.substr(0, kMaxNoticeBytes);
  std::string frame(kHeaderBytes, '\0');
  StoreLE64(kStopNoticeFlag | reason.size(),
            reinterpret_cast<unsigned char*>(frame.data()));
  frame.append(reason.data(), reason.size());
  // Best effort, never blocking: a full socket buffer takes part or none.
  error_code ignored;
  socket_.write_some(asio::buffer(frame), ignored);
}

void Pair::Close(const absl::Status& status) {
  absl::MutexLock send_lock(&send_.mu);
  absl::MutexLock recv_lock(&recv_.mu);
  FailLocked(send_, status);
  FailLocked(recv_, status);
  send_.closed = true;
  recv_.closed = true;
  error_code ignored;
  socket_.close(ignored);
}

}  // namespace hvd::transport::tcp_internal
