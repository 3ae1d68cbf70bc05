// A caller waiting for its GPU op (Runtime::Drive) completes the op itself
// once it has finished, instead of sleeping until the backend's completion
// thread notices and wakes it: the GPU backend over the host platform, in a
// runtime of one rank.
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "core/gpu/gpu_ops.h"
#include "core/gpu/host_platform.h"
#include "core/runtime/handle_table.h"
#include "core/runtime/runtime.h"
#include "gtest/gtest.h"

namespace hvd::gpu {
namespace {

using runtime::HandleTable;
using runtime::TensorEntry;

class GpuCallerProgressTest : public ::testing::Test {
 protected:
  // A runtime whose cycle timers (30 s) never end a wait here, over GpuOps
  // whose events answer polls with `event_done`.
  void Start(std::function<absl::StatusOr<bool>()> event_done) {
    runtime::Config config;
    config.size = 1;
    config.cycle_time = absl::Seconds(30);
    config.idle_cycle_time = absl::Seconds(30);
    config.timeout = absl::Seconds(5);
    auto made = runtime::Runtime::Start(
        config, runtime::RuntimeParts(), &handles_,
        [event_done](const runtime::DeviceEnv& env)
            -> absl::StatusOr<std::unique_ptr<runtime::DeviceOps>> {
          HostPlatformOptions options;
          options.nccl = false;
          options.event_done = event_done;
          return std::make_unique<GpuOps>(
              env, std::make_unique<HostPlatform>(options), GpuOptions());
        });
    ASSERT_TRUE(made.ok()) << made.status();
    runtime_ = std::move(*made);
  }
  void TearDown() override {
    if (runtime_) runtime_->Shutdown();
  }

  // Submits an allreduce of `data` (host memory the host platform calls
  // GPU 0's).
  int64_t Submit(std::vector<float>& data) {
    auto entry = std::make_unique<TensorEntry>();
    runtime::Request& r = entry->request;
    r.set_type(runtime::ALLREDUCE);
    r.set_name("on a stream");
    r.set_dtype(static_cast<int32_t>(DataType::kFloat32));
    r.add_shape(static_cast<int64_t>(data.size()));
    r.set_op(static_cast<int32_t>(ReduceOp::kSum));
    r.set_prescale(1.0);
    r.set_postscale(1.0);
    r.set_device(static_cast<int32_t>(DeviceType::kGpu));
    entry->device = DeviceType::kGpu;
    entry->device_id = 0;
    entry->input = entry->output = data.data();
    entry->ready = *runtime_->device_ops()->MarkReady(0, nullptr);
    std::vector<std::unique_ptr<TensorEntry>> entries;
    entries.push_back(std::move(entry));
    return runtime_->Submit(std::move(entries)).value();
  }

  HandleTable handles_;
  std::unique_ptr<runtime::Runtime> runtime_;
};

TEST_F(GpuCallerProgressTest,
       ACallerCompletesItsOpWhenItsPollSeesTheEventFire) {
  // The op's event fires only for the caller's polls: the completion thread
  // never sees it, and would fail the op at the 5 s timeout.
  const std::thread::id caller = std::this_thread::get_id();
  Start([caller]() -> absl::StatusOr<bool> {
    return std::this_thread::get_id() == caller;
  });
  std::vector<float> data(4, 2.0f);
  for (int call = 0; call < 3; ++call) {
    const int64_t handle = Submit(data);
    // Each drive polls for 200 us: on a loaded machine the device thread
    // may queue the op later than that, and the caller then sleeps on its
    // handle (here 10 ms) before it drives, and polls, again.
    const absl::Time end = absl::Now() + absl::Seconds(3);
    while (handles_.Poll(handle) == 0 && absl::Now() < end) {
      runtime_->Drive(handle, absl::Now() + absl::Milliseconds(10));
    }
    ASSERT_EQ(handles_.Poll(handle), 1) << "call " << call;
    EXPECT_TRUE(handles_.GetStatus(handle).ok()) << handles_.GetStatus(handle);
    handles_.Release(handle);
  }
  EXPECT_EQ(data[0], 2.0f);
}

TEST_F(GpuCallerProgressTest,
       AnOpFinishingAfterTheCallersPollIsCompletedForIt) {
  // Fires 50 ms after the first poll, long after the caller stopped polling:
  // the completion thread completes it and wakes the caller.
  auto first_poll = std::make_shared<std::atomic<int64_t>>(0);
  Start([first_poll]() -> absl::StatusOr<bool> {
    const int64_t now = absl::GetCurrentTimeNanos();
    int64_t expected = 0;
    first_poll->compare_exchange_strong(expected, now);
    return now - first_poll->load() > 50'000'000;
  });
  std::vector<float> data(4, 1.0f);
  const int64_t handle = Submit(data);
  runtime_->Drive(handle, absl::Now() + absl::Seconds(3));
  ASSERT_EQ(handles_.Wait(handle, absl::Now() + absl::Seconds(3)),
            HandleTable::kDone);
  EXPECT_TRUE(handles_.GetStatus(handle).ok()) << handles_.GetStatus(handle);
  handles_.Release(handle);
}

}  // namespace
}  // namespace hvd::gpu
