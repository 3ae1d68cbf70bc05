#include "launcher/environment.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd {
namespace launcher {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
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
  o.transport = "rdma";
  auto env = TunableEnvironment(o);
  EXPECT_EQ(env["HVD_FUSION_THRESHOLD"], "2097152");
  EXPECT_EQ(env["HOROVOD_FUSION_THRESHOLD"], "2097152");
  EXPECT_EQ(env["HVD_CYCLE_TIME"], "3.5");
  EXPECT_EQ(env["HVD_STALL_CHECK_DISABLE"], "1");
  EXPECT_EQ(env["HOROVOD_HIERARCHICAL_ALLREDUCE"], "1");
  EXPECT_EQ(env["HOROVOD_LOG_LEVEL"], "debug");
  EXPECT_EQ(env["HVD_TRANSPORT"], "rdma");
  EXPECT_EQ(env.count("HVD_CACHE_CAPACITY"), 0u);
}

TEST(TunableEnvironment, NoFormsAreZeroAndHorovodsOtherKnobsAreMapped) {
  Options o;
  o.hierarchical_allreduce = false;
  o.hierarchical_allgather = true;
  o.no_stall_check = false;
  o.timeline_mark_cycles = true;
  o.log_hide_timestamp = true;
  o.timeout_seconds = 45;
  o.nccl_ib_disable = true;
  auto env = TunableEnvironment(o);
  EXPECT_EQ(env["HVD_HIERARCHICAL_ALLREDUCE"], "0");
  EXPECT_EQ(env["HOROVOD_HIERARCHICAL_ALLGATHER"], "1");
  EXPECT_EQ(env["HOROVOD_STALL_CHECK_DISABLE"], "0");
  EXPECT_EQ(env["HVD_TIMELINE_MARK_CYCLES"], "1");
  EXPECT_EQ(env["HOROVOD_LOG_HIDE_TIME"], "1");
  EXPECT_EQ(env["HVD_TIMEOUT_SECONDS"], "45");
  EXPECT_EQ(env["NCCL_IB_DISABLE"], "1");
}

TEST(TunableEnvironment, AutotuneFlagsBecomeItsVariables) {
  Options o;
  o.autotune = true;
  o.autotune_log_file = "tune.csv";
  o.autotune_warmup_samples = 2;
  o.autotune_steps_per_sample = 7;
  o.autotune_max_samples = 15;
  o.autotune_noise = 0.5;
  auto env = TunableEnvironment(o);
  EXPECT_EQ(env["HVD_AUTOTUNE"], "1");
  EXPECT_EQ(env["HOROVOD_AUTOTUNE_LOG"], "tune.csv");
  EXPECT_EQ(env["HVD_AUTOTUNE_WARMUP_SAMPLES"], "2");
  EXPECT_EQ(env["HVD_AUTOTUNE_STEPS_PER_SAMPLE"], "7");
  EXPECT_EQ(env["HVD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES"], "15");
  EXPECT_EQ(env["HVD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE"], "0.5");
  o = Options();
  o.autotune = false;
  env = TunableEnvironment(o);
  EXPECT_EQ(env["HVD_AUTOTUNE"], "0");
  EXPECT_EQ(env.count("HVD_AUTOTUNE_LOG"), 0u);
}

TEST(ApplyIdentityVariables, DashXOfAnIdentityVariableIsAUsageError) {
  for (const char* x : {"HVD_RANK=3", "HOROVOD_SIZE=2", "HVD_JOB_TOKEN"}) {
    Options o;
    o.env = {x};
    absl::Status s = ApplyIdentityVariables({}, &o);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << x;
    EXPECT_THAT(s.message(), HasSubstr("for each worker itself")) << x;
  }
}

TEST(ApplyIdentityVariables, IfaceFromTheShellNamesTheInterfaces) {
  Options o;
  ASSERT_TRUE(ApplyIdentityVariables({"HVD_IFACE=eth1, ib0"}, &o).ok());
  EXPECT_THAT(o.network_interfaces, ElementsAre("eth1", "ib0"));
  Options horovod;
  ASSERT_TRUE(ApplyIdentityVariables({"HOROVOD_IFACE=eth2"}, &horovod).ok());
  EXPECT_THAT(horovod.network_interfaces, ElementsAre("eth2"));
}

TEST(ApplyIdentityVariables, DashXIfaceWinsOverTheShell) {
  Options o;
  o.env = {"HVD_IFACE=eth3"};
  ASSERT_TRUE(ApplyIdentityVariables({"HVD_IFACE=eth1"}, &o).ok());
  EXPECT_THAT(o.network_interfaces, ElementsAre("eth3"));
}

TEST(ApplyIdentityVariables, InsideAWorkerTheInheritedIfaceIsIgnored) {
  Options o;
  ASSERT_TRUE(
      ApplyIdentityVariables({"HVD_RANK=0", "HVD_IFACE=10.0.0.1"}, &o).ok());
  EXPECT_THAT(o.network_interfaces, IsEmpty());
  // Unless forwarded by name.
  o.env = {"HVD_IFACE"};
  ASSERT_TRUE(
      ApplyIdentityVariables({"HVD_RANK=0", "HVD_IFACE=10.0.0.1"}, &o).ok());
  EXPECT_THAT(o.network_interfaces, ElementsAre("10.0.0.1"));
}

TEST(ApplyIdentityVariables, IfaceAndTheFlagMustAgree) {
  Options o;
  o.network_interfaces = {"eth0"};
  EXPECT_TRUE(ApplyIdentityVariables({"HVD_IFACE=eth0"}, &o).ok());
  absl::Status s = ApplyIdentityVariables({"HVD_IFACE=eth1"}, &o);
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_EQ(s.message(),
            "HVD_IFACE=eth1 and --network-interfaces eth0 disagree: give the "
            "data-plane interfaces once");
}

}  // namespace
}  // namespace launcher
}  // namespace hvd
