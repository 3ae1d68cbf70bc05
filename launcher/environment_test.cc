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

TEST(WorkerEnvironment, IdentityOverridesBaseAndOverlay) {
  WorkerIdentity id;
  id.rank = 5;
  id.size = 8;
  id.local_rank = 1;
  id.local_size = 4;
  id.cross_rank = 1;
  id.cross_size = 2;
  id.hostname = "h2";
  id.rendezvous_addr = "10.0.0.1:4000";
  id.job_token = "secret";
  id.iface = "10.0.0.3";
  auto env = WorkerEnvironment({"PATH=/agent", "HVD_RANK=0", "KEEP=1"},
                               {{"PATH", "/submit"}, {"HOROVOD_RANK", "7"}},
                               id);
  EXPECT_THAT(env, Contains("PATH=/submit"));
  EXPECT_THAT(env, Contains("KEEP=1"));
  EXPECT_THAT(env, Contains("HVD_RANK=5"));
  EXPECT_THAT(env, Contains("HOROVOD_RANK=5"));
  EXPECT_THAT(env, Contains("HVD_SIZE=8"));
  EXPECT_THAT(env, Contains("HVD_LOCAL_RANK=1"));
  EXPECT_THAT(env, Contains("HVD_LOCAL_SIZE=4"));
  EXPECT_THAT(env, Contains("HVD_CROSS_RANK=1"));
  EXPECT_THAT(env, Contains("HOROVOD_CROSS_SIZE=2"));
  EXPECT_THAT(env, Contains("HVD_HOSTNAME=h2"));
  EXPECT_THAT(env, Contains("HVD_RENDEZVOUS_ADDR=10.0.0.1:4000"));
  EXPECT_THAT(env, Contains("HVD_JOB_TOKEN=secret"));
  EXPECT_THAT(env, Contains("HVD_IFACE=10.0.0.3"));
  EXPECT_THAT(env, Not(Contains("HVD_RANK=0")));
}

TEST(WorkerEnvironment, InheritedIfaceDoesNotLeak) {
  WorkerIdentity id;
  auto env = WorkerEnvironment({"HVD_IFACE=eth9"}, {}, id);
  EXPECT_THAT(env, Not(Contains("HVD_IFACE=eth9")));
}

}  // namespace
}  // namespace launcher
}  // namespace hvd
