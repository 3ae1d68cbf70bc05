// The GPU backend the C ABI hands to the runtime at init: the NCCL backend
// (gpu_ops.h on cuda_platform.h) where this build has CUDA, none otherwise.
#ifndef HVD_CORE_GPU_BACKEND_FACTORY_H_
#define HVD_CORE_GPU_BACKEND_FACTORY_H_

#include "core/runtime/device_ops.h"

namespace hvd::gpu {

// An empty function when built without CUDA: the runtime then refuses GPU
// tensors with an error that says so.
runtime::DeviceOpsFactory BackendFactory();

}  // namespace hvd::gpu

#endif  // HVD_CORE_GPU_BACKEND_FACTORY_H_
