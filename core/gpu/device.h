// What the GPU data path needs from a device, its memory and hvd's stream on
// it. The orchestration (gpu_ops.h), the staged path (staged_comm.h) and
// completion (finalizer.h) are written against these interfaces only, so they
// run unchanged on CUDA (cuda_platform.h) and, in tests on machines without a
// GPU, on host memory (host_platform.h).
#ifndef HVD_CORE_GPU_DEVICE_H_
#define HVD_CORE_GPU_DEVICE_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/common/types.h"
#include "core/runtime/entry.h"

namespace hvd::gpu {

struct CopyOp {
  void* dst;
  const void* src;
  size_t bytes;
};

// A point in hvd's stream (a CUDA event). Thread-compatible: one thread at a
// time (the completion thread polls it).
class Event {
 public:
  virtual ~Event() = default;
  // True once every op queued before the point has finished. An error when
  // the device failed (a CUDA error, named).
  virtual absl::StatusOr<bool> Done() = 0;
};

// One GPU and hvd's own stream on it. Stream operations queue work on that
// stream in call order and return without waiting for the GPU; their errors
// are launch errors. Not thread-safe, except MarkReady: the backend's device
// thread is the only caller.
class Device {
 public:
  virtual ~Device() = default;

  virtual int id() const = 0;  // CUDA ordinal
  // What tells GPUs apart across processes (the CUDA UUID): ranks whose
  // devices have the same identity on one host share a GPU.
  virtual std::string Identity() const = 0;

  // Thread-safe: captures the work queued so far on `stream` (cudaStream_t,
  // nullptr: the legacy default stream).
  virtual absl::StatusOr<std::shared_ptr<runtime::ReadyEvent>> MarkReady(
      void* stream) = 0;
  // hvd's stream waits (on the GPU) for `ready`, made by MarkReady of this
  // device.
  virtual absl::Status WaitFor(const runtime::ReadyEvent& ready) = 0;

  // Any direction (device, pinned host): addresses are unified.
  virtual absl::Status Copy(void* dst, const void* src, size_t bytes) = 0;
  // Many copies at once (fusion buffer in and out): small ones in one kernel
  // launch, large ones on the copy engine.
  virtual absl::Status CopyBatch(const std::vector<CopyOp>& ops) = 0;
  virtual absl::Status Zero(void* dst, size_t bytes) = 0;
  // data[i] *= factor, with collectives::Scale's rounding rules.
  virtual absl::Status Scale(void* data, size_t count, DataType dtype,
                             double factor) = 0;
  virtual absl::StatusOr<std::unique_ptr<Event>> Record() = 0;

  // Persistent device memory of at least `bytes` for `slot` (fusion
  // buffers), grown in stream order; contents undefined after growth.
  virtual absl::StatusOr<void*> Scratch(int slot, size_t bytes) = 0;
  // Persistent pinned host memory (the staged path), same rules; growing it
  // waits for the stream (up to `deadline`) before the old block is freed.
  virtual absl::StatusOr<void*> HostScratch(size_t bytes,
                                            absl::Time deadline) = 0;
  // New device memory for an output the framework will own (freed by the
  // buffer's destructor, which waits for the device).
  virtual absl::StatusOr<std::shared_ptr<runtime::Buffer>> Allocate(
      size_t bytes) = 0;
};

// Polls `event` until it fired, `deadline` passed (DeadlineExceeded naming
// the op: `what()`, called only then) or `stop` returns non-OK (that
// status). Spins briefly, then sleeps in growing steps up to
// kLongestEventNap.
absl::Status WaitEvent(Event& event, absl::Time deadline,
                       const std::function<std::string()>& what,
                       const std::function<absl::Status()>& stop);
inline absl::Status WaitEvent(Event& event, absl::Time deadline,
                              const std::string& what,
                              const std::function<absl::Status()>& stop) {
  return WaitEvent(
      event, deadline, [&what] { return what; }, stop);
}

// WaitEvent's longest sleep between two polls: what an op that outlives the
// spin may wait past its end.
inline constexpr absl::Duration kLongestEventNap = absl::Microseconds(200);

// Makes the calling thread's sleeps end when asked (timer slack of 1 ns
// instead of Linux's default 50 us, which turns a 5 us nap into ~55). For
// the threads that poll hvd's stream; a no-op where the kernel refuses.
void UsePreciseTimers();

// What a Sum among one member leaves: `in`'s `count` elements in `out` (the
// same buffer or not), multiplied by `premul`. A communicator of one member
// answers its Allreduce and ReduceScatter with this.
absl::Status SumOfOne(Device& device, const void* in, void* out, size_t count,
                      DataType dtype, double premul);

}  // namespace hvd::gpu

#endif  // HVD_CORE_GPU_DEVICE_H_
