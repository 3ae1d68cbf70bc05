// Devices and NCCL communicators: what the GPU backend (gpu_ops.h) makes its
// data path from. CudaPlatform (cuda_platform.h) in production; HostPlatform
// (host_platform.h) in tests on machines without a GPU.
#ifndef HVD_CORE_GPU_PLATFORM_H_
#define HVD_CORE_GPU_PLATFORM_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/gpu/comm.h"
#include "core/gpu/device.h"

namespace hvd::gpu {

// Thread-safe.
class Platform {
 public:
  virtual ~Platform() = default;

  // For the init log: "NCCL 2.28.9, CUDA runtime 13.0, 1 device(s)".
  virtual std::string Describe() = 0;
  // Devices this process can see; 0 without a GPU or driver.
  virtual int DeviceCount() = 0;
  // The device with ordinal `id`, made on first use and owned by the
  // platform. InvalidArgument for a bad ordinal, the CUDA error otherwise.
  virtual absl::StatusOr<Device*> GetDevice(int id) = 0;

  virtual bool HasNccl() = 0;
  // A new NCCL unique id (the bytes rank 0 of a set publishes).
  virtual absl::StatusOr<std::string> NewNcclId() = 0;
  // Joins the NCCL communicator `id` as `rank` of `size` on `device`. Gives
  // up at `deadline` (DeadlineExceeded) or as soon as `stop` (may be empty;
  // polled while waiting for the other members) returns non-OK (that
  // status); the half-made communicator is then aborted. `who` prefixes
  // errors ("rank 3 (member 1 of 4 of process set 0)").
  virtual absl::StatusOr<std::unique_ptr<Comm>> NewNcclComm(
      Device* device, const std::string& id, int rank, int size,
      absl::Time deadline, const std::function<absl::Status()>& stop,
      const std::string& who) = 0;
};

}  // namespace hvd::gpu

#endif  // HVD_CORE_GPU_PLATFORM_H_
