// The GPU backend's data-movement collectives on the host platform
// (gpu_ops_test_job.h): allgather, broadcast, alltoall and reducescatter,
// with ranks sharing one GPU (staged) and with a GPU each (NCCL path).
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

class DataOpsTest : public ::testing::TestWithParam<bool> {
 protected:
  Options Make(int n) { return GetParam() ? Distinct(n) : Shared(n); }
};

TEST_P(DataOpsTest, AllgatherOfDifferingFirstDimensionsOnTheDevice) {
  Job job(Make(3));
  // Rank r has r + 1 rows of 2 elements, valued 10 r + i.
  std::vector<std::vector<int64_t>> data(3);
  for (int r = 0; r < 3; ++r) {
    for (int i = 0; i < 2 * (r + 1); ++i) data[r].push_back(10 * r + i);
    std::vector<std::unique_ptr<TensorEntry>> entries;
    entries.push_back(job.Entry(r, "ag", DataType::kInt64, {r + 1, 2},
                                data[r].data(), data[r].data()));
    ASSERT_TRUE(job.Execute(r,
                            DataResponse(runtime::ALLGATHER, "ag",
                                         DataType::kInt64, {1, 2, 3}, 2),
                            std::move(entries))
                    .ok());
  }
  for (int r = 0; r < 3; ++r) {
    Outcome o = job.Wait(r, "ag");
    ASSERT_TRUE(o.status.ok()) << o.status;
    ASSERT_TRUE(o.result.output);
    EXPECT_EQ(o.result.output->device(), DeviceType::kGpu);
    EXPECT_THAT(o.result.shape, ElementsAre(6, 2));
    const int64_t* got = static_cast<int64_t*>(o.result.output->data());
    EXPECT_THAT(std::vector<int64_t>(got, got + 12),
                ElementsAre(0, 1, 10, 11, 12, 13, 20, 21, 22, 23, 24, 25));
  }
}

TEST_P(DataOpsTest, BroadcastFromMemberOne) {
  Job job(Make(3));
  std::vector<std::vector<double>> data(3);
  for (int r = 0; r < 3; ++r) {
    data[r] = {r * 1.5, r * 2.5};
    std::vector<std::unique_ptr<TensorEntry>> entries;
    entries.push_back(job.Entry(r, "bc", DataType::kFloat64, {2},
                                data[r].data(), data[r].data()));
    Response response =
        DataResponse(runtime::BROADCAST, "bc", DataType::kFloat64, {2}, 1);
    response.set_root(1);
    ASSERT_TRUE(job.Execute(r, response, std::move(entries)).ok());
  }
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(job.Wait(r, "bc").status.ok());
    EXPECT_THAT(data[r], ElementsAre(1.5, 2.5));
  }
}

TEST_P(DataOpsTest, AlltoallWithUnevenSplits) {
  Job job(Make(2));
  // Rank 0 sends 1 row to itself and 2 to rank 1; rank 1 sends 3 and 0.
  const std::vector<int64_t> matrix = {1, 2, 3, 0};
  std::vector<std::vector<int32_t>> data = {{0, 1, 2}, {10, 11, 12}};
  for (int r = 0; r < 2; ++r) {
    std::vector<std::unique_ptr<TensorEntry>> entries;
    entries.push_back(job.Entry(r, "a2a", DataType::kInt32, {3}, data[r].data(),
                                data[r].data()));
    ASSERT_TRUE(job.Execute(r,
                            DataResponse(runtime::ALLTOALL, "a2a",
                                         DataType::kInt32, matrix, 1),
                            std::move(entries))
                    .ok());
  }
  Outcome zero = job.Wait(0, "a2a"), one = job.Wait(1, "a2a");
  ASSERT_TRUE(zero.status.ok() && one.status.ok()) << zero.status << one.status;
  const int32_t* a = static_cast<int32_t*>(zero.result.output->data());
  EXPECT_THAT(std::vector<int32_t>(a, a + 4), ElementsAre(0, 10, 11, 12));
  EXPECT_THAT(zero.result.received_splits, ElementsAre(1, 3));
  const int32_t* b = static_cast<int32_t*>(one.result.output->data());
  EXPECT_THAT(std::vector<int32_t>(b, b + 2), ElementsAre(1, 2));
  EXPECT_THAT(one.result.received_splits, ElementsAre(2, 0));
}

TEST_P(DataOpsTest, ReducescatterOfUnevenRowsWithAverageAndPostscale) {
  Job job(Make(3));
  // 7 rows of 1 element: members get 3, 2, 2 rows.
  std::vector<std::vector<float>> data(3);
  for (int r = 0; r < 3; ++r) {
    for (int i = 0; i < 7; ++i) data[r].push_back(r + i);
    std::vector<std::unique_ptr<TensorEntry>> entries;
    entries.push_back(job.Entry(r, "rs", DataType::kFloat32, {7},
                                data[r].data(), data[r].data()));
    Response response =
        DataResponse(runtime::REDUCESCATTER, "rs", DataType::kFloat32, {7}, 1);
    response.set_op(static_cast<int32_t>(ReduceOp::kAverage));
    response.set_postscale(2.0);
    ASSERT_TRUE(job.Execute(r, response, std::move(entries)).ok());
  }
  const int first[] = {0, 3, 5};
  const int rows[] = {3, 2, 2};
  for (int r = 0; r < 3; ++r) {
    Outcome o = job.Wait(r, "rs");
    ASSERT_TRUE(o.status.ok()) << o.status;
    EXPECT_THAT(o.result.shape, ElementsAre(rows[r]));
    const float* got = static_cast<float*>(o.result.output->data());
    for (int i = 0; i < rows[r]; ++i) {
      // mean over ranks of (r + row) is 1 + row; times 2.
      EXPECT_FLOAT_EQ(got[i], 2.0f * (1 + first[r] + i));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, DataOpsTest, ::testing::Bool(),
                         [](const auto& info) {
                           return info.param ? "Nccl" : "Staged";
                         });

}  // namespace
}  // namespace hvd::gpu::testjob
