// Where a worker that hvdrun did not start finds its place in the job: the
// variables of the tool that started it. One precedence, highest first:
//
//   1. Open MPI (mpirun):   OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK,
//                           _LOCAL_SIZE, _NODE_RANK; rank 0's rendezvous
//                           address reaches the others through PMIx.
//   2. torchrun, PyTorchJob: RANK, WORLD_SIZE, LOCAL_RANK,
//                           LOCAL_WORLD_SIZE, GROUP_RANK; rank 0 serves the
//                           rendezvous at MASTER_ADDR, port MASTER_PORT + 1
//                           (torchrun's own store holds MASTER_PORT).
//   3. Slurm (srun):        SLURM_PROCID, SLURM_STEP_NUM_TASKS,
//                           SLURM_LOCALID, SLURM_NODEID, SLURM_STEP_NUM_NODES,
//                           SLURM_STEP_TASKS_PER_NODE; rank 0 serves the
//                           rendezvous on the first node of
//                           SLURM_STEP_NODELIST at a port derived from the
//                           job and step ids.
//   4. A Kubernetes indexed Job: JOB_COMPLETION_INDEX is the rank; the size
//                           must come from HVD_SIZE, the meeting point from
//                           MASTER_ADDR/MASTER_PORT or HVD_RENDEZVOUS_ADDR.
//
// The first whose rank variable is set applies, alone. HVD_* variables
// (hvdrun's, or the user's) override whatever it gives.
#ifndef HVD_CORE_RUNTIME_LAUNCH_CONTRACT_H_
#define HVD_CORE_RUNTIME_LAUNCH_CONTRACT_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hvd::runtime {

enum class ContractKind { kNone, kOpenMpi, kTorchrun, kSlurm, kIndexedJob };

struct LaunchContract {
  ContractKind kind = ContractKind::kNone;
  std::string name;  // for messages: "Open MPI", "torchrun", ...
  // Unset fields leave the defaults (a host of its own per rank).
  std::optional<int> rank, size, local_rank, local_size, cross_rank,
      cross_size;
  // Where rank 0 serves the rendezvous; empty host: the contract names none
  // (Open MPI: exchanged over PMIx at init).
  std::string rendezvous_host;
  int rendezvous_port = 0;
  // Names this job among others of the same user (for its job token).
  std::string job_id;
  bool pmix = false;  // the rendezvous address is exchanged over PMIx
  // Rank -> the host the tool placed it on, where the contract says so
  // (Slurm's default block layout); empty otherwise. Names the hosts of
  // ranks that never arrive.
  std::vector<std::string> rank_hosts;
};

// Looks up a variable by its full name; nullopt when unset.
using EnvLookup =
    std::function<std::optional<std::string>(absl::string_view name)>;

// kNone when no contract's rank variable is set. InvalidArgument naming the
// variable for a malformed value, or a contract missing one it needs.
absl::StatusOr<LaunchContract> DetectLaunchContract(const EnvLookup& env);

}  // namespace hvd::runtime

#endif  // HVD_CORE_RUNTIME_LAUNCH_CONTRACT_H_
