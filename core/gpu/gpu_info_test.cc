#include "core/gpu/gpu_info.h"

#include <filesystem>
#include <string>

#include "gtest/gtest.h"

namespace hvd::gpu {
namespace {

// HVD_CUDA_HOME: where cuda_configure looked (BUILD passes it).
TEST(GpuInfo, BuiltWithCudaExactlyWhereTheToolkitExists) {
  const bool toolkit =
      std::filesystem::exists(std::string(HVD_CUDA_HOME) + "/include/nccl.h");
  EXPECT_EQ(CudaBuilt(), toolkit);
  EXPECT_EQ(NcclBuilt(), toolkit);
  if (toolkit) {
    EXPECT_GE(NcclVersionCode(), 20000);  // NCCL 2.x: major*10000 + ...
  } else {
    EXPECT_EQ(NcclVersionCode(), 0);
  }
  if (toolkit) {
    // Calls into the real libnccl and libcudart (no GPU needed for these).
    EXPECT_NE(Describe().find("NCCL 2."), std::string::npos) << Describe();
  } else {
    EXPECT_EQ(Describe(), "built without CUDA");
  }
}

}  // namespace
}  // namespace hvd::gpu
