// How a job ends: agents lost (silent past the heartbeat timeout, stream
// gone, agent process exited), the first failure and the Terminate it sends,
// and the Shutdown that every ending goes through.
#include "launcher/job.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "launcher/agent_conn.h"
#include "launcher/job_host.h"
#include "launcher/job_messages.h"

namespace hvd {
namespace launcher {

// ---- Lost agents ------------------------------------------------------------

void Job::AgentProcessExited(int h, std::string why) {
  absl::MutexLock lock(&mu_);
  hosts_[h].process_running = false;
  AgentEndedLocked(h, why);
}

void Job::OnAgentBelowEnded(int parent, const AgentEnded& ended) {
  const int h = ended.host_index();
  if (h < 0 || static_cast<size_t>(h) >= hosts_.size() ||
      AgentParent(h) != parent) {
    Say(absl::StrCat("hvdrun: warning: the agent of ", hosts_[parent].name,
                     " reported the end of an agent it did not start (host #",
                     h, "); ignored"));
    return;
  }
  AgentEndedLocked(h, absl::StrCat(ended.why(), " (started by the agent of ",
                                   hosts_[parent].name, ")"));
}

void Job::AgentEndedLocked(int h, const std::string& why) {
  JobHost& host = hosts_[h];
  wake_ = true;
  if (host.shutdown_sent) return;
  HostLost(h, host.joined ? absl::StrCat("hvd-agent ended unexpectedly: ", why)
                          : absl::StrCat("could not start hvd-agent: ", why));
}

void Job::AgentStartFailed(int h, std::string why) {
  absl::MutexLock lock(&mu_);
  hosts_[h].process_running = false;
  wake_ = true;
  HostLost(h, absl::StrCat("could not start hvd-agent: ", why));
}

void Job::Heartbeats(absl::Time now) {
  if (now >= next_heartbeat_) {
    next_heartbeat_ = now + config_.heartbeat_interval;
    for (AgentConn* c : conns_) {
      c->AssertHeld();
      c->Queue(HeartbeatMessage());
    }
  }
  for (size_t h = 0; h < hosts_.size(); ++h) {
    AgentConn* c = hosts_[h].conn;
    if (c == nullptr || hosts_[h].shutdown_sent) continue;
    c->AssertHeld();
    if (now - c->last_heard() > config_.heartbeat_timeout) {
      HostLost(static_cast<int>(h),
               absl::StrCat("no heartbeat from hvd-agent for ",
                            FormatSeconds(now - c->last_heard())));
    }
  }
}

void Job::OnStreamEnded(AgentConn* conn) {
  conn->AssertHeld();
  const int h = conn->host();
  JobHost& host = hosts_[h];
  wake_ = true;
  if (host.conn == conn) host.conn = nullptr;
  if (host.shutdown_sent || host.lost) return;
  if (config_.orchestrated && !host.in_job) {
    host.lost = true;  // left before the job formed: its slots no longer count
    if (config_.verbose) {
      Say(absl::StrCat("hvdrun: agent ", host.name, " left before the job "
                       "started"));
    }
    return;
  }
  HostLost(h, "lost the connection to hvd-agent");
}

void Job::HostLost(int h, const std::string& why) {
  JobHost& host = hosts_[h];
  if (host.lost || host.shutdown_sent) return;
  host.lost = true;
  if (host.conn != nullptr) {
    host.conn->AssertHeld();
    host.conn->Cancel();
  }
  if (config_.orchestrated && !host.in_job) return;
  if (config_.elastic != nullptr && phase_ < Phase::kTerminating) {
    config_.elastic->OnHostLost(*this, h, why);
    return;
  }
  JobFailure failure{1, absl::StrCat("hvdrun: host ", host.name, ": ", why)};
  if (AgentParent(h) < 0) {
    Fail(failure.code, failure.message);
    return;
  }
  // An agent started by another goes when that one does, and may be seen
  // gone first: held for the cause, a lost agent above it, to be named.
  const bool held_is_below =
      held_failure_.has_value() && held_host_ >= 0 && IsAbove(h, held_host_);
  if (!held_failure_.has_value() || held_is_below) {
    held_failure_ = std::move(failure);
    held_host_ = h;
    held_until_ = os_->Now() + kCauseGrace;
  }
}

bool Job::IsAbove(int above, int host) const {
  for (int h = AgentParent(host); h >= 0; h = AgentParent(h)) {
    if (h == above) return true;
  }
  return false;
}

// ---- The first failure, termination and shutdown ----------------------------

void Job::Interrupt(int sig) {
  absl::MutexLock lock(&mu_);
  if (signal_ == 0) signal_ = sig;
  ++signals_;
  wake_ = true;
}

void Job::Fail(int code, const std::string& message) {
  if (failed_ || phase_ >= Phase::kShutdown) return;
  failed_ = true;
  failure_ = message;
  exit_code_ = code;
  Say(message + StoppedNote());
  if (phase_ != Phase::kRunning) {
    BeginShutdown(code);
    return;
  }
  phase_ = Phase::kTerminating;
  phase_deadline_ = os_->Now() + config_.kill_grace + absl::Seconds(5);
  for (int h : InJob()) Send(h, TerminateMessage(message));
}

void Job::BeginShutdown(int code) {
  exit_code_ = code;
  phase_ = Phase::kShutdown;
  phase_deadline_ = os_->Now() + config_.kill_grace + absl::Seconds(5);
  for (size_t h = 0; h < hosts_.size(); ++h) {
    if (hosts_[h].shutdown_sent) continue;
    Send(static_cast<int>(h), ShutdownMessage(code));
    hosts_[h].shutdown_sent = true;
  }
}

void Job::StepTerminating(absl::Time now) {
  if (AllWorkersExited() || now >= phase_deadline_) BeginShutdown(exit_code_);
}

void Job::StepShutdown(absl::Time now) {
  // Agents that joined were told to shut down: wait for them to go. Those
  // that never joined are ended by whoever started them, and a lost one is
  // not waited for either: it may be cut off for good.
  bool gone = true;
  for (const JobHost& h : hosts_) {
    if (h.joined && !h.lost) {
      gone = gone && h.conn == nullptr && !h.process_running;
    }
  }
  if (gone || now >= phase_deadline_) phase_ = Phase::kDone;
}

bool Job::AllWorkersExited() const {
  for (int h : InJob()) {
    const JobHost& host = hosts_[h];
    if (!host.lost && host.exited.size() < host.workers.size()) return false;
  }
  return true;
}

Job::View Job::Glance() const {
  absl::MutexLock lock(&mu_);
  View v;
  v.phase = phase_ < Phase::kRunning   ? "starting"
            : phase_ == Phase::kRunning ? "running"
            : phase_ == Phase::kDone    ? "ended"
                                        : "ending";
  v.failure = failure_;
  for (const JobHost& h : hosts_) {
    if (!h.in_job) continue;
    for (const WorkerSlot& w : h.workers) {
      RankView r{w.rank, h.name, "running"};
      if (auto it = h.ended.find(w.rank); it != h.ended.end()) {
        r.state = it->second;
      } else if (h.lost) {
        r.state = "lost with its host";
      } else if (h.stopped.count(w.rank)) {
        r.state = "stopped";
      } else if (phase_ < Phase::kRunning) {
        r.state = "starting";
      }
      v.ranks.push_back(std::move(r));
    }
  }
  std::sort(v.ranks.begin(), v.ranks.end(),
            [](const RankView& a, const RankView& b) { return a.rank < b.rank; });
  return v;
}

void Job::Linger(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  const int seen = signals_;
  auto signalled = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return signals_ != seen;
  };
  mu_.AwaitWithTimeout(absl::Condition(&signalled), d);
}

void Job::CloseStreams() {
  absl::MutexLock lock(&mu_);
  for (AgentConn* c : conns_) {
    c->AssertHeld();
    c->Close();
  }
}

}  // namespace launcher
}  // namespace hvd
