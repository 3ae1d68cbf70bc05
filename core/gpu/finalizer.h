// The GPU backend's completion thread: completes ops in the order they were
// queued, each once its completion event has fired, so a handle never
// completes before the GPU has finished with its memory and the background
// thread never waits on a GPU stream.
#ifndef HVD_CORE_GPU_FINALIZER_H_
#define HVD_CORE_GPU_FINALIZER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/gpu/comm.h"
#include "core/gpu/device.h"
#include "core/runtime/entry.h"

namespace hvd::gpu {

// Thread-safe.
class Finalizer {
 public:
  struct Item {
    // Fired when the op's GPU work is done; null: nothing to wait for.
    std::unique_ptr<Event> event;
    // Non-OK: the op failed while being queued; its entries fail with this
    // once the items before it are done.
    absl::Status status;
    // A failure of one of these ends the wait early with its error.
    std::vector<std::shared_ptr<Comm>> comms;
    std::vector<std::unique_ptr<runtime::TensorEntry>> entries;
    std::vector<runtime::OpResult> results;  // per entry; missing: empty
    absl::Time deadline = absl::InfiniteFuture();
    // Names the op in errors ("rank 0: allreduce of 'w' on process set 0");
    // called only when one is reported.
    std::function<std::string()> what = [] { return std::string("GPU op"); };
  };

  // `on_failure` hears of a timeout or a failed communicator (once per
  // item), on the completion thread: the backend then stops.
  explicit Finalizer(std::function<void(const absl::Status&)> on_failure);
  // Fails what is still queued with Cancelled and stops the thread.
  ~Finalizer();
  Finalizer(const Finalizer&) = delete;
  Finalizer& operator=(const Finalizer&) = delete;

  void Add(Item item);
  // Blocks until every item added so far has completed or `deadline`
  // passed; true when drained.
  bool Drain(absl::Time deadline);
  // Fails the item being waited on, the queued ones and every later one with
  // `reason`, without waiting for their events. The first reason is kept.
  void Abort(const absl::Status& reason);

 private:
  void Loop();
  absl::Status AbortStatus();

  std::function<void(const absl::Status&)> on_failure_;
  absl::Mutex mu_;
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  absl::Status aborted_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int64_t added_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t completed_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace hvd::gpu

#endif  // HVD_CORE_GPU_FINALIZER_H_
