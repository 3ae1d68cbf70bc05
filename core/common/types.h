// Element types, reduction ops and devices shared by every layer of the core.
// Values of DataType and ReduceOp are part of the C ABI (core/c_api.h) and of
// the wire format between ranks: never renumber them.
#ifndef HVD_CORE_COMMON_TYPES_H_
#define HVD_CORE_COMMON_TYPES_H_

#include <cstddef>
#include <cstdint>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace hvd {

enum class DataType : int32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kFloat16 = 6,
  kBFloat16 = 7,
  kFloat32 = 8,
  kFloat64 = 9,
  kBool = 10,
};
inline constexpr int kNumDataTypes = 11;

enum class ReduceOp : int32_t {
  kSum = 0,
  kAverage = 1,
  kMin = 2,
  kMax = 3,
  kProduct = 4,
  kAdasum = 5,  // Accepted by the ABI so that it can be refused by name.
};
inline constexpr int kNumReduceOps = 5;  // Supported ones: kSum..kProduct.

enum class DeviceType : int32_t {
  kCpu = 0,
  kGpu = 1,
};

size_t DataTypeSize(DataType dtype);
absl::string_view DataTypeName(DataType dtype);
absl::string_view ReduceOpName(ReduceOp op);
absl::string_view DeviceTypeName(DeviceType device);

bool IsFloatingPoint(DataType dtype);
bool IsValidDataType(int32_t value);
bool IsValidReduceOp(int32_t value);

// OK if `op` can reduce `dtype`; otherwise InvalidArgument saying why.
absl::Status CheckReducible(DataType dtype, ReduceOp op);

}  // namespace hvd

#endif  // HVD_CORE_COMMON_TYPES_H_
