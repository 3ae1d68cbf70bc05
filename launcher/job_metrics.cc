#include "launcher/job_metrics.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/common/config_names.h"

namespace hvd {
namespace launcher {
namespace {

// The job at a glance with every rank's latest metrics report, as the
// rendezvous store holds it.
MetricsServer::Source ReportsOf(const Job* job,
                                const RendezvousServer* server) {
  return [job, server] {
    Job::View view = job->Glance();
    JobReport report{view.phase, view.failure, {}};
    for (Job::RankView& r : view.ranks) {
      report.ranks.push_back(
          {r.rank, std::move(r.host), std::move(r.state),
           server
               ->Value(absl::StrCat(config_names::kMetricsKeyPrefix, r.rank))
               .value_or("")});
    }
    return report;
  };
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsServer>> StartMetrics(
    const Options& o, const Job* job, const RendezvousServer* server) {
  if (!o.metrics_port.has_value()) return nullptr;
  return MetricsServer::Start(*o.metrics_port, ReportsOf(job, server));
}

}  // namespace launcher
}  // namespace hvd
