#include "launcher/slurm_allocation.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd {
namespace launcher {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

// What sbatch -N2 --ntasks-per-node=2 gives its script (seen on the test
// cluster of tests/slurm).
std::vector<std::string> BatchEnvironment() {
  return {"SLURM_JOB_ID=12",
          "SLURM_JOB_NODELIST=h[1-2]",
          "SLURM_TASKS_PER_NODE=2(x2)",
          "SLURM_JOB_CPUS_PER_NODE=4(x2)",
          "SLURM_NTASKS=4",
          "SLURM_PROCID=0",
          "PATH=/usr/bin"};
}

TEST(ReadSlurmAllocation, OutsideAnAllocation) {
  auto got = ReadSlurmAllocation({"PATH=/usr/bin", "SLURM_CONF=/etc/x"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE(got->has_value());
}

TEST(ReadSlurmAllocation, TasksPerNode) {
  auto got = ReadSlurmAllocation(BatchEnvironment());
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->has_value());
  const SlurmAllocation& a = **got;
  EXPECT_EQ(a.job_id, "12");
  ASSERT_EQ(a.nodes.size(), 2u);
  EXPECT_EQ(a.nodes[0].name, "h1");
  EXPECT_EQ(a.nodes[0].slots, 2);
  EXPECT_EQ(a.nodes[1].name, "h2");
  EXPECT_EQ(a.nodes[1].slots, 2);
  EXPECT_EQ(a.source, "SLURM_JOB_NODELIST=h[1-2], SLURM_TASKS_PER_NODE=2(x2)");
}

TEST(ReadSlurmAllocation, UnevenTasksAndOldNames) {
  auto got = ReadSlurmAllocation({"SLURM_JOBID=7", "SLURM_NODELIST=n[01-03]",
                                  "SLURM_TASKS_PER_NODE=3,1(x2)"});
  ASSERT_TRUE(got.ok()) << got.status();
  const SlurmAllocation& a = **got;
  ASSERT_EQ(a.nodes.size(), 3u);
  EXPECT_EQ(a.nodes[0].name, "n01");
  EXPECT_EQ(a.nodes[0].slots, 3);
  EXPECT_EQ(a.nodes[2].name, "n03");
  EXPECT_EQ(a.nodes[2].slots, 1);
}

TEST(ReadSlurmAllocation, CpusPerNodeWhenNoTasksPerNode) {
  auto got = ReadSlurmAllocation({"SLURM_JOB_ID=3", "SLURM_JOB_NODELIST=a,b",
                                  "SLURM_JOB_CPUS_PER_NODE=8,6",
                                  "SLURM_CPUS_PER_TASK=4"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((**got).nodes[0].slots, 2);
  EXPECT_EQ((**got).nodes[1].slots, 1);
  EXPECT_EQ((**got).source,
            "SLURM_JOB_NODELIST=a,b, SLURM_JOB_CPUS_PER_NODE=8,6 / "
            "SLURM_CPUS_PER_TASK=4");
}

// Inside a step (srun hvdrun, salloc's interactive step) SLURM_TASKS_PER_NODE
// counts the step's tasks: the job's CPUs stand in.
TEST(ReadSlurmAllocation, InsideAStepUsesTheJobsCpus) {
  std::vector<std::string> env = {"SLURM_JOB_ID=5", "SLURM_JOB_NODELIST=h[1-2]",
                                  "SLURM_STEP_ID=0", "SLURM_TASKS_PER_NODE=1",
                                  "SLURM_JOB_CPUS_PER_NODE=2(x2)"};
  auto got = ReadSlurmAllocation(env);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ((**got).nodes.size(), 2u);
  EXPECT_EQ((**got).nodes[0].slots, 2);
  EXPECT_EQ((**got).nodes[1].slots, 2);
}

TEST(ReadSlurmAllocation, BadInputNamesTheVariable) {
  auto error = [](std::vector<std::string> env) {
    auto got = ReadSlurmAllocation(env);
    EXPECT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(got.status().message());
  };
  EXPECT_THAT(
      error({"SLURM_JOB_ID=1"}),
      HasSubstr("SLURM_JOB_ID is set (1) but SLURM_JOB_NODELIST is not"));
  EXPECT_THAT(error({"SLURM_JOB_ID=1", "SLURM_JOB_NODELIST=h[2-1]",
                     "SLURM_TASKS_PER_NODE=1"}),
              HasSubstr("SLURM_JOB_NODELIST: bad Slurm host list 'h[2-1]'"));
  EXPECT_THAT(error({"SLURM_JOB_ID=1", "SLURM_JOB_NODELIST=h1",
                     "SLURM_TASKS_PER_NODE=two"}),
              HasSubstr("SLURM_TASKS_PER_NODE: bad entry 'two'"));
  EXPECT_THAT(error({"SLURM_JOB_ID=1", "SLURM_JOB_NODELIST=h[1-3]",
                     "SLURM_TASKS_PER_NODE=2(x2)"}),
              HasSubstr("Slurm's variables disagree: 3 nodes but 2 slot "
                        "counts (SLURM_JOB_NODELIST=h[1-3], "
                        "SLURM_TASKS_PER_NODE=2(x2))"));
  EXPECT_THAT(error({"SLURM_JOB_ID=1", "SLURM_JOB_NODELIST=h1"}),
              HasSubstr("neither SLURM_TASKS_PER_NODE nor "
                        "SLURM_JOB_CPUS_PER_NODE is set"));
  EXPECT_THAT(error({"SLURM_JOB_ID=1", "SLURM_JOB_NODELIST=h1",
                     "SLURM_JOB_CPUS_PER_NODE=4", "SLURM_CPUS_PER_TASK=0"}),
              HasSubstr("SLURM_CPUS_PER_TASK: '0' is not a positive integer"));
}

TEST(ApplySlurmAllocation, TakesTheHostsWhenNoneAreGiven) {
  Options o;
  o.command = {"train"};
  ASSERT_TRUE(ApplySlurmAllocation(BatchEnvironment(), &o).ok());
  ASSERT_TRUE(o.slurm.has_value());
  EXPECT_EQ(o.slurm->nodes.size(), 2u);
  EXPECT_TRUE(ValidateOptions(o).ok()) << "no -np: every task slot";
}

TEST(ApplySlurmAllocation, NpUpToTheSlots) {
  Options o;
  o.num_proc = 4;
  EXPECT_TRUE(ApplySlurmAllocation(BatchEnvironment(), &o).ok());
  EXPECT_TRUE(o.slurm.has_value());
}

TEST(ApplySlurmAllocation, NpBeyondTheSlotsIsAUsageError) {
  Options o;
  o.num_proc = 5;
  absl::Status s = ApplySlurmAllocation(BatchEnvironment(), &o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "-np 5 is more than the 4 task slots of Slurm job 12 "
            "(SLURM_JOB_NODELIST=h[1-2], SLURM_TASKS_PER_NODE=2(x2))");
  EXPECT_FALSE(o.slurm.has_value());
}

TEST(ApplySlurmAllocation, HostsGivenOrOtherModesLeaveItAlone) {
  std::vector<std::string> broken = {"SLURM_JOB_ID=1"};  // would fail
  Options with_hosts;
  with_hosts.hosts = "a:2";
  Options with_hostfile;
  with_hostfile.hostfile = "/f";
  Options orchestrator;
  orchestrator.rendezvous_only = true;
  Options elastic;
  elastic.elastic.min_np = 1;
  for (Options* o : {&with_hosts, &with_hostfile, &orchestrator, &elastic}) {
    EXPECT_TRUE(ApplySlurmAllocation(broken, o).ok());
    EXPECT_FALSE(o->slurm.has_value());
  }
  Options outside;
  EXPECT_TRUE(ApplySlurmAllocation({"PATH=/bin"}, &outside).ok());
  EXPECT_FALSE(outside.slurm.has_value());
}

TEST(ApplySlurmAllocation, MalformedVariableIsAUsageError) {
  Options o;
  absl::Status s = ApplySlurmAllocation(
      {"SLURM_JOB_ID=1", "SLURM_JOB_NODELIST=h[1", "SLURM_TASKS_PER_NODE=1"},
      &o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("SLURM_JOB_NODELIST: bad Slurm host list"));
}

TEST(SrunEnvironment, DropsStepShapingVariablesOnly) {
  EXPECT_THAT(SrunEnvironment({"SLURM_JOB_ID=3", "SLURM_GPUS_PER_TASK=1",
                               "SLURM_CPU_BIND=cores", "SLURM_CONF=/c",
                               "SLURM_STDINMODE=0", "PATH=/bin", "X"}),
              ElementsAre("SLURM_JOB_ID=3", "SLURM_CONF=/c", "PATH=/bin", "X"));
}

TEST(DropPerNodeSlurmVariables, KeepsOthersAndWhatXNames) {
  std::map<std::string, std::string> env = {
      {"SLURM_PROCID", "0"}, {"SLURMD_NODENAME", "h1"},
      {"SLURM_JOB_ID", "3"}, {"CUDA_VISIBLE_DEVICES", "0,1"},
      {"PATH", "/bin"},      {"MY_SLURM_NOTE", "x"}};
  DropPerNodeSlurmVariables({"SLURM_JOB_ID", "FOO=1"}, &env);
  std::vector<std::string> names;
  for (const auto& [k, v] : env) names.push_back(k);
  EXPECT_THAT(names,
              UnorderedElementsAre("SLURM_JOB_ID", "PATH", "MY_SLURM_NOTE"));
  std::map<std::string, std::string> empty;
  DropPerNodeSlurmVariables({}, &empty);
  EXPECT_THAT(empty, IsEmpty());
}

}  // namespace
}  // namespace launcher
}  // namespace hvd
