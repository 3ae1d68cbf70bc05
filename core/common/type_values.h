// The values of DataType, ReduceOp and DeviceType: part of the C ABI
// (core/c_api.h) and of the wire format between ranks, so never renumber
// them. Plain C++ with no dependencies, so that nvcc-compiled kernels
// (core/gpu/kernels.cu) use the same definitions.
#ifndef HVD_CORE_COMMON_TYPE_VALUES_H_
#define HVD_CORE_COMMON_TYPE_VALUES_H_

#include <cstdint>

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

}  // namespace hvd

#endif  // HVD_CORE_COMMON_TYPE_VALUES_H_
