// DLPack <-> runtime conversions. Only the C ABI layer knows DLPack.
#ifndef HVD_CORE_DLPACK_TENSOR_H_
#define HVD_CORE_DLPACK_TENSOR_H_

#include <cstdint>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "core/common/types.h"
#include "core/runtime/entry.h"
#include "dlpack/dlpack.h"

namespace hvd {

struct TensorView {
  void* data = nullptr;  // data + byte_offset
  DataType dtype = DataType::kFloat32;
  DeviceType device = DeviceType::kCpu;
  int device_id = 0;
  // Inline up to 6 dimensions: read on every call, kept off the heap.
  absl::InlinedVector<int64_t, 6> shape;
  size_t bytes = 0;
};

// Checks and reads `tensor` (dense, row-major). `dtype_override` >= 0 replaces
// the DLPack dtype when the element sizes agree (bool through DLPack 0.6).
// InvalidArgument for what hvd cannot take, from a caller's mistake or a
// malformed descriptor: an unsupported dtype or device, 0-64 dimensions
// exceeded, a NULL shape or data where there are elements, a negative
// dimension, a size past 2^62 bytes or a shape whose product overflows, or
// strides that are not row-major. It reads `shape` and `strides` (ndim
// entries each) and never the data.
absl::StatusOr<TensorView> ViewOf(const DLTensor* tensor,
                                  int32_t dtype_override);

// A new DLManagedTensor owning `result`'s output; its deleter frees both.
DLManagedTensor* ExportOutput(runtime::OpResult result);

// A new DLManagedTensor owning a HostBuffer with `like`'s shape and DLPack
// dtype (compact); its deleter frees both. Checks `like` with ViewOf.
absl::StatusOr<DLManagedTensor*> NewHostTensorLike(const DLTensor* like);

}  // namespace hvd

#endif  // HVD_CORE_DLPACK_TENSOR_H_
