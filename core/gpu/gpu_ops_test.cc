// The GPU backend's orchestration on the host platform: several ranks in one
// process (one thread each plus the backend's own), their "device" memory
// host memory, meeting through an in-memory store and connected by the real
// TCP transport. What this covers: the path choice per set, the staged path,
// the NCCL path's fusion, factors, fallback and hierarchical allreduce (over
// staged communicators standing in for NCCL), completion and failure. NCCL
// itself and CUDA run in the GPU tests (nccl_ops_test.cc).
#include "core/gpu/gpu_ops.h"

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "core/gpu/host_platform.h"
#include "core/transport/tcp/tcp_context.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd::gpu {
namespace {

using runtime::OpResult;
using runtime::Response;
using runtime::TensorEntry;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// What one entry ended with.
struct Outcome {
  bool done = false;
  absl::Status status;
  OpResult result;
};

struct RankSetup {
  std::string host = "host";
  std::string gpu = "GPU-shared";
};

struct Options {
  std::vector<RankSetup> ranks;
  GpuOptions gpu;
  bool nccl = true;
  absl::Duration timeout = absl::Seconds(20);
};

// One test job: N backends over host platforms.
class Job {
 public:
  explicit Job(const Options& options) : store_(NewInMemoryStore()) {
    const int n = static_cast<int>(options.ranks.size());
    for (int r = 0; r < n; ++r) {
      transport::TcpOptions tcp;
      tcp.iface = "127.0.0.1";
      tcp.hostname = options.ranks[r].host;
      tcp.token = "gpu-ops-test-token";
      auto make_context = [tcp](int rank, int size, Store* store) {
        return transport::CreateTcpContext(rank, size, store, tcp);
      };
      runtime::DeviceEnv env;
      env.config.rank = r;
      env.config.size = n;
      env.config.hostname = options.ranks[r].host;
      env.config.timeout = options.timeout;
      env.store = store_.get();
      env.make_context = make_context;
      env.collective_options.timeout = options.timeout;
      HostPlatformOptions host;
      host.identity = options.ranks[r].gpu;
      host.nccl = options.nccl;
      host.store = store_.get();
      host.make_context = make_context;
      host.collective_options.timeout = options.timeout;
      host.device_count = 2;
      auto platform = std::make_unique<HostPlatform>(host);
      platforms_.push_back(platform.get());
      ops_.push_back(
          std::make_unique<GpuOps>(env, std::move(platform), options.gpu));
    }
  }

  int size() const { return static_cast<int>(ops_.size()); }
  GpuOps& ops(int rank) { return *ops_[rank]; }
  HostDevice* device(int rank) { return platforms_[rank]->host_device(0); }

  // An entry of rank `rank` over host memory `input`/`output`.
  std::unique_ptr<TensorEntry> Entry(int rank, const std::string& name,
                                     DataType dtype, std::vector<int64_t> shape,
                                     void* input, void* output,
                                     int device_id = 0) {
    auto entry = std::make_unique<TensorEntry>();
    entry->request.set_name(name);
    entry->request.set_dtype(static_cast<int32_t>(dtype));
    for (int64_t d : shape) entry->request.add_shape(d);
    entry->request.set_rank(rank);
    entry->input = input;
    entry->output = output;
    entry->device = DeviceType::kGpu;
    entry->device_id = device_id;
    entry->ready = *ops_[rank]->MarkReady(device_id, nullptr);
    const std::string key = absl::StrCat(rank, "/", name);
    entry->done = [this, key](const absl::Status& s, OpResult r) {
      absl::MutexLock lock(&mu_);
      Outcome& o = outcomes_[key];
      o.done = true;
      o.status = s;
      o.result = std::move(r);
    };
    return entry;
  }

  // Waits for rank `rank`'s entry `name`.
  Outcome Wait(int rank, const std::string& name,
               absl::Duration timeout = absl::Seconds(30)) {
    const std::string key = absl::StrCat(rank, "/", name);
    absl::MutexLock lock(&mu_);
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return outcomes_[key].done;
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&done), timeout)) {
      Outcome o;
      o.status = absl::DeadlineExceededError("test: no completion");
      return o;
    }
    return outcomes_[key];
  }

  absl::Status Execute(int rank, const Response& response,
                       std::vector<std::unique_ptr<TensorEntry>> entries,
                       std::vector<int> members = {}) {
    collectives::Group group;
    if (members.empty()) {
      for (int r = 0; r < size(); ++r) members.push_back(r);
    }
    group.ranks = members;
    group.index = static_cast<int>(
        std::find(members.begin(), members.end(), rank) - members.begin());
    return ops_[rank]->Execute(response, entries, group);
  }

 private:
  std::unique_ptr<Store> store_;
  absl::Mutex mu_;
  std::map<std::string, Outcome> outcomes_ ABSL_GUARDED_BY(mu_);
  std::vector<HostPlatform*> platforms_;
  // Last: the backends complete entries (into outcomes_) until they go.
  std::vector<std::unique_ptr<GpuOps>> ops_;
};

Options Shared(int n) {
  Options o;
  o.ranks.assign(n, RankSetup{});
  return o;
}

Options Distinct(int n) {
  Options o;
  for (int r = 0; r < n; ++r)
    o.ranks.push_back({"host", absl::StrCat("GPU-", r)});
  return o;
}

Response AllreduceResponse(const std::vector<std::string>& names,
                           const std::vector<int64_t>& counts, DataType dtype,
                           ReduceOp op, double pre = 1.0, double post = 1.0,
                           int set = 0) {
  Response r;
  r.set_type(runtime::ALLREDUCE);
  for (const auto& n : names) r.add_names(n);
  for (int64_t c : counts) r.add_sizes(c);
  r.set_dtype(static_cast<int32_t>(dtype));
  r.set_device(static_cast<int32_t>(DeviceType::kGpu));
  r.set_op(static_cast<int32_t>(op));
  r.set_prescale(pre);
  r.set_postscale(post);
  r.set_process_set(set);
  return r;
}

// Runs a fused float32 allreduce of tensors of `counts` elements on every
// rank (rank r's element i is r + 1 + i) and returns rank 0's results.
std::vector<std::vector<float>> RunAllreduce(Job& job,
                                             const std::vector<int64_t>& counts,
                                             ReduceOp op, double pre = 1.0,
                                             double post = 1.0,
                                             const std::string& tag = "t") {
  const int n = job.size();
  std::vector<std::vector<std::vector<float>>> data(n);
  std::vector<std::string> names;
  for (size_t t = 0; t < counts.size(); ++t) {
    names.push_back(absl::StrCat(tag, t));
  }
  for (int r = 0; r < n; ++r) {
    std::vector<std::unique_ptr<TensorEntry>> entries;
    data[r].resize(counts.size());
    for (size_t t = 0; t < counts.size(); ++t) {
      auto& v = data[r][t];
      v.resize(counts[t]);
      for (int64_t i = 0; i < counts[t]; ++i) v[i] = r + 1 + i;
      entries.push_back(job.Entry(r, names[t], DataType::kFloat32, {counts[t]},
                                  v.data(), v.data()));
    }
    EXPECT_TRUE(job.Execute(r,
                            AllreduceResponse(names, counts, DataType::kFloat32,
                                              op, pre, post),
                            std::move(entries))
                    .ok());
  }
  for (int r = 0; r < n; ++r) {
    for (const auto& name : names) {
      const Outcome o = job.Wait(r, name);
      EXPECT_TRUE(o.status.ok())
          << "rank " << r << " " << name << ": " << o.status;
    }
  }
  for (int r = 1; r < n; ++r) EXPECT_EQ(data[r], data[0]) << "rank " << r;
  return data[0];
}

float Expected(int n, int64_t i, ReduceOp op, double pre, double post) {
  double sum = 0, lo = 1e30, hi = -1e30, prod = 1;
  for (int r = 0; r < n; ++r) {
    const double v = (r + 1 + i) * pre;
    sum += v;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    prod *= v;
  }
  switch (op) {
    case ReduceOp::kSum:
      return static_cast<float>(sum * post);
    case ReduceOp::kAverage:
      return static_cast<float>(sum / n * post);
    case ReduceOp::kMin:
      return static_cast<float>(lo * post);
    case ReduceOp::kMax:
      return static_cast<float>(hi * post);
    default:
      return static_cast<float>(prod * post);
  }
}

void ExpectReduced(const std::vector<std::vector<float>>& got,
                   const std::vector<int64_t>& counts, int n, ReduceOp op,
                   double pre = 1.0, double post = 1.0) {
  for (size_t t = 0; t < counts.size(); ++t) {
    for (int64_t i = 0; i < counts[t]; ++i) {
      EXPECT_NEAR(got[t][i], Expected(n, i, op, pre, post),
                  1e-4 * std::abs(Expected(n, i, op, pre, post)))
          << "tensor " << t << " element " << i;
    }
  }
}

TEST(GpuOps, RanksSharingAGpuTakeTheStagedPathForEveryReduceOp) {
  Job job(Shared(3));
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin,
                      ReduceOp::kMax, ReduceOp::kProduct}) {
    const std::vector<int64_t> counts = {5, 1, 33};
    auto got = RunAllreduce(job, counts, op, 1.0, 1.0,
                            absl::StrCat("op", static_cast<int>(op), "."));
    ExpectReduced(got, counts, 3, op);
  }
  EXPECT_EQ(job.ops(0).PathOf(0), "staged");
}

TEST(GpuOps, OwnGpusTakeNcclWithOneBatchedCopyEachWayForAFusedResponse) {
  Job job(Distinct(2));
  const std::vector<int64_t> counts = {4, 7, 1, 9};
  auto got = RunAllreduce(job, counts, ReduceOp::kSum);
  ExpectReduced(got, counts, 2, ReduceOp::kSum);
  EXPECT_EQ(job.ops(1).PathOf(0), "nccl");
  HostDevice* device = job.device(0);
  EXPECT_EQ(device->counts().copy_batches.load(), 2);  // in and out
  EXPECT_EQ(device->counts().waits.load(), 4);         // each producer event
}

TEST(GpuOps, FactorsFoldIntoOnePassForFloatSumAndAverage) {
  Job job(Distinct(2));
  const std::vector<int64_t> counts = {6};
  auto got = RunAllreduce(job, counts, ReduceOp::kAverage, 0.5, 3.0);
  ExpectReduced(got, counts, 2, ReduceOp::kAverage, 0.5, 3.0);
  // Staged size-2 premul runs on the host: no device scale pass at all.
  EXPECT_EQ(job.device(0)->counts().scales.load(), 0);
}

TEST(GpuOps, FactorsOnMaxAreScalePassesBeforeAndAfter) {
  Job job(Distinct(2));
  const std::vector<int64_t> counts = {3, 4};
  auto got = RunAllreduce(job, counts, ReduceOp::kMax, 2.0, 0.25);
  ExpectReduced(got, counts, 2, ReduceOp::kMax, 2.0, 0.25);
  EXPECT_EQ(job.device(0)->counts().scales.load(), 2);
}

TEST(GpuOps, SixteenBitIntegersFallBackToTheStagedPathUnderNccl) {
  Job job(Distinct(2));
  std::vector<std::vector<int16_t>> data = {{1, -2, 300}, {4, 5, 6}};
  for (int r = 0; r < 2; ++r) {
    std::vector<std::unique_ptr<TensorEntry>> entries;
    entries.push_back(job.Entry(r, "i16", DataType::kInt16, {3}, data[r].data(),
                                data[r].data()));
    ASSERT_TRUE(job.Execute(r,
                            AllreduceResponse({"i16"}, {3}, DataType::kInt16,
                                              ReduceOp::kSum),
                            std::move(entries))
                    .ok());
  }
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(job.Wait(r, "i16").status.ok());
    EXPECT_THAT(data[r], ElementsAre(5, 3, 306));
  }
  EXPECT_EQ(job.ops(0).PathOf(0), "nccl");
}

TEST(GpuOps, OutOfPlaceAllreduceLeavesTheInputAlone) {
  Job job(Distinct(2));
  std::vector<std::vector<int32_t>> in = {{1, 2}, {10, 20}}, out(2, {0, 0});
  for (int r = 0; r < 2; ++r) {
    std::vector<std::unique_ptr<TensorEntry>> entries;
    entries.push_back(job.Entry(r, "oop", DataType::kInt32, {2}, in[r].data(),
                                out[r].data()));
    ASSERT_TRUE(job.Execute(r,
                            AllreduceResponse({"oop"}, {2}, DataType::kInt32,
                                              ReduceOp::kSum, 2.0, 3.0),
                            std::move(entries))
                    .ok());
  }
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(job.Wait(r, "oop").status.ok());
    EXPECT_THAT(out[r], ElementsAre(66, 132));  // (1+10)*2*3, (2+20)*2*3
  }
  EXPECT_THAT(in[0], ElementsAre(1, 2));
}

TEST(GpuOps, HierarchicalAllreduceAcrossTwoHostsOfTwo) {
  Options options;
  options.ranks = {{"a", "g0"}, {"a", "g1"}, {"b", "g0"}, {"b", "g1"}};
  options.gpu.hierarchical = true;
  Job job(options);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMax}) {
    // 11 elements: not a multiple of the 2 members per host.
    const std::vector<int64_t> counts = {4, 7};
    auto got = RunAllreduce(job, counts, op, 1.0, 1.0,
                            absl::StrCat("h", static_cast<int>(op), "."));
    ExpectReduced(got, counts, 4, op);
  }
  EXPECT_EQ(job.ops(3).PathOf(0), "nccl+hierarchical");
}

TEST(GpuOps, AJoinedRankContributesZeros) {
  Job job(Distinct(2));
  std::vector<float> mine = {1, 2, 3};
  std::vector<std::unique_ptr<TensorEntry>> entries;
  entries.push_back(
      job.Entry(0, "j", DataType::kFloat32, {3}, mine.data(), mine.data()));
  const Response response =
      AllreduceResponse({"j"}, {3}, DataType::kFloat32, ReduceOp::kSum);
  ASSERT_TRUE(job.Execute(0, response, std::move(entries)).ok());
  std::vector<std::unique_ptr<TensorEntry>> none(1);  // rank 1 joined
  ASSERT_TRUE(job.Execute(1, response, std::move(none)).ok());
  ASSERT_TRUE(job.Wait(0, "j").status.ok());
  EXPECT_THAT(mine, ElementsAre(1, 2, 3));
}

Response DataResponse(runtime::OpType type, const std::string& name,
                      DataType dtype, std::vector<int64_t> sizes,
                      int64_t row_elems) {
  Response r;
  r.set_type(type);
  r.add_names(name);
  r.set_dtype(static_cast<int32_t>(dtype));
  r.set_device(static_cast<int32_t>(DeviceType::kGpu));
  for (int64_t s : sizes) r.add_sizes(s);
  r.add_row_elems(row_elems);
  r.set_prescale(1.0);
  r.set_postscale(1.0);
  return r;
}

class DataOpsTest : public ::testing::TestWithParam<bool> {
 protected:
  Options Make(int n) { return GetParam() ? Distinct(n) : Shared(n); }
};

TEST_P(DataOpsTest, AllgatherOfDifferingFirstDimensionsOnTheDevice) {
  Job job(Make(3));
  // Rank r has r + 1 rows of 2 elements, valued 10 r + i.
  std::vector<std::vector<int64_t>> data(3);
  for (int r = 0; r < 3; ++r) {
    for (int i = 0; i < 2 * (r + 1); ++i) data[r].push_back(10 * r + i);
    std::vector<std::unique_ptr<TensorEntry>> entries;
    entries.push_back(job.Entry(r, "ag", DataType::kInt64, {r + 1, 2},
                                data[r].data(), data[r].data()));
    ASSERT_TRUE(job.Execute(r,
                            DataResponse(runtime::ALLGATHER, "ag",
                                         DataType::kInt64, {1, 2, 3}, 2),
                            std::move(entries))
                    .ok());
  }
  for (int r = 0; r < 3; ++r) {
    Outcome o = job.Wait(r, "ag");
    ASSERT_TRUE(o.status.ok()) << o.status;
    ASSERT_TRUE(o.result.output);
    EXPECT_EQ(o.result.output->device(), DeviceType::kGpu);
    EXPECT_THAT(o.result.shape, ElementsAre(6, 2));
    const int64_t* got = static_cast<int64_t*>(o.result.output->data());
    EXPECT_THAT(std::vector<int64_t>(got, got + 12),
                ElementsAre(0, 1, 10, 11, 12, 13, 20, 21, 22, 23, 24, 25));
  }
}

TEST_P(DataOpsTest, BroadcastFromMemberOne) {
  Job job(Make(3));
  std::vector<std::vector<double>> data(3);
  for (int r = 0; r < 3; ++r) {
    data[r] = {r * 1.5, r * 2.5};
    std::vector<std::unique_ptr<TensorEntry>> entries;
    entries.push_back(job.Entry(r, "bc", DataType::kFloat64, {2},
                                data[r].data(), data[r].data()));
    Response response =
        DataResponse(runtime::BROADCAST, "bc", DataType::kFloat64, {2}, 1);
    response.set_root(1);
    ASSERT_TRUE(job.Execute(r, response, std::move(entries)).ok());
  }
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(job.Wait(r, "bc").status.ok());
    EXPECT_THAT(data[r], ElementsAre(1.5, 2.5));
  }
}

TEST_P(DataOpsTest, AlltoallWithUnevenSplits) {
  Job job(Make(2));
  // Rank 0 sends 1 row to itself and 2 to rank 1; rank 1 sends 3 and 0.
  const std::vector<int64_t> matrix = {1, 2, 3, 0};
  std::vector<std::vector<int32_t>> data = {{0, 1, 2}, {10, 11, 12}};
  for (int r = 0; r < 2; ++r) {
    std::vector<std::unique_ptr<TensorEntry>> entries;
    entries.push_back(job.Entry(r, "a2a", DataType::kInt32, {3}, data[r].data(),
                                data[r].data()));
    ASSERT_TRUE(job.Execute(r,
                            DataResponse(runtime::ALLTOALL, "a2a",
                                         DataType::kInt32, matrix, 1),
                            std::move(entries))
                    .ok());
  }
  Outcome zero = job.Wait(0, "a2a"), one = job.Wait(1, "a2a");
  ASSERT_TRUE(zero.status.ok() && one.status.ok()) << zero.status << one.status;
  const int32_t* a = static_cast<int32_t*>(zero.result.output->data());
  EXPECT_THAT(std::vector<int32_t>(a, a + 4), ElementsAre(0, 10, 11, 12));
  EXPECT_THAT(zero.result.received_splits, ElementsAre(1, 3));
  const int32_t* b = static_cast<int32_t*>(one.result.output->data());
  EXPECT_THAT(std::vector<int32_t>(b, b + 2), ElementsAre(1, 2));
  EXPECT_THAT(one.result.received_splits, ElementsAre(2, 0));
}

TEST_P(DataOpsTest, ReducescatterOfUnevenRowsWithAverageAndPostscale) {
  Job job(Make(3));
  // 7 rows of 1 element: members get 3, 2, 2 rows.
  std::vector<std::vector<float>> data(3);
  for (int r = 0; r < 3; ++r) {
    for (int i = 0; i < 7; ++i) data[r].push_back(r + i);
    std::vector<std::unique_ptr<TensorEntry>> entries;
    entries.push_back(job.Entry(r, "rs", DataType::kFloat32, {7},
                                data[r].data(), data[r].data()));
    Response response =
        DataResponse(runtime::REDUCESCATTER, "rs", DataType::kFloat32, {7}, 1);
    response.set_op(static_cast<int32_t>(ReduceOp::kAverage));
    response.set_postscale(2.0);
    ASSERT_TRUE(job.Execute(r, response, std::move(entries)).ok());
  }
  const int first[] = {0, 3, 5};
  const int rows[] = {3, 2, 2};
  for (int r = 0; r < 3; ++r) {
    Outcome o = job.Wait(r, "rs");
    ASSERT_TRUE(o.status.ok()) << o.status;
    EXPECT_THAT(o.result.shape, ElementsAre(rows[r]));
    const float* got = static_cast<float*>(o.result.output->data());
    for (int i = 0; i < rows[r]; ++i) {
      // mean over ranks of (r + row) is 1 + row; times 2.
      EXPECT_FLOAT_EQ(got[i], 2.0f * (1 + first[r] + i));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, DataOpsTest, ::testing::Bool(),
                         [](const auto& info) {
                           return info.param ? "Nccl" : "Staged";
                         });

TEST(GpuOps, ASetOfOneNeedsNoPeers) {
  Options options = Distinct(1);
  Job job(options);
  std::vector<float> v = {1, 2};
  std::vector<std::unique_ptr<TensorEntry>> entries;
  entries.push_back(
      job.Entry(0, "one", DataType::kFloat32, {2}, v.data(), v.data()));
  ASSERT_TRUE(job.Execute(0,
                          AllreduceResponse({"one"}, {2}, DataType::kFloat32,
                                            ReduceOp::kAverage, 4.0),
                          std::move(entries))
                  .ok());
  ASSERT_TRUE(job.Wait(0, "one").status.ok());
  EXPECT_THAT(v, ElementsAre(4, 8));
}

TEST(GpuOps, ATensorOnAnotherGpuStopsTheBackendNamingIt) {
  Job job(Distinct(1));
  std::vector<float> a = {1}, b = {2};
  std::vector<std::unique_ptr<TensorEntry>> first;
  first.push_back(
      job.Entry(0, "on0", DataType::kFloat32, {1}, a.data(), a.data(), 0));
  ASSERT_TRUE(job.Execute(0,
                          AllreduceResponse({"on0"}, {1}, DataType::kFloat32,
                                            ReduceOp::kSum),
                          std::move(first))
                  .ok());
  ASSERT_TRUE(job.Wait(0, "on0").status.ok());
  std::vector<std::unique_ptr<TensorEntry>> second;
  second.push_back(
      job.Entry(0, "on1", DataType::kFloat32, {1}, b.data(), b.data(), 1));
  ASSERT_TRUE(job.Execute(0,
                          AllreduceResponse({"on1"}, {1}, DataType::kFloat32,
                                            ReduceOp::kSum),
                          std::move(second))
                  .ok());
  const Outcome o = job.Wait(0, "on1");
  EXPECT_EQ(o.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(o.status.message(),
              HasSubstr("tensor 'on1' is on GPU 1 but this process runs its "
                        "GPU ops on GPU 0"));
  // The backend is stopped: the next op is refused with the same error.
  std::vector<std::unique_ptr<TensorEntry>> third;
  third.push_back(
      job.Entry(0, "later", DataType::kFloat32, {1}, a.data(), a.data()));
  absl::Status s = job.Execute(
      0, AllreduceResponse({"later"}, {1}, DataType::kFloat32, ReduceOp::kSum),
      std::move(third));
  EXPECT_THAT(s.message(), HasSubstr("tensor 'on1' is on GPU 1"));
  EXPECT_THAT(job.Wait(0, "later").status.message(),
              HasSubstr("tensor 'on1' is on GPU 1"));
}

TEST(GpuOps, ForcedNcclOnASharedGpuFailsTheOpSayingWhy) {
  Options options = Shared(2);
  options.gpu.policy = PathPolicy::kNccl;
  Job job(options);
  std::vector<std::vector<float>> v(2, {1});
  for (int r = 0; r < 2; ++r) {
    std::vector<std::unique_ptr<TensorEntry>> entries;
    entries.push_back(
        job.Entry(r, "f", DataType::kFloat32, {1}, v[r].data(), v[r].data()));
    (void)job.Execute(
        r, AllreduceResponse({"f"}, {1}, DataType::kFloat32, ReduceOp::kSum),
        std::move(entries));
  }
  for (int r = 0; r < 2; ++r) {
    const Outcome o = job.Wait(r, "f");
    EXPECT_EQ(o.status.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(o.status.message(),
                HasSubstr("HVD_GPU_DATA_PATH=nccl but members 0 and 1 share "
                          "GPU GPU-shared on host host"));
  }
}

TEST(GpuOps, AbortFailsLaterOpsWithTheReason) {
  Job job(Distinct(1));
  job.ops(0).Abort(absl::UnavailableError("negotiation with rank 0 failed"));
  std::vector<float> v = {1};
  std::vector<std::unique_ptr<TensorEntry>> entries;
  entries.push_back(
      job.Entry(0, "x", DataType::kFloat32, {1}, v.data(), v.data()));
  absl::Status s = job.Execute(
      0, AllreduceResponse({"x"}, {1}, DataType::kFloat32, ReduceOp::kSum),
      std::move(entries));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(job.Wait(0, "x").status.message(),
              HasSubstr("negotiation with rank 0 failed"));
}

// A CPU-only job of a CUDA build has this backend too: its peer-lost abort
// is the runtime's to report, not a GPU warning on every rank.
TEST(GpuOps, AnAbortBeforeAnyGpuTensorLogsNoWarning) {
  Job job(Distinct(1));
  ::testing::internal::CaptureStderr();
  job.ops(0).Abort(absl::UnavailableError("rank 1: peer lost"));
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(log, ::testing::Not(HasSubstr("GPU backend stops"))) << log;
  std::vector<float> v = {1};
  std::vector<std::unique_ptr<TensorEntry>> entries;
  entries.push_back(
      job.Entry(0, "x", DataType::kFloat32, {1}, v.data(), v.data()));
  EXPECT_EQ(job.Execute(0,
                        AllreduceResponse({"x"}, {1}, DataType::kFloat32,
                                          ReduceOp::kSum),
                        std::move(entries))
                .code(),
            absl::StatusCode::kUnavailable);
}

TEST(GpuOps, AnAbortAfterAGpuOpWarnsWithTheReason) {
  Job job(Distinct(1));
  RunAllreduce(job, {2}, ReduceOp::kSum);
  ::testing::internal::CaptureStderr();
  job.ops(0).Abort(absl::UnavailableError("rank 1: peer lost"));
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(log, HasSubstr("WARNING] GPU backend stops: rank 1: peer lost"));
}

TEST(GpuOps, APeerLostMidOpFailsTheSurvivorInsteadOfHanging) {
  Options options = Shared(2);
  options.timeout = absl::Seconds(10);
  Job job(options);
  RunAllreduce(job, {2}, ReduceOp::kSum);  // sets up the staged connections
  std::vector<float> v = {1};
  std::vector<std::unique_ptr<TensorEntry>> entries;
  entries.push_back(
      job.Entry(0, "lost", DataType::kFloat32, {1}, v.data(), v.data()));
  ASSERT_TRUE(job.Execute(0,
                          AllreduceResponse({"lost"}, {1}, DataType::kFloat32,
                                            ReduceOp::kSum),
                          std::move(entries))
                  .ok());
  // Rank 1 never joins the op: its runtime lost a peer and aborts.
  job.ops(1).Abort(absl::UnavailableError("rank 1: peer lost"));
  const absl::Time start = absl::Now();
  const Outcome o = job.Wait(0, "lost", absl::Seconds(30));
  EXPECT_NE(o.status.code(), absl::StatusCode::kDeadlineExceeded) << o.status;
  EXPECT_THAT(o.status.message(),
              HasSubstr("rank 0 (member 0 of 2 of process set 0): staged "
                        "allreduce"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST(GpuOps, ShutdownLetsQueuedOpsFinish) {
  Job job(Distinct(1));
  std::vector<float> v = {3};
  std::vector<std::unique_ptr<TensorEntry>> entries;
  entries.push_back(
      job.Entry(0, "s", DataType::kFloat32, {1}, v.data(), v.data()));
  ASSERT_TRUE(job.Execute(0,
                          AllreduceResponse({"s"}, {1}, DataType::kFloat32,
                                            ReduceOp::kSum, 2.0),
                          std::move(entries))
                  .ok());
  job.ops(0).Shutdown();
  EXPECT_TRUE(job.Wait(0, "s").status.ok());
  EXPECT_THAT(v, ElementsAre(6));
  std::vector<std::unique_ptr<TensorEntry>> late;
  late.push_back(
      job.Entry(0, "late", DataType::kFloat32, {1}, v.data(), v.data()));
  EXPECT_TRUE(job.Execute(0,
                          AllreduceResponse({"late"}, {1}, DataType::kFloat32,
                                            ReduceOp::kSum),
                          std::move(late))
                  .ok());
  EXPECT_EQ(job.Wait(0, "late").status.code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(GpuOps, ARemovedSetLosesItsCommunicators) {
  Job job(Distinct(2));
  RunAllreduce(job, {1}, ReduceOp::kSum);
  EXPECT_EQ(job.ops(0).PathOf(0), "nccl");
  job.ops(0).RemoveProcessSet(0);
  job.ops(1).RemoveProcessSet(0);
  job.ops(0).Shutdown();  // runs the queue
  EXPECT_EQ(job.ops(0).PathOf(0), "");
}

TEST(PredictPath, SaysStagedMayApplyWhenRanksOutnumberGpus) {
  HostPlatformOptions host;
  host.device_count = 2;
  HostPlatform platform(host);
  runtime::Config config;
  config.local_size = 4;
  EXPECT_THAT(PredictPath(config, {}, platform),
              HasSubstr("staged if ranks share GPUs (4 ranks on this host, 2 "
                        "GPU(s) visible here)"));
  config.local_size = 2;
  EXPECT_THAT(PredictPath(config, {}, platform), HasSubstr("NCCL"));
  GpuOptions staged;
  staged.policy = PathPolicy::kStaged;
  EXPECT_THAT(PredictPath(config, staged, platform),
              HasSubstr("HVD_GPU_DATA_PATH=staged"));
}

}  // namespace
}  // namespace hvd::gpu
