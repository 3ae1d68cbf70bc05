#include "core/gpu/plan.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd::gpu {
namespace {

using ::testing::ElementsAre;

TEST(PlanReduce, SumOnWideFloatsFoldsEveryFactorIntoOnePremul) {
  const ReducePlan plan =
      PlanReduce(DataType::kFloat32, ReduceOp::kSum, 2.0, 3.0, 4);
  EXPECT_EQ(plan.op, ReduceOp::kSum);
  EXPECT_DOUBLE_EQ(plan.premul, 6.0);
  EXPECT_DOUBLE_EQ(plan.pre, 1.0);
  EXPECT_DOUBLE_EQ(plan.post, 1.0);
}

TEST(PlanReduce, AverageIsSumOverTheSetSize) {
  const ReducePlan plan =
      PlanReduce(DataType::kFloat64, ReduceOp::kAverage, 1.0, 1.0, 4);
  EXPECT_EQ(plan.op, ReduceOp::kSum);
  EXPECT_DOUBLE_EQ(plan.premul, 0.25);
}

TEST(PlanReduce, HalfTypesKeepSeparatePassesComputedInFloat) {
  const ReducePlan plan =
      PlanReduce(DataType::kFloat16, ReduceOp::kAverage, 0.5, 3.0, 2);
  EXPECT_EQ(plan.op, ReduceOp::kSum);
  EXPECT_DOUBLE_EQ(plan.premul, 1.0);
  EXPECT_DOUBLE_EQ(plan.pre, 0.5);
  EXPECT_DOUBLE_EQ(plan.post, 1.5);
}

TEST(PlanReduce, IntegersAndOtherOpsKeepTheirFactorsApart) {
  ReducePlan plan = PlanReduce(DataType::kInt32, ReduceOp::kSum, 2.0, 3.0, 2);
  EXPECT_DOUBLE_EQ(plan.premul, 1.0);
  EXPECT_DOUBLE_EQ(plan.pre, 2.0);
  EXPECT_DOUBLE_EQ(plan.post, 3.0);
  plan = PlanReduce(DataType::kFloat32, ReduceOp::kMax, 2.0, 1.0, 2);
  EXPECT_EQ(plan.op, ReduceOp::kMax);
  EXPECT_DOUBLE_EQ(plan.premul, 1.0);
  EXPECT_DOUBLE_EQ(plan.pre, 2.0);
}

TEST(SplitRows, FirstMembersTakeTheRemainder) {
  EXPECT_EQ(SplitRows(7, 3, 0), 3);
  EXPECT_EQ(SplitRows(7, 3, 1), 2);
  EXPECT_EQ(SplitRows(7, 3, 2), 2);
  EXPECT_EQ(SplitRows(2, 4, 3), 0);
}

TEST(FusionOffsets, PacksTensorsInOrder) {
  EXPECT_THAT(FusionOffsets({3, 0, 5}, 4), ElementsAre(0, 12, 12));
}

TEST(RoundUp, ToAMultiple) {
  EXPECT_EQ(RoundUp(10, 4), 12u);
  EXPECT_EQ(RoundUp(12, 4), 12u);
  EXPECT_EQ(RoundUp(0, 4), 0u);
}

TEST(PlanCopies, SmallCopiesShareLaunchesAndLargeOnesGoAlone) {
  char a[1], b[1];
  std::vector<CopyOp> ops;
  for (int i = 0; i < 5; ++i) ops.push_back({a, b, 100});
  ops.push_back({a, b, 1 << 20});
  ops.push_back({a, b, 0});
  ops.push_back({a, b, 8});
  const CopyPlan plan = PlanCopies(ops, 4096, 4);
  ASSERT_EQ(plan.batches.size(), 2u);
  EXPECT_EQ(plan.batches[0].size(), 4u);
  EXPECT_EQ(plan.batches[1].size(), 2u);  // the fifth small one and the 8 B
  ASSERT_EQ(plan.large.size(), 1u);
  EXPECT_EQ(plan.large[0].bytes, size_t{1} << 20);
}

}  // namespace
}  // namespace hvd::gpu
