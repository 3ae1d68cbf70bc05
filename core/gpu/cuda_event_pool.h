// The CUDA events of one device, kept for reuse: every GPU op records two
// (its inputs' ready point, its own completion), and creating and destroying
// each costs driver calls on the threads of the op's critical path.
#ifndef HVD_CORE_GPU_CUDA_EVENT_POOL_H_
#define HVD_CORE_GPU_CUDA_EVENT_POOL_H_

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace hvd::gpu {

// Thread-safe. Holders of an event share the pool (std::shared_ptr), so it
// outlives every event it gave out, wherever that event is destroyed.
class CudaEventPool {
 public:
  // Free events kept beyond this many are destroyed when given back.
  static constexpr size_t kMaxFree = 256;

  explicit CudaEventPool(int device) : device_(device) {}
  // Destroys the free events (with the device current).
  ~CudaEventPool();
  CudaEventPool(const CudaEventPool&) = delete;
  CudaEventPool& operator=(const CudaEventPool&) = delete;

  // A free event, or a new one (cudaEventDisableTiming); the device must be
  // current on the calling thread. Errors name the CUDA error.
  absl::StatusOr<cudaEvent_t> Take();
  // Returns `event`, made by Take and no longer waited on or polled by its
  // holder, for the next Take. Any thread; makes no CUDA call unless the
  // pool is full.
  void Give(cudaEvent_t event);

  // How many events Take has created (for tests).
  size_t created() const { return created_.load(std::memory_order_relaxed); }

 private:
  const int device_;
  std::atomic<size_t> created_{0};
  absl::Mutex mu_;
  std::vector<cudaEvent_t> free_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hvd::gpu

#endif  // HVD_CORE_GPU_CUDA_EVENT_POOL_H_
