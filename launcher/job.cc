#include "launcher/job.h"

#include <string.h>

#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "launcher/netif.h"

namespace hvd {
namespace launcher {

struct Job::Conn {
  grpc::ServerContext* context = nullptr;
  int host = -1;
  std::deque<LauncherMessage> outbox;
  bool stop_writer = false;
  absl::Time last_heard;
};

struct Job::Host {
  std::string name;
  int slots = 0;
  std::vector<WorkerSlot> workers;
  bool in_job = false;
  bool joined = false;
  bool lost = false;
  bool process_running = false;  // launcher mode: its ssh / local agent
  bool shutdown_sent = false;
  Conn* conn = nullptr;
  Hello hello;
  std::string peer_ip;  // as the server saw the agent's connection
  std::vector<std::string> candidates;
  int probes_sent = 0;  // targets in its ProbeRequest
  int probes_answered = 0;
  std::map<int, std::map<std::string, bool>> reached;  // to -> address -> ok
  std::string data_plane;
  int started = 0;
  std::set<int> exited;
};

namespace {

grpc::Status ToGrpc(const absl::Status& s) {
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()),
                      std::string(s.message()));
}

// "ipv4:10.0.0.2:5123" / "ipv6:[::ffff:10.0.0.2]:5123" -> "10.0.0.2".
std::string PeerIp(const std::string& peer) {
  absl::string_view p = peer;
  if (absl::ConsumePrefix(&p, "ipv4:")) return std::string(p.substr(0, p.rfind(':')));
  if (absl::ConsumePrefix(&p, "ipv6:[")) {
    p = p.substr(0, p.find(']'));
    absl::ConsumePrefix(&p, "::ffff:");
    return std::string(p);
  }
  return "";
}

std::string Seconds(absl::Duration d) {
  return absl::StrCat(absl::ToDoubleSeconds(d), " s");
}

}  // namespace

Job::Job(JobConfig config, OutputSink* sink, Os* os)
    : config_(std::move(config)), sink_(sink), os_(os), created_(os->Now()) {
  absl::MutexLock lock(&mu_);
  for (const HostAssignment& a : config_.hosts) {
    Host h;
    h.name = a.name;
    h.workers = a.workers;
    h.slots = static_cast<int>(a.workers.size());
    h.in_job = true;
    h.process_running = true;
    for (const WorkerSlot& w : a.workers) {
      host_of_rank_[w.rank] = static_cast<int>(hosts_.size());
    }
    hosts_.push_back(std::move(h));
  }
}

Job::~Job() = default;

void Job::Say(const std::string& line) { sink_->Message(line); }

std::string Job::HostName(int host) const { return hosts_[host].name; }

std::vector<int> Job::InJob() const {
  std::vector<int> out;
  for (size_t i = 0; i < hosts_.size(); ++i) {
    if (hosts_[i].in_job) out.push_back(static_cast<int>(i));
  }
  return out;
}

void Job::Send(int host, LauncherMessage m) {
  Conn* c = hosts_[host].conn;
  if (c != nullptr) c->outbox.push_back(std::move(m));
}

grpc::Status Job::Attach(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<LauncherMessage, AgentMessage>* stream) {
  AgentMessage first;
  if (!stream->Read(&first)) return grpc::Status::OK;
  if (first.kind_case() != AgentMessage::kHello) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "the first message of an agent must be Hello");
  }
  Conn conn;
  conn.context = context;
  conn.last_heard = os_->Now();
  {
    absl::MutexLock lock(&mu_);
    absl::Status s = Join(&conn, first.hello());
    if (!s.ok()) return ToGrpc(s);
    conns_.insert(&conn);
  }
  std::thread writer([&] {
    while (true) {
      LauncherMessage m;
      {
        absl::MutexLock lock(&mu_);
        auto ready = [&conn]() { return !conn.outbox.empty() || conn.stop_writer; };
        mu_.Await(absl::Condition(&ready));
        if (conn.outbox.empty()) return;
        m = std::move(conn.outbox.front());
        conn.outbox.pop_front();
      }
      if (!stream->Write(m)) return;  // broken: the reader sees it too
    }
  });
  AgentMessage m;
  while (stream->Read(&m)) {
    OnMessage(&conn, m);
    m.Clear();
  }
  {
    absl::MutexLock lock(&mu_);
    OnStreamEnded(&conn);
    conn.stop_writer = true;
  }
  writer.join();
  absl::MutexLock lock(&mu_);
  conns_.erase(&conn);
  return grpc::Status::OK;
}

absl::Status Job::Join(Conn* conn, const Hello& hello) {
  int h = hello.host_index();
  if (!config_.orchestrated) {
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
  } else {
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
    h = static_cast<int>(hosts_.size());
    Host host;
    host.name = hello.hostname().empty() ? absl::StrCat("agent", h)
                                         : hello.hostname();
    host.slots = hello.slots();
    hosts_.push_back(std::move(host));
  }
  Host& host = hosts_[h];
  wake_ = true;
  host.joined = true;
  host.conn = conn;
  host.hello = hello;
  host.peer_ip = PeerIp(conn->context->peer());
  conn->host = h;
  LauncherMessage w;
  w.mutable_welcome()->set_host_index(h);
  w.mutable_welcome()->set_heartbeat_interval_ms(
      static_cast<int>(absl::ToInt64Milliseconds(config_.heartbeat_interval)));
  w.mutable_welcome()->set_heartbeat_timeout_ms(
      static_cast<int>(absl::ToInt64Milliseconds(config_.heartbeat_timeout)));
  w.mutable_welcome()->set_kill_grace_ms(
      static_cast<int>(absl::ToInt64Milliseconds(config_.kill_grace)));
  Send(h, std::move(w));
  if (config_.verbose) {
    std::vector<std::string> ifs;
    for (const Interface& i : hello.interfaces()) {
      ifs.push_back(absl::StrCat(i.name(), " ", i.address()));
    }
    Say(absl::StrCat("hvdrun: host ", host.name, " joined after ",
                     Seconds(os_->Now() - created_), " (agent pid ",
                     hello.pid(), ", from ", host.peer_ip, ", interfaces ",
                     absl::StrJoin(ifs, ", "), ")"));
  }
  return absl::OkStatus();
}

void Job::OnMessage(Conn* conn, const AgentMessage& m) {
  if (m.kind_case() == AgentMessage::kOutput) {
    // Printed outside the lock: a slow terminal must not stall the job.
    absl::Status s = sink_->Write(
        m.output().rank(),
        m.output().stream() == WorkerOutput::STDERR ? OutputStream::kStderr
                                                    : OutputStream::kStdout,
        m.output().data());
    absl::MutexLock lock(&mu_);
    conn->last_heard = os_->Now();
    if (!s.ok()) Fail(1, absl::StrCat("hvdrun: ", s.message()));
    return;
  }
  absl::MutexLock lock(&mu_);
  conn->last_heard = os_->Now();
  if (m.kind_case() != AgentMessage::kHeartbeat) wake_ = true;
  Host& host = hosts_[conn->host];
  switch (m.kind_case()) {
    case AgentMessage::kProbeResult:
      for (const ProbeResult::Entry& e : m.probe_result().entries()) {
        host.reached[e.host_index()][e.address()] = e.reachable();
        ++host.probes_answered;
        if (!e.reachable() && config_.verbose) {
          Say(absl::StrCat("hvdrun: host ", host.name, " cannot reach ",
                           HostName(e.host_index()), " at ", e.error()));
        }
      }
      break;
    case AgentMessage::kStarted:
      ++host.started;
      break;
    case AgentMessage::kExit: {
      const WorkerExit& e = m.exit();
      host.exited.insert(e.rank());
      ExitStatus status{e.exit_code(), e.signal()};
      if (!e.start_error().empty()) {
        Fail(127, absl::StrCat("hvdrun: rank ", e.rank(), " (host ", host.name,
                               ") could not start: ", e.start_error()));
      } else if (!status.ok()) {
        Fail(status.ShellCode(),
             absl::StrCat("hvdrun: rank ", e.rank(), " (host ", host.name,
                          ") ", status.ToString()));
      }
      break;
    }
    default:
      break;
  }
}

void Job::OnStreamEnded(Conn* conn) {
  int h = conn->host;
  Host& host = hosts_[h];
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
  Host& host = hosts_[h];
  if (host.lost || host.shutdown_sent) return;
  host.lost = true;
  if (host.conn != nullptr) host.conn->context->TryCancel();
  if (config_.orchestrated && !host.in_job) return;
  Fail(1, absl::StrCat("hvdrun: host ", host.name, ": ", why));
}

void Job::AgentProcessExited(int h, std::string why) {
  absl::MutexLock lock(&mu_);
  Host& host = hosts_[h];
  host.process_running = false;
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

void Job::Interrupt(int sig) {
  absl::MutexLock lock(&mu_);
  if (signal_ == 0) signal_ = sig;
  wake_ = true;
}

void Job::Fail(int code, const std::string& message) {
  if (failed_ || phase_ >= Phase::kShutdown) return;
  failed_ = true;
  exit_code_ = code;
  Say(message);
  if (phase_ != Phase::kRunning) {
    BeginShutdown(code);
    return;
  }
  phase_ = Phase::kTerminating;
  phase_deadline_ = os_->Now() + config_.kill_grace + absl::Seconds(5);
  for (int h : InJob()) {
    LauncherMessage t;
    t.mutable_terminate()->set_reason(message);
    Send(h, std::move(t));
  }
}

void Job::BeginShutdown(int code) {
  exit_code_ = code;
  phase_ = Phase::kShutdown;
  phase_deadline_ = os_->Now() + config_.kill_grace + absl::Seconds(5);
  for (size_t h = 0; h < hosts_.size(); ++h) {
    if (hosts_[h].shutdown_sent) continue;
    LauncherMessage s;
    s.mutable_shutdown()->set_exit_code(code);
    Send(static_cast<int>(h), std::move(s));
    hosts_[h].shutdown_sent = true;
  }
}

bool Job::AllWorkersExited() const {
  for (int h : InJob()) {
    const Host& host = hosts_[h];
    if (!host.lost && host.exited.size() < host.workers.size()) return false;
  }
  return true;
}

void Job::Heartbeats(absl::Time now) {
  if (now >= next_heartbeat_) {
    next_heartbeat_ = now + config_.heartbeat_interval;
    for (Conn* c : conns_) {
      LauncherMessage m;
      m.mutable_heartbeat();
      c->outbox.push_back(std::move(m));
    }
  }
  for (size_t h = 0; h < hosts_.size(); ++h) {
    Conn* c = hosts_[h].conn;
    if (c == nullptr || hosts_[h].shutdown_sent) continue;
    if (now - c->last_heard > config_.heartbeat_timeout) {
      HostLost(static_cast<int>(h),
               absl::StrCat("no heartbeat from hvd-agent for ",
                            Seconds(now - c->last_heard)));
    }
  }
}

void Job::StepWaiting(absl::Time now) {
  if (!config_.orchestrated) {
    std::vector<std::string> missing;
    for (const Host& h : hosts_) {
      if (!h.joined) missing.push_back(h.name);
    }
    if (missing.empty()) {
      ChooseAddresses();
    } else if (now >= start_deadline_) {
      Fail(1, absl::StrCat("hvdrun: host", missing.size() > 1 ? "s " : " ",
                           absl::StrJoin(missing, ", "),
                           ": hvd-agent did not connect within ",
                           Seconds(config_.start_timeout),
                           " (--start-timeout)"));
    }
    return;
  }
  int slots = 0;
  for (const Host& h : hosts_) {
    if (h.joined && !h.lost) slots += h.slots;
  }
  if (slots >= config_.np) {
    FormOrchestratedJob();
    ChooseAddresses();
  } else if (now >= start_deadline_) {
    Fail(1, absl::StrCat("hvdrun: only ", slots, " of ", config_.np,
                         " slots joined within ",
                         Seconds(config_.start_timeout), " (--start-timeout)"));
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
  absl::StatusOr<std::vector<HostAssignment>> a = AssignRanks(slots, config_.np);
  if (!a.ok()) {  // cannot happen: slots >= np was checked
    Fail(1, absl::StrCat("hvdrun: ", a.status().message()));
    return;
  }
  for (size_t i = 0; i < joined.size(); ++i) {
    Host& host = hosts_[joined[i]];
    if (i >= a->size()) {
      // Not needed: told to go home now.
      LauncherMessage s;
      s.mutable_shutdown()->set_exit_code(0);
      Send(joined[i], std::move(s));
      host.shutdown_sent = true;
      continue;
    }
    host.in_job = true;
    host.workers = (*a)[i].workers;
    for (const WorkerSlot& w : host.workers) host_of_rank_[w.rank] = joined[i];
  }
}

void Job::ChooseAddresses() {
  std::vector<int> in_job = InJob();
  auto named = [this](int h, std::string* out) {
    for (const std::string& want : config_.network_interfaces) {
      for (const Interface& i : hosts_[h].hello.interfaces()) {
        if (i.name() == want || i.address() == want) {
          *out = i.address();
          return true;
        }
      }
    }
    return false;
  };
  if (in_job.size() == 1 || !config_.network_interfaces.empty()) {
    for (int h : in_job) {
      Host& host = hosts_[h];
      if (config_.network_interfaces.empty()) {
        host.data_plane = "127.0.0.1";  // one host: loopback is right
      } else if (!named(h, &host.data_plane)) {
        std::vector<std::string> has;
        for (const Interface& i : host.hello.interfaces()) {
          has.push_back(absl::StrCat(i.name(), " ", i.address()));
        }
        Fail(1, absl::StrCat(
                    "hvdrun: host ", host.name, " has none of the interfaces ",
                    absl::StrJoin(config_.network_interfaces, ","),
                    " (it has: ", has.empty() ? "none" : absl::StrJoin(has, ", "),
                    ")"));
        return;
      }
    }
    Launch();
    return;
  }
  // Several hosts: ask each which of the others' addresses it can reach.
  for (int h : in_job) {
    Host& host = hosts_[h];
    host.candidates.clear();
    std::set<std::string> mine;
    for (const Interface& i : host.hello.interfaces()) mine.insert(i.address());
    if (mine.count(host.peer_ip)) host.candidates.push_back(host.peer_ip);
    for (const Interface& i : host.hello.interfaces()) {
      if (i.address() != host.peer_ip) host.candidates.push_back(i.address());
    }
  }
  for (int from : in_job) {
    LauncherMessage m;
    ProbeRequest* req = m.mutable_probe();
    req->set_timeout_ms(
        static_cast<int>(absl::ToInt64Milliseconds(config_.probe_timeout)));
    for (int to : in_job) {
      if (to == from) continue;
      for (const std::string& addr : hosts_[to].candidates) {
        ProbeTarget* t = req->add_targets();
        t->set_host_index(to);
        t->set_address(addr);
        t->set_port(hosts_[to].hello.probe_port());
        t->set_nonce(hosts_[to].hello.probe_nonce());
      }
    }
    hosts_[from].probes_sent = req->targets_size();
    hosts_[from].probes_answered = 0;
    Send(from, std::move(m));
  }
  phase_ = Phase::kProbing;
}

bool Job::FinishProbing(bool final) {
  std::vector<int> in_job = InJob();
  std::map<int, int> dense;
  for (size_t i = 0; i < in_job.size(); ++i) dense[in_job[i]] = static_cast<int>(i);
  std::vector<std::string> names;
  std::vector<std::vector<std::string>> candidates;
  std::vector<std::map<int, std::map<std::string, bool>>> reached;
  for (int h : in_job) {
    names.push_back(hosts_[h].name);
    candidates.push_back(hosts_[h].candidates);
    std::map<int, std::map<std::string, bool>> r;
    for (const auto& [to, addrs] : hosts_[h].reached) {
      if (dense.count(to)) r[dense[to]] = addrs;
    }
    reached.push_back(std::move(r));
  }
  absl::StatusOr<std::optional<std::vector<std::string>>> chosen =
      SelectDataPlaneAddresses(names, candidates, reached, final);
  if (!chosen.ok()) {
    Fail(1, absl::StrCat("hvdrun: ", chosen.status().message()));
    return true;
  }
  if (!chosen->has_value()) return false;
  std::vector<std::string> said;
  for (size_t i = 0; i < in_job.size(); ++i) {
    hosts_[in_job[i]].data_plane = (**chosen)[i];
    said.push_back(absl::StrCat(names[i], " ", (**chosen)[i]));
  }
  if (config_.verbose) {
    Say(absl::StrCat("hvdrun: data-plane addresses after ",
                     Seconds(os_->Now() - created_), ": ",
                     absl::StrJoin(said, ", ")));
  }
  Launch();
  return true;
}

void Job::Launch() {
  for (int h : InJob()) {
    Host& host = hosts_[h];
    LauncherMessage m;
    LaunchSpec* spec = m.mutable_launch();
    if (!config_.command.empty()) {
      for (const std::string& c : config_.command) spec->add_command(c);
    } else {
      *spec->mutable_command() = host.hello.command();
    }
    for (const auto& [k, v] : config_.env) (*spec->mutable_env())[k] = v;
    spec->set_cwd(config_.cwd);
    spec->set_hostname(host.name);
    spec->set_size(config_.np);
    for (const WorkerSlot& w : host.workers) {
      WorkerSpec* ws = spec->add_workers();
      ws->set_rank(w.rank);
      ws->set_local_rank(w.local_rank);
      ws->set_local_size(w.local_size);
      ws->set_cross_rank(w.cross_rank);
      ws->set_cross_size(w.cross_size);
    }
    spec->set_data_plane_address(host.data_plane);
    Send(h, std::move(m));
  }
  phase_ = Phase::kRunning;
}

void Job::Step(absl::Time now) {
  if (signal_ != 0 && !failed_) {
    Fail(128 + signal_, absl::StrCat("hvdrun: got signal ", signal_, " (",
                                     strsignal(signal_), "); ending the job"));
  }
  Heartbeats(now);
  switch (phase_) {
    case Phase::kWaiting:
      StepWaiting(now);
      break;
    case Phase::kProbing: {
      bool all_in = true;
      for (int h : InJob()) {
        all_in = all_in && hosts_[h].probes_answered >= hosts_[h].probes_sent;
      }
      if (FinishProbing(/*final=*/all_in)) {
        break;
      } else if (now >= start_deadline_) {
        Fail(1, absl::StrCat("hvdrun: agents did not finish probing each "
                             "other within ", Seconds(config_.start_timeout)));
      }
      break;
    }
    case Phase::kRunning: {
      if (AllWorkersExited()) {
        BeginShutdown(0);
        break;
      }
      int started = 0;
      for (int h : InJob()) started += hosts_[h].started;
      if (started >= config_.np) {
        if (!all_started_said_ && config_.verbose) {
          Say(absl::StrCat("hvdrun: all ", config_.np, " workers started after ",
                           Seconds(now - created_)));
        }
        all_started_said_ = true;
      } else if (now >= start_deadline_) {
        Fail(1, absl::StrCat("hvdrun: only ", started, " of ", config_.np,
                             " workers started within ",
                             Seconds(config_.start_timeout)));
      }
      break;
    }
    case Phase::kTerminating:
      if (AllWorkersExited() || now >= phase_deadline_) BeginShutdown(exit_code_);
      break;
    case Phase::kShutdown: {
      // Agents that joined were told to shut down: wait for them to go.
      // Those that never joined are ended by whoever started them.
      bool gone = true;
      // A lost one is not waited for either: it may be cut off for good.
      for (const Host& h : hosts_) {
        if (h.joined && !h.lost) {
          gone = gone && h.conn == nullptr && !h.process_running;
        }
      }
      if (gone || now >= phase_deadline_) phase_ = Phase::kDone;
      break;
    }
    case Phase::kDone:
      break;
  }
}

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

void Job::CloseStreams() {
  absl::MutexLock lock(&mu_);
  for (Conn* c : conns_) {
    c->context->TryCancel();
    c->stop_writer = true;
  }
}

}  // namespace launcher
}  // namespace hvd
