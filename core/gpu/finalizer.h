// The GPU backend's completion thread: completes ops in the order they were
// queued, each once its completion event has fired, so a handle never
// completes before the GPU has finished with its memory and the background
// thread never waits on a GPU stream. A caller waiting for its op may
// complete the ops that have finished itself (TryComplete), sparing two
// thread wakeups; failures stay with the completion thread.
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

// Thread-safe. Each item completes exactly once, on the completion thread or
// on a thread in TryComplete, never before the items queued before it.
class Finalizer {
 public:
  struct Item {
    // Fired when the op's GPU work is done; null: nothing to wait for.
    // Polled by one thread at a time.
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
  // Completes, on the calling thread, the items at the head of the queue
  // whose events have fired, in order, and returns at once: one poll of the
  // head's event, no waiting. An item that failed, and everything after an
  // Abort, is left to the completion thread (which also reports timeouts).
  // True if it completed any; false also while another thread is looking at
  // the head.
  bool TryComplete();
  // Whether items are queued that have not completed.
  bool Pending();
  // Blocks until every item added so far has completed or `deadline`
  // passed; true when drained.
  bool Drain(absl::Time deadline);
  // Fails the item being waited on, the queued ones and every later one with
  // `reason`, without waiting for their events. The first reason is kept.
  void Abort(const absl::Status& reason);

 private:
  // What TryClaim found at the head of the queue.
  enum class Claim { kTaken, kBusy, kGone };

  void Loop();
  // Waits until head item number `seq` (`item`) has completed, here or on
  // another thread; fails it here on a timeout, a failed communicator, an
  // abort or a failure while queued.
  void Settle(int64_t seq, Item& item);
  // Takes the head for the calling thread alone if it is still item number
  // `seq` (completed_ when it came to the head) and no other thread has it.
  Claim TryClaim(int64_t seq);
  // Waits while another thread has the head; false if item `seq` has
  // completed meanwhile, else takes it.
  bool ClaimOrGone(int64_t seq);
  void Unclaim();
  // Completes the claimed head `item` with `status`, then drops it from the
  // queue and gives up the claim.
  void CompleteHead(Item& item, const absl::Status& status);
  absl::Status AbortStatus();

  std::function<void(const absl::Status&)> on_failure_;
  absl::Mutex mu_;
  // Shared: the completion thread keeps the head it waits on even when
  // another thread completes and drops it meanwhile.
  std::deque<std::shared_ptr<Item>> queue_ ABSL_GUARDED_BY(mu_);
  // A thread is polling or completing queue_.front(): only it touches the
  // head's event, entries and results.
  bool claimed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status aborted_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int64_t added_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t completed_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace hvd::gpu

#endif  // HVD_CORE_GPU_FINALIZER_H_
