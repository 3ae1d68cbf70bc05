#include "agent/agent.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/common/logging.h"
#include "core/common/random_hex.h"
#include "grpcpp/grpcpp.h"
#include "host/bootstrap.h"
#include "host/cpu_binding.h"
#include "host/netif.h"
#include "host/worker_environment.h"
#include "proto/job_token.h"

namespace hvd {
namespace agent {
namespace {

using launcher::AgentMessage;
using launcher::LauncherMessage;

std::string LocalHostname() {
  char name[256] = {0};
  gethostname(name, sizeof(name) - 1);
  return name;
}

// SSH_CONNECTION's client address is this host's view of hvdrun's host: the
// rendezvous address most likely to route, so it is tried first.
std::vector<std::string> OrderCandidates(std::vector<std::string> candidates) {
  const char* ssh = getenv("SSH_CONNECTION");
  if (ssh == nullptr) return candidates;
  std::string client(ssh);
  client = client.substr(0, client.find(' '));
  std::stable_partition(candidates.begin(), candidates.end(),
                        [&](const std::string& c) {
                          return absl::StartsWith(c, client + ":");
                        });
  return candidates;
}

// The identity variables of the worker `w` of `spec` (launcher/environment.h).
host::WorkerIdentity IdentityOf(const launcher::LaunchSpec& spec,
                                    const launcher::WorkerSpec& w,
                                    const std::string& rendezvous_addr,
                                    const AgentOptions& options) {
  host::WorkerIdentity id;
  id.rank = w.rank();
  id.size = spec.size();
  id.local_rank = w.local_rank();
  id.local_size = w.local_size();
  id.cross_rank = w.cross_rank();
  id.cross_size = w.cross_size();
  id.hostname = spec.hostname();
  id.rendezvous_addr = rendezvous_addr;
  id.job_token = options.token;
  id.rendezvous_ca_pem = options.tls.ca_pem;
  id.rendezvous_tls_name = options.tls.server_name;
  id.iface = spec.data_plane_address();
  id.elastic_worker_id = w.elastic_worker_id();
  return id;
}

}  // namespace

Agent::Agent(AgentOptions options, host::Os* os, Reaper* reaper)
    : options_(std::move(options)), os_(os), reaper_(reaper) {
  hostname_ = options_.hostname.empty() ? LocalHostname() : options_.hostname;
}

Agent::~Agent() {
  stopping_ = true;
  if (fd_watcher_.joinable()) fd_watcher_.join();
  if (reader_.joinable()) CloseStream(/*cancel=*/true).IgnoreError();
  for (std::thread& t : helpers_) t.join();
}

void Agent::WatchLauncherFd() {
  char buf[256];
  while (!stopping_) {
    struct pollfd p = {options_.launcher_fd, POLLIN, 0};
    int r = poll(&p, 1, 200);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) continue;
    ssize_t n = r > 0 ? read(options_.launcher_fd, buf, sizeof(buf)) : -1;
    if (n > 0 || (n < 0 && (errno == EINTR || errno == EAGAIN))) continue;
    absl::MutexLock lock(&mu_);
    launcher_fd_closed_ = true;
    return;
  }
}

void Agent::Signal(int sig) {
  absl::MutexLock lock(&mu_);
  if (signal_ == 0) signal_ = sig;
}

void Agent::ReportAgentEnded(int host_index, std::string why) {
  launcher::AgentEnded e;
  e.set_host_index(host_index);
  e.set_why(std::move(why));
  absl::MutexLock lock(&mu_);
  agents_ended_.push_back(std::move(e));
}

absl::Status Agent::Connect() {
  // Reachable first (a plain TCP connect, quick to fail), then the stream.
  absl::Time deadline = os_->Now() + options_.connect_timeout;
  std::vector<std::string> candidates = OrderCandidates(options_.rendezvous);
  absl::StatusOr<std::string> addr;
  while (true) {
    addr = host::FirstReachable(candidates, absl::Seconds(2));
    if (addr.ok() || os_->Now() >= deadline) break;
    {
      absl::MutexLock lock(&mu_);
      if (launcher_fd_closed_ || signal_ != 0) break;
    }
    os_->SleepFor(absl::Milliseconds(250));
  }
  if (!addr.ok()) return addr.status();
  rendezvous_addr_ = *addr;
  HVD_LOG(DEBUG) << "hvd-agent " << hostname_ << ": rendezvous at "
                 << rendezvous_addr_;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  auto channel = grpc::CreateCustomChannel(
      rendezvous_addr_, rendezvous::ChannelCredentials(options_.tls, &args),
      args);
  stub_ = launcher::AgentService::NewStub(channel);
  context_ = std::make_unique<grpc::ClientContext>();
  context_->AddMetadata(rendezvous::kJobTokenMetadataKey, options_.token);
  stream_ = stub_->Attach(context_.get());
  return absl::OkStatus();
}

bool Agent::Send(const AgentMessage& message) {
  absl::MutexLock lock(&write_mu_);
  if (closed_) return false;
  return stream_->Write(message);
}

grpc::Status Agent::CloseStream(bool cancel) {
  {
    absl::MutexLock lock(&write_mu_);
    if (!closed_ && !cancel) stream_->WritesDone();
    closed_ = true;
  }
  if (cancel) context_->TryCancel();
  if (reader_.joinable()) reader_.join();
  return stream_->Finish();
}

void Agent::ReadLoop() {
  LauncherMessage m;
  while (stream_->Read(&m)) {
    absl::MutexLock lock(&mu_);
    last_heard_ = os_->Now();
    inbox_.push_back(std::move(m));
    m = LauncherMessage();
  }
  absl::MutexLock lock(&mu_);
  stream_ended_ = true;
}

void Agent::Probe(const launcher::ProbeRequest& request) {
  absl::Duration timeout = absl::Milliseconds(
      request.timeout_ms() > 0 ? request.timeout_ms() : 2000);
  // Each result goes back as soon as it is known: the launcher can decide
  // on a preferred address before a dead one's probe times out.
  std::vector<std::thread> probes;
  for (const launcher::ProbeTarget& t : request.targets()) {
    probes.emplace_back([this, t, timeout] {
      absl::Status s =
          host::ProbeAddress(t.address(), t.port(), t.nonce(), timeout);
      AgentMessage reply;
      auto* e = reply.mutable_probe_result()->add_entries();
      e->set_host_index(t.host_index());
      e->set_address(t.address());
      e->set_reachable(s.ok());
      if (!s.ok()) e->set_error(std::string(s.message()));
      Send(reply);
    });
  }
  for (std::thread& p : probes) p.join();
}

void Agent::Launch(const launcher::LaunchSpec& spec) {
  const std::vector<std::string> base = host::CurrentEnvironment();
  const std::map<std::string, std::string> overlay(spec.env().begin(),
                                                   spec.env().end());
  const std::vector<std::string> command(spec.command().begin(),
                                         spec.command().end());
  const std::vector<host::CpuCore> cores =
      spec.bind_to_cores() ? host::CoresOf(host::AllowedCpus(), host::kCpuSysfs)
                           : std::vector<host::CpuCore>();
  for (const launcher::WorkerSpec& w : spec.workers()) {
    host::SpawnOptions o;
    o.argv = command;
    o.env = host::WorkerEnvironment(
        base, overlay,
        IdentityOf(spec, w, rendezvous_addr_, options_));
    o.cwd = spec.cwd();
    o.new_process_group = true;
    // Delivered when this (the main) thread ends: with the agent.
    o.parent_death_signal = SIGKILL;
    o.stdin_mode = host::Stdio::kNull;
    o.cpus = host::CpuShare(cores, w.local_rank(), w.local_size());
    StartWorker(w.rank(), std::move(o));
  }
}

void Agent::StartWorker(int rank, host::SpawnOptions options) {
  const std::string cpus = host::CpuListString(options.cpus);
  absl::StatusOr<std::unique_ptr<Worker>> worker =
      Worker::Start(os_, rank, std::move(options), WorkerReports());
  AgentMessage m;
  if (!worker.ok()) {
    auto* e = m.mutable_exit();
    e->set_rank(rank);
    e->set_exit_code(127);
    e->set_start_error(std::string(worker.status().message()));
    Send(m);
    return;
  }
  if (reaper_ != nullptr) reaper_->Track((*worker)->pid());
  m.mutable_started()->set_rank(rank);
  m.mutable_started()->set_pid((*worker)->pid());
  m.mutable_started()->set_cpus(cpus);
  Send(m);
  workers_.push_back(*std::move(worker));
}

WorkerCallbacks Agent::WorkerReports() {
  WorkerCallbacks cb;
  cb.output = [this](int rank, host::OutputStream s, std::string lines) {
    AgentMessage m;
    auto* out = m.mutable_output();
    out->set_rank(rank);
    out->set_stream(s == host::OutputStream::kStdout
                        ? launcher::WorkerOutput::STDOUT
                        : launcher::WorkerOutput::STDERR);
    out->set_data(std::move(lines));
    Send(m);
  };
  cb.exited = [this](int rank, host::ExitStatus status) {
    launcher::WorkerExit e;
    e.set_rank(rank);
    e.set_exit_code(status.code);
    e.set_signal(status.signal);
    absl::MutexLock lock(&mu_);
    exits_.push_back(e);
  };
  return cb;
}

void Agent::ReportStoppedWorkers() {
  for (const auto& w : workers_) {
    const bool stopped = !w->exited() && os_->IsStopped(w->pid());
    if (stopped == (stopped_.count(w->rank()) > 0)) continue;
    if (stopped) {
      stopped_.insert(w->rank());
    } else {
      stopped_.erase(w->rank());
    }
    AgentMessage m;
    m.mutable_stopped()->set_rank(w->rank());
    m.mutable_stopped()->set_stopped(stopped);
    Send(m);
  }
}

void Agent::TerminateWorkers(int sig) {
  for (auto& w : workers_) w->Signal(sig);
}

void Agent::EndWorkers() {
  std::vector<pid_t> groups;
  for (auto& w : workers_) groups.push_back(w->pid());
  host::TerminateGroups(os_, groups, SIGTERM, kill_grace_, absl::Seconds(5));
  if (reaper_ != nullptr) {
    for (pid_t g : groups) reaper_->Untrack(g);
  }
  workers_.clear();  // joins their threads
}

void Agent::Handle(const LauncherMessage& m) {
  switch (m.kind_case()) {
    case LauncherMessage::kWelcome:
      welcomed_ = true;
      heartbeat_interval_ =
          absl::Milliseconds(std::max(10, m.welcome().heartbeat_interval_ms()));
      heartbeat_timeout_ =
          absl::Milliseconds(std::max(100, m.welcome().heartbeat_timeout_ms()));
      kill_grace_ =
          absl::Milliseconds(std::max(0, m.welcome().kill_grace_ms()));
      break;
    case LauncherMessage::kProbe:
      helpers_.emplace_back([this, req = m.probe()] { Probe(req); });
      break;
    case LauncherMessage::kLaunch:
      Launch(m.launch());
      break;
    case LauncherMessage::kTerminate:
      HVD_LOG(INFO) << "hvd-agent " << hostname_
                    << ": terminating workers: " << m.terminate().reason();
      TerminateWorkers(SIGTERM);
      kill_at_ = std::min(kill_at_, os_->Now() + kill_grace_);
      break;
    default:
      break;
  }
}

launcher::AgentMessage Agent::MakeHello(int probe_port,
                                        const std::string& nonce) const {
  AgentMessage hello;
  auto* h = hello.mutable_hello();
  h->set_host_index(options_.host_index);
  h->set_slots(options_.slots);
  h->set_hostname(hostname_);
  for (const host::InterfaceAddress& a : host::ListInterfaces()) {
    if (a.loopback) continue;
    auto* i = h->add_interfaces();
    i->set_name(a.name);
    i->set_address(a.address);
  }
  h->set_probe_port(probe_port);
  h->set_probe_nonce(nonce);
  h->set_pid(os_->ProcessId());
  for (const std::string& c : options_.command) h->add_command(c);
  return hello;
}

std::optional<int> Agent::EndIfLauncherGone(bool ended, bool fd_closed,
                                            int sig, absl::Time last_heard) {
  if (sig != 0) {
    HVD_LOG(WARNING) << "hvd-agent " << hostname_ << ": got signal " << sig
                     << ", ending " << workers_.size() << " workers";
    CloseStream(/*cancel=*/true).IgnoreError();
    EndWorkers();
    return 128 + sig;
  }
  if (fd_closed && !ended) {
    HVD_LOG(ERROR) << "hvd-agent " << hostname_ << ": hvdrun's end of "
                   << "stdin closed (hvdrun or its ssh is gone); ending "
                   << workers_.size() << " workers";
    CloseStream(/*cancel=*/true).IgnoreError();
    EndWorkers();
    return 1;
  }
  if (ended) {
    grpc::Status st = CloseStream(/*cancel=*/false);
    if (st.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
      HVD_LOG(ERROR) << "hvd-agent " << hostname_
                     << ": the rendezvous server at " << rendezvous_addr_
                     << " refused the job token: " << st.error_message();
    } else if (!welcomed_) {
      HVD_LOG(ERROR) << "hvd-agent " << hostname_
                     << ": could not join the job at " << rendezvous_addr_
                     << ": " << st.error_message();
    } else {
      HVD_LOG(ERROR) << "hvd-agent " << hostname_ << ": lost the launcher at "
                     << rendezvous_addr_ << " ("
                     << (st.ok() ? "stream closed without a shutdown"
                                 : st.error_message())
                     << "); ending " << workers_.size() << " workers";
    }
    EndWorkers();
    return 1;
  }
  absl::Time now = os_->Now();
  if (now - last_heard > heartbeat_timeout_) {
    HVD_LOG(ERROR) << "hvd-agent " << hostname_ << ": no word from the "
                   << "launcher at " << rendezvous_addr_ << " for "
                   << absl::FormatDuration(now - last_heard) << "; ending "
                   << workers_.size() << " workers";
    CloseStream(/*cancel=*/true).IgnoreError();
    EndWorkers();
    return 1;
  }
  return std::nullopt;
}

int Agent::Run() {
  if (options_.launcher_fd >= 0) {
    fd_watcher_ = std::thread([this] { WatchLauncherFd(); });
  }
  absl::Status s = Connect();
  if (!s.ok()) {
    HVD_LOG(ERROR) << "hvd-agent " << hostname_ << ": " << s.message();
    return 1;
  }
  std::string nonce = RandomHex(32).value_or("x").substr(0, 16);
  absl::StatusOr<std::unique_ptr<host::ProbeListener>> probe;
  if (options_.probe_listener) {
    probe = host::ProbeListener::Start(nonce);
    if (!probe.ok()) {
      HVD_LOG(ERROR) << "hvd-agent " << hostname_ << ": " << probe.status();
      return 1;
    }
  }
  {
    absl::MutexLock lock(&mu_);
    last_heard_ = os_->Now();
  }
  reader_ = std::thread([this] { ReadLoop(); });
  const int probe_port =
      options_.probe_listener ? (*probe)->port() : 0;  // 0: not listening
  Send(MakeHello(probe_port, nonce));  // a failure ends the stream
  const int code = Serve();
  // The probes are over (the launcher waited for their replies); joined
  // here, as hvd-agent ends without destroying the agent.
  for (std::thread& t : helpers_) t.join();
  helpers_.clear();
  return code;
}

int Agent::Serve() {
  absl::Time next_heartbeat = os_->Now() + heartbeat_interval_;
  while (true) {
    Events events = NextEvents();
    for (const launcher::WorkerExit& e : events.exits) {
      AgentMessage m;
      *m.mutable_exit() = e;
      Send(m);
    }
    for (const launcher::AgentEnded& e : events.agents_ended) {
      AgentMessage m;
      *m.mutable_agent_ended() = e;
      Send(m);
    }
    for (const LauncherMessage& m : events.inbox) {
      if (m.kind_case() == LauncherMessage::kShutdown) {
        // Normally every worker has exited and been reported by now.
        EndWorkers();
        CloseStream(/*cancel=*/false).IgnoreError();
        return m.shutdown().exit_code();
      }
      Handle(m);
    }
    if (std::optional<int> code =
            EndIfLauncherGone(events.stream_ended, events.fd_closed,
                              events.signal, events.last_heard)) {
      return *code;
    }
    absl::Time now = os_->Now();
    if (now >= kill_at_) {
      TerminateWorkers(SIGKILL);
      kill_at_ = absl::InfiniteFuture();
    }
    if (now >= next_heartbeat) {
      AgentMessage m;
      m.mutable_heartbeat();
      Send(m);
      ReportStoppedWorkers();
      next_heartbeat = now + heartbeat_interval_;
    }
  }
}

Agent::Events Agent::NextEvents() {
  Events events;
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !inbox_.empty() || !exits_.empty() || !agents_ended_.empty() ||
           stream_ended_ || signal_ != 0 || launcher_fd_closed_;
  };
  mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Milliseconds(100));
  events.inbox.swap(inbox_);
  events.exits.swap(exits_);
  events.agents_ended.swap(agents_ended_);
  events.stream_ended = stream_ended_;
  events.fd_closed = launcher_fd_closed_;
  events.signal = signal_;
  events.last_heard = last_heard_;
  return events;
}

}  // namespace agent
}  // namespace hvd
