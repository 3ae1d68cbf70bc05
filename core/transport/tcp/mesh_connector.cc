#include "core/transport/tcp/mesh_connector.h"

#include <algorithm>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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

struct MeshConnector::Dialer {
  Dialer(asio::io_context& io, int peer, std::vector<Endpoint> candidates,
         std::string hello)
      : peer(peer),
        candidates(std::move(candidates)),
        timer(io),
        hello(std::move(hello)) {}

  const int peer;
  const std::vector<Endpoint> candidates;
  size_t next = 0;  // index of the candidate being tried
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

struct MeshConnector::Incoming {
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

MeshConnector::MeshConnector(asio::io_context& io, tcp::acceptor& acceptor,
                             Config config)
    : io_(io),
      acceptor_(acceptor),
      config_(std::move(config)),
      listen_address_([&] {
        error_code ec;
        const tcp::endpoint local = acceptor.local_endpoint(ec);
        return ec ? std::string("unknown address") : EndpointString(local);
      }()),
      deadline_timer_(io),
      cancel_timer_(io) {}

MeshConnector::~MeshConnector() = default;

absl::StatusOr<std::vector<std::optional<Connection>>> MeshConnector::Run(
    std::vector<std::vector<Endpoint>> dial_candidates) {
  connections_.resize(config_.size);
  if (config_.size <= 1) return std::move(connections_);
  deadline_timer_.expires_after(ToChrono(config_.deadline - absl::Now()));
  deadline_timer_.async_wait([this](const error_code& ec) {
    if (!ec && !finished_) Finish(TimeoutError());
  });
  if (config_.cancel) PollCancel();
  if (config_.rank < config_.size - 1) StartAccept();
  const std::string hello =
      EncodeHello(config_.rank, config_.size, config_.token);
  for (int peer = 0; peer < config_.rank; ++peer) {
    dialers_.push_back(std::make_unique<Dialer>(
        io_, peer, std::move(dial_candidates[peer]), hello));
    Attempt(*dialers_.back());
  }
  while (!finished_) {
    if (io_.run_one() == 0) Finish(absl::InternalError("io_context stopped"));
  }
  CancelAll();
  io_.restart();
  io_.run();  // lets every cancelled handler run before `this` goes away
  if (!result_.ok()) return result_;
  return std::move(connections_);
}

void MeshConnector::PollCancel() {
  if (config_.cancel->cancelled()) {
    Finish(config_.cancel->status());
    return;
  }
  cancel_timer_.expires_after(ToChrono(config_.cancel_poll));
  cancel_timer_.async_wait([this](const error_code& ec) {
    if (!ec && !finished_) PollCancel();
  });
}

void MeshConnector::Finish(absl::Status status) {
  if (finished_) return;
  finished_ = true;
  result_ = std::move(status);
}

void MeshConnector::CancelAll() {
  error_code ignored;
  deadline_timer_.cancel();
  cancel_timer_.cancel();
  acceptor_.cancel(ignored);
  for (auto& d : dialers_) {
    d->timer.cancel();
    if (d->socket && !d->done) d->socket->close(ignored);
  }
  for (auto& in : std::vector<std::shared_ptr<Incoming>>(incoming_)) Drop(in);
}

void MeshConnector::Drop(const std::shared_ptr<Incoming>& in) {
  if (in->dropped) return;
  in->dropped = true;
  error_code ignored;
  in->timer.cancel();
  in->socket.close(ignored);
  incoming_.erase(std::remove(incoming_.begin(), incoming_.end(), in),
                  incoming_.end());
}

bool MeshConnector::ShouldLog(int64_t count) {
  return count <= kLoggedInFull || count % kLogEvery == 0;
}

// ---- accepting ------------------------------------------------------------

void MeshConnector::StartAccept() {
  acceptor_.async_accept([this](const error_code& ec, tcp::socket socket) {
    if (finished_ || ec == asio::error::operation_aborted) return;
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
        if (!e && !finished_) StartAccept();
      });
      return;
    }
    Welcome(std::move(socket));
    StartAccept();
  });
}

void MeshConnector::Welcome(tcp::socket socket) {
  // Connections that have not shown the token are bounded: the oldest makes
  // room (a peer's hello follows its connect within milliseconds).
  if (incoming_.size() >= config_.max_pending_handshakes) {
    Drop(incoming_.front());
  }
  auto in = std::make_shared<Incoming>(io_, std::move(socket));
  incoming_.push_back(in);
  in->timer.expires_after(ToChrono(config_.handshake_timeout));
  in->timer.async_wait([this, in](const error_code& e) {
    if (e || finished_ || in->dropped) return;
    if (ShouldLog(++refused_)) {
      HVD_LOG(WARNING) << "rank " << config_.rank << ": closed a TCP "
                       << "connection from " << in->address
                       << " that did not complete its hello within "
                       << absl::FormatDuration(config_.handshake_timeout)
                       << " (" << refused_ << " refused so far)";
    }
    Drop(in);
  });
  asio::async_read(in->socket, asio::buffer(in->fixed),
                   [this, in](const error_code& e, size_t) {
                     if (finished_) return;
                     if (e) {
                       Drop(in);
                     } else {
                       ReadHelloToken(in);
                     }
                   });
}

void MeshConnector::ReadHelloToken(std::shared_ptr<Incoming> in) {
  absl::StatusOr<HelloHeader> header = DecodeHelloHeader(in->fixed);
  if (!header.ok()) {
    Refuse(in, static_cast<uint8_t>(HelloReply::kBadProtocol),
           header.status().message());
    return;
  }
  in->header = *header;
  in->token.resize(header->token_bytes);
  asio::async_read(in->socket, asio::buffer(in->token),
                   [this, in](const error_code& e, size_t) {
                     if (finished_) return;
                     if (e) {
                       Drop(in);
                     } else {
                       CheckHello(in);
                     }
                   });
}

void MeshConnector::CheckHello(std::shared_ptr<Incoming> in) {
  const HelloHeader& h = in->header;
  if (!TokensEqual(config_.token, in->token)) {
    Refuse(in, static_cast<uint8_t>(HelloReply::kBadToken), "wrong job token");
    return;
  }
  if (h.size != static_cast<uint32_t>(config_.size)) {
    Refuse(in, static_cast<uint8_t>(HelloReply::kBadProtocol),
           absl::StrCat("its job size is ", h.size, ", ours ", config_.size));
    return;
  }
  if (h.rank <= static_cast<uint32_t>(config_.rank) ||
      h.rank >= static_cast<uint32_t>(config_.size)) {
    Refuse(in, static_cast<uint8_t>(HelloReply::kBadRank),
           absl::StrCat("this rank accepts only ranks ", config_.rank + 1, "..",
                        config_.size - 1));
    return;
  }
  in->reply = static_cast<uint8_t>(HelloReply::kAccepted);
  asio::async_write(in->socket, asio::buffer(&in->reply, 1),
                    [this, in](const error_code& e, size_t) {
                      if (finished_) return;
                      if (e) {
                        Drop(in);
                      } else {
                        AwaitConfirm(in);
                      }
                    });
}

void MeshConnector::AwaitConfirm(std::shared_ptr<Incoming> in) {
  // A dialer whose attempt timed out before our reply has closed this
  // connection and will retry: only a confirmed connection counts.
  asio::async_read(in->socket, asio::buffer(&in->reply, 1),
                   [this, in](const error_code& e, size_t) {
                     if (finished_ || in->dropped) return;
                     if (e || in->reply != kHelloConfirm) {
                       Drop(in);
                       return;
                     }
                     in->dropped = true;  // handed over, not closed
                     in->timer.cancel();
                     incoming_.erase(std::remove(incoming_.begin(),
                                                 incoming_.end(), in),
                                     incoming_.end());
                     Connected(static_cast<int>(in->header.rank),
                               std::move(in->socket), in->address);
                   });
}

void MeshConnector::Refuse(std::shared_ptr<Incoming> in, uint8_t reply,
                           absl::string_view why) {
  if (ShouldLog(++refused_)) {
    HVD_LOG(WARNING) << "rank " << config_.rank
                     << ": refused a TCP connection from " << in->address
                     << " (claiming rank " << in->header.rank << "): " << why
                     << " (" << refused_ << " refused so far)";
  }
  in->reply = reply;
  asio::async_write(in->socket, asio::buffer(&in->reply, 1),
                    [this, in](const error_code&, size_t) { Drop(in); });
}

// ---- dialing --------------------------------------------------------------

void MeshConnector::Attempt(Dialer& d) {
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
  d.timer.expires_after(ToChrono(
      std::min(config_.attempt_timeout, config_.deadline - absl::Now())));
  d.timer.async_wait([this, &d, attempt](const error_code& e) {
    if (e || finished_ || attempt != d.attempt) return;
    d.timed_out = true;
    error_code ignored;
    d.socket->close(ignored);
  });
  d.socket->async_connect(
      d.candidates[d.next], [this, &d, attempt](const error_code& e) {
        if (finished_ || attempt != d.attempt) return;
        if (e) {
          RetryLater(d, d.timed_out ? "connect timed out" : e.message());
          return;
        }
        SendHello(d, attempt);
      });
}

void MeshConnector::SendHello(Dialer& d, int attempt) {
  SetNoDelay(*d.socket);
  asio::async_write(
      *d.socket, asio::buffer(d.hello),
      [this, &d, attempt](const error_code& e, size_t) {
        if (finished_ || attempt != d.attempt) return;
        if (e) {
          RetryLater(d, d.timed_out
                            ? "handshake timed out"
                            : absl::StrCat("sending hello: ", e.message()));
          return;
        }
        ReadReply(d, attempt);
      });
}

void MeshConnector::ReadReply(Dialer& d, int attempt) {
  asio::async_read(
      *d.socket, asio::buffer(&d.reply, 1),
      [this, &d, attempt](const error_code& e, size_t) {
        if (finished_ || attempt != d.attempt) return;
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

void MeshConnector::OnReply(Dialer& d) {
  ++d.attempt;  // a timeout already queued must not close this socket
  d.timer.cancel();
  const std::string who =
      absl::StrCat("rank ", config_.rank, ": peer rank ", d.peer, " at ",
                   EndpointString(d.candidates[d.next]));
  switch (static_cast<HelloReply>(d.reply)) {
    case HelloReply::kAccepted:
      asio::async_write(
          *d.socket, asio::buffer(&kHelloConfirm, 1),
          [this, &d, confirming = d.attempt](const error_code& e, size_t) {
            if (finished_ || confirming != d.attempt) return;
            if (e) {
              RetryLater(d, absl::StrCat("confirming: ", e.message()));
              return;
            }
            d.done = true;
            Connected(d.peer, std::move(*d.socket),
                      EndpointString(d.candidates[d.next]));
          });
      return;
    case HelloReply::kBadToken:
      Finish(absl::UnauthenticatedError(
          absl::StrCat(who, " refused the job token")));
      return;
    case HelloReply::kBadRank:
      Finish(absl::FailedPreconditionError(absl::StrCat(
          who, " refused this rank (is it a process of another job?)")));
      return;
    case HelloReply::kBadProtocol:
      Finish(absl::FailedPreconditionError(
          absl::StrCat(who, " refused the hello: different job size ",
                       config_.size, " or hvd version")));
      return;
  }
  Finish(absl::FailedPreconditionError(
      absl::StrCat(who, " sent unknown hello reply ", int{d.reply})));
}

void MeshConnector::RetryLater(Dialer& d, absl::string_view why) {
  d.timer.cancel();
  d.last_error = absl::StrCat(EndpointString(d.candidates[d.next]), ": ", why);
  error_code ignored;
  if (d.socket) d.socket->close(ignored);
  if (++d.next < d.candidates.size()) {
    Attempt(d);
    return;
  }
  d.next = 0;
  const int round = ++d.attempt;
  d.timer.expires_after(ToChrono(d.backoff));
  d.backoff = std::min(d.backoff * 2, kMaxBackoff);
  d.timer.async_wait([this, &d, round](const error_code& e) {
    if (!e && !finished_ && round == d.attempt) Attempt(d);
  });
}

void MeshConnector::Connected(int peer, tcp::socket socket,
                              std::string address) {
  std::optional<Connection>& slot = connections_[peer];
  // Only confirmed connections get here, so a second one for a peer means
  // the first was abandoned after its confirmation: keep the newest.
  if (!slot) ++connected_;
  slot.emplace(Connection{std::move(socket), std::move(address)});
  if (connected_ == config_.size - 1) Finish(absl::OkStatus());
}

absl::Status MeshConnector::TimeoutError() const {
  std::vector<std::string> parts;
  for (const auto& d : dialers_) {
    if (d->done) continue;
    parts.push_back(
        absl::StrCat("could not connect to rank ", d->peer, " at ",
                     EndpointListString(d->candidates),
                     d->last_error.empty()
                         ? ""
                         : absl::StrCat(" (last error: ", d->last_error, ")")));
  }
  std::vector<int> silent;
  for (int peer = config_.rank + 1; peer < config_.size; ++peer) {
    if (!connections_[peer]) silent.push_back(peer);
  }
  if (!silent.empty()) {
    parts.push_back(absl::StrCat(
        silent.size() == 1 ? "rank " : "ranks ", absl::StrJoin(silent, ", "),
        " did not connect to this rank's listener at ", listen_address_));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "rank ", config_.rank, ": TCP mesh not connected within ",
      absl::FormatDuration(config_.timeout), ": ", absl::StrJoin(parts, "; ")));
}

}  // namespace hvd::transport::tcp_internal
