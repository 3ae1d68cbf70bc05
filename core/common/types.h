// Element types, reduction ops and devices shared by every layer of the core:
// the enums (type_values.h, part of the ABI) and what is known about them.
#ifndef HVD_CORE_COMMON_TYPES_H_
#define HVD_CORE_COMMON_TYPES_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/common/type_values.h"

namespace hvd {

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
