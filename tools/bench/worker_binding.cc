#include "tools/bench/worker_binding.h"

#include <sched.h>

#include <vector>

#include "absl/status/statusor.h"
#include "host/cpu_binding.h"

namespace hvd::bench {

void BindAsAWorker(int index, int workers) {
  const std::vector<int> share = host::CpuShare(
      host::CoresOf(host::AllowedCpus(), host::kCpuSysfs), index, workers);
  if (share.empty()) return;
  absl::StatusOr<cpu_set_t> set = host::CpuSetOf(share);
  if (set.ok()) sched_setaffinity(0, sizeof(*set), &*set);
}

}  // namespace hvd::bench
