#include "core/runtime/handle_table.h"

#include <thread>

#include "gtest/gtest.h"

namespace hvd::runtime {
namespace {

TEST(HandleTable, GroupHandleCompletesWhenAllPartsHave) {
  HandleTable table;
  const int64_t h = table.Create(2);
  table.Complete(h, 0, absl::OkStatus(), {});
  EXPECT_EQ(table.Poll(h), 0);
  table.Complete(h, 1, absl::OkStatus(), {});
  EXPECT_EQ(table.Poll(h), 1);
  EXPECT_TRUE(table.GetStatus(h).ok());
}

TEST(HandleTable, FirstErrorWins) {
  HandleTable table;
  const int64_t h = table.Create(2);
  table.Complete(h, 0, absl::InvalidArgumentError("first"), {});
  table.Complete(h, 1, absl::InternalError("second"), {});
  EXPECT_EQ(table.GetStatus(h), absl::InvalidArgumentError("first"));
  EXPECT_STREQ(table.ErrorText(h), "first");
}

TEST(HandleTable, DoneOkSaysWhetherAnOverHandleSucceeded) {
  HandleTable table;
  const int64_t ok = table.Create(1);
  const int64_t failed = table.Create(2);
  EXPECT_EQ(table.DoneOk(ok), std::nullopt);  // running
  table.Complete(ok, 0, absl::OkStatus(), {});
  table.Complete(failed, 0, absl::InternalError("lost"), {});
  EXPECT_EQ(table.DoneOk(failed), std::nullopt);  // one part still running
  table.Complete(failed, 1, absl::OkStatus(), {});
  EXPECT_EQ(table.DoneOk(ok), true);
  EXPECT_EQ(table.DoneOk(failed), false);
  table.Release(ok);
  EXPECT_EQ(table.DoneOk(ok), std::nullopt);  // unknown
}

TEST(HandleTable, WaitTimesOutThenCompletes) {
  HandleTable table;
  const int64_t h = table.Create(1);
  EXPECT_EQ(table.Wait(h, absl::Now() + absl::Milliseconds(10)),
            HandleTable::kTimeout);
  std::thread t([&] { table.Complete(h, 0, absl::OkStatus(), {}); });
  EXPECT_EQ(table.Wait(h, absl::InfiniteFuture()), HandleTable::kDone);
  t.join();
}

TEST(HandleTable, ANudgeEndsOnlyTheWaitsThatAskForIt) {
  HandleTable table;
  const int64_t h = table.Create(1);
  // Each wait below that the nudge must end would otherwise sleep a minute.
  const absl::Time start = absl::Now();
  const absl::Time far = start + absl::Seconds(60);
  // A nudge between reading the count and waiting is not missed.
  const uint64_t seen = table.Nudges();
  table.Nudge();
  EXPECT_EQ(table.Nudges(), seen + 1);
  EXPECT_EQ(table.WaitUnlessNudged(h, far, seen), HandleTable::kTimeout);
  // One that comes while the wait sleeps wakes it.
  std::thread nudger([&table] {
    absl::SleepFor(absl::Milliseconds(20));
    table.Nudge();
  });
  EXPECT_EQ(table.WaitUnlessNudged(h, far, table.Nudges()),
            HandleTable::kTimeout);
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  nudger.join();
  // Plain waits sleep through nudges.
  std::thread nudge_then_complete([&table, h] {
    table.Nudge();
    absl::SleepFor(absl::Milliseconds(20));
    table.Nudge();
    table.Complete(h, 0, absl::OkStatus(), {});
  });
  EXPECT_EQ(table.Wait(h, far), HandleTable::kDone);
  nudge_then_complete.join();
  // A done handle is done, nudged or not.
  EXPECT_EQ(table.WaitUnlessNudged(h, far, 0), HandleTable::kDone);
}

TEST(HandleTable, UnknownAndReleasedHandlesAreInvalid) {
  HandleTable table;
  EXPECT_EQ(table.Poll(42), -1);
  const int64_t h = table.CreateFailed(absl::AbortedError("x"));
  EXPECT_EQ(table.Poll(h), 1);
  table.Release(h);
  EXPECT_EQ(table.Wait(h, absl::Now() + absl::Seconds(1)),
            HandleTable::kInvalid);
}

TEST(HandleTable, OutputIsTakenOnce) {
  HandleTable table;
  const int64_t h = table.Create(1);
  OpResult result;
  result.output = std::make_shared<HostBuffer>(16);
  result.shape = {4};
  table.Complete(h, 0, absl::OkStatus(), std::move(result));
  EXPECT_EQ(table.OutputCount(h), 1);
  OpResult taken;
  ASSERT_TRUE(table.TakeResult(h, 0, &taken));
  EXPECT_NE(taken.output, nullptr);
  EXPECT_EQ(table.OutputCount(h), 0);
  OpResult after;
  ASSERT_TRUE(table.PeekResult(h, 0, &after));
  EXPECT_EQ(after.shape, std::vector<int64_t>{4});  // Still readable.
}

}  // namespace
}  // namespace hvd::runtime
