// hvdrun --metrics-port, served over HTTP/1.1 (Boost.Beast) by one thread
// of hvdrun:
//   /metrics      every rank's counters in Prometheus' text format;
//   /             a page with the job at a glance, refreshing itself;
//   /status.json  what that page shows (proto/metrics.proto, as JSON).
//
// The workers publish their reports in the job's rendezvous store
// (core/runtime/metrics.h); the source hvdrun gives here reads them there,
// with each rank's host.
#ifndef HVD_LAUNCHER_METRICS_SERVER_H_
#define HVD_LAUNCHER_METRICS_SERVER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/metrics.pb.h"

namespace hvd {
namespace launcher {

// One rank's latest report: Prometheus samples without the rank's labels
// ("hvd_collectives_total{op=\"allreduce\"} 42", one per line); empty
// before its first.
struct RankReport {
  int rank = 0;
  std::string host;
  std::string state;  // as hvdrun sees it: "running", "exited with code 1"...
  std::string samples;
};

struct JobReport {
  std::string phase;    // "starting", "running", "ending", "ended"
  std::string failure;  // the first failure; empty while there is none
  std::vector<RankReport> ranks;
};

// The exposition of `job`: every sample with rank and host labels added,
// grouped by metric under one TYPE line (counter for *_total, else gauge),
// plus hvd_rank_reporting (1 once a rank has reported) and hvd_job_failed.
std::string RenderPrometheus(const JobReport& job);

// What the page shows, from the same reports: per rank its state, step
// time, allreduce bus bandwidth, stall, collectives and memory.
metrics::JobStatus StatusOf(const JobReport& job);

class MetricsServer {
 public:
  using Source = std::function<JobReport()>;

  // Listens on 0.0.0.0:`port` (0: any free port). Unavailable, naming the
  // port, when it cannot.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(int port,
                                                              Source source);
  ~MetricsServer();  // stops serving; waits for the thread
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  int port() const;

 private:
  struct Impl;
  explicit MetricsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_METRICS_SERVER_H_
