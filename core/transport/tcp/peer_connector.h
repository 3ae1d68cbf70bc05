// Establishes a rank's authenticated connections on demand, for as long as
// its TCP context lives, on the context's io thread: a rank connects only to
// the peers it exchanges messages with, so a job of N ranks does not open
// N - 1 sockets per rank at start-up.
//
// Who dials: the higher rank of a pair opens its data connection, at its
// own first message to the lower one. A lower rank whose message comes
// first waits `callback_delay` for that (usually the higher rank posts its
// side within it), then dials the higher rank's listener with a hello that
// asks to be called back (handshake.h, HelloReply::kCallBack); the higher
// rank answers, hangs up, and dials. Either way one connection per pair
// carries the data, and its direction is fixed by the ranks, so two ranks
// reaching for each other at once never end up on different sockets.
//
// Looking up: a peer's endpoints are looked up (Lookup: the rendezvous
// store, where every rank publishes its own) when this rank first dials it,
// on a thread of the connector's own, since a lookup may wait for the peer
// to publish; so a rank reads the addresses of the peers it talks to, not
// every rank's. A lookup that fails fails the dial.
// Dialing: the candidates of a peer are tried in order, each attempt
// (connect + handshake) bounded by `attempt_timeout`; when all fail the round
// is retried with backoff until `connect_timeout` after Dial. Every rank
// listens before it publishes its address, so a round in which every
// candidate refused the connection (nothing listens) means the peer is gone:
// that fails at once, as does a peer refusing the token or this rank. Either
// way the Sink learns of it.
// Accepting: each incoming connection's Hello is checked (constant-time token
// compare, job size, a rank other than this one); a refused hello is warned
// about with the peer's address, never the token, and the acceptor keeps
// listening. Connections that are not hvd's (no hello in time, or not a
// hello: a port scanner) are noted at INFO only. A
// connection is closed as soon as it fails, hangs up or is refused, and when
// its handshake takes longer than `handshake_timeout`; at most
// `max_pending_handshakes` wait for theirs (the oldest makes room), so a
// flood of connections cannot use up this process's files. Refusals are
// logged in full a few times, then every thousandth with the count.
#ifndef HVD_CORE_TRANSPORT_TCP_PEER_CONNECTOR_H_
#define HVD_CORE_TRANSPORT_TCP_PEER_CONNECTOR_H_

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/transport/lookup_thread.h"
#include "core/transport/tcp/address.h"

namespace hvd::transport::tcp_internal {

class PeerConnector {
 public:
  struct Config {
    int rank = 0;
    int size = 1;
    std::string token;
    // How long Dial keeps trying a peer.
    absl::Duration connect_timeout = absl::Seconds(30);
    // Bound on one connect + handshake: room for a SYN retransmit (1 s),
    // short enough to move on from an unroutable candidate.
    absl::Duration attempt_timeout = absl::Seconds(2);
    int socket_buffer_bytes = 0;  // SetBufferSizes; 0: the kernel's
    // Bound on an accepted connection's hello, reply and confirmation.
    absl::Duration handshake_timeout = absl::Seconds(4);
    // Accepted connections still in their handshake, at most.
    size_t max_pending_handshakes = 64;
    // How long a lower rank waits for the higher one to dial before it asks
    // to be called back.
    absl::Duration callback_delay = absl::Milliseconds(50);
  };

  // Where each of `peers` listens: for each, the endpoints to dial, in
  // order, all in one round trip where the store allows. Called on the
  // connector's lookup thread with the peers whose first dials came
  // together; may wait for them to publish, up to `timeout`, and then
  // returns DeadlineExceeded (the connector hands over those found, and asks
  // again for the others while its connect_timeout allows). Other errors
  // fail the dials.
  using Lookup = LookupThread<std::vector<Endpoint>>::Lookup;

  // What the connector tells its context; called on the io thread.
  class Sink {
   public:
    virtual ~Sink() = default;
    // A data connection to `peer` is up and authenticated. A pair gets one,
    // unless its first is lost in the handshake's last step (the dialer's
    // confirmation failing after it arrived); a second is the peer's retry.
    virtual void OnConnected(int peer, boost::asio::ip::tcp::socket socket) = 0;
    // Dialing `peer` failed for good: Unauthenticated (token refused),
    // FailedPrecondition (rank or job size refused), Unavailable (nothing
    // listens at its addresses), DeadlineExceeded (not connected within
    // connect_timeout, with the last error seen).
    virtual void OnConnectFailed(int peer, absl::Status status) = 0;
  };

  // `acceptor` is listening. `io` and `sink` must outlive this object.
  PeerConnector(boost::asio::io_context& io,
                boost::asio::ip::tcp::acceptor acceptor, Config config,
                Lookup lookup, Sink* sink);
  ~PeerConnector();
  PeerConnector(const PeerConnector&) = delete;
  PeerConnector& operator=(const PeerConnector&) = delete;

  // Starts accepting. Call once, before `io` runs.
  void Start();
  // Thread-safe. Has the connection to `peer` made (a lower peer) or, after
  // callback_delay, asked for (a higher one), unless it is under way or
  // done by then.
  void Dial(int peer);
  // Closes the listener and every connection still in its handshake, and
  // ends the lookup thread (a lookup under way ends within its slice of
  // kLookupSlice). `io` must no longer run; handlers still queued in it are
  // not run.
  void Close();

  // How long one lookup call waits before the connector checks whether it
  // is closing.
  static constexpr absl::Duration kLookupSlice =
      LookupThread<std::vector<Endpoint>>::kSlice;

 private:
  struct Dialer;
  struct Incoming;

  void StartDial(int peer);
  // On the io thread: `peer`'s candidates, or why there are none.
  void OnLookedUp(int peer, absl::StatusOr<std::vector<Endpoint>> candidates);
  void StartAccept();
  // Starts the handshake of an accepted connection, within the bounds.
  void Welcome(boost::asio::ip::tcp::socket socket);
  // Closes an accepted connection and forgets it; idempotent.
  void Drop(const std::shared_ptr<Incoming>& in);
  static bool ShouldLog(int64_t count);
  void ReadHelloToken(std::shared_ptr<Incoming> in);
  void CheckHello(std::shared_ptr<Incoming> in);
  void Reply(std::shared_ptr<Incoming> in, uint8_t reply);
  void AwaitConfirm(std::shared_ptr<Incoming> in);
  void Refuse(std::shared_ptr<Incoming> in, uint8_t reply,
              absl::string_view why);
  void Attempt(Dialer& d);
  void SendHello(Dialer& d, int attempt);
  void ReadReply(Dialer& d, int attempt);
  void OnReply(Dialer& d);
  // Closes the attempt and tries the next candidate, or the first again
  // after a backoff; past the deadline, fails.
  void RetryLater(Dialer& d, absl::string_view why);
  void Fail(Dialer& d, absl::Status status);
  // Ends `peer`'s dialing, if any, and hands its connection to the sink.
  void Connected(int peer, boost::asio::ip::tcp::socket socket);
  void StopDialing(int peer);

  boost::asio::io_context& io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  const Config config_;
  const std::string listen_address_;
  Sink* const sink_;
  // By peer rank, on the io thread: its candidates once looked up (the
  // outer vector never changes size: dialers refer to its elements).
  std::vector<std::optional<std::vector<Endpoint>>> candidates_;
  // By peer rank; created on the io thread at the peer's first Dial.
  std::vector<std::unique_ptr<Dialer>> dialers_;
  std::vector<bool> connected_;  // by peer rank: handed to the sink
  std::vector<std::shared_ptr<Incoming>> incoming_;
  int64_t refused_ = 0;  // connections refused or timed out
  int64_t accept_errors_ = 0;
  bool closed_ = false;

  // Its results are posted to the io thread.
  LookupThread<std::vector<Endpoint>> lookups_;
};

}  // namespace hvd::transport::tcp_internal

#endif  // HVD_CORE_TRANSPORT_TCP_PEER_CONNECTOR_H_
