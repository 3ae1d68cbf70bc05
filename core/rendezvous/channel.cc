#include "core/rendezvous/channel.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "proto/job_token.h"

namespace hvd::rendezvous {
namespace {

const char* StateName(grpc_connectivity_state state) {
  switch (state) {
    case GRPC_CHANNEL_IDLE: return "idle";
    case GRPC_CHANNEL_CONNECTING: return "connecting";
    case GRPC_CHANNEL_READY: return "ready";
    case GRPC_CHANNEL_TRANSIENT_FAILURE: return "connection failing";
    case GRPC_CHANNEL_SHUTDOWN: return "shut down";
  }
  return "unknown";
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::Channel>> NewRendezvousChannel(
    const std::string& address, absl::string_view token,
    const ClientTls& tls) {
  if (address.empty()) {
    return absl::InvalidArgumentError("rendezvous address is empty");
  }
  if (absl::Status s = ValidateJobToken(token); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous ", address, ": ", s.message()));
  }
  grpc::ChannelArguments args;
  // A cluster's http_proxy must not capture traffic to the launcher.
  args.SetInt(GRPC_ARG_ENABLE_HTTP_PROXY, 0);
  // Workers may start before the server listens: retry connecting often.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      ChannelCredentials(tls, &args);
  return grpc::CreateCustomChannel(address, credentials, args);
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> DialRendezvous(
    const std::string& address, absl::string_view token,
    const ClientTls& tls, absl::Duration timeout) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> made =
      NewRendezvousChannel(address, token, tls);
  if (!made.ok()) return made.status();
  std::shared_ptr<grpc::Channel> channel = *std::move(made);
  if (!channel->WaitForConnected(absl::ToChronoTime(absl::Now() + timeout))) {
    return absl::UnavailableError(absl::StrCat(
        "rendezvous ", address, ": not reachable within ",
        absl::FormatDuration(timeout), " (",
        StateName(channel->GetState(false)), ")",
        tls.enabled()
            ? "; over TLS: is the server up with a certificate signed by "
              "the CA given (HVD_RENDEZVOUS_CA)?"
            : ""));
  }
  return channel;
}

absl::Status RendezvousCallError(const grpc::Status& status,
                                 absl::string_view address,
                                 absl::string_view call) {
  return absl::Status(
      static_cast<absl::StatusCode>(status.error_code()),
      absl::StrCat("rendezvous ", address, ": ", call, ": ",
                   status.error_message()));
}

}  // namespace hvd::rendezvous
