// What HVD_TRANSPORT=auto takes between hosts: a hardware provider only,
// the one asked for (HVD_RDMA_PROVIDER) where one is named, and none on a
// host without an RDMA device.
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

// HVD_TRANSPORT=auto skips libfabric where HasRdmaDevices is false: that is
// sound only if no hardware provider is then usable.
TEST(HasRdmaDevices, WithoutADeviceNoHardwareProviderIsUsable) {
  if (HasRdmaDevices()) GTEST_SKIP() << "this host has an RDMA device";
  EXPECT_EQ(HardwareProvider("", UsableProviders()), "");
}

}  // namespace
}  // namespace hvd::rdma
