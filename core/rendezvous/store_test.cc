#include "core/rendezvous/store.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd {
namespace {

TEST(CancellableStore, PassesCallsThroughUntilCancelled) {
  auto base = NewInMemoryStore();
  auto cancel = std::make_shared<Cancellation>();
  CancellableStore store(base.get(), cancel);
  ASSERT_TRUE(store.Set("k", "v").ok());
  EXPECT_EQ(*store.Get("k", absl::Seconds(1)), "v");
  cancel->Cancel(absl::AbortedError("round 2 ended"));
  EXPECT_EQ(store.Get("k", absl::Seconds(1)).status(),
            absl::AbortedError("round 2 ended"));
  EXPECT_EQ(store.Set("k", "w"), absl::AbortedError("round 2 ended"));
  EXPECT_EQ(store.Barrier("b", 1, absl::Seconds(1)),
            absl::AbortedError("round 2 ended"));
}

TEST(CancellableStore, AWaitingGetGivesUpSoonAfterTheCancel) {
  auto base = NewInMemoryStore();
  auto cancel = std::make_shared<Cancellation>();
  CancellableStore store(base.get(), cancel, absl::Milliseconds(20));
  absl::Notification started;
  std::thread canceller([&] {
    started.WaitForNotification();
    absl::SleepFor(absl::Milliseconds(100));
    cancel->Cancel(absl::AbortedError("peer lost"));
  });
  const absl::Time start = absl::Now();
  started.Notify();
  absl::StatusOr<std::string> value = store.Get("never", absl::Seconds(30));
  canceller.join();
  EXPECT_EQ(value.status(), absl::AbortedError("peer lost"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST(CancellableStore, AGetStillTimesOutNamingItsOwnTimeout) {
  auto base = NewInMemoryStore();
  CancellableStore store(base.get(), std::make_shared<Cancellation>(),
                         absl::Milliseconds(20));
  absl::StatusOr<std::string> value = store.Get("never", absl::Milliseconds(90));
  EXPECT_TRUE(absl::IsDeadlineExceeded(value.status()));
  EXPECT_EQ(value.status().message(), "key 'never' not set within 90ms");
}

TEST(CancellableStore, AValueSetWhileWaitingIsReturned) {
  auto base = NewInMemoryStore();
  CancellableStore store(base.get(), std::make_shared<Cancellation>(),
                         absl::Milliseconds(20));
  std::thread setter([&] {
    absl::SleepFor(absl::Milliseconds(60));
    ASSERT_TRUE(base->Set("late", "there").ok());
  });
  EXPECT_EQ(*store.Get("late", absl::Seconds(10)), "there");
  setter.join();
}

TEST(CancellableStore, AWaitingGetManyGivesUpSoonAfterTheCancel) {
  auto base = NewInMemoryStore();
  auto cancel = std::make_shared<Cancellation>();
  CancellableStore store(base.get(), cancel, absl::Milliseconds(20));
  ASSERT_TRUE(base->Set("there", "v").ok());
  std::thread canceller([&] {
    absl::SleepFor(absl::Milliseconds(100));
    cancel->Cancel(absl::AbortedError("peer lost"));
  });
  const absl::Time start = absl::Now();
  auto values = store.GetMany({"there", "never"}, absl::Seconds(30));
  canceller.join();
  EXPECT_EQ(values.status(), absl::AbortedError("peer lost"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST(PrefixStore, GetManyReadsThePrefixedKeysInOrder) {
  auto base = NewInMemoryStore();
  PrefixStore store(base.get(), "core/7/");
  ASSERT_TRUE(base->Set("core/7/a", "1").ok());
  ASSERT_TRUE(store.Set("b", "2").ok());
  auto values = store.GetMany({"b", "a"}, absl::Seconds(1));
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(*values, (std::vector<std::string>{"2", "1"}));
  EXPECT_TRUE(absl::IsDeadlineExceeded(
      store.GetMany({"a", "never"}, absl::Milliseconds(20)).status()));
}

TEST(RankRangeTest, RanksFromBeginBeforeEndWithoutTheSkippedOne) {
  EXPECT_EQ(RankRange(0, 4), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(RankRange(0, 4, 2), (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(RankRange(1, 3), (std::vector<int>{1, 2}));
  EXPECT_TRUE(RankRange(0, 0).empty());
}

// Runs GatherThroughRoot as members 0..size-1, one thread each, skipping
// `absent`; combine joins the records with "|".
std::vector<absl::StatusOr<std::string>> Gather(Store& store, int size,
                                                absl::Duration timeout,
                                                int absent = -1) {
  std::vector<absl::StatusOr<std::string>> got(size,
                                               absl::UnknownError("absent"));
  std::vector<std::thread> threads;
  for (int i = 0; i < size; ++i) {
    if (i == absent) continue;
    threads.emplace_back([&, i] {
      got[i] = GatherThroughRoot(
          store, "g/", i, size, absl::StrCat("r", i), "the test's records",
          [](const std::vector<std::string>& records) {
            return absl::StrJoin(records, "|");
          },
          timeout);
    });
  }
  for (auto& t : threads) t.join();
  return got;
}

TEST(GatherThroughRoot, EveryMemberGetsWhatMemberZeroCombinedInOrder) {
  auto store = NewInMemoryStore();
  for (const auto& got : Gather(*store, 4, absl::Seconds(20))) {
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, "r0|r1|r2|r3");
  }
  EXPECT_EQ(*store->Get("g/all", absl::Seconds(1)), "r0|r1|r2|r3");
}

TEST(GatherThroughRoot, AMissingMemberTimesOutOnEveryMemberNamingTheStep) {
  auto store = NewInMemoryStore();
  auto got = Gather(*store, 3, absl::Milliseconds(200), /*absent=*/2);
  EXPECT_EQ(got[0].status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(got[0].status().message(),
              ::testing::HasSubstr("reading the test's records: key 'g/2'"));
  EXPECT_EQ(got[1].status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(got[1].status().message(),
              ::testing::HasSubstr(
                  "reading what member 0 gathers of the test's records"));
}

}  // namespace
}  // namespace hvd
