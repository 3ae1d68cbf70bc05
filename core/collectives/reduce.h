// Element-wise kernels shared by the CPU collectives and the runtime.
#ifndef HVD_CORE_COLLECTIVES_REDUCE_H_
#define HVD_CORE_COLLECTIVES_REDUCE_H_

#include <cstddef>

#include "core/common/types.h"

namespace hvd::collectives {

// dst[i] = dst[i] op src[i]. `op` is Sum, Min, Max or Product. Half types are
// computed in float and rounded once per call; bool treats Sum/Max as OR and
// Product/Min as AND; integer overflow wraps.
void Reduce(void* dst, const void* src, size_t count, DataType dtype,
            ReduceOp op);

// data[i] *= factor, computed in double (float for half types) and, for
// integer types, truncated toward zero.
void Scale(void* data, size_t count, DataType dtype, double factor);

// Reduce, then Scale by `factor`, with bit-identical results, in one pass
// over memory where a fused kernel exists (float32 and float64 Sum: the
// Average of gradients), else as the two calls.
void ReduceAndScale(void* dst, const void* src, size_t count, DataType dtype,
                    ReduceOp op, double factor);

}  // namespace hvd::collectives

#endif  // HVD_CORE_COLLECTIVES_REDUCE_H_
