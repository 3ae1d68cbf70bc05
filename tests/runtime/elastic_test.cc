// An elastic job through the C ABI, in real processes: two elastic_worker
// processes against the rendezvous server hosting a small launcher-side
// Elastic service (the real one is hvdrun's), scripted for three rounds:
// round 0 is aborted (while both workers wait in a collective, or while they
// connect to a third member that never comes), round 1 (ranks swapped)
// announces added hosts, then both workers are removed.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "core/testing/job_runner.h"
#include "gtest/gtest.h"
#include "proto/elastic.grpc.pb.h"

namespace hvd::testing {
namespace {

namespace pb = ::hvd::elastic;

class TwoWorkerLauncher final : public pb::Elastic::Service {
 public:
  static constexpr int kWorkers = 2;
  static constexpr int kRounds = 2;

  // Round 0 has `round_zero_size` members: more than kWorkers stand for
  // members lost after the round formed, before they connected.
  explicit TwoWorkerLauncher(int round_zero_size = kWorkers)
      : round_zero_size_(round_zero_size) {}

  // Round r forms once both workers asked for a round after r - 1; the
  // workers' ranks follow their ids, reversed in odd rounds.
  grpc::Status Join(grpc::ServerContext*, const pb::JoinRequest* request,
                    pb::JoinResponse* response) override {
    const int round = request->last_round() + 1;
    if (round >= kRounds) {
      response->set_outcome(pb::JoinResponse::EXIT);
      response->set_reason("the test is over");
      return grpc::Status::OK;
    }
    absl::MutexLock lock(&mu_);
    std::set<std::string>& joined = joined_[round];
    joined.insert(request->worker_id());
    auto formed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return joined.size() == kWorkers;
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&formed),
                              absl::Milliseconds(request->wait_ms()))) {
      response->set_outcome(pb::JoinResponse::PENDING);
      return grpc::Status::OK;
    }
    int rank = static_cast<int>(std::distance(
        joined.begin(), joined.find(request->worker_id())));
    if (round % 2 == 1) rank = kWorkers - 1 - rank;
    response->set_outcome(pb::JoinResponse::ASSIGNED);
    const int size = round == 0 ? round_zero_size_ : kWorkers;
    response->set_round(round);
    response->set_rank(rank);
    response->set_size(size);
    response->set_local_rank(rank);
    response->set_local_size(size);
    response->set_cross_rank(0);
    response->set_cross_size(1);
    return grpc::Status::OK;
  }

  // Round 0 ends a second after both workers watch it (they are waiting in
  // a collective, or connecting, by then); round 1 announces added hosts at
  // once.
  grpc::Status Watch(grpc::ServerContext* context,
                     const pb::WatchRequest* request,
                     grpc::ServerWriter<pb::RoundEvent>* writer) override {
    pb::RoundEvent event;
    if (request->round() == 0) {
      {
        absl::MutexLock lock(&mu_);
        ++watching_round_zero_;
        auto both = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return watching_round_zero_ == kWorkers;
        };
        mu_.AwaitWithTimeout(absl::Condition(&both), absl::Seconds(30));
      }
      absl::SleepFor(absl::Seconds(1));
      event.set_kind(pb::RoundEvent::ABORT);
      event.set_reason("rank 1 on host h2 exited with status 1");
      writer->Write(event);
      return grpc::Status::OK;
    }
    event.set_kind(pb::RoundEvent::HOSTS_UPDATED);
    event.set_seq(7);
    event.set_added(true);
    writer->Write(event);
    while (!context->IsCancelled()) absl::SleepFor(absl::Milliseconds(20));
    return grpc::Status::OK;
  }

 private:
  const int round_zero_size_;
  absl::Mutex mu_;
  std::map<int, std::set<std::string>> joined_ ABSL_GUARDED_BY(mu_);
  int watching_round_zero_ ABSL_GUARDED_BY(mu_) = 0;
};

std::vector<WorkerResult> RunTwoWorkers(TwoWorkerLauncher& launcher,
                                        const std::string& scenario) {
  JobSpec spec;
  spec.size = 2;
  spec.driver = "tests/runtime/elastic_worker";
  spec.args = {scenario};
  spec.env["HVD_START_TIMEOUT"] = "60";
  spec.services = {&launcher};
  spec.server_size = 0;  // ranks move between processes
  for (int r = 0; r < spec.size; ++r) {
    spec.rank_env[r]["HVD_ELASTIC_WORKER_ID"] = absl::StrCat("h1:", r);
  }
  spec.timeout = absl::Seconds(120);
  return RunJob(spec);
}

TEST(Elastic, AbortReinitHostUpdatesAndRemovalThroughTheCApi) {
  TwoWorkerLauncher launcher;
  const std::vector<WorkerResult> results =
      RunTwoWorkers(launcher, "abort-in-collective");
  for (const WorkerResult& result : results) {
    EXPECT_EQ(result.exit_code, 0) << Describe(results);
    EXPECT_TRUE(absl::StrContains(result.out, "worker: PASS"))
        << Describe(results);
  }
}

// The third member of round 0 is gone before it connects: the others'
// init fails when the launcher ends the round, not at HVD_START_TIMEOUT,
// and their next init joins round 1 without it.
TEST(Elastic, ARoundEndedWhileItsMembersConnectFailsTheirInitAtOnce) {
  TwoWorkerLauncher launcher(/*round_zero_size=*/3);
  const std::vector<WorkerResult> results =
      RunTwoWorkers(launcher, "abort-while-connecting");
  for (const WorkerResult& result : results) {
    EXPECT_EQ(result.exit_code, 0) << Describe(results);
    EXPECT_TRUE(absl::StrContains(result.out, "worker: PASS"))
        << Describe(results);
  }
}

}  // namespace
}  // namespace hvd::testing
