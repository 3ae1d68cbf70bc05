#include "launcher/elastic_driver.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "launcher/host_discovery.h"

namespace hvd {
namespace launcher {
namespace {

using ::testing::HasSubstr;

std::string Script(const std::string& name, const std::string& body) {
  const std::string path = absl::StrCat(getenv("TEST_TMPDIR"), "/", name);
  std::ofstream(path) << "#!/bin/sh\n" << body;
  chmod(path.c_str(), 0755);
  return path;
}

TEST(PlaceRanks, LocalRanksCountWithinAHostAndCrossRanksAcrossHosts) {
  // Ranks reordered across rounds need not be contiguous per host.
  std::vector<WorkerSlot> p = PlaceRanks({"a", "b", "a", "c", "b"});
  ASSERT_EQ(p.size(), 5u);
  EXPECT_EQ(p[0].local_rank, 0);
  EXPECT_EQ(p[2].local_rank, 1);
  EXPECT_EQ(p[2].local_size, 2);
  EXPECT_EQ(p[3].local_size, 1);
  // local rank 0 lives on a, b, c: cross size 3; local rank 1 on a and b.
  EXPECT_EQ(p[0].cross_size, 3);
  EXPECT_EQ(p[3].cross_rank, 2);
  EXPECT_EQ(p[2].cross_size, 2);
  EXPECT_EQ(p[4].cross_rank, 1);
}

TEST(ParseDiscoveryOutput, TakesHostAndHostColonSlotsLines) {
  auto hosts = ParseDiscoveryOutput("h1:4\n\n  h2\n", 2, "d.sh");
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  ASSERT_EQ(hosts->size(), 2u);
  EXPECT_EQ((*hosts)[0].slots, 4);
  EXPECT_EQ((*hosts)[1].name, "h2");
  EXPECT_EQ((*hosts)[1].slots, 2);  // --slots-per-host fills it in
}

TEST(ParseDiscoveryOutput, NamesTheBadLine) {
  EXPECT_THAT(ParseDiscoveryOutput("h1\nh2:x\n", 1, "d.sh").status().message(),
              HasSubstr("printed a bad line 2: 'h2:x'"));
  EXPECT_THAT(ParseDiscoveryOutput("h1\nh1:2\n", 1, "d.sh").status().message(),
              HasSubstr("printed host 'h1' twice"));
}

TEST(RunDiscoveryScript, ReturnsWhatTheScriptPrinted) {
  auto hosts = RunDiscoveryScript(host::RealOs(),
                                  Script("ok.sh", "echo a:2; echo b\n"), {}, 1,
                                  absl::Seconds(10));
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  EXPECT_EQ(hosts->size(), 2u);
}

TEST(RunDiscoveryScript, AFailureQuotesTheScriptsStderr) {
  auto hosts = RunDiscoveryScript(
      host::RealOs(), Script("bad.sh", "echo no inventory >&2; exit 3\n"), {},
      1, absl::Seconds(10));
  EXPECT_THAT(hosts.status().message(), HasSubstr("exited with code 3"));
  EXPECT_THAT(hosts.status().message(), HasSubstr("no inventory"));
}

TEST(RunDiscoveryScript, AHangingScriptIsKilledAtTheTimeout) {
  auto hosts = RunDiscoveryScript(host::RealOs(),
                                  Script("hang.sh", "exec sleep 60\n"), {}, 1,
                                  absl::Milliseconds(300));
  EXPECT_THAT(hosts.status().message(), HasSubstr("did not finish"));
}

TEST(ScriptHostDiscovery, KeepsTheLastAnswerAndReportsLaterFailures) {
  const std::string list = absl::StrCat(getenv("TEST_TMPDIR"), "/hosts");
  std::ofstream(list) << "a:1\n";
  ScriptHostDiscovery::Options o;
  o.script = Script("cat.sh", absl::StrCat("cat ", list, "\n"));
  o.interval = absl::Milliseconds(20);
  ScriptHostDiscovery d(o, host::RealOs(), {{"a", 1}});
  std::ofstream(list) << "a:1\nb:2\n";
  absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (d.Latest().hosts.size() < 2 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(d.Latest().hosts.size(), 2u);
  unlink(list.c_str());  // cat fails now
  while (d.Latest().last_error.empty() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_THAT(d.Latest().last_error, HasSubstr("No such file"));
  EXPECT_EQ(d.Latest().hosts.size(), 2u);
}

}  // namespace
}  // namespace launcher
}  // namespace hvd
