// Shutting down and initializing again in one process -- what every elastic
// reset does -- leaks nothing: two reinit_worker processes on one host
// (shared memory between them) run 50 rounds of init, allreduce, shutdown,
// and each checks that what it holds between rounds (threads, fds,
// shared-memory segments and mappings, resident memory) stopped growing
// after the first rounds.
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/testing/job_runner.h"
#include "gtest/gtest.h"

namespace hvd::testing {
namespace {

TEST(Reinit, FiftyRoundsInOneProcessLeakNothing) {
  JobSpec spec;
  spec.size = 2;
  spec.driver = "tests/runtime/reinit_worker";
  // The first rounds fill what is made once (gRPC's threads and caches,
  // malloc's arenas); after them nothing may grow.
  spec.args = {"50", "5"};
  spec.env["HVD_SHM"] = "1";
  spec.timeout = absl::Seconds(240);
  const std::vector<WorkerResult> results = RunJob(spec);
  for (size_t r = 0; r < results.size(); ++r) {
    std::cout << results[r].out;  // what each held, for the test log
    EXPECT_EQ(results[r].exit_code, 0) << Describe(results);
    EXPECT_TRUE(
        absl::StrContains(results[r].out, absl::StrCat("rank ", r, ": PASS")))
        << Describe(results);
  }
}

}  // namespace
}  // namespace hvd::testing
