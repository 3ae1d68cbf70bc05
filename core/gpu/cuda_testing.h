// GPU tests run where a CUDA device exists and report SKIPPED with the
// reason elsewhere (the CI machines have CUDA and NCCL installed but no GPU
// or driver), so one binary serves both: built and run in CI, run for real
// on a GPU machine (docs/gpu.md says how).
#ifndef HVD_CORE_GPU_CUDA_TESTING_H_
#define HVD_CORE_GPU_CUDA_TESTING_H_

#include <cuda_runtime_api.h>

#include <string>

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

}  // namespace hvd::gpu

// First statement of a test that needs a GPU.
#define HVD_REQUIRE_GPU()                                     \
  do {                                                        \
    const std::string hvd_no_gpu = ::hvd::gpu::NoGpuReason(); \
    if (!hvd_no_gpu.empty()) GTEST_SKIP() << hvd_no_gpu;      \
  } while (0)

#endif  // HVD_CORE_GPU_CUDA_TESTING_H_
