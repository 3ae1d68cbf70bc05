#include "core/runtime/coordinator.h"

#include <map>
#include <string>
#include <vector>

#include "core/runtime/validation.h"
#include "gtest/gtest.h"

namespace hvd::runtime {
namespace {

Request Allreduce(int rank, const std::string& name,
                  std::vector<int64_t> shape = {4}, int dtype = 8) {
  Request r;
  r.set_rank(rank);
  r.set_type(ALLREDUCE);
  r.set_name(name);
  r.set_dtype(dtype);
  for (int64_t d : shape) r.add_shape(d);
  r.set_prescale(1.0);
  r.set_postscale(1.0);
  return r;
}

class CoordinatorTest : public ::testing::Test {
 protected:
  explicit CoordinatorTest(int size = 2, int64_t fusion = 1 << 20,
                           int cache_capacity = 0)
      : sets_(size), cache_(cache_capacity) {
    options_.size = size;
    options_.fusion_threshold = fusion;
    Reset();
  }

  void Reset() {
    coordinator_ =
        std::make_unique<Coordinator>(options_, &sets_, &cache_, &timeline_);
  }

  ResponseList Cycle(std::vector<std::vector<Request>> per_rank,
                     absl::Time now = absl::UnixEpoch()) {
    std::vector<RequestList> lists(options_.size);
    for (size_t r = 0; r < per_rank.size(); ++r) {
      for (auto& req : per_rank[r]) *lists[r].add_requests() = req;
    }
    return coordinator_->Compute(lists, now);
  }

  CoordinatorOptions options_;
  ProcessSetTable sets_;
  ResponseCache cache_;
  Timeline timeline_;
  std::unique_ptr<Coordinator> coordinator_;
};

TEST(AgreedAllreduceResponseTest, IsTheResponseValidationBuildsFromAllRanks) {
  Request r = Allreduce(0, "cached", {3, 4}, 7);
  r.set_op(2);
  r.set_prescale(0.5);
  r.set_postscale(3.0);
  r.set_device(1);
  std::map<int, Request> requests{{0, r}, {2, r}};
  requests[2].set_rank(2);
  for (const std::vector<int>& joined :
       {std::vector<int>{}, std::vector<int>{1}}) {
    EXPECT_EQ(AgreedAllreduceResponse(r, joined).SerializeAsString(),
              BuildResponse(requests, {0, 1, 2}, joined).SerializeAsString())
        << "joined " << joined.size();
  }
}

// The kept answer is CachedStepResponses' for the same bits, threshold
// and slots; a change in any of them gives that function's new answer.
TEST(CachedStepMemoTest, KeepsTheAnswerWhileBitsSlotsAndThresholdStay) {
  ProcessSetTable sets(2);
  ResponseCache cache(8);
  for (const char* name : {"a", "b", "c"}) cache.Put(Allreduce(0, name));
  std::string ab, abc;
  for (const char* name : {"a", "b"})
    SetBit(ab, cache.Lookup(Allreduce(0, name)));
  abc = ab;
  SetBit(abc, cache.Lookup(Allreduce(0, "c")));
  CachedStepMemo memo;
  auto same = [&](const std::string& bits, int64_t threshold) {
    const std::string kept =
        memo.For(bits, cache, sets, threshold).SerializeAsString();
    return kept == CachedStepResponses(bits, cache, sets, threshold)
                       .SerializeAsString();
  };
  const ResponseList* first = &memo.For(ab, cache, sets, 1 << 20);
  EXPECT_EQ(first->responses_size(), 1);
  EXPECT_EQ(first->responses(0).names_size(), 2);
  EXPECT_EQ(&memo.For(ab, cache, sets, 1 << 20), first);
  EXPECT_TRUE(same(ab, 1 << 20));
  EXPECT_TRUE(same(abc, 1 << 20));
  EXPECT_TRUE(same(abc, 0)) << "threshold";
  EXPECT_EQ(memo.For(abc, cache, sets, 0).responses_size(), 3);
  // The slot of "b" now holds another shape: the same bits mean it.
  cache.Put(Allreduce(0, "b", {6}));
  EXPECT_TRUE(same(abc, 0)) << "slot changed";
  EXPECT_EQ(memo.For(abc, cache, sets, 0).responses(1).sizes(0), 6);
  cache.Erase(0, "c");
  EXPECT_TRUE(same(abc, 0)) << "slot freed";
  EXPECT_EQ(memo.For(abc, cache, sets, 0).responses_size(), 0);
}

// A loop whose step is several cycles of their own bits (the gradients, a
// metric) finds each cycle's answer kept, up to kCapacity different bits;
// the least recently used gives way, and a change of slot or threshold
// drops them all.
TEST(CachedStepMemoTest, KeepsTheAnswersOfSeveralAlternatingSteps) {
  ProcessSetTable sets(2);
  ResponseCache cache(64);
  std::vector<std::string> steps;
  for (int i = 0; i <= CachedStepMemo::kCapacity; ++i) {
    const std::string name = "t" + std::to_string(i);
    cache.Put(Allreduce(0, name));
    std::string bits;
    SetBit(bits, cache.Lookup(Allreduce(0, name)));
    steps.push_back(bits);
  }
  CachedStepMemo memo;
  auto answer = [&](int step) {
    return memo.For(steps[step], cache, sets, 1 << 20).responses(0).names(0);
  };
  for (int round = 0; round < 3; ++round) {
    EXPECT_EQ(answer(0), "t0");
    EXPECT_EQ(answer(1), "t1");
  }
  EXPECT_EQ(memo.built(), 2);
  for (int step = 2; step < CachedStepMemo::kCapacity; ++step) answer(step);
  EXPECT_EQ(answer(0), "t0");  // used last: kept past the next one
  EXPECT_EQ(memo.built(), CachedStepMemo::kCapacity);
  EXPECT_EQ(answer(CachedStepMemo::kCapacity), "t8");  // replaces t1
  EXPECT_EQ(answer(0), "t0");
  EXPECT_EQ(memo.built(), CachedStepMemo::kCapacity + 1);
  EXPECT_EQ(answer(1), "t1");
  EXPECT_EQ(memo.built(), CachedStepMemo::kCapacity + 2);
  memo.For(steps[0], cache, sets, 0);
  EXPECT_EQ(memo.built(), CachedStepMemo::kCapacity + 3) << "threshold";
  cache.Put(Allreduce(0, "t0", {6}));
  EXPECT_EQ(memo.For(steps[0], cache, sets, 0).responses(0).sizes(0), 6);
  EXPECT_EQ(memo.built(), CachedStepMemo::kCapacity + 4) << "slot changed";
}

TEST_F(CoordinatorTest, ReadyOnlyWhenEveryRankRequested) {
  EXPECT_EQ(Cycle({{Allreduce(0, "a")}, {}}).responses_size(), 0);
  ResponseList out = Cycle({{}, {Allreduce(1, "a")}});
  ASSERT_EQ(out.responses_size(), 1);
  EXPECT_EQ(out.responses(0).names(0), "a");
  EXPECT_EQ(out.responses(0).error(), "");
  EXPECT_EQ(out.responses(0).sizes(0), 4);
}

TEST_F(CoordinatorTest, MismatchedShapesNameTensorAndEachRank) {
  ResponseList out =
      Cycle({{Allreduce(0, "grad", {4, 3})}, {Allreduce(1, "grad", {4, 2})}});
  ASSERT_EQ(out.responses_size(), 1);
  EXPECT_EQ(out.responses(0).error(),
            "Mismatched shapes for allreduce of tensor 'grad': rank 0 has "
            "[4, 3], rank 1 has [4, 2]");
}

TEST_F(CoordinatorTest, MismatchedDtypesNameEachRank) {
  ResponseList out =
      Cycle({{Allreduce(0, "x", {4}, 8)}, {Allreduce(1, "x", {4}, 9)}});
  EXPECT_EQ(out.responses(0).error(),
            "Mismatched data types for allreduce of tensor 'x': rank 0 has "
            "float32, rank 1 has float64");
}

TEST_F(CoordinatorTest, MismatchedOpTypesAndScaleFactors) {
  Request b = Allreduce(1, "x");
  b.set_type(BROADCAST);
  EXPECT_EQ(Cycle({{Allreduce(0, "x")}, {b}}).responses(0).error(),
            "Mismatched operations for allreduce of tensor 'x': rank 0 has "
            "allreduce, rank 1 has broadcast");
  Request s = Allreduce(1, "y");
  s.set_prescale(0.5);
  EXPECT_EQ(Cycle({{Allreduce(0, "y")}, {s}}).responses(0).error(),
            "Mismatched prescale factors for allreduce of tensor 'y': rank 0 "
            "has 1, rank 1 has 0.5");
}

TEST_F(CoordinatorTest, MismatchedBroadcastRoots) {
  Request a = Allreduce(0, "w");
  Request b = Allreduce(1, "w");
  a.set_type(BROADCAST);
  b.set_type(BROADCAST);
  b.set_root(1);
  EXPECT_EQ(Cycle({{a}, {b}}).responses(0).error(),
            "Mismatched root ranks for broadcast of tensor 'w': rank 0 has 0, "
            "rank 1 has 1");
}

TEST_F(CoordinatorTest, AllgatherFirstDimensionMayDiffer) {
  Request a = Allreduce(0, "g", {2, 3});
  Request b = Allreduce(1, "g", {5, 3});
  a.set_type(ALLGATHER);
  b.set_type(ALLGATHER);
  ResponseList out = Cycle({{a}, {b}});
  ASSERT_EQ(out.responses(0).error(), "");
  EXPECT_EQ(out.responses(0).sizes(0), 2);
  EXPECT_EQ(out.responses(0).sizes(1), 5);
  EXPECT_EQ(out.responses(0).row_elems(0), 3);
}

TEST_F(CoordinatorTest, NameSubmittedTwiceIsAnErrorForEveryRank) {
  EXPECT_EQ(Cycle({{Allreduce(0, "d"), Allreduce(0, "d")}, {}}).responses_size(),
            0);
  ResponseList out = Cycle({{}, {Allreduce(1, "d")}});
  ASSERT_EQ(out.responses_size(), 1);
  EXPECT_EQ(out.responses(0).error(),
            "tensor 'd' (allreduce) was submitted twice by rank 0 before the "
            "first submission completed");
}

TEST_F(CoordinatorTest, FusesCompatibleAllreducesUpToThreshold) {
  options_.fusion_threshold = 40;  // Two float32[4] fit, three do not.
  Reset();
  std::vector<Request> r0 = {Allreduce(0, "a"), Allreduce(0, "b"),
                             Allreduce(0, "c")};
  std::vector<Request> r1 = {Allreduce(1, "a"), Allreduce(1, "b"),
                             Allreduce(1, "c")};
  ResponseList out = Cycle({r0, r1});
  ASSERT_EQ(out.responses_size(), 2);
  EXPECT_EQ(out.responses(0).names_size(), 2);
  EXPECT_EQ(out.responses(1).names_size(), 1);
}

TEST_F(CoordinatorTest, FusionThresholdZeroDisablesFusion) {
  options_.fusion_threshold = 0;
  Reset();
  ResponseList out = Cycle({{Allreduce(0, "a"), Allreduce(0, "b")},
                            {Allreduce(1, "a"), Allreduce(1, "b")}});
  EXPECT_EQ(out.responses_size(), 2);
}

TEST_F(CoordinatorTest, DifferentDtypesAreNotFused) {
  ResponseList out = Cycle({{Allreduce(0, "a", {4}, 8), Allreduce(0, "b", {4}, 9)},
                            {Allreduce(1, "a", {4}, 8), Allreduce(1, "b", {4}, 9)}});
  EXPECT_EQ(out.responses_size(), 2);
}

TEST_F(CoordinatorTest, GroupCompletesTogether) {
  Request a0 = Allreduce(0, "g.0"), b0 = Allreduce(0, "g.1");
  Request a1 = Allreduce(1, "g.0"), b1 = Allreduce(1, "g.1");
  for (Request* r : {&a0, &b0, &a1, &b1}) {
    r->set_group("g");
    r->set_group_size(2);
  }
  EXPECT_EQ(Cycle({{a0, b0}, {a1}}).responses_size(), 0);
  ResponseList out = Cycle({{}, {b1}});
  ASSERT_EQ(out.responses_size(), 1);
  EXPECT_EQ(out.responses(0).names_size(), 2);
}

TEST_F(CoordinatorTest, JoinedRankCountsAsPresentForAllreduce) {
  Request join;
  join.set_rank(1);
  join.set_type(JOIN);
  ResponseList out = Cycle({{Allreduce(0, "a")}, {join}});
  ASSERT_EQ(out.responses_size(), 1);
  EXPECT_EQ(out.responses(0).joined_size(), 1);
  EXPECT_EQ(out.responses(0).joined(0), 1);
  join.set_rank(0);
  out = Cycle({{join}, {}});
  ASSERT_EQ(out.responses_size(), 1);
  EXPECT_EQ(out.responses(0).type(), JOIN);
  EXPECT_EQ(out.responses(0).last_joined(), 0);
}

TEST_F(CoordinatorTest, BroadcastAfterJoinIsAnError) {
  Request join;
  join.set_rank(1);
  join.set_type(JOIN);
  Request b = Allreduce(0, "b");
  b.set_type(BROADCAST);
  ResponseList out = Cycle({{b}, {join}});
  ASSERT_EQ(out.responses_size(), 1);
  EXPECT_EQ(out.responses(0).error(),
            "broadcast of tensor 'b' cannot run after rank(s) 1 joined: only "
            "allreduce continues with joined ranks");
}

class ThreeRankCoordinatorTest : public CoordinatorTest {
 protected:
  ThreeRankCoordinatorTest() : CoordinatorTest(3) {}
};

// With a rank joined, an allgather fails as soon as a live rank asks for
// it, without waiting for the other live ranks: here their (generated)
// names differ, and each still gets its own error at once.
TEST_F(ThreeRankCoordinatorTest, CollectiveAfterJoinFailsForEachAskerAtOnce) {
  Request join;
  join.set_rank(0);
  join.set_type(JOIN);
  Request g1 = Allreduce(1, "allgather.noname.4");
  g1.set_type(ALLGATHER);
  Request g2 = Allreduce(2, "allgather.noname.5");
  g2.set_type(ALLGATHER);
  ResponseList out = Cycle({{join}, {g1}, {}});
  ASSERT_EQ(out.responses_size(), 1);
  EXPECT_EQ(out.responses(0).names(0), "allgather.noname.4");
  EXPECT_NE(out.responses(0).error().find("cannot run after rank(s) 0 "
                                          "joined"),
            std::string::npos)
      << out.responses(0).error();
  out = Cycle({{}, {}, {g2}});
  ASSERT_EQ(out.responses_size(), 1);
  EXPECT_EQ(out.responses(0).names(0), "allgather.noname.5");
  EXPECT_FALSE(out.responses(0).error().empty());
  // Allreduce still waits for every live rank, joined ones counting.
  out = Cycle({{}, {Allreduce(1, "a")}, {}});
  EXPECT_EQ(out.responses_size(), 0);
  out = Cycle({{}, {}, {Allreduce(2, "a")}});
  ASSERT_EQ(out.responses_size(), 1);
  EXPECT_TRUE(out.responses(0).error().empty());
}

TEST_F(CoordinatorTest, ProcessSetNeedsOnlyItsMembers) {
  sets_.Add(1, {1});
  Request a = Allreduce(1, "p");
  a.set_process_set(1);
  ResponseList out = Cycle({{}, {a}});
  ASSERT_EQ(out.responses_size(), 1);
  EXPECT_EQ(out.responses(0).process_set(), 1);
}

TEST_F(CoordinatorTest, StallShutdownNamesTensorAndMissingRanks) {
  options_.stall_check_time = absl::Seconds(1);
  options_.stall_shutdown_time = absl::Seconds(2);
  Reset();
  const absl::Time t0 = absl::UnixEpoch();
  EXPECT_EQ(Cycle({{Allreduce(0, "s")}, {}}, t0).shutdown(), "");
  EXPECT_EQ(Cycle({{}, {}}, t0 + absl::Milliseconds(1500)).shutdown(), "");
  EXPECT_EQ(Cycle({{}, {}}, t0 + absl::Seconds(3)).shutdown(),
            "stall shutdown: tensor 's' (allreduce, process set 0) has been "
            "submitted by ranks [0] but not by ranks [1] for 3 s "
            "(HVD_STALL_SHUTDOWN_TIME_SECONDS)");
}

TEST_F(CoordinatorTest, AnyRankShuttingDownEndsTheJob) {
  std::vector<RequestList> lists(2);
  lists[1].set_shutdown(true);
  EXPECT_EQ(coordinator_->Compute(lists, absl::UnixEpoch()).shutdown(),
            "rank 1 shut hvd down");
}

TEST_F(CoordinatorTest, IdleOnlyWhileNothingIsUnderWayAnywhere) {
  EXPECT_TRUE(Cycle({{}, {}}).idle());
  EXPECT_FALSE(Cycle({{Allreduce(0, "a")}, {}}).idle());  // a request
  EXPECT_FALSE(Cycle({{}, {}}).idle());  // 'a' still waits for rank 1
  ResponseList done = Cycle({{}, {Allreduce(1, "a")}});
  EXPECT_EQ(done.responses_size(), 1);
  EXPECT_FALSE(done.idle());  // a response
  EXPECT_TRUE(Cycle({{}, {}}).idle());
}

TEST_F(CoordinatorTest, NotIdleWhileARankHasJoined) {
  Request join;
  join.set_rank(1);
  join.set_type(JOIN);
  EXPECT_FALSE(Cycle({{}, {join}}).idle());
  EXPECT_FALSE(Cycle({{}, {}}).idle());
}

// Nothing of its own would wake a rank outside a set when the set's members
// start an operation: with such a set the job never counts as idle.
TEST_F(CoordinatorTest, NeverIdleWithASetThatLeavesARankOut) {
  sets_.Add(1, {0, 1});
  EXPECT_TRUE(Cycle({{}, {}}).idle());
  sets_.Add(2, {1});
  EXPECT_FALSE(Cycle({{}, {}}).idle());
  sets_.Remove(2);
  EXPECT_TRUE(Cycle({{}, {}}).idle());
}

TEST_F(CoordinatorTest, ShutdownIsNotIdle) {
  std::vector<RequestList> lists(2);
  lists[0].set_shutdown(true);
  EXPECT_FALSE(coordinator_->Compute(lists, absl::UnixEpoch()).idle());
}

class CachedCoordinatorTest : public CoordinatorTest {
 protected:
  CachedCoordinatorTest() : CoordinatorTest(2, 1 << 20, 4) {}
};

TEST_F(CachedCoordinatorTest, BitsFromAllRanksMakeTheTensorReady) {
  Request cached = Allreduce(0, "c");
  cache_.Put(cached);
  const int slot = cache_.Lookup(cached);
  ASSERT_GE(slot, 0);
  std::vector<RequestList> lists(2);
  std::string bits;
  SetBit(bits, slot);
  lists[0].set_cache_bits(bits);
  EXPECT_EQ(coordinator_->Compute(lists, absl::UnixEpoch()).responses_size(), 0);
  lists[1].set_cache_bits(bits);
  ResponseList out = coordinator_->Compute(lists, absl::UnixEpoch());
  ASSERT_EQ(out.responses_size(), 1);
  EXPECT_EQ(out.responses(0).names(0), "c");
  EXPECT_EQ(out.responses(0).error(), "");
}

TEST_F(CachedCoordinatorTest, BitAgainstChangedShapeIsAMismatch) {
  Request cached = Allreduce(0, "c", {4});
  cache_.Put(cached);
  std::vector<RequestList> lists(2);
  std::string bits;
  SetBit(bits, cache_.Lookup(cached));
  lists[0].set_cache_bits(bits);
  *lists[1].add_requests() = Allreduce(1, "c", {5});
  ResponseList out = coordinator_->Compute(lists, absl::UnixEpoch());
  ASSERT_EQ(out.responses_size(), 1);
  EXPECT_EQ(out.responses(0).error(),
            "Mismatched shapes for allreduce of tensor 'c': rank 0 has [4], "
            "rank 1 has [5]");
}

class LargeJobCachedCoordinatorTest : public CoordinatorTest {
 protected:
  LargeJobCachedCoordinatorTest() : CoordinatorTest(4096, 1 << 20, 4) {}
};

TEST_F(LargeJobCachedCoordinatorTest, ATensorIsReadyOnlyWhenEveryRanksBitIs) {
  Request cached = Allreduce(0, "c", {1024});
  cache_.Put(cached);
  std::string bits;
  SetBit(bits, cache_.Lookup(cached));
  std::vector<RequestList> lists(4096);
  for (int r = 0; r < 4095; ++r) lists[r].set_cache_bits(bits);
  EXPECT_EQ(coordinator_->Compute(lists, absl::UnixEpoch()).responses_size(),
            0);
  for (RequestList& list : lists) list.set_cache_bits(bits);
  ResponseList out = coordinator_->Compute(lists, absl::UnixEpoch());
  ASSERT_EQ(out.responses_size(), 1);
  EXPECT_EQ(out.responses(0).names(0), "c");
  EXPECT_EQ(out.responses(0).sizes(0), 1024);
  EXPECT_EQ(out.responses(0).error(), "");
  EXPECT_EQ(coordinator_->stats().cached_ready, 0)
      << "the bits of a tensor that waited for a rank are negotiated as "
         "requests";
}

}  // namespace
}  // namespace hvd::runtime
