// The Platform of a CUDA build: devices with hvd's own high-priority,
// non-blocking stream each; NCCL communicators (nccl_comm.h).
//
// Every CUDA call runs with its device current on the calling thread and the
// thread's previous device restored afterwards, so a framework thread that
// enqueues (MarkReady) keeps the device it had. (A thread that never chose a
// device is left on hvd's: see ScopedDevice.)
#ifndef HVD_CORE_GPU_CUDA_PLATFORM_H_
#define HVD_CORE_GPU_CUDA_PLATFORM_H_

#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "core/gpu/cuda_event_pool.h"
#include "core/gpu/platform.h"

namespace hvd::gpu {

// OK for cudaSuccess, else Internal: "<what>: cudaErrorX (text)".
absl::Status CudaStatus(cudaError_t error, absl::string_view what);

// Makes `device` current on this thread until destroyed, then restores the
// previous device, unless that one has no primary context (a thread that
// never chose a device reports 0): since CUDA 12 cudaSetDevice makes the
// context, which would put one on GPU 0 for every process of a host.
class ScopedDevice {
 public:
  explicit ScopedDevice(int device);
  ~ScopedDevice();
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;
  const absl::Status& status() const { return status_; }

 private:
  int previous_ = -1;
  absl::Status status_;
};

class CudaDevice : public Device {
 public:
  // Creates hvd's stream on device `id`.
  static absl::StatusOr<std::unique_ptr<CudaDevice>> Create(int id);
  // Waits (10 s at most) for the stream, then frees what it holds.
  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  int id() const override { return id_; }
  std::string Identity() const override { return identity_; }
  cudaStream_t stream() const { return stream_; }
  // Where MarkReady and Record take their events and their holders give
  // them back.
  const CudaEventPool& events() const { return *events_; }

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

 private:
  CudaDevice(int id, std::string identity, cudaStream_t stream,
             bool stream_ordered)
      : id_(id),
        identity_(std::move(identity)),
        stream_(stream),
        stream_ordered_(stream_ordered),
        events_(std::make_shared<CudaEventPool>(id)) {}
  struct Block {
    void* data = nullptr;
    size_t size = 0;
  };

  const int id_;
  const std::string identity_;
  cudaStream_t stream_;
  // cudaMallocAsync works here (cudaDevAttrMemoryPoolsSupported); else the
  // fusion buffers come from cudaMalloc.
  const bool stream_ordered_;
  const std::shared_ptr<CudaEventPool> events_;
  std::map<int, Block> scratch_;  // device memory
  Block host_;                    // pinned
};

class CudaPlatform : public Platform {
 public:
  std::string Describe() override;
  int DeviceCount() override;
  absl::StatusOr<Device*> GetDevice(int id) override;
  bool HasNccl() override { return true; }
  absl::StatusOr<std::string> NewNcclId() override;
  absl::StatusOr<std::unique_ptr<Comm>> NewNcclComm(
      Device* device, const std::string& id, int rank, int size,
      absl::Time deadline, const std::function<absl::Status()>& stop,
      const std::string& who) override;

 private:
  absl::Mutex mu_;
  std::map<int, std::unique_ptr<CudaDevice>> devices_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hvd::gpu

#endif  // HVD_CORE_GPU_CUDA_PLATFORM_H_
