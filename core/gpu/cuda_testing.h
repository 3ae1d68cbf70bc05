// GPU tests run where a CUDA device exists and report SKIPPED with the
// reason elsewhere (the CI machines have CUDA and NCCL installed but no GPU
// or driver), so one binary serves both: built and run in CI, run for real
// on a GPU machine (docs/gpu.md says how).
#ifndef HVD_CORE_GPU_CUDA_TESTING_H_
#define HVD_CORE_GPU_CUDA_TESTING_H_

#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace hvd::gpu {

// "" when a CUDA device is usable; otherwise why not.
inline std::string NoGpuReason() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return std::string("no usable CUDA device: cudaGetDeviceCount says ") +
           cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
  }
  if (count == 0) return "no CUDA device: cudaGetDeviceCount found 0";
  return "";
}

// A device copy of `bytes` (the caller cudaFree's it). cudaMemcpy from
// pageable memory may return before its DMA (on the legacy stream) has
// landed, and hvd's non-blocking stream does not wait for that stream:
// synchronise, or a kernel queued next could read stale bytes.
inline void* Upload(const std::vector<char>& bytes) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(bytes.size(), 1)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, bytes.data(), bytes.size(), cudaMemcpyHostToDevice),
            cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return p;
}

// `bytes` bytes at device address `p`. cudaMemcpy runs on the legacy
// default stream, which does not wait for hvd's non-blocking stream: what it
// reads right after an op completed is what the GPU had finished writing.
inline std::vector<char> Download(const void* p, size_t bytes) {
  std::vector<char> out(bytes);
  EXPECT_EQ(cudaMemcpy(out.data(), p, bytes, cudaMemcpyDeviceToHost),
            cudaSuccess);
  return out;
}

}  // namespace hvd::gpu

// First statement of a test that needs a GPU.
#define HVD_REQUIRE_GPU()                                     \
  do {                                                        \
    const std::string hvd_no_gpu = ::hvd::gpu::NoGpuReason(); \
    if (!hvd_no_gpu.empty()) GTEST_SKIP() << hvd_no_gpu;      \
  } while (0)

#endif  // HVD_CORE_GPU_CUDA_TESTING_H_
