// hvdrun --metrics-port: every rank's counters in Prometheus' text format
// at /metrics, served over HTTP/1.1 (Boost.Beast) by one thread of hvdrun.
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

namespace hvd {
namespace launcher {

// One rank's latest report: Prometheus samples without the rank's labels
// ("hvd_collectives_total{op=\"allreduce\"} 42", one per line); empty
// before its first.
struct RankReport {
  int rank = 0;
  std::string host;
  std::string samples;
};

// The exposition of `reports`: every sample with rank and host labels
// added, grouped by metric under one TYPE line (counter for *_total, else
// gauge), plus hvd_rank_reporting (1 once a rank has reported).
std::string RenderPrometheus(const std::vector<RankReport>& reports);

class MetricsServer {
 public:
  using Source = std::function<std::vector<RankReport>()>;

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
