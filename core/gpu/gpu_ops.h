// The GPU backend (runtime::DeviceOps) over a Platform.
//
// Threads
// - The runtime's cycle (its background thread, or a caller driving it):
//   Execute queues the response and its entries for the device thread and
//   returns at once.
// - Device thread: runs responses in order (the same order on every member).
//   For each: the set's communicators (made on first use: GPU identities
//   exchanged through the rendezvous store, the path chosen (topology.h),
//   NCCL unique id published by member 0 and read by the others,
//   ncclCommInitRank), a wait of hvd's stream on each entry's producer event,
//   the op's work queued on hvd's stream (gpu_collectives.h), and a
//   completion event, handed to the completion thread.
// - Completion thread (finalizer.h): completes entries once their event has
//   fired; a timeout or a failed communicator stops the backend.
// - A caller waiting for its op (Progress): completes finished ops itself
//   when its poll sees them finish before the completion thread's does.
//
// Failure: once anything fails (a communicator, a timeout, Abort from the
// runtime when a peer is lost), every communicator is aborted, ops in flight
// and later ones fail with that first error, and Execute returns it so the
// runtime stops the job.
#ifndef HVD_CORE_GPU_GPU_OPS_H_
#define HVD_CORE_GPU_GPU_OPS_H_

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "core/gpu/finalizer.h"
#include "core/gpu/gpu_collectives.h"
#include "core/gpu/platform.h"
#include "core/gpu/topology.h"
#include "core/runtime/device_ops.h"

namespace hvd::gpu {

struct GpuOptions {
  PathPolicy policy = PathPolicy::kAuto;  // HVD_GPU_DATA_PATH
  bool hierarchical = false;              // HVD_HIERARCHICAL_ALLREDUCE
};

// The GPU part of the runtime's configuration.
GpuOptions GpuOptionsFrom(const runtime::Config& config);

// What the init log says about the path GPU tensors will take, before any
// set exists: the choice itself is made per process set at its first GPU op.
std::string PredictPath(const runtime::Config& config,
                        const GpuOptions& options, Platform& platform);

class GpuOps : public runtime::DeviceOps {
 public:
  GpuOps(runtime::DeviceEnv env, std::unique_ptr<Platform> platform,
         GpuOptions options);
  ~GpuOps() override;
  GpuOps(const GpuOps&) = delete;
  GpuOps& operator=(const GpuOps&) = delete;

  absl::StatusOr<std::shared_ptr<runtime::ReadyEvent>> MarkReady(
      int device_id, void* stream) override;
  absl::Status Execute(
      runtime::Response response,
      std::vector<std::unique_ptr<runtime::TensorEntry>>& entries,
      const collectives::Group& group) override;
  bool Progress() override;
  void RemoveProcessSet(int id) override;
  void Abort(const absl::Status& reason) override;
  void Shutdown() override;

  Platform& platform() { return *platform_; }
  // The path process set `id` took, "" before its first GPU op. For tests
  // and the log; device thread's state read under a lock.
  std::string PathOf(int id);

 private:
  struct Task {
    bool remove_set = false;  // else an op
    int set_id = 0;
    runtime::Response response;
    collectives::Group group;
    std::vector<std::unique_ptr<runtime::TensorEntry>> entries;
  };
  struct SetState {
    Device* device = nullptr;
    CommSet comms;
    std::shared_ptr<Comm> staged;  // comms.fallback's, once made
    std::string path;              // "nccl", "nccl+hierarchical", "staged"
  };

  void Loop();
  // Runs one task; a failure aborts every communicator (peers may already
  // wait in a collective this member will never join).
  void Run(Task& task);
  void RemoveSet(int set_id);
  // Waits for the inputs, queues the operation and records its event.
  absl::Status Launch(Task& task, Finalizer::Item& item);
  absl::StatusOr<Device*> DeviceFor(const Task& task);
  absl::StatusOr<SetState*> StateFor(const Task& task, Device* device);
  absl::StatusOr<std::shared_ptr<Comm>> MakeNccl(Device* device,
                                                 const std::string& key,
                                                 int rank, int size,
                                                 const std::string& who);
  absl::StatusOr<std::shared_ptr<Comm>> MakeStaged(Device* device,
                                                   const std::string& prefix,
                                                   int rank, int size,
                                                   const std::string& who);
  void Register(const std::shared_ptr<Comm>& comm);
  absl::Status Fatal();
  std::string Who(const Task& task) const;

  const runtime::DeviceEnv env_;
  const std::unique_ptr<Platform> platform_;
  const GpuOptions options_;

  // Device thread only.
  std::map<int, std::unique_ptr<SetState>> sets_;
  int device_id_ = -1;  // the GPU this process uses, from its first tensor

  absl::Mutex mu_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);
  bool running_ ABSL_GUARDED_BY(mu_) = false;  // the device thread has a task
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status fatal_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Comm>> comms_ ABSL_GUARDED_BY(mu_);
  std::map<int, std::string> paths_ ABSL_GUARDED_BY(mu_);
  // A GPU tensor was enqueued (MarkReady) or a GPU op executed: Abort then
  // warns; before, it logs at debug level only (a CPU-only job).
  std::atomic<bool> used_{false};

  Finalizer finalizer_;
  std::thread thread_;  // last: started when the rest exists
};

}  // namespace hvd::gpu

#endif  // HVD_CORE_GPU_GPU_OPS_H_
