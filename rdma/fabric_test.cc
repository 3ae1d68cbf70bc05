// What HVD_TRANSPORT=auto takes between hosts: a hardware provider only,
// the one asked for (HVD_RDMA_PROVIDER) where one is named.
#include "rdma/fabric.h"

#include "gtest/gtest.h"

namespace hvd::rdma {
namespace {

TEST(HardwareProvider, SoftwareProvidersAreNeverTaken) {
  EXPECT_EQ(HardwareProvider("", {"tcp", "sockets", "udp", "shm"}), "");
  EXPECT_EQ(HardwareProvider("tcp", {"tcp", "sockets"}), "");
  EXPECT_EQ(HardwareProvider("", {}), "");
}

TEST(HardwareProvider, TheFirstHardwareProviderIsTaken) {
  EXPECT_EQ(HardwareProvider("", {"tcp", "verbs", "efa"}), "verbs");
  EXPECT_EQ(HardwareProvider("", {"efa", "tcp"}), "efa");
}

TEST(HardwareProvider, ANamedProviderIsTakenOnlyIfItIsHardware) {
  EXPECT_EQ(HardwareProvider("efa", {"verbs", "efa"}), "efa");
  EXPECT_EQ(HardwareProvider("psm3", {"verbs", "efa"}), "");
}

}  // namespace
}  // namespace hvd::rdma
