// The TCP data-plane transport (Boost.Asio): a transport::Context whose
// ranks are connected pairwise by TCP.
//
// Design
// - Bootstrap: every rank listens (TcpOptions::iface or 0.0.0.0, ephemeral
//   port) and publishes its host name and candidate endpoints under
//   "tcp/<rank>" (address.h). Nothing is read or connected yet.
// - Connections (peer_connector.h): a pair of ranks connects when the first
//   message between them is posted, so a rank holds sockets only to the
//   peers its algorithms use (ring neighbours, the coordinator), not N - 1,
//   and reads the addresses of those peers only, from the store, as it first
//   dials each: the store answers each rank's few reads, not N.
//   The higher rank dials; a lower rank that needs the connection first asks
//   the higher one to call it back. The dialer's Hello carries its rank and
//   the job token; the acceptor compares the token in constant time and
//   answers with one byte (handshake.h). Messages posted meanwhile wait in
//   the pair's queues.
// - Data (pair.h): per peer one socket (TCP_NODELAY, large buffers) with a
//   send FIFO and a receive FIFO; each message is an 8-byte little-endian
//   length then the payload. Sends gather header and payload into one
//   sendmsg; receives read straight into the caller's buffer (the header
//   and an exactly-sized payload in one recvmsg).
// - Progress: the posting thread moves what it can without blocking; a
//   waiter polls its pair for TcpTuning::spin and then sleeps, after asking
//   the context's single io thread to watch every pending op. Large receives
//   (>= TcpTuning::lazy_recv_bytes) and blocked sends are watched at once. A
//   small round trip thus costs a sendmsg and a few recvmsg polls per side
//   and no thread wakeup (measured figures: docs/performance.md).
// - Failure (context_core.h): the first error (peer closed, I/O error,
//   length mismatch, Abort) is recorded once, fails every pending and future
//   request on every pair, wakes all waiters, and shuts the sockets down so
//   peers fail fast too.
// - Lifetime: destroying the context stops the io thread, fails pending
//   requests with Cancelled and closes the sockets; requests keep the shared
//   state alive, so a late Wait() is safe.
#ifndef HVD_CORE_TRANSPORT_TCP_TCP_CONTEXT_H_
#define HVD_CORE_TRANSPORT_TCP_TCP_CONTEXT_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/rendezvous/store.h"
#include "core/transport/tcp/tcp_options.h"
#include "core/transport/transport.h"

namespace hvd::transport {

// Listens and publishes this rank's addresses under key "tcp/<rank>" in
// `store` (callers pass a PrefixStore to scope it). Returns without
// connecting or reading: each pair connects at its first message, looking
// the peer's addresses up in `store` (kept for that), and a failure to
// connect (a peer publishing no address within `connect_timeout`, or an
// unusable one, refusing the token or this rank, nothing listening where it
// published, no answer within `connect_timeout`) fails the context with a
// status naming the peer rank and address. Errors here: InvalidArgument for
// bad arguments or an unknown `iface`; the store's when publishing fails.
absl::StatusOr<std::unique_ptr<Context>> CreateTcpContext(
    int rank, int size, std::shared_ptr<Store> store,
    const TcpOptions& options);

}  // namespace hvd::transport

#endif  // HVD_CORE_TRANSPORT_TCP_TCP_CONTEXT_H_
