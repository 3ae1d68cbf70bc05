// The TCP data-plane transport (Boost.Asio): a transport::Context whose
// ranks are connected pairwise by TCP.
//
// Design
// - Bootstrap (mesh_connector.h): every rank listens (TcpOptions::iface or
//   0.0.0.0, ephemeral port), publishes its host name and candidate
//   endpoints under "tcp/<rank>" (address.h), reads every rank's from the
//   book rank 0 gathers under "tcp/all" (address_book.h), dials each lower
//   rank and accepts each higher one concurrently on one io_context. The
//   dialer's Hello carries its rank and the job token; the acceptor
//   compares the token in constant time and answers with one byte
//   (handshake.h).
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

// Listens, publishes this rank's addresses under key "tcp/<rank>" in `store`
// (callers pass a PrefixStore to scope it), reads every peer's from the book
// rank 0 publishes under "tcp/all", and connects the full mesh. Returns once
// all size-1 connections are established and authenticated, or an error
// naming the peer rank and address that failed (DeadlineExceeded /
// Unavailable / Unauthenticated); InvalidArgument on every rank when a
// rank's published address is unusable.
//
// Also InvalidArgument for bad arguments or an unknown `iface`, and
// FailedPrecondition when a peer refuses this rank or job size. `store` is
// used only during the call.
absl::StatusOr<std::unique_ptr<Context>> CreateTcpContext(
    int rank, int size, Store* store, const TcpOptions& options);

}  // namespace hvd::transport

#endif  // HVD_CORE_TRANSPORT_TCP_TCP_CONTEXT_H_
