#include "rdma/registration_cache.h"

#include <cstdlib>
#include <vector>

#include "gtest/gtest.h"
#include "rdma/fabric.h"

namespace hvd::rdma {
namespace {

class RegistrationCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto fabric = Fabric::Open("tcp", 64);
    ASSERT_TRUE(fabric.ok()) << fabric.status();
    fabric_ = *std::move(fabric);
    cache_ = std::make_unique<RegistrationCache>(
        fabric_->domain(), fabric_->virt_addr(), fabric_->prov_key(), 1 << 20);
  }
  void TearDown() override { cache_.reset(); }

  std::unique_ptr<Fabric> fabric_;
  std::unique_ptr<RegistrationCache> cache_;
};

TEST_F(RegistrationCacheTest, ConcurrentUsersOfOneRangeShareARegistration) {
  std::vector<char> buf(4096);
  auto a = cache_->Acquire(buf.data(), buf.size());
  auto b = cache_->Acquire(buf.data(), buf.size());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->get(), b->get());
  EXPECT_EQ(cache_->stats().registrations, 1u);
  EXPECT_EQ(cache_->stats().hits, 1u);
  EXPECT_EQ(cache_->stats().live, 1u);
}

TEST_F(RegistrationCacheTest, AnotherLengthAtTheSameAddressIsAnotherEntry) {
  std::vector<char> buf(4096);
  auto a = cache_->Acquire(buf.data(), 4096);
  auto b = cache_->Acquire(buf.data(), 100);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->get(), b->get());
  EXPECT_EQ(cache_->stats().registrations, 2u);
}

TEST_F(RegistrationCacheTest, ReleasedRangeIsForgottenSoFreeAndMallocReregister) {
  constexpr size_t kLen = 512 << 10;
  for (int round = 0; round < 50; ++round) {
    void* buf = std::malloc(kLen);
    auto reg = cache_->Acquire(buf, kLen);
    ASSERT_TRUE(reg.ok()) << reg.status();
    reg->reset();
    std::free(buf);
  }
  EXPECT_EQ(cache_->stats().registrations, 50u);
  EXPECT_EQ(cache_->stats().hits, 0u);
  EXPECT_EQ(cache_->stats().live, 0u);
}

TEST_F(RegistrationCacheTest, RangeAboveTheLargestEntryIsInvalidArgument) {
  std::vector<char> buf((1 << 20) + 1);
  auto reg = cache_->Acquire(buf.data(), buf.size());
  EXPECT_EQ(reg.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reg.status().message(),
            "registration of 1048577 bytes: must be 1 to 1048576");
}

TEST(ProvidersTest, TheTcpProviderIsUsableAndNotHardware) {
  auto provider = ResolveProvider("tcp");
  ASSERT_TRUE(provider.ok()) << provider.status();
  EXPECT_EQ(*provider, "tcp");
  EXPECT_FALSE(IsHardwareProvider("tcp"));
  EXPECT_FALSE(IsHardwareProvider("sockets"));
  EXPECT_TRUE(IsHardwareProvider("verbs"));
  EXPECT_TRUE(IsHardwareProvider("verbs;ofi_rxm"));
  EXPECT_TRUE(IsHardwareProvider("efa"));
}

}  // namespace
}  // namespace hvd::rdma
