// GPU tensors through the C ABI in real processes: gpu_driver started N
// times against a rendezvous server hosted by the test, every rank on GPU 0.
// Where no GPU exists only the refusal of GPU tensors runs; the rest is
// SKIPPED with the reason.
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/gpu/cuda_testing.h"
#include "gtest/gtest.h"
#include "core/testing/job_runner.h"

namespace hvd::gpu {
namespace {

using ::hvd::testing::Describe;
using ::hvd::testing::JobSpec;
using ::hvd::testing::WorkerResult;
using Worker = WorkerResult;

// Runs `size` gpu_drivers with `scenario` on the runtime tests' job runner.
std::vector<Worker> RunJob(int size, const std::string& scenario,
                           std::map<std::string, std::string> extra = {},
                           absl::Duration timeout = absl::Seconds(180)) {
  JobSpec spec;
  spec.driver = "core/gpu/gpu_driver";
  spec.size = size;
  spec.args = {scenario};
  spec.env = std::move(extra);
  spec.env["HVD_LOG_LEVEL"] = "info";
  spec.timeout = timeout;
  return ::hvd::testing::RunJob(spec);
}

void ExpectPass(const std::vector<Worker>& workers, size_t first = 0,
                size_t last = SIZE_MAX) {
  for (size_t r = first; r < workers.size() && r <= last; ++r) {
    EXPECT_EQ(workers[r].exit_code, 0) << Describe(workers);
    EXPECT_TRUE(
        absl::StrContains(workers[r].out, absl::StrCat("rank ", r, ": PASS")))
        << Describe(workers);
  }
}

TEST(GpuJob, WithoutAGpuAGpuTensorFailsAtEnqueueSayingWhy) {
  if (NoGpuReason().empty()) GTEST_SKIP() << "this machine has a GPU";
  ExpectPass(RunJob(2, "nogpu"));
}

class SharedGpuJob : public ::testing::TestWithParam<int> {};

TEST_P(SharedGpuJob, EveryOpTakesTheStagedPathAndIsCorrect) {
  HVD_REQUIRE_GPU();
  auto workers = RunJob(GetParam(), "collectives");
  ExpectPass(workers);
  for (const Worker& w : workers) {
    EXPECT_TRUE(absl::StrContains(w.err, "GPU data path staged on GPU 0"))
        << w.err;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, SharedGpuJob, ::testing::Values(2, 4));

TEST(GpuJob, NcclAtSizeOneThroughTheCApi) {
  HVD_REQUIRE_GPU();
  auto workers = RunJob(1, "collectives");
  ExpectPass(workers);
  EXPECT_TRUE(absl::StrContains(workers[0].err, "GPU data path nccl on GPU 0"))
      << workers[0].err;
}

TEST(GpuJob, ASurvivorOfADeadPeerGetsAnErrorNotAHang) {
  HVD_REQUIRE_GPU();
  auto workers = RunJob(2, "die", {{"HVD_TIMEOUT_SECONDS", "20"}});
  ExpectPass(workers, 0, 0);
  EXPECT_EQ(workers[1].exit_code, 3) << Describe(workers);
}

}  // namespace
}  // namespace hvd::gpu
