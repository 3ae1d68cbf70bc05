// The runtime through the C ABI in real processes: hvd_driver started N times
// against a rendezvous server hosted by the test.
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "core/testing/job_runner.h"
#include "tests/runtime/timeline.pb.h"

namespace hvd::testing {
namespace {

void ExpectAllPass(const std::vector<WorkerResult>& results) {
  for (size_t r = 0; r < results.size(); ++r) {
    EXPECT_EQ(results[r].exit_code, 0) << Describe(results);
    EXPECT_TRUE(absl::StrContains(results[r].out, absl::StrCat("rank ", r, ": PASS")))
        << Describe(results);
  }
}

void ExpectEveryRankPrints(const std::vector<WorkerResult>& results,
                           const std::string& text) {
  for (const auto& result : results) {
    EXPECT_TRUE(absl::StrContains(result.out, text))
        << "missing: " << text << "\n" << Describe(results);
  }
}

class CollectivesTest : public ::testing::TestWithParam<int> {};

TEST_P(CollectivesTest, EveryCollectiveIsCorrect) {
  JobSpec spec;
  spec.size = GetParam();
  spec.args = {"collectives"};
  ExpectAllPass(RunJob(spec));
}

INSTANTIATE_TEST_SUITE_P(Sizes, CollectivesTest, ::testing::Values(2, 3, 4));

// Each rank names a host of its own, so every pair of ranks is between
// hosts, where HVD_TRANSPORT=rdma puts the RDMA transport (here over
// libfabric's tcp provider, on loopback) instead of shared memory.
TEST(Transport, RdmaBetweenHostsRunsEveryCollective) {
  JobSpec spec;
  spec.size = 3;
  spec.args = {"collectives"};
  spec.env = {{"HVD_TRANSPORT", "rdma"},
              {"HVD_RDMA_PROVIDER", "tcp"},
              {"HVD_LOG_LEVEL", "info"}};
  for (int r = 0; r < spec.size; ++r) {
    spec.rank_env[r] = {{"HVD_HOSTNAME", absl::StrCat("rdma-host-", r)}};
  }
  auto results = RunJob(spec);
  ExpectAllPass(results);
  for (size_t r = 0; r < results.size(); ++r) {
    EXPECT_TRUE(absl::StrContains(
        results[r].err,
        absl::StrCat("rank ", r, ": ranks on other hosts over rdma")))
        << Describe(results);
  }
}

TEST(Transport, RdmaWithAProviderNobodyHasFailsInitOnEveryRank) {
  JobSpec spec;
  spec.size = 2;
  spec.args = {"collectives"};
  spec.env = {{"HVD_TRANSPORT", "rdma"}, {"HVD_RDMA_PROVIDER", "nosuch"},
              {"HVD_START_TIMEOUT", "10"}};
  for (int r = 0; r < spec.size; ++r) {
    spec.rank_env[r] = {{"HVD_HOSTNAME", absl::StrCat("rdma-host-", r)}};
  }
  auto results = RunJob(spec);
  for (const WorkerResult& result : results) {
    EXPECT_NE(result.exit_code, 0) << Describe(results);
    EXPECT_TRUE(absl::StrContains(result.out + result.err,
                                  "HVD_TRANSPORT=rdma, but"))
        << Describe(results);
  }
}

TEST(Runtime, PlainProcessIsAJobOfSizeOne) {
  JobSpec spec;
  spec.size = 1;
  spec.bare = true;
  spec.args = {"collectives"};
  auto results = RunJob(spec);
  ExpectAllPass(results);
  EXPECT_TRUE(absl::StrContains(results[0].out, "rank 0: size 1"));
}

// Stats line rank 0 logs at shutdown (HVD_LOG_LEVEL=info).
std::string StepsStats(const std::map<std::string, std::string>& env) {
  JobSpec spec;
  spec.size = 2;
  spec.args = {"steps"};
  spec.env = env;
  spec.env["HVD_LOG_LEVEL"] = "info";
  auto results = RunJob(spec);
  ExpectAllPass(results);
  const std::string& err = results[0].err;
  const size_t at = err.find("negotiation: ");
  return at == std::string::npos ? "" : err.substr(at, err.find('\n', at) - at);
}

// Negotiation is driven by submissions, not by the cycle timer: with a
// 10-minute HVD_CYCLE_TIME the job (60 s timeout) still finishes, whichever
// rank submits last, in full and by cache bit.
TEST(Runtime, LateRankNeverWaitsOutTheCycleTime) {
  for (int size : {2, 3}) {
    JobSpec spec;
    spec.size = size;
    spec.args = {"staggered"};
    spec.env["HVD_CYCLE_TIME"] = "600000";
    ExpectAllPass(RunJob(spec));
  }
}

TEST(Runtime, FusionAndCacheOnByDefault) {
  const std::string stats = StepsStats({});
  EXPECT_FALSE(absl::StrContains(stats, " 0 tensors by cache bit")) << stats;
  EXPECT_FALSE(absl::StrContains(stats, " 0 tensors fused")) << stats;
}

TEST(Runtime, FusionThresholdZeroTurnsFusionOff) {
  const std::string stats = StepsStats({{"HVD_FUSION_THRESHOLD", "0"}});
  EXPECT_TRUE(absl::StrContains(stats, " 0 tensors fused")) << stats;
}

TEST(Runtime, CacheCapacityZeroTurnsCacheOff) {
  const std::string stats =
      StepsStats({{"HOROVOD_CACHE_CAPACITY", "0"}});  // Horovod's spelling.
  EXPECT_TRUE(absl::StrContains(stats, " 0 tensors by cache bit")) << stats;
  EXPECT_TRUE(absl::StrContains(stats, "1600 requests in full")) << stats;
}

std::vector<WorkerResult> RunMismatch(const std::string& kind) {
  JobSpec spec;
  spec.size = 2;
  spec.args = {"mismatch_" + kind};
  auto results = RunJob(spec);
  ExpectAllPass(results);
  return results;
}

TEST(Mismatch, ShapesOnEveryRank) {
  ExpectEveryRankPrints(RunMismatch("shape"),
                        "error: Mismatched shapes for allreduce of tensor 'x': "
                        "rank 0 has [4], rank 1 has [5]");
}

TEST(Mismatch, DtypesOnEveryRank) {
  ExpectEveryRankPrints(RunMismatch("dtype"),
                        "error: Mismatched data types for allreduce of tensor "
                        "'x': rank 0 has float32, rank 1 has float64");
}

TEST(Mismatch, OpsOnEveryRank) {
  ExpectEveryRankPrints(RunMismatch("op"),
                        "error: Mismatched reduction ops for allreduce of "
                        "tensor 'x': rank 0 has Sum, rank 1 has Max");
}

TEST(Mismatch, ScaleFactorsOnEveryRank) {
  ExpectEveryRankPrints(RunMismatch("scale"),
                        "error: Mismatched postscale factors for allreduce of "
                        "tensor 'x': rank 0 has 1, rank 1 has 2");
}

TEST(Mismatch, BroadcastRootsOnEveryRank) {
  ExpectEveryRankPrints(RunMismatch("root"),
                        "error: Mismatched root ranks for broadcast of tensor "
                        "'x': rank 0 has 0, rank 1 has 1");
}

TEST(Mismatch, NameAlreadyInFlightIsRefusedByTheCallAndTheFirstCompletes) {
  std::vector<WorkerResult> results = RunMismatch("duplicate");
  EXPECT_TRUE(absl::StrContains(
      results[0].out,
      "rank 0: refused: an operation named 'x' is still in flight on rank 0: "
      "wait for it, or use another name"))
      << Describe(results);
}

TEST(Stall, RankZeroWarnsNamingTensorAndMissingRank) {
  JobSpec spec;
  spec.size = 2;
  spec.args = {"stall"};
  spec.env = {{"HVD_STALL_CHECK_TIME_SECONDS", "1"}};
  auto results = RunJob(spec);
  ExpectAllPass(results);
  EXPECT_TRUE(absl::StrContains(
      results[0].err,
      "Stall detected: tensor 'late.tensor' (allreduce, process set 0) has "
      "been submitted by ranks [0] but not by ranks [1]"))
      << Describe(results);
}

TEST(Stall, ShutdownTimeTurnsTheStallIntoAnErrorOnEveryRank) {
  JobSpec spec;
  spec.size = 2;
  spec.args = {"stall_shutdown"};
  spec.env = {{"HVD_STALL_CHECK_TIME_SECONDS", "1"},
              {"HVD_STALL_SHUTDOWN_TIME_SECONDS", "2"}};
  auto results = RunJob(spec);
  ExpectAllPass(results);
  ExpectEveryRankPrints(results, "error: hvd has been shut down: stall shutdown: tensor '");
  // ABORTED (10): a stall ends the job; Python raises HvdStallError.
  ExpectEveryRankPrints(results, "(status code 10)");
}

TEST(Faults, PeerKilledMidAllreduceFailsTheSurvivorsWithoutHanging) {
  JobSpec spec;
  spec.size = 3;
  spec.args = {"kill_peer"};
  spec.env = {{"HVD_TIMEOUT_SECONDS", "10"}};
  spec.timeout = absl::Seconds(40);
  const absl::Time start = absl::Now();
  auto results = RunJob(spec);
  EXPECT_LT(absl::Now() - start, absl::Seconds(30)) << Describe(results);
  EXPECT_EQ(results[2].signal, 9) << Describe(results);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r].exit_code, 0) << Describe(results);
    EXPECT_TRUE(absl::StrContains(results[r].out, "error: allreduce of tensor 'big.") ||
                absl::StrContains(results[r].out, "error: negotiation with rank"))
        << Describe(results);
  }
}

TEST(Faults, WrongTokenIsRefused) {
  JobSpec spec;
  spec.size = 2;
  spec.args = {"collectives"};
  spec.env = {{"HVD_START_TIMEOUT", "5"}};
  spec.rank_env[1] = {{"HVD_JOB_TOKEN", "not-the-token"}};
  auto results = RunJob(spec);
  EXPECT_EQ(results[1].exit_code, 3) << Describe(results);
  EXPECT_TRUE(absl::StrContains(results[1].out, "missing or wrong job token"))
      << Describe(results);
  EXPECT_EQ(results[0].exit_code, 3) << Describe(results);
}

TEST(Timeline, IsJsonWithNegotiationAndActivitySpans) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = absl::StrCat(tmp ? tmp : "/tmp", "/timeline.json");
  JobSpec spec;
  spec.size = 2;
  spec.args = {"timeline"};
  spec.env = {{"HVD_TIMELINE", path}};
  ExpectAllPass(RunJob(spec));
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  // Typed messages, not google.protobuf.Struct: lookups in its map, inlined
  // from protobuf's headers, crashed (SEGV) under ThreadSanitizer against
  // Debian's uninstrumented libprotobuf.
  Timeline timeline;
  google::protobuf::util::JsonParseOptions lenient;
  lenient.ignore_unknown_fields = true;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(
                  absl::StrCat("{\"events\": ", text.str(), "}"), &timeline,
                  lenient)
                  .ok())
      << text.str();
  std::set<std::string> names, rows;
  for (const TimelineEvent& event : timeline.events()) {
    names.insert(event.name());
    if (event.name() == "process_name") rows.insert(event.args().name());
  }
  for (const char* expected : {"NEGOTIATE_allreduce", "QUEUE", "ALLREDUCE",
                               "MEMCPY_IN_FUSION_BUFFER", "MEMCPY_OUT_FUSION_BUFFER"}) {
    EXPECT_TRUE(names.count(expected)) << expected << "\n" << text.str();
  }
  EXPECT_TRUE(rows.count("timeline.a"));
  EXPECT_TRUE(rows.count("timeline.b"));
}

}  // namespace
}  // namespace hvd::testing
