#include "host/cpu_binding.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hvd {
namespace host {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// A sysfs CPU tree of its own under the test's temporary directory.
class FakeSysfs {
 public:
  explicit FakeSysfs(const std::string& name)
      : root_(
            absl::StrCat(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp",
                         "/", name)) {
    mkdir(root_.c_str(), 0755);
  }
  // CPU `cpu` on core `core` of package `package`.
  void Cpu(int cpu, int package, int core) {
    const std::string dir = absl::StrCat(root_, "/cpu", cpu);
    mkdir(dir.c_str(), 0755);
    mkdir((dir + "/topology").c_str(), 0755);
    std::ofstream(dir + "/topology/physical_package_id") << package << "\n";
    std::ofstream(dir + "/topology/core_id") << core << "\n";
  }
  const std::string& root() const { return root_; }

 private:
  const std::string root_;
};

std::vector<std::vector<int>> Cpus(const std::vector<CpuCore>& cores) {
  std::vector<std::vector<int>> out;
  for (const CpuCore& c : cores) out.push_back(c.cpus);
  return out;
}

TEST(CoresOf, HardwareThreadsOfOneCoreStayTogetherInPackageOrder) {
  // Two packages of two cores, two threads each, numbered as Linux often
  // does: the second thread of every core after all the first threads.
  FakeSysfs sysfs("two_packages");
  for (int cpu = 0; cpu < 8; ++cpu) {
    sysfs.Cpu(cpu, /*package=*/(cpu % 4) / 2, /*core=*/cpu % 2);
  }
  EXPECT_THAT(Cpus(CoresOf({0, 1, 2, 3, 4, 5, 6, 7}, sysfs.root())),
              ElementsAre(ElementsAre(0, 4), ElementsAre(1, 5),
                          ElementsAre(2, 6), ElementsAre(3, 7)));
  // Only the CPUs allowed count.
  EXPECT_THAT(Cpus(CoresOf({1, 2, 5}, sysfs.root())),
              ElementsAre(ElementsAre(1, 5), ElementsAre(2)));
}

TEST(CoresOf, ACpuWithoutTopologyIsACoreOfItsOwn) {
  FakeSysfs sysfs("no_topology");
  EXPECT_THAT(Cpus(CoresOf({0, 1, 2}, sysfs.root())),
              ElementsAre(ElementsAre(0), ElementsAre(1), ElementsAre(2)));
}

std::vector<CpuCore> OneThreadCores(int n) {
  std::vector<CpuCore> cores;
  for (int i = 0; i < n; ++i) cores.push_back({0, i, {i}});
  return cores;
}

TEST(CpuShare, EqualContiguousSharesOfWholeCores) {
  const std::vector<CpuCore> two_threads = {
      {0, 0, {0, 4}}, {0, 1, {1, 5}}, {1, 0, {2, 6}}, {1, 1, {3, 7}}};
  EXPECT_THAT(CpuShare(two_threads, 0, 2), ElementsAre(0, 1, 4, 5));
  EXPECT_THAT(CpuShare(two_threads, 1, 2), ElementsAre(2, 3, 6, 7));
  EXPECT_THAT(CpuShare(two_threads, 3, 4), ElementsAre(3, 7));
  EXPECT_THAT(CpuShare(OneThreadCores(2), 1, 1), IsEmpty());  // rank >= size
  EXPECT_THAT(CpuShare(OneThreadCores(2), 0, 1), ElementsAre(0, 1));
}

TEST(CpuShare, TheFirstWorkersTakeTheCoresThatDoNotDivide) {
  // 5 cores, 3 workers: 2, 2, 1.
  EXPECT_THAT(CpuShare(OneThreadCores(5), 0, 3), ElementsAre(0, 1));
  EXPECT_THAT(CpuShare(OneThreadCores(5), 1, 3), ElementsAre(2, 3));
  EXPECT_THAT(CpuShare(OneThreadCores(5), 2, 3), ElementsAre(4));
}

TEST(CpuShare, FewerCoresThanWorkersBindsNobody) {
  EXPECT_THAT(CpuShare(OneThreadCores(2), 0, 4), IsEmpty());
  EXPECT_THAT(CpuShare({}, 0, 1), IsEmpty());
}

TEST(CpuListString, RangesAndSingles) {
  EXPECT_EQ(CpuListString({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(CpuListString({5}), "5");
  EXPECT_EQ(CpuListString({}), "");
}

TEST(AllowedCpus, AreThisProcesssAffinity) {
  std::ifstream status("/proc/self/status");
  std::string line, listed;
  while (std::getline(status, line)) {
    if (line.rfind("Cpus_allowed_list:", 0) == 0) {
      listed = line.substr(line.find_first_not_of(" \t", 18));
    }
  }
  EXPECT_EQ(CpuListString(AllowedCpus()), listed);
}

}  // namespace
}  // namespace host
}  // namespace hvd
