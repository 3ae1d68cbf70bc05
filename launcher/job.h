// One job, as hvdrun (or `hvdrun --rendezvous-only`) sees it: the agents that
// join over the AgentService stream, the data-plane addresses chosen for
// them, the workers they start, and the job's end.
//
// Life of a job: agents join (Hello) -> multi-host jobs probe which addresses
// every host can reach -> each agent gets its LaunchSpec -> workers run,
// output and exits stream back -> the first failure (a worker exiting
// non-zero or by a signal, an agent lost, a start-up timeout, a signal to
// hvdrun) sends Terminate to every agent -> every agent gets Shutdown and
// exits. Run() returns hvdrun's exit code.
//
// The pieces: launcher/agent_conn.h (one agent's stream), job_host.h (what
// the job knows of a host), job_addresses.h (choosing data-plane addresses),
// job_messages.h (what goes to agents, what an exit report means); job.cc
// (joining, the agents' messages, the phases) and job_end.cc (lost agents,
// the first failure, termination and shutdown) are this class.
//
// Threading: Attach runs on gRPC threads, one per agent; AgentProcessExited,
// AgentStartFailed and Interrupt may be called from any thread; Run on one
// thread (hvdrun's main thread). All state, each agent's AgentConn included,
// is under mu_; worker output is printed outside it.
#ifndef HVD_LAUNCHER_JOB_H_
#define HVD_LAUNCHER_JOB_H_

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "host/process.h"
#include "launcher/elastic_driver.h"
#include "launcher/job_config.h"
#include "launcher/job_messages.h"
#include "launcher/output_sink.h"
#include "proto/launcher.grpc.pb.h"

namespace hvd {
namespace launcher {

// How long a failure that may be the echo of another waits for its cause
// (Job::held_failure_): the loss of a host is seen within milliseconds of
// the connection breaking, and a peer killed by a signal as fast, while the
// survivors' exits, and the agents an agent lost had started, follow.
inline constexpr absl::Duration kCauseGrace = absl::Seconds(1);

class AgentConn;  // launcher/agent_conn.h
struct JobHost;   // launcher/job_host.h

class Job final : public AgentService::Service, private ElasticJobControl {
 public:
  // `sink` (not owned) must outlive the job. `os` gives the clock every
  // deadline and heartbeat is measured with.
  Job(JobConfig config, OutputSink* sink, host::Os* os = host::RealOs());
  ~Job() override;
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  grpc::Status Attach(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<LauncherMessage, AgentMessage>* stream) override;

  // Launcher mode: the agent process of host `host` (ssh, or the local
  // agent) ended; `why` describes how ("ssh exited with code 255: ssh:
  // connect to host ... refused"). Unexpected before the job's end: it fails
  // the job naming the host.
  void AgentProcessExited(int host, std::string why);
  // Launcher mode: the agent of `host` could not even be spawned.
  void AgentStartFailed(int host, std::string why);
  // SIGINT/SIGTERM to hvdrun: end the job with 128 + sig.
  void Interrupt(int sig);

  // Runs the job to its end; returns hvdrun's exit code: 0 when every worker
  // exited 0; the first failing worker's code (128 + signal); 128 + S after
  // signal S to hvdrun; 1 for any other failure (start-up, agent lost).
  int Run();
  // Cancels every agent stream still open. Call after Run, before the
  // server shuts down.
  void CloseStreams();

  // The job at a glance (hvdrun's metrics page). Thread-safe.
  struct RankView {
    int rank = 0;
    std::string host;
    // "starting", "running", "stopped", "lost with its host", or how it
    // ended: "exited with code 0", "killed by signal 9 (Killed)".
    std::string state;
  };
  struct View {
    std::string phase;    // "starting", "running", "ending", "ended"
    std::string failure;  // the first failure's line; empty: none yet
    std::vector<RankView> ranks;  // by rank
  };
  View Glance() const ABSL_LOCKS_EXCLUDED(mu_);
  // After Run: waits `d`, or less if hvdrun gets a signal meanwhile.
  void Linger(absl::Duration d) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  enum class Phase { kWaiting, kProbing, kRunning, kTerminating, kShutdown,
                     kDone };

  // ---- Joining and the agents' messages (job.cc) ----
  // Accepts `hello` on `conn` (or says why not) and welcomes the agent.
  absl::Status Join(AgentConn* conn, const Hello& hello)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The index of the host a Hello joins as: launcher mode, the one hvdrun
  // started it for; orchestrator mode, a new host.
  absl::StatusOr<int> AdmitLaunched(const Hello& hello)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<int> AdmitOrchestrated(const Hello& hello)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnMessage(AgentConn* conn, const AgentMessage& m)
      ABSL_LOCKS_EXCLUDED(mu_);
  void OnOutput(AgentConn* conn, const WorkerOutput& output)
      ABSL_LOCKS_EXCLUDED(mu_);
  void OnProbeResult(JobHost& host, const ProbeResult& result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A worker found stopped or running again: said at once, and named in
  // the job's failure while it stays stopped.
  void OnStopped(JobHost& host, const WorkerStopped& stopped)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // "; rank R (host H) is stopped ..." for each stopped worker, or "".
  std::string StoppedNote() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A launch tree: the agent of host `parent` says the agent it started
  // for another host ended (job_end.cc).
  void OnAgentBelowEnded(int parent, const AgentEnded& ended)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // ---- The phases up to running (job.cc) ----
  void Step(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StepWaiting(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StepProbing(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StepRunning(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FormOrchestratedJob() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Data-plane addresses: named by --network-interfaces (or loopback for
  // one host), then Launch; else start probing.
  void ChooseAddresses() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool UseNamedAddresses(const std::vector<int>& in_job)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartProbing(const std::vector<int>& in_job)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Picks data-plane addresses if the probe results so far decide them
  // (all of them, when `final`) and launches; false while undecided.
  bool FinishProbing(bool final) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Launch() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // ---- Lost agents and the job's end (job_end.cc) ----
  // Heartbeats to every agent when due; a host silent past the timeout is
  // lost.
  void Heartbeats(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnStreamEnded(AgentConn* conn) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HostLost(int host, const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The agent of `host` ended, or never started: the host is lost unless
  // it was told to shut down.
  void AgentEndedLocked(int host, const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records the job's first failure (later ones are ignored), prints it and
  // starts ending the job.
  void Fail(int code, const std::string& message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void BeginShutdown(int code) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StepTerminating(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StepShutdown(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool AllWorkersExited() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // ---- Elastic jobs (job_elastic.cc) ----
  // Launches the hosts whose agents joined, starts the agents' clocks, and
  // steps the driver.
  void StepElastic(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ElasticJobControl: called by the driver with mu_ held.
  int AddHost(const std::string& name, std::vector<WorkerSlot> workers) override;
  void RemoveHost(int h, const std::string& why) override;
  void EndJob(int code, const std::string& message) override;

  // ---- Shared (job.cc) ----
  void Send(int host, LauncherMessage m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Say(const std::string& line) override;  // hvdrun's own stderr line
  std::vector<int> InJob() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string HostName(int host) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The host whose agent starts `host`'s (JobConfig::agent_parents); -1:
  // hvdrun.
  int AgentParent(int host) const;
  // Whether `above`'s agent started `host`'s, or one that did, and so on.
  bool IsAbove(int above, int host) const;

  const JobConfig config_;
  OutputSink* const sink_;
  host::Os* const os_;
  const absl::Time created_;

  mutable absl::Mutex mu_;
  Phase phase_ ABSL_GUARDED_BY(mu_) = Phase::kWaiting;
  std::vector<JobHost> hosts_ ABSL_GUARDED_BY(mu_);
  // The open streams of agents whose Hello was accepted; each lives on the
  // stack of its Attach call.
  std::set<AgentConn*> conns_ ABSL_GUARDED_BY(mu_);
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
  std::string failure_ ABSL_GUARDED_BY(mu_);  // the first failure's line
  // A worker's plain non-zero exit is often the echo of a failure elsewhere
  // (its peer's host lost, a peer killed), and so is the loss of an agent
  // another agent started (that one lost): held until held_until_ for that
  // cause to arrive and be announced instead (kCauseGrace). held_host_: the
  // host of a held agent loss, -1 for a worker's exit.
  std::optional<JobFailure> held_failure_ ABSL_GUARDED_BY(mu_);
  int held_host_ ABSL_GUARDED_BY(mu_) = -1;
  absl::Time held_until_ ABSL_GUARDED_BY(mu_);
  int exit_code_ ABSL_GUARDED_BY(mu_) = 0;
  int signal_ ABSL_GUARDED_BY(mu_) = 0;   // the first signal to hvdrun
  int signals_ ABSL_GUARDED_BY(mu_) = 0;  // how many it has had
  absl::Time start_deadline_ ABSL_GUARDED_BY(mu_);
  absl::Time phase_deadline_ ABSL_GUARDED_BY(mu_);
  absl::Time next_heartbeat_ ABSL_GUARDED_BY(mu_);
  bool all_started_said_ ABSL_GUARDED_BY(mu_) = false;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;  // something happened: Step now
};

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_JOB_H_
