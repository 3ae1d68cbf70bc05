#include "core/runtime/launch_contract.h"

#include <map>
#include <string>

#include "core/runtime/config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd::runtime {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using Env = std::map<std::string, std::string>;

EnvLookup Lookup(Env vars) {
  return [vars = std::move(vars)](absl::string_view name)
             -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

// HVD_* by bare name, as ParseConfig reads them.
ConfigLookup Hvd(Env vars) { return Lookup(std::move(vars)); }

const Env kSlurm = {
    {"SLURM_PROCID", "5"},          {"SLURM_STEP_NUM_TASKS", "8"},
    {"SLURM_LOCALID", "1"},         {"SLURM_NODEID", "1"},
    {"SLURM_STEP_NUM_NODES", "3"},  {"SLURM_STEP_TASKS_PER_NODE", "4,3,1"},
    {"SLURM_STEP_NODELIST", "gpu[07-09]"}, {"SLURM_JOB_ID", "4242"},
    {"SLURM_STEP_ID", "0"}};

TEST(LaunchContract, NoneWithoutARankVariable) {
  EXPECT_EQ(DetectLaunchContract(Lookup({}))->kind, ContractKind::kNone);
  absl::StatusOr<Config> c = ParseConfig(Hvd({}), Lookup({}));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->size, 1);
  EXPECT_TRUE(c->launched_by.empty());
}

TEST(LaunchContract, SlurmGivesIdentityAndRankZerosFirstNode) {
  absl::StatusOr<Config> c = ParseConfig(Hvd({}), Lookup(kSlurm));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->launched_by, "Slurm");
  EXPECT_EQ(c->rank, 5);
  EXPECT_EQ(c->size, 8);
  EXPECT_EQ(c->local_rank, 1);
  EXPECT_EQ(c->local_size, 3);  // node 1 of "4,3,1"
  EXPECT_EQ(c->cross_rank, 1);
  EXPECT_EQ(c->cross_size, 3);
  EXPECT_EQ(c->rendezvous_addr, "gpu07:" + std::to_string(
                                    20000 + (4242 * 131) % 10000));
  EXPECT_FALSE(c->serve_rendezvous);
  EXPECT_EQ(c->job_id, "slurm:4242.0");
}

TEST(LaunchContract, RankZeroServesTheRendezvous) {
  Env env = kSlurm;
  env["SLURM_PROCID"] = "0";
  env["SLURM_NODEID"] = "0";
  env["SLURM_LOCALID"] = "0";
  absl::StatusOr<Config> c = ParseConfig(Hvd({}), Lookup(env));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->serve_rendezvous);
}

TEST(LaunchContract, HvdVariablesOverrideTheContract) {
  absl::StatusOr<Config> c = ParseConfig(
      Hvd({{"RANK", "2"}, {"RENDEZVOUS_ADDR", "10.0.0.1:99"}}),
      Lookup(kSlurm));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rank, 2);
  EXPECT_EQ(c->size, 8);
  EXPECT_EQ(c->rendezvous_addr, "10.0.0.1:99");
  EXPECT_FALSE(c->serve_rendezvous);
}

TEST(LaunchContract, HvdrunsWorkersIgnoreTheToolThatStartedHvdrun) {
  Env env = kSlurm;
  env["SLURM_PROCID"] = "bad";  // would fail if it were read
  absl::StatusOr<Config> c = ParseConfig(
      Hvd({{"RANK", "1"}, {"SIZE", "2"}, {"RENDEZVOUS_ADDR", "h:1"}}),
      Lookup(env));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rank, 1);
  EXPECT_TRUE(c->launched_by.empty());
}

TEST(LaunchContract, OpenMpiComesFirstAndMeetsOverPmix) {
  Env env = kSlurm;  // mpirun inside a Slurm allocation
  env.insert({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"},
              {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
              {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
              {"RANK", "0"}, {"WORLD_SIZE", "1"}});
  absl::StatusOr<Config> c = ParseConfig(Hvd({}), Lookup(env));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->launched_by, "Open MPI");
  EXPECT_EQ(c->rank, 3);
  EXPECT_EQ(c->size, 4);
  EXPECT_EQ(c->local_size, 2);
  EXPECT_EQ(c->cross_rank, 1);  // even hosts: 3 / 2
  EXPECT_EQ(c->cross_size, 2);
  EXPECT_TRUE(c->rendezvous_over_pmix);
  EXPECT_TRUE(c->rendezvous_addr.empty());
}

TEST(LaunchContract, TorchrunServesAtMasterPortPlusOne) {
  absl::StatusOr<Config> c = ParseConfig(
      Hvd({}), Lookup({{"RANK", "1"}, {"WORLD_SIZE", "2"},
                       {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"},
                       {"MASTER_ADDR", "10.1.2.3"}, {"MASTER_PORT", "29500"},
                       {"SLURM_PROCID", "0"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->launched_by, "torchrun");
  EXPECT_EQ(c->rank, 1);
  EXPECT_EQ(c->rendezvous_addr, "10.1.2.3:29501");
}

TEST(LaunchContract, IndexedJobNeedsHvdSize) {
  const Env env = {{"JOB_COMPLETION_INDEX", "2"},
                   {"MASTER_ADDR", "hvd-0.hvd"}, {"MASTER_PORT", "29600"}};
  EXPECT_THAT(std::string(ParseConfig(Hvd({}), Lookup(env)).status()
                              .message()),
              HasSubstr("set HVD_SIZE to the Job's completions"));
  absl::StatusOr<Config> c = ParseConfig(Hvd({{"SIZE", "4"}}), Lookup(env));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rank, 2);
  EXPECT_EQ(c->size, 4);
  EXPECT_EQ(c->rendezvous_addr, "hvd-0.hvd:29600");
}

TEST(LaunchContract, BadValuesNameTheVariable) {
  Env env = kSlurm;
  env["SLURM_PROCID"] = "x";
  EXPECT_THAT(std::string(DetectLaunchContract(Lookup(env)).status()
                              .message()),
              HasSubstr("SLURM_PROCID='x' is not valid"));
  EXPECT_THAT(std::string(ParseConfig(Hvd({}), Lookup({{"RANK", "3"},
                                                       {"WORLD_SIZE", "2"},
                                                       {"MASTER_ADDR", "a"},
                                                       {"MASTER_PORT", "1"}}))
                              .status()
                              .message()),
              HasSubstr("torchrun gives rank 3 of 2"));
  EXPECT_THAT(std::string(ParseConfig(Hvd({}), Lookup({{"RANK", "0"},
                                                       {"WORLD_SIZE", "2"}}))
                              .status()
                              .message()),
              HasSubstr("MASTER_ADDR or MASTER_PORT is not"));
}

TEST(LaunchContract, SlurmsBlockLayoutPlacesEveryRank) {
  absl::StatusOr<LaunchContract> c = DetectLaunchContract(Lookup(kSlurm));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->rank_hosts,
              ElementsAre("gpu07", "gpu07", "gpu07", "gpu07", "gpu08",
                          "gpu08", "gpu08", "gpu09"));
  Env env(kSlurm.begin(), kSlurm.end());
  env["SLURM_DISTRIBUTION"] = "block:cyclic";  // nodes still in blocks
  EXPECT_EQ(DetectLaunchContract(Lookup(env))->rank_hosts, c->rank_hosts);
  env["SLURM_DISTRIBUTION"] = "cyclic";
  EXPECT_THAT(DetectLaunchContract(Lookup(env))->rank_hosts, IsEmpty());
  env = Env(kSlurm.begin(), kSlurm.end());
  env["SLURM_STEP_NUM_TASKS"] = "7";  // counts that do not add up
  env["SLURM_PROCID"] = "1";
  EXPECT_THAT(DetectLaunchContract(Lookup(env))->rank_hosts, IsEmpty());
}

TEST(LaunchContract, SlurmListsAreReadCompressed) {
  Env env(kSlurm.begin(), kSlurm.end());
  env["SLURM_STEP_NODELIST"] = "n[01-04,07],gpu2";
  env["SLURM_STEP_TASKS_PER_NODE"] = "4(x2),2";
  env["SLURM_NODEID"] = "2";
  absl::StatusOr<LaunchContract> c = DetectLaunchContract(Lookup(env));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rendezvous_host, "n01");
  EXPECT_EQ(c->local_size, 2);
  env["SLURM_NODEID"] = "3";
  EXPECT_THAT(std::string(DetectLaunchContract(Lookup(env)).status().message()),
              HasSubstr("SLURM_STEP_TASKS_PER_NODE='4(x2),2' has no entry for "
                        "node 3"));
  env["SLURM_NODEID"] = "0";
  env["SLURM_STEP_NODELIST"] = "n[";
  EXPECT_THAT(std::string(DetectLaunchContract(Lookup(env)).status().message()),
              HasSubstr("SLURM_STEP_NODELIST: bad Slurm host list 'n['"));
  env["SLURM_STEP_NODELIST"] = "n1";
  env["SLURM_STEP_TASKS_PER_NODE"] = "4(x,2";
  EXPECT_THAT(std::string(DetectLaunchContract(Lookup(env)).status().message()),
              HasSubstr("SLURM_STEP_TASKS_PER_NODE: bad entry"));
}

}  // namespace
}  // namespace hvd::runtime
