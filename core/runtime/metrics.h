// What a rank has done and where its time went, as hvdrun's /metrics serves
// it (hvdrun --metrics-port): collectives and bytes by op, time in
// negotiation and in data movement, the fusion buffer's fill, the
// framework's last step time, and the stall it is in, if any.
//
// Thread-safe. The background thread counts; the reporter thread renders
// every HVD_METRICS_INTERVAL and publishes the text in the job's store.
#ifndef HVD_CORE_RUNTIME_METRICS_H_
#define HVD_CORE_RUNTIME_METRICS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/negotiation.pb.h"

namespace hvd::runtime {

// The store key of `rank`'s report: "metrics/<rank>".
std::string MetricsKey(int rank);

// This process' resident set in bytes (/proc/self/statm); 0 if unreadable.
uint64_t ResidentBytes();

class Metrics {
 public:
  // One collective of `type` done on this rank, over `bytes` of its input.
  void Collective(OpType type, uint64_t bytes);
  void Negotiation(absl::Duration d);
  void DataMovement(absl::Duration d);
  // Bytes packed into the fusion buffer by the last fused allreduce, over
  // the fusion threshold.
  void FusionFill(uint64_t bytes, uint64_t threshold);
  // A training step ended at `now` (hvd_metrics_step): the step time is
  // the time since the previous one.
  void Step(absl::Time now);
  // What this rank waits on ("tensor 'w' on ranks 2, 3"); "" when nothing.
  void Stall(const std::string& what);

  // Prometheus samples without this rank's labels, one per line, e.g.
  //   hvd_collectives_total{op="allreduce"} 42
  // `rss_bytes` is the process' resident set, read by the caller.
  std::string Render(uint64_t rss_bytes) const;

 private:
  static constexpr int kOps = REMOVE_PROCESS_SET + 1;
  // What the background thread counts every cycle is lock-free (relaxed
  // atomics: a report needs no snapshot of them all at one instant).
  std::array<std::atomic<uint64_t>, kOps> count_ = {};
  std::array<std::atomic<uint64_t>, kOps> bytes_ = {};
  std::atomic<int64_t> negotiation_ns_{0};
  std::atomic<int64_t> data_ns_{0};
  std::atomic<double> fusion_fill_{0};
  std::atomic<bool> stalled_{false};  // stall_ is not empty
  mutable absl::Mutex mu_;
  double step_seconds_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_step_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::string stall_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hvd::runtime

#endif  // HVD_CORE_RUNTIME_METRICS_H_
