#include "core/bootstrap/elastic_client.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/common/thread_role.h"
#include "core/rendezvous/channel.h"
#include "proto/elastic.grpc.pb.h"
#include "proto/job_token.h"

namespace hvd::bootstrap {
namespace {

namespace pb = ::hvd::elastic;
using rendezvous::RendezvousCallError;

rendezvous::ClientTls TlsOf(const runtime::Config& config) {
  return {config.rendezvous_ca_pem, config.rendezvous_tls_name};
}

void AddToken(grpc::ClientContext* context, const runtime::Config& config) {
  context->AddMetadata(rendezvous::kJobTokenMetadataKey, config.token);
}

// The launcher's answer, checked: a rank outside its size would fail far
// from here, in the data plane's set-up.
absl::StatusOr<RoundAssignment> Assigned(const pb::JoinResponse& r,
                                         const std::string& address) {
  RoundAssignment a;
  a.round = r.round();
  a.rank = r.rank();
  a.size = r.size();
  a.local_rank = r.local_rank();
  a.local_size = r.local_size();
  a.cross_rank = r.cross_rank();
  a.cross_size = r.cross_size();
  if (a.round < 0 || a.rank < 0 || a.rank >= a.size || a.local_rank < 0 ||
      a.local_rank >= a.local_size || a.cross_rank < 0 ||
      a.cross_rank >= a.cross_size) {
    return absl::InternalError(absl::StrCat(
        "rendezvous ", address, ": Join: round ", a.round, " assigned rank ",
        a.rank, " of ", a.size, ", local rank ", a.local_rank, " of ",
        a.local_size, ", cross rank ", a.cross_rank, " of ", a.cross_size,
        ": not a valid place"));
  }
  return a;
}

absl::Status JoinError(const grpc::Status& status,
                       const std::string& address) {
  absl::Status error = RendezvousCallError(status, address, "Join");
  if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    return absl::UnimplementedError(absl::StrCat(
        error.message(),
        " (the server has no elastic service, but HVD_ELASTIC_WORKER_ID is "
        "set: start elastic jobs with hvdrun --min-np or "
        "--host-discovery-script)"));
  }
  return error;
}

// CANCELLED too: this client never cancels a Join itself, so that is the
// server shutting down with the call in flight (gRPC says UNAVAILABLE or
// CANCELLED depending on timing).
bool Transient(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE ||
         status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
         status.error_code() == grpc::StatusCode::CANCELLED;
}

}  // namespace

absl::StatusOr<RoundAssignment> JoinRound(const runtime::Config& config,
                                          int last_round,
                                          const ElasticClientOptions& options) {
  const std::string& address = config.rendezvous_addr;
  auto channel = rendezvous::DialRendezvous(
      address, config.token, TlsOf(config), config.start_timeout);
  if (!channel.ok()) return channel.status();
  std::unique_ptr<pb::Elastic::Stub> stub = pb::Elastic::NewStub(*channel);
  pb::JoinRequest request;
  request.set_worker_id(config.elastic_worker_id);
  request.set_last_round(last_round);
  request.set_pid(getpid());
  request.set_wait_ms(static_cast<int32_t>(
      absl::ToInt64Milliseconds(options.join_wait_per_rpc)));
  // No deadline of our own: the launcher may wait long for hosts. Only a
  // server gone for longer than the start timeout ends the wait.
  absl::Time last_answer = absl::Now();
  while (true) {
    grpc::ClientContext context;
    AddToken(&context, config);
    const absl::Time asked = absl::Now();
    context.set_deadline(absl::ToChronoTime(
        asked + options.join_wait_per_rpc + options.rpc_grace));
    pb::JoinResponse response;
    const grpc::Status status = stub->Join(&context, request, &response);
    if (status.ok()) {
      last_answer = absl::Now();
      switch (response.outcome()) {
        case pb::JoinResponse::ASSIGNED:
          return Assigned(response, address);
        case pb::JoinResponse::EXIT:
          return absl::CancelledError(absl::StrCat(
              "removed from the elastic job: ", response.reason()));
        default:  // PENDING: ask again, at once if the server did wait
          if (last_answer - asked < options.join_wait_per_rpc / 2) {
            absl::SleepFor(options.retry_pause);
          }
          continue;
      }
    }
    if (!Transient(status)) return JoinError(status, address);
    const absl::Duration silent = absl::Now() - last_answer;
    if (silent > config.start_timeout) {
      return absl::UnavailableError(absl::StrCat(
          "rendezvous ", address, ": Join: no answer for ",
          absl::FormatDuration(absl::Trunc(silent, absl::Seconds(1))),
          " (HVD_START_TIMEOUT is ",
          absl::FormatDuration(config.start_timeout),
          "): ", status.error_message()));
    }
    absl::SleepFor(options.retry_pause);
  }
}

// One Watch call of one round.
class RoundWatcher::Call {
 public:
  Call(std::shared_ptr<grpc::Channel> channel, const runtime::Config& config,
       int round)
      : stub_(pb::Elastic::NewStub(std::move(channel))),
        address_(config.rendezvous_addr),
        round_(round) {
    AddToken(&context_, config);
    request_.set_worker_id(config.elastic_worker_id);
    request_.set_round(round);
  }

  int round() const { return round_; }
  const std::string& address() const { return address_; }

  // Reads events until the stream ends; its final status.
  template <typename OnEvent>
  grpc::Status Run(OnEvent on_event) {
    std::unique_ptr<grpc::ClientReader<pb::RoundEvent>> reader =
        stub_->Watch(&context_, request_);
    pb::RoundEvent event;
    while (reader->Read(&event)) on_event(event);
    return reader->Finish();
  }

  // Any thread, before or during Run: Run then returns at once.
  void Cancel() { context_.TryCancel(); }

 private:
  std::unique_ptr<pb::Elastic::Stub> stub_;
  const std::string address_;
  const int round_;
  pb::WatchRequest request_;
  grpc::ClientContext context_;
};

absl::StatusOr<std::unique_ptr<RoundWatcher>> RoundWatcher::Start(
    const runtime::Config& config, int round, RoundEvents events) {
  auto channel = rendezvous::NewRendezvousChannel(
      config.rendezvous_addr, config.token, TlsOf(config));
  if (!channel.ok()) return channel.status();
  auto call = std::make_unique<Call>(*std::move(channel), config, round);
  std::unique_ptr<RoundWatcher> watcher(
      new RoundWatcher(std::move(call), std::move(events)));
  watcher->thread_ = std::thread([w = watcher.get()] {
    NameThisThread("hvd-elastic");
    w->Run();
  });
  return watcher;
}

RoundWatcher::RoundWatcher(std::unique_ptr<Call> call, RoundEvents events)
    : call_(std::move(call)), events_(std::move(events)) {}

RoundWatcher::~RoundWatcher() { Stop(); }

void RoundWatcher::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  call_->Cancel();
  if (thread_.joinable()) thread_.join();
}

void RoundWatcher::Run() {
  auto stopped = [this] {
    absl::MutexLock lock(&mu_);
    return stopped_;
  };
  bool aborted = false;
  auto abort = [&](const std::string& reason) {
    if (aborted || stopped()) return;
    aborted = true;
    if (events_.on_abort) events_.on_abort(reason);
  };
  const grpc::Status status = call_->Run([&](const pb::RoundEvent& event) {
    if (event.kind() == pb::RoundEvent::ABORT) {
      abort(event.reason().empty()
                ? absl::StrCat("round ", call_->round(), " was aborted")
                : event.reason());
    } else if (event.kind() == pb::RoundEvent::HOSTS_UPDATED &&
               events_.on_hosts_updated && !stopped()) {
      events_.on_hosts_updated(event.seq(), event.added(), event.removed());
    }
  });
  // The stream ends with the round, or when the launcher is gone.
  if (status.ok()) {
    abort(absl::StrCat("the launcher ended round ", call_->round()));
  } else {
    abort(absl::StrCat(
        "lost the launcher: ",
        RendezvousCallError(status, call_->address(),
                            absl::StrCat("Watch round ", call_->round()))
            .message()));
  }
}

}  // namespace hvd::bootstrap
