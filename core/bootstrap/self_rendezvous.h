// The rendezvous of a job hvdrun did not start: its ranks were started by
// srun, torchrun, mpirun or a Kubernetes Job (Config::launched_by), and
// meet at a rendezvous served by rank 0's own process.
//
// The job token, unless HVD_JOB_TOKEN gives one:
//   - over PMIx (mpirun): rank 0 makes a fresh one and hands it, with the
//     rendezvous address, to the others through PMIx, the launcher's own
//     channel to the job's processes;
//   - otherwise: HMAC-SHA256 of the job's id (Slurm's job and step, ...)
//     keyed with the user's secret, ~/.hvd/secret (32 random bytes, made on
//     first use, mode 0600; a shared home gives every node the same one).
//     Only the user (and root) can read it, so only their processes can join
//     their jobs.
#ifndef HVD_CORE_BOOTSTRAP_SELF_RENDEZVOUS_H_
#define HVD_CORE_BOOTSTRAP_SELF_RENDEZVOUS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/rendezvous/rendezvous_server.h"
#include "core/runtime/config.h"

namespace hvd::bootstrap {

// What the first PMIx exchange of a process gave it: rank 0's rendezvous
// address and the job token. There is one exchange per process (see
// pmix_exchange.h for why); rank 0 serves every later init on that port.
struct PmixRecord {
  std::string rendezvous_addr;  // "" until the first exchange
  std::string token;
};

class SelfRendezvous {
 public:
  // For a config with launched_by set and size > 1: fills in
  // rendezvous_addr and token, and on rank 0 starts serving. Null for any
  // other config. Errors name the contract and what to set instead.
  // `pmix_record` is the process's, kept from one init to the next.
  static absl::StatusOr<std::unique_ptr<SelfRendezvous>> Prepare(
      runtime::Config* config, PmixRecord* pmix_record);
  ~SelfRendezvous();  // stops serving

  // On rank 0, `status` (a failed connect) with the ranks that never
  // reached the rendezvous (and their hosts, where the launch contract
  // placed them) and where those that did are; else `status`.
  absl::Status Explain(const absl::Status& status, int size) const;

 private:
  SelfRendezvous(std::unique_ptr<RendezvousServer> server,
                 std::vector<std::string> rank_hosts);
  std::unique_ptr<RendezvousServer> server_;  // rank 0's; else null
  const std::vector<std::string> rank_hosts_;  // Config::rank_hosts
};

// Hex of HMAC-SHA256(the secret in `secret_file`, job_id). Makes the file
// (and its directory, mode 0700) when it is missing; refuses one that
// others than its owner can read.
absl::StatusOr<std::string> DeriveJobToken(const std::string& secret_file,
                                           const std::string& job_id);

}  // namespace hvd::bootstrap

#endif  // HVD_CORE_BOOTSTRAP_SELF_RENDEZVOUS_H_
