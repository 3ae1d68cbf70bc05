// A caller that waits for its own op runs the runtime's cycles on its own
// thread (Runtime::Drive), sharing them with the background thread: one
// Runtime per rank in this process, over real transports.
#include <algorithm>
#include <atomic>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "core/collectives/test_mesh.h"
#include "core/runtime/handle_table.h"
#include "core/runtime/runtime.h"
#include "core/runtime/test_job.h"
#include "gtest/gtest.h"

namespace hvd::runtime {
namespace {

// A data plane that records which threads send on it.
class SenderRecordingContext : public ForwardingContext {
 public:
  using ForwardingContext::ForwardingContext;

  std::unique_ptr<transport::Request> Send(int peer, const void* data,
                                           size_t len) override {
    {
      absl::MutexLock lock(&mu_);
      senders_.insert(std::this_thread::get_id());
    }
    return ForwardingContext::Send(peer, data, len);
  }
  bool SentFrom(std::thread::id thread) {
    absl::MutexLock lock(&mu_);
    return senders_.count(thread) > 0;
  }

 private:
  absl::Mutex mu_;
  std::set<std::thread::id> senders_ ABSL_GUARDED_BY(mu_);
};

class CallerProgressTest : public ::testing::TestWithParam<MeshTransport> {
 protected:
  // A job of `size` ranks whose data planes record their senders.
  std::unique_ptr<Job> MakeJob(int size, Config config = {}) {
    planes_.assign(size, nullptr);
    return std::make_unique<Job>(
        size, GetParam(), config,
        [this](int rank, std::unique_ptr<transport::Context> inner) {
          auto plane =
              std::make_unique<SenderRecordingContext>(std::move(inner));
          planes_[rank] = plane.get();
          return plane;
        });
  }
  // Allreduces rank + 1 `steps` times in a row on every rank, each call
  // waited for by Job::Run; expects every sum.
  void CallAndWaitInALoop(Job& job, int steps,
                          const std::function<void(int rank)>& after) {
    job.RunOnEveryRank([&](int rank) {
      std::vector<float> data(16);
      for (int step = 0; step < steps; ++step) {
        std::fill(data.begin(), data.end(), rank + 1.0f);
        ASSERT_TRUE(job.Run(rank, One(Allreduce("grad", data))).ok());
        const int n = job.size();
        ASSERT_EQ(data[0], n * (n + 1) / 2.0f) << "step " << step;
      }
      after(rank);
    });
  }

  std::vector<SenderRecordingContext*> planes_;
};

TEST_P(CallerProgressTest, ACallerThatWaitsRunsTheCyclesOnItsOwnThread) {
  for (int size : {2, 3}) {
    auto job = MakeJob(size);
    CallAndWaitInALoop(*job, 20, [&](int rank) {
      EXPECT_TRUE(planes_[rank]->SentFrom(std::this_thread::get_id()))
          << "rank " << rank << " of " << size;
    });
  }
}

TEST_P(CallerProgressTest, TurnedOffOnlyTheBackgroundThreadRunsCycles) {
  Config config;
  config.caller_progress = false;
  auto job = MakeJob(2, config);
  CallAndWaitInALoop(*job, 20, [&](int rank) {
    EXPECT_FALSE(planes_[rank]->SentFrom(std::this_thread::get_id()))
        << "rank " << rank;
  });
}

TEST_P(CallerProgressTest, ADriveEndsAtItsDeadlineWhileAPeerHasNotSubmitted) {
  auto job = MakeJob(2);
  std::vector<float> zero(8, 1.0f), one(8, 2.0f);
  const int64_t first =
      job->runtime(0).Submit(One(Allreduce("late peer", zero))).value();
  const absl::Time start = absl::Now();
  job->runtime(0).Drive(first, start + absl::Milliseconds(50));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(50));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(job->handles(0).Poll(first), 0);
  // The peer submits: the background thread (or a new Drive) finishes it.
  ASSERT_TRUE(job->Run(1, One(Allreduce("late peer", one))).ok());
  ASSERT_EQ(job->handles(0).Wait(first, absl::Now() + absl::Seconds(30)),
            HandleTable::kDone);
  EXPECT_TRUE(job->handles(0).GetStatus(first).ok());
  EXPECT_EQ(zero[0], 3.0f);
}

TEST_P(CallerProgressTest, ACallerWaitingForItsBurstRunsItWithoutTheSettle) {
  // The background thread would hold a burst for the settle window (far
  // longer than the test may take); a caller that comes to wait for the
  // burst runs the cycle itself at once. Rank 0's background thread may
  // answer from inside its gather, so rank 1 is the one checked.
  Config config;
  config.submit_settle = absl::Seconds(20);
  config.cycle_time = absl::Seconds(20);  // the settle's cap
  auto job = MakeJob(2, config);
  constexpr int kTensors = 8;
  const absl::Time start = absl::Now();
  job->RunOnEveryRank([&](int rank) {
    std::vector<std::vector<float>> data(kTensors,
                                         std::vector<float>(8, rank + 1.0f));
    const std::vector<int64_t> handles = SubmitEach(*job, rank, data);
    for (int t = 0; t < kTensors; ++t) {
      ASSERT_TRUE(job->Wait(rank, handles[t]).ok());
      EXPECT_EQ(data[t][7], 3.0f);
    }
    if (rank == 1) {
      EXPECT_TRUE(planes_[rank]->SentFrom(std::this_thread::get_id()));
    }
  });
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST_P(CallerProgressTest, TensorsLeftOverFromAPartAnswerGoBackAtOnce) {
  // Rank 1 submits a and b and waits for b; rank 0 submits a alone, so its
  // first answer holds a only, then b a while later. Rank 1's b, still
  // pending, goes back to rank 0 at once rather than at its cycle timer
  // (far longer than the test may take).
  Config config;
  config.cycle_time = absl::Seconds(20);
  auto job = MakeJob(2, config);
  const absl::Time start = absl::Now();
  job->RunOnEveryRank([&](int rank) {
    std::vector<float> a(8, rank + 1.0f), b(8, rank + 1.0f);
    if (rank == 1) {
      const int64_t first =
          job->runtime(1).Submit(One(Allreduce("a", a))).value();
      const int64_t second =
          job->runtime(1).Submit(One(Allreduce("b", b))).value();
      ASSERT_TRUE(job->Wait(1, second).ok());
      ASSERT_TRUE(job->Wait(1, first).ok());
    } else {
      ASSERT_TRUE(job->Run(0, One(Allreduce("a", a))).ok());
      absl::SleepFor(absl::Milliseconds(200));
      ASSERT_TRUE(job->Run(0, One(Allreduce("b", b))).ok());
    }
    EXPECT_EQ(a[7], 3.0f);
    EXPECT_EQ(b[7], 3.0f);
  });
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST_P(CallerProgressTest, CallersOfOneRankShareTheCyclesWithEachOther) {
  // Two threads per rank, each calling and waiting in a loop under its own
  // names: one of them at a time runs a cycle, the other waits for its
  // handle, and neither's ops are lost.
  auto job = MakeJob(2);
  job->RunOnEveryRank([&](int rank) {
    std::vector<std::thread> callers;
    for (int caller = 0; caller < 2; ++caller) {
      callers.emplace_back([&, caller] {
        std::vector<float> data(64);
        for (int step = 0; step < 30; ++step) {
          std::fill(data.begin(), data.end(), rank + 1.0f);
          const std::string name = absl::StrCat("caller", caller);
          ASSERT_TRUE(job->Run(rank, One(Allreduce(name, data))).ok());
          ASSERT_EQ(data[0], 3.0f) << "caller " << caller << " step " << step;
        }
      });
    }
    for (auto& t : callers) t.join();
  });
}

// Voluntary context switches of the calling thread so far: each sleep of
// the thread counts one.
long VoluntarySwitches() {
  std::ifstream status("/proc/thread-self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (absl::StartsWith(line, "voluntary_ctxt_switches:")) {
      return std::stol(line.substr(line.find(':') + 1));
    }
  }
  return -1;
}

// A data plane whose first send of a collective's data (`data_bytes` or
// more) sleeps for `slow` first: a collective that takes that long.
class SlowFirstDataSend : public ForwardingContext {
 public:
  SlowFirstDataSend(std::unique_ptr<transport::Context> inner,
                    size_t data_bytes, absl::Duration slow)
      : ForwardingContext(std::move(inner)),
        data_bytes_(data_bytes),
        slow_(slow) {}

  std::unique_ptr<transport::Request> Send(int peer, const void* data,
                                           size_t len) override {
    if (len >= data_bytes_ && !started_.exchange(true)) {
      {
        absl::MutexLock lock(&mu_);
        slow_sender_ = std::this_thread::get_id();
      }
      absl::SleepFor(slow_);
    }
    return ForwardingContext::Send(peer, data, len);
  }
  bool started() const { return started_.load(); }
  std::thread::id slow_sender() {
    absl::MutexLock lock(&mu_);
    return slow_sender_;
  }

 private:
  const size_t data_bytes_;
  const absl::Duration slow_;
  std::atomic<bool> started_{false};
  absl::Mutex mu_;
  std::thread::id slow_sender_ ABSL_GUARDED_BY(mu_);
};

TEST_P(CallerProgressTest, ACallerWaitingOnTheBackgroundThreadsCycleSleeps) {
  // Nobody waits for the op when the background threads take it; rank 0's
  // collective then takes 300 ms. Its caller, coming to wait meanwhile,
  // finds the background thread in the cycle: it sleeps until the cycle's
  // end nudges it (or the op is done), waking at most every few
  // milliseconds meanwhile, rather than every 200 us to try the cycle lock
  // again, which would take a one-core rank's CPU from the collective some
  // 1,500 times.
  constexpr size_t kCount = 4096;
  std::vector<SlowFirstDataSend*> planes(2);
  Job job(2, GetParam(), Config{},
          [&](int rank, std::unique_ptr<transport::Context> inner) {
            auto plane = std::make_unique<SlowFirstDataSend>(
                std::move(inner), kCount * sizeof(float) / 2,
                rank == 0 ? absl::Milliseconds(300) : absl::ZeroDuration());
            planes[rank] = plane.get();
            return plane;
          });
  job.RunOnEveryRank([&](int rank) {
    std::vector<float> data(kCount, rank + 1.0f);
    const int64_t handle =
        job.runtime(rank).Submit(One(Allreduce("slow", data))).value();
    if (rank == 0) {
      while (!planes[0]->started()) absl::SleepFor(absl::Milliseconds(1));
    }
    const long before = VoluntarySwitches();
    ASSERT_TRUE(job.Wait(rank, handle).ok());
    const long switches = VoluntarySwitches() - before;
    EXPECT_EQ(data[kCount - 1], 3.0f);
    if (rank == 0) {
      EXPECT_NE(planes[0]->slow_sender(), std::this_thread::get_id());
      EXPECT_LT(switches, 150);
    }
  });
}

// A device backend whose ops run on a thread of their own, as a GPU
// stream does: each completes a millisecond after Execute hands it over.
class ThreadDeviceOps : public DeviceOps {
 public:
  ~ThreadDeviceOps() override { Shutdown(); }
  absl::StatusOr<std::shared_ptr<ReadyEvent>> MarkReady(int, void*) override {
    return std::shared_ptr<ReadyEvent>();
  }
  absl::Status Execute(Response,
                       std::vector<std::unique_ptr<TensorEntry>>& entries,
                       const collectives::Group&) override {
    std::vector<std::shared_ptr<TensorEntry>> taken;
    for (auto& e : entries) {
      if (e) taken.push_back(std::move(e));
    }
    absl::MutexLock lock(&mu_);
    workers_.emplace_back([taken] {
      absl::SleepFor(absl::Milliseconds(1));
      for (const auto& e : taken) e->done(absl::OkStatus(), OpResult());
    });
    return absl::OkStatus();
  }
  bool Progress() override { return false; }
  void RemoveProcessSet(int) override {}
  void Abort(const absl::Status&) override {}
  void Shutdown() override {
    absl::MutexLock lock(&mu_);
    for (auto& t : workers_) t.join();
    workers_.clear();
  }

 private:
  absl::Mutex mu_;
  std::vector<std::thread> workers_ ABSL_GUARDED_BY(mu_);
};

// A device backend whose ops have finished on the GPU once `finished` is
// set, and complete only when a caller polls (Progress) -- as if its own
// completion thread never woke -- or at Shutdown. Notes the threads that
// completed them and when Progress was called.
class PolledDeviceOps : public DeviceOps {
 public:
  explicit PolledDeviceOps(std::shared_ptr<std::atomic<bool>> finished)
      : finished_(std::move(finished)) {}
  ~PolledDeviceOps() override { Shutdown(); }
  absl::StatusOr<std::shared_ptr<ReadyEvent>> MarkReady(int, void*) override {
    return std::shared_ptr<ReadyEvent>();
  }
  absl::Status Execute(Response,
                       std::vector<std::unique_ptr<TensorEntry>>& entries,
                       const collectives::Group&) override {
    absl::MutexLock lock(&mu_);
    for (auto& e : entries) {
      if (e) in_flight_.push_back(std::move(e));
    }
    return absl::OkStatus();
  }
  bool Progress() override {
    absl::MutexLock lock(&mu_);
    polls_.push_back(absl::Now());
    if (finished_->load()) {
      for (auto& e : in_flight_) {
        completers_.insert(std::this_thread::get_id());
        e->done(absl::OkStatus(), OpResult());
      }
      in_flight_.clear();
    }
    return !in_flight_.empty();
  }
  void RemoveProcessSet(int) override {}
  void Abort(const absl::Status&) override {}
  void Shutdown() override {
    absl::MutexLock lock(&mu_);
    for (auto& e : in_flight_) {
      e->done(absl::CancelledError("shut down"), OpResult());
    }
    in_flight_.clear();
  }
  std::set<std::thread::id> completers() {
    absl::MutexLock lock(&mu_);
    return completers_;
  }
  std::vector<absl::Time> polls() {
    absl::MutexLock lock(&mu_);
    return polls_;
  }

 private:
  const std::shared_ptr<std::atomic<bool>> finished_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<TensorEntry>> in_flight_ ABSL_GUARDED_BY(mu_);
  std::set<std::thread::id> completers_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Time> polls_ ABSL_GUARDED_BY(mu_);
};

// A job of size 1 over PolledDeviceOps, whose timers (30 s) never end a
// wait in these tests.
class PolledDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Config config;
    config.size = 1;
    config.cycle_time = absl::Seconds(30);
    config.idle_cycle_time = absl::Seconds(30);
    auto runtime = Runtime::Start(
        config, RuntimeParts(), &handles_,
        [this](const DeviceEnv&) -> absl::StatusOr<std::unique_ptr<DeviceOps>> {
          auto ops = std::make_unique<PolledDeviceOps>(finished_);
          device_ = ops.get();
          return ops;
        });
    ASSERT_TRUE(runtime.ok()) << runtime.status();
    runtime_ = std::move(*runtime);
  }
  void TearDown() override {
    if (runtime_) runtime_->Shutdown();
  }
  int64_t Submit(std::vector<float>& data, bool gpu) {
    auto entry = Allreduce(gpu ? "on a stream" : "on the host", data);
    if (gpu) {
      entry->device = DeviceType::kGpu;
      entry->request.set_device(static_cast<int32_t>(DeviceType::kGpu));
    }
    return runtime_->Submit(One(std::move(entry))).value();
  }

  HandleTable handles_;
  std::shared_ptr<std::atomic<bool>> finished_ =
      std::make_shared<std::atomic<bool>>(true);
  PolledDeviceOps* device_ = nullptr;
  std::unique_ptr<Runtime> runtime_;
};

TEST_F(PolledDeviceTest, ACallerCompletesItsFinishedDeviceOpItself) {
  std::vector<float> data(4, 1.0f);
  for (int call = 0; call < 3; ++call) {
    const int64_t handle = Submit(data, /*gpu=*/true);
    const absl::Time start = absl::Now();
    runtime_->Drive(handle, start + absl::Seconds(5));
    EXPECT_EQ(handles_.Poll(handle), 1) << "call " << call;
    EXPECT_LT(absl::Now() - start, absl::Seconds(1)) << "call " << call;
    handles_.Release(handle);
  }
  EXPECT_EQ(device_->completers(),
            std::set<std::thread::id>{std::this_thread::get_id()});
}

TEST_F(PolledDeviceTest, AnUnfinishedDeviceOpIsPolledOnlyBrieflyThenWaitedFor) {
  finished_->store(false);
  std::vector<float> data(4, 1.0f);
  const int64_t handle = Submit(data, /*gpu=*/true);
  const absl::Time start = absl::Now();
  runtime_->Drive(handle, start + absl::Milliseconds(100));
  EXPECT_EQ(handles_.Poll(handle), 0);
  const std::vector<absl::Time> polls = device_->polls();
  ASSERT_FALSE(polls.empty());
  // 200 us of polling, then sleeps on the handle: nothing after 50 ms.
  EXPECT_LT(polls.back() - start, absl::Milliseconds(50));
  finished_->store(true);
  runtime_->Drive(handle, absl::Now() + absl::Seconds(5));
  EXPECT_EQ(handles_.Poll(handle), 1);
}

TEST_F(PolledDeviceTest, ACallerWhoseOpRunsInTheCycleNeverPollsTheDevice) {
  std::vector<float> data(4, 1.0f);
  for (int call = 0; call < 3; ++call) {
    const int64_t handle = Submit(data, /*gpu=*/false);
    runtime_->Drive(handle, absl::Now() + absl::Seconds(5));
    EXPECT_EQ(handles_.Poll(handle), 1) << "call " << call;
    handles_.Release(handle);
  }
  EXPECT_TRUE(device_->polls().empty());
}

TEST(CallerProgress, ACallerWhoseOpRunsOffTheCyclesWaitsForItNotForATimer) {
  // A cycle with nothing to do sleeps until its timer, 30 s here; the op
  // completes on its own thread a millisecond after the cycle handed it on.
  Config config;
  config.size = 1;
  config.cycle_time = absl::Seconds(30);
  config.idle_cycle_time = absl::Seconds(30);
  HandleTable handles;
  auto runtime = Runtime::Start(
      config, RuntimeParts(), &handles,
      [](const DeviceEnv&) -> absl::StatusOr<std::unique_ptr<DeviceOps>> {
        return std::make_unique<ThreadDeviceOps>();
      });
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  std::vector<float> data(4, 1.0f);
  for (int call = 0; call < 3; ++call) {
    auto entry = Allreduce("on a stream", data);
    entry->device = DeviceType::kGpu;
    entry->request.set_device(static_cast<int32_t>(DeviceType::kGpu));
    const int64_t handle = (*runtime)->Submit(One(std::move(entry))).value();
    const absl::Time start = absl::Now();
    (*runtime)->Drive(handle, start + absl::Seconds(60));
    EXPECT_EQ(handles.Poll(handle), 1) << "call " << call;
    EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "call " << call;
    handles.Release(handle);
  }
  (*runtime)->Shutdown();
}

INSTANTIATE_TEST_SUITE_P(
    Transports, CallerProgressTest,
    ::testing::Values(MeshTransport::kTcp, MeshTransport::kShm),
    [](const auto& info) {
      return std::string(collectives::MeshTransportName(info.param));
    });

}  // namespace
}  // namespace hvd::runtime
