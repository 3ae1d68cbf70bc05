// Host lists (-H, --hostfile) and rank assignment: hosts are filled in the
// order given, slot by slot.
#ifndef HVD_LAUNCHER_HOSTS_H_
#define HVD_LAUNCHER_HOSTS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hvd {
namespace launcher {

struct HostSlots {
  std::string name;
  int slots = 1;
};

// "h1:4,h2:4,h3" (no ":N" means 1 slot). InvalidArgument naming the bad
// entry: empty name, slots not a positive integer, a host listed twice.
absl::StatusOr<std::vector<HostSlots>> ParseHostList(absl::string_view list);

// Hostfile text: one host a line, "host slots=N", "host:N" or "host"; '#'
// starts a comment; blank lines are skipped. InvalidArgument naming
// `filename` and the line number.
absl::StatusOr<std::vector<HostSlots>> ParseHostfile(
    absl::string_view contents, absl::string_view filename);
// Reads and parses a hostfile; InvalidArgument when it cannot be read.
absl::StatusOr<std::vector<HostSlots>> ReadHostfile(
    const std::string& filename);

// The Slurm allocation hvdrun runs in (launcher/slurm_allocation.h reads it
// from the environment): its nodes, in Slurm's order, with their task slots.
struct SlurmAllocation {
  std::string job_id;
  std::vector<HostSlots> nodes;
  // The variables the nodes and slots came from, for messages:
  // "SLURM_JOB_NODELIST=h[1-2], SLURM_TASKS_PER_NODE=2(x2)".
  std::string source;
};

struct WorkerSlot {
  int rank = 0;
  int local_rank = 0;
  int local_size = 1;
  int cross_rank = 0;  // index of this host among hosts with this local_rank
  int cross_size = 1;  // number of hosts with this local_rank
  std::string elastic_id;  // elastic jobs: HVD_ELASTIC_WORKER_ID
};

struct HostAssignment {
  std::string name;
  std::vector<WorkerSlot> workers;  // by local_rank
};

// Fills hosts in order, slot by slot, with `np` ranks; hosts left without a
// worker are dropped. InvalidArgument when np <= 0 or np exceeds the slots.
absl::StatusOr<std::vector<HostAssignment>> AssignRanks(
    const std::vector<HostSlots>& hosts, int np);

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_HOSTS_H_
