// The membership of an elastic job (hvdrun --min-np or
// --host-discovery-script): which hosts run workers, which are blacklisted,
// and the rounds the workers join (proto/elastic.proto).
//
// Life of an elastic job: the discovered hosts (or the fixed -H list) get an
// agent each and one worker per slot, up to --max-np -> every worker joins
// round 0 -> training. Then:
// - a worker that fails (exits non-zero, is killed) or a host whose agent is
//   lost ends the round: every member hears ABORT at once (its collectives
//   fail), the host is blacklisted (for good, or for a cooldown), its other
//   workers are ended, and the survivors join the next round;
// - a host that appears in discovery gets an agent and workers, and the
//   members hear HOSTS_UPDATED: at their next commit they join the next
//   round with the new workers; a host that leaves discovery is announced
//   the same way, and its workers are told to exit 0 when they join.
// The members of a round that were in the one before keep the lowest ranks,
// in their old order. The job fails when fewer than --min-np slots remain
// for --elastic-timeout, when every host is blacklisted, or after
// --reset-limit new rounds; it ends when the members of the round have
// exited after one of them exited 0.
//
// Threading: the Elastic service's calls run on gRPC threads and take mu_
// only. The job (launcher/job.h) calls the On*/Step methods with its own
// lock held, and they may call back into the job's control, so the order is
// always the job's lock, then mu_. Discovery runs on a thread of its own.
#ifndef HVD_LAUNCHER_ELASTIC_DRIVER_H_
#define HVD_LAUNCHER_ELASTIC_DRIVER_H_

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "host/process.h"
#include "launcher/host_discovery.h"
#include "launcher/hosts.h"
#include "proto/elastic.grpc.pb.h"
#include "proto/launcher.pb.h"

namespace hvd {
namespace launcher {

struct ElasticSettings {
  int np = 1;      // slots wanted at the start
  int min_np = 1;  // fewer than this for `timeout` fails the job
  int max_np = 0;  // 0: no limit
  absl::Duration timeout = absl::Seconds(600);  // --elastic-timeout
  std::optional<int> reset_limit;
  // A failed host's blacklisting: for good when cooldown_min is zero, else
  // min * 2^(failures - 1) plus up to 1 s of jitter, at most cooldown_max.
  absl::Duration cooldown_min = absl::ZeroDuration();
  absl::Duration cooldown_max = absl::ZeroDuration();
  bool verbose = false;
};

// What the driver asks of the job (launcher/job.h implements it). Every
// call is made with the job's lock held.
class ElasticJobControl {
 public:
  virtual ~ElasticJobControl() = default;
  // A new host entry whose agent the driver then starts; its workers are
  // launched when the agent joins. Returns the job's index of the host.
  virtual int AddHost(const std::string& name,
                      std::vector<WorkerSlot> workers) = 0;
  // Ends the workers of host `h` and shuts its agent down.
  virtual void RemoveHost(int h, const std::string& why) = 0;
  // Ends the job: exit code and the line hvdrun prints (empty: none).
  virtual void EndJob(int code, const std::string& message) = 0;
  virtual void Say(const std::string& line) = 0;
};

// The ranks' places from each rank's host name, in rank order: local rank
// and size among the ranks of its host, cross rank and size among the hosts
// that have a rank of that local rank.
std::vector<WorkerSlot> PlaceRanks(const std::vector<std::string>& host_of);

class ElasticDriver final : public elastic::Elastic::Service {
 public:
  // `start_agent(h, name)` starts the agent of the job's host `h` (called
  // with the job's lock held); an error fails that host.
  using AgentStarterFn =
      std::function<absl::Status(int, const std::string&)>;
  ElasticDriver(ElasticSettings settings, HostDiscovery* discovery,
                AgentStarterFn start_agent, host::Os* os);
  ~ElasticDriver() override;

  // The Elastic service.
  grpc::Status Join(grpc::ServerContext* context,
                    const elastic::JoinRequest* request,
                    elastic::JoinResponse* response) override;
  grpc::Status Watch(grpc::ServerContext* context,
                     const elastic::WatchRequest* request,
                     grpc::ServerWriter<elastic::RoundEvent>* writer) override;

  // From the job, its lock held.
  void Step(ElasticJobControl& job, absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  void OnWorkerExit(ElasticJobControl& job, int h, const WorkerExit& exit)
      ABSL_LOCKS_EXCLUDED(mu_);
  void OnHostLost(ElasticJobControl& job, int h, const std::string& why)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Wakes the service's waiting calls so the server can shut down.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Host {
    int slots = 0;
    int job_host = -1;    // the job's entry of its latest agent; -1: none
    bool active = false;  // it has an agent and workers in the job now
    bool removed = false;  // left discovery: its agent goes once they exit
    int failures = 0;
    // InfinitePast: usable; InfiniteFuture: blacklisted for good.
    absl::Time blacklisted_until = absl::InfinitePast();
  };
  struct Worker {
    std::string host;
    int job_host = -1;
    int number = 0;       // its WorkerSpec.rank: "w<number>" is its id
    int last_round = -1;  // the last round it was a member of
    bool exited = false;
    std::string leaving;  // why it is told EXIT when it joins; empty: not
  };
  struct Round {
    int number = -1;
    std::vector<std::string> members;  // worker ids, in rank order
    std::vector<WorkerSlot> places;    // by rank
    std::vector<elastic::RoundEvent> events;
    bool ended = false;
  };
  struct Forming {
    int number = 0;
    std::set<std::string> expected;  // worker ids
    std::set<std::string> joined;
    absl::Time since;
  };

  // ---- Rounds (elastic_rounds.cc) ----
  void EndRound(const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Announce(bool added, bool removed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OpenRound(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TryForm(ElasticJobControl& job, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FailWorkerHost(ElasticJobControl& job, int h, const std::string& why,
                      absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Blacklist(Host& host, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CheckEnd(ElasticJobControl& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string Describe(const std::string& worker_id) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // ---- Hosts (elastic_hosts.cc) ----
  void ApplyDiscovery(ElasticJobControl& job, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddHost(ElasticJobControl& job, const std::string& name, int slots,
               absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Its workers are told to leave; its agent is shut down at once when
  // `now`, else once they have exited.
  void RemoveHost(ElasticJobControl& job, Host& host, const std::string& why,
                  bool now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ShutDownEmptyHosts(ElasticJobControl& job)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Usable slots: of active hosts, counting workers still in the job.
  int UsableSlots() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CheckLimits(ElasticJobControl& job, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Host* HostOfJobIndex(int h, std::string* name = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Join's answer now, or PENDING; records the join.
  elastic::JoinResponse Answer(const elastic::JoinRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const Round* Current() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The round's place of worker `id`; -1 when not a member.
  static int RankIn(const Round& round, const std::string& id);

  const ElasticSettings settings_;
  HostDiscovery* const discovery_;
  const AgentStarterFn start_agent_;
  host::Os* const os_;

  mutable absl::Mutex mu_;
  std::map<std::string, Host> hosts_ ABSL_GUARDED_BY(mu_);  // by name
  std::map<std::string, Worker> workers_ ABSL_GUARDED_BY(mu_);  // by id
  std::vector<Round> rounds_ ABSL_GUARDED_BY(mu_);  // by number
  std::optional<Forming> forming_ ABSL_GUARDED_BY(mu_);
  int next_worker_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t update_seq_ ABSL_GUARDED_BY(mu_) = 0;
  int resets_ ABSL_GUARDED_BY(mu_) = 0;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;  // a member exited 0
  int last_failure_code_ ABSL_GUARDED_BY(mu_) = 1;
  std::string said_discovery_error_ ABSL_GUARDED_BY(mu_);
  bool said_waiting_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time short_since_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
};

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_ELASTIC_DRIVER_H_
