// Starts one hvd-agent per host for hvdrun (and, in a launch tree, for an
// agent: host/launch_tree.h): fork/exec on this machine, `ssh host hvd-agent
// --launcher-stdin` elsewhere, or, inside a Slurm allocation, `srun ...
// --nodelist=host hvd-agent --launcher-stdin` on every node. The
// bootstrap (with the job token) goes to the agent's stdin, never onto a
// command line. Each agent's stderr is collected (the tail of it quoted when
// the agent fails: ssh's and srun's own errors land there) and its end is
// reported.
#ifndef HVD_HOST_AGENT_STARTER_H_
#define HVD_HOST_AGENT_STARTER_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "host/bootstrap.h"
#include "host/process.h"

namespace hvd {
namespace host {

// How agents on hosts that are not this machine start.
enum class AgentLaunch {
  kSsh,   // ssh host hvd-agent
  // srun: one single-task step per node of the Slurm allocation. The host of
  // hvdrun is then started the same way (hvdrun passes local = false), so
  // Slurm sees, accounts and can signal every agent and its workers.
  kSrun,
};

struct AgentStarterOptions {
  std::string local_agent;   // the agent binary here (absolute path)
  std::string remote_agent;  // what ssh or srun runs on remote hosts
  AgentLaunch launch = AgentLaunch::kSsh;
  std::string slurm_job_id;  // kSrun: the allocation (srun --jobid)
  // kSrun: the environment srun runs in (and hands its step); ssh runs in
  // hvdrun's own.
  std::vector<std::string> srun_env;
  // The local agent's environment ("NAME=VALUE"); its workers start from it.
  // Remote agents get their ssh session's.
  std::vector<std::string> local_env;
  std::optional<int> ssh_port;
  std::string ssh_identity_file;
  std::string ssh_config_file;
  absl::Duration connect_timeout = absl::Seconds(30);
};

// The argv that starts the agent of `host`: the local binary, ssh or srun.
std::vector<std::string> AgentCommand(const AgentStarterOptions& options,
                                      const std::string& host, bool local);

// Quotes `s` for a POSIX shell (ssh hands the remote command to one).
std::string ShellQuote(const std::string& s);

class AgentStarter {
 public:
  // on_exit(host, why) is called once per started agent when it ends, from a
  // monitor thread; `why` is "exited with code 3" or "ssh exited with code
  // 255" (srun likewise), then ": " and the last lines of its stderr, if any.
  // on_line(host, line), if set, gets every stderr line as it comes.
  AgentStarter(AgentStarterOptions options, host::Os* os,
               std::function<void(int, std::string)> on_exit,
               std::function<void(int, std::string)> on_line);
  // Kills what is still running (see KillAll) and joins the monitors.
  ~AgentStarter();
  AgentStarter(const AgentStarter&) = delete;
  AgentStarter& operator=(const AgentStarter&) = delete;

  // Spawns the agent of host `index` and writes `bootstrap` to its stdin
  // (kept open until KillAll, so the agent can tell when hvdrun is gone).
  // Must run on a thread that lives as long as the agents (they get
  // SIGTERM when it ends). The error says why it could not be spawned.
  absl::Status Start(int index, const std::string& host, bool local,
                     const host::Bootstrap& bootstrap);

  // SIGTERM to every agent still running (its process group), SIGKILL after
  // `grace`, and waits for the monitors to report.
  void KillAll(absl::Duration grace);

 private:
  struct Agent;
  void Monitor(Agent* agent);

  const AgentStarterOptions options_;
  host::Os* const os_;
  std::function<void(int, std::string)> on_exit_, on_line_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<Agent>> agents_ ABSL_GUARDED_BY(mu_);
};

}  // namespace host
}  // namespace hvd

#endif  // HVD_HOST_AGENT_STARTER_H_
