// A one-way signal that long waits should give up: one thread cancels, the
// waiters poll. An elastic worker's connect to its round uses one, so that
// a round the launcher ends while its members are still connecting fails
// them at once instead of at their connect timeout.
#ifndef HVD_CORE_COMMON_CANCELLATION_H_
#define HVD_CORE_COMMON_CANCELLATION_H_

#include <atomic>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace hvd {

// Thread-safe.
class Cancellation {
 public:
  // The first call wins; later ones change nothing. `why` must not be OK.
  void Cancel(absl::Status why);
  // Cheap: one atomic load, for polling loops.
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }
  // OK until cancelled, then the status given to Cancel.
  absl::Status status() const;

 private:
  std::atomic<bool> cancelled_{false};
  mutable absl::Mutex mu_;
  absl::Status why_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hvd

#endif  // HVD_CORE_COMMON_CANCELLATION_H_
