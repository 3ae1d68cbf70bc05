// Establishes the full mesh of authenticated connections for one rank: it
// dials every lower rank and accepts every higher one, all at once, on one
// io_context driven by the calling thread.
//
// Dialing: the candidates of a peer are tried in order, each attempt
// (connect + handshake) bounded by a short timeout; when all fail the round
// is retried with backoff (the peer's listener may not be up yet) until the
// deadline. A peer refusing the token or this rank is a permanent failure.
// Accepting: each incoming connection's Hello is checked (constant-time token
// compare, expected rank and job size); refusals are logged with the peer's
// address, never the token, and the acceptor keeps listening. A connection
// is closed as soon as it fails, hangs up or is refused, and when its
// handshake takes longer than `handshake_timeout`; at most
// `max_pending_handshakes` wait for theirs (the oldest makes room), so a
// flood of connections cannot use up this process's files. Refusals are
// logged in full a few times, then every thousandth with the count.
#ifndef HVD_CORE_TRANSPORT_TCP_MESH_CONNECTOR_H_
#define HVD_CORE_TRANSPORT_TCP_MESH_CONNECTOR_H_

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/common/cancellation.h"
#include "core/transport/tcp/address.h"

namespace hvd::transport::tcp_internal {

// An authenticated connection to one peer.
struct Connection {
  boost::asio::ip::tcp::socket socket;
  std::string address;  // the peer's endpoint, for messages
};

class MeshConnector {
 public:
  struct Config {
    int rank = 0;
    int size = 1;
    std::string token;
    absl::Time deadline;
    absl::Duration timeout;  // what `deadline` was computed from, for messages
    // Bound on one connect + handshake: room for a SYN retransmit (1 s),
    // short enough to move on from an unroutable candidate.
    absl::Duration attempt_timeout = absl::Seconds(2);
    int socket_buffer_bytes = 0;  // SetBufferSizes; 0: the kernel's
    // Bound on an accepted connection's hello, reply and confirmation.
    absl::Duration handshake_timeout = absl::Seconds(4);
    // Accepted connections still in their handshake, at most.
    size_t max_pending_handshakes = 64;
    // When set and cancelled, Run fails with its status within
    // `cancel_poll`.
    std::shared_ptr<const Cancellation> cancel;
    absl::Duration cancel_poll = absl::Milliseconds(100);
  };

  // `io` and `acceptor` (already listening) must outlive this object; `io`
  // must not be run by any other thread meanwhile.
  MeshConnector(boost::asio::io_context& io,
                boost::asio::ip::tcp::acceptor& acceptor, Config config);
  ~MeshConnector();
  MeshConnector(const MeshConnector&) = delete;
  MeshConnector& operator=(const MeshConnector&) = delete;

  // `dial_candidates[p]` for each p < rank. Returns one Connection per peer
  // (index = rank; nullopt at this rank) once all are up. Errors name the
  // peer and address: Unauthenticated (token refused), FailedPrecondition
  // (rank or job size refused), DeadlineExceeded (not connected in time,
  // with the last error seen), the cancellation's status. Leaves `io` with
  // no pending work.
  absl::StatusOr<std::vector<std::optional<Connection>>> Run(
      std::vector<std::vector<Endpoint>> dial_candidates);

 private:
  struct Dialer;
  struct Incoming;

  void StartAccept();
  // Checks the cancellation every cancel_poll until Run finishes.
  void PollCancel();
  // Starts the handshake of an accepted connection, within the bounds.
  void Welcome(boost::asio::ip::tcp::socket socket);
  // Closes an accepted connection and forgets it; idempotent.
  void Drop(const std::shared_ptr<Incoming>& in);
  static bool ShouldLog(int64_t count);
  void ReadHelloToken(std::shared_ptr<Incoming> in);
  void CheckHello(std::shared_ptr<Incoming> in);
  void AwaitConfirm(std::shared_ptr<Incoming> in);
  void Refuse(std::shared_ptr<Incoming> in, uint8_t reply,
              absl::string_view why);
  void Attempt(Dialer& d);
  void SendHello(Dialer& d, int attempt);
  void ReadReply(Dialer& d, int attempt);
  void OnReply(Dialer& d);
  // Closes the attempt and tries the next candidate, or the first again
  // after a backoff.
  void RetryLater(Dialer& d, absl::string_view why);
  void Connected(int peer, boost::asio::ip::tcp::socket socket,
                 std::string address);
  void Finish(absl::Status status);
  absl::Status TimeoutError() const;
  void CancelAll();

  boost::asio::io_context& io_;
  boost::asio::ip::tcp::acceptor& acceptor_;
  const Config config_;
  const std::string listen_address_;
  boost::asio::steady_timer deadline_timer_;
  boost::asio::steady_timer cancel_timer_;
  std::vector<std::unique_ptr<Dialer>> dialers_;
  std::vector<std::shared_ptr<Incoming>> incoming_;
  std::vector<std::optional<Connection>> connections_;
  int connected_ = 0;
  int64_t refused_ = 0;        // connections refused or timed out
  int64_t accept_errors_ = 0;
  bool finished_ = false;
  absl::Status result_;
};

}  // namespace hvd::transport::tcp_internal

#endif  // HVD_CORE_TRANSPORT_TCP_MESH_CONNECTOR_H_
