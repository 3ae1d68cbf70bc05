// hvd-agent: one per host. Dials the launcher's AgentService (agents only
// dial out), says which interfaces it has, probes the other hosts when asked,
// starts this host's workers from the launch spec, streams their output and
// exits back, and ends them when the job ends or the launcher goes away.
#ifndef HVD_AGENT_AGENT_H_
#define HVD_AGENT_AGENT_H_

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/reaper.h"
#include "agent/worker.h"
#include "core/rendezvous/tls.h"
#include "host/process.h"
#include "proto/launcher.grpc.pb.h"

namespace hvd {
namespace agent {

struct AgentOptions {
  // "a.b.c.d:port" candidates for the rendezvous server, preferred first.
  std::vector<std::string> rendezvous;
  std::string token;
  // TLS to the rendezvous; passed on to the workers. Empty: plaintext.
  rendezvous::ClientTls tls;
  // Started by hvdrun: its index in hvdrun's host list; -1: started by an
  // orchestrator (joins with `slots`, gets an index in join order).
  int host_index = -1;
  std::string hostname;  // HVD_HOSTNAME of the workers (-H name, or own)
  int slots = 0;         // orchestrated
  std::vector<std::string> command;  // orchestrated: the workers' command
  // How long to keep trying to reach the rendezvous server.
  absl::Duration connect_timeout = absl::Seconds(10);
  // If >= 0, a descriptor whose end (EOF, hang-up) means the launcher is
  // gone: hvdrun keeps the agent's stdin open for the whole job, over ssh
  // too, so even an agent that never reached the rendezvous notices.
  int launcher_fd = -1;
  // Whether to open the reachability listener hvdrun probes (on every
  // address); without it the agent tells hvdrun port 0.
  bool probe_listener = true;
};

// Run() on the main thread; Signal() from any thread.
class Agent {
 public:
  // Workers start, and time passes, through `os`; each worker's group is
  // tracked by `reaper` while it runs. Neither is owned; both must outlive
  // the agent. `reaper` may be null (tests): then only the workers' parent-
  // death signal ends them if the agent is killed with SIGKILL.
  Agent(AgentOptions options, host::Os* os, Reaper* reaper);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Runs until the job ends; returns the agent's exit code: the code the
  // launcher's Shutdown names (0 for a clean job), 1 when the launcher was
  // lost or refused us, 128+S after signal S. Workers are gone on return.
  int Run();
  // Asks Run to end the workers and return 128+sig.
  void Signal(int sig);
  // Tells hvdrun that the agent of host `host_index`, which this one
  // started (a launch tree), ended or could not start, and why. Kept until
  // the stream to hvdrun is open; any thread.
  void ReportAgentEnded(int host_index, std::string why);

 private:
  using Stream = grpc::ClientReaderWriter<launcher::AgentMessage,
                                          launcher::LauncherMessage>;
  // What the main loop acts on, taken from under mu_ in one go.
  struct Events {
    std::deque<launcher::LauncherMessage> inbox;
    std::vector<launcher::WorkerExit> exits;
    std::vector<launcher::AgentEnded> agents_ended;
    bool stream_ended = false;
    bool fd_closed = false;
    int signal = 0;
    absl::Time last_heard;
  };

  absl::Status Connect();
  // The main loop, once the stream is open: runs until the job ends.
  int Serve();
  // Waits up to 100 ms for something to happen; returns what did.
  Events NextEvents() ABSL_LOCKS_EXCLUDED(mu_);
  void ReadLoop();
  void WatchLauncherFd();
  bool Send(const launcher::AgentMessage& message);
  void Handle(const launcher::LauncherMessage& message);
  void Probe(const launcher::ProbeRequest& request);
  void Launch(const launcher::LaunchSpec& spec);
  // Starts a worker and reports it started (or why it could not start).
  void StartWorker(int rank, host::SpawnOptions options);
  // Where a worker's output and exit go: to the launcher, and to exits_.
  WorkerCallbacks WorkerReports();
  launcher::AgentMessage MakeHello(int probe_port,
                                  const std::string& nonce) const;
  // The exit code when the launcher is gone (stream ended, stdin closed,
  // silence past the heartbeat timeout) or a signal came; the workers are
  // ended first.
  std::optional<int> EndIfLauncherGone(bool ended, bool fd_closed, int sig,
                                       absl::Time last_heard);
  // Tells hvdrun of each worker found stopped, or running again.
  void ReportStoppedWorkers();
  void TerminateWorkers(int sig);
  // SIGTERM, the grace period, SIGKILL; waits until every group is gone,
  // then joins the workers' threads.
  void EndWorkers();
  // No Write after this; cancels the call if `cancel`, joins the reader and
  // returns the call's final status.
  grpc::Status CloseStream(bool cancel);

  const AgentOptions options_;
  host::Os* const os_;
  Reaper* const reaper_;
  std::string rendezvous_addr_;
  std::unique_ptr<launcher::AgentService::Stub> stub_;
  std::unique_ptr<grpc::ClientContext> context_;
  std::unique_ptr<Stream> stream_;
  absl::Mutex write_mu_;  // one Write at a time on stream_
  bool closed_ ABSL_GUARDED_BY(write_mu_) = false;
  std::thread reader_;
  std::thread fd_watcher_;
  std::atomic<bool> stopping_{false};
  std::vector<std::thread> helpers_;  // probes; joined at the end

  absl::Duration heartbeat_interval_ = absl::Seconds(1);
  absl::Duration heartbeat_timeout_ = absl::Seconds(10);
  absl::Duration kill_grace_ = absl::Seconds(5);

  absl::Mutex mu_;
  std::deque<launcher::LauncherMessage> inbox_ ABSL_GUARDED_BY(mu_);
  bool stream_ended_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_heard_ ABSL_GUARDED_BY(mu_);
  int signal_ ABSL_GUARDED_BY(mu_) = 0;
  bool launcher_fd_closed_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<launcher::WorkerExit> exits_ ABSL_GUARDED_BY(mu_);
  std::vector<launcher::AgentEnded> agents_ended_ ABSL_GUARDED_BY(mu_);

  // Main thread only.
  bool welcomed_ = false;
  absl::Time kill_at_ = absl::InfiniteFuture();  // SIGKILL after Terminate
  std::vector<std::unique_ptr<Worker>> workers_;
  std::set<int> stopped_;  // ranks last reported stopped
  std::string hostname_;
};

}  // namespace agent
}  // namespace hvd

#endif  // HVD_AGENT_AGENT_H_
