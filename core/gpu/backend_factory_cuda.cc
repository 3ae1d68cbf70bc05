// Built with CUDA. (The NCCL backend is being written: none yet.)
#include "core/gpu/backend_factory.h"

namespace hvd::gpu {

runtime::DeviceOpsFactory BackendFactory() { return nullptr; }

}  // namespace hvd::gpu
