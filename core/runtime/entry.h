// One tensor operation submitted by the framework, from enqueue to completion.
#ifndef HVD_CORE_RUNTIME_ENTRY_H_
#define HVD_CORE_RUNTIME_ENTRY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/common/types.h"
#include "proto/negotiation.pb.h"

namespace hvd::runtime {

// Memory hvd allocates for an output (allgather, alltoall, reducescatter):
// on the host (HostBuffer) or on a GPU (core/gpu). Freed with the object.
class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual void* data() = 0;
  virtual size_t size() const = 0;
  virtual DeviceType device() const { return DeviceType::kCpu; }
  virtual int device_id() const { return 0; }  // CUDA ordinal when kGpu
};

// Host memory, 64-byte aligned, uninitialised.
class HostBuffer : public Buffer {
 public:
  explicit HostBuffer(size_t bytes);
  ~HostBuffer() override;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  void* data() override { return data_; }
  size_t size() const override { return size_; }

 private:
  void* data_;
  size_t size_;
  void* raw_ = nullptr;  // what malloc gave, for small buffers
};

// What an op hands back besides its status.
struct OpResult {
  std::shared_ptr<Buffer> output;  // hvd-allocated output, if any
  std::vector<int64_t> shape;          // of `output`
  DataType dtype = DataType::kFloat32;
  std::vector<int64_t> received_splits;  // alltoall
  int64_t value = -1;                    // join: last rank; add set: id
};

using DoneCallback = std::function<void(const absl::Status&, OpResult)>;

// GPU tensors: the producer stream's work at enqueue (a CUDA event), made by
// the device backend (device_ops.h); opaque here.
class ReadyEvent {
 public:
  virtual ~ReadyEvent() = default;
};

struct TensorEntry {
  Request request;  // what is negotiated; request.rank() is this rank
  void* input = nullptr;   // nullptr for control ops
  void* output = nullptr;  // == input when in place; nullptr when allocated
  DeviceType device = DeviceType::kCpu;
  int device_id = 0;       // CUDA ordinal of a GPU tensor
  void* stream = nullptr;  // GPU tensors: the producer's stream
  std::shared_ptr<ReadyEvent> ready;  // GPU tensors: see ReadyEvent
  absl::Time enqueued;
  int cache_slot = -1;     // >= 0: negotiated by response-cache bit
  // Called exactly once, while the entry lives (the runtime's callback reads
  // `request`): on the background thread, or for GPU tensors on the device
  // backend's completion thread or a caller waiting for its op
  // (DeviceOps::Progress).
  DoneCallback done;

  int64_t NumElements() const;
  size_t Bytes() const;
  DataType dtype() const { return static_cast<DataType>(request.dtype()); }
};

// Shape of an hvd-allocated output of `entry` holding `rows` rows: the
// input's shape with its first dimension replaced (a 0-d input counts as one
// row).
std::vector<int64_t> OutputShape(const TensorEntry& entry, int64_t rows);

}  // namespace hvd::runtime

#endif  // HVD_CORE_RUNTIME_ENTRY_H_
