// The gRPC channel every client of a job's rendezvous server dials (the
// store, the elastic client): no HTTP proxy, quick reconnects while the
// server is not up yet, TLS when the client was given a CA. Every call on it
// carries the job token (proto/job_token.h).
//
// Thread-safe: plain functions of their arguments.
#ifndef HVD_CORE_RENDEZVOUS_CHANNEL_H_
#define HVD_CORE_RENDEZVOUS_CHANNEL_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/rendezvous/tls.h"

namespace grpc {
class Channel;
class Status;
}  // namespace grpc

namespace hvd::rendezvous {

// A channel to `address` ("host:port"), not yet connected. InvalidArgument
// for an empty address or a token gRPC metadata cannot carry. The token
// itself is only checked by the first RPC.
absl::StatusOr<std::shared_ptr<grpc::Channel>> NewRendezvousChannel(
    const std::string& address, absl::string_view token,
    const ClientTls& tls);

// NewRendezvousChannel, then waits until the channel is ready, at most
// `timeout`: Unavailable naming the address (and, over TLS, what to check)
// otherwise.
absl::StatusOr<std::shared_ptr<grpc::Channel>> DialRendezvous(
    const std::string& address, absl::string_view token,
    const ClientTls& tls, absl::Duration timeout);

// A failed call as an absl::Status: gRPC's code, and a message naming the
// server and the call ("rendezvous 10.0.0.1:29500: Set 'k': ...").
absl::Status RendezvousCallError(const grpc::Status& status,
                                 absl::string_view address,
                                 absl::string_view call);

}  // namespace hvd::rendezvous

#endif  // HVD_CORE_RENDEZVOUS_CHANNEL_H_
