// Built with CUDA and NCCL: the NCCL backend on the CUDA platform. Making it
// touches no GPU (a CPU-only job runs on machines without one); the init log
// says what GPU tensors will get.
#include "core/common/logging.h"
#include "core/gpu/backend_factory.h"
#include "core/gpu/cuda_platform.h"
#include "core/gpu/gpu_ops.h"

namespace hvd::gpu {

runtime::DeviceOpsFactory BackendFactory() {
  return [](const runtime::DeviceEnv& env)
             -> absl::StatusOr<std::unique_ptr<runtime::DeviceOps>> {
    const GpuOptions options = GpuOptionsFrom(env.config);
    auto platform = std::make_unique<CudaPlatform>();
    HVD_LOG(INFO) << "GPU backend: " << platform->Describe() << "; data path: "
                  << PredictPath(env.config, options, *platform);
    return std::make_unique<GpuOps>(env, std::move(platform), options);
  };
}

}  // namespace hvd::gpu
