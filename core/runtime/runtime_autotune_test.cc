// The autotuner in a running job: rank 0 changes the fusion threshold, cycle
// time, small-message threshold and chunk size while every rank trains, and
// every rank switches with it at the same cycle. A rank that switched alone
// would run another algorithm or another chunking than its peers, and its
// results would be wrong or never come.
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/runtime/test_job.h"
#include "gtest/gtest.h"

namespace hvd::runtime {
namespace {

class RuntimeAutotuneTest : public ::testing::TestWithParam<MeshTransport> {};

// One step: allreduces of 256 B to 1 MiB, submitted together, as a
// backward pass does; every result checked.
void Step(Job& job, int rank, int step) {
  const int size = job.size();
  std::vector<std::vector<float>> data;
  for (size_t count = 64; count <= (size_t{1} << 18); count *= 8) {
    data.emplace_back(count, static_cast<float>(rank + step));
  }
  std::vector<int64_t> handles;
  for (size_t i = 0; i < data.size(); ++i) {
    handles.push_back(job.runtime(rank)
                          .Submit(One(Allreduce(absl::StrCat("g", i),
                                                data[i])))
                          .value());
  }
  // Sum over ranks of (rank + step).
  const float want = size * (size - 1) / 2.0f + size * step;
  for (size_t i = 0; i < data.size(); ++i) {
    ASSERT_EQ(
        job.handles(rank).Wait(handles[i], absl::Now() + absl::Seconds(30)),
        HandleTable::kDone);
    ASSERT_TRUE(job.handles(rank).GetStatus(handles[i]).ok());
    job.handles(rank).Release(handles[i]);
    ASSERT_EQ(data[i].front(), want) << "rank " << rank << " step " << step;
    ASSERT_EQ(data[i].back(), want) << "rank " << rank << " step " << step;
  }
}

std::vector<std::vector<std::string>> LogRows(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(in, line);) {
    rows.push_back(absl::StrSplit(line, ','));
  }
  return rows;
}

// A job's config with autotune on, logging to `log_name` in the test's
// temporary directory.
Config Autotuned(int warmup_samples, int steps_per_sample, int max_samples,
                 const std::string& log_name) {
  Config config;
  config.autotune.enabled = true;
  config.autotune.warmup_samples = warmup_samples;
  config.autotune.steps_per_sample = steps_per_sample;
  config.autotune.max_samples = max_samples;
  config.autotune.log_file = absl::StrCat(::testing::TempDir(), "/", log_name);
  return config;
}

TEST_P(RuntimeAutotuneTest, EveryRankSwitchesToTheTunedValuesTogether) {
  const Config config =
      Autotuned(1, 2, 8, absl::StrCat("autotune_", GetParam(), ".csv"));
  for (int size : {2, 3}) {
    Job job(size, GetParam(), config);
    ASSERT_EQ(job.size(), size);
    // Enough steps to finish tuning: (1 + 8) samples of 2 steps, and a
    // partial step at each change.
    job.RunOnEveryRank([&](int rank) {
      for (int step = 0; step < 40; ++step) Step(job, rank, step);
    });
    const auto rows = LogRows(config.autotune.log_file);
    ASSERT_GE(rows.size(), 11u);  // header, warmup, 8 samples, final
    EXPECT_EQ(rows[1][1], "warmup");
    EXPECT_EQ(rows.back()[1], "final");
    std::set<std::string> small_message_thresholds;
    for (size_t i = 2; i + 1 < rows.size(); ++i) {
      EXPECT_EQ(rows[i][1], "sample");
      small_message_thresholds.insert(rows[i][4]);
      ASSERT_EQ(rows[i].size(), 9u);
    }
    EXPECT_GT(small_message_thresholds.size(), 1u)
        << "the tuner never moved the algorithm threshold";
  }
}

// Two hosts of two ranks: the hierarchical switches are searched too, and
// every rank's results stay right whichever algorithm a sample runs.
TEST(RuntimeAutotuneOnHostsTest, HierarchicalSwitchesChangeTogether) {
  const Config config = Autotuned(0, 1, 12, "autotune_hosts.csv");
  Job job(4, MeshTransport::kMixed, config);
  ASSERT_EQ(job.size(), 4);
  job.RunOnEveryRank([&](int rank) {
    for (int step = 0; step < 40; ++step) Step(job, rank, step);
  });
  const auto rows = LogRows(config.autotune.log_file);
  ASSERT_GE(rows.size(), 14u);
  EXPECT_EQ(rows.back()[1], "final");
  std::set<std::string> switches;
  for (size_t i = 1; i + 1 < rows.size(); ++i) {
    switches.insert(rows[i][6] + rows[i][7]);
  }
  EXPECT_GT(switches.size(), 1u) << "the switches were never searched";
}

INSTANTIATE_TEST_SUITE_P(Transports, RuntimeAutotuneTest,
                         ::testing::Values(MeshTransport::kTcp,
                                           MeshTransport::kShm),
                         [](const auto& info) {
                           return collectives::MeshTransportName(info.param);
                         });

}  // namespace
}  // namespace hvd::runtime
