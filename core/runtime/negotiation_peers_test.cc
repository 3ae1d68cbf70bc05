// Who a rank negotiates with: the tree's parent and children (past the
// fanout), and in a cached step its recursive-doubling partners (the
// collectives' DoublingLayout). Each case records the peers every rank
// takes negotiation messages from, in real runtimes over real transports,
// one thread per rank.
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "core/collectives/test_mesh.h"
#include "core/runtime/runtime.h"
#include "core/runtime/test_job.h"
#include "gtest/gtest.h"

namespace hvd::runtime {
namespace {

// Records which peers a rank takes messages of any length from: the
// negotiation's (the collectives receive known lengths).
class RecvAnyPeers : public ForwardingContext {
 public:
  RecvAnyPeers(std::unique_ptr<transport::Context> inner, std::set<int>* peers,
               absl::Mutex* mu)
      : ForwardingContext(std::move(inner)), peers_(peers), mu_(mu) {}
  std::unique_ptr<transport::Request> RecvAny(int peer,
                                              std::string* out) override {
    {
      absl::MutexLock lock(mu_);
      peers_->insert(peer);
    }
    return ForwardingContext::RecvAny(peer, out);
  }

 private:
  std::set<int>* const peers_;
  absl::Mutex* const mu_;
};

// Every rank, rank 0 too, votes on a cached step once its caller submitted
// it or at its cycle timer. With a timer longer than any caller's turn
// between steps (milliseconds under a sanitizer on a loaded VM), no rank
// votes before its caller's submission, so every step after the first is
// agreed by the exchange.
constexpr absl::Duration kPastAnyCallersTurn = absl::Seconds(10);

TEST(RuntimeNegotiationTreeTest, RankZeroHearsOnlyFromItsChildren) {
  absl::Mutex mu;
  std::vector<std::set<int>> heard(7);
  Config config;
  config.negotiation_fanout = 2;
  config.cached_exchange = false;  // the tree alone
  Job job(7, MeshTransport::kTcp, config,
          [&](int rank, std::unique_ptr<transport::Context> inner) {
            return std::make_unique<RecvAnyPeers>(std::move(inner),
                                                  &heard[rank], &mu);
          });
  ASSERT_EQ(job.size(), 7);
  job.RunOnEveryRank([&](int rank) {
    for (int step = 0; step < 3; ++step) {
      std::vector<float> data(8, rank + 1.0f);
      ASSERT_TRUE(job.Run(rank, One(Allreduce("w", data))).ok());
      EXPECT_EQ(data[7], SumOfRanks(7));
    }
  });
  absl::MutexLock lock(&mu);
  EXPECT_EQ(heard[0], (std::set<int>{1, 2}));
  EXPECT_EQ(heard[1], (std::set<int>{0, 3, 4}));  // its children and parent
  EXPECT_EQ(heard[6], (std::set<int>{2}));
}

// Steps of one cached tensor: every rank sets the same bit, so the ranks
// agree by recursive doubling over 7 ranks in the collectives' layout
// (pairs 0-1, 2-3 and 4-5 fold into 1, 3 and 5, which double with 6 in two
// rounds): rank 6 hears from its doubling partners 5 and 3 besides its tree
// parent, rank 0 from its fold partner 1, also its tree child. Steps whose
// bits reach the exchange at different cycles would go to the coordinator
// instead.
TEST(RuntimeNegotiationTreeTest, CachedStepsAreAgreedByExchangeAmongAllRanks) {
  absl::Mutex mu;
  std::vector<std::set<int>> heard(7);
  Config config;
  config.negotiation_fanout = 2;
  config.cycle_time = kPastAnyCallersTurn;
  Job job(7, MeshTransport::kTcp, config,
          [&](int rank, std::unique_ptr<transport::Context> inner) {
            return std::make_unique<RecvAnyPeers>(std::move(inner),
                                                  &heard[rank], &mu);
          });
  ASSERT_EQ(job.size(), 7);
  constexpr int kSteps = 30;
  job.RunOnEveryRank([&](int rank) {
    for (int step = 0; step < kSteps; ++step) {
      std::vector<float> data(8, rank + step + 1.0f);
      ASSERT_TRUE(job.Run(rank, One(Allreduce("w", data))).ok());
      EXPECT_EQ(data[7], SumOfRanks(7) + 7.0f * step);
    }
  });
  job.RunOnEveryRank([&](int rank) { job.runtime(rank).Shutdown(); });
  const Coordinator::Stats stats = job.runtime(0).negotiation_stats();
  EXPECT_EQ(stats.agreed_steps, kSteps - 1);
  EXPECT_EQ(stats.full_requests, 7);  // the first step only
  absl::MutexLock lock(&mu);
  EXPECT_EQ(heard[0], (std::set<int>{1, 2}));     // fold partner; tree children
  EXPECT_EQ(heard[6], (std::set<int>{2, 3, 5}));  // tree parent; partners
  EXPECT_EQ(heard[4], (std::set<int>{1, 5}));     // tree parent; fold partner
}

// Rank 0 waits for its own work before a vote only after a step of the
// global set: a set that leaves it out never waits for its timer. Each of
// the set's steps after its first (which follows the set's creation, a
// global step) takes far less than the timer.
TEST(RuntimeNegotiationTreeTest, ASetWithoutRankZeroNeverWaitsForItsTimer) {
  Config config;
  config.cycle_time = absl::Seconds(4);
  Job job(3, MeshTransport::kShm, config);
  ASSERT_EQ(job.size(), 3);
  job.RunOnEveryRank([&](int rank) {
    auto add = std::make_unique<TensorEntry>();
    add->request.set_type(ADD_PROCESS_SET);
    add->request.set_name("add_process_set.0");
    add->request.add_set_ranks(1);
    add->request.add_set_ranks(2);
    ASSERT_TRUE(job.Run(rank, One(std::move(add))).ok());
  });
  const int set = job.runtime(1).process_sets().Find({1, 2});
  ASSERT_GT(set, 0);
  job.RunOnEveryRank([&](int rank) {
    if (rank == 0) return;
    for (int step = 0; step < 5; ++step) {
      std::vector<float> data(4, rank + 1.0f);
      auto entry = Allreduce("s", data);
      entry->request.set_process_set(set);
      const absl::Time start = absl::Now();
      ASSERT_TRUE(job.Run(rank, One(std::move(entry))).ok());
      EXPECT_EQ(data[3], 5.0f);
      if (step > 0) EXPECT_LT(absl::Now() - start, config.cycle_time / 4);
    }
  });
}

// Cached steps of one tensor at `size` ranks, fanout 4; who each rank
// heard from.
std::vector<std::set<int>> CachedStepsAtScale(int size) {
  absl::Mutex mu;
  std::vector<std::set<int>> heard(size);
  Config config;
  config.negotiation_fanout = 4;
  config.cycle_time = kPastAnyCallersTurn;
  Job job(size, MeshTransport::kShm, config,
          [&](int rank, std::unique_ptr<transport::Context> inner) {
            return std::make_unique<RecvAnyPeers>(std::move(inner),
                                                  &heard[rank], &mu);
          });
  EXPECT_EQ(job.size(), size);
  if (job.size() != size) return {};
  constexpr int kSteps = 20;
  job.RunOnEveryRank([&](int rank) {
    for (int step = 0; step < kSteps; ++step) {
      std::vector<float> data(16, rank + step + 1.0f);
      ASSERT_TRUE(job.Run(rank, One(Allreduce("w", data))).ok());
      EXPECT_EQ(data[15], SumOfRanks(size) + size * float(step));
    }
  });
  job.RunOnEveryRank([&](int rank) { job.runtime(rank).Shutdown(); });
  const Coordinator::Stats stats = job.runtime(0).negotiation_stats();
  EXPECT_EQ(stats.agreed_steps, kSteps - 1);
  EXPECT_EQ(stats.full_requests, size);  // the first step only
  absl::MutexLock lock(&mu);
  return heard;
}

// 33 ranks: a tree of three levels below rank 0 (1-4, 5-20, 21-32), and a
// doubling layout with one folded pair (0 into 1) and five rounds. Rank 32
// hears from its tree parent 7 and its partners at positions 30, 29, 27,
// 23 and 15 (ranks 31, 30, 28, 24, 16); rank 0 from its tree children, 1
// among them its fold partner.
TEST(RuntimeNegotiationTreeTest, ThirtyThreeRanksAgreeCachedStepsByExchange) {
  const std::vector<std::set<int>> heard = CachedStepsAtScale(33);
  ASSERT_EQ(heard.size(), 33u);
  EXPECT_EQ(heard[0], (std::set<int>{1, 2, 3, 4}));
  EXPECT_EQ(heard[32], (std::set<int>{7, 16, 24, 28, 30, 31}));
}

// 130 ranks: four tree levels, two folded pairs (0 into 1, 2 into 3), seven
// rounds. Rank 129 (position 127) hears from its tree parent 32 and its
// partners at positions 126, 125, 123, 119, 111, 95 and 63.
TEST(RuntimeNegotiationTreeTest, AHundredAndThirtyRanksAgreeByExchange) {
  const std::vector<std::set<int>> heard = CachedStepsAtScale(130);
  ASSERT_EQ(heard.size(), 130u);
  EXPECT_EQ(heard[0], (std::set<int>{1, 2, 3, 4}));
  EXPECT_EQ(heard[2], (std::set<int>{0, 3, 9, 10, 11, 12}));
  EXPECT_EQ(heard[129], (std::set<int>{32, 65, 97, 113, 121, 125, 127, 128}));
}

}  // namespace
}  // namespace hvd::runtime
