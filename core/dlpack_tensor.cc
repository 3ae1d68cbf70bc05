#include "core/dlpack_tensor.h"

#include <cstring>

#include <memory>

#include "absl/strings/str_cat.h"

namespace hvd {
namespace {

constexpr uint8_t kDLBoolCode = 6;  // DLPack >= 0.8; absent from 0.6 headers.

absl::StatusOr<DataType> FromDLDataType(DLDataType t) {
  if (t.lanes != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("vector dtypes (lanes=", t.lanes, ") are not supported"));
  }
  const int code = t.code;
  const int bits = t.bits;
  if (code == kDLUInt && bits == 8) return DataType::kUint8;
  if (code == kDLUInt && bits == 16) return DataType::kUint16;
  if (code == kDLInt && bits == 8) return DataType::kInt8;
  if (code == kDLInt && bits == 16) return DataType::kInt16;
  if (code == kDLInt && bits == 32) return DataType::kInt32;
  if (code == kDLInt && bits == 64) return DataType::kInt64;
  if (code == kDLFloat && bits == 16) return DataType::kFloat16;
  if (code == kDLFloat && bits == 32) return DataType::kFloat32;
  if (code == kDLFloat && bits == 64) return DataType::kFloat64;
  if (code == kDLBfloat && bits == 16) return DataType::kBFloat16;
  if (code == kDLBoolCode && bits == 8) return DataType::kBool;
  return absl::InvalidArgumentError(absl::StrCat(
      "unsupported DLPack dtype (code ", code, ", bits ", bits,
      "); hvd takes uint8, int8, uint16, int16, int32, int64, float16, "
      "bfloat16, float32, float64 and bool"));
}

DLDataType ToDLDataType(DataType dtype) {
  DLDataType t;
  t.lanes = 1;
  t.bits = static_cast<uint8_t>(DataTypeSize(dtype) * 8);
  switch (dtype) {
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
    case DataType::kInt64:
      t.code = kDLInt;
      break;
    case DataType::kFloat16:
    case DataType::kFloat32:
    case DataType::kFloat64:
      t.code = kDLFloat;
      break;
    case DataType::kBFloat16:
      t.code = kDLBfloat;
      break;
    default:  // Unsigned, and bool as uint8 (DLPack 0.6 has no bool).
      t.code = kDLUInt;
      break;
  }
  return t;
}

// Bounds of what ViewOf accepts: more dimensions than any framework makes,
// and a size no address space holds (2^62 bytes).
constexpr int kMaxDims = 64;
constexpr size_t kMaxTensorBytes = size_t{1} << 62;

bool IsCompact(const DLTensor* tensor) {
  if (tensor->strides == nullptr) return true;
  for (int i = 0; i < tensor->ndim; ++i) {
    if (tensor->shape[i] == 0) return true;  // No elements: any strides do.
  }
  int64_t expected = 1;
  for (int i = tensor->ndim - 1; i >= 0; --i) {
    if (tensor->shape[i] != 1 && tensor->strides[i] != expected) return false;
    expected *= tensor->shape[i];
  }
  return true;
}

struct Exported {
  DLManagedTensor managed;
  runtime::OpResult result;
};

void DeleteExported(DLManagedTensor* self) {
  delete static_cast<Exported*>(self->manager_ctx);
}

}  // namespace

absl::StatusOr<TensorView> ViewOf(const DLTensor* tensor,
                                  int32_t dtype_override) {
  if (tensor == nullptr) return absl::InvalidArgumentError("tensor is NULL");
  TensorView view;
  auto dtype = FromDLDataType(tensor->dtype);
  if (!dtype.ok()) return dtype.status();
  view.dtype = *dtype;
  if (dtype_override >= 0) {
    if (!IsValidDataType(dtype_override) ||
        DataTypeSize(static_cast<DataType>(dtype_override)) !=
            DataTypeSize(view.dtype)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dtype override ", dtype_override, " does not fit a ",
          DataTypeName(view.dtype), " tensor"));
    }
    view.dtype = static_cast<DataType>(dtype_override);
  }
  // Read as the int a C caller stored: a value outside DLDeviceType's
  // enumerators must not be loaded as one.
  int32_t device_type;
  static_assert(sizeof(device_type) == sizeof(tensor->device.device_type));
  std::memcpy(&device_type, &tensor->device.device_type, sizeof(device_type));
  switch (device_type) {
    case kDLCPU:
    case kDLCUDAHost:
      view.device = DeviceType::kCpu;
      break;
    case kDLCUDA:
    case kDLCUDAManaged:
      view.device = DeviceType::kGpu;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "unsupported device type ", device_type));
  }
  view.device_id = tensor->device.device_id;
  if (tensor->ndim < 0 || tensor->ndim > kMaxDims) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor has ", tensor->ndim, " dimensions; hvd takes 0 to ",
        kMaxDims));
  }
  if (tensor->ndim > 0 && tensor->shape == nullptr) {
    return absl::InvalidArgumentError("tensor shape is NULL");
  }
  // Checked before the strides, whose check multiplies the dimensions.
  int64_t elements = 1;
  for (int i = 0; i < tensor->ndim; ++i) {
    if (tensor->shape[i] < 0) {
      return absl::InvalidArgumentError("tensor has a negative dimension");
    }
    view.shape.push_back(tensor->shape[i]);
    if (__builtin_mul_overflow(elements, tensor->shape[i], &elements)) {
      return absl::InvalidArgumentError("tensor shape overflows 64 bits");
    }
  }
  if (__builtin_mul_overflow(static_cast<uint64_t>(elements),
                             DataTypeSize(view.dtype), &view.bytes) ||
      view.bytes > kMaxTensorBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor of ", elements, " elements is larger than hvd's limit of ",
        kMaxTensorBytes, " bytes"));
  }
  if (!IsCompact(tensor)) {
    return absl::InvalidArgumentError(
        "tensor is not contiguous: make it contiguous first");
  }
  if (view.bytes > 0 && tensor->data == nullptr) {
    return absl::InvalidArgumentError("tensor data is NULL");
  }
  view.data = tensor->data == nullptr
                  ? nullptr
                  : static_cast<char*>(tensor->data) + tensor->byte_offset;
  return view;
}

DLManagedTensor* ExportOutput(runtime::OpResult result) {
  auto* exported = new Exported();
  exported->result = std::move(result);
  DLTensor& t = exported->managed.dl_tensor;
  runtime::Buffer& output = *exported->result.output;
  t.data = output.data();
  // GPU outputs hvd allocated on the device stay there (kDLCUDA).
  t.device = output.device() == DeviceType::kGpu
                 ? DLDevice{kDLCUDA, output.device_id()}
                 : DLDevice{kDLCPU, 0};
  t.ndim = static_cast<int>(exported->result.shape.size());
  t.dtype = ToDLDataType(exported->result.dtype);
  t.shape = exported->result.shape.data();
  t.strides = nullptr;
  t.byte_offset = 0;
  exported->managed.manager_ctx = exported;
  exported->managed.deleter = DeleteExported;
  return &exported->managed;
}

namespace {

struct HostTensor {
  DLManagedTensor managed;
  std::unique_ptr<runtime::HostBuffer> buffer;
  std::vector<int64_t> shape;
};

void DeleteHostTensor(DLManagedTensor* self) {
  delete static_cast<HostTensor*>(self->manager_ctx);
}

}  // namespace

absl::StatusOr<DLManagedTensor*> NewHostTensorLike(const DLTensor* like) {
  auto view = ViewOf(like, -1);
  if (!view.ok()) return view.status();
  if (view->device != DeviceType::kCpu) {
    return absl::InvalidArgumentError(
        "hvd_empty_like allocates host memory: the tensor is on a GPU");
  }
  auto* tensor = new HostTensor();
  tensor->buffer = std::make_unique<runtime::HostBuffer>(view->bytes);
  tensor->shape.assign(view->shape.begin(), view->shape.end());
  DLTensor& t = tensor->managed.dl_tensor;
  t.data = tensor->buffer->data();
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = like->ndim;
  t.dtype = like->dtype;
  t.shape = tensor->shape.data();
  t.strides = nullptr;
  t.byte_offset = 0;
  tensor->managed.manager_ctx = tensor;
  tensor->managed.deleter = DeleteHostTensor;
  return &tensor->managed;
}

}  // namespace hvd
