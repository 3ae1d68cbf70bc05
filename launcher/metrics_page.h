// The page hvdrun --metrics-port serves at /: one row per rank, refreshed
// every second from /status.json, and the job's failure once there is one.
#ifndef HVD_LAUNCHER_METRICS_PAGE_H_
#define HVD_LAUNCHER_METRICS_PAGE_H_

namespace hvd {
namespace launcher {

extern const char kMetricsPage[];

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_METRICS_PAGE_H_
