#include "core/rendezvous/grpc_store.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <random>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/rendezvous/channel.h"
#include "proto/job_token.h"
#include "proto/rendezvous.grpc.pb.h"
#include "proto/rendezvous_bounds.h"

namespace hvd {
namespace {

namespace pb = ::hvd::rendezvous;
using rendezvous::kBarrierArrivedKey;
using rendezvous::kMaxKeysPerGetMany;
using rendezvous::RendezvousCallError;

// The network's allowance on top of a blocking RPC's server-side wait.
constexpr absl::Duration kMaxWaitGrace = absl::Seconds(5);
// Between tries of a Register the server did not take yet.
constexpr absl::Duration kRegisterRetryPause = absl::Milliseconds(50);

std::string Quote(absl::string_view bytes) {
  return absl::StrCat("'", absl::CHexEscape(bytes), "'");
}

std::string RandomId() {
  std::random_device device;
  const uint64_t id = (uint64_t{device()} << 32) | device();
  return absl::StrCat(absl::Hex(id, absl::kZeroPad16));
}

int64_t CeilMilliseconds(absl::Duration d) {
  return absl::ToInt64Milliseconds(absl::Ceil(d, absl::Milliseconds(1)));
}

// How many had arrived at a barrier, as the server says in the trailing
// metadata of a try that timed out; "not all" when it does not say.
std::string BarrierArrivals(const grpc::ClientContext& context) {
  const auto& trailing = context.GetServerTrailingMetadata();
  auto it = trailing.find(kBarrierArrivedKey);
  if (it == trailing.end()) return "not all";
  return std::string(it->second.data(), it->second.size());
}

}  // namespace

class GrpcStore::Rpc {
 public:
  explicit Rpc(std::shared_ptr<grpc::Channel> channel)
      : channel_(std::move(channel)), stub_(pb::Rendezvous::NewStub(channel_)) {}

  pb::Rendezvous::Stub& stub() { return *stub_; }

  // A context carrying the job token, with deadline now + `timeout`.
  static void Prepare(grpc::ClientContext* context, const std::string& token,
                      absl::Duration timeout) {
    context->AddMetadata(rendezvous::kJobTokenMetadataKey, token);
    context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  }

  // A blocking call (Get, Barrier) made in slices until `deadline`: each
  // try asks the server to wait at most the rest of the wait, capped at
  // options.max_wait_per_rpc (`call(context, timeout_ms)` puts timeout_ms
  // in its request), and gives the answer a grace of rpc_timeout (at most
  // kMaxWaitGrace) on top. Tries again while the server answers
  // DEADLINE_EXCEEDED before `deadline`; returns the last try's status.
  static grpc::Status CallInSlices(
      const std::string& token, const GrpcStoreOptions& options,
      absl::Time deadline,
      absl::FunctionRef<grpc::Status(grpc::ClientContext*, int64_t)> call) {
    const absl::Duration grace = std::min(options.rpc_timeout, kMaxWaitGrace);
    while (true) {
      const absl::Duration slice =
          std::clamp(deadline - absl::Now(), absl::ZeroDuration(),
                     options.max_wait_per_rpc);
      grpc::ClientContext context;
      Prepare(&context, token, slice + grace);
      grpc::Status status = call(&context, CeilMilliseconds(slice));
      if (status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED ||
          absl::Now() >= deadline) {
        return status;
      }
    }
  }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::Rendezvous::Stub> stub_;
};

absl::StatusOr<std::unique_ptr<GrpcStore>> GrpcStore::Connect(
    std::string address, std::string token, absl::Duration timeout,
    GrpcStoreOptions options) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      rendezvous::DialRendezvous(address, token, options.tls, timeout);
  if (!channel.ok()) return channel.status();
  return std::unique_ptr<GrpcStore>(
      new GrpcStore(std::move(address), std::move(token), options,
                    std::make_unique<Rpc>(*std::move(channel))));
}

GrpcStore::GrpcStore(std::string address, std::string token,
                     GrpcStoreOptions options, std::unique_ptr<Rpc> rpc)
    : address_(std::move(address)),
      token_(std::move(token)),
      options_(options),
      rpc_(std::move(rpc)),
      instance_id_(RandomId()) {}

GrpcStore::~GrpcStore() = default;

absl::StatusOr<Registration> GrpcStore::Register(
    int rank, absl::string_view hostname, int64_t pid,
    const std::vector<std::string>& addresses, int init_count,
    absl::Duration timeout) {
  pb::RegisterRequest request;
  request.set_rank(rank);
  request.set_hostname(std::string(hostname));
  request.set_pid(pid);
  for (const std::string& a : addresses) request.add_addresses(a);
  request.set_init_count(init_count);
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    // A try within what is left of the wait (the whole rpc_timeout for one
    // try), so that the wait ends when it says.
    const absl::Duration this_try =
        timeout <= absl::ZeroDuration()
            ? options_.rpc_timeout
            : std::min(options_.rpc_timeout,
                       std::max(deadline - absl::Now(), kRegisterRetryPause));
    grpc::ClientContext context;
    Rpc::Prepare(&context, token_, this_try);
    pb::RegisterResponse response;
    grpc::Status status = rpc_->stub().Register(&context, request, &response);
    if (status.ok()) return Registration{response.rank(), response.size()};
    // A server for another init of rank 0's process (ABORTED), one shutting
    // down (its calls CANCELLED), or none while rank 0 replaces it
    // (UNAVAILABLE). Nothing here cancels the call itself.
    const bool passing = status.error_code() == grpc::StatusCode::ABORTED ||
                         status.error_code() == grpc::StatusCode::CANCELLED ||
                         status.error_code() == grpc::StatusCode::UNAVAILABLE;
    if (!passing || absl::Now() + kRegisterRetryPause >= deadline) {
      return RendezvousCallError(status, address_, "Register");
    }
    absl::SleepFor(kRegisterRetryPause);
  }
}

absl::Status GrpcStore::Set(absl::string_view key, absl::string_view value) {
  pb::SetRequest request;
  request.set_key(std::string(key));
  request.set_value(std::string(value));
  grpc::ClientContext context;
  Rpc::Prepare(&context, token_, options_.rpc_timeout);
  pb::SetResponse response;
  grpc::Status status = rpc_->stub().Set(&context, request, &response);
  if (!status.ok()) {
    return RendezvousCallError(status, address_,
                               absl::StrCat("Set ", Quote(key)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> GrpcStore::Get(absl::string_view key,
                                           absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  pb::GetRequest request;
  request.set_key(std::string(key));
  pb::GetResponse response;
  const grpc::Status status = Rpc::CallInSlices(
      token_, options_, deadline,
      [&](grpc::ClientContext* context, int64_t timeout_ms) {
        request.set_timeout_ms(timeout_ms);
        response.Clear();
        return rpc_->stub().Get(context, request, &response);
      });
  if (status.ok()) return std::move(*response.mutable_value());
  if (status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
    return RendezvousCallError(status, address_,
                               absl::StrCat("Get ", Quote(key)));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("rendezvous ", address_, ": key ", Quote(key),
                   " not set within ", absl::FormatDuration(timeout)));
}

absl::StatusOr<std::vector<std::string>> GrpcStore::GetMany(
    const std::vector<std::string>& keys, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<std::string> values;
  values.reserve(keys.size());
  while (values.size() < keys.size()) {
    const size_t first = values.size();
    const size_t count =
        std::min(keys.size() - first, size_t{kMaxKeysPerGetMany});
    pb::GetManyRequest request;
    for (size_t i = first; i < first + count; ++i) request.add_keys(keys[i]);
    pb::GetManyResponse response;
    const grpc::Status status = Rpc::CallInSlices(
        token_, options_, deadline,
        [&](grpc::ClientContext* context, int64_t timeout_ms) {
          request.set_timeout_ms(timeout_ms);
          response.Clear();
          return rpc_->stub().GetMany(context, request, &response);
        });
    if (status.ok() && response.values_size() == 0) {
      return absl::InternalError(absl::StrCat(
          "rendezvous ", address_, ": GetMany answered no value for ", count,
          " keys"));
    }
    if (status.ok()) {
      for (std::string& v : *response.mutable_values()) {
        if (values.size() == first + count) break;
        values.push_back(std::move(v));
      }
      continue;
    }
    const std::string what =
        absl::StrCat("GetMany of ", count, " keys from ", Quote(keys[first]));
    if (status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
      return RendezvousCallError(status, address_, what);
    }
    return absl::DeadlineExceededError(absl::StrCat(
        "rendezvous ", address_, ": ", status.error_message(), " (", what,
        ", ", absl::FormatDuration(timeout), " in all)"));
  }
  return values;
}

absl::Status GrpcStore::Barrier(absl::string_view name, int count,
                                absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  pb::BarrierRequest request;
  request.set_name(std::string(name));
  request.set_count(count);
  request.set_participant(
      absl::StrCat(instance_id_, "-", next_participant_.fetch_add(1)));
  std::string arrived;  // as the last try that timed out said
  const grpc::Status status = Rpc::CallInSlices(
      token_, options_, deadline,
      [&](grpc::ClientContext* context, int64_t timeout_ms) {
        request.set_timeout_ms(timeout_ms);
        pb::BarrierResponse response;
        grpc::Status s = rpc_->stub().Barrier(context, request, &response);
        if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
          arrived = BarrierArrivals(*context);
        }
        return s;
      });
  if (status.ok()) return absl::OkStatus();
  if (status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
    return RendezvousCallError(status, address_,
                               absl::StrCat("Barrier ", Quote(name)));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "rendezvous ", address_, ": barrier ", Quote(name), ": ", arrived,
      " of ", count, " arrived within ", absl::FormatDuration(timeout)));
}

}  // namespace hvd
