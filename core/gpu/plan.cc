#include "core/gpu/plan.h"

namespace hvd::gpu {

ReducePlan PlanReduce(DataType dtype, ReduceOp op, double prescale,
                      double postscale, int n) {
  ReducePlan plan;
  plan.op = op;
  plan.pre = prescale;
  plan.post = postscale;
  if (op == ReduceOp::kAverage) {
    plan.op = ReduceOp::kSum;
    plan.post /= n;
  }
  const bool wide_float =
      dtype == DataType::kFloat32 || dtype == DataType::kFloat64;
  if (plan.op == ReduceOp::kSum && wide_float) {
    plan.premul = plan.pre * plan.post;
    plan.pre = 1.0;
    plan.post = 1.0;
  }
  return plan;
}

int64_t SplitRows(int64_t rows, int n, int index) {
  return rows / n + (index < rows % n ? 1 : 0);
}

std::vector<size_t> FusionOffsets(const std::vector<int64_t>& counts,
                                  size_t element_bytes) {
  std::vector<size_t> offsets;
  size_t at = 0;
  for (int64_t count : counts) {
    offsets.push_back(at);
    at += static_cast<size_t>(count) * element_bytes;
  }
  return offsets;
}

size_t RoundUp(size_t count, size_t n) { return (count + n - 1) / n * n; }

CopyPlan PlanCopies(const std::vector<CopyOp>& ops, size_t small_bytes,
                    size_t per_launch) {
  CopyPlan plan;
  for (const CopyOp& op : ops) {
    if (op.bytes == 0) continue;
    if (op.bytes > small_bytes) {
      plan.large.push_back(op);
      continue;
    }
    if (plan.batches.empty() || plan.batches.back().size() >= per_launch) {
      plan.batches.emplace_back();
    }
    plan.batches.back().push_back(op);
  }
  return plan;
}

}  // namespace hvd::gpu
