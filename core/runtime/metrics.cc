#include "core/runtime/metrics.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/common/config_names.h"
#include "core/common/prometheus_label.h"

namespace hvd::runtime {

std::string MetricsKey(int rank) {
  return absl::StrCat(config_names::kMetricsKeyPrefix, rank);
}

uint64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  if (!(statm >> size >> resident)) return 0;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

void Metrics::Collective(OpType type, uint64_t bytes) {
  if (type < 0 || type >= kOps) return;
  count_[type].fetch_add(1, std::memory_order_relaxed);
  bytes_[type].fetch_add(bytes, std::memory_order_relaxed);
}

void Metrics::Negotiation(absl::Duration d) {
  negotiation_ns_.fetch_add(absl::ToInt64Nanoseconds(d),
                            std::memory_order_relaxed);
}

void Metrics::DataMovement(absl::Duration d) {
  data_ns_.fetch_add(absl::ToInt64Nanoseconds(d), std::memory_order_relaxed);
}

void Metrics::FusionFill(uint64_t bytes, uint64_t threshold) {
  fusion_fill_.store(
      threshold == 0 ? 0 : std::min(1.0, static_cast<double>(bytes) /
                                             static_cast<double>(threshold)),
      std::memory_order_relaxed);
}

void Metrics::Step(absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (last_step_ != absl::InfinitePast()) {
    step_seconds_ = absl::ToDoubleSeconds(now - last_step_);
  }
  last_step_ = now;
}

void Metrics::Stall(const std::string& what) {
  // Rank 0 calls this every cycle; nearly always nothing stalls.
  if (what.empty() && !stalled_.load(std::memory_order_relaxed)) return;
  absl::MutexLock lock(&mu_);
  stall_ = what;
  stalled_.store(!what.empty(), std::memory_order_relaxed);
}

std::string Metrics::Render(uint64_t rss_bytes) const {
  absl::MutexLock lock(&mu_);
  std::string out;
  for (int op = 0; op < kOps; ++op) {
    if (op == JOIN || op == ADD_PROCESS_SET || op == REMOVE_PROCESS_SET) {
      continue;
    }
    const std::string name =
        absl::AsciiStrToLower(OpType_Name(static_cast<OpType>(op)));
    absl::StrAppend(&out, "hvd_collectives_total{op=\"", name, "\"} ",
                    count_[op].load(std::memory_order_relaxed), "\n",
                    "hvd_collective_bytes_total{op=\"", name, "\"} ",
                    bytes_[op].load(std::memory_order_relaxed), "\n");
  }
  // A stall's text is the user's tensor name: quoted as Prometheus escapes
  // label values.
  const std::string stall = EscapeLabelValue(stall_);
  absl::StrAppend(
      &out, "hvd_negotiation_seconds_total ",
      negotiation_ns_.load(std::memory_order_relaxed) / 1e9, "\n",
      "hvd_data_movement_seconds_total ",
      data_ns_.load(std::memory_order_relaxed) / 1e9, "\n",
      "hvd_fusion_buffer_fill_ratio ",
      fusion_fill_.load(std::memory_order_relaxed), "\n",
      "hvd_step_seconds ", step_seconds_, "\n",
      "hvd_stalled{what=\"", stall, "\"} ", stall_.empty() ? 0 : 1, "\n",
      "hvd_resident_memory_bytes ", rss_bytes, "\n");
  return out;
}

}  // namespace hvd::runtime
