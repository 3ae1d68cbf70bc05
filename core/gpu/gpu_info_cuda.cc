#include <cuda_runtime_api.h>
#include <nccl.h>

#include "absl/strings/str_cat.h"
#include "core/gpu/gpu_info.h"

namespace hvd::gpu {

bool CudaBuilt() { return true; }
bool NcclBuilt() { return true; }
int NcclVersionCode() { return NCCL_VERSION_CODE; }

std::string Describe() {
  int nccl = 0;
  ncclGetVersion(&nccl);
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) {
    // Not left as this thread's last error (a framework thread: PyTorch
    // checks cudaGetLastError after its own kernel launches).
    cudaGetLastError();
    devices = 0;
  }
  return absl::StrCat("NCCL ", nccl / 10000, ".", (nccl % 10000) / 100, ".",
                      nccl % 100, ", CUDA runtime ", runtime / 1000, ".",
                      (runtime % 1000) / 10, ", ", devices, " device(s)");
}

}  // namespace hvd::gpu
