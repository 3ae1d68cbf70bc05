#include "core/common/types.h"

#include "absl/strings/str_cat.h"

namespace hvd {

size_t DataTypeSize(DataType dtype) {
  switch (dtype) {
    case DataType::kUint8:
    case DataType::kInt8:
    case DataType::kBool:
      return 1;
    case DataType::kUint16:
    case DataType::kInt16:
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return 2;
    case DataType::kInt32:
    case DataType::kFloat32:
      return 4;
    case DataType::kInt64:
    case DataType::kFloat64:
      return 8;
  }
  return 0;
}

absl::string_view DataTypeName(DataType dtype) {
  switch (dtype) {
    case DataType::kUint8: return "uint8";
    case DataType::kInt8: return "int8";
    case DataType::kUint16: return "uint16";
    case DataType::kInt16: return "int16";
    case DataType::kInt32: return "int32";
    case DataType::kInt64: return "int64";
    case DataType::kFloat16: return "float16";
    case DataType::kBFloat16: return "bfloat16";
    case DataType::kFloat32: return "float32";
    case DataType::kFloat64: return "float64";
    case DataType::kBool: return "bool";
  }
  return "invalid-dtype";
}

absl::string_view ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "Sum";
    case ReduceOp::kAverage: return "Average";
    case ReduceOp::kMin: return "Min";
    case ReduceOp::kMax: return "Max";
    case ReduceOp::kProduct: return "Product";
    case ReduceOp::kAdasum: return "Adasum";
  }
  return "invalid-op";
}

absl::string_view DeviceTypeName(DeviceType device) {
  return device == DeviceType::kGpu ? "GPU" : "CPU";
}

bool IsFloatingPoint(DataType dtype) {
  return dtype == DataType::kFloat16 || dtype == DataType::kBFloat16 ||
         dtype == DataType::kFloat32 || dtype == DataType::kFloat64;
}

bool IsValidDataType(int32_t value) {
  return value >= 0 && value < kNumDataTypes;
}

bool IsValidReduceOp(int32_t value) {
  return value >= 0 && value <= static_cast<int32_t>(ReduceOp::kAdasum);
}

absl::Status CheckReducible(DataType dtype, ReduceOp op) {
  if (op == ReduceOp::kAdasum) {
    return absl::UnimplementedError(
        "op Adasum is not supported by hvd yet; use Average or Sum");
  }
  if (op == ReduceOp::kAverage && !IsFloatingPoint(dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "op Average needs a floating-point tensor, got ", DataTypeName(dtype),
        "; use Sum and divide, or convert to float"));
  }
  return absl::OkStatus();
}

}  // namespace hvd
