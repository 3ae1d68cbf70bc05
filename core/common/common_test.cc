#include <cstdlib>

#include "core/common/cancellation.h"
#include "core/common/env.h"
#include "core/common/half.h"
#include "core/common/logging.h"
#include "core/common/types.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd {
namespace {

TEST(Cancellation, TheFirstReasonWinsAndOkBecomesCancelled) {
  Cancellation c;
  EXPECT_FALSE(c.cancelled());
  EXPECT_TRUE(c.status().ok());
  c.Cancel(absl::AbortedError("round 3 ended"));
  c.Cancel(absl::InternalError("later"));
  EXPECT_TRUE(c.cancelled());
  EXPECT_EQ(c.status(), absl::AbortedError("round 3 ended"));
  Cancellation d;
  d.Cancel(absl::OkStatus());
  EXPECT_TRUE(absl::IsCancelled(d.status()));
}

TEST(Env, HorovodSpellingIsAnAlias) {
  unsetenv("HVD_CYCLE_TIME");
  setenv("HOROVOD_CYCLE_TIME", "7", 1);
  EXPECT_EQ(*GetConfigInt("CYCLE_TIME", 1), 7);
  setenv("HVD_CYCLE_TIME", "3", 1);
  EXPECT_EQ(*GetConfigInt("CYCLE_TIME", 1), 3);
  unsetenv("HVD_CYCLE_TIME");
  unsetenv("HOROVOD_CYCLE_TIME");
  EXPECT_EQ(*GetConfigInt("CYCLE_TIME", 1), 1);
}

TEST(Env, BadIntegerNamesVariableAndText) {
  setenv("HVD_FUSION_THRESHOLD", "64MB", 1);
  auto value = GetConfigInt("FUSION_THRESHOLD", 0);
  unsetenv("HVD_FUSION_THRESHOLD");
  ASSERT_FALSE(value.ok());
  EXPECT_EQ(value.status().message(),
            "HVD_FUSION_THRESHOLD='64MB' is not an integer");
}

std::string LoggedLine(bool show_time) {
  SetLogTime(show_time);
  SetLogRank(3);
  testing::internal::CaptureStderr();
  HVD_LOG(WARNING) << "the message";
  std::string line = testing::internal::GetCapturedStderr();
  SetLogRank(-1);
  SetLogTime(true);
  return line;
}

TEST(Logging, LinesStartWithTheLocalTimeAsHorovodsDo) {
  EXPECT_THAT(LoggedLine(true),
              testing::MatchesRegex("\\[[0-9]{4}-[0-9]{2}-[0-9]{2} "
                                    "[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6}: "
                                    "hvd rank 3 WARNING\\] the message\n"));
}

TEST(Logging, HidingTheTimeLeavesTheRest) {
  EXPECT_EQ(LoggedLine(false), "[hvd rank 3 WARNING] the message\n");
}

TEST(Half, RoundTripsExactValues) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f}) {
    EXPECT_EQ(HalfToFloat(FloatToHalf(f)), f) << f;
  }
  EXPECT_EQ(FloatToHalf(1e6f), 0x7c00);
}

TEST(Half, RoundsToNearestEven) {
  // 2049 lies halfway between 2048 and 2050 in float16: ties go to even.
  EXPECT_EQ(HalfToFloat(FloatToHalf(2049.0f)), 2048.0f);
  EXPECT_EQ(HalfToFloat(FloatToHalf(2051.0f)), 2052.0f);
}

TEST(BFloat16, RoundTripsExactValues) {
  for (float f : {0.0f, 1.0f, -3.0f, 256.0f}) {
    EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(f)), f);
  }
}

TEST(Types, AverageOfIntegersIsRefusedWithReason) {
  auto status = CheckReducible(DataType::kInt32, ReduceOp::kAverage);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("int32"), std::string::npos);
  EXPECT_EQ(CheckReducible(DataType::kFloat16, ReduceOp::kAverage),
            absl::OkStatus());
  EXPECT_EQ(CheckReducible(DataType::kFloat32, ReduceOp::kAdasum).code(),
            absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace hvd
