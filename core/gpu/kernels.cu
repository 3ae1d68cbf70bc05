#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <limits>

#include "core/common/type_values.h"
#include "core/gpu/kernels.h"

namespace hvd::gpu::kernels {
namespace {

constexpr int kThreads = 256;

int Blocks(size_t count) {
  const size_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 4096 ? (blocks == 0 ? 1 : blocks) : 4096);
}

// The type's limits come from the host (numeric_limits is host code).
template <typename T>
__device__ T Saturate(double value, T lowest, T highest) {
  if (value != value) return 0;
  if (value <= static_cast<double>(lowest)) return lowest;
  if (value >= static_cast<double>(highest)) return highest;
  return static_cast<T>(value);  // Truncates toward zero.
}

template <typename T>
__global__ void ScaleInteger(T* data, size_t count, double factor, T lowest,
                             T highest) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{blockDim.x} * gridDim.x) {
    data[i] =
        Saturate<T>(static_cast<double>(data[i]) * factor, lowest, highest);
  }
}

template <typename T>
void LaunchInteger(void* data, size_t count, double factor,
                   cudaStream_t stream) {
  ScaleInteger<<<Blocks(count), kThreads, 0, stream>>>(
      static_cast<T*>(data), count, factor, std::numeric_limits<T>::min(),
      std::numeric_limits<T>::max());
}

// In the tensor's own type, the factor rounded to it first, as the CPU
// (collectives::Scale) and Horovod do: a product in double rounded once to
// float can differ from it in the last bit.
template <typename T>
__global__ void ScaleFloat(T* data, size_t count, T factor) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{blockDim.x} * gridDim.x) {
    data[i] = data[i] * factor;
  }
}

__global__ void ScaleHalf(__half* data, size_t count, float factor) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{blockDim.x} * gridDim.x) {
    data[i] = __float2half_rn(__half2float(data[i]) * factor);
  }
}

__global__ void ScaleBf16(__nv_bfloat16* data, size_t count, float factor) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{blockDim.x} * gridDim.x) {
    data[i] = __float2bfloat16_rn(__bfloat162float(data[i]) * factor);
  }
}

__global__ void ScaleBool(uint8_t* data, size_t count, uint8_t keep) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{blockDim.x} * gridDim.x) {
    data[i] = (data[i] != 0) & keep;
  }
}

struct CopyBatch {
  void* dst[kMaxBatchedCopies];
  const void* src[kMaxBatchedCopies];
  size_t bytes[kMaxBatchedCopies];
};

// Block b copies part b % per_copy of copy b / per_copy: 16 bytes a thread
// where both ends allow it, 4 where they allow that, else bytes.
__global__ void BatchedCopy(CopyBatch batch, int per_copy) {
  const int copy = blockIdx.x / per_copy;
  const size_t first =
      (blockIdx.x % per_copy) * size_t{blockDim.x} + threadIdx.x;
  const size_t stride = size_t{blockDim.x} * per_copy;
  char* dst = static_cast<char*>(batch.dst[copy]);
  const char* src = static_cast<const char*>(batch.src[copy]);
  const size_t n = batch.bytes[copy];
  const uintptr_t both =
      reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src);
  size_t done = 0;
  if ((both & 15) == 0) {
    const size_t words = n / 16;
    for (size_t i = first; i < words; i += stride) {
      reinterpret_cast<int4*>(dst)[i] = reinterpret_cast<const int4*>(src)[i];
    }
    done = words * 16;
  } else if ((both & 3) == 0) {
    const size_t words = n / 4;
    for (size_t i = first; i < words; i += stride) {
      reinterpret_cast<int*>(dst)[i] = reinterpret_cast<const int*>(src)[i];
    }
    done = words * 4;
  }
  for (size_t i = done + first; i < n; i += stride) dst[i] = src[i];
}

}  // namespace

cudaError_t LaunchScale(void* data, size_t count, int32_t dtype, double factor,
                        cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  // The launch's error is read from the thread's last error below: clear
  // one an earlier call left there (its caller already had it returned).
  cudaGetLastError();
  const int blocks = Blocks(count);
  switch (static_cast<DataType>(dtype)) {
    case DataType::kUint8:
      LaunchInteger<uint8_t>(data, count, factor, stream);
      break;
    case DataType::kInt8:
      LaunchInteger<int8_t>(data, count, factor, stream);
      break;
    case DataType::kUint16:
      LaunchInteger<uint16_t>(data, count, factor, stream);
      break;
    case DataType::kInt16:
      LaunchInteger<int16_t>(data, count, factor, stream);
      break;
    case DataType::kInt32:
      LaunchInteger<int32_t>(data, count, factor, stream);
      break;
    case DataType::kInt64:
      LaunchInteger<int64_t>(data, count, factor, stream);
      break;
    case DataType::kFloat16:
      ScaleHalf<<<blocks, kThreads, 0, stream>>>(
          static_cast<__half*>(data), count, static_cast<float>(factor));
      break;
    case DataType::kBFloat16:
      ScaleBf16<<<blocks, kThreads, 0, stream>>>(
          static_cast<__nv_bfloat16*>(data), count, static_cast<float>(factor));
      break;
    case DataType::kFloat32:
      ScaleFloat<float><<<blocks, kThreads, 0, stream>>>(
          static_cast<float*>(data), count, static_cast<float>(factor));
      break;
    case DataType::kFloat64:
      ScaleFloat<double><<<blocks, kThreads, 0, stream>>>(
          static_cast<double*>(data), count, factor);
      break;
    case DataType::kBool:
      ScaleBool<<<blocks, kThreads, 0, stream>>>(static_cast<uint8_t*>(data),
                                                 count, factor != 0.0 ? 1 : 0);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t LaunchBatchedCopy(void* const* dsts, const void* const* srcs,
                              const size_t* bytes, int count,
                              cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  if (count > kMaxBatchedCopies) return cudaErrorInvalidValue;
  CopyBatch batch;
  size_t largest = 0;
  for (int i = 0; i < count; ++i) {
    batch.dst[i] = dsts[i];
    batch.src[i] = srcs[i];
    batch.bytes[i] = bytes[i];
    if (bytes[i] > largest) largest = bytes[i];
  }
  // One block moves 4 KiB per round (256 threads x 16 B); up to 16 blocks a
  // copy keeps large ones from serialising on one SM.
  size_t per_copy = (largest + 4095) / 4096;
  if (per_copy < 1) per_copy = 1;
  if (per_copy > 16) per_copy = 16;
  cudaGetLastError();  // As in LaunchScale: only this launch's error below.
  BatchedCopy<<<static_cast<int>(per_copy) * count, kThreads, 0, stream>>>(
      batch, static_cast<int>(per_copy));
  return cudaGetLastError();
}

}  // namespace hvd::gpu::kernels
