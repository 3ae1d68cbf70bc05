// Built without CUDA: no GPU backend.
#include "core/gpu/backend_factory.h"

namespace hvd::gpu {

runtime::DeviceOpsFactory BackendFactory() { return nullptr; }

}  // namespace hvd::gpu
