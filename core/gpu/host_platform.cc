#include "core/gpu/host_platform.h"

#include <sys/prctl.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/collectives/reduce.h"
#include "core/gpu/staged_comm.h"

namespace hvd::gpu {
namespace {

class HostReady : public runtime::ReadyEvent {
 public:
  explicit HostReady(int device) : device(device) {}
  const int device;
};

// Fired at once, or when `done` says so.
class HostEvent : public Event {
 public:
  explicit HostEvent(std::function<absl::StatusOr<bool>()> done)
      : done_(std::move(done)) {}
  absl::StatusOr<bool> Done() override { return done_ ? done_() : true; }

 private:
  const std::function<absl::StatusOr<bool>()> done_;
};

// Host memory that reports itself as GPU memory of `device`.
class HostDeviceBuffer : public runtime::Buffer {
 public:
  HostDeviceBuffer(size_t bytes, int device)
      : bytes_(bytes == 0 ? 1 : bytes), size_(bytes), device_(device) {}
  void* data() override { return bytes_.data(); }
  size_t size() const override { return size_; }
  DeviceType device() const override { return DeviceType::kGpu; }
  int device_id() const override { return device_; }

 private:
  std::vector<char> bytes_;
  size_t size_;
  int device_;
};

// A StagedComm that, like NCCL, cannot reduce 16-bit integers.
class FakeNcclComm : public StagedComm {
 public:
  using StagedComm::StagedComm;
  absl::string_view kind() const override { return "nccl"; }
  bool CanReduce(DataType dtype, ReduceOp) const override {
    return dtype != DataType::kInt16 && dtype != DataType::kUint16;
  }
};

}  // namespace

absl::StatusOr<std::shared_ptr<runtime::ReadyEvent>> HostDevice::MarkReady(
    void*) {
  return std::make_shared<HostReady>(id_);
}

absl::Status HostDevice::WaitFor(const runtime::ReadyEvent& ready) {
  const auto* host = dynamic_cast<const HostReady*>(&ready);
  if (host == nullptr || host->device != id_) {
    return absl::InvalidArgumentError(
        absl::StrCat("ready event is not of host device ", id_));
  }
  ++counts_.waits;
  return absl::OkStatus();
}

absl::Status HostDevice::Copy(void* dst, const void* src, size_t bytes) {
  ++counts_.copies;
  if (bytes > 0 && dst != src) std::memmove(dst, src, bytes);
  return absl::OkStatus();
}

absl::Status HostDevice::CopyBatch(const std::vector<CopyOp>& ops) {
  ++counts_.copy_batches;
  for (const CopyOp& op : ops) {
    if (op.bytes > 0 && op.dst != op.src)
      std::memmove(op.dst, op.src, op.bytes);
  }
  return absl::OkStatus();
}

absl::Status HostDevice::Zero(void* dst, size_t bytes) {
  if (bytes > 0) std::memset(dst, 0, bytes);
  return absl::OkStatus();
}

absl::Status HostDevice::Scale(void* data, size_t count, DataType dtype,
                               double factor) {
  ++counts_.scales;
  collectives::Scale(data, count, dtype, factor);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Event>> HostDevice::Record() {
  counts_.recorder_timer_slack_ns = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  return std::make_unique<HostEvent>(event_done_);
}

absl::StatusOr<void*> HostDevice::Scratch(int slot, size_t bytes) {
  std::vector<char>& buffer = scratch_[slot];
  if (buffer.size() < bytes) buffer.resize(bytes);
  return buffer.empty() ? nullptr : static_cast<void*>(buffer.data());
}

absl::StatusOr<void*> HostDevice::HostScratch(size_t bytes, absl::Time) {
  if (host_scratch_.size() < bytes) host_scratch_.resize(bytes);
  return host_scratch_.empty() ? nullptr
                               : static_cast<void*>(host_scratch_.data());
}

absl::StatusOr<std::shared_ptr<runtime::Buffer>> HostDevice::Allocate(
    size_t bytes) {
  ++counts_.allocations;
  return std::make_shared<HostDeviceBuffer>(bytes, id_);
}

HostPlatform::HostPlatform(HostPlatformOptions options)
    : options_(std::move(options)) {}

absl::StatusOr<Device*> HostPlatform::GetDevice(int id) {
  if (id < 0 || id >= options_.device_count) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no device ", id, " (", options_.device_count, " device(s))"));
  }
  absl::MutexLock lock(&mu_);
  auto& device = devices_[id];
  if (!device) {
    device = std::make_unique<HostDevice>(id, options_.identity,
                                          options_.event_done);
  }
  return device.get();
}

HostDevice* HostPlatform::host_device(int id) {
  absl::MutexLock lock(&mu_);
  auto it = devices_.find(id);
  return it == devices_.end() ? nullptr : it->second.get();
}

absl::StatusOr<std::string> HostPlatform::NewNcclId() {
  static std::atomic<int> counter{0};
  // Unique within the test process, which holds every rank.
  return absl::StrCat("fake-nccl-", counter.fetch_add(1));
}

absl::StatusOr<std::unique_ptr<Comm>> HostPlatform::NewNcclComm(
    Device* device, const std::string& id, int rank, int size, absl::Time,
    const std::function<absl::Status()>&, const std::string& who) {
  if (!options_.nccl) return absl::UnimplementedError("no NCCL here");
  std::unique_ptr<transport::Context> context;
  if (size > 1) {
    auto made = options_.make_context(
        rank, size,
        std::make_shared<PrefixStore>(options_.store, absl::StrCat(id, "/")));
    if (!made.ok()) return made.status();
    context = std::move(*made);
  }
  return std::make_unique<FakeNcclComm>(device, std::move(context), rank, size,
                                        options_.collective_options, who);
}

}  // namespace hvd::gpu
