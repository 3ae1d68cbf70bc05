// The GPU backend on CUDA and NCCL at size 1 (one GPU allows one NCCL rank
// per communicator): every op through a real NCCL communicator, every type,
// fusion, the scale factors, device outputs, completion only after the GPU
// finished, the staged path. SKIPPED without a GPU; the multi-rank logic
// runs on every machine in gpu_ops_test.cc.
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/collectives/reduce.h"
#include "core/common/half.h"
#include "core/gpu/cuda_platform.h"
#include "core/gpu/cuda_testing.h"
#include "core/gpu/gpu_ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd::gpu {
namespace {

using runtime::OpResult;
using runtime::Response;
using runtime::TensorEntry;
using ::testing::ElementsAre;

class NcclOpsTest : public ::testing::Test {
 public:  // FusedAllreduce drives a test through these
  void SetUp() override {
    HVD_REQUIRE_GPU();
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    Start(GpuOptions());
  }

  void Start(GpuOptions options) {
    ops_.reset();
    runtime::DeviceEnv env;
    env.config.timeout = absl::Seconds(60);
    env.config.hostname = "localhost";
    env.collective_options.timeout = absl::Seconds(60);
    ops_ = std::make_unique<GpuOps>(env, std::make_unique<CudaPlatform>(),
                                    options);
  }

  void TearDown() override {
    ops_.reset();
    for (void* p : allocations_) cudaFree(p);
  }

  // Device memory freed at TearDown; the ops wait for the legacy stream
  // (MarkReady), the producer-stream test's own stream relies on Upload's
  // synchronisation.
  void* Upload(const std::vector<char>& bytes) {
    void* p = ::hvd::gpu::Upload(bytes);
    allocations_.push_back(p);
    return p;
  }

  std::unique_ptr<TensorEntry> Entry(const std::string& name, DataType dtype,
                                     std::vector<int64_t> shape, void* input,
                                     void* output, void* stream = nullptr) {
    auto entry = std::make_unique<TensorEntry>();
    entry->request.set_name(name);
    entry->request.set_dtype(static_cast<int32_t>(dtype));
    for (int64_t d : shape) entry->request.add_shape(d);
    entry->input = input;
    entry->output = output;
    entry->device = DeviceType::kGpu;
    entry->device_id = 0;
    auto ready = ops_->MarkReady(0, stream);
    EXPECT_TRUE(ready.ok()) << ready.status();
    if (ready.ok()) entry->ready = *ready;
    entry->done = [this, name](const absl::Status& s, OpResult r) {
      absl::MutexLock lock(&mu_);
      results_[name] = {s, std::move(r)};
    };
    return entry;
  }

  std::pair<absl::Status, OpResult> Wait(const std::string& name) {
    absl::MutexLock lock(&mu_);
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return results_.count(name) > 0;
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&done), absl::Seconds(60))) {
      return {absl::DeadlineExceededError("test: no completion"), {}};
    }
    return results_[name];
  }

  void Execute(const Response& response,
               std::vector<std::unique_ptr<TensorEntry>> entries) {
    collectives::Group group;
    group.ranks = {0};
    group.index = 0;
    ASSERT_TRUE(ops_->Execute(response, entries, group).ok());
  }

  std::unique_ptr<GpuOps> ops_;
  std::vector<void*> allocations_;
  absl::Mutex mu_;
  std::map<std::string, std::pair<absl::Status, OpResult>> results_
      ABSL_GUARDED_BY(mu_);
};

Response Make(runtime::OpType type, std::vector<std::string> names,
              std::vector<int64_t> sizes, DataType dtype,
              ReduceOp op = ReduceOp::kSum, double pre = 1.0,
              double post = 1.0) {
  Response r;
  r.set_type(type);
  for (const auto& n : names) r.add_names(n);
  for (int64_t s : sizes) r.add_sizes(s);
  r.set_dtype(static_cast<int32_t>(dtype));
  r.set_device(static_cast<int32_t>(DeviceType::kGpu));
  r.set_op(static_cast<int32_t>(op));
  r.set_prescale(pre);
  r.set_postscale(post);
  return r;
}

// Small integral values (exact in every type, and under every factor used).
std::vector<char> Values(DataType dtype, size_t count) {
  std::vector<char> bytes(count * DataTypeSize(dtype));
  for (size_t i = 0; i < count; ++i) {
    const int v = static_cast<int>(i % 7) + 1;
    const float f = static_cast<float>(v);
    const double d = v;
    const uint16_t h =
        dtype == DataType::kFloat16 ? FloatToHalf(f) : FloatToBFloat16(f);
    switch (dtype) {
      case DataType::kFloat32:
        std::memcpy(&bytes[i * 4], &f, 4);
        break;
      case DataType::kFloat64:
        std::memcpy(&bytes[i * 8], &d, 8);
        break;
      case DataType::kFloat16:
      case DataType::kBFloat16:
        std::memcpy(&bytes[i * 2], &h, 2);
        break;
      case DataType::kBool:
        bytes[i] = static_cast<char>(v & 1);
        break;
      default: {
        const int64_t wide = v;
        std::memcpy(&bytes[i * DataTypeSize(dtype)], &wide,
                    DataTypeSize(dtype));  // little-endian low bytes
      }
    }
  }
  return bytes;
}

TEST_F(NcclOpsTest, AllreduceEveryTypeAndOpThroughNccl) {
  const std::vector<DataType> types = {
      DataType::kUint8,   DataType::kInt8,     DataType::kInt16,
      DataType::kUint16,  DataType::kInt32,    DataType::kInt64,
      DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32,
      DataType::kFloat64, DataType::kBool};
  int n = 0;
  for (DataType dtype : types) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin,
                        ReduceOp::kMax, ReduceOp::kProduct}) {
      if (!CheckReducible(dtype, op).ok()) continue;
      for (size_t count : {size_t{1}, size_t{1027}, size_t{1} << 20}) {
        const bool floating = IsFloatingPoint(dtype);
        const double pre = floating ? 2.0 : 1.0;
        const double post = floating ? 0.25 : 3.0;
        const std::string name = absl::StrCat("t", n++);
        std::vector<char> want = Values(dtype, count);
        void* data = Upload(want);
        std::vector<std::unique_ptr<TensorEntry>> entries;
        entries.push_back(
            Entry(name, dtype, {static_cast<int64_t>(count)}, data, data));
        Execute(Make(runtime::ALLREDUCE, {name}, {static_cast<int64_t>(count)},
                     dtype, op, pre, post),
                std::move(entries));
        auto [status, result] = Wait(name);
        ASSERT_TRUE(status.ok()) << DataTypeName(dtype) << ": " << status;
        // One rank: every op leaves x, scaled by pre then post.
        collectives::Scale(want.data(), count, dtype, pre);
        collectives::Scale(want.data(), count, dtype, post);
        EXPECT_TRUE(Download(data, want.size()) == want)
            << DataTypeName(dtype) << " " << ReduceOpName(op) << " x" << count;
      }
    }
  }
  EXPECT_EQ(ops_->PathOf(0), "nccl");
}

// Where two float32 buffers differ: how many elements, the first and the
// last (index, want, got); empty where they are equal.
std::string Float32Difference(const std::vector<char>& got,
                              const std::vector<char>& want) {
  const size_t n = want.size() / 4;
  size_t differ = 0, first = 0, last = 0;
  for (size_t i = 0; i < n; ++i) {
    if (std::memcmp(&got[i * 4], &want[i * 4], 4) == 0) continue;
    if (differ++ == 0) first = i;
    last = i;
  }
  if (differ == 0) return "";
  auto at = [&](size_t i) {
    float w, g;
    std::memcpy(&w, &want[i * 4], 4);
    std::memcpy(&g, &got[i * 4], 4);
    return absl::StrCat("[", i, "] want ", w, " got ", g);
  };
  return absl::StrCat(differ, " of ", n, " elements differ; first ", at(first),
                      ", last ", at(last));
}

// `small` float32 tensors of 1..small elements and one of `large` elements,
// allreduced in one response with `prescale`.
void FusedAllreduce(NcclOpsTest& t, int small, int64_t large, double prescale);

TEST_F(NcclOpsTest, AFusedResponseOfManySmallTensorsAndALargeOne) {
  FusedAllreduce(*this, 200, (int64_t{3} << 20) + 1, 2.0);
}

TEST_F(NcclOpsTest, AFusedResponseWithoutAFactor) {
  FusedAllreduce(*this, 200, (int64_t{3} << 20) + 1, 1.0);
}

TEST_F(NcclOpsTest, OneLargeTensorOfAnOddCountWithAFactor) {
  FusedAllreduce(*this, 0, (int64_t{3} << 20) + 1, 2.0);
}

void FusedAllreduce(NcclOpsTest& t, int small, int64_t large,
                    double prescale) {
  std::vector<std::string> names;
  std::vector<int64_t> sizes;
  std::vector<std::unique_ptr<TensorEntry>> entries;
  std::vector<std::pair<void*, std::vector<char>>> tensors;
  for (int i = 0; i <= small; ++i) {
    const int64_t count = i == small ? large : i + 1;
    names.push_back(absl::StrCat("f", i));
    sizes.push_back(count);
    std::vector<char> bytes = Values(DataType::kFloat32, count);
    void* data = t.Upload(bytes);
    entries.push_back(
        t.Entry(names.back(), DataType::kFloat32, {count}, data, data));
    collectives::Scale(bytes.data(), count, DataType::kFloat32, prescale);
    tensors.push_back({data, std::move(bytes)});
  }
  t.Execute(Make(runtime::ALLREDUCE, names, sizes, DataType::kFloat32,
                 ReduceOp::kSum, prescale),
            std::move(entries));
  for (size_t i = 0; i < names.size(); ++i) {
    ASSERT_TRUE(t.Wait(names[i]).first.ok()) << names[i];
    EXPECT_EQ(Float32Difference(
                  Download(tensors[i].first, tensors[i].second.size()),
                  tensors[i].second),
              "")
        << names[i] << " of " << names.size() << ", prescale " << prescale;
  }
}

TEST_F(NcclOpsTest, TheOpWaitsForTheProducerStream) {
  const size_t count = 1 << 20;
  std::vector<char> want = Values(DataType::kFloat32, count);
  void* data = Upload(std::vector<char>(want.size(), 0));
  char* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), want.size()),
            cudaSuccess);
  std::memcpy(pinned, want.data(), want.size());
  cudaStream_t producer;
  ASSERT_EQ(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking),
            cudaSuccess);
  ASSERT_EQ(cudaLaunchHostFunc(
                producer, [](void*) { usleep(200 * 1000); }, nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(data, pinned, want.size(), cudaMemcpyHostToDevice,
                            producer),
            cudaSuccess);
  std::vector<std::unique_ptr<TensorEntry>> entries;
  entries.push_back(Entry("late", DataType::kFloat32,
                          {static_cast<int64_t>(count)}, data, data, producer));
  Execute(Make(runtime::ALLREDUCE, {"late"}, {static_cast<int64_t>(count)},
               DataType::kFloat32, ReduceOp::kSum, 3.0),
          std::move(entries));
  ASSERT_TRUE(Wait("late").first.ok());
  collectives::Scale(want.data(), count, DataType::kFloat32, 3.0);
  EXPECT_TRUE(Download(data, want.size()) == want);
  cudaStreamDestroy(producer);
  cudaFreeHost(pinned);
}

TEST_F(NcclOpsTest, AllgatherAlltoallReducescatterGiveDeviceOutputs) {
  const std::vector<char> rows = Values(DataType::kInt32, 6);  // 3 x 2
  void* data = Upload(rows);
  for (runtime::OpType type :
       {runtime::ALLGATHER, runtime::ALLTOALL, runtime::REDUCESCATTER}) {
    const std::string name = absl::StrCat("out", static_cast<int>(type));
    std::vector<std::unique_ptr<TensorEntry>> entries;
    entries.push_back(Entry(name, DataType::kInt32, {3, 2}, data, data));
    Response response = Make(type, {name}, {3}, DataType::kInt32);
    response.add_row_elems(2);
    Execute(response, std::move(entries));
    auto [status, result] = Wait(name);
    ASSERT_TRUE(status.ok()) << name << ": " << status;
    ASSERT_TRUE(result.output);
    EXPECT_EQ(result.output->device(), DeviceType::kGpu);
    EXPECT_THAT(result.shape, ElementsAre(3, 2));
    EXPECT_TRUE(Download(result.output->data(), rows.size()) == rows) << name;
  }
}

TEST_F(NcclOpsTest, BroadcastOutOfPlace) {
  const std::vector<char> bytes = Values(DataType::kFloat16, 33);
  void* in = Upload(bytes);
  void* out = Upload(std::vector<char>(bytes.size(), 0));
  std::vector<std::unique_ptr<TensorEntry>> entries;
  entries.push_back(Entry("b", DataType::kFloat16, {33}, in, out));
  Execute(Make(runtime::BROADCAST, {"b"}, {33}, DataType::kFloat16),
          std::move(entries));
  ASSERT_TRUE(Wait("b").first.ok());
  EXPECT_TRUE(Download(out, bytes.size()) == bytes);
}

TEST_F(NcclOpsTest, TheStagedPathAtSizeOne) {
  GpuOptions staged;
  staged.policy = PathPolicy::kStaged;
  Start(staged);
  std::vector<char> want = Values(DataType::kBFloat16, 100);
  void* data = Upload(want);
  std::vector<std::unique_ptr<TensorEntry>> entries;
  entries.push_back(Entry("s", DataType::kBFloat16, {100}, data, data));
  Execute(Make(runtime::ALLREDUCE, {"s"}, {100}, DataType::kBFloat16,
               ReduceOp::kAverage, 4.0),
          std::move(entries));
  ASSERT_TRUE(Wait("s").first.ok());
  collectives::Scale(want.data(), 100, DataType::kBFloat16, 4.0);
  EXPECT_TRUE(Download(data, want.size()) == want);
  EXPECT_EQ(ops_->PathOf(0), "staged");
}

}  // namespace
}  // namespace hvd::gpu
