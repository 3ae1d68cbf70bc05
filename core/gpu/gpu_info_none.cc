#include "core/gpu/gpu_info.h"

namespace hvd::gpu {

bool CudaBuilt() { return false; }
bool NcclBuilt() { return false; }
int NcclVersionCode() { return 0; }
std::string Describe() { return "built without CUDA"; }

}  // namespace hvd::gpu
