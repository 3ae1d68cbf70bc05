// The data ops of one response on GPU tensors, over a process set's
// communicators: fusion through a persistent device buffer with batched
// copies, scale factors, hierarchical allreduce, hvd-allocated device
// outputs. Runs on the backend's device thread; queues GPU work on hvd's
// stream and returns (the staged path blocks this thread for its host
// transfers, never the background thread).
#ifndef HVD_CORE_GPU_GPU_COLLECTIVES_H_
#define HVD_CORE_GPU_GPU_COLLECTIVES_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "core/collectives/collectives.h"
#include "core/gpu/comm.h"
#include "core/gpu/device.h"
#include "core/runtime/entry.h"
#include "proto/negotiation.pb.h"

namespace hvd::gpu {

// A process set's communicators on this member.
struct CommSet {
  std::shared_ptr<Comm> main;  // NCCL, or staged
  // A staged communicator for reductions `main` cannot do (16-bit integers
  // over NCCL), made on first use (every member asks at the same op).
  std::function<absl::StatusOr<std::shared_ptr<Comm>>()> fallback;
  // Hierarchical allreduce when both are set: NCCL among this host's
  // members, staged across hosts.
  std::shared_ptr<Comm> local;
  std::shared_ptr<Comm> cross;
};

struct GpuOp {
  const runtime::Response& response;
  const collectives::Group& group;
  // Null where a rank joined (allreduce: it contributes zeros).
  std::vector<std::unique_ptr<runtime::TensorEntry>>& entries;
  Device& device;
  CommSet& comms;
};

// What the completion thread needs once the op's work is queued.
struct GpuOpResult {
  std::vector<runtime::OpResult> results;  // per entry
  std::vector<std::shared_ptr<Comm>> used;
};

// Queues `op`'s data movement. An error means it could not be queued
// entirely (the communicator's state is then unknown).
absl::StatusOr<GpuOpResult> RunGpuOp(const GpuOp& op);

// Fusion buffer slots of Device::Scratch.
inline constexpr int kFusionSlot = 0;
inline constexpr int kPrescaleSlot = 1;

}  // namespace hvd::gpu

#endif  // HVD_CORE_GPU_GPU_COLLECTIVES_H_
