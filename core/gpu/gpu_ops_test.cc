// The GPU backend's allreduce on the host platform (gpu_ops_test_job.h):
// the path choice per set, the staged path, the NCCL path's fusion, factors,
// fallback and hierarchical allreduce (over staged communicators standing in
// for NCCL), and join. NCCL itself and CUDA run in the GPU tests
// (nccl_ops_test.cc).
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/gpu/gpu_ops_test_job.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd::gpu::testjob {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(GpuOps, RanksSharingAGpuTakeTheStagedPathForEveryReduceOp) {
  Job job(Shared(3));
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin,
                      ReduceOp::kMax, ReduceOp::kProduct}) {
    const std::vector<int64_t> counts = {5, 1, 33};
    auto got = RunAllreduce(job, counts, op, 1.0, 1.0,
                            absl::StrCat("op", static_cast<int>(op), "."));
    ExpectReduced(got, counts, 3, op);
  }
  EXPECT_EQ(job.ops(0).PathOf(0), "staged");
}

TEST(GpuOps, OneGpuUnderTwoHostNamesTakesTheStagedPath) {
  // An elastic job's "localhost" and "127.0.0.2" on one GPU machine, or two
  // containers given one GPU: the same identity under two host names.
  Options options;
  options.ranks = {{"localhost", "GPU-0"}, {"127.0.0.2", "GPU-0"}};
  Job job(options);
  const std::vector<int64_t> counts = {5, 33};
  auto got = RunAllreduce(job, counts, ReduceOp::kSum, 1.0, 1.0, "two.");
  ExpectReduced(got, counts, 2, ReduceOp::kSum);
  EXPECT_EQ(job.ops(1).PathOf(0), "staged");
}

TEST(GpuOps, OwnGpusTakeNcclWithOneBatchedCopyEachWayForAFusedResponse) {
  Job job(Distinct(2));
  const std::vector<int64_t> counts = {4, 7, 1, 9};
  auto got = RunAllreduce(job, counts, ReduceOp::kSum);
  ExpectReduced(got, counts, 2, ReduceOp::kSum);
  EXPECT_EQ(job.ops(1).PathOf(0), "nccl");
  HostDevice* device = job.device(0);
  EXPECT_EQ(device->counts().copy_batches.load(), 2);  // in and out
  EXPECT_EQ(device->counts().waits.load(), 4);         // each producer event
}

TEST(GpuOps, TheDeviceThreadSleepsWithoutTimerSlack) {
  // Its naps (NCCL's launch, the staged path) end when asked, not 50 us on.
  Job job(Distinct(2));
  const std::vector<int64_t> counts = {3};
  ExpectReduced(RunAllreduce(job, counts, ReduceOp::kSum), counts, 2,
                ReduceOp::kSum);
  EXPECT_EQ(job.device(0)->counts().recorder_timer_slack_ns.load(), 1);
}

TEST(GpuOps, FactorsFoldIntoOnePassForFloatSumAndAverage) {
  Job job(Distinct(2));
  const std::vector<int64_t> counts = {6};
  auto got = RunAllreduce(job, counts, ReduceOp::kAverage, 0.5, 3.0);
  ExpectReduced(got, counts, 2, ReduceOp::kAverage, 0.5, 3.0);
  // Staged size-2 premul runs on the host: no device scale pass at all.
  EXPECT_EQ(job.device(0)->counts().scales.load(), 0);
}

TEST(GpuOps, FactorsOnMaxAreScalePassesBeforeAndAfter) {
  Job job(Distinct(2));
  const std::vector<int64_t> counts = {3, 4};
  auto got = RunAllreduce(job, counts, ReduceOp::kMax, 2.0, 0.25);
  ExpectReduced(got, counts, 2, ReduceOp::kMax, 2.0, 0.25);
  EXPECT_EQ(job.device(0)->counts().scales.load(), 2);
}

TEST(GpuOps, SixteenBitIntegersFallBackToTheStagedPathUnderNccl) {
  Job job(Distinct(2));
  std::vector<std::vector<int16_t>> data = {{1, -2, 300}, {4, 5, 6}};
  for (int r = 0; r < 2; ++r) {
    std::vector<std::unique_ptr<TensorEntry>> entries;
    entries.push_back(job.Entry(r, "i16", DataType::kInt16, {3}, data[r].data(),
                                data[r].data()));
    ASSERT_TRUE(job.Execute(r,
                            AllreduceResponse({"i16"}, {3}, DataType::kInt16,
                                              ReduceOp::kSum),
                            std::move(entries))
                    .ok());
  }
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(job.Wait(r, "i16").status.ok());
    EXPECT_THAT(data[r], ElementsAre(5, 3, 306));
  }
  EXPECT_EQ(job.ops(0).PathOf(0), "nccl");
}

TEST(GpuOps, OutOfPlaceAllreduceLeavesTheInputAlone) {
  Job job(Distinct(2));
  std::vector<std::vector<int32_t>> in = {{1, 2}, {10, 20}}, out(2, {0, 0});
  for (int r = 0; r < 2; ++r) {
    std::vector<std::unique_ptr<TensorEntry>> entries;
    entries.push_back(job.Entry(r, "oop", DataType::kInt32, {2}, in[r].data(),
                                out[r].data()));
    ASSERT_TRUE(job.Execute(r,
                            AllreduceResponse({"oop"}, {2}, DataType::kInt32,
                                              ReduceOp::kSum, 2.0, 3.0),
                            std::move(entries))
                    .ok());
  }
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(job.Wait(r, "oop").status.ok());
    EXPECT_THAT(out[r], ElementsAre(66, 132));  // (1+10)*2*3, (2+20)*2*3
  }
  EXPECT_THAT(in[0], ElementsAre(1, 2));
}

TEST(GpuOps, HierarchicalAllreduceAcrossTwoHostsOfTwo) {
  Options options;
  options.ranks = {{"a", "g0"}, {"a", "g1"}, {"b", "g2"}, {"b", "g3"}};
  options.gpu.hierarchical = true;
  Job job(options);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMax}) {
    // 11 elements: not a multiple of the 2 members per host.
    const std::vector<int64_t> counts = {4, 7};
    auto got = RunAllreduce(job, counts, op, 1.0, 1.0,
                            absl::StrCat("h", static_cast<int>(op), "."));
    ExpectReduced(got, counts, 4, op);
  }
  EXPECT_EQ(job.ops(3).PathOf(0), "nccl+hierarchical");
}

TEST(GpuOps, AJoinedRankContributesZeros) {
  Job job(Distinct(2));
  std::vector<float> mine = {1, 2, 3};
  std::vector<std::unique_ptr<TensorEntry>> entries;
  entries.push_back(
      job.Entry(0, "j", DataType::kFloat32, {3}, mine.data(), mine.data()));
  const Response response =
      AllreduceResponse({"j"}, {3}, DataType::kFloat32, ReduceOp::kSum);
  ASSERT_TRUE(job.Execute(0, response, std::move(entries)).ok());
  std::vector<std::unique_ptr<TensorEntry>> none(1);  // rank 1 joined
  ASSERT_TRUE(job.Execute(1, response, std::move(none)).ok());
  ASSERT_TRUE(job.Wait(0, "j").status.ok());
  EXPECT_THAT(mine, ElementsAre(1, 2, 3));
}

TEST(PredictPath, SaysStagedMayApplyWhenRanksOutnumberGpus) {
  HostPlatformOptions host;
  host.device_count = 2;
  HostPlatform platform(host);
  runtime::Config config;
  config.local_size = 4;
  EXPECT_THAT(PredictPath(config, {}, platform),
              HasSubstr("staged if ranks share GPUs (4 ranks on this host, 2 "
                        "GPU(s) visible here)"));
  config.local_size = 2;
  EXPECT_THAT(PredictPath(config, {}, platform), HasSubstr("NCCL"));
  GpuOptions staged;
  staged.policy = PathPolicy::kStaged;
  EXPECT_THAT(PredictPath(config, staged, platform),
              HasSubstr("HVD_GPU_DATA_PATH=staged"));
}

}  // namespace
}  // namespace hvd::gpu::testjob
