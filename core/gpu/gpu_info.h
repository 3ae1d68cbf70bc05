// What the GPU side of this build holds. With CUDA (the cuda_configure
// repository found /usr/local/cuda) gpu_info_cuda.cc is linked and asks the
// real CUDA runtime and NCCL; without, gpu_info_none.cc answers no.
#ifndef HVD_CORE_GPU_GPU_INFO_H_
#define HVD_CORE_GPU_GPU_INFO_H_

#include <string>

namespace hvd::gpu {

bool CudaBuilt();
bool NcclBuilt();
// NCCL_VERSION_CODE of the NCCL this build was compiled against (e.g.
// 21803 for 2.18.3), 0 without NCCL: what Horovod's nccl_built() returns.
int NcclVersionCode();
// "NCCL 2.28.3, CUDA runtime 13.0, 0 devices" or why not.
std::string Describe();

}  // namespace hvd::gpu

#endif  // HVD_CORE_GPU_GPU_INFO_H_
