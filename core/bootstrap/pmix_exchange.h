// Hands rank 0's rendezvous address and the job token to the other ranks
// of a job started by a PMIx launcher (Open MPI's mpirun), through PMIx:
// rank 0 puts them under one key, every rank fences, the others get them.
// libpmix.so.2 is loaded at run time, so nothing else needs it.
#ifndef HVD_CORE_BOOTSTRAP_PMIX_EXCHANGE_H_
#define HVD_CORE_BOOTSTRAP_PMIX_EXCHANGE_H_

#include "absl/status/status.h"
#include "core/runtime/config.h"

namespace hvd::bootstrap {

// On rank 0 publishes config->rendezvous_addr and config->token; on the
// others fills them in. FailedPrecondition saying what to install or set
// when PMIx cannot be loaded or reached; DeadlineExceeded when rank 0's
// record does not come within config->start_timeout.
//
// Once per process: a record that rank 0 puts again after PMIx_Finalize
// and a new PMIx_Init is not reliably delivered (Open MPI's server may drop
// it when it sees the old connection end: the others' get then fails
// NOT-FOUND or waits for good), so a later hvd_init of the process keeps
// the first one's address and token (SelfRendezvous).
absl::Status ExchangeOverPmix(runtime::Config* config);

}  // namespace hvd::bootstrap

#endif  // HVD_CORE_BOOTSTRAP_PMIX_EXCHANGE_H_
