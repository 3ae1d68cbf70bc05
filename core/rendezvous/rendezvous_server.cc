#include "core/rendezvous/rendezvous_server.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/common/logging.h"
#include "core/rendezvous/rendezvous_server_impl.h"
#include "proto/job_token.h"

namespace hvd {
namespace rendezvous_internal {

grpc::Status ToGrpc(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

grpc::Status Refused(grpc::StatusCode code, absl::string_view what) {
  return grpc::Status(code, std::string(what));
}

std::string Quote(absl::string_view bytes) {
  constexpr size_t kShown = 64;
  if (bytes.size() <= kShown) {
    return absl::StrCat("'", absl::CHexEscape(bytes), "'");
  }
  return absl::StrCat("'", absl::CHexEscape(bytes.substr(0, kShown)), "...' (",
                      bytes.size(), " bytes)");
}

}  // namespace rendezvous_internal

namespace {

using rendezvous_internal::ToGrpc;
namespace pb = ::hvd::rendezvous;

// How long Shutdown lets in-flight calls finish before cancelling them.
constexpr absl::Duration kShutdownGrace = absl::Seconds(2);

std::string Describe(const WorkerInfo& w) {
  return absl::StrCat(w.hostname, " pid ", w.pid, " (", w.peer, ")");
}

}  // namespace

RendezvousServer::Impl::Impl(RendezvousServerOptions options)
    : options_(std::move(options)),
      max_blocked_calls_(options_.limits.max_blocked_calls > 0
                             ? options_.limits.max_blocked_calls
                         : options_.size > 0 ? 64 + 2 * options_.size
                                             : 256),
      check_(std::make_shared<rendezvous_internal::TokenCheck>(
          options_.token, options_.rejection_log_interval)) {}

RendezvousServer::Impl::~Impl() { Shutdown(); }

absl::Status RendezvousServer::Impl::Start() {
  absl::MutexLock lock(&lifecycle_mu_);
  if (started_) {
    return absl::FailedPreconditionError("rendezvous server: already started");
  }
  if (absl::Status s = rendezvous::ValidateJobToken(options_.token); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous server: ", s.message()));
  }
  if (options_.size < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rendezvous server: job size ", options_.size, " is negative"));
  }
  auto guard = std::make_unique<rendezvous_internal::TokenGuard>(check_);
  for (grpc::Service* service : options_.extra_services) {
    if (absl::Status s = guard->Guard(service); !s.ok()) return s;
  }

  grpc::ServerBuilder builder;
  // gRPC sets SO_REUSEPORT by default, which would let a second server share
  // an explicitly chosen port and steal half the connections.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // A connection with no call in flight is closed after this long (clients
  // reconnect when they next call); one that only sent a preface, too.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                             static_cast<int>(absl::ToInt64Milliseconds(
                                 options_.idle_connection_timeout)));
  builder.AddListeningPort(options_.address,
                           rendezvous::ServerCredentials(options_.tls), &port_);
  for (grpc::Service* service : options_.extra_services) {
    builder.RegisterService(service);
  }
  builder.RegisterCallbackGenericService(this);
  // A long call to an extra service (a worker's stream) holds a thread.
  // gRPC keeps at most MAX_POLLERS idle threads (2 by default) and ends the
  // rest as their calls return, so a start-up wave of such calls would
  // create and end a thread for each. Idle threads beyond the minimum still
  // end after gRPC's poll timeout (10 s).
  builder.SetSyncServerOption(
      grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, max_blocked_calls_);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port_ == 0) {
    port_ = 0;
    return absl::UnavailableError(absl::StrCat(
        "rendezvous server: cannot serve on ", options_.address,
        " (address in use or invalid, or a service registered twice)"));
  }
  server_ = std::move(server);
  guard_ = std::move(guard);
  timer_ = std::thread([this] { ExpireWaits(); });
  started_ = true;
  HVD_LOG(INFO) << "rendezvous server listening on " << options_.address
                << " (port " << port_ << ")";
  return absl::OkStatus();
}

void RendezvousServer::Impl::Shutdown() {
  absl::MutexLock lifecycle(&lifecycle_mu_);
  Answers waiting;
  {
    absl::MutexLock lock(&mu_);
    shutting_down_ = true;
    timer_stop_ = true;
    timer_wake_.Signal();
    while (!deadlines_.empty()) {
      Call* call = deadlines_.begin()->second;
      UnfileLocked(*call);
      waiting.emplace_back(call, ShuttingDown());
    }
  }
  Deliver(waiting);
  if (timer_.joinable()) timer_.join();
  if (server_ == nullptr) return;
  server_->Shutdown(absl::ToChronoTime(absl::Now() + kShutdownGrace));
  server_.reset();
  guard_.reset();  // the server is gone: give the services their handlers back
}

int RendezvousServer::Impl::port() const {
  absl::MutexLock lock(&lifecycle_mu_);
  return port_;
}

std::vector<WorkerInfo> RendezvousServer::Impl::Workers() const {
  absl::MutexLock lock(&mu_);
  std::vector<WorkerInfo> workers;
  workers.reserve(workers_.size());
  for (const auto& [rank, info] : workers_) workers.push_back(info);
  return workers;
}

std::optional<std::string> RendezvousServer::Impl::Value(
    absl::string_view key) const {
  absl::MutexLock lock(&mu_);
  auto it = values_.find(std::string(key));
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::vector<int> RendezvousServer::Impl::WaitForRanks(
    int size, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto all_there = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (shutting_down_) return true;
    for (int r = 0; r < size; ++r) {
      if (workers_.count(r) == 0) return false;
    }
    return true;
  };
  mu_.AwaitWithTimeout(absl::Condition(&all_there), timeout);
  std::vector<int> missing;
  for (int r = 0; r < size; ++r) {
    if (workers_.count(r) == 0) missing.push_back(r);
  }
  return missing;
}

int RendezvousServer::Impl::BlockedCalls() const {
  absl::MutexLock lock(&mu_);
  return blocked_;
}

bool RendezvousServer::Impl::WaitForBlockedCalls(int count,
                                                 absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return blocked_ == count;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
}

absl::StatusOr<bool> RendezvousServer::Impl::RegisterLocked(WorkerInfo* info) {
  const int size = options_.size;
  if (info->rank < -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", info->rank, " requested by ", Describe(*info),
                     " is invalid (-1 asks the server to assign one)"));
  }
  if (size > 0 && info->rank >= size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", info->rank, " requested by ", Describe(*info),
                     " is out of range for a job of size ", size));
  }
  // A retried Register: the same process again, for any rank (-1) or the
  // same one. Looked up, not scanned: thousands register at start-up.
  if (auto it = ranks_of_process_.find({info->hostname, info->pid});
      it != ranks_of_process_.end()) {
    const std::set<int>& ranks = it->second;
    if (info->rank == -1) {
      info->rank = *ranks.begin();
      return false;
    }
    if (ranks.count(info->rank) > 0) return false;
  }
  if (info->rank == -1) {
    // Ranks are never given back, so the lowest free one only moves up.
    while (workers_.count(lowest_free_rank_) > 0) ++lowest_free_rank_;
    if (size > 0 && lowest_free_rank_ >= size) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "all ", size, " ranks of the job are taken; none left for ",
          Describe(*info)));
    }
    info->rank = lowest_free_rank_;
  } else if (auto it = workers_.find(info->rank); it != workers_.end()) {
    return absl::AlreadyExistsError(absl::StrCat(
        "rank ", info->rank, " is already registered by ", Describe(it->second),
        "; ", Describe(*info), " claims it too"));
  }
  ranks_of_process_[{info->hostname, info->pid}].insert(info->rank);
  workers_[info->rank] = *info;
  return true;
}

void RendezvousServer::Impl::Register(Call& call,
                                      const pb::RegisterRequest& request) {
  WorkerInfo info;
  info.rank = request.rank();
  info.hostname = request.hostname();
  info.pid = request.pid();
  info.addresses.assign(request.addresses().begin(),
                        request.addresses().end());
  info.peer = call.context().peer();
  if (options_.init_count != 0 &&
      request.init_count() != options_.init_count) {
    call.Answer(grpc::Status(
        grpc::StatusCode::ABORTED,
        absl::StrCat("rank 0 serves this rendezvous for its hvd.init() number ",
                     options_.init_count, "; rank ", info.rank, " on ",
                     Describe(info), " is at its number ",
                     request.init_count(), " (every rank calls hvd.init() "
                     "as often as rank 0)")));
    return;
  }
  absl::StatusOr<bool> added;
  {
    absl::MutexLock lock(&mu_);
    added = RegisterLocked(&info);
  }
  if (!added.ok()) {
    call.Answer(ToGrpc(added.status()));
    return;
  }
  if (*added) {
    HVD_LOG(DEBUG) << "rendezvous: rank " << info.rank
                   << " registered: " << Describe(info);
    if (options_.on_register) options_.on_register(info);
  }
  auto& response = call.response<pb::RegisterResponse>();
  response.set_rank(info.rank);
  response.set_size(options_.size);
  call.Answer(grpc::Status::OK);
}

RendezvousServer::RendezvousServer(RendezvousServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

RendezvousServer::~RendezvousServer() { impl_->Shutdown(); }

absl::Status RendezvousServer::Start() { return impl_->Start(); }

int RendezvousServer::port() const { return impl_->port(); }

std::vector<WorkerInfo> RendezvousServer::Workers() const {
  return impl_->Workers();
}

std::optional<std::string> RendezvousServer::Value(
    absl::string_view key) const {
  return impl_->Value(key);
}

std::vector<int> RendezvousServer::WaitForRanks(int size,
                                                absl::Duration timeout) const {
  return impl_->WaitForRanks(size, timeout);
}

int RendezvousServer::BlockedCalls() const { return impl_->BlockedCalls(); }
bool RendezvousServer::WaitForBlockedCalls(int count,
                                           absl::Duration timeout) const {
  return impl_->WaitForBlockedCalls(count, timeout);
}

void RendezvousServer::Shutdown() { impl_->Shutdown(); }

}  // namespace hvd
