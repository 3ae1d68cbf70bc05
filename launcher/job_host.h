// What a job knows of one host: its agent and that agent's stream, its
// workers, and how far it got through the job's phases.
//
// A plain record: Job owns the table of them, and every field is guarded by
// the job's lock (Job::mu_), as is the AgentConn it points to.
#ifndef HVD_LAUNCHER_JOB_HOST_H_
#define HVD_LAUNCHER_JOB_HOST_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "launcher/agent_conn.h"
#include "launcher/hosts.h"
#include "proto/launcher.pb.h"

namespace hvd {
namespace launcher {

struct JobHost {
  std::string name;
  int slots = 0;
  std::vector<WorkerSlot> workers;
  bool in_job = false;   // has workers in the job (orchestrated: once formed)
  bool joined = false;   // its agent's Hello was accepted
  bool lost = false;     // its agent is gone or cut off for good
  bool process_running = false;  // launcher mode: its ssh / local agent
  bool shutdown_sent = false;
  AgentConn* conn = nullptr;  // its agent's stream while open; not owned
  Hello hello;
  std::string peer_ip;  // as the server saw the agent's connection
  // Data-plane addresses the other hosts probe, preferred first.
  std::vector<std::string> candidates;
  int probes_sent = 0;  // targets in its ProbeRequest
  int probes_answered = 0;
  std::map<int, std::map<std::string, bool>> reached;  // to -> address -> ok
  std::string data_plane;  // the address chosen for it
  int started = 0;         // workers reported started
  std::set<int> exited;    // ranks reported exited
  std::map<int, std::string> ended;  // rank -> how: "exited with code 1"
  std::set<int> stopped;   // ranks reported stopped (SIGSTOP, a debugger)
  // Elastic jobs: when the host was added, and whether its LaunchSpec went.
  absl::Time added;
  bool launched = false;
};

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_JOB_HOST_H_
