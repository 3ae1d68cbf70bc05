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

// dst[i] = own[i] op src[i], as Reduce computes it on a copy of `own`, with
// bit-identical results; `dst` overlaps neither input. One pass over memory
// where a kernel exists (float32 and float64 Sum), else the copy and Reduce.
void ReduceInto(void* dst, const void* own, const void* src, size_t count,
                DataType dtype, ReduceOp op);

// data[i] *= factor, computed in double (float for half types) and, for
// integer types, truncated toward zero.
void Scale(void* data, size_t count, DataType dtype, double factor);

// data[i] /= divisor (divisor > 0): integer types divide exactly,
// truncating toward zero; floating types divide in their own type (half
// types in float, rounded once), so the result is what the framework's own
// division gives. Bool is left as it is.
void Divide(void* data, size_t count, DataType dtype, int divisor);

// Scale by `factor`, then Divide by `divisor`, each only where it is not 1:
// what an allreduce's result gets (CollectiveOptions::postscale, divisor).
void Postscale(void* data, size_t count, DataType dtype, double factor,
               int divisor);

// Reduce, then Postscale, with bit-identical results, in one pass over
// memory where a fused kernel exists (float32 and float64 Sum: the Average
// of gradients), else as the calls one after the other.
void ReduceAndScale(void* dst, const void* src, size_t count, DataType dtype,
                    ReduceOp op, double factor, int divisor);

}  // namespace hvd::collectives

#endif  // HVD_CORE_COLLECTIVES_REDUCE_H_
