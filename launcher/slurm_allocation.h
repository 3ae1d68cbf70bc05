// hvdrun inside a Slurm allocation (sbatch, salloc): the one place that
// reads Slurm's variables. It turns them into plain data (the nodes and
// their task slots, in Options::slurm) for the rest of hvdrun, which then
// starts one agent per node with srun instead of ssh (host/agent_starter.h).
//
// What is read (docs/orchestrators/slurm.md says the same for users):
//   SLURM_JOB_ID (or SLURM_JOBID)       in an allocation at all
//   SLURM_JOB_NODELIST (or SLURM_NODELIST)  the nodes, compressed
//   SLURM_TASKS_PER_NODE                 task slots per node, compressed;
//                                        not inside a job step
//                                        (SLURM_STEP_ID set), where it
//                                        counts the step's tasks
//   SLURM_JOB_CPUS_PER_NODE / SLURM_CPUS_PER_TASK  the slots otherwise
#ifndef HVD_LAUNCHER_SLURM_ALLOCATION_H_
#define HVD_LAUNCHER_SLURM_ALLOCATION_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "launcher/hosts.h"
#include "launcher/options.h"

namespace hvd {
namespace launcher {

// The allocation described by `env` ("NAME=VALUE" entries, as
// host::CurrentEnvironment() gives them); nullopt outside one (no
// SLURM_JOB_ID). InvalidArgument, naming the variable, when a variable is
// missing or malformed, or when nodes and counts do not pair up.
absl::StatusOr<std::optional<SlurmAllocation>> ReadSlurmAllocation(
    const std::vector<std::string>& env);

// Sets o->slurm from `env` when hvdrun takes its hosts from the allocation:
// in one, with no -H, --hostfile, --rendezvous-only or elastic job. Then an
// -np above the task slots is refused (InvalidArgument: a usage error), as
// is a malformed Slurm variable.
absl::Status ApplySlurmAllocation(const std::vector<std::string>& env,
                                  Options* o);

// The environment srun starts an agent with: `env` without srun's input
// variables that would shape the agent's step (tasks, CPUs, memory and GPUs
// per task, binding, I/O modes): set for the user's own steps, they must not
// cut down the one task that runs a node's whole share of the job.
std::vector<std::string> SrunEnvironment(const std::vector<std::string>& env);

// Removes from `forwarded` (the workers' environment from hvdrun) what Slurm
// sets per node and step: SLURM_*, SLURMD_* and the GPU lists
// (CUDA_VISIBLE_DEVICES, ...). hvdrun's values describe its own node and
// step; each worker gets its node's from its agent's step. Names given with
// -x (`x`) stay.
void DropPerNodeSlurmVariables(const std::vector<std::string>& x,
                               std::map<std::string, std::string>* forwarded);

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_SLURM_ALLOCATION_H_
