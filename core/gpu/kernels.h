// The backend's own CUDA kernels (kernels.cu, compiled by nvcc in a Bazel
// genrule where the build has CUDA): scale passes and batched copies.
// Launch functions return the launch's cudaError_t.
#ifndef HVD_CORE_GPU_KERNELS_H_
#define HVD_CORE_GPU_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace hvd::gpu::kernels {

// data[i] *= factor on `stream`, with collectives::Scale's rounding: double
// for 32- and 64-bit types, float for float16 and bfloat16, integers
// truncated toward zero and saturated (NaN gives 0), bool kept while the
// factor is non-zero. `dtype` is an hvd::DataType value.
cudaError_t LaunchScale(void* data, size_t count, int32_t dtype, double factor,
                        cudaStream_t stream);

// Copies per launch; their descriptors travel as the kernel's parameter.
inline constexpr int kMaxBatchedCopies = 64;

// `count` (<= kMaxBatchedCopies) copies in one launch on `stream`; every
// address must be device-accessible.
cudaError_t LaunchBatchedCopy(void* const* dsts, const void* const* srcs,
                              const size_t* bytes, int count,
                              cudaStream_t stream);

}  // namespace hvd::gpu::kernels

#endif  // HVD_CORE_GPU_KERNELS_H_
