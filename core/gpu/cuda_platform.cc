#include "core/gpu/cuda_platform.h"

#include <cuda.h>  // types of cuDevicePrimaryCtxGetState only: no libcuda link
#include <nccl.h>

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/common/logging.h"
#include "core/gpu/gpu_info.h"
#include "core/gpu/kernels.h"
#include "core/gpu/nccl_comm.h"
#include "core/gpu/plan.h"

namespace hvd::gpu {
namespace {

// Copies up to this size share kernel launches; larger ones use the copy
// engine (cudaMemcpyAsync), which reaches full bandwidth on its own.
constexpr size_t kBatchedCopyMaxBytes = size_t{1} << 20;
constexpr size_t kScratchGranularity = size_t{2} << 20;

// Destroyed wherever the entry goes (the completion thread, a framework
// thread); its event goes back to the device's pool.
class CudaReady : public runtime::ReadyEvent {
 public:
  CudaReady(int device, std::shared_ptr<CudaEventPool> pool, cudaEvent_t event)
      : device(device), event(event), pool_(std::move(pool)) {}
  ~CudaReady() override { pool_->Give(event); }
  const int device;
  const cudaEvent_t event;

 private:
  const std::shared_ptr<CudaEventPool> pool_;
};

// Polled on the completion thread, on a caller waiting for its op, and on
// the device thread (staged path); one thread at a time.
class CudaEvent : public Event {
 public:
  CudaEvent(int device, std::shared_ptr<CudaEventPool> pool, cudaEvent_t event)
      : device_(device), pool_(std::move(pool)), event_(event) {}
  ~CudaEvent() override { pool_->Give(event_); }
  absl::StatusOr<bool> Done() override {
    ScopedDevice scoped(device_);
    const cudaError_t e = cudaEventQuery(event_);
    if (e == cudaSuccess) return true;
    if (e == cudaErrorNotReady) {
      // cudaErrorNotReady is also recorded as the thread's last error: left
      // there, the next kernel launch on this thread (which checks
      // cudaGetLastError) would fail with it.
      cudaGetLastError();
      return false;
    }
    return CudaStatus(e, "cudaEventQuery");
  }

 private:
  const int device_;
  const std::shared_ptr<CudaEventPool> pool_;
  const cudaEvent_t event_;
};

// Device memory the framework owns once exported (DLPack kDLCUDA).
class CudaBuffer : public runtime::Buffer {
 public:
  CudaBuffer(void* data, size_t size, int device)
      : data_(data), size_(size), device_(device) {}
  ~CudaBuffer() override {
    // cudaFree waits for the device, so work of any stream still reading
    // the tensor finishes first.
    ScopedDevice scoped(device_);
    cudaFree(data_);
  }
  void* data() override { return data_; }
  size_t size() const override { return size_; }
  DeviceType device() const override { return DeviceType::kGpu; }
  int device_id() const override { return device_; }

 private:
  void* data_;
  size_t size_;
  int device_;
};

std::string UuidText(const cudaUUID_t& uuid) {
  std::string hex;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) hex += '-';
    char byte[3];
    std::snprintf(byte, sizeof(byte), "%02x",
                  static_cast<unsigned char>(uuid.bytes[i]));
    hex += byte;
  }
  return absl::StrCat("GPU-", hex);
}

// On `stream` of `device`, which is current.
absl::StatusOr<std::unique_ptr<Event>> RecordOn(
    int device, const std::shared_ptr<CudaEventPool>& pool,
    cudaStream_t stream) {
  absl::StatusOr<cudaEvent_t> event = pool->Take();
  if (!event.ok()) return event.status();
  auto owned = std::make_unique<CudaEvent>(device, pool, *event);
  if (absl::Status s =
          CudaStatus(cudaEventRecord(*event, stream), "cudaEventRecord");
      !s.ok()) {
    return s;
  }
  return owned;
}

// Whether `device`'s primary context exists (the driver's
// cuDevicePrimaryCtxGetState, reached through the runtime so that libhvd.so
// does not link libcuda). True when that cannot be told.
bool HasPrimaryContext(int device) {
  using GetState = CUresult (*)(CUdevice, unsigned int*, int*);
  static const GetState get_state = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found;
    if (cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &fn,
                                         12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return static_cast<GetState>(nullptr);
    }
    return reinterpret_cast<GetState>(fn);
  }();
  if (get_state == nullptr) return true;
  unsigned int flags = 0;
  int active = 0;
  if (get_state(device, &flags, &active) != CUDA_SUCCESS) return true;
  return active != 0;
}

}  // namespace

absl::Status CudaStatus(cudaError_t error, absl::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorName(error),
                                          " (", cudaGetErrorString(error),
                                          ")"));
}

ScopedDevice::ScopedDevice(int device) {
  int current = -1;
  status_ = CudaStatus(cudaGetDevice(&current), "cudaGetDevice");
  if (!status_.ok()) return;
  if (current == device) return;
  // A thread that never chose a device reports device 0. Since CUDA 12,
  // cudaSetDevice makes the device's primary context, so restoring 0 there
  // would cost every process on a multi-GPU host a context (hundreds of MB)
  // on GPU 0: restore only a device whose context exists (as PyTorch's
  // device guards do). Such a thread then stays on `device`.
  if (HasPrimaryContext(current)) previous_ = current;
  status_ = CudaStatus(cudaSetDevice(device),
                       absl::StrCat("cudaSetDevice(", device, ")"));
}

ScopedDevice::~ScopedDevice() {
  if (previous_ >= 0) cudaSetDevice(previous_);
}

absl::StatusOr<std::unique_ptr<CudaDevice>> CudaDevice::Create(int id) {
  ScopedDevice scoped(id);
  if (!scoped.status().ok()) return scoped.status();
  cudaDeviceProp props;
  if (absl::Status s = CudaStatus(cudaGetDeviceProperties(&props, id),
                                  "cudaGetDeviceProperties");
      !s.ok()) {
    return s;
  }
  int least = 0, greatest = 0;
  if (absl::Status s =
          CudaStatus(cudaDeviceGetStreamPriorityRange(&least, &greatest),
                     "cudaDeviceGetStreamPriorityRange");
      !s.ok()) {
    return s;
  }
  int pools = 0;
  if (cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, id) !=
      cudaSuccess) {
    cudaGetLastError();
    pools = 0;
  }
  cudaStream_t stream;
  if (absl::Status s = CudaStatus(cudaStreamCreateWithPriority(
                                      &stream, cudaStreamNonBlocking, greatest),
                                  "cudaStreamCreateWithPriority");
      !s.ok()) {
    return s;
  }
  return std::unique_ptr<CudaDevice>(
      new CudaDevice(id, UuidText(props.uuid), stream, pools != 0));
}

CudaDevice::~CudaDevice() {
  ScopedDevice scoped(id_);
  auto event = RecordOn(id_, events_, stream_);
  const bool idle =
      event.ok() && WaitEvent(**event, absl::Now() + absl::Seconds(10),
                              "hvd stream at shutdown", nullptr)
                        .ok();
  if (!idle) {
    // Freeing memory a kernel may still touch is worse than leaking it.
    HVD_LOG(WARNING) << "GPU " << id_
                     << ": hvd's stream still busy at shutdown; its buffers "
                        "are not freed";
    return;
  }
  for (auto& [slot, block] : scratch_) cudaFree(block.data);
  if (host_.data != nullptr) cudaFreeHost(host_.data);
  cudaStreamDestroy(stream_);
}

absl::StatusOr<std::shared_ptr<runtime::ReadyEvent>> CudaDevice::MarkReady(
    void* stream) {
  ScopedDevice scoped(id_);
  if (!scoped.status().ok()) return scoped.status();
  absl::StatusOr<cudaEvent_t> event = events_->Take();
  if (!event.ok()) {
    return absl::Status(
        event.status().code(),
        absl::StrCat("GPU ", id_, ": ", event.status().message()));
  }
  auto ready = std::make_shared<CudaReady>(id_, events_, *event);
  if (absl::Status s =
          CudaStatus(cudaEventRecord(*event, static_cast<cudaStream_t>(stream)),
                     absl::StrCat("GPU ", id_,
                                  ": cudaEventRecord on the producer's "
                                  "stream"));
      !s.ok()) {
    return s;
  }
  return ready;
}

absl::Status CudaDevice::WaitFor(const runtime::ReadyEvent& ready) {
  const auto* cuda = dynamic_cast<const CudaReady*>(&ready);
  if (cuda == nullptr || cuda->device != id_) {
    return absl::InvalidArgumentError(
        absl::StrCat("ready event is not of GPU ", id_));
  }
  ScopedDevice scoped(id_);
  return CudaStatus(cudaStreamWaitEvent(stream_, cuda->event, 0),
                    "cudaStreamWaitEvent");
}

absl::Status CudaDevice::Copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return absl::OkStatus();
  ScopedDevice scoped(id_);
  return CudaStatus(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_),
      absl::StrCat("cudaMemcpyAsync of ", bytes, " bytes"));
}

absl::Status CudaDevice::CopyBatch(const std::vector<CopyOp>& ops) {
  const CopyPlan plan =
      PlanCopies(ops, kBatchedCopyMaxBytes, kernels::kMaxBatchedCopies);
  ScopedDevice scoped(id_);
  for (const auto& batch : plan.batches) {
    std::vector<void*> dsts;
    std::vector<const void*> srcs;
    std::vector<size_t> sizes;
    for (const CopyOp& op : batch) {
      dsts.push_back(op.dst);
      srcs.push_back(op.src);
      sizes.push_back(op.bytes);
    }
    if (absl::Status s = CudaStatus(
            kernels::LaunchBatchedCopy(dsts.data(), srcs.data(), sizes.data(),
                                       static_cast<int>(batch.size()), stream_),
            absl::StrCat("batched copy of ", batch.size(), " tensors"));
        !s.ok()) {
      return s;
    }
  }
  for (const CopyOp& op : plan.large) {
    if (absl::Status s = Copy(op.dst, op.src, op.bytes); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status CudaDevice::Zero(void* dst, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  ScopedDevice scoped(id_);
  return CudaStatus(cudaMemsetAsync(dst, 0, bytes, stream_), "cudaMemsetAsync");
}

absl::Status CudaDevice::Scale(void* data, size_t count, DataType dtype,
                               double factor) {
  ScopedDevice scoped(id_);
  return CudaStatus(
      kernels::LaunchScale(data, count, static_cast<int32_t>(dtype), factor,
                           stream_),
      absl::StrCat("scale kernel (", DataTypeName(dtype), ", ", count,
                   " elements)"));
}

absl::StatusOr<std::unique_ptr<Event>> CudaDevice::Record() {
  ScopedDevice scoped(id_);
  return RecordOn(id_, events_, stream_);
}

absl::StatusOr<void*> CudaDevice::Scratch(int slot, size_t bytes) {
  Block& block = scratch_[slot];
  if (block.data != nullptr && block.size >= bytes) return block.data;
  ScopedDevice scoped(id_);
  const size_t size =
      std::max(RoundUp(bytes, kScratchGranularity), kScratchGranularity);
  // Stream-ordered where the device has memory pools: the old block goes
  // after the work queued on it, the new one is usable by what is queued
  // next, and the host never waits. Without pools (some virtual GPUs) the
  // old block goes once the stream is idle and cudaMalloc makes the new one.
  if (block.data != nullptr) {
    absl::Status freed =
        stream_ordered_
            ? CudaStatus(cudaFreeAsync(block.data, stream_), "cudaFreeAsync")
            : CudaStatus(cudaStreamSynchronize(stream_),
                         "cudaStreamSynchronize");
    if (!freed.ok()) return freed;
    if (!stream_ordered_) cudaFree(block.data);
    block = Block();
  }
  const cudaError_t made = stream_ordered_
                               ? cudaMallocAsync(&block.data, size, stream_)
                               : cudaMalloc(&block.data, size);
  if (absl::Status s = CudaStatus(
          made, absl::StrCat("GPU ", id_, ": ",
                             stream_ordered_ ? "cudaMallocAsync" : "cudaMalloc",
                             " of ", size, " bytes (fusion buffer)"));
      !s.ok()) {
    block = Block();
    return s;
  }
  block.size = size;
  return block.data;
}

absl::StatusOr<void*> CudaDevice::HostScratch(size_t bytes,
                                              absl::Time deadline) {
  if (host_.data != nullptr && host_.size >= bytes) return host_.data;
  ScopedDevice scoped(id_);
  if (host_.data != nullptr) {
    // Copies queued on the stream may still read the old block.
    auto event = RecordOn(id_, events_, stream_);
    if (!event.ok()) return event.status();
    if (absl::Status s =
            WaitEvent(**event, deadline,
                      "hvd stream before growing pinned memory", nullptr);
        !s.ok()) {
      return s;
    }
    cudaFreeHost(host_.data);
    host_ = Block();
  }
  const size_t size =
      std::max(RoundUp(bytes, kScratchGranularity), kScratchGranularity);
  if (absl::Status s = CudaStatus(
          cudaHostAlloc(&host_.data, size, cudaHostAllocPortable),
          absl::StrCat("cudaHostAlloc of ", size, " bytes (staging)"));
      !s.ok()) {
    host_ = Block();
    return s;
  }
  host_.size = size;
  return host_.data;
}

absl::StatusOr<std::shared_ptr<runtime::Buffer>> CudaDevice::Allocate(
    size_t bytes) {
  ScopedDevice scoped(id_);
  void* data = nullptr;
  if (absl::Status s = CudaStatus(cudaMalloc(&data, std::max<size_t>(bytes, 1)),
                                  absl::StrCat("GPU ", id_, ": cudaMalloc of ",
                                               bytes, " bytes (output)"));
      !s.ok()) {
    return s;
  }
  return std::make_shared<CudaBuffer>(data, bytes, id_);
}

std::string CudaPlatform::Describe() { return gpu::Describe(); }

int CudaPlatform::DeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // Not sticky: clear it.
    return 0;
  }
  return count;
}

absl::StatusOr<Device*> CudaPlatform::GetDevice(int id) {
  absl::MutexLock lock(&mu_);
  auto& device = devices_[id];
  if (device) return device.get();
  int count = 0;
  if (absl::Status s =
          CudaStatus(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
      !s.ok()) {
    cudaGetLastError();  // Not left for the framework thread's next check.
    devices_.erase(id);
    return absl::FailedPreconditionError(
        absl::StrCat("GPU ", id, " is not usable: ", s.message()));
  }
  if (id < 0 || id >= count) {
    devices_.erase(id);
    return absl::InvalidArgumentError(absl::StrCat(
        "GPU ", id, " does not exist: ", count, " visible to this process"));
  }
  auto made = CudaDevice::Create(id);
  if (!made.ok()) {
    devices_.erase(id);
    return made.status();
  }
  device = std::move(*made);
  return device.get();
}

absl::StatusOr<std::string> CudaPlatform::NewNcclId() {
  ncclUniqueId id;
  const ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) {
    return absl::InternalError(
        absl::StrCat("ncclGetUniqueId: ", ncclGetErrorString(r)));
  }
  return std::string(id.internal, sizeof(id.internal));
}

absl::StatusOr<std::unique_ptr<Comm>> CudaPlatform::NewNcclComm(
    Device* device, const std::string& id, int rank, int size,
    absl::Time deadline, const std::function<absl::Status()>& stop,
    const std::string& who) {
  auto* cuda = dynamic_cast<CudaDevice*>(device);
  if (cuda == nullptr) {
    return absl::InvalidArgumentError("not a device of this platform");
  }
  auto comm = NcclComm::Create(cuda, id, rank, size, deadline, stop, who);
  if (!comm.ok()) return comm.status();
  return std::unique_ptr<Comm>(std::move(*comm));
}

}  // namespace hvd::gpu
