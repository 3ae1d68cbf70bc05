#include "core/common/cancellation.h"

#include <utility>

namespace hvd {

void Cancellation::Cancel(absl::Status why) {
  if (why.ok()) why = absl::CancelledError("cancelled");
  absl::MutexLock lock(&mu_);
  if (cancelled_.load(std::memory_order_relaxed)) return;
  why_ = std::move(why);
  cancelled_.store(true, std::memory_order_release);
}

absl::Status Cancellation::status() const {
  absl::MutexLock lock(&mu_);
  return why_;
}

}  // namespace hvd
