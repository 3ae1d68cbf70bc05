#include "core/transport/shm/copy_pace.h"

#include <cstdint>
#include <string>

#include "gtest/gtest.h"

namespace hvd::transport::shm_internal {
namespace {

using Way = CopyPace::Way;

constexpr size_t kPiece = size_t{64} << 10;
// 64 KiB in 2 us is 32 GB/s; in 20 us, 3.2 GB/s.
constexpr int64_t kFastNanos = 2000;
constexpr int64_t kSlowNanos = 20000;

// Takes one large piece through `pace` as PacedCopy would, its timed copy
// lasting `nanos`; returns how it was copied.
Way Copy(CopyPace& pace, int64_t nanos) {
  const Way way = pace.Next(kPiece);
  if (way == Way::kTimedPlain) pace.Timed(kPiece, nanos);
  return way;
}

TEST(CopyPaceTest, SmallPiecesAreCopiedPlainlyAndUntimed) {
  CopyPace pace(8000);
  EXPECT_EQ(pace.Next(CopyPace::kTimedBytes - 1), Way::kPlain);
  EXPECT_EQ(pace.Next(64), Way::kPlain);
  EXPECT_EQ(pace.Next(CopyPace::kTimedBytes), Way::kTimedPlain);
}

TEST(CopyPaceTest, FastPlainCopiesStayPlain) {
  CopyPace pace(8000);
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(Copy(pace, kFastNanos), Way::kTimedPlain);
  EXPECT_FALSE(pace.streaming());
}

TEST(CopyPaceTest, OneSlowCopyAloneDoesNotSwitch) {
  CopyPace pace(8000);
  Copy(pace, kSlowNanos);  // a preemption, or a page's first touch
  Copy(pace, kFastNanos);
  Copy(pace, kSlowNanos);
  EXPECT_FALSE(pace.streaming());
  EXPECT_EQ(pace.Next(kPiece), Way::kTimedPlain);
}

TEST(CopyPaceTest, SlowCopiesInARowSwitchToStreamingWithPeriodicProbes) {
  CopyPace pace(8000);
  for (int i = 0; i < CopyPace::kSlowToStream; ++i) Copy(pace, kSlowNanos);
  ASSERT_TRUE(pace.streaming());
  std::string ways;
  for (int i = 0; i < 2 * CopyPace::kProbeEvery; ++i) {
    ways += Copy(pace, kSlowNanos) == Way::kStreamed ? 's' : 'p';
  }
  const std::string period = std::string(CopyPace::kProbeEvery - 1, 's') + "p";
  EXPECT_EQ(ways, period + period);
  EXPECT_TRUE(pace.streaming());
  // Small pieces are never streamed.
  EXPECT_EQ(pace.Next(4096), Way::kPlain);
}

TEST(CopyPaceTest, AFastProbeSwitchesBackToPlain) {
  CopyPace pace(8000);
  for (int i = 0; i < CopyPace::kSlowToStream; ++i) Copy(pace, kSlowNanos);
  for (int i = 0; i < CopyPace::kProbeEvery - 1; ++i) {
    ASSERT_EQ(Copy(pace, kFastNanos), Way::kStreamed);
  }
  EXPECT_EQ(Copy(pace, kFastNanos), Way::kTimedPlain);
  EXPECT_FALSE(pace.streaming());
  EXPECT_EQ(Copy(pace, kFastNanos), Way::kTimedPlain);
}

TEST(CopyPaceTest, ZeroNeverStreamsOrTimes) {
  CopyPace pace(0);
  EXPECT_EQ(pace.Next(kPiece), Way::kPlain);
}

TEST(CopyPaceTest, PacedCopyCopiesTheBytesWhicheverWay) {
  std::string from(kPiece + 100, '\0');
  for (size_t i = 0; i < from.size(); ++i) from[i] = static_cast<char>(i * 7);
  // A threshold no copy reaches: the first two copies are timed and plain,
  // the rest streamed.
  CopyPace pace(SIZE_MAX / 2000);
  for (int i = 0; i < 4; ++i) {
    std::string to(from.size(), 'x');
    PacedCopy(pace, to.data() + 1, from.data() + 3, kPiece + 50);
    EXPECT_EQ(to[0], 'x');
    EXPECT_EQ(to.substr(1, kPiece + 50), from.substr(3, kPiece + 50)) << i;
    EXPECT_EQ(to.substr(kPiece + 51), std::string(49, 'x'));
  }
  EXPECT_TRUE(pace.streaming());
}

}  // namespace
}  // namespace hvd::transport::shm_internal
