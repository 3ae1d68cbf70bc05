#include "core/runtime/metrics.h"

#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "core/rendezvous/store.h"
#include "core/runtime/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd::runtime {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(Metrics, RendersEveryCounterAsAPrometheusSample) {
  Metrics m;
  m.Collective(ALLREDUCE, 4096);
  m.Collective(ALLREDUCE, 1024);
  m.Collective(BROADCAST, 8);
  m.Collective(JOIN, 0);  // control ops are not collectives of data
  m.Negotiation(absl::Milliseconds(250));
  m.DataMovement(absl::Milliseconds(1500));
  m.FusionFill(16 << 20, 64 << 20);
  const absl::Time t0 = absl::Now();
  m.Step(t0);  // the first step only starts the clock
  m.Step(t0 + absl::Milliseconds(125));
  const std::string text = m.Render(123456);
  EXPECT_THAT(text, HasSubstr("hvd_collectives_total{op=\"allreduce\"} 2\n"));
  EXPECT_THAT(text,
              HasSubstr("hvd_collective_bytes_total{op=\"allreduce\"} 5120\n"));
  EXPECT_THAT(text, HasSubstr("hvd_collectives_total{op=\"broadcast\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("hvd_collectives_total{op=\"alltoall\"} 0\n"));
  EXPECT_THAT(text, Not(HasSubstr("join")));
  EXPECT_THAT(text, HasSubstr("hvd_negotiation_seconds_total 0.25\n"));
  EXPECT_THAT(text, HasSubstr("hvd_data_movement_seconds_total 1.5\n"));
  EXPECT_THAT(text, HasSubstr("hvd_fusion_buffer_fill_ratio 0.25\n"));
  EXPECT_THAT(text, HasSubstr("hvd_step_seconds 0.125\n"));
  EXPECT_THAT(text, HasSubstr("hvd_stalled{what=\"\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("hvd_resident_memory_bytes 123456\n"));
}

TEST(Metrics, AStallIsQuotedAsALabelValue) {
  Metrics m;
  m.Stall("tensor \"w\\1\" on ranks 2, 3");
  EXPECT_THAT(m.Render(0),
              HasSubstr("hvd_stalled{what=\"tensor \\\"w\\\\1\\\" on ranks 2, "
                        "3\"} 1\n"));
  m.Stall("");
  EXPECT_THAT(m.Render(0), HasSubstr("hvd_stalled{what=\"\"} 0\n"));
}

TEST(Metrics, ResidentBytesIsThisProcess) {
  EXPECT_GT(ResidentBytes(), uint64_t{1} << 20);
  EXPECT_EQ(MetricsKey(3), "metrics/3");
}

// A job of one rank, reporting every 50 ms into a store it was given.
TEST(MetricsReport, TheRuntimePublishesItsCountsInTheStore) {
  Config config;
  config.metrics_interval = absl::Milliseconds(50);
  RuntimeParts parts;
  parts.job_store = NewInMemoryStore();
  std::shared_ptr<Store> store = parts.job_store;
  HandleTable handles;
  auto runtime = Runtime::Start(config, std::move(parts), &handles);
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  std::vector<float> data(1024, 1.0f);
  auto entry = std::make_unique<TensorEntry>();
  Request& r = entry->request;
  r.set_type(ALLREDUCE);
  r.set_name("w");
  r.set_dtype(static_cast<int32_t>(DataType::kFloat32));
  r.add_shape(static_cast<int64_t>(data.size()));
  r.set_prescale(1.0);
  r.set_postscale(1.0);
  entry->input = entry->output = data.data();
  std::vector<std::unique_ptr<TensorEntry>> entries;
  entries.push_back(std::move(entry));
  const int64_t handle = (*runtime)->Submit(std::move(entries)).value();
  ASSERT_EQ(handles.Wait(handle, absl::Now() + absl::Seconds(30)),
            HandleTable::kDone);
  EXPECT_TRUE(handles.GetStatus(handle).ok());
  const std::string want =
      "hvd_collective_bytes_total{op=\"allreduce\"} 4096\n";
  std::string last;
  for (int i = 0; i < 200 && !absl::StrContains(last, want); ++i) {
    absl::SleepFor(absl::Milliseconds(20));
    last = store->Get(MetricsKey(0), absl::Seconds(5)).value_or("");
  }
  EXPECT_THAT(last, HasSubstr(want));
  (*runtime)->Shutdown();
}

}  // namespace
}  // namespace hvd::runtime
