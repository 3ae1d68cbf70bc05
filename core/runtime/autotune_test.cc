#include "core/runtime/autotune.h"

#include <unistd.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/common/type_values.h"
#include "gtest/gtest.h"

namespace hvd::runtime {
namespace {

constexpr int64_t kMiB = 1 << 20;

Tuning Start() {
  Tuning t;
  t.set_fusion_threshold(1 * kMiB);
  t.set_cycle_time_us(20000);
  t.set_small_message_bytes(64 << 10);
  t.set_chunk_bytes(1 * kMiB);
  return t;
}

// One training step's list: `tensors` float32 allreduces of `elements` each.
ResponseList Step(int tensors, int64_t elements) {
  ResponseList list;
  for (int i = 0; i < tensors; ++i) {
    Response* r = list.add_responses();
    r->set_type(ALLREDUCE);
    r->set_dtype(static_cast<int32_t>(hvd::DataType::kFloat32));
    r->add_names(absl::StrCat("grad", i));
    r->add_sizes(elements);
  }
  return list;
}

// A job whose step takes `step_seconds(values in force)`: runs steps until
// the tuner freezes or `max_steps` pass; returns the steps run, with every
// change the tuner made in `changes`.
int RunJob(Autotuner& tuner, const std::function<double(const Tuning&)>&
                                 step_seconds,
           int max_steps, std::vector<Tuning>* changes) {
  Tuning in_force = tuner.current();
  absl::Time now = absl::UnixEpoch();
  const ResponseList list = Step(4, 1 << 20);
  int step = 0;
  for (; step < max_steps && !tuner.frozen(); ++step) {
    if (std::optional<Tuning> t = tuner.Observe(list, now)) {
      in_force = *t;
      changes->push_back(*t);
    }
    now += absl::Seconds(step_seconds(in_force));
  }
  return step;
}

AutotuneOptions Tuned(int warmup_samples, int steps_per_sample,
                      int max_samples) {
  AutotuneOptions o;
  o.enabled = true;
  o.warmup_samples = warmup_samples;
  o.steps_per_sample = steps_per_sample;
  o.max_samples = max_samples;
  return o;
}

std::string TempPath(const char* name) {
  return absl::StrCat(::testing::TempDir(), "/", name, getpid());
}

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::stringstream all;
  all << in.rdbuf();
  return absl::StrSplit(all.str(), '\n', absl::SkipEmpty());
}

TEST(AutotuneTest, ScoreIsTheStepsBusBandwidthInGigabytesPerSecond) {
  AutotuneOptions o = Tuned(0, 2, 1);
  o.log_file = TempPath("score");
  auto tuner = Autotuner::Create(o, Start(), 4, false);
  ASSERT_TRUE(tuner.ok()) << tuner.status();
  std::vector<Tuning> changes;
  // 4 tensors of 1 Mi float32 = 16 MiB a step, 0.5 s a step, 4 ranks:
  // 16 MiB x 1.5 / 0.5 s.
  RunJob(**tuner, [](const Tuning&) { return 0.5; }, 100, &changes);
  ASSERT_TRUE((*tuner)->frozen());
  const std::vector<std::string> lines = Lines(o.log_file);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0],
            "sample,phase,fusion_threshold_bytes,cycle_time_us,"
            "small_message_bytes,chunk_bytes,hierarchical_allreduce,"
            "hierarchical_allgather,score_gbps");
  const std::vector<std::string> sample = absl::StrSplit(lines[1], ',');
  ASSERT_EQ(sample.size(), 9u);
  EXPECT_EQ(sample[1], "sample");
  EXPECT_EQ(sample[2], "1048576");  // the start values are sampled first
  EXPECT_NEAR(std::stod(sample[8]), 16.0 * kMiB * 1.5 / 0.5 / 1e9, 1e-6);
  EXPECT_EQ(lines[2].substr(0, 8), "1,final,");
}

TEST(AutotuneTest, WarmupSamplesAreLoggedAndNotScored) {
  AutotuneOptions o = Tuned(2, 3, 2);
  o.log_file = TempPath("warmup");
  auto tuner = Autotuner::Create(o, Start(), 2, false);
  ASSERT_TRUE(tuner.ok());
  std::vector<Tuning> changes;
  const int steps =
      RunJob(**tuner, [](const Tuning&) { return 0.1; }, 1000, &changes);
  const std::vector<std::string> lines = Lines(o.log_file);
  ASSERT_EQ(lines.size(), 6u);  // header, 2 warmups, 2 samples, final
  EXPECT_EQ(lines[1].substr(0, 9), "0,warmup,");
  EXPECT_EQ(lines[2].substr(0, 9), "1,warmup,");
  EXPECT_EQ(lines[3].substr(0, 9), "0,sample,");
  EXPECT_EQ(lines[5].substr(0, 8), "2,final,");
  // One step to start counting, 4 samples of 3, a partial step per change.
  EXPECT_LE(steps, 1 + 4 * 3 + 2);
  ASSERT_FALSE(changes.empty());
  EXPECT_TRUE(changes.back().frozen());
}

// A job that is fastest with a large fusion threshold and a 4 MiB chunk.
double BowlStep(const Tuning& t) {
  const double fusion = std::log2(static_cast<double>(t.fusion_threshold()));
  const double chunk = std::log2(static_cast<double>(t.chunk_bytes()));
  return 0.1 + 0.01 * std::pow(fusion - 27, 2) + 0.02 * std::pow(chunk - 22, 2);
}

TEST(AutotuneTest, RecoversFromWrongStartingValues) {
  AutotuneOptions o = Tuned(1, 2, 20);
  o.hold_cycle_time = true;
  o.hold_small_message_bytes = true;
  auto tuner = Autotuner::Create(o, Start(), 2, false);
  ASSERT_TRUE(tuner.ok());
  std::vector<Tuning> changes;
  RunJob(**tuner, BowlStep, 10000, &changes);
  ASSERT_TRUE((*tuner)->frozen());
  const Tuning& best = (*tuner)->current();
  // From 0.3 s a step at the start (1 MiB fusion, 1 MiB chunks) to within
  // 15% of the best, 0.1 s.
  EXPECT_GT(BowlStep(Start()), 0.3);
  EXPECT_LT(BowlStep(best), 0.115) << best.ShortDebugString();
}

TEST(AutotuneTest, HeldKnobsKeepTheirValues) {
  AutotuneOptions o = Tuned(0, 1, 8);
  o.hold_fusion_threshold = true;
  o.hold_chunk_bytes = true;
  auto tuner = Autotuner::Create(o, Start(), 2, false);
  ASSERT_TRUE(tuner.ok());
  std::vector<Tuning> changes;
  RunJob(**tuner, BowlStep, 1000, &changes);
  ASSERT_GT(changes.size(), 1u);
  bool moved = false;
  for (const Tuning& t : changes) {
    EXPECT_EQ(t.fusion_threshold(), Start().fusion_threshold());
    EXPECT_EQ(t.chunk_bytes(), Start().chunk_bytes());
    moved |= t.cycle_time_us() != Start().cycle_time_us();
  }
  EXPECT_TRUE(moved);  // the free knobs were searched
}

// A job on several hosts whose step is fastest with the hierarchical
// allreduce off.
double FlatIsFaster(const Tuning& t) {
  return BowlStep(t) + (t.hierarchical_allreduce() ? 0.2 : 0.0);
}

TEST(AutotuneTest, HierarchicalSwitchesAreSearchedOnlyWhereTheyApply) {
  for (bool hierarchical : {false, true}) {
    AutotuneOptions o = Tuned(0, 1, 12);
    Tuning start = Start();
    start.set_hierarchical_allreduce(true);
    start.set_hierarchical_allgather(true);
    auto tuner = Autotuner::Create(o, start, 4, hierarchical);
    ASSERT_TRUE(tuner.ok());
    std::vector<Tuning> changes;
    RunJob(**tuner, FlatIsFaster, 1000, &changes);
    ASSERT_TRUE((*tuner)->frozen());
    bool switched = false;
    for (const Tuning& t : changes) {
      switched |= !t.hierarchical_allreduce() || !t.hierarchical_allgather();
    }
    EXPECT_EQ(switched, hierarchical);
    if (hierarchical) {
      EXPECT_FALSE((*tuner)->current().hierarchical_allreduce());
    }
  }
}

TEST(AutotuneTest, NothingToTuneWhenEveryKnobIsHeld) {
  AutotuneOptions o;
  o.enabled = true;
  o.hold_fusion_threshold = o.hold_cycle_time = true;
  o.hold_small_message_bytes = o.hold_chunk_bytes = true;
  o.hold_hierarchical_allreduce = o.hold_hierarchical_allgather = true;
  auto tuner = Autotuner::Create(o, Start(), 2, true);
  ASSERT_TRUE(tuner.ok());
  EXPECT_TRUE((*tuner)->frozen());
  EXPECT_FALSE((*tuner)->Observe(Step(4, 16), absl::UnixEpoch()).has_value());
}

TEST(AutotuneTest, AStepEndsOnlyWhenATensorNameComesAgain) {
  AutotuneOptions o = Tuned(0, 1, 2);
  auto tuner = Autotuner::Create(o, Start(), 2, false);
  ASSERT_TRUE(tuner.ok());
  absl::Time now = absl::UnixEpoch();
  // Lists of fresh names never end a step.
  for (int i = 0; i < 50; ++i) {
    ResponseList list = Step(1, 16);
    list.mutable_responses(0)->set_names(0, absl::StrCat("fresh", i));
    EXPECT_FALSE((*tuner)->Observe(list, now).has_value());
    now += absl::Milliseconds(10);
  }
  // The same names: the first repeat starts the count, the next ends the
  // one-step sample at the start values, and the tuner moves on.
  EXPECT_FALSE((*tuner)->Observe(Step(1, 16), now).has_value());
  EXPECT_FALSE((*tuner)->Observe(Step(1, 16), now + absl::Seconds(1))
                   .has_value());
  EXPECT_TRUE((*tuner)->Observe(Step(1, 16), now + absl::Seconds(2))
                  .has_value());
}

TEST(AutotuneTest, AnUnwritableLogFileIsRefused) {
  AutotuneOptions o;
  o.enabled = true;
  o.log_file = "/nonexistent-dir/autotune.csv";
  auto tuner = Autotuner::Create(o, Start(), 2, false);
  ASSERT_FALSE(tuner.ok());
  EXPECT_NE(tuner.status().message().find("/nonexistent-dir/autotune.csv"),
            std::string::npos);
}

}  // namespace
}  // namespace hvd::runtime
