// The GPU backend's failures and lifecycle on the host platform
// (gpu_ops_test_job.h): a wrong device, a forced path that cannot work,
// aborts, a lost peer, shutdown with queued work and removed sets.
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

TEST(GpuOps, ASetOfOneNeedsNoPeers) {
  Options options = Distinct(1);
  Job job(options);
  std::vector<float> v = {1, 2};
  std::vector<std::unique_ptr<TensorEntry>> entries;
  entries.push_back(
      job.Entry(0, "one", DataType::kFloat32, {2}, v.data(), v.data()));
  ASSERT_TRUE(job.Execute(0,
                          AllreduceResponse({"one"}, {2}, DataType::kFloat32,
                                            ReduceOp::kAverage, 4.0),
                          std::move(entries))
                  .ok());
  ASSERT_TRUE(job.Wait(0, "one").status.ok());
  EXPECT_THAT(v, ElementsAre(4, 8));
}

TEST(GpuOps, ATensorOnAnotherGpuStopsTheBackendNamingIt) {
  Job job(Distinct(1));
  std::vector<float> a = {1}, b = {2};
  std::vector<std::unique_ptr<TensorEntry>> first;
  first.push_back(
      job.Entry(0, "on0", DataType::kFloat32, {1}, a.data(), a.data(), 0));
  ASSERT_TRUE(job.Execute(0,
                          AllreduceResponse({"on0"}, {1}, DataType::kFloat32,
                                            ReduceOp::kSum),
                          std::move(first))
                  .ok());
  ASSERT_TRUE(job.Wait(0, "on0").status.ok());
  std::vector<std::unique_ptr<TensorEntry>> second;
  second.push_back(
      job.Entry(0, "on1", DataType::kFloat32, {1}, b.data(), b.data(), 1));
  ASSERT_TRUE(job.Execute(0,
                          AllreduceResponse({"on1"}, {1}, DataType::kFloat32,
                                            ReduceOp::kSum),
                          std::move(second))
                  .ok());
  const Outcome o = job.Wait(0, "on1");
  EXPECT_EQ(o.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(o.status.message(),
              HasSubstr("tensor 'on1' is on GPU 1 but this process runs its "
                        "GPU ops on GPU 0"));
  EXPECT_THAT(o.status.message(),
              HasSubstr("rank 0: allreduce of 'on1' on process set 0: "));
  // The backend is stopped: the next op is refused with the same error.
  std::vector<std::unique_ptr<TensorEntry>> third;
  third.push_back(
      job.Entry(0, "later", DataType::kFloat32, {1}, a.data(), a.data()));
  absl::Status s = job.Execute(
      0, AllreduceResponse({"later"}, {1}, DataType::kFloat32, ReduceOp::kSum),
      std::move(third));
  EXPECT_THAT(s.message(), HasSubstr("tensor 'on1' is on GPU 1"));
  EXPECT_THAT(job.Wait(0, "later").status.message(),
              HasSubstr("tensor 'on1' is on GPU 1"));
}

TEST(GpuOps, ForcedNcclOnASharedGpuFailsTheOpSayingWhy) {
  Options options = Shared(2);
  options.gpu.policy = PathPolicy::kNccl;
  Job job(options);
  std::vector<std::vector<float>> v(2, {1});
  for (int r = 0; r < 2; ++r) {
    std::vector<std::unique_ptr<TensorEntry>> entries;
    entries.push_back(
        job.Entry(r, "f", DataType::kFloat32, {1}, v[r].data(), v[r].data()));
    (void)job.Execute(
        r, AllreduceResponse({"f"}, {1}, DataType::kFloat32, ReduceOp::kSum),
        std::move(entries));
  }
  for (int r = 0; r < 2; ++r) {
    const Outcome o = job.Wait(r, "f");
    EXPECT_EQ(o.status.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(o.status.message(),
                HasSubstr("HVD_GPU_DATA_PATH=nccl but members 0 and 1 share "
                          "GPU GPU-shared on host host"));
  }
}

TEST(GpuOps, AbortFailsLaterOpsWithTheReason) {
  Job job(Distinct(1));
  job.ops(0).Abort(absl::UnavailableError("negotiation with rank 0 failed"));
  std::vector<float> v = {1};
  std::vector<std::unique_ptr<TensorEntry>> entries;
  entries.push_back(
      job.Entry(0, "x", DataType::kFloat32, {1}, v.data(), v.data()));
  absl::Status s = job.Execute(
      0, AllreduceResponse({"x"}, {1}, DataType::kFloat32, ReduceOp::kSum),
      std::move(entries));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(job.Wait(0, "x").status.message(),
              HasSubstr("negotiation with rank 0 failed"));
}

// A CPU-only job of a CUDA build has this backend too: its peer-lost abort
// is the runtime's to report, not a GPU warning on every rank.
TEST(GpuOps, AnAbortBeforeAnyGpuTensorLogsNoWarning) {
  Job job(Distinct(1));
  ::testing::internal::CaptureStderr();
  job.ops(0).Abort(absl::UnavailableError("rank 1: peer lost"));
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(log, ::testing::Not(HasSubstr("GPU backend stops"))) << log;
  std::vector<float> v = {1};
  std::vector<std::unique_ptr<TensorEntry>> entries;
  entries.push_back(
      job.Entry(0, "x", DataType::kFloat32, {1}, v.data(), v.data()));
  EXPECT_EQ(job.Execute(0,
                        AllreduceResponse({"x"}, {1}, DataType::kFloat32,
                                          ReduceOp::kSum),
                        std::move(entries))
                .code(),
            absl::StatusCode::kUnavailable);
}

TEST(GpuOps, AnAbortAfterAGpuOpWarnsWithTheReason) {
  Job job(Distinct(1));
  RunAllreduce(job, {2}, ReduceOp::kSum);
  ::testing::internal::CaptureStderr();
  job.ops(0).Abort(absl::UnavailableError("rank 1: peer lost"));
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(log, HasSubstr("WARNING] GPU backend stops: rank 1: peer lost"));
}

TEST(GpuOps, APeerLostMidOpFailsTheSurvivorInsteadOfHanging) {
  Options options = Shared(2);
  options.timeout = absl::Seconds(10);
  Job job(options);
  RunAllreduce(job, {2}, ReduceOp::kSum);  // sets up the staged connections
  std::vector<float> v = {1};
  std::vector<std::unique_ptr<TensorEntry>> entries;
  entries.push_back(
      job.Entry(0, "lost", DataType::kFloat32, {1}, v.data(), v.data()));
  ASSERT_TRUE(job.Execute(0,
                          AllreduceResponse({"lost"}, {1}, DataType::kFloat32,
                                            ReduceOp::kSum),
                          std::move(entries))
                  .ok());
  // Rank 1 never joins the op: its runtime lost a peer and aborts.
  job.ops(1).Abort(absl::UnavailableError("rank 1: peer lost"));
  const absl::Time start = absl::Now();
  const Outcome o = job.Wait(0, "lost", absl::Seconds(30));
  EXPECT_NE(o.status.code(), absl::StatusCode::kDeadlineExceeded) << o.status;
  EXPECT_THAT(o.status.message(),
              HasSubstr("rank 0 (member 0 of 2 of process set 0): staged "
                        "allreduce"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST(GpuOps, ShutdownLetsQueuedOpsFinish) {
  Job job(Distinct(1));
  std::vector<float> v = {3};
  std::vector<std::unique_ptr<TensorEntry>> entries;
  entries.push_back(
      job.Entry(0, "s", DataType::kFloat32, {1}, v.data(), v.data()));
  ASSERT_TRUE(job.Execute(0,
                          AllreduceResponse({"s"}, {1}, DataType::kFloat32,
                                            ReduceOp::kSum, 2.0),
                          std::move(entries))
                  .ok());
  job.ops(0).Shutdown();
  EXPECT_TRUE(job.Wait(0, "s").status.ok());
  EXPECT_THAT(v, ElementsAre(6));
  std::vector<std::unique_ptr<TensorEntry>> late;
  late.push_back(
      job.Entry(0, "late", DataType::kFloat32, {1}, v.data(), v.data()));
  EXPECT_TRUE(job.Execute(0,
                          AllreduceResponse({"late"}, {1}, DataType::kFloat32,
                                            ReduceOp::kSum),
                          std::move(late))
                  .ok());
  EXPECT_EQ(job.Wait(0, "late").status.code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(GpuOps, ARemovedSetLosesItsCommunicators) {
  Job job(Distinct(2));
  RunAllreduce(job, {1}, ReduceOp::kSum);
  EXPECT_EQ(job.ops(0).PathOf(0), "nccl");
  job.ops(0).RemoveProcessSet(0);
  job.ops(1).RemoveProcessSet(0);
  job.ops(0).Shutdown();  // runs the queue
  EXPECT_EQ(job.ops(0).PathOf(0), "");
}

}  // namespace
}  // namespace hvd::gpu::testjob
