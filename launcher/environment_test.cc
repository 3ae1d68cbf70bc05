#include "launcher/environment.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd {
namespace launcher {
namespace {

using ::testing::Contains;
using ::testing::Not;

TEST(ForwardedEnvironment, DropsHostAndSessionVariables) {
  auto env = ForwardedEnvironment(
      {"PATH=/bin", "HOSTNAME=sub", "SSH_CONNECTION=1 2 3 4", "DISPLAY=:0",
       "PWD=/x", "HVD_RANK=3", "HOROVOD_JOB_TOKEN=t", "MY_VAR=1",
       "HVD_FUSION_THRESHOLD=9"},
      {});
  EXPECT_EQ(env.count("PATH"), 1u);
  EXPECT_EQ(env.count("MY_VAR"), 1u);
  EXPECT_EQ(env.count("HVD_FUSION_THRESHOLD"), 1u);
  for (const char* gone : {"HOSTNAME", "SSH_CONNECTION", "DISPLAY", "PWD",
                           "HVD_RANK", "HOROVOD_JOB_TOKEN"}) {
    EXPECT_EQ(env.count(gone), 0u) << gone;
  }
}

TEST(ForwardedEnvironment, DashXForwardsExcludedAndSetsValues) {
  auto env = ForwardedEnvironment({"DISPLAY=:0", "A=1"},
                                  {"DISPLAY", "A=2", "B=x=y", "UNSET_ONE"});
  EXPECT_EQ(env["DISPLAY"], ":0");
  EXPECT_EQ(env["A"], "2");
  EXPECT_EQ(env["B"], "x=y");
  EXPECT_EQ(env.count("UNSET_ONE"), 0u);
}

TEST(TunableEnvironment, FlagsBecomeBothSpellings) {
  Options o;
  o.fusion_threshold_mb = 2;
  o.cycle_time_ms = 3.5;
  o.no_stall_check = true;
  o.hierarchical_allreduce = true;
  o.log_level = "debug";
  auto env = TunableEnvironment(o);
  EXPECT_EQ(env["HVD_FUSION_THRESHOLD"], "2097152");
  EXPECT_EQ(env["HOROVOD_FUSION_THRESHOLD"], "2097152");
  EXPECT_EQ(env["HVD_CYCLE_TIME"], "3.5");
  EXPECT_EQ(env["HVD_STALL_CHECK_DISABLE"], "1");
  EXPECT_EQ(env["HOROVOD_HIERARCHICAL_ALLREDUCE"], "1");
  EXPECT_EQ(env["HOROVOD_LOG_LEVEL"], "debug");
  EXPECT_EQ(env.count("HVD_CACHE_CAPACITY"), 0u);
}

}  // namespace
}  // namespace launcher
}  // namespace hvd
