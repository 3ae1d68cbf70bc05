// Arithmetic of the GPU data ops, with no device in it: how a reduction's op
// and scale factors map onto a communicator and scale passes, the fusion
// buffer's layout, and how a batch of copies splits between one kernel and
// the copy engine.
#ifndef HVD_CORE_GPU_PLAN_H_
#define HVD_CORE_GPU_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/common/types.h"
#include "core/gpu/device.h"

namespace hvd::gpu {

// A reduction as the communicator runs it: `op` is Sum, Min, Max or Product;
// `premul` (Sum only) multiplies every input before the reduction; `pre` and
// `post` are separate scale passes before and after.
struct ReducePlan {
  ReduceOp op = ReduceOp::kSum;
  double premul = 1.0;
  double pre = 1.0;
  double post = 1.0;
};

// Average is Sum with 1/n in the post factor. For Sum on float32 and float64
// every factor folds into one premul (NCCL's PreMulSum: no extra pass over
// the data); other types and ops keep the passes (rounded as the CPU path
// rounds them: float for half types, truncation for integers).
ReducePlan PlanReduce(DataType dtype, ReduceOp op, double prescale,
                      double postscale, int n);

// Rows of member `index` when `rows` are split over `n` members, the first
// members taking one more when it does not divide evenly (reducescatter).
int64_t SplitRows(int64_t rows, int n, int index);

// Byte offset of each tensor in a fusion buffer: packed in order, as one
// array of their common dtype.
std::vector<size_t> FusionOffsets(const std::vector<int64_t>& counts,
                                  size_t element_bytes);

// Rounds `count` up to a multiple of `n` (hierarchical allreduce splits the
// fusion buffer evenly among a host's members).
size_t RoundUp(size_t count, size_t n);

// Copies of at most `small_bytes` go `per_launch` at a time into batches for
// one kernel launch each; larger ones go to the copy engine one by one.
// Zero-byte copies are dropped.
struct CopyPlan {
  std::vector<std::vector<CopyOp>> batches;
  std::vector<CopyOp> large;
};
CopyPlan PlanCopies(const std::vector<CopyOp>& ops, size_t small_bytes,
                    size_t per_launch);

}  // namespace hvd::gpu

#endif  // HVD_CORE_GPU_PLAN_H_
