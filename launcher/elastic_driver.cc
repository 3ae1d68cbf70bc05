// The Elastic service and the job's calls into the driver. The rounds and
// the hosts are in elastic_membership.cc.
#include "launcher/elastic_driver.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "host/process.h"

namespace hvd {
namespace launcher {
namespace {

constexpr absl::Duration kMaxJoinWait = absl::Seconds(30);
constexpr absl::Duration kWatchPoll = absl::Seconds(1);

}  // namespace

std::vector<WorkerSlot> PlaceRanks(const std::vector<std::string>& host_of) {
  const int size = static_cast<int>(host_of.size());
  std::vector<WorkerSlot> places(size);
  std::map<std::string, int> on_host;  // ranks on each host
  for (const std::string& h : host_of) ++on_host[h];
  std::map<std::string, int> seen;
  for (int r = 0; r < size; ++r) {
    places[r].rank = r;
    places[r].local_rank = seen[host_of[r]]++;
    places[r].local_size = on_host[host_of[r]];
  }
  // Cross rank: the host's index among the hosts, in order of their first
  // rank, that have a rank of this local rank.
  for (int r = 0; r < size; ++r) {
    std::vector<std::string> hosts;
    for (int q = 0; q < size; ++q) {
      if (places[q].local_rank == places[r].local_rank) {
        if (host_of[q] == host_of[r]) {
          places[r].cross_rank = static_cast<int>(hosts.size());
        }
        hosts.push_back(host_of[q]);
      }
    }
    places[r].cross_size = static_cast<int>(hosts.size());
  }
  return places;
}

ElasticDriver::ElasticDriver(ElasticSettings settings,
                             HostDiscovery* discovery,
                             AgentStarterFn start_agent, host::Os* os)
    : settings_(std::move(settings)),
      discovery_(discovery),
      start_agent_(std::move(start_agent)),
      os_(os) {}

ElasticDriver::~ElasticDriver() = default;

void ElasticDriver::Stop() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
}

const ElasticDriver::Round* ElasticDriver::Current() const {
  return rounds_.empty() ? nullptr : &rounds_.back();
}

int ElasticDriver::RankIn(const Round& round, const std::string& id) {
  auto it = std::find(round.members.begin(), round.members.end(), id);
  return it == round.members.end()
             ? -1
             : static_cast<int>(it - round.members.begin());
}

elastic::JoinResponse ElasticDriver::Answer(
    const elastic::JoinRequest& request) {
  elastic::JoinResponse response;
  auto it = workers_.find(request.worker_id());
  if (it == workers_.end()) {
    response.set_outcome(elastic::JoinResponse::EXIT);
    response.set_reason(absl::StrCat("hvdrun knows no worker '",
                                     request.worker_id(), "'"));
    return response;
  }
  Worker& w = it->second;
  if (!w.leaving.empty()) {
    response.set_outcome(elastic::JoinResponse::EXIT);
    response.set_reason(w.leaving);
    return response;
  }
  const Round* current = Current();
  if (current != nullptr && !current->ended &&
      current->number == request.last_round() &&
      RankIn(*current, request.worker_id()) >= 0) {
    // A member left its round on its own: its collectives failed before
    // hvdrun heard of a loss. Every member must leave it too.
    EndRound(absl::StrCat(Describe(request.worker_id()), " left round ",
                          current->number, " (a collective failed there)"));
    OpenRound(os_->Now());
    current = Current();
  }
  if (current != nullptr && current->number > request.last_round()) {
    const int rank = RankIn(*current, request.worker_id());
    if (rank >= 0) {
      const WorkerSlot& p = current->places[rank];
      response.set_outcome(elastic::JoinResponse::ASSIGNED);
      response.set_round(current->number);
      response.set_rank(rank);
      response.set_size(static_cast<int>(current->members.size()));
      response.set_local_rank(p.local_rank);
      response.set_local_size(p.local_size);
      response.set_cross_rank(p.cross_rank);
      response.set_cross_size(p.cross_size);
      return response;
    }
  }
  if (forming_.has_value() && forming_->number > request.last_round()) {
    forming_->expected.insert(request.worker_id());
    forming_->joined.insert(request.worker_id());
  }
  response.set_outcome(elastic::JoinResponse::PENDING);
  return response;
}

grpc::Status ElasticDriver::Join(grpc::ServerContext* context,
                                 const elastic::JoinRequest* request,
                                 elastic::JoinResponse* response) {
  const absl::Duration wait =
      std::min(absl::Milliseconds(std::max(0, request->wait_ms())),
               kMaxJoinWait);
  const absl::Time deadline = absl::Now() + wait;
  absl::MutexLock lock(&mu_);
  while (true) {
    *response = Answer(*request);
    if (response->outcome() != elastic::JoinResponse::PENDING || stopping_ ||
        context->IsCancelled() || absl::Now() >= deadline) {
      return grpc::Status::OK;
    }
    const size_t rounds = rounds_.size();
    auto changed = [this, rounds]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return rounds_.size() != rounds || stopping_;
    };
    mu_.AwaitWithDeadline(absl::Condition(&changed),
                          std::min(deadline, absl::Now() + kWatchPoll));
  }
}

grpc::Status ElasticDriver::Watch(
    grpc::ServerContext* context, const elastic::WatchRequest* request,
    grpc::ServerWriter<elastic::RoundEvent>* writer) {
  const int number = request->round();
  size_t sent = 0;
  while (true) {
    std::vector<elastic::RoundEvent> events;
    bool over = false;
    {
      absl::MutexLock lock(&mu_);
      if (number < 0 || number >= static_cast<int>(rounds_.size())) {
        return grpc::Status(grpc::StatusCode::NOT_FOUND,
                            absl::StrCat("no round ", number, " yet"));
      }
      auto news = [this, number, sent]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return rounds_[number].events.size() > sent || stopping_;
      };
      mu_.AwaitWithTimeout(absl::Condition(&news), kWatchPoll);
      const Round& round = rounds_[number];
      events.assign(round.events.begin() + static_cast<long>(sent),
                    round.events.end());
      sent = round.events.size();
      over = stopping_ || (round.ended && events.empty());
    }
    for (const elastic::RoundEvent& e : events) {
      if (!writer->Write(e)) return grpc::Status::OK;
      if (e.kind() == elastic::RoundEvent::ABORT) return grpc::Status::OK;
    }
    if (over) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "hvdrun is ending the job");
    }
    if (context->IsCancelled()) return grpc::Status::CANCELLED;
  }
}

void ElasticDriver::Step(ElasticJobControl& job, absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (ended_) return;
  ApplyDiscovery(job, now);
  if (!ended_) TryForm(job, now);
  if (!ended_) CheckLimits(job, now);
  if (!ended_) ShutDownEmptyHosts(job);
  if (!ended_) CheckEnd(job);
}

void ElasticDriver::OnWorkerExit(ElasticJobControl& job, int h,
                                 const WorkerExit& exit) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(absl::StrCat("w", exit.rank()));
  if (it == workers_.end() || it->second.job_host != h) return;
  Worker& w = it->second;
  w.exited = true;
  if (!w.leaving.empty() || ended_) return;
  const Round* current = Current();
  const int rank = current ? RankIn(*current, it->first) : -1;
  const host::ExitStatus status{exit.exit_code(), exit.signal()};
  if (exit.start_error().empty() && status.ok()) {
    finishing_ = true;  // training is over: no further rounds
    return;
  }
  const int code = exit.start_error().empty() ? status.ShellCode() : 127;
  const std::string why = absl::StrCat(
      "worker ", it->first, " (",
      rank >= 0 ? absl::StrCat("rank ", rank, ", ") : "", "host ", w.host,
      ") ",
      exit.start_error().empty() ? status.ToString()
                                 : "could not start: " + exit.start_error());
  last_failure_code_ = code;
  if (finishing_) {
    ended_ = true;
    job.EndJob(code, absl::StrCat("hvdrun: ", why));
    return;
  }
  FailWorkerHost(job, h, why, os_->Now());
}

void ElasticDriver::OnHostLost(ElasticJobControl& job, int h,
                               const std::string& why) {
  absl::MutexLock lock(&mu_);
  if (ended_) return;
  std::string name;
  if (HostOfJobIndex(h, &name) == nullptr) return;
  FailWorkerHost(job, h, absl::StrCat("host ", name, ": ", why), os_->Now());
}

}  // namespace launcher
}  // namespace hvd
