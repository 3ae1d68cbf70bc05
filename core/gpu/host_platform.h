// A Platform on host memory, for tests on machines without a GPU. Device
// memory is host memory, stream operations run at once and events fire as
// soon as they are recorded. Its "NCCL" communicators are StagedComms over
// TCP contexts that meet through a store, refusing 16-bit integer
// reductions as NCCL does, so the NCCL path's orchestration (fusion, scale
// factors, hierarchical allreduce, the fallback for what NCCL cannot reduce)
// runs for real across ranks.
#ifndef HVD_CORE_GPU_HOST_PLATFORM_H_
#define HVD_CORE_GPU_HOST_PLATFORM_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "core/collectives/collectives.h"
#include "core/gpu/platform.h"
#include "core/rendezvous/store.h"
#include "core/transport/transport.h"

namespace hvd::gpu {

struct HostPlatformOptions {
  int device_count = 1;
  std::string identity = "host-gpu";  // every device's Identity()
  bool nccl = true;                   // offer fake NCCL communicators
  // For the fake NCCL communicators; not owned.
  Store* store = nullptr;
  std::function<absl::StatusOr<std::unique_ptr<transport::Context>>(
      int rank, int size, std::shared_ptr<Store> store)>
      make_context;
  collectives::CollectiveOptions collective_options;
  // How the events the devices record answer a poll (on whichever thread
  // polls); empty: fired at once.
  std::function<absl::StatusOr<bool>()> event_done;
};

// What a HostDevice was asked to do, for tests to check the data path.
struct HostDeviceCounts {
  std::atomic<int> waits{0};         // WaitFor (producer streams)
  std::atomic<int> copies{0};        // Copy
  std::atomic<int> copy_batches{0};  // CopyBatch calls
  std::atomic<int> scales{0};
  std::atomic<int> allocations{0};
  // Timer slack (ns) of the thread that last called Record: the device
  // thread's.
  std::atomic<int> recorder_timer_slack_ns{-1};
};

class HostDevice : public Device {
 public:
  // `event_done`: as HostPlatformOptions::event_done.
  HostDevice(int id, std::string identity,
             std::function<absl::StatusOr<bool>()> event_done = nullptr)
      : id_(id),
        identity_(std::move(identity)),
        event_done_(std::move(event_done)) {}
  int id() const override { return id_; }
  std::string Identity() const override { return identity_; }
  absl::StatusOr<std::shared_ptr<runtime::ReadyEvent>> MarkReady(
      void* stream) override;
  absl::Status WaitFor(const runtime::ReadyEvent& ready) override;
  absl::Status Copy(void* dst, const void* src, size_t bytes) override;
  absl::Status CopyBatch(const std::vector<CopyOp>& ops) override;
  absl::Status Zero(void* dst, size_t bytes) override;
  absl::Status Scale(void* data, size_t count, DataType dtype,
                     double factor) override;
  absl::StatusOr<std::unique_ptr<Event>> Record() override;
  absl::StatusOr<void*> Scratch(int slot, size_t bytes) override;
  absl::StatusOr<void*> HostScratch(size_t bytes, absl::Time deadline) override;
  absl::StatusOr<std::shared_ptr<runtime::Buffer>> Allocate(
      size_t bytes) override;

  HostDeviceCounts& counts() { return counts_; }

 private:
  const int id_;
  const std::string identity_;
  const std::function<absl::StatusOr<bool>()> event_done_;
  std::map<int, std::vector<char>> scratch_;
  std::vector<char> host_scratch_;
  HostDeviceCounts counts_;
};

class HostPlatform : public Platform {
 public:
  explicit HostPlatform(HostPlatformOptions options);
  std::string Describe() override { return "host memory (test platform)"; }
  int DeviceCount() override { return options_.device_count; }
  absl::StatusOr<Device*> GetDevice(int id) override;
  bool HasNccl() override { return options_.nccl; }
  absl::StatusOr<std::string> NewNcclId() override;
  absl::StatusOr<std::unique_ptr<Comm>> NewNcclComm(
      Device* device, const std::string& id, int rank, int size,
      absl::Time deadline, const std::function<absl::Status()>& stop,
      const std::string& who) override;

  // The device made by GetDevice(id), or null.
  HostDevice* host_device(int id);

 private:
  HostPlatformOptions options_;
  absl::Mutex mu_;
  std::map<int, std::unique_ptr<HostDevice>> devices_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hvd::gpu

#endif  // HVD_CORE_GPU_HOST_PLATFORM_H_
