// What hvdrun tells a Job: the job's size and hosts, the workers' command and
// environment, and the time limits of its phases.
#ifndef HVD_LAUNCHER_JOB_CONFIG_H_
#define HVD_LAUNCHER_JOB_CONFIG_H_

#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "launcher/hosts.h"

namespace hvd {
namespace launcher {

class ElasticDriver;  // launcher/elastic_driver.h

struct JobConfig {
  // false: hvdrun started the agents, one per entry of `hosts`, and knows
  // each one's index. true: agents join by themselves (orchestrator mode);
  // the job forms, in join order, once their slots reach `np`.
  bool orchestrated = false;
  int np = 0;
  std::vector<HostAssignment> hosts;  // launcher mode
  // Launcher mode, per host: the host whose agent starts this host's (a
  // launch tree) and reports its end; -1 or absent: hvdrun's own.
  std::vector<int> agent_parents;
  // The workers' command. Orchestrator mode: may be empty, then each agent's
  // own command is used.
  std::vector<std::string> command;
  std::map<std::string, std::string> env;  // put over each agent's own
  std::string cwd;                         // empty: each agent's own
  std::vector<std::string> network_interfaces;  // empty: probe
  absl::Duration start_timeout = absl::Seconds(30);  // infinite: none
  absl::Duration kill_grace = absl::Seconds(5);
  absl::Duration heartbeat_interval = absl::Seconds(1);
  absl::Duration heartbeat_timeout = absl::Seconds(10);
  absl::Duration probe_timeout = absl::Seconds(2);
  bool verbose = false;
  // Each agent binds its workers to equal shares of its host's cores
  // (hvdrun --bind-to).
  bool bind_to_cores = true;
  // Elastic jobs (not owned; outlives the job): the driver adds and removes
  // hosts, and a worker's failure or a lost agent is its to handle instead
  // of ending the job. `hosts` is then empty.
  ElasticDriver* elastic = nullptr;
};

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_JOB_CONFIG_H_
