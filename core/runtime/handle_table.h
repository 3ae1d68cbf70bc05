// Handles the C ABI gives out for asynchronous ops. A handle covers one or
// more entries (grouped ops) and completes when all of them have.
#ifndef HVD_CORE_RUNTIME_HANDLE_TABLE_H_
#define HVD_CORE_RUNTIME_HANDLE_TABLE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/runtime/entry.h"

namespace hvd::runtime {

// Thread-safe: Complete() runs on the background thread (or the GPU
// backend's completion thread, or a framework thread completing GPU ops in
// DeviceOps::Progress), the rest on framework threads.
class HandleTable {
 public:
  HandleTable() = default;

  // How long Wait polls a handle before it sleeps (Config::wait_spin; 0, the
  // default: it sleeps at once). Any thread, any time.
  void SetWaitSpin(absl::Duration spin);

  enum WaitResult { kDone, kTimeout, kInvalid };

  // A handle waiting for `parts` completions (>= 1).
  int64_t Create(int parts);
  // A handle already complete with `status` (an op refused at enqueue).
  int64_t CreateFailed(absl::Status status);
  // Records completion of part `part`. The first error wins.
  void Complete(int64_t handle, int part, const absl::Status& status,
                OpResult result);

  // 1 done, 0 running, -1 unknown handle.
  int Poll(int64_t handle);
  // The handle's done flag (Poll() == 1 once it is true), read without the
  // table's lock for as long as it is held: for a caller that looks many
  // times. nullptr for an unknown handle.
  std::shared_ptr<const std::atomic<bool>> DoneFlag(int64_t handle);
  // Blocks until done or `deadline` (InfiniteFuture: no limit). Reads no
  // clock when the handle is done already.
  WaitResult Wait(int64_t handle, absl::Time deadline);
  // Wait, that also ends (kTimeout) once Nudge() has been called more than
  // `seen` (a Nudges() value) times: for a caller that waits while another
  // thread runs a cycle that may complete its op, or may end and leave the
  // next cycle to it.
  WaitResult WaitUnlessNudged(int64_t handle, absl::Time deadline,
                              uint64_t seen);
  // Ends the WaitUnlessNudged calls in progress, and those about to begin
  // with an earlier count.
  void Nudge();
  // How many times Nudge() was called. Any thread, without a lock.
  uint64_t Nudges() const { return nudges_.load(std::memory_order_acquire); }
  // Whether a done handle succeeded; nullopt while it runs or when it is
  // unknown. One lookup: for a wait that finds its op over (the rest of a
  // step once its first wait has run).
  std::optional<bool> DoneOk(int64_t handle);
  // Status of a done handle (OK while running or unknown).
  absl::Status GetStatus(int64_t handle);
  // Stable pointer to the error text until Release; nullptr if unknown.
  const char* ErrorText(int64_t handle);
  int OutputCount(int64_t handle);
  // Copies part `index`'s result out and hands over its output buffer (the
  // handle keeps shape, splits and value); false if none.
  bool TakeResult(int64_t handle, int index, OpResult* out);
  // Reads (without taking) part `index`'s result.
  bool PeekResult(int64_t handle, int index, OpResult* out);
  void Release(int64_t handle);

 private:
  struct State {
    int pending = 0;
    std::atomic<bool> done{false};  // pending == 0, readable without mu_
    absl::Status status;
    std::string error_text;
    absl::InlinedVector<OpResult, 1> results;  // one part: no allocation
  };
  std::shared_ptr<State> Find(int64_t handle)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Wait, or WaitUnlessNudged when `seen` is set.
  WaitResult WaitFor(int64_t handle, absl::Time deadline,
                     std::optional<uint64_t> seen);

  std::atomic<int64_t> spin_ns_{0};  // SetWaitSpin
  absl::Mutex mu_;
  int64_t next_ ABSL_GUARDED_BY(mu_) = 1;
  // Written under mu_, so that a Nudge wakes the waits on it.
  std::atomic<uint64_t> nudges_{0};
  absl::flat_hash_map<int64_t, std::shared_ptr<State>> states_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace hvd::runtime

#endif  // HVD_CORE_RUNTIME_HANDLE_TABLE_H_
