// hvdrun --metrics-port over a running job: each rank's state as the job
// sees it, with the report the rank last put in the rendezvous store.
#ifndef HVD_LAUNCHER_JOB_METRICS_H_
#define HVD_LAUNCHER_JOB_METRICS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "core/rendezvous/rendezvous_server.h"
#include "launcher/job.h"
#include "launcher/metrics_server.h"
#include "launcher/options.h"

namespace hvd {
namespace launcher {

// The metrics server of --metrics-port, reading `job` and `server` (both
// must outlive it); null without the flag. Unavailable naming the port when
// it cannot listen.
absl::StatusOr<std::unique_ptr<MetricsServer>> StartMetrics(
    const Options& o, const Job* job, const RendezvousServer* server);

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_JOB_METRICS_H_
