// A GPU tensor where it cannot be served fails at enqueue with an error that
// says why, in both builds: without CUDA ("no GPU backend"), and with CUDA on
// a machine without a GPU or driver ("GPU 0 is not usable: ..."). Never a
// crash. SKIPPED where a GPU exists (nccl_ops_test covers that machine).
#include <unistd.h>

#include <string>

#include "core/c_api.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace {

using ::testing::HasSubstr;

TEST(GpuTensorRefusal, FailsAtEnqueueSayingWhy) {
  if (hvd_cuda_built() && access("/dev/nvidiactl", F_OK) == 0) {
    // The fake device pointer below would reach the GPU there.
    GTEST_SKIP() << "an NVIDIA driver is present (/dev/nvidiactl)";
  }
  ASSERT_EQ(hvd_init(), HVD_OK) << hvd_last_error();
  float fake = 0;
  int64_t shape[] = {1};
  DLTensor t{};
  t.data = &fake;  // never read: the enqueue refuses it
  t.device = {kDLCUDA, 0};
  t.ndim = 1;
  t.dtype = {kDLFloat, 32, 1};
  t.shape = shape;
  hvd_options o = hvd_default_options();
  const hvd_handle h = hvd_allreduce_async(&t, nullptr, &o);
  ASSERT_EQ(hvd_wait(h, 30.0), HVD_ERROR);
  const std::string error = hvd_handle_error(h);
  hvd_release(h);
  hvd_shutdown();
  if (!hvd_cuda_built()) {
    EXPECT_THAT(error, HasSubstr("this hvd build has no GPU backend"));
    return;
  }
  EXPECT_THAT(error, HasSubstr("GPU 0 is not usable"));
}

}  // namespace
