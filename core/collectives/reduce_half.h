// Reduce, Scale and Divide kernels for the 16-bit float types, computed in float and
// rounded to nearest even once per element. Internal to reduce.cc.
#ifndef HVD_CORE_COLLECTIVES_REDUCE_HALF_H_
#define HVD_CORE_COLLECTIVES_REDUCE_HALF_H_

#include <cstddef>

#include "core/common/types.h"

namespace hvd::collectives::internal {

void ReduceFloat16(void* dst, const void* src, size_t count, ReduceOp op);
void ReduceBFloat16(void* dst, const void* src, size_t count, ReduceOp op);
void ScaleFloat16(void* data, size_t count, float factor);
void ScaleBFloat16(void* data, size_t count, float factor);
void DivideFloat16(void* data, size_t count, float divisor);
void DivideBFloat16(void* data, size_t count, float divisor);

}  // namespace hvd::collectives::internal

#endif  // HVD_CORE_COLLECTIVES_REDUCE_HALF_H_
