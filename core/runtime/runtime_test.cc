// The runtime in one process: one Runtime per rank, each on its own thread
// of the test, over real transports connected through an in-memory store
// (gloo's one-thread-per-rank pattern). Covers negotiation, fusion, the
// response cache, errors on every rank, join and shutdown without starting
// a process.
#include "core/runtime/runtime.h"

#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "core/collectives/test_mesh.h"
#include "core/runtime/handle_table.h"
#include "core/runtime/test_job.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd::runtime {
namespace {

using ::testing::HasSubstr;

// Size, transport, and the negotiation tree's fanout (64: flat).
class RuntimeTest
    : public ::testing::TestWithParam<std::tuple<int, MeshTransport, int>> {
 protected:
  int size() const { return std::get<0>(GetParam()); }
  MeshTransport transport() const { return std::get<1>(GetParam()); }
  // `config` with this case's negotiation fanout.
  Config With(Config config = {}) const {
    config.negotiation_fanout = std::get<2>(GetParam());
    return config;
  }
};

TEST_P(RuntimeTest, AllreduceSumsOnEveryRank) {
  Job job(size(), transport(), With());
  ASSERT_EQ(job.size(), size());
  job.RunOnEveryRank([&](int rank) {
    for (size_t count : {size_t{1}, size_t{1001}, size_t{300000}}) {
      std::vector<float> data(count, rank + 1.0f);
      ASSERT_TRUE(
          job.Run(rank, One(Allreduce(absl::StrCat("t", count), data))).ok());
      EXPECT_EQ(data.front(), SumOfRanks(size()));
      EXPECT_EQ(data.back(), SumOfRanks(size()));
    }
  });
}

TEST_P(RuntimeTest, TensorsReadyTogetherAreFusedIntoOneResponse) {
  Job job(size(), transport(), With());
  ASSERT_EQ(job.size(), size());
  job.RunOnEveryRank([&](int rank) {
    std::vector<std::vector<float>> data(8, std::vector<float>(5, rank + 1.0f));
    std::vector<std::unique_ptr<TensorEntry>> entries;
    for (int i = 0; i < 8; ++i) {
      entries.push_back(Allreduce(absl::StrCat("grad", i), data[i]));
    }
    ASSERT_TRUE(job.Run(rank, std::move(entries)).ok());
    for (const auto& d : data) EXPECT_EQ(d[4], SumOfRanks(size()));
  });
  job.RunOnEveryRank([&](int rank) { job.runtime(rank).Shutdown(); });
  EXPECT_EQ(job.runtime(0).negotiation_stats().fused_tensors, 8);
}

// `steps` steps of one allreduce on every rank; rank 0's negotiation
// counters.
Coordinator::Stats RepeatedSteps(int size, MeshTransport transport,
                                 const Config& base, int steps) {
  Job job(size, transport, base);
  EXPECT_EQ(job.size(), size);
  job.RunOnEveryRank([&](int rank) {
    for (int step = 0; step < steps; ++step) {
      std::vector<float> data(16, rank + 1.0f);
      ASSERT_TRUE(job.Run(rank, One(Allreduce("weights", data))).ok());
      EXPECT_EQ(data[0], SumOfRanks(size));
    }
  });
  job.RunOnEveryRank([&](int rank) { job.runtime(rank).Shutdown(); });
  return job.runtime(0).negotiation_stats();
}

TEST_P(RuntimeTest, RepeatedTensorIsNegotiatedByCacheBit) {
  constexpr int kSteps = 20;
  const Coordinator::Stats stats =
      RepeatedSteps(size(), transport(), With(), kSteps);
  // The first step goes in full; later ones by cache bit. Bits that arrive
  // in one cycle are agreed on alone (cached_ready); bits that arrive in
  // different cycles, as they always may when one rank's cycles lag the
  // other's, stand in for requests. Either way, not every step is
  // negotiated in full.
  EXPECT_GE(stats.full_requests, size());
  EXPECT_LT(stats.full_requests, kSteps * size());
}

TEST_P(RuntimeTest, CacheCapacityZeroNegotiatesEveryStepInFull) {
  Config config;
  config.cache_capacity = 0;
  const Coordinator::Stats stats =
      RepeatedSteps(size(), transport(), With(config), 5);
  EXPECT_EQ(stats.cached_ready, 0);
  EXPECT_EQ(stats.full_requests, 5 * size());
}

TEST_P(RuntimeTest, MismatchedShapesFailOnEveryRankNamingEachShape) {
  if (size() == 1) GTEST_SKIP() << "needs two ranks to disagree";
  Job job(size(), transport(), With());
  ASSERT_EQ(job.size(), size());
  job.RunOnEveryRank([&](int rank) {
    std::vector<float> data(rank == 1 ? 5 : 4, 1.0f);
    absl::Status status = job.Run(rank, One(Allreduce("w", data)));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()),
                HasSubstr("Mismatched shapes for allreduce of tensor 'w': "
                          "rank 0 has [4], rank 1 has [5]"));
    // The job stays usable.
    std::vector<float> next(3, rank + 1.0f);
    EXPECT_TRUE(job.Run(rank, One(Allreduce("next", next))).ok());
    EXPECT_EQ(next[0], SumOfRanks(size()));
  });
}

TEST_P(RuntimeTest, JoinedRanksContributeZerosAndJoinReturnsTheLastRank) {
  if (size() == 1) GTEST_SKIP() << "needs a rank that keeps working";
  Job job(size(), transport(), With());
  ASSERT_EQ(job.size(), size());
  job.RunOnEveryRank([&](int rank) {
    if (rank == 0) {
      std::vector<float> data(7, 1.0f);
      EXPECT_TRUE(job.Run(rank, One(Allreduce("only_rank0", data))).ok());
      EXPECT_EQ(data[6], 1.0f);  // every other rank had joined: zeros
    }
    const int64_t handle = job.runtime(rank).Submit(One(Join())).value();
    ASSERT_EQ(job.handles(rank).Wait(handle, absl::Now() + absl::Seconds(30)),
              HandleTable::kDone);
    OpResult result;
    ASSERT_TRUE(job.handles(rank).PeekResult(handle, 0, &result));
    // Rank 0's allreduce completed only once every other rank had joined.
    EXPECT_EQ(result.value, 0);
  });
}

// A second submission under a name still in flight is refused by Submit
// itself; the first goes on and completes normally on every rank, and the
// name is free again once it has.
TEST_P(RuntimeTest, NameStillInFlightIsRefusedAtSubmitAndTheFirstCompletes) {
  Job job(size(), transport(), With());
  ASSERT_EQ(job.size(), size());
  // The op completes once the last rank submits it, so the last rank
  // submits only after every other rank has been refused (it cannot be
  // refused itself without racing that completion).
  std::atomic<int> refused{0};
  job.RunOnEveryRank([&](int rank) {
    std::vector<float> data(5, rank + 1.0f), again(5, 1.0f);
    const bool last = rank == size() - 1;
    while (last && refused.load() < size() - 1) std::this_thread::yield();
    auto first = job.runtime(rank).Submit(One(Allreduce("dup", data)));
    ASSERT_TRUE(first.ok()) << first.status();
    if (!last) {
      auto second = job.runtime(rank).Submit(One(Allreduce("dup", again)));
      EXPECT_EQ(second.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(std::string(second.status().message()), HasSubstr("'dup'"));
      ++refused;
    }
    ASSERT_EQ(job.handles(rank).Wait(*first, absl::Now() + absl::Seconds(30)),
              HandleTable::kDone);
    EXPECT_TRUE(job.handles(rank).GetStatus(*first).ok());
    job.handles(rank).Release(*first);
    EXPECT_EQ(data[4], SumOfRanks(size()));
    EXPECT_EQ(again[0], 1.0f);  // never queued
    // Two entries of one submission may not share a name either.
    std::vector<float> a(2), b(2);
    std::vector<std::unique_ptr<TensorEntry>> pair;
    pair.push_back(Allreduce("twin", a));
    pair.push_back(Allreduce("twin", b));
    EXPECT_EQ(job.runtime(rank).Submit(std::move(pair)).status().code(),
              absl::StatusCode::kInvalidArgument);
    // Completed: the name may be used again.
    EXPECT_TRUE(job.Run(rank, One(Allreduce("dup", data))).ok());
  });
}

TEST_P(RuntimeTest, SubmitAfterShutdownFailsAtOnce) {
  Job job(size(), transport(), With());
  ASSERT_EQ(job.size(), size());
  job.RunOnEveryRank([&](int rank) { job.runtime(rank).Shutdown(); });
  std::vector<float> data(4, 1.0f);
  absl::Status status = job.Run(0, One(Allreduce("late", data)));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("shut down"));
}

// A data plane whose sends of kHeldBytes or more never leave: they
// complete only when the context is aborted. Small (negotiation) messages
// go through. So a collective on a large tensor stops midway, for good.
class HoldingContext : public ForwardingContext {
 public:
  static constexpr size_t kHeldBytes = 16 << 10;

  using ForwardingContext::ForwardingContext;

  std::unique_ptr<transport::Request> Send(int peer, const void* data,
                                           size_t len) override {
    if (len < kHeldBytes) return ForwardingContext::Send(peer, data, len);
    held_.fetch_add(1);
    return std::make_unique<Held>(this);
  }
  void Abort(absl::Status reason) override {
    ForwardingContext::Abort(reason);
    absl::MutexLock lock(&mu_);
    if (reason_.ok()) reason_ = std::move(reason);
  }
  int held() const { return held_.load(); }

 private:
  class Held : public transport::Request {
   public:
    explicit Held(HoldingContext* context) : context_(context) {}
    absl::Status Wait(absl::Time deadline) override {
      absl::MutexLock lock(&context_->mu_);
      auto aborted = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(context_->mu_) {
        return !context_->reason_.ok();
      };
      if (!context_->mu_.AwaitWithDeadline(absl::Condition(&aborted),
                                           deadline)) {
        return absl::DeadlineExceededError("held send");
      }
      return context_->reason_;
    }
    bool Done() override {
      absl::MutexLock lock(&context_->mu_);
      return !context_->reason_.ok();
    }

   private:
    HoldingContext* context_;
  };

  std::atomic<int> held_{0};
  absl::Mutex mu_;
  absl::Status reason_ ABSL_GUARDED_BY(mu_);
};

// Submits `entries` on `rank` and returns the handle.
int64_t SubmitOne(Job& job, int rank, std::unique_ptr<TensorEntry> entry) {
  return job.runtime(rank).Submit(One(std::move(entry))).value();
}

// An elastic job's configuration.
Config Elastic() {
  Config config;
  config.elastic_worker_id = "worker";
  return config;
}

// Aborts every rank, one after the other, from this (foreign) thread, as the
// launcher's abort reaches each process of a round. Expects each handle in
// `handles` to fail within a second: ABORTED, naming the reason (a rank
// whose peer was aborted first may hear of it from that peer, which names
// it). Then a later op fails at once with the reason itself, and Shutdown
// returns at once.
void ExpectAbortFailsEverything(Job& job, const std::vector<int64_t>& handles,
                                const absl::Status& reason) {
  const absl::Time start = absl::Now();
  for (int rank = 0; rank < job.size(); ++rank) job.runtime(rank).Abort(reason);
  for (int rank = 0; rank < job.size(); ++rank) {
    if (handles[rank] < 0) continue;
    ASSERT_EQ(
        job.handles(rank).Wait(handles[rank], absl::Now() + absl::Seconds(5)),
        HandleTable::kDone)
        << "rank " << rank;
    const absl::Status status = job.handles(rank).GetStatus(handles[rank]);
    EXPECT_EQ(status.code(), absl::StatusCode::kAborted) << status;
    EXPECT_THAT(std::string(status.message()),
                HasSubstr(std::string(reason.message())));
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  std::vector<float> late(4, 1.0f);
  for (int rank = 0; rank < job.size(); ++rank) {
    EXPECT_EQ(job.Run(rank, One(Allreduce("late", late))), reason);
    job.runtime(rank).Abort(absl::InternalError("a second reason"));
  }
  const absl::Time stop = absl::Now();
  job.RunOnEveryRank([&](int rank) { job.runtime(rank).Shutdown(); });
  EXPECT_LT(absl::Now() - stop, absl::Seconds(1));
}

TEST_P(RuntimeTest, AbortMidCollectiveFailsEveryRanksHandleAtOnce) {
  if (size() == 1) GTEST_SKIP() << "needs a peer to wait for";
  std::vector<HoldingContext*> holding(size());
  Job job(size(), transport(), With(Elastic()),
          [&](int rank, std::unique_ptr<transport::Context> inner) {
            auto context = std::make_unique<HoldingContext>(std::move(inner));
            holding[rank] = context.get();
            return context;
          });
  ASSERT_EQ(job.size(), size());
  std::vector<std::vector<float>> data(size(),
                                       std::vector<float>(1 << 20, 1.0f));
  std::vector<int64_t> handles(size());
  for (int rank = 0; rank < size(); ++rank) {
    handles[rank] = SubmitOne(job, rank, Allreduce("big", data[rank]));
  }
  // Every rank is inside the collective once each has sent a large piece.
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  for (int rank = 0; rank < size(); ++rank) {
    while (holding[rank]->held() == 0 && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    ASSERT_GT(holding[rank]->held(), 0) << "rank " << rank;
  }
  absl::SleepFor(absl::Milliseconds(50));
  ExpectAbortFailsEverything(
      job, handles, absl::AbortedError("lost rank 2 on host h3: exited 1"));
}

// Ranks other than 0 wait in negotiation for rank 0, which never submits;
// rank 0 waits for work.
TEST_P(RuntimeTest, AbortWhileNegotiatingFailsPendingAndLaterOps) {
  Job job(size(), transport(), With(Elastic()));
  ASSERT_EQ(job.size(), size());
  std::vector<std::vector<float>> data(size(), std::vector<float>(4, 1.0f));
  std::vector<int64_t> handles(size(), -1);
  for (int rank = 1; rank < size(); ++rank) {
    handles[rank] = SubmitOne(job, rank, Allreduce("waits", data[rank]));
  }
  absl::SleepFor(absl::Milliseconds(50));
  for (int rank = 1; rank < size(); ++rank) {
    EXPECT_EQ(job.handles(rank).Poll(handles[rank]), 0);
  }
  ExpectAbortFailsEverything(job, handles,
                             absl::AbortedError("lost the launcher"));
}

// The launcher's abort reaches rank 0 first; the others learn of it from
// the data plane, and in an elastic job that, too, ends the round: ABORTED,
// naming what was lost.
TEST_P(RuntimeTest, InAnElasticJobAPeersAbortFailsTheOthersAsAborted) {
  if (size() == 1) GTEST_SKIP() << "needs a peer to hear of the abort";
  Job job(size(), transport(), With(Elastic()));
  ASSERT_EQ(job.size(), size());
  std::vector<std::vector<float>> data(size(), std::vector<float>(4, 1.0f));
  std::vector<int64_t> handles(size(), -1);
  for (int rank = 1; rank < size(); ++rank) {
    handles[rank] = SubmitOne(job, rank, Allreduce("waits", data[rank]));
  }
  absl::SleepFor(absl::Milliseconds(50));
  job.runtime(0).Abort(absl::AbortedError("lost host h3"));
  for (int rank = 1; rank < size(); ++rank) {
    ASSERT_EQ(
        job.handles(rank).Wait(handles[rank], absl::Now() + absl::Seconds(5)),
        HandleTable::kDone);
    const absl::Status status = job.handles(rank).GetStatus(handles[rank]);
    EXPECT_EQ(status.code(), absl::StatusCode::kAborted) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr("lost host h3"));
  }
}

std::string CaseName(
    const ::testing::TestParamInfo<std::tuple<int, MeshTransport, int>>& info) {
  const auto [size, transport, fanout] = info.param;
  return absl::StrCat(collectives::MeshTransportName(transport), size,
                      fanout < size - 1 ? absl::StrCat("Fanout", fanout) : "");
}

INSTANTIATE_TEST_SUITE_P(
    SizesAndTransports, RuntimeTest,
    ::testing::Combine(::testing::Values(1, 2, 3),
                       ::testing::Values(MeshTransport::kTcp,
                                         MeshTransport::kShm),
                       ::testing::Values(64)),
    CaseName);

// Negotiation through a tree: fanout 2, so 4 ranks are two levels and 7
// three (interior ranks pass their children's lists up and the answer down).
INSTANTIATE_TEST_SUITE_P(
    NegotiationTree, RuntimeTest,
    ::testing::Combine(::testing::Values(4, 7),
                       ::testing::Values(MeshTransport::kTcp,
                                         MeshTransport::kShm),
                       ::testing::Values(2)),
    CaseName);

// A job of one votes with itself: a step of cached tensors only is
// answered from the kept step, not by the coordinator, and still right.
TEST(RuntimeOfOneTest, RepeatedStepsAreAnsweredFromTheKeptStep) {
  for (MeshTransport transport : {MeshTransport::kTcp, MeshTransport::kShm}) {
    const Coordinator::Stats stats = RepeatedSteps(1, transport, Config{}, 10);
    EXPECT_GT(stats.agreed_steps, 0);
    Config off;
    off.cached_exchange = false;
    EXPECT_EQ(RepeatedSteps(1, transport, off, 10).agreed_steps, 0);
  }
}

TEST_P(RuntimeTest, NoStepIsAgreedByExchangeWhenItIsOff) {
  Config config;
  config.cached_exchange = false;
  const Coordinator::Stats stats =
      RepeatedSteps(size(), transport(), With(config), 10);
  EXPECT_EQ(stats.agreed_steps, 0);
}

// Each rank submits 20 small allreduces 2 ms apart, without waiting (as a
// framework submits a step's gradients), then waits for them all; the
// background thread takes the submissions (nobody drives). Rank 0's responses,
// with a settle window longer than the gaps and without one. The first
// submission comes alone, so it may go alone. Without the settle, a loaded
// machine (a sanitizer's build beside other tests) may still delay a cycle
// past a gap or two and fuse what came meanwhile: expected are many
// responses, not one per submission.
int64_t ResponsesForASpacedBurst(absl::Duration settle) {
  Config config;
  config.submit_settle = settle;
  config.cycle_time = absl::Milliseconds(200);  // the settle's cap
  Job job(2, MeshTransport::kShm, config);
  constexpr int kTensors = 20;
  job.RunOnEveryRank([&](int rank) {
    std::vector<std::vector<float>> data(kTensors,
                                         std::vector<float>(8, rank + 1.0f));
    const std::vector<int64_t> handles =
        SubmitEach(job, rank, data, absl::Milliseconds(2));
    // Waited for without driving: a caller that drives runs the burst
    // itself, without the settle (caller_progress_test).
    for (int t = 0; t < kTensors; ++t) {
      ASSERT_TRUE(job.Await(rank, handles[t]).ok());
      EXPECT_EQ(data[t][7], SumOfRanks(2));
    }
  });
  job.RunOnEveryRank([&](int rank) { job.runtime(rank).Shutdown(); });
  return job.runtime(0).negotiation_stats().responses;
}

TEST(RuntimeSettleTest, ABurstOfSubmissionsIsNegotiatedWhole) {
  EXPECT_LE(ResponsesForASpacedBurst(absl::Milliseconds(20)), 2);
}

TEST(RuntimeSettleTest, WithoutTheSettleABurstGoesAsItArrives) {
  EXPECT_GE(ResponsesForASpacedBurst(absl::ZeroDuration()), 6);
}

TEST(RuntimeStartTest, RefusesADataPlaneOfTheWrongSize) {
  Config config;
  config.size = 2;
  HandleTable handles;
  auto runtime = Runtime::Start(config, RuntimeParts{}, &handles);
  EXPECT_EQ(runtime.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(runtime.status().message(),
            "rank 0: the runtime needs a data plane of size 2");
}

}  // namespace
}  // namespace hvd::runtime
