// hvdrun --bind-to end to end on this machine: the real hvdrun and hvd-agent
// start workers (sh) that report the CPUs they may run on.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "host/cpu_binding.h"
#include "launcher/test_command.h"

namespace hvd {
namespace launcher {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// Runs `hvdrun args... sh -c <print the CPUs>`; each rank's CPU list ("0-1")
// by rank, and the whole result in *result.
std::map<int, std::string> CpusByRank(std::vector<std::string> args,
                                      CommandResult* result) {
  std::vector<std::string> argv = {Runfile("launcher/hvdrun"), "--agent-path",
                                   Runfile("agent/hvd-agent")};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(),
              {"sh", "-c", "grep Cpus_allowed_list /proc/self/status"});
  *result = RunCommand(argv, {"PATH=/usr/bin:/bin"}, absl::Seconds(30),
                       getenv("TEST_TMPDIR"));
  std::map<int, std::string> cpus;
  for (absl::string_view line : absl::StrSplit(result->out, '\n')) {
    // "[1]<stdout>:Cpus_allowed_list:\t1"
    std::vector<std::string> parts = absl::StrSplit(line, '\t');
    int rank;
    if (parts.size() == 2 && line.size() > 1 && line[0] == '[' &&
        absl::SimpleAtoi(line.substr(1, line.find(']') - 1), &rank)) {
      cpus[rank] = parts[1];
    }
  }
  return cpus;
}

// The CPUs of a list such as "0-2,5".
std::set<int> Parse(const std::string& list) {
  std::set<int> out;
  for (absl::string_view part : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    std::vector<std::string> ends = absl::StrSplit(part, '-');
    int lo = 0, hi = 0;
    if (!absl::SimpleAtoi(ends[0], &lo)) continue;
    hi = lo;
    if (ends.size() == 2 && !absl::SimpleAtoi(ends[1], &hi)) continue;
    for (int c = lo; c <= hi; ++c) out.insert(c);
  }
  return out;
}

TEST(HvdrunBindTo, EachWorkerGetsItsOwnShareOfTheCoresByDefault) {
  const std::vector<host::CpuCore> cores =
      host::CoresOf(host::AllowedCpus(), host::kCpuSysfs);
  if (cores.size() < 2) GTEST_SKIP() << "needs two cores";
  CommandResult r;
  std::map<int, std::string> cpus = CpusByRank({"-np", "2", "--verbose"}, &r);
  ASSERT_TRUE(r.status.ok()) << r.err;
  ASSERT_EQ(cpus.size(), 2u) << r.out;
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(cpus[rank], host::CpuListString(host::CpuShare(cores, rank, 2)));
    EXPECT_THAT(r.err, HasSubstr(absl::StrCat("hvdrun: rank ", rank,
                                              " on localhost runs on CPUs ",
                                              cpus[rank])));
  }
  std::set<int> first = Parse(cpus[0]), second = Parse(cpus[1]);
  std::vector<int> shared;
  std::set_intersection(first.begin(), first.end(), second.begin(),
                        second.end(), std::back_inserter(shared));
  EXPECT_THAT(shared, IsEmpty());
}

TEST(HvdrunBindTo, NoneLeavesEveryWorkerOnEveryCpu) {
  const std::string all = host::CpuListString(host::AllowedCpus());
  CommandResult r;
  std::map<int, std::string> cpus =
      CpusByRank({"-np", "2", "--bind-to", "none", "--verbose"}, &r);
  ASSERT_TRUE(r.status.ok()) << r.err;
  EXPECT_EQ(cpus[0], all);
  EXPECT_EQ(cpus[1], all);
  EXPECT_THAT(r.err, Not(HasSubstr("runs on CPUs")));
}

TEST(HvdrunBindTo, WorkersThatOutnumberTheCoresAreNotBound) {
  const std::vector<int> allowed = host::AllowedCpus();
  const int np = static_cast<int>(allowed.size()) + 1;
  CommandResult r;
  std::map<int, std::string> cpus = CpusByRank({"-np", std::to_string(np)}, &r);
  ASSERT_TRUE(r.status.ok()) << r.err;
  ASSERT_EQ(cpus.size(), static_cast<size_t>(np));
  for (const auto& [rank, list] : cpus) {
    EXPECT_EQ(list, host::CpuListString(allowed)) << "rank " << rank;
  }
}

TEST(HvdrunBindTo, AnythingElseIsAUsageError) {
  CommandResult r;
  CpusByRank({"-np", "2", "--bind-to", "socket"}, &r);
  EXPECT_EQ(r.status.ShellCode(), 2);
  EXPECT_THAT(r.err, HasSubstr("invalid value 'socket' for --bind-to: "
                               "expected cores or none"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

}  // namespace
}  // namespace launcher
}  // namespace hvd
