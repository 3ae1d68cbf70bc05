#include "host/agent_starter.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace hvd {
namespace host {

struct AgentStarter::Agent {
  int index = 0;
  std::string host;
  bool local = false;
  std::unique_ptr<host::Process> process;
  int stdin_fd = -1;
  std::thread monitor;
  bool done = false;  // guarded by AgentStarter::mu_
};

std::string ShellQuote(const std::string& s) {
  if (!s.empty() &&
      s.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                          "0123456789_-./:=@,+") == std::string::npos) {
    return s;
  }
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

namespace {

// One srun per node rather than one across all nodes: each agent gets its own
// bootstrap on stdin (its host's index and name), and its own end is
// reported and named, exactly as over ssh; srun hands its stdin, and its
// end, to its one task. The step is one task with the node's whole share of
// the job: without --exact a step gets every CPU of the job on its nodes,
// --mem=0 all the job's memory there and, by default, all its GPUs. Its
// workers are the agent's children, not Slurm tasks. --overlap: the step
// neither waits for nor blocks the job's other steps (the batch script's,
// an interactive shell's).
std::vector<std::string> SrunCommand(const AgentStarterOptions& o,
                                     const std::string& node) {
  std::vector<std::string> argv = {"srun"};
  if (!o.slurm_job_id.empty()) argv.push_back("--jobid=" + o.slurm_job_id);
  argv.insert(argv.end(),
              {"--nodes=1", "--ntasks=1", "--ntasks-per-node=1",
               "--nodelist=" + node, "--overlap", "--mem=0",
               "--job-name=hvd-agent", o.remote_agent, "--launcher-stdin"});
  return argv;
}

}  // namespace

std::vector<std::string> AgentCommand(const AgentStarterOptions& o,
                                      const std::string& host, bool local) {
  if (local) return {o.local_agent, "--launcher-stdin"};
  if (o.launch == AgentLaunch::kSrun) return SrunCommand(o, host);
  std::vector<std::string> argv = {"ssh"};
  if (!o.ssh_config_file.empty()) {
    argv.insert(argv.end(), {"-F", o.ssh_config_file});
  }
  const int64_t connect_s =
      std::max<int64_t>(1, absl::ToInt64Seconds(o.connect_timeout));
  // BatchMode: never prompt (there is no one to answer). -T: no tty, so the
  // agent's stdin is the bootstrap pipe. -x -a: no X11 or agent forwarding.
  argv.insert(argv.end(), {"-o", "BatchMode=yes", "-o",
                           absl::StrCat("ConnectTimeout=", connect_s), "-T",
                           "-x", "-a"});
  if (o.ssh_port.has_value()) {
    argv.insert(argv.end(), {"-p", absl::StrCat(*o.ssh_port)});
  }
  if (!o.ssh_identity_file.empty()) {
    argv.insert(argv.end(), {"-i", o.ssh_identity_file});
  }
  argv.push_back(host);
  // exec: the agent replaces the remote shell, so nothing sits between sshd
  // and it.
  argv.push_back(
      absl::StrCat("exec ", ShellQuote(o.remote_agent), " --launcher-stdin"));
  return argv;
}

AgentStarter::AgentStarter(AgentStarterOptions options, host::Os* os,
                           std::function<void(int, std::string)> on_exit,
                           std::function<void(int, std::string)> on_line)
    : options_(std::move(options)),
      os_(os),
      on_exit_(std::move(on_exit)),
      on_line_(std::move(on_line)) {}

AgentStarter::~AgentStarter() { KillAll(absl::Seconds(1)); }

absl::Status AgentStarter::Start(int index, const std::string& host, bool local,
                                 const host::Bootstrap& bootstrap) {
  host::SpawnOptions o;
  o.argv = AgentCommand(options_, host, local);
  o.env = local                                 ? options_.local_env
          : options_.launch == AgentLaunch::kSrun ? options_.srun_env
                                                  : host::CurrentEnvironment();
  o.new_process_group = true;  // a terminal's Ctrl-C reaches hvdrun only
  o.parent_death_signal = SIGTERM;
  o.stdin_mode = host::Stdio::kPipe;
  o.stdout_mode = host::Stdio::kNull;
  o.stderr_mode = host::Stdio::kPipe;
  absl::StatusOr<std::unique_ptr<host::Process>> p = os_->Spawn(o);
  if (!p.ok()) return p.status();
  auto agent = std::make_unique<Agent>();
  agent->index = index;
  agent->host = host;
  agent->local = local;
  agent->process = *std::move(p);
  agent->stdin_fd = agent->process->TakeStdin();
  const std::string text = host::SerializeBootstrap(bootstrap);
  // ssh reads its stdin only once connected: a bootstrap larger than the
  // pipe (a launch tree's top agent told of thousands of hosts below it)
  // would hold up the next agent's start until then. Linux lets the pipe
  // grow to 1 MiB unprivileged; past that the write just waits.
  if (text.size() > 65536) {
    fcntl(agent->stdin_fd, F_SETPIPE_SZ,
          static_cast<int>(std::min<size_t>(text.size(), 1 << 20)));
  }
  // A failed write means the agent is already gone; its monitor says why.
  host::WriteAll(agent->stdin_fd, text).IgnoreError();
  Agent* raw = agent.get();
  absl::MutexLock lock(&mu_);
  agents_.push_back(std::move(agent));
  raw->monitor = std::thread([this, raw] { Monitor(raw); });
  return absl::OkStatus();
}

void AgentStarter::Monitor(Agent* a) {
  int fd = a->process->TakeStderr();
  std::string tail;  // the last 2 KiB of whole lines
  const std::string pending = host::ReadLines(fd, [&](absl::string_view line) {
    if (on_line_) on_line_(a->index, std::string(line));
    absl::StrAppend(&tail, line, "\n");
    if (tail.size() > 2048) tail.erase(0, tail.size() - 2048);
  });
  if (!pending.empty()) {
    if (on_line_) on_line_(a->index, pending);
    tail += pending;
  }
  close(fd);
  absl::StatusOr<host::ExitStatus> status = a->process->Wait();
  std::string why = status.ok() ? status->ToString() : "ended";
  if (!a->local) {
    const bool srun = options_.launch == AgentLaunch::kSrun;
    why = absl::StrCat(srun ? "srun " : "ssh ", why);
    if (status.ok() && status->code == 127 && status->signal == 0 && !srun) {
      why += " (hvd-agent not found on that host?)";
    }
  }
  // The last few lines say what went wrong (ssh's error, or the agent's).
  std::vector<std::string> lines = absl::StrSplit(
      absl::StripTrailingAsciiWhitespace(tail), '\n', absl::SkipEmpty());
  if (lines.size() > 3) lines.erase(lines.begin(), lines.end() - 3);
  if (!lines.empty()) why += ": " + absl::StrJoin(lines, " / ");
  {
    absl::MutexLock lock(&mu_);
    a->done = true;
  }
  on_exit_(a->index, why);
}

void AgentStarter::KillAll(absl::Duration grace) {
  std::vector<Agent*> agents;
  {
    absl::MutexLock lock(&mu_);
    for (auto& a : agents_) agents.push_back(a.get());
  }
  for (Agent* a : agents) {
    if (a->stdin_fd >= 0) {
      close(a->stdin_fd);
      a->stdin_fd = -1;
    }
  }
  auto all_done = [&]() {
    absl::MutexLock lock(&mu_);
    for (Agent* a : agents) {
      if (!a->done) return false;
    }
    return true;
  };
  // Agents told to shut down exit by themselves; give them a moment first.
  absl::Time deadline = os_->Now() + grace;
  while (!all_done() && os_->Now() < deadline) {
    os_->SleepFor(absl::Milliseconds(10));
  }
  if (!all_done()) {
    for (Agent* a : agents) {
      absl::MutexLock lock(&mu_);
      if (!a->done) a->process->Signal(SIGTERM).IgnoreError();
    }
    deadline = os_->Now() + grace;
    while (!all_done() && os_->Now() < deadline) {
      os_->SleepFor(absl::Milliseconds(10));
    }
    for (Agent* a : agents) {
      absl::MutexLock lock(&mu_);
      if (!a->done) a->process->Signal(SIGKILL).IgnoreError();
    }
  }
  for (Agent* a : agents) {
    if (a->monitor.joinable()) a->monitor.join();
  }
}

}  // namespace host
}  // namespace hvd
