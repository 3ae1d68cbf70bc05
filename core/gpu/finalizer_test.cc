#include "core/gpu/finalizer.h"

#include <sys/prctl.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd::gpu {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// An event the test fires by hand.
class ManualEvent : public Event {
 public:
  explicit ManualEvent(std::shared_ptr<std::atomic<bool>> fired)
      : fired_(std::move(fired)) {}
  absl::StatusOr<bool> Done() override { return fired_->load(); }

 private:
  std::shared_ptr<std::atomic<bool>> fired_;
};

// An event that reports itself fired only to polls from one thread: the
// completion thread never sees it fire.
class FiredForThread : public Event {
 public:
  explicit FiredForThread(std::thread::id thread) : thread_(thread) {}
  absl::StatusOr<bool> Done() override {
    return std::this_thread::get_id() == thread_;
  }

 private:
  const std::thread::id thread_;
};

// An event that has fired and notes the timer slack of the thread polling
// it.
class SlackRecordingEvent : public Event {
 public:
  explicit SlackRecordingEvent(std::shared_ptr<std::atomic<int>> slack)
      : slack_(std::move(slack)) {}
  absl::StatusOr<bool> Done() override {
    slack_->store(prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0));
    return true;
  }

 private:
  std::shared_ptr<std::atomic<int>> slack_;
};

// A communicator whose health the test sets; it runs no collectives.
class HealthOnlyComm : public Comm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  absl::string_view kind() const override { return "test"; }
  bool CanReduce(DataType, ReduceOp) const override { return true; }
  absl::Status Allreduce(const void*, void*, size_t, DataType, ReduceOp,
                         double) override {
    return absl::UnimplementedError("");
  }
  absl::Status Allgather(const void*, void*,
                         const std::vector<size_t>&) override {
    return absl::UnimplementedError("");
  }
  absl::Status Broadcast(void*, size_t, int) override {
    return absl::UnimplementedError("");
  }
  absl::Status Alltoall(const void*, const std::vector<size_t>&, void*,
                        const std::vector<size_t>&) override {
    return absl::UnimplementedError("");
  }
  absl::Status ReduceScatter(const void*, void*, const std::vector<size_t>&,
                             DataType, ReduceOp, double) override {
    return absl::UnimplementedError("");
  }
  absl::Status Health() override {
    absl::MutexLock lock(&mu_);
    return health_;
  }
  void Abort(const absl::Status& reason) override {
    absl::MutexLock lock(&mu_);
    if (health_.ok()) health_ = reason;
  }

 private:
  absl::Mutex mu_;
  absl::Status health_ ABSL_GUARDED_BY(mu_);
};

class FinalizerTest : public ::testing::Test {
 protected:
  FinalizerTest()
      : finalizer_([this](const absl::Status& s) {
          absl::MutexLock lock(&mu_);
          failures_.push_back(std::string(s.message()));
        }) {}

  // An item of one entry named `name` whose event the returned flag fires.
  std::shared_ptr<std::atomic<bool>> Add(
      const std::string& name, absl::Duration timeout = absl::Seconds(30),
      std::shared_ptr<Comm> comm = nullptr) {
    auto fired = std::make_shared<std::atomic<bool>>(false);
    Finalizer::Item item;
    item.event = std::make_unique<ManualEvent>(fired);
    item.entries.push_back(Entry(name));
    runtime::OpResult result;
    result.value = 7;
    item.results.push_back(result);
    item.deadline = absl::Now() + timeout;
    item.what = [name] { return "rank 0: allreduce of '" + name + "'"; };
    if (comm) item.comms.push_back(comm);
    finalizer_.Add(std::move(item));
    return fired;
  }

  // An item of one entry named `name` whose event fires only for polls
  // from this thread.
  void AddFiredForMe(const std::string& name) {
    Finalizer::Item item;
    item.event = std::make_unique<FiredForThread>(std::this_thread::get_id());
    item.entries.push_back(Entry(name));
    finalizer_.Add(std::move(item));
  }

  std::unique_ptr<runtime::TensorEntry> Entry(const std::string& name) {
    auto entry = std::make_unique<runtime::TensorEntry>();
    entry->done = [this, name](const absl::Status& s, runtime::OpResult r) {
      absl::MutexLock lock(&mu_);
      completers_.insert(std::this_thread::get_id());
      order_.push_back(name);
      statuses_[name] = s;
      values_[name] = r.value;
    };
    return entry;
  }

  std::vector<std::string> Completed() {
    absl::MutexLock lock(&mu_);
    return order_;
  }
  absl::Status StatusOf(const std::string& name) {
    absl::MutexLock lock(&mu_);
    return statuses_[name];
  }

  absl::Mutex mu_;
  std::vector<std::string> order_ ABSL_GUARDED_BY(mu_);
  std::set<std::thread::id> completers_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, absl::Status> statuses_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t> values_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> failures_ ABSL_GUARDED_BY(mu_);
  Finalizer finalizer_;
};

TEST_F(FinalizerTest, CompletesInQueueOrderOnceEachEventFired) {
  auto first = Add("a");
  auto second = Add("b");
  second->store(true);
  // "b" has fired but waits behind "a".
  EXPECT_FALSE(finalizer_.Drain(absl::Now() + absl::Milliseconds(50)));
  EXPECT_TRUE(Completed().empty());
  first->store(true);
  ASSERT_TRUE(finalizer_.Drain(absl::Now() + absl::Seconds(10)));
  EXPECT_THAT(Completed(), ElementsAre("a", "b"));
  EXPECT_TRUE(StatusOf("a").ok());
  absl::MutexLock lock(&mu_);
  EXPECT_EQ(values_["a"], 7);  // the result reaches the callback
}

TEST_F(FinalizerTest, TheCompletionThreadSleepsWithoutTimerSlack) {
  // Its naps between polls end when asked, not 50 us later.
  auto slack = std::make_shared<std::atomic<int>>(-1);
  Finalizer::Item item;
  item.event = std::make_unique<SlackRecordingEvent>(slack);
  item.entries.push_back(Entry("a"));
  finalizer_.Add(std::move(item));
  ASSERT_TRUE(finalizer_.Drain(absl::Now() + absl::Seconds(10)));
  EXPECT_EQ(slack->load(), 1);
}

TEST_F(FinalizerTest, TryCompleteCompletesFiredItemsInOrderOnTheCallingThread) {
  AddFiredForMe("a");
  AddFiredForMe("b");
  EXPECT_TRUE(finalizer_.TryComplete());
  EXPECT_THAT(Completed(), ElementsAre("a", "b"));
  EXPECT_FALSE(finalizer_.Pending());
  ASSERT_TRUE(finalizer_.Drain(absl::Now() + absl::Seconds(10)));
  absl::MutexLock lock(&mu_);
  EXPECT_EQ(completers_, std::set<std::thread::id>{std::this_thread::get_id()});
}

TEST_F(FinalizerTest, TryCompleteWaitsBehindAnItemNotYetFired) {
  auto first = Add("a");
  AddFiredForMe("b");
  EXPECT_FALSE(finalizer_.TryComplete());
  EXPECT_TRUE(Completed().empty());
  EXPECT_TRUE(finalizer_.Pending());
  first->store(true);
  // The completion thread completes "a"; "b" fires for this thread only.
  while (Completed().empty()) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_TRUE(finalizer_.TryComplete());
  EXPECT_THAT(Completed(), ElementsAre("a", "b"));
}

TEST_F(FinalizerTest, TryCompleteLeavesAFailedItemToTheCompletionThread) {
  Finalizer::Item failed;
  failed.status = absl::InternalError("ncclAllReduce: invalid usage");
  failed.entries.push_back(Entry("a"));
  finalizer_.Add(std::move(failed));
  finalizer_.TryComplete();
  ASSERT_TRUE(finalizer_.Drain(absl::Now() + absl::Seconds(10)));
  EXPECT_THAT(StatusOf("a").message(), HasSubstr("invalid usage"));
  absl::MutexLock lock(&mu_);
  EXPECT_EQ(completers_.count(std::this_thread::get_id()), 0u);
}

TEST_F(FinalizerTest, AfterAnAbortTryCompleteLeavesEverythingToBeFailed) {
  finalizer_.Abort(absl::UnavailableError("peer lost"));
  AddFiredForMe("a");
  EXPECT_FALSE(finalizer_.TryComplete());
  ASSERT_TRUE(finalizer_.Drain(absl::Now() + absl::Seconds(10)));
  EXPECT_EQ(StatusOf("a").code(), absl::StatusCode::kUnavailable);
}

TEST_F(FinalizerTest, ItemsPolledByACallerAndTheThreadCompleteOnceInOrder) {
  // Events fire at random moments while this thread calls TryComplete in a
  // loop and the completion thread polls too: each entry completes once.
  constexpr int kItems = 300;
  std::vector<std::shared_ptr<std::atomic<bool>>> fired;
  std::vector<std::string> names;
  for (int i = 0; i < kItems; ++i) {
    names.push_back(absl::StrCat("t", i));
    fired.push_back(Add(names.back()));
  }
  std::thread firer([&] {
    for (auto& f : fired) {
      if (rand() % 4 == 0) absl::SleepFor(absl::Microseconds(rand() % 300));
      f->store(true);
    }
  });
  while (finalizer_.Pending()) finalizer_.TryComplete();
  firer.join();
  ASSERT_TRUE(finalizer_.Drain(absl::Now() + absl::Seconds(10)));
  EXPECT_EQ(Completed(), names);
  for (const auto& name : names) EXPECT_TRUE(StatusOf(name).ok()) << name;
}

TEST_F(FinalizerTest, AnItemFailedWhileQueuedFailsAfterTheOnesBeforeIt) {
  auto first = Add("a");
  Finalizer::Item failed;
  failed.status = absl::InternalError("ncclAllReduce: invalid usage");
  failed.entries.push_back(Entry("b"));
  finalizer_.Add(std::move(failed));
  EXPECT_FALSE(finalizer_.Drain(absl::Now() + absl::Milliseconds(30)));
  first->store(true);
  ASSERT_TRUE(finalizer_.Drain(absl::Now() + absl::Seconds(10)));
  EXPECT_THAT(Completed(), ElementsAre("a", "b"));
  EXPECT_THAT(StatusOf("b").message(), HasSubstr("invalid usage"));
}

TEST_F(FinalizerTest, AnEventThatNeverFiresTimesOutNamingTheOp) {
  Add("stuck", absl::Milliseconds(50));
  ASSERT_TRUE(finalizer_.Drain(absl::Now() + absl::Seconds(10)));
  const absl::Status s = StatusOf("stuck");
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(s.message(), HasSubstr("rank 0: allreduce of 'stuck' did not "
                                     "finish on the GPU within the timeout"));
  absl::MutexLock lock(&mu_);
  ASSERT_EQ(failures_.size(), 1u);  // the backend hears of it
}

TEST_F(FinalizerTest, AFailedCommunicatorEndsTheWaitWithItsError) {
  auto comm = std::make_shared<HealthOnlyComm>();
  Add("w", absl::Seconds(30), comm);
  comm->Abort(absl::UnavailableError("rank 1 (member 1 of 2): peer lost"));
  ASSERT_TRUE(finalizer_.Drain(absl::Now() + absl::Seconds(10)));
  EXPECT_EQ(StatusOf("w").code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(StatusOf("w").message(), HasSubstr("peer lost"));
}

TEST_F(FinalizerTest, AbortFailsTheWaitingAndQueuedItemsWithoutTheirEvents) {
  Add("a");
  Add("b");
  finalizer_.Abort(absl::UnavailableError("negotiation with rank 0 failed"));
  ASSERT_TRUE(finalizer_.Drain(absl::Now() + absl::Seconds(10)));
  EXPECT_THAT(Completed(), ElementsAre("a", "b"));
  EXPECT_THAT(StatusOf("b").message(), HasSubstr("negotiation with rank 0"));
  Add("later");
  ASSERT_TRUE(finalizer_.Drain(absl::Now() + absl::Seconds(10)));
  EXPECT_EQ(StatusOf("later").code(), absl::StatusCode::kUnavailable);
  absl::MutexLock lock(&mu_);
  EXPECT_TRUE(failures_.empty());  // an abort is not reported back
}

TEST(Finalizer, DestroyingItCancelsWhatIsLeft) {
  absl::Status status;
  {
    Finalizer finalizer(nullptr);
    Finalizer::Item item;
    item.event = std::make_unique<ManualEvent>(
        std::make_shared<std::atomic<bool>>(false));
    auto entry = std::make_unique<runtime::TensorEntry>();
    entry->done = [&](const absl::Status& s, runtime::OpResult) { status = s; };
    item.entries.push_back(std::move(entry));
    finalizer.Add(std::move(item));
  }
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace hvd::gpu
