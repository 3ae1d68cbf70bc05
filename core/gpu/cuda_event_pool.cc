#include "core/gpu/cuda_event_pool.h"

#include "core/gpu/cuda_platform.h"

namespace hvd::gpu {

CudaEventPool::~CudaEventPool() {
  ScopedDevice scoped(device_);
  for (cudaEvent_t event : free_) cudaEventDestroy(event);
}

absl::StatusOr<cudaEvent_t> CudaEventPool::Take() {
  {
    absl::MutexLock lock(&mu_);
    if (!free_.empty()) {
      cudaEvent_t event = free_.back();
      free_.pop_back();
      return event;
    }
  }
  cudaEvent_t event;
  if (absl::Status s =
          CudaStatus(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                     "cudaEventCreate");
      !s.ok()) {
    return s;
  }
  created_.fetch_add(1, std::memory_order_relaxed);
  return event;
}

void CudaEventPool::Give(cudaEvent_t event) {
  {
    absl::MutexLock lock(&mu_);
    if (free_.size() < kMaxFree) {
      free_.push_back(event);
      return;
    }
  }
  // Destroyed with its device current, so that no thread that never used
  // CUDA gets a context made on GPU 0 for it.
  ScopedDevice scoped(device_);
  cudaEventDestroy(event);
}

}  // namespace hvd::gpu
