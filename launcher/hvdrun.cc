#include "launcher/hvdrun.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/common/config_names.h"
#include "core/common/env.h"
#include "core/common/logging.h"
#include "core/common/random_hex.h"
#include "host/agent_starter.h"
#include "host/bootstrap.h"
#include "host/launch_tree.h"
#include "host/netif.h"
#include "host/process.h"
#include "core/common/version.h"
#include "launcher/agent_binary.h"
#include "launcher/elastic_launch.h"
#include "launcher/environment.h"
#include "launcher/hosts.h"
#include "launcher/job.h"
#include "launcher/job_metrics.h"
#include "launcher/options.h"
#include "launcher/output_sink.h"
#include "launcher/rendezvous_address.h"
#include "launcher/self_test.h"
#include "launcher/slurm_allocation.h"
#include "core/rendezvous/rendezvous_server.h"
#include "core/rendezvous/tls.h"
#include "launcher/job_tls.h"
#include "proto/job_token.h"

namespace hvd {
namespace launcher {
namespace {

using host::AgentLaunch;
using host::AgentStarter;
using host::AgentStarterOptions;

int BadInput(absl::string_view message) {
  std::fprintf(stderr, "hvdrun: %s (see hvdrun --help)\n",
               std::string(message).c_str());
  return 2;
}

int Failure(absl::string_view message) {
  std::fprintf(stderr, "hvdrun: %s\n", std::string(message).c_str());
  return 1;
}

// --check-build: the report is the Python package's, which finds the
// frameworks by importing them and asks libhvd.so the rest.
int CheckBuild() {
  std::fflush(stdout);
  execlp("python3", "python3", "-m", "hvd.check_build", nullptr);
  return Failure(absl::StrCat(
      "--check-build runs `python3 -m hvd.check_build`, and python3 could "
      "not be started: ", strerror(errno)));
}

// The clock of worker lines' timestamps; null: no timestamps.
host::Os* Clock(const Options& o) {
  return o.prefix_output_with_timestamp ? host::RealOs() : nullptr;
}

// mkdir -p.
bool MakeDirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i < path.size() && path[i] != '/') continue;
    std::string prefix = path.substr(0, i);
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// -x entries only (orchestrator mode: the submitting shell is not the
// workers' environment).
std::map<std::string, std::string> ExplicitEnvironment(const Options& o) {
  std::map<std::string, std::string> out;
  std::vector<std::string> env = host::CurrentEnvironment();
  for (const std::string& x : o.env) {
    size_t eq = x.find('=');
    if (eq != std::string::npos) {
      out[x.substr(0, eq)] = x.substr(eq + 1);
    } else if (std::string v = host::EnvValue(env, x); !v.empty()) {
      out[x] = v;
    }
  }
  return out;
}

// SIGINT/SIGTERM/SIGHUP are blocked in every thread and taken by one, which
// tells the job. Call before any thread starts.
sigset_t BlockTerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, sig);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

void WatchSignals(sigset_t set, Job* job) {
  std::thread([set, job] {
    int sig;
    while (sigwait(&set, &sig) == 0) job->Interrupt(sig);
  }).detach();
}

JobConfig BaseConfig(const Options& o, int np) {
  JobConfig c;
  // Not a flag (rarely worth changing); tests shorten it. The interval is a
  // quarter of the timeout, at most a second.
  absl::StatusOr<int64_t> timeout_ms =
      GetConfigInt(config_names::kHeartbeatTimeoutMs, 10000);
  if (timeout_ms.ok() && *timeout_ms >= 100) {
    c.heartbeat_timeout = absl::Milliseconds(*timeout_ms);
    c.heartbeat_interval =
        std::min(absl::Seconds(1), c.heartbeat_timeout / 4);
  }
  c.np = np;
  c.command = o.command;
  c.network_interfaces = o.network_interfaces;
  c.start_timeout = o.start_timeout;
  c.kill_grace = o.kill_grace;
  c.verbose = o.verbose;
  c.bind_to_cores = o.bind_to != "none";
  return c;
}

std::function<void(const WorkerInfo&)> RegistrationCounter(host::Os* os,
                                                           OutputSink* sink,
                                                           int np,
                                                           bool verbose) {
  auto count = std::make_shared<std::atomic<int>>(0);
  absl::Time start = os->Now();
  return [=](const WorkerInfo&) {
    if (++*count == np && verbose) {
      sink->Message(absl::StrCat(
          "hvdrun: all ", np, " ranks registered with the rendezvous after ",
          absl::ToDoubleSeconds(os->Now() - start), " s"));
    }
  };
}

int RendezvousOnly(const Options& o) {
  std::string token;
  if (const char* t = getenv("HVD_JOB_TOKEN"); t != nullptr && *t != '\0') {
    token = t;
    if (absl::Status s = rendezvous::ValidateJobToken(token); !s.ok()) {
      return BadInput(absl::StrCat("HVD_JOB_TOKEN: ", s.message()));
    }
  } else {
    absl::StatusOr<std::string> t2 = RandomHex(32);
    if (!t2.ok()) return Failure(t2.status().message());
    token = *t2;
  }
  sigset_t signals = BlockTerminationSignals();
  static OutputSink sink(1, 2, o.output_filename, Clock(o));
  JobConfig c = BaseConfig(o, *o.num_proc);
  c.orchestrated = true;
  c.env = TunableEnvironment(o);
  for (const auto& [k, v] : ExplicitEnvironment(o)) c.env[k] = v;
  if (!o.start_timeout_given) c.start_timeout = absl::InfiniteDuration();
  auto* job = new Job(c, &sink);  // lives until exit: the signal thread uses it
  WatchSignals(signals, job);
  RendezvousServerOptions so;
  so.address = absl::StrCat("0.0.0.0:", o.port.value_or(0));
  so.token = token;
  absl::StatusOr<rendezvous::ServerTls> tls = OrchestratorTls(o);
  if (!tls.ok()) return BadInput(tls.status().message());
  so.tls = *std::move(tls);
  so.extra_services = {job};
  so.size = *o.num_proc;
  so.on_register =
      RegistrationCounter(host::RealOs(), &sink, *o.num_proc, o.verbose);
  RendezvousServer server(so);
  if (absl::Status s = server.Start(); !s.ok()) return Failure(s.message());
  auto metrics = StartMetrics(o, job, &server);
  if (!metrics.ok()) return Failure(metrics.status().message());
  const std::string addr = RendezvousAddressList(o.network_interfaces, server.port());
  if (!AnnounceRendezvous(o.rendezvous_file, addr, token)) {
    return Failure(
        absl::StrCat("cannot write --rendezvous-file ", o.rendezvous_file));
  }
  sink.Message(absl::StrCat(
      "hvdrun: waiting for ", *o.num_proc, " slots: start `hvd-agent "
      "--rendezvous ", addr, " --slots K` on each node, with the token in ",
      o.rendezvous_file.empty()
          ? "$HVD_JOB_TOKEN"
          : "$HVD_JOB_TOKEN or --token-file " + o.rendezvous_file));
  int code = job->Run();
  if (*metrics) job->Linger(o.metrics_linger);
  job->CloseStreams();
  server.Shutdown();
  return code;
}

// The hosts of a job hvdrun launches: -H, --hostfile, the Slurm allocation
// it runs in, or this machine.
absl::StatusOr<std::vector<HostSlots>> LaunchHosts(const Options& o) {
  if (o.slurm.has_value()) return o.slurm->nodes;
  if (!o.hosts.empty()) return ParseHostList(o.hosts);
  if (!o.hostfile.empty()) return ReadHostfile(o.hostfile);
  return std::vector<HostSlots>{{"localhost", *o.num_proc}};
}

// What a launched job is started with, worked out before anything starts.
struct LaunchPlan {
  std::vector<HostAssignment> assignment;
  int np = 0;
  std::vector<bool> local;  // per host: this machine (no ssh)
  // Per host: the host whose agent starts its agent, -1: hvdrun (a launch
  // tree, host/launch_tree.h); and every host some agent starts.
  std::vector<int> parents;
  std::vector<host::Bootstrap::Below> tree;
  bool any_remote = false;
  AgentStarterOptions starter;
  std::vector<std::string> launcher_addrs;  // for remote agents to dial
  std::string token;
  std::string cwd;
  rendezvous::JobCertificates certs;  // empty: plaintext
};

// How hvdrun starts the agents: the local binary (looked up only if some
// host is this machine), what ssh runs elsewhere, and ssh's options.
absl::StatusOr<AgentStarterOptions> StarterOptions(const Options& o,
                                                   bool any_local) {
  AgentStarterOptions ao;
  if (any_local) {
    absl::StatusOr<std::string> agent = LocalAgentPath(o);
    if (!agent.ok()) return agent.status();
    ao.local_agent = *agent;
  }
  ao.remote_agent = RemoteAgentPath(o);
  if (o.slurm.has_value()) {
    ao.launch = AgentLaunch::kSrun;
    ao.slurm_job_id = o.slurm->job_id;
    ao.srun_env = SrunEnvironment(host::CurrentEnvironment());
  }
  // Local workers start from the same filtered environment as remote ones,
  // not from this session's (SSH_CONNECTION, HOSTNAME, ... of this login).
  for (const auto& [k, v] :
       ForwardedEnvironment(host::CurrentEnvironment(), {})) {
    ao.local_env.push_back(absl::StrCat(k, "=", v));
  }
  ao.ssh_port = o.ssh_port;
  ao.ssh_identity_file = o.ssh_identity_file;
  ao.ssh_config_file = o.ssh_config_file;
  ao.connect_timeout = o.start_timeout;
  return ao;
}

// Which agent starts which: past --launch-fanout remote hosts, a tree of
// agents over ssh. Under Slurm srun starts every agent (and fans out
// itself); an elastic job's hosts come one by one.
void PlanLaunchTree(const Options& o, LaunchPlan* plan) {
  std::vector<bool> from_launcher = plan->local;
  if (o.slurm.has_value()) from_launcher.assign(plan->local.size(), true);
  plan->parents = host::LaunchParents(
      from_launcher, o.launch_fanout.value_or(kDefaultLaunchFanout));
  for (size_t h = 0; h < plan->parents.size(); ++h) {
    if (plan->parents[h] < 0) continue;
    plan->tree.push_back({static_cast<int>(h), plan->parents[h],
                          plan->assignment[h].name});
  }
}

// A path as it reads from any directory: a launch tree's agents run ssh
// from their own.
std::string Absolute(const std::string& path, const std::string& cwd) {
  if (path.empty() || path[0] == '/') return path;
  return absl::StrCat(cwd, "/", path);
}

// Fills `plan`; returns -1, or the exit code when the job cannot start
// (2 for bad input, 1 for anything else).
int PlanLaunch(const Options& o, LaunchPlan* plan) {
  if (IsElastic(o)) {
    // Hosts come and go: the driver starts their agents (MakeDriver).
    plan->np = o.num_proc.value_or(o.elastic.min_np.value_or(1));
    plan->any_remote = true;
  } else {
    absl::StatusOr<std::vector<HostSlots>> hosts = LaunchHosts(o);
    if (!hosts.ok()) return BadInput(hosts.status().message());
    int slots = 0;
    for (const HostSlots& h : *hosts) slots += h.slots;
    plan->np = o.num_proc.value_or(slots);
    absl::StatusOr<std::vector<HostAssignment>> assignment =
        AssignRanks(*hosts, plan->np);
    if (!assignment.ok()) return BadInput(assignment.status().message());
    plan->assignment = *std::move(assignment);
  }
  if (!o.output_filename.empty() && !MakeDirs(o.output_filename)) {
    return BadInput(absl::StrCat("cannot create --output-filename directory ",
                                 o.output_filename, ": ", strerror(errno)));
  }
  bool any_local = IsElastic(o);
  for (const HostAssignment& a : plan->assignment) {
    // Under Slurm every node's agent starts with srun, this one's too.
    plan->local.push_back(!o.slurm.has_value() && host::IsLocalHost(a.name));
    plan->any_remote = plan->any_remote || !plan->local.back();
    any_local = any_local || plan->local.back();
  }
  absl::StatusOr<AgentStarterOptions> starter = StarterOptions(o, any_local);
  if (!starter.ok()) return Failure(starter.status().message());
  plan->starter = *std::move(starter);
  PlanLaunchTree(o, plan);
  plan->launcher_addrs = LauncherAddresses(o.network_interfaces);
  if (plan->any_remote && plan->launcher_addrs.empty()) {
    return Failure("no non-loopback IPv4 address here for remote agents to "
                   "dial back to");
  }
  absl::StatusOr<std::string> token = RandomHex(32);
  if (!token.ok()) return Failure(token.status().message());
  plan->token = *token;
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof(cwd)) == nullptr) cwd[0] = '\0';
  plan->cwd = cwd;
  return -1;
}

// What the agent of host `i` is told on its stdin: the token, its index and
// name, and the rendezvous addresses it may dial (loopback for this
// machine).
host::Bootstrap AgentBootstrap(const Options& o, const LaunchPlan& plan,
                               int index, const std::string& name, bool local,
                               int port) {
  host::Bootstrap b;
  b.token = plan.token;
  b.host_index = index;
  b.host_name = name;
  b.verbose = o.verbose;
  b.connect_timeout = o.start_timeout;
  // Addresses are probed only between several hosts without named ones.
  b.probe = !IsElastic(o) && plan.assignment.size() > 1 &&
            o.network_interfaces.empty();
  if (!plan.certs.ca_pem.empty()) {
    b.tls_ca_pem = plan.certs.ca_pem;
    b.tls_name = rendezvous::kJobServerName;
  }
  if (local) {
    b.rendezvous = {absl::StrCat("127.0.0.1:", port)};
  } else {
    for (const std::string& a : plan.launcher_addrs) {
      b.rendezvous.push_back(absl::StrCat(a, ":", port));
    }
  }
  b.below = host::Subtree(plan.tree, index);
  if (!b.below.empty()) {
    b.agent_path = plan.starter.remote_agent;
    b.ssh_port = o.ssh_port.value_or(0);
    b.ssh_identity_file = Absolute(o.ssh_identity_file, plan.cwd);
    b.ssh_config_file = Absolute(o.ssh_config_file, plan.cwd);
  }
  return b;
}

// An elastic job's driver, whose agents `starter` (set before the job runs)
// starts; null for a fixed job. Its discovery starts here, after the
// termination signals are blocked, so that its thread inherits the mask.
absl::StatusOr<std::unique_ptr<ElasticDriver>> MakeDriver(
    const Options& o, const LaunchPlan& plan, OutputSink* sink,
    std::unique_ptr<HostDiscovery>* discovery, AgentStarter** starter,
    const int* port) {
  if (!IsElastic(o)) return nullptr;
  absl::StatusOr<ElasticSettings> settings = ElasticSettingsOf(o);
  if (!settings.ok()) return settings.status();
  absl::StatusOr<std::unique_ptr<HostDiscovery>> d =
      StartHostDiscovery(o, host::RealOs());
  if (!d.ok()) return d.status();
  *discovery = *std::move(d);
  auto start = [&o, &plan, sink, starter, port](
                   int h, const std::string& name) -> absl::Status {
    const bool local = host::IsLocalHost(name);
    if (o.verbose) sink->Message(absl::StrCat("hvdrun: starting the agent "
                                              "of ", name));
    return (*starter)->Start(
        h, name, local, AgentBootstrap(o, plan, h, name, local, *port));
  };
  return std::make_unique<ElasticDriver>(*std::move(settings),
                                         discovery->get(), std::move(start),
                                         host::RealOs());
}

int RunLaunchedJob(const Options& o, const LaunchPlan& plan) {
  sigset_t signals = BlockTerminationSignals();
  static OutputSink sink(1, 2, o.output_filename, Clock(o));
  JobConfig c = BaseConfig(o, plan.np);
  c.hosts = plan.assignment;
  c.agent_parents = plan.parents;
  c.env = ForwardedEnvironment(host::CurrentEnvironment(), o.env);
  if (o.slurm.has_value()) DropPerNodeSlurmVariables(o.env, &c.env);
  for (const auto& [k, v] : TunableEnvironment(o)) c.env[k] = v;
  c.cwd = plan.cwd;
  std::unique_ptr<HostDiscovery> discovery;
  AgentStarter* starter_of_driver = nullptr;
  int port = 0;
  absl::StatusOr<std::unique_ptr<ElasticDriver>> driver =
      MakeDriver(o, plan, &sink, &discovery, &starter_of_driver, &port);
  if (!driver.ok()) return Failure(driver.status().message());
  c.elastic = driver->get();
  auto* job = new Job(c, &sink);  // lives until exit: the signal thread uses it
  WatchSignals(signals, job);

  RendezvousServerOptions so;
  const char* host = plan.any_remote ? "0.0.0.0" : "127.0.0.1";
  so.address = absl::StrCat(host, ":", o.port.value_or(0));
  so.token = plan.token;
  so.tls = plan.certs.server;
  so.extra_services = {job};
  if (*driver) so.extra_services.push_back(driver->get());
  // An elastic job's ranks move between processes: the server checks none.
  so.size = *driver ? 0 : plan.np;
  so.on_register =
      RegistrationCounter(host::RealOs(), &sink, plan.np, o.verbose);
  RendezvousServer server(so);
  if (absl::Status s = server.Start(); !s.ok()) return Failure(s.message());
  port = server.port();
  auto metrics = StartMetrics(o, job, &server);
  if (!metrics.ok()) return Failure(metrics.status().message());

  AgentStarter starter(
      plan.starter, host::RealOs(),
      [job](int host, std::string why) {
        job->AgentProcessExited(host, std::move(why));
      },
      [&](int host, std::string line) {
        if (o.verbose) {
          sink.Message(absl::StrCat("hvdrun: [agent #", host, "] ", line));
        }
      });
  starter_of_driver = &starter;
  for (size_t i = 0; i < plan.assignment.size(); ++i) {
    const int h = static_cast<int>(i);
    if (plan.parents[i] >= 0) continue;  // started by an agent
    host::Bootstrap b = AgentBootstrap(o, plan, h, plan.assignment[i].name,
                                       plan.local[i], port);
    absl::Status s = starter.Start(h, b.host_name, plan.local[i], b);
    if (!s.ok()) {
      job->AgentStartFailed(static_cast<int>(i), std::string(s.message()));
    }
  }
  int code = job->Run();
  if (*metrics) job->Linger(o.metrics_linger);
  if (*driver) (*driver)->Stop();
  job->CloseStreams();
  starter.KillAll(absl::Seconds(1));
  server.Shutdown();
  return code;
}

}  // namespace

int HvdrunMain(const std::vector<std::string>& args) {
  absl::StatusOr<Options> parsed = ParseCommandLine(args);
  if (!parsed.ok()) return BadInput(parsed.status().message());
  Options& o = *parsed;
  if (o.help) {
    std::fputs(HelpText().c_str(), stdout);
    return 0;
  }
  if (o.version) {
    std::printf("hvdrun %s\n", kVersion);
    return 0;
  }
  if (o.check_build) return CheckBuild();
  if (o.self_test) {
    absl::Status s = PrepareSelfTest(&o, HvdrunDir() + "/hvd-selftest");
    if (!s.ok()) return BadInput(s.message());
  }
  if (absl::Status s = ApplySlurmAllocation(host::CurrentEnvironment(), &o);
      !s.ok()) {
    return BadInput(s.message());
  }
  if (absl::Status s = ValidateOptions(o); !s.ok()) {
    return BadInput(s.message());
  }
  if (absl::Status s = ApplyIdentityVariables(host::CurrentEnvironment(), &o);
      !s.ok()) {
    return BadInput(s.message());
  }
  for (const std::string& note : o.notes) {
    std::fprintf(stderr, "hvdrun: note: %s\n", note.c_str());
  }
  if (o.slurm.has_value() && o.verbose) {
    std::fprintf(stderr,
                 "hvdrun: Slurm job %s: hosts from %s; agents start with "
                 "srun\n",
                 o.slurm->job_id.c_str(), o.slurm->source.c_str());
  }
  SetLogLevel(o.verbose ? LogLevel::kInfo : LogLevel::kWarning);
  if (o.rendezvous_only) return RendezvousOnly(o);
  LaunchPlan plan;
  if (int code = PlanLaunch(o, &plan); code >= 0) return code;
  absl::StatusOr<rendezvous::JobCertificates> certs =
      LaunchedJobTls(o, plan.any_remote);
  if (!certs.ok()) return Failure(certs.status().message());
  plan.certs = *std::move(certs);
  return RunLaunchedJob(o, plan);
}

}  // namespace launcher
}  // namespace hvd
