// The CUDA platform. The NCCL unique id and the no-GPU behaviour run
// everywhere; the rest needs a GPU and is SKIPPED (with the reason) without.
#include "core/gpu/cuda_platform.h"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "core/collectives/reduce.h"
#include "core/common/half.h"
#include "core/gpu/cuda_testing.h"
#include "core/gpu/topology.h"
#include "core/rendezvous/store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd::gpu {
namespace {

using ::testing::HasSubstr;

TEST(CudaPlatform, NcclUniqueIdsNeedNoGpu) {
  CudaPlatform platform;
  auto a = platform.NewNcclId();
  auto b = platform.NewNcclId();
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->size(), 128u);
  EXPECT_NE(*a, *b);
}

TEST(CudaPlatform, RealNcclIdsCrossTheStoreIntact) {
  CudaPlatform platform;
  auto store = NewInMemoryStore();
  std::vector<absl::StatusOr<std::string>> got(3, absl::UnknownError("-"));
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      got[i] = ShareFromRoot(
          store.get(), "gpu/set0/nccl/all", i == 0,
          [&] { return platform.NewNcclId(); }, absl::Seconds(20));
    });
  }
  for (auto& t : threads) t.join();
  for (auto& id : got) {
    ASSERT_TRUE(id.ok()) << id.status();
    EXPECT_EQ(*id, *got[0]);
  }
}

TEST(CudaPlatform, WithoutAGpuDevicesFailSayingWhy) {
  if (NoGpuReason().empty()) GTEST_SKIP() << "this machine has a GPU";
  CudaPlatform platform;
  EXPECT_EQ(platform.DeviceCount(), 0);
  auto device = platform.GetDevice(0);
  ASSERT_EQ(device.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(device.status().message(),
              HasSubstr("GPU 0 is not usable: cudaGetDeviceCount"));
}

class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HVD_REQUIRE_GPU();
    auto device = platform_.GetDevice(0);
    ASSERT_TRUE(device.ok()) << device.status();
    device_ = *device;
  }

  // Waits on the host for what is queued on hvd's stream.
  void Finish() {
    auto event = device_->Record();
    ASSERT_TRUE(event.ok());
    ASSERT_TRUE(
        WaitEvent(**event, absl::Now() + absl::Seconds(30), "test", nullptr)
            .ok());
  }

  void* DeviceCopyOf(const std::vector<char>& bytes) {
    void* p = Upload(bytes);
    allocations_.push_back(p);
    return p;
  }

  void TearDown() override {
    for (void* p : allocations_) cudaFree(p);
  }

  CudaPlatform platform_;
  Device* device_ = nullptr;
  std::vector<void*> allocations_;
};

// Random values of `dtype`: any bits for integers, 0/1 for bool, and for
// floating point small halves (random bits would make NaNs, which compare
// unequal).
std::vector<char> Sample(DataType dtype, size_t count) {
  std::mt19937 rng(static_cast<int>(dtype));
  std::vector<char> bytes(count * DataTypeSize(dtype));
  for (auto& b : bytes) b = static_cast<char>(rng());
  for (size_t i = 0; i < count; ++i) {
    const float v = (static_cast<int>(rng() % 2001) - 1000) / 2.0f;
    const double d = v;
    uint16_t h = 0;
    switch (dtype) {
      case DataType::kBool:
        bytes[i] = static_cast<char>(rng() & 1);
        break;
      case DataType::kFloat32:
        std::memcpy(&bytes[i * 4], &v, 4);
        break;
      case DataType::kFloat64:
        std::memcpy(&bytes[i * 8], &d, 8);
        break;
      case DataType::kFloat16:
        h = FloatToHalf(v);
        std::memcpy(&bytes[i * 2], &h, 2);
        break;
      case DataType::kBFloat16:
        h = FloatToBFloat16(v);
        std::memcpy(&bytes[i * 2], &h, 2);
        break;
      default:
        break;
    }
  }
  return bytes;
}

TEST_F(CudaDeviceTest, ScaleMatchesTheCpuBitForBitForEveryType) {
  const size_t count = 4099;
  for (int t = 0; t < kNumDataTypes; ++t) {
    const DataType dtype = static_cast<DataType>(t);
    for (double factor : {2.0, 0.5, -3.0, 1.0 / 3.0, 0.0}) {
      std::vector<char> want = Sample(dtype, count);
      void* data = DeviceCopyOf(want);
      ASSERT_TRUE(device_->Scale(data, count, dtype, factor).ok());
      Finish();
      collectives::Scale(want.data(), count, dtype, factor);
      EXPECT_EQ(Download(data, want.size()), want)
          << DataTypeName(dtype) << " x " << factor;
    }
  }
}

TEST_F(CudaDeviceTest, BatchedCopiesOfManySizesAndAlignments) {
  std::vector<CopyOp> ops;
  std::vector<std::vector<char>> sources;
  std::vector<size_t> sizes;
  // 150 small ones at odd offsets (several launches), two past the batching
  // limit (copy engine), one empty.
  for (int i = 0; i < 150; ++i) sizes.push_back(1 + i * 37);
  sizes.push_back((size_t{1} << 20) + 3);
  sizes.push_back(size_t{3} << 20);
  sizes.push_back(0);
  size_t total = 0;
  for (size_t s : sizes) total += s + 1;
  char* dst = static_cast<char*>(DeviceCopyOf(std::vector<char>(total, 0)));
  std::vector<char> want(total, 0);
  size_t at = 1;  // misaligned from the start
  for (size_t s : sizes) {
    std::vector<char> bytes(s);
    for (size_t i = 0; i < s; ++i) bytes[i] = static_cast<char>(i * 7 + s);
    const void* src = DeviceCopyOf(bytes);
    ops.push_back({dst + at, src, s});
    std::copy(bytes.begin(), bytes.end(), want.begin() + at);
    at += s;
  }
  ASSERT_TRUE(device_->CopyBatch(ops).ok());
  Finish();
  EXPECT_TRUE(Download(dst, total) == want);
}

TEST_F(CudaDeviceTest, TheStreamWaitsForTheProducersWorkAtMarkReady) {
  const size_t bytes = 1 << 20;
  std::vector<char> pattern(bytes);
  for (size_t i = 0; i < bytes; ++i) pattern[i] = static_cast<char>(i * 13);
  char* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), bytes),
            cudaSuccess);
  std::memcpy(pinned, pattern.data(), bytes);
  void* src = DeviceCopyOf(std::vector<char>(bytes, 0));
  void* dst = DeviceCopyOf(std::vector<char>(bytes, 0));
  cudaStream_t producer;
  ASSERT_EQ(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking),
            cudaSuccess);
  // The producer stalls 200 ms, then writes the pattern: without the
  // ready event, hvd's stream would copy the zeros.
  ASSERT_EQ(cudaLaunchHostFunc(
                producer, [](void*) { usleep(200 * 1000); }, nullptr),
            cudaSuccess);
  ASSERT_EQ(
      cudaMemcpyAsync(src, pinned, bytes, cudaMemcpyHostToDevice, producer),
      cudaSuccess);
  auto ready = device_->MarkReady(producer);
  ASSERT_TRUE(ready.ok()) << ready.status();
  ASSERT_TRUE(device_->WaitFor(**ready).ok());
  ASSERT_TRUE(device_->Copy(dst, src, bytes).ok());
  Finish();
  EXPECT_TRUE(Download(dst, bytes) == pattern);
  cudaStreamDestroy(producer);
  cudaFreeHost(pinned);
}

TEST_F(CudaDeviceTest, MarkReadyLeavesTheCallersCurrentDeviceAlone) {
  int count = 0;
  cudaGetDeviceCount(&count);
  const int mine = count > 1 ? 1 : 0;
  ASSERT_EQ(cudaSetDevice(mine), cudaSuccess);
  ASSERT_TRUE(device_->MarkReady(nullptr).ok());
  int current = -1;
  cudaGetDevice(&current);
  EXPECT_EQ(current, mine);
  cudaSetDevice(0);
}

TEST_F(CudaDeviceTest, EventsGoBackToThePoolOnceTheirHoldersAreDone) {
  // Each round holds two at once (a ready event, a completion event): after
  // the first round no more are created.
  const auto& pool = static_cast<CudaDevice*>(device_)->events();
  for (int round = 0; round < 50; ++round) {
    auto ready = device_->MarkReady(nullptr);
    ASSERT_TRUE(ready.ok()) << ready.status();
    ASSERT_TRUE(device_->WaitFor(**ready).ok());
    Finish();
    EXPECT_LE(pool.created(), 2u) << "round " << round;
  }
}

TEST_F(CudaDeviceTest, OutputsAreDeviceMemoryOfThatGpu) {
  auto buffer = device_->Allocate(1000);
  ASSERT_TRUE(buffer.ok());
  EXPECT_EQ((*buffer)->device(), DeviceType::kGpu);
  EXPECT_EQ((*buffer)->device_id(), 0);
  cudaPointerAttributes attributes;
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, (*buffer)->data()),
            cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeDevice);
}

TEST_F(CudaDeviceTest, ScratchAndPinnedMemoryGrowOnDemand) {
  auto small = device_->Scratch(0, 10);
  ASSERT_TRUE(small.ok());
  auto large = device_->Scratch(0, size_t{64} << 20);
  ASSERT_TRUE(large.ok()) << large.status();
  ASSERT_TRUE(device_->Zero(*large, size_t{64} << 20).ok());
  auto host = device_->HostScratch(100, absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(host.ok());
  auto bigger =
      device_->HostScratch(size_t{8} << 20, absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(bigger.ok()) << bigger.status();
  std::memset(*bigger, 1, size_t{8} << 20);
  Finish();
}

}  // namespace
}  // namespace hvd::gpu
