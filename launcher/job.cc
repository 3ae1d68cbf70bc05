// Joining, the agents' messages, and the phases up to a running job. How the
// job ends is in job_end.cc.
#include "launcher/job.h"

#include <string.h>

#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "launcher/agent_conn.h"
#include "launcher/job_addresses.h"
#include "launcher/job_host.h"
#include "launcher/job_messages.h"

namespace hvd {
namespace launcher {
namespace {

grpc::Status ToGrpc(const absl::Status& s) {
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()),
                      std::string(s.message()));
}

}  // namespace

Job::Job(JobConfig config, OutputSink* sink, host::Os* os)
    : config_(std::move(config)), sink_(sink), os_(os), created_(os->Now()) {
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < config_.hosts.size(); ++i) {
    JobHost h;
    h.name = config_.hosts[i].name;
    h.workers = config_.hosts[i].workers;
    h.slots = static_cast<int>(h.workers.size());
    h.in_job = true;
    // An agent another agent starts is that one's process to wait for.
    h.process_running = AgentParent(static_cast<int>(i)) < 0;
    hosts_.push_back(std::move(h));
  }
}

Job::~Job() = default;

void Job::Say(const std::string& line) { sink_->Message(line); }

std::string Job::HostName(int host) const { return hosts_[host].name; }

int Job::AgentParent(int host) const {
  return static_cast<size_t>(host) < config_.agent_parents.size()
             ? config_.agent_parents[host]
             : -1;
}

std::vector<int> Job::InJob() const {
  std::vector<int> out;
  for (size_t i = 0; i < hosts_.size(); ++i) {
    if (hosts_[i].in_job) out.push_back(static_cast<int>(i));
  }
  return out;
}

void Job::Send(int host, LauncherMessage m) {
  AgentConn* c = hosts_[host].conn;
  if (c == nullptr) return;
  c->AssertHeld();
  c->Queue(std::move(m));
}

// ---- Joining and the agents' messages ---------------------------------------

grpc::Status Job::Attach(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<LauncherMessage, AgentMessage>* stream) {
  AgentMessage first;
  if (!stream->Read(&first)) return grpc::Status::OK;
  if (first.kind_case() != AgentMessage::kHello) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "the first message of an agent must be Hello");
  }
  AgentConn conn(&mu_, context, os_->Now());
  {
    absl::MutexLock lock(&mu_);
    absl::Status s = Join(&conn, first.hello());
    if (!s.ok()) return ToGrpc(s);
    conns_.insert(&conn);
  }
  conn.Serve(
      stream, [&](const AgentMessage& m) { OnMessage(&conn, m); },
      [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { OnStreamEnded(&conn); });
  absl::MutexLock lock(&mu_);
  conns_.erase(&conn);
  return grpc::Status::OK;
}

absl::Status Job::Join(AgentConn* conn, const Hello& hello) {
  absl::StatusOr<int> h =
      config_.orchestrated ? AdmitOrchestrated(hello) : AdmitLaunched(hello);
  if (!h.ok()) return h.status();
  JobHost& host = hosts_[*h];
  wake_ = true;
  host.joined = true;
  host.conn = conn;
  host.hello = hello;
  host.peer_ip = conn->peer_ip();
  conn->AssertHeld();
  conn->set_host(*h);
  Send(*h, WelcomeMessage(config_, *h));
  if (config_.verbose) {
    std::vector<std::string> ifs;
    for (const Interface& i : hello.interfaces()) {
      ifs.push_back(absl::StrCat(i.name(), " ", i.address()));
    }
    Say(absl::StrCat("hvdrun: host ", host.name, " joined after ",
                     FormatSeconds(os_->Now() - created_), " (agent pid ",
                     hello.pid(), ", from ", host.peer_ip, ", interfaces ",
                     absl::StrJoin(ifs, ", "), ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> Job::AdmitLaunched(const Hello& hello) {
  const int h = hello.host_index();
  if (h < 0 || h >= static_cast<int>(hosts_.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("no host with index ", h, " in this job"));
  }
  if (hosts_[h].joined) {
    return absl::AlreadyExistsError(
        absl::StrCat("an agent for host ", hosts_[h].name, " already joined"));
  }
  if (phase_ >= Phase::kTerminating) {
    return absl::FailedPreconditionError("the job is ending");
  }
  return h;
}

absl::StatusOr<int> Job::AdmitOrchestrated(const Hello& hello) {
  if (phase_ != Phase::kWaiting) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the job has already started with its ", config_.np, " slots"));
  }
  if (hello.slots() <= 0) {
    return absl::InvalidArgumentError("an agent must offer slots > 0");
  }
  if (config_.command.empty() && hello.command_size() == 0) {
    return absl::InvalidArgumentError(
        "no command: give one to hvd-agent or to hvdrun --rendezvous-only");
  }
  const int h = static_cast<int>(hosts_.size());
  JobHost host;
  host.name = hello.hostname().empty() ? absl::StrCat("agent", h)
                                       : hello.hostname();
  host.slots = hello.slots();
  hosts_.push_back(std::move(host));
  return h;
}

void Job::OnMessage(AgentConn* conn, const AgentMessage& m) {
  if (m.kind_case() == AgentMessage::kOutput) {
    OnOutput(conn, m.output());
    return;
  }
  absl::MutexLock lock(&mu_);
  conn->AssertHeld();
  conn->Heard(os_->Now());
  if (m.kind_case() != AgentMessage::kHeartbeat) wake_ = true;
  JobHost& host = hosts_[conn->host()];
  switch (m.kind_case()) {
    case AgentMessage::kProbeResult:
      OnProbeResult(host, m.probe_result());
      break;
    case AgentMessage::kStarted:
      ++host.started;
      if (config_.verbose && !m.started().cpus().empty()) {
        Say(absl::StrCat("hvdrun: rank ", m.started().rank(), " on ", host.name,
                         " runs on CPUs ", m.started().cpus()));
      }
      break;
    case AgentMessage::kStopped:
      OnStopped(host, m.stopped());
      break;
    case AgentMessage::kAgentEnded:
      OnAgentBelowEnded(conn->host(), m.agent_ended());
      break;
    case AgentMessage::kExit: {
      host.exited.insert(m.exit().rank());
      host.ended[m.exit().rank()] =
          m.exit().start_error().empty()
              ? host::ExitStatus{m.exit().exit_code(), m.exit().signal()}
                    .ToString()
              : absl::StrCat("could not start: ", m.exit().start_error());
      host.stopped.erase(m.exit().rank());
      if (config_.elastic != nullptr) {
        config_.elastic->OnWorkerExit(*this, conn->host(), m.exit());
        break;
      }
      std::optional<JobFailure> f = WorkerExitFailure(m.exit(), host.name);
      if (!f.has_value()) break;
      if (m.exit().signal() != 0 || !m.exit().start_error().empty()) {
        Fail(f->code, f->message);
      } else if (!held_failure_.has_value()) {
        held_failure_ = std::move(f);
        held_host_ = -1;
        held_until_ = os_->Now() + kCauseGrace;
      }
      break;
    }
    default:
      break;
  }
}

void Job::OnOutput(AgentConn* conn, const WorkerOutput& output) {
  // Printed outside the lock: a slow terminal must not stall the job.
  absl::Status s = sink_->Write(output.rank(), StreamOf(output), output.data());
  absl::MutexLock lock(&mu_);
  conn->AssertHeld();
  conn->Heard(os_->Now());
  if (!s.ok()) Fail(1, absl::StrCat("hvdrun: ", s.message()));
}

void Job::OnStopped(JobHost& host, const WorkerStopped& stopped) {
  const std::string who =
      absl::StrCat("rank ", stopped.rank(), " (host ", host.name, ")");
  if (stopped.stopped()) {
    host.stopped.insert(stopped.rank());
    Say(absl::StrCat("hvdrun: ", who, " is stopped (SIGSTOP, SIGTSTP or a "
                     "debugger): the other ranks wait for it until it is "
                     "continued (kill -CONT) or their timeout ends the job"));
  } else if (host.stopped.erase(stopped.rank()) > 0) {
    Say(absl::StrCat("hvdrun: ", who, " runs again"));
  }
}

std::string Job::StoppedNote() const {
  std::string note;
  for (const JobHost& host : hosts_) {
    for (int rank : host.stopped) {
      absl::StrAppend(&note, "; rank ", rank, " (host ", host.name,
                      ") was stopped at the time, which may be why");
    }
  }
  return note;
}

void Job::OnProbeResult(JobHost& host, const ProbeResult& result) {
  for (const ProbeResult::Entry& e : result.entries()) {
    host.reached[e.host_index()][e.address()] = e.reachable();
    ++host.probes_answered;
    if (!e.reachable() && config_.verbose) {
      Say(absl::StrCat("hvdrun: host ", host.name, " cannot reach ",
                       HostName(e.host_index()), " at ", e.error()));
    }
  }
}

// ---- The phases up to running -----------------------------------------------

int Job::Run() {
  absl::MutexLock lock(&mu_);
  start_deadline_ = config_.start_timeout == absl::InfiniteDuration()
                        ? absl::InfiniteFuture()
                        : created_ + config_.start_timeout;
  next_heartbeat_ = os_->Now() + config_.heartbeat_interval;
  while (phase_ != Phase::kDone) {
    // Woken early by any change; 20 ms bounds the reaction to timers.
    mu_.AwaitWithTimeout(absl::Condition(&wake_), absl::Milliseconds(20));
    wake_ = false;
    Step(os_->Now());
  }
  return exit_code_;
}

void Job::Step(absl::Time now) {
  if (signal_ != 0 && !failed_) {
    Fail(128 + signal_, absl::StrCat("hvdrun: got signal ", signal_, " (",
                                     strsignal(signal_), "); ending the job"));
  }
  if (held_failure_.has_value() && (now >= held_until_ || AllWorkersExited())) {
    Fail(held_failure_->code, held_failure_->message);  // no-op if failed_
    held_failure_.reset();
  }
  Heartbeats(now);
  if (config_.elastic != nullptr && phase_ < Phase::kTerminating) {
    StepElastic(now);
    return;
  }
  switch (phase_) {
    case Phase::kWaiting: return StepWaiting(now);
    case Phase::kProbing: return StepProbing(now);
    case Phase::kRunning: return StepRunning(now);
    case Phase::kTerminating: return StepTerminating(now);
    case Phase::kShutdown: return StepShutdown(now);
    case Phase::kDone: return;
  }
}

void Job::StepWaiting(absl::Time now) {
  if (!config_.orchestrated) {
    std::vector<std::string> missing;
    for (const JobHost& h : hosts_) {
      if (!h.joined) missing.push_back(h.name);
    }
    if (missing.empty()) {
      ChooseAddresses();
    } else if (now >= start_deadline_) {
      Fail(1, absl::StrCat("hvdrun: host", missing.size() > 1 ? "s " : " ",
                           absl::StrJoin(missing, ", "),
                           ": hvd-agent did not connect within ",
                           FormatSeconds(config_.start_timeout),
                           " (--start-timeout)"));
    }
    return;
  }
  int slots = 0;
  for (const JobHost& h : hosts_) {
    if (h.joined && !h.lost) slots += h.slots;
  }
  if (slots >= config_.np) {
    FormOrchestratedJob();
    ChooseAddresses();
  } else if (now >= start_deadline_) {
    Fail(1, absl::StrCat("hvdrun: only ", slots, " of ", config_.np,
                         " slots joined within ",
                         FormatSeconds(config_.start_timeout),
                         " (--start-timeout)"));
  }
}

void Job::StepProbing(absl::Time now) {
  bool all_in = true;
  for (int h : InJob()) {
    all_in = all_in && hosts_[h].probes_answered >= hosts_[h].probes_sent;
  }
  if (FinishProbing(/*final=*/all_in)) return;
  if (now >= start_deadline_) {
    Fail(1, absl::StrCat("hvdrun: agents did not finish probing each "
                         "other within ",
                         FormatSeconds(config_.start_timeout)));
  }
}

void Job::StepRunning(absl::Time now) {
  if (AllWorkersExited()) {
    BeginShutdown(0);
    return;
  }
  int started = 0;
  for (int h : InJob()) started += hosts_[h].started;
  if (started >= config_.np) {
    if (!all_started_said_ && config_.verbose) {
      Say(absl::StrCat("hvdrun: all ", config_.np, " workers started after ",
                       FormatSeconds(now - created_)));
    }
    all_started_said_ = true;
  } else if (now >= start_deadline_) {
    Fail(1, absl::StrCat("hvdrun: only ", started, " of ", config_.np,
                         " workers started within ",
                         FormatSeconds(config_.start_timeout)));
  }
}

void Job::FormOrchestratedJob() {
  std::vector<int> joined;
  std::vector<HostSlots> slots;
  for (size_t h = 0; h < hosts_.size(); ++h) {
    if (!hosts_[h].joined || hosts_[h].lost) continue;
    joined.push_back(static_cast<int>(h));
    slots.push_back({hosts_[h].name, hosts_[h].slots});
  }
  absl::StatusOr<std::vector<HostAssignment>> a =
      AssignRanks(slots, config_.np);
  if (!a.ok()) {  // cannot happen: slots >= np was checked
    Fail(1, absl::StrCat("hvdrun: ", a.status().message()));
    return;
  }
  for (size_t i = 0; i < joined.size(); ++i) {
    JobHost& host = hosts_[joined[i]];
    if (i >= a->size()) {
      // Not needed: told to go home now.
      Send(joined[i], ShutdownMessage(0));
      host.shutdown_sent = true;
      continue;
    }
    host.in_job = true;
    host.workers = (*a)[i].workers;
  }
}

void Job::ChooseAddresses() {
  std::vector<int> in_job = InJob();
  if (in_job.size() == 1 || !config_.network_interfaces.empty()) {
    if (UseNamedAddresses(in_job)) Launch();
    return;
  }
  StartProbing(in_job);
}

bool Job::UseNamedAddresses(const std::vector<int>& in_job) {
  for (int h : in_job) {
    JobHost& host = hosts_[h];
    if (config_.network_interfaces.empty()) {
      host.data_plane = "127.0.0.1";  // one host: loopback is right
      continue;
    }
    absl::StatusOr<std::string> address =
        NamedInterfaceAddress(host, config_.network_interfaces);
    if (!address.ok()) {
      Fail(1, absl::StrCat("hvdrun: ", address.status().message()));
      return false;
    }
    host.data_plane = *address;
  }
  return true;
}

void Job::StartProbing(const std::vector<int>& in_job) {
  // Several hosts: ask each which of the others' addresses it can reach.
  for (int h : in_job) hosts_[h].candidates = ProbeCandidates(hosts_[h]);
  for (int from : in_job) {
    LauncherMessage m;
    *m.mutable_probe() =
        MakeProbeRequest(hosts_, in_job, from, config_.probe_timeout);
    hosts_[from].probes_sent = m.probe().targets_size();
    hosts_[from].probes_answered = 0;
    Send(from, std::move(m));
  }
  phase_ = Phase::kProbing;
}

bool Job::FinishProbing(bool final) {
  std::vector<int> in_job = InJob();
  absl::StatusOr<std::optional<std::vector<std::string>>> chosen =
      ChooseFromProbes(hosts_, in_job, final);
  if (!chosen.ok()) {
    Fail(1, absl::StrCat("hvdrun: ", chosen.status().message()));
    return true;
  }
  if (!chosen->has_value()) return false;
  std::vector<std::string> said;
  for (size_t i = 0; i < in_job.size(); ++i) {
    JobHost& host = hosts_[in_job[i]];
    host.data_plane = (**chosen)[i];
    said.push_back(absl::StrCat(host.name, " ", host.data_plane));
  }
  if (config_.verbose) {
    Say(absl::StrCat("hvdrun: data-plane addresses after ",
                     FormatSeconds(os_->Now() - created_), ": ",
                     absl::StrJoin(said, ", ")));
  }
  Launch();
  return true;
}

void Job::Launch() {
  for (int h : InJob()) Send(h, LaunchMessage(config_, hosts_[h]));
  phase_ = Phase::kRunning;
}

}  // namespace launcher
}  // namespace hvd
