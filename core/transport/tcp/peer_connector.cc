#include "core/transport/tcp/peer_connector.h"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/common/logging.h"
#include "core/transport/tcp/handshake.h"
#include "core/transport/tcp/socket_options.h"

namespace hvd::transport::tcp_internal {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;

constexpr absl::Duration kInitialBackoff = absl::Milliseconds(10);
constexpr absl::Duration kMaxBackoff = absl::Milliseconds(500);
// Refused connections and accept errors: the first few are logged in full,
// then every kLogEvery-th with the count.
constexpr int64_t kLoggedInFull = 3;
constexpr int64_t kLogEvery = 1000;

std::chrono::nanoseconds ToChrono(absl::Duration d) {
  return absl::ToChronoNanoseconds(std::max(d, absl::ZeroDuration()));
}

std::string RemoteAddress(const tcp::socket& socket) {
  error_code ec;
  const tcp::endpoint remote = socket.remote_endpoint(ec);
  return ec ? std::string("unknown address") : EndpointString(remote);
}

}  // namespace

struct PeerConnector::Dialer {
  Dialer(asio::io_context& io, int peer,
         const std::vector<Endpoint>& candidates, std::string hello,
         absl::Time deadline)
      : peer(peer),
        candidates(candidates),
        deadline(deadline),
        timer(io),
        hello(std::move(hello)) {}

  const int peer;
  const std::vector<Endpoint>& candidates;
  const absl::Time deadline;
  size_t next = 0;  // index of the candidate being tried
  // Every candidate of this round so far refused the connection.
  bool all_refused = true;
  int attempt = 0;  // bumped to make handlers of earlier attempts stale
  bool timed_out = false;
  bool done = false;
  std::optional<tcp::socket> socket;
  asio::steady_timer timer;  // attempt timeout, then retry backoff
  const std::string hello;
  unsigned char reply = 0;
  std::string last_error;
  absl::Duration backoff = kInitialBackoff;
};

struct PeerConnector::Incoming {
  Incoming(asio::io_context& io, tcp::socket s)
      : socket(std::move(s)), address(RemoteAddress(socket)), timer(io) {}

  tcp::socket socket;
  const std::string address;
  asio::steady_timer timer;  // the handshake's deadline
  bool dropped = false;
  unsigned char fixed[kHelloFixedBytes] = {};
  HelloHeader header;
  std::string token;
  unsigned char reply = 0;
};

PeerConnector::PeerConnector(asio::io_context& io, tcp::acceptor acceptor,
                             Config config, Lookup lookup, Sink* sink)
    : io_(io),
      acceptor_(std::move(acceptor)),
      config_(std::move(config)),
      listen_address_([this] {
        error_code ec;
        const tcp::endpoint local = acceptor_.local_endpoint(ec);
        return ec ? std::string("unknown address") : EndpointString(local);
      }()),
      sink_(sink),
      lookups_(config_.rank, config_.connect_timeout, std::move(lookup),
               [this](int peer, absl::StatusOr<std::vector<Endpoint>> found) {
                 boost::asio::post(
                     io_, [this, peer, found = std::move(found)]() mutable {
                       OnLookedUp(peer, std::move(found));
                     });
               }) {
  candidates_.resize(config_.size);
  dialers_.resize(config_.size);
  connected_.resize(config_.size, false);
}

PeerConnector::~PeerConnector() { Close(); }

void PeerConnector::Start() {
  if (config_.size > 1) StartAccept();
}

void PeerConnector::Dial(int peer) {
  if (peer < config_.rank) {
    asio::post(io_, [this, peer] { StartDial(peer); });
    return;
  }
  asio::post(io_, [this, peer] {
    auto timer = std::make_shared<asio::steady_timer>(
        io_, ToChrono(config_.callback_delay));
    timer->async_wait([this, peer, timer](const error_code& e) {
      if (!e) StartDial(peer);
    });
  });
}

void PeerConnector::StartDial(int peer) {
  if (closed_ || peer < 0 || peer >= config_.size || peer == config_.rank ||
      dialers_[peer] != nullptr || connected_[peer]) {
    return;
  }
  if (!candidates_[peer]) {
    lookups_.Add(peer);
    return;
  }
  dialers_[peer] = std::make_unique<Dialer>(
      io_, peer, *candidates_[peer],
      EncodeHello(config_.rank, config_.size,
                  HelloProof(config_.token, config_.rank, peer, config_.size)),
      absl::Now() + config_.connect_timeout);
  Dialer& d = *dialers_[peer];
  if (d.candidates.empty()) {
    Fail(d, absl::InvalidArgumentError(
                absl::StrCat("rank ", config_.rank, ": rank ", peer,
                             " published no address to connect to")));
    return;
  }
  Attempt(d);
}

void PeerConnector::StopDialing(int peer) {
  Dialer* d = dialers_[peer].get();
  if (d == nullptr || d->done) return;
  d->done = true;
  ++d->attempt;  // handlers still queued are stale
  d->timer.cancel();
  error_code ignored;
  if (d->socket) d->socket->close(ignored);
}

void PeerConnector::OnLookedUp(
    int peer, absl::StatusOr<std::vector<Endpoint>> candidates) {
  if (closed_) return;
  if (!candidates.ok()) {
    sink_->OnConnectFailed(peer, candidates.status());
    return;
  }
  candidates_[peer] = *std::move(candidates);
  StartDial(peer);
}

void PeerConnector::Close() {
  lookups_.Close();
  if (closed_) return;
  closed_ = true;
  error_code ignored;
  acceptor_.close(ignored);
  for (int peer = 0; peer < config_.size; ++peer) StopDialing(peer);
  for (auto& in : std::vector<std::shared_ptr<Incoming>>(incoming_)) Drop(in);
}

void PeerConnector::Drop(const std::shared_ptr<Incoming>& in) {
  if (in->dropped) return;
  in->dropped = true;
  error_code ignored;
  in->timer.cancel();
  in->socket.close(ignored);
  incoming_.erase(std::remove(incoming_.begin(), incoming_.end(), in),
                  incoming_.end());
}

bool PeerConnector::ShouldLog(int64_t count) {
  return count <= kLoggedInFull || count % kLogEvery == 0;
}

// ---- accepting ------------------------------------------------------------

void PeerConnector::StartAccept() {
  acceptor_.async_accept([this](const error_code& ec, tcp::socket socket) {
    if (closed_ || ec == asio::error::operation_aborted) return;
    if (ec) {
      // Typically EMFILE: back off briefly instead of spinning.
      if (ShouldLog(++accept_errors_)) {
        HVD_LOG(WARNING) << "rank " << config_.rank << ": accept on "
                         << listen_address_ << " failed: " << ec.message()
                         << " (" << accept_errors_ << " so far)";
      }
      auto timer = std::make_shared<asio::steady_timer>(
          io_, std::chrono::milliseconds(10));
      timer->async_wait([this, timer](const error_code& e) {
        if (!e && !closed_) StartAccept();
      });
      return;
    }
    Welcome(std::move(socket));
    StartAccept();
  });
}

void PeerConnector::Welcome(tcp::socket socket) {
  // Connections that have not shown the token are bounded: the oldest makes
  // room (a peer's hello follows its connect within milliseconds).
  if (incoming_.size() >= config_.max_pending_handshakes) {
    Drop(incoming_.front());
  }
  auto in = std::make_shared<Incoming>(io_, std::move(socket));
  incoming_.push_back(in);
  in->timer.expires_after(ToChrono(config_.handshake_timeout));
  in->timer.async_wait([this, in](const error_code& e) {
    if (e || closed_ || in->dropped) return;
    // Not a peer's (a peer's hello follows its connect at once): a scanner,
    // or a client of something else, noted only when asked for.
    if (ShouldLog(++refused_)) {
      HVD_LOG(INFO) << "rank " << config_.rank << ": closed a TCP "
                    << "connection from " << in->address
                    << " that did not complete its hello within "
                    << absl::FormatDuration(config_.handshake_timeout) << " ("
                    << refused_ << " refused so far)";
    }
    Drop(in);
  });
  asio::async_read(in->socket, asio::buffer(in->fixed),
                   [this, in](const error_code& e, size_t) {
                     if (closed_) return;
                     if (e) {
                       Drop(in);
                     } else {
                       ReadHelloToken(in);
                     }
                   });
}

void PeerConnector::ReadHelloToken(std::shared_ptr<Incoming> in) {
  absl::StatusOr<HelloHeader> header = DecodeHelloHeader(in->fixed);
  if (!header.ok()) {
    // Not an hvd hello: a scanner or another program, noted only when asked
    // for; hellos of hvd ranks of other jobs are warned about (Refuse).
    if (ShouldLog(++refused_)) {
      HVD_LOG(INFO) << "rank " << config_.rank
                    << ": refused a TCP connection from " << in->address << ": "
                    << header.status().message() << " (" << refused_
                    << " refused so far)";
    }
    Reply(std::move(in), static_cast<uint8_t>(HelloReply::kBadProtocol));
    return;
  }
  in->header = *header;
  in->token.resize(header->token_bytes);
  asio::async_read(in->socket, asio::buffer(in->token),
                   [this, in](const error_code& e, size_t) {
                     if (closed_) return;
                     if (e) {
                       Drop(in);
                     } else {
                       CheckHello(in);
                     }
                   });
}

void PeerConnector::CheckHello(std::shared_ptr<Incoming> in) {
  const HelloHeader& h = in->header;
  if (h.size != static_cast<uint32_t>(config_.size)) {
    Refuse(in, static_cast<uint8_t>(HelloReply::kBadProtocol),
           absl::StrCat("its job size is ", h.size, ", ours ", config_.size));
    return;
  }
  if (h.rank == static_cast<uint32_t>(config_.rank) ||
      h.rank >= static_cast<uint32_t>(config_.size)) {
    Refuse(in, static_cast<uint8_t>(HelloReply::kBadRank),
           absl::StrCat("this is rank ", config_.rank, " of ", config_.size));
    return;
  }
  // The proof is bound to the claimed rank and this one (HelloProof).
  if (!TokensEqual(HelloProof(config_.token, static_cast<int>(h.rank),
                              config_.rank, config_.size),
                   in->token)) {
    Refuse(in, static_cast<uint8_t>(HelloReply::kBadToken),
           "wrong job token, or a hello meant for another rank");
    return;
  }
  if (h.rank < static_cast<uint32_t>(config_.rank)) {
    // A lower rank asking to be called back: this rank dials it.
    Reply(in, static_cast<uint8_t>(HelloReply::kCallBack));
    StartDial(static_cast<int>(h.rank));
    return;
  }
  in->reply = static_cast<uint8_t>(HelloReply::kAccepted);
  asio::async_write(in->socket, asio::buffer(&in->reply, 1),
                    [this, in](const error_code& e, size_t) {
                      if (closed_) return;
                      if (e) {
                        Drop(in);
                      } else {
                        AwaitConfirm(in);
                      }
                    });
}

void PeerConnector::Reply(std::shared_ptr<Incoming> in, uint8_t reply) {
  in->reply = reply;
  asio::async_write(in->socket, asio::buffer(&in->reply, 1),
                    [this, in](const error_code&, size_t) { Drop(in); });
}

void PeerConnector::AwaitConfirm(std::shared_ptr<Incoming> in) {
  // A dialer whose attempt timed out before our reply has closed this
  // connection and will retry: only a confirmed connection counts.
  asio::async_read(
      in->socket, asio::buffer(&in->reply, 1),
      [this, in](const error_code& e, size_t) {
        if (closed_ || in->dropped) return;
        if (e || in->reply != kHelloConfirm) {
          Drop(in);
          return;
        }
        in->dropped = true;  // handed over, not closed
        in->timer.cancel();
        incoming_.erase(std::remove(incoming_.begin(), incoming_.end(), in),
                        incoming_.end());
        Connected(static_cast<int>(in->header.rank), std::move(in->socket));
      });
}

void PeerConnector::Refuse(std::shared_ptr<Incoming> in, uint8_t reply,
                           absl::string_view why) {
  if (ShouldLog(++refused_)) {
    HVD_LOG(WARNING) << "rank " << config_.rank
                     << ": refused a TCP connection from " << in->address
                     << " (claiming rank " << in->header.rank << "): " << why
                     << " (" << refused_ << " refused so far)";
  }
  Reply(std::move(in), reply);
}

// ---- dialing --------------------------------------------------------------

void PeerConnector::Attempt(Dialer& d) {
  const int attempt = ++d.attempt;
  d.timed_out = false;
  d.socket.emplace(io_);
  error_code ec;
  d.socket->open(tcp::v4(), ec);
  if (ec) {
    RetryLater(d, absl::StrCat("socket: ", ec.message()));
    return;
  }
  SetBufferSizes(*d.socket, config_.socket_buffer_bytes);
  d.timer.expires_after(
      ToChrono(std::min(config_.attempt_timeout, d.deadline - absl::Now())));
  d.timer.async_wait([this, &d, attempt](const error_code& e) {
    if (e || closed_ || attempt != d.attempt) return;
    d.timed_out = true;
    error_code ignored;
    d.socket->close(ignored);
  });
  d.socket->async_connect(
      d.candidates[d.next], [this, &d, attempt](const error_code& e) {
        if (closed_ || attempt != d.attempt) return;
        if (e) {
          if (e != asio::error::connection_refused) d.all_refused = false;
          RetryLater(d, d.timed_out ? "connect timed out" : e.message());
          return;
        }
        d.all_refused = false;
        SendHello(d, attempt);
      });
}

void PeerConnector::SendHello(Dialer& d, int attempt) {
  SetNoDelay(*d.socket);
  asio::async_write(
      *d.socket, asio::buffer(d.hello),
      [this, &d, attempt](const error_code& e, size_t) {
        if (closed_ || attempt != d.attempt) return;
        if (e) {
          RetryLater(d, d.timed_out
                            ? "handshake timed out"
                            : absl::StrCat("sending hello: ", e.message()));
          return;
        }
        ReadReply(d, attempt);
      });
}

void PeerConnector::ReadReply(Dialer& d, int attempt) {
  asio::async_read(
      *d.socket, asio::buffer(&d.reply, 1),
      [this, &d, attempt](const error_code& e, size_t) {
        if (closed_ || attempt != d.attempt) return;
        if (!e) {
          OnReply(d);
        } else if (d.timed_out) {
          RetryLater(d, "handshake timed out");
        } else if (e == asio::error::eof) {
          RetryLater(d, "closed the connection during the handshake");
        } else {
          RetryLater(d, absl::StrCat("reading hello reply: ", e.message()));
        }
      });
}

void PeerConnector::OnReply(Dialer& d) {
  ++d.attempt;  // a timeout already queued must not close this socket
  d.timer.cancel();
  const std::string who =
      absl::StrCat("rank ", config_.rank, ": peer rank ", d.peer, " at ",
                   EndpointString(d.candidates[d.next]));
  const bool calls_back = d.peer > config_.rank;
  error_code ignored;
  switch (static_cast<HelloReply>(d.reply)) {
    case HelloReply::kAccepted:
      if (calls_back) break;
      asio::async_write(
          *d.socket, asio::buffer(&kHelloConfirm, 1),
          [this, &d, confirming = d.attempt](const error_code& e, size_t) {
            if (closed_ || confirming != d.attempt) return;
            if (e) {
              RetryLater(d, absl::StrCat("confirming: ", e.message()));
              return;
            }
            d.done = true;
            Connected(d.peer, std::move(*d.socket));
          });
      return;
    case HelloReply::kCallBack:
      if (!calls_back) break;
      // Asked; the peer's own connection arrives at the acceptor.
      d.done = true;
      d.socket->close(ignored);
      return;
    case HelloReply::kBadToken:
      Fail(d, absl::UnauthenticatedError(
                  absl::StrCat(who, " refused the job token")));
      return;
    case HelloReply::kBadRank:
      Fail(d,
           absl::FailedPreconditionError(absl::StrCat(
               who, " refused this rank (is it a process of another job?)")));
      return;
    case HelloReply::kBadProtocol:
      Fail(d, absl::FailedPreconditionError(
                  absl::StrCat(who, " refused the hello: different job size ",
                               config_.size, " or hvd version")));
      return;
  }
  Fail(d, absl::FailedPreconditionError(
              absl::StrCat(who, " sent hello reply ", int{d.reply},
                           ", which a dialer of its rank does not expect")));
}

void PeerConnector::RetryLater(Dialer& d, absl::string_view why) {
  d.timer.cancel();
  d.last_error = absl::StrCat(EndpointString(d.candidates[d.next]), ": ", why);
  error_code ignored;
  if (d.socket) d.socket->close(ignored);
  if (absl::Now() >= d.deadline) {
    Fail(d, absl::DeadlineExceededError(absl::StrCat(
                "rank ", config_.rank, ": could not connect to rank ", d.peer,
                " at ", EndpointListString(d.candidates), " within ",
                absl::FormatDuration(config_.connect_timeout),
                " (last error: ", d.last_error, ")")));
    return;
  }
  if (++d.next < d.candidates.size()) {
    Attempt(d);
    return;
  }
  if (d.all_refused) {
    // The peer listened before it published these: nothing listens there
    // now, so it is gone, and waiting would only delay the news.
    Fail(d, absl::UnavailableError(absl::StrCat(
                "rank ", config_.rank, ": rank ", d.peer, " at ",
                EndpointListString(d.candidates),
                " refused the connection: nothing listens there (has its "
                "process exited?)")));
    return;
  }
  d.next = 0;
  d.all_refused = true;
  const int round = ++d.attempt;
  d.timer.expires_after(
      ToChrono(std::min(d.backoff, d.deadline - absl::Now())));
  d.backoff = std::min(d.backoff * 2, kMaxBackoff);
  d.timer.async_wait([this, &d, round](const error_code& e) {
    if (!e && !closed_ && round == d.attempt) Attempt(d);
  });
}

void PeerConnector::Connected(int peer, tcp::socket socket) {
  StopDialing(peer);  // a call-back request still under way
  connected_[peer] = true;
  sink_->OnConnected(peer, std::move(socket));
}

void PeerConnector::Fail(Dialer& d, absl::Status status) {
  d.done = true;
  ++d.attempt;
  d.timer.cancel();
  error_code ignored;
  if (d.socket) d.socket->close(ignored);
  sink_->OnConnectFailed(d.peer, std::move(status));
}

}  // namespace hvd::transport::tcp_internal
