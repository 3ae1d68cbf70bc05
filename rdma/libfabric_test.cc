// libfabric is loaded when a provider is first asked for, not with the
// program; its functions are those of the API the headers describe; and
// loading it leaves the program's signal handlers as they were.
#include "rdma/libfabric.h"

#include <rdma/fi_errno.h>
#include <signal.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "rdma/fabric.h"

namespace hvd::rdma {
namespace {

bool LibfabricIsMapped() {
  std::ifstream maps("/proc/self/maps");
  std::stringstream text;
  text << maps.rdbuf();
  return text.str().find("/libfabric.so.1") != std::string::npos;
}

void Handler(int) {}

void* HandlerOf(int signo) {
  struct sigaction current;
  if (sigaction(signo, nullptr, &current) != 0) return nullptr;
  return reinterpret_cast<void*>(current.sa_handler);
}

// One test, in this order: whether the library is mapped is the process's
// state, and nothing may have asked for a provider before.
TEST(Libfabric, IsLoadedByTheFirstQueryAndOnlyThen) {
  EXPECT_FALSE(LibfabricIsMapped()) << "loaded with the program";
  EXPECT_FALSE(IsHardwareProvider("tcp"));
  HasRdmaDevices();
  EXPECT_FALSE(LibfabricIsMapped()) << "loaded without a provider query";

  // libinfinipath's constructor, run by the load, takes these six; the
  // program's handlers (here two of its own, and whatever a sanitizer's
  // runtime installed) must be what they were.
  signal(SIGINT, Handler);
  signal(SIGTERM, SIG_IGN);
  const int kSignals[] = {SIGINT, SIGILL, SIGABRT, SIGBUS, SIGSEGV, SIGTERM};
  std::vector<void*> before;
  for (int signo : kSignals) before.push_back(HandlerOf(signo));
  const std::vector<std::string> usable = UsableProviders();
  EXPECT_TRUE(LibfabricIsMapped());
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(HandlerOf(kSignals[i]), before[i]) << "signal " << kSignals[i];
  }
  EXPECT_EQ(HandlerOf(SIGINT), reinterpret_cast<void*>(Handler));
  absl::StatusOr<const LibfabricApi*> first = Libfabric();
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<const LibfabricApi*> second = Libfabric();
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*first, *second);

  // The functions work as 1.17's: an fi_info of the current layout, and the
  // tcp provider (in every libfabric build) among the usable ones.
  const LibfabricApi& fi = **first;
  fi_info* info = fi.dupinfo(nullptr);
  ASSERT_NE(info, nullptr);
  EXPECT_NE(info->domain_attr, nullptr);
  EXPECT_NE(info->fabric_attr, nullptr);
  fi.freeinfo(info);
  EXPECT_STREQ(fi.strerror(FI_ENOMEM), "Cannot allocate memory");
  EXPECT_NE(std::find(usable.begin(), usable.end(), "tcp"), usable.end());
}

}  // namespace
}  // namespace hvd::rdma
